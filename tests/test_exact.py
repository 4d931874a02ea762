"""Exact counters: offline tiktoken encodings and Anthropic's count_tokens via the real SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fakeapi import serve
from unbounded import ConfigError
from unbounded.tokens import (
    AnthropicCounter,
    RoughCounter,
    TiktokenCounter,
    counter_for,
    get_encoding,
)


def test_o200k_and_cl100k_load_offline_and_encode() -> None:
    o200k = get_encoding("o200k_base")
    assert o200k.encode_ordinary("hello world") == [24912, 2375]
    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert get_encoding("o200k_base") is o200k  # cached


def test_unknown_encoding() -> None:
    with pytest.raises(ConfigError, match="unknown encoding"):
        get_encoding("p50k_base")


def test_tiktoken_counter_counts_a_request() -> None:
    counter = TiktokenCounter("o200k_base")
    messages = [
        {"role": "user", "content": "hello world"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": "/a"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [
                        {"type": "text", "text": "hello world"},
                        {"type": "image", "source": {}},
                    ],
                }
            ],
        },
    ]
    total = counter.count_messages(messages, system="hello world")
    read_tokens = counter.count_text("Read") + counter.count_text('{"file_path":"/a"}')
    assert total == 2 + 3 * 3 + 2 + read_tokens + 2 + 2_000


def test_rough_counter_and_lookup() -> None:
    assert RoughCounter().count_text("x" * 40) == 10
    assert isinstance(counter_for("length/4"), RoughCounter)
    assert counter_for("cl100k_base").name == "cl100k_base"


def _count_tokens(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    text = repr(body["messages"]) + repr(body.get("system", "")) + repr(body.get("tools", ""))
    return 200, {"input_tokens": len(text) // 3}


def test_anthropic_counter_through_the_real_sdk() -> None:
    anthropic = pytest.importorskip("anthropic")
    with serve({"/v1/messages/count_tokens": _count_tokens}) as api:
        client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
        counter = AnthropicCounter(client, "claude-sonnet-4-5")
        messages = [{"role": "user", "content": "How big is this?"}]
        tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
        assert counter.count_messages(messages, system="be brief", tools=tools) > 0
        path, headers, body = api.requests[-1]
        assert path == "/v1/messages/count_tokens"
        assert body == {
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "system": "be brief",
            "tools": tools,
        }
        assert "test-key" in (headers.get("x-api-key") or headers.get("authorization", ""))


def test_anthropic_counter_async() -> None:
    anthropic = pytest.importorskip("anthropic")
    with serve({"/v1/messages/count_tokens": _count_tokens}) as api:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=api.base_url, max_retries=0)
        counter = AnthropicCounter(client, "claude-haiku-4-5")
        result = asyncio.run(counter.acount_messages([{"role": "user", "content": "hi"}]))
        assert (
            result
            == _count_tokens({"messages": [{"role": "user", "content": "hi"}]}, {})[1][
                "input_tokens"
            ]
        )


def test_anthropic_counter_rejects_wrong_client() -> None:
    with pytest.raises(ConfigError, match="anthropic client"):
        AnthropicCounter(object(), "claude-sonnet-4-5")
