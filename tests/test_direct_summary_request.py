"""The direct summary request (the compact system prompt, after the cache-sharing one failed)
must be one the API accepts: a request holding tool_use / tool_result blocks defines tools."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.conversation import CacheSafeParams, _fallback_request
from unbounded.policy import Policy

TOOLS = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}]


def _messages(with_tools: bool) -> list[Any]:
    if not with_tools:
        return [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "user", "content": "Summarize."},
        ]
    return [
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {"role": "user", "content": "Summarize."},
    ]


def test_a_direct_request_over_tool_blocks_declares_the_tools_and_calls_none() -> None:
    params = CacheSafeParams(model="claude-sonnet-4-6", tools=TOOLS)
    request = _fallback_request(_messages(True), params, Policy())
    assert request["tools"] == TOOLS and request["tools"] is not params.tools
    assert request["tool_choice"] == {"type": "none"}


def test_a_direct_request_without_tool_blocks_sends_no_tools() -> None:
    params = CacheSafeParams(model="claude-sonnet-4-6", tools=TOOLS)
    request = _fallback_request(_messages(False), params, Policy())
    assert "tools" not in request and "tool_choice" not in request
