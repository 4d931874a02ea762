"""A streamed reply is read to its last event, not to the connection's end: a server that
keeps the connection open after `data: [DONE]` (OpenAI-compatible servers send it last), or
after Anthropic's `message_stop`, does not hold the call. The SDKs are the real ones; the
local server (tests/apiserver.py) holds each finished stream open until the test lets it go."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from apiserver import ApiServer, api_server_fixture, message  # noqa: F401  (registers the api_server fixture)

REQUEST: Any = {"model": "gpt-5.4", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def held(api_server: ApiServer) -> Iterator[ApiServer]:
    """The server, holding every finished stream open until the test has its reply."""
    api_server.hold_streams = threading.Event()
    yield api_server
    api_server.hold_streams.set()


def _call(provider: Any, request: Any, sync: bool) -> Any:
    return provider.create_sync(request, stream=True) if sync else asyncio.run(provider.create(request, stream=True))


@pytest.mark.parametrize("done", [True, False], ids=["done", "completed-only"])
@pytest.mark.parametrize("sync", [False, True])
def test_a_responses_stream_is_read_to_its_end_while_the_server_keeps_the_connection(
    held: ApiServer, sync: bool, done: bool
) -> None:
    """OpenAI's Responses stream ends at `response.completed` (no `[DONE]`); servers that
    add `[DONE]` end there too."""
    pytest.importorskip("openai")
    from unbounded.providers.openai import OpenAIProvider

    held.responses_done = done
    held.responses.push(message("whole"))
    reply = _call(OpenAIProvider(held.openai_client(sync=sync), api="responses"), REQUEST, sync)
    assert reply.text == "whole"
    assert held.requests[0].reply.endswith(b"data: [DONE]\n\n") is done
    assert held.held_to_limit == []  # the call returned while the stream was still held


@pytest.mark.parametrize("sync", [False, True])
def test_an_anthropic_stream_is_read_to_message_stop_while_the_server_keeps_the_connection(held: ApiServer, sync: bool) -> None:
    pytest.importorskip("anthropic")
    from unbounded.providers.anthropic import AnthropicProvider

    held.anthropic.push(message("whole"))
    request = {**REQUEST, "model": "claude-sonnet-4-6"}
    reply = _call(AnthropicProvider(held.anthropic_client(sync=sync)), request, sync)
    assert reply.text == "whole" and reply.stop_reason == "end_turn"
    assert held.held_to_limit == []


@pytest.mark.parametrize("sync", [False, True])
def test_a_chat_completions_stream_is_read_to_done_while_the_server_keeps_the_connection(held: ApiServer, sync: bool) -> None:
    pytest.importorskip("openai")
    from unbounded.providers.openai import OpenAIProvider

    held.openai.push(message("whole"))
    reply = _call(OpenAIProvider(held.openai_client(sync=sync)), REQUEST, sync)
    assert reply.text == "whole"
    assert held.requests[0].reply.endswith(b"data: [DONE]\n\n")
    assert held.held_to_limit == []
