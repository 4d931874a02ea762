"""The Chat Completions wire's rules of session 16, each held by a test that fails without it:
what inbound refuses whole, where a system message inside the conversation goes, which opaque
blocks are sent as messages, and which reply tokens count as context."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.errors import ConfigError
from unbounded.model.content import usage_context_total
from unbounded.wire.openai_chat import (
    OpenAIChat,
    chat_item_block,
    convert_messages,
    inbound_messages,
)


@pytest.mark.parametrize("given", [None, 3, "hi", b"hi", {"role": "user", "content": "hi"}])
def test_messages_that_are_not_a_list_of_messages_are_refused_as_a_whole(given: Any) -> None:
    with pytest.raises(ConfigError, match="messages is a list of Chat Completions messages"):
        inbound_messages(given)


@pytest.mark.parametrize("content", ["hi", [{"type": "text", "text": "hi"}]])
def test_a_system_message_after_a_user_message_joins_it_in_place(content: Any) -> None:
    reminder = {"role": "system", "content": "stay brief"}
    read = inbound_messages([{"role": "user", "content": content}, reminder])
    assert read.system == ""
    assert read.messages == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, chat_item_block(reminder)]}
    ]


def test_only_a_chat_item_is_sent_as_a_message_of_its_own() -> None:
    plain: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    responses_item = {"type": "opaque_item", "format": "openai-responses", "item": {"id": "rs_1"}}
    untyped_item = {"type": "other", "format": "openai-chat", "item": {"role": "system"}}
    with_items = {
        **plain,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, responses_item, untyped_item],
            }
        ],
    }
    assert convert_messages(with_items) == convert_messages(plain)  # type: ignore[arg-type]


@pytest.mark.parametrize("reasoning", [0, 1, 7])
def test_a_chat_reply_s_reasoning_tokens_are_kept_from_one(reasoning: int) -> None:
    openai = pytest.importorskip("openai")
    completion = openai.types.chat.ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {
            "prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    })  # fmt: skip
    usage = OpenAIChat().from_response(completion).usage
    assert usage.get("reasoning_output_tokens") == (reasoning or None)
    assert usage_context_total(usage) == 10 + 8 - reasoning


def test_the_context_total_adds_no_output_when_there_is_none_or_all_is_reasoning() -> None:
    assert usage_context_total({"input_tokens": 5}) == 5
    assert (
        usage_context_total({"input_tokens": 5, "output_tokens": 3, "reasoning_output_tokens": 3})
        == 5
    )
    # a count of more reasoning than output (a proxy's) never takes from the input
    assert (
        usage_context_total({"input_tokens": 5, "output_tokens": 1, "reasoning_output_tokens": 3})
        == 5
    )
    # every prompt token read from the cache: no uncached input is counted as none
    assert (
        usage_context_total({"input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 2})
        == 102
    )
    assert usage_context_total({"cache_read_input_tokens": 100}) == 100
