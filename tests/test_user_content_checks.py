"""A user message that is neither text nor typed blocks is refused where it is given."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from unbounded.errors import ConfigError
from unbounded.session import Session, SessionConfig

CONFIG = SessionConfig(model="claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "got NoneType"),
        (5, "got int"),
        ({"type": "text", "text": "one block, not a list"}, "got dict"),
        (b"bytes", "got bytes"),
        ([None], "block 0 is NoneType"),
        ([{"type": "text", "text": "fine"}, "a string"], "block 1 is str"),
        ([{"text": "no type"}], "block 0 is a dict without a string 'type'"),
        ([{"type": 3}], "block 0 is a dict without a string 'type'"),
    ],
)
def test_add_user_refuses_what_is_not_text_or_typed_blocks(content: object, message: str) -> None:
    session = Session(CONFIG)
    with pytest.raises(ConfigError, match=message):
        session.add_user(content)  # type: ignore[arg-type]
    assert session.entries == []


def test_text_and_typed_blocks_in_any_sequence_are_taken() -> None:
    session = Session(CONFIG)
    session.add_user("first")
    session.add_user(({"type": "text", "text": "second"},))
    request = asyncio.run(session.prepare())
    texts = [
        block["text"] if isinstance(block, dict) else block
        for message in request["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [message["content"]])
    ]
    assert "first" in texts and "second" in texts


def _sent_texts(session: Session) -> list[str]:
    request = asyncio.run(session.prepare())
    return [
        block["text"]
        for message in request["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "text"
    ]


def test_blocks_in_any_iterable_are_read_once_and_taken() -> None:
    session = Session(CONFIG)
    reads = []

    def blocks() -> Iterator[dict[str, str]]:
        reads.append(1)
        yield {"type": "text", "text": "generator"}

    session.add_user(blocks())
    session.add_user(map(dict, [{"type": "text", "text": "map"}]))
    session.add_user({"one": {"type": "text", "text": "dict values"}}.values())
    session.add_user(iter([{"type": "text", "text": "iterator"}]))
    assert reads == [1]
    assert _sent_texts(session) == ["generator", "map", "dict values", "iterator"]


def test_sdk_blocks_are_taken_as_plain_dicts() -> None:
    types = pytest.importorskip("anthropic.types")
    session = Session(CONFIG)
    session.add_user([types.TextBlock(type="text", text="from the SDK", citations=None)])
    assert session.entries[-1].content == [{"type": "text", "text": "from the SDK"}]
    assert _sent_texts(session) == ["from the SDK"]


def test_one_sdk_block_not_in_a_list_is_refused() -> None:
    types = pytest.importorskip("anthropic.types")
    session = Session(CONFIG)
    with pytest.raises(ConfigError, match="got TextBlock"):
        session.add_user(types.TextBlock(type="text", text="alone"))
    assert session.entries == []


def test_a_generator_with_a_bad_block_adds_nothing() -> None:
    session = Session(CONFIG)
    given = (block for block in [{"type": "text", "text": "fine"}, "a string"])
    with pytest.raises(ConfigError, match="block 1 is str"):
        session.add_user(given)
    assert session.entries == []


def test_sdk_blocks_inside_a_tool_result_are_taken_as_plain_dicts() -> None:
    types = pytest.importorskip("anthropic.types")
    session = Session(CONFIG)
    session.add_user("run it")
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    session.record({"content": [call], "usage": {"input_tokens": 10}})
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [types.TextBlock(type="text", text="a.py", citations=None)],
    }
    session.add_user([result])
    [block] = session.entries[-1].content
    assert block["content"] == [{"type": "text", "text": "a.py"}]
    request = asyncio.run(session.prepare())
    [sent] = request["messages"][-1]["content"]
    assert sent["content"] == [{"type": "text", "text": "a.py"}]
    assert result["content"][0].text == "a.py"  # the caller's block is left as it was
