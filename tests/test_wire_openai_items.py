"""Responses API input items <-> the project's messages: both directions, opaque items kept."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseReasoningItem

from unbounded.errors import ConfigError
from unbounded.model.normalize import validate_request
from unbounded.wire.openai_items import (
    is_opaque_block,
    items_to_messages,
    messages_to_items,
    opaque_block,
    plain_item,
)

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "look at the file"}],
    "encrypted_content": "gAAAA-secret==",
}
COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "ZZZ-compacted"}


def agent_items() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "You are terse."},
        {"role": "user", "content": "read a.py"},
        REASONING,
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"path": "a.py"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "print(1)"},
        {"role": "assistant", "content": "It prints 1."},
        {"role": "user", "content": "thanks"},
    ]


def test_a_tool_using_conversation_becomes_alternating_messages_with_the_system_apart() -> None:
    inbound = items_to_messages(agent_items())
    assert inbound.system == "You are terse."
    assert inbound.messages == [
        {"role": "user", "content": [{"type": "text", "text": "read a.py"}]},
        {
            "role": "assistant",
            "content": [
                opaque_block(REASONING),
                {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.py"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "print(1)"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It prints 1."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]
    validate_request(inbound.messages)


def test_items_go_back_as_they_came_and_opaque_items_byte_for_byte() -> None:
    items = agent_items()
    back = messages_to_items(items_to_messages(items).messages)
    assert back == [{"role": "user", "content": [{"type": "input_text", "text": "read a.py"}]}, *items[2:6],
                    {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]
    assert json.dumps(back[1]) == json.dumps(REASONING)


def test_a_compaction_item_between_user_messages_sits_on_the_assistant_side() -> None:
    inbound = items_to_messages([{"role": "user", "content": "old task"}, COMPACTION, {"role": "user", "content": "go on"}])
    assert [m["role"] for m in inbound.messages] == ["user", "assistant", "user"]
    block = inbound.messages[1]["content"][0]
    assert isinstance(block, dict) and is_opaque_block(block) and block["item"] == COMPACTION
    assert messages_to_items(inbound.messages)[1] == COMPACTION


def test_an_unknown_output_item_sits_on_the_user_side() -> None:
    shell = {"type": "shell_call_output", "call_id": "s1", "output": []}
    inbound = items_to_messages([{"role": "user", "content": "hi"}, shell])
    assert inbound.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}, opaque_block(shell)]}]


def test_a_tool_output_after_user_text_is_put_before_it() -> None:
    inbound = items_to_messages(
        [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"role": "user", "content": "also this"},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {"type": "function_call_output", "call_id": "c2", "output": "y"},
        ]
    )
    kinds = [b["type"] for b in inbound.messages[2]["content"]]  # type: ignore[index]
    assert kinds == ["tool_result", "tool_result", "text"]
    assert [b.get("tool_use_id") for b in inbound.messages[2]["content"]][:2] == ["c1", "c2"]  # type: ignore[union-attr]


def test_images_and_files_convert_both_ways() -> None:
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA", "detail": "auto"},
                {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,BBBB"},
            ],
        }
    ]
    blocks = items_to_messages(items).messages[0]["content"]
    assert blocks[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}}
    assert blocks[2]["title"] == "a.pdf"  # type: ignore[index]
    assert messages_to_items(items_to_messages(items).messages) == items


def test_a_tool_output_with_an_image_keeps_its_parts() -> None:
    parts = [{"type": "input_text", "text": "shot"}, {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"}]
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "snap", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": parts},
    ]
    assert messages_to_items(items_to_messages(items).messages)[2]["output"] == parts


def test_a_string_input_is_one_user_message() -> None:
    assert items_to_messages("hello").messages == [{"role": "user", "content": "hello"}]


def test_sdk_items_keep_only_the_fields_the_api_sent() -> None:
    item = ResponseReasoningItem.model_validate(REASONING)
    assert plain_item(item) == REASONING
    assert items_to_messages([{"role": "user", "content": "x"}, item]).messages[1]["content"][0] == opaque_block(REASONING)


def test_thinking_blocks_are_not_sent_to_the_responses_api() -> None:
    items = messages_to_items(
        [{"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "ok"}]}]
    )
    assert items == [{"role": "assistant", "content": "ok"}]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}], "input item 1: role 'robot'"),
        ([{"type": "function_call", "name": "x", "arguments": "{}"}], "input item 0: a function_call item needs its call_id"),
        ([{"role": "user", "content": [{"type": "input_audio"}]}], "input item 0: content part 'input_audio'"),
        ([{"content": "no role"}], "input item 0: neither a message"),
        ([42], "a dict or an SDK item"),
    ],
)
def test_an_unreadable_item_is_refused_naming_its_index(items: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        items_to_messages(items)


# -- property: canonical items survive the round trip -------------------------------------------

words = st.text(alphabet="abcdefgh xyz.", min_size=1, max_size=12).filter(lambda t: t.strip() == t)
call_ids = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8).map(lambda s: f"call_{s}")
opaque_items = st.fixed_dictionaries(
    {"type": st.sampled_from(["reasoning", "compaction"]), "id": st.text(alphabet="xyz0123", min_size=1, max_size=6),
     "encrypted_content": st.text(min_size=1, max_size=20)}
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Canonical item lists: user text, then turns of (opaque items, calls and their outputs
    or a reply)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text", "text": draw(words)}]}]
    for turn in range(draw(st.integers(0, 5))):
        items.extend(draw(st.lists(opaque_items, max_size=2)))
        calls = draw(st.lists(call_ids, max_size=3, unique=True))
        if calls:
            for call in calls:
                args = json.dumps(draw(st.dictionaries(st.sampled_from(["p", "n"]), words, max_size=2)))
                items.append({"type": "function_call", "call_id": f"{call}_{turn}", "name": "tool", "arguments": args})
            for call in calls:
                items.append({"type": "function_call_output", "call_id": f"{call}_{turn}", "output": draw(words)})
        else:
            items.append({"role": "assistant", "content": draw(words)})
            items.append({"role": "user", "content": [{"type": "input_text", "text": draw(words)}]})
    return items


@settings(max_examples=80, deadline=None)
@given(conversations())
def test_canonical_items_round_trip_exactly_into_a_valid_conversation(items: list[dict[str, Any]]) -> None:
    messages = items_to_messages(items).messages
    validate_request(messages)
    assert messages_to_items(messages) == items


def test_a_system_message_inside_the_conversation_goes_back_where_it_was() -> None:
    reminder = {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]}
    items = [*agent_items()[:-1], reminder, {"role": "user", "content": "thanks"}]
    inbound = items_to_messages(items)
    assert inbound.system == "You are terse."
    assert inbound.messages[-1] == {"role": "user", "content": [opaque_block(reminder), {"type": "text", "text": "thanks"}]}
    validate_request(inbound.messages)
    sent = messages_to_items(inbound.messages)
    assert sent[-2:] == [reminder, {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]
