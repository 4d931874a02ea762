"""The compaction fork shares the main request's prompt cache: same parameters, same prefix.

Driven through the real `anthropic` SDK against the scripted local server: the main request
is answered "prompt too long", the session compacts reactively with the cache-sharing summary
request, then retries. The summary request must repeat the main request's model, system,
tools and thinking (its max_tokens is the compaction budget: not part of the cache key), and
its messages must start with the main request's messages
byte for byte — cache marker included, since the fork's breakpoint goes on its second-to-last
message, which is the main request's last.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    prompt_too_long,
    text_block,
    tool_use_block,
)
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

pytest.importorskip("anthropic")

SUMMARY = nine_section_summary("ship the parser")


def _segment(body: bytes, key: str) -> bytes:
    """The raw bytes of one top-level JSON value of a request body, as the SDK serialized it."""
    decoder = json.JSONDecoder()
    text = body.decode()
    start = text.index(f'"{key}"')
    value_start = text.index(":", start) + 1
    while text[value_start] in " \n":
        value_start += 1
    _, end = decoder.raw_decode(text, value_start)
    return text[value_start:end].encode()


def test_summary_request_prefix_is_byte_identical(api_server: ApiServer, tmp_path: Path) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_server.anthropic_client())
    config = SessionConfig(
        model="claude-sonnet-5-5",
        system="You are a careful coding agent.",
        tools=[
            {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}},
            {"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
        ],
        thinking={"type": "enabled", "budget_tokens": 2_000},
        max_tokens=8_000,
    )
    session = Session.open(tmp_path / "s", config, policy=Policy(), summarizer=provider)
    session.add_user("Write a parser for the config format.")
    api_server.anthropic.push(message(tool_use_block("Read", {"file_path": "/src/config.py"}, id="toolu_a1"), id="msg_1"))
    asyncio.run(session.call(provider))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "toolu_a1", "content": "def load(): ..."}])

    api_server.anthropic.push(
        prompt_too_long(actual=210_000, limit=200_000),
        message(text_block(SUMMARY), id="msg_summary"),
        message(text_block("Continuing with the parser."), id="msg_2"),
    )
    response = asyncio.run(session.call(provider))
    assert response.text == "Continuing with the parser."

    first, main, fork, retry = api_server.requests
    assert fork.stream and "<summary>" in fork.json["messages"][-1]["content"]
    # The parameters that key the cache are repeated exactly. max_tokens is not among them:
    # the summary gets the compaction budget (20,000, plus the thinking budget), not 8,000.
    for key in ("model", "system", "tools", "thinking"):
        assert _segment(fork.body, key) == _segment(main.body, key), key
    assert main.json["max_tokens"] == 8_000 and fork.json["max_tokens"] == 22_000
    # The fork's messages start with the main request's messages, byte for byte.
    main_messages = _segment(main.body, "messages")
    fork_messages = _segment(fork.body, "messages")
    assert fork_messages.startswith(main_messages[:-1])
    assert len(fork.json["messages"]) == len(main.json["messages"]) + 1
    # Its only cache marker on messages is the main request's last message; it writes nothing new.
    marked = [i for i, m in enumerate(fork.json["messages"]) if isinstance(m["content"], list)
              and any("cache_control" in b for b in m["content"])]
    assert marked == [len(main.json["messages"]) - 1]
    # After the compaction, the retried main request starts from the summary.
    assert "ship the parser" in json.dumps(retry.json["messages"][0])
    assert session.status().compactions == 1
    # The first main request's marker moved forward as the conversation grew (one per request).
    assert "cache_control" in json.dumps(first.json["messages"][-1])
