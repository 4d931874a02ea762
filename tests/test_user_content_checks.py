"""A user message that is neither text nor typed blocks is refused where it is given."""

from __future__ import annotations

import asyncio

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
