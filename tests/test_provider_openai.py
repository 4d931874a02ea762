"""OpenAIProvider through the real `openai` SDK against the scripted local server."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    StreamGate,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    auth_error,
    bad_request,
    beats_opening,
    cut_stream,
    empty,
    malformed,
    message,
    overloaded,
    prompt_too_long,
    rate_limited,
    server_error,
    stream_error,
    thinking_block,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest
from unbounded.providers import (
    AuthenticationError,
    BadRequestError,
    OverloadedError,
    PromptTooLongError,
    Provider,
    ProviderError,
    RateLimitedError,
    RetryableError,
    ServerError,
)
from unbounded.providers.openai import LOCAL_SERVER_API_KEY, OpenAIProvider
from unbounded.wire.openai_chat import OpenAIChat, convert_tool_choice

openai = pytest.importorskip("openai")

PNG = "iVBORw0KGgo="
SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}},
    "required": ["file_path"],
}


def _request(**extra: Any) -> ProviderRequest:
    request: dict[str, Any] = {
        "model": "gpt-test",
        "max_tokens": 2048,
        "system": [
            {"type": "text", "text": "You are terse."},
            {"type": "text", "text": "Ünïcode ✓", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [
            {
                "name": "Read",
                "description": "Read a file",
                "input_schema": SCHEMA,
                "cache_control": {"type": "ephemeral"},
            },
            {"name": "Bare", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        ],
        "messages": [
            {"role": "user", "content": "read /a.py"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read it", "signature": "sig"},
                    {"type": "text", "text": "Reading both."},
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "Read",
                        "input": {"file_path": "/a.py"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "Read",
                        "input": {"file_path": "/ü.png"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here you go:"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": "print('hi')",
                        "cache_control": {"type": "ephemeral"},
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": [
                            {"type": "text", "text": "an image"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG,
                                },
                            },
                        ],
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/x.png"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_3", "name": "Bare", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_3", "is_error": True}],
            },
        ],
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "metadata": {"user_id": "u-1"},
        "temperature": 0.2,
        "tool_choice": {"type": "tool", "name": "Read"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "betas": ["context-management-2025-06-27"],
        "cache_edits": [{"type": "delete", "cache_reference": "call_1"}],
    }
    request.update(extra)
    return request  # type: ignore[return-value]


EXPECTED_MESSAGES = [
    {"role": "system", "content": "You are terse.\n\nÜnïcode ✓"},
    {"role": "user", "content": "read /a.py"},
    {
        "role": "assistant",
        "content": "Reading both.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "Read", "arguments": '{"file_path": "/a.py"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "Read", "arguments": '{"file_path": "/ü.png"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
    {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": "an image\n[1 attachment in the next user message]",
    },
    {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}],
    },
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Here you go:"},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "Bare", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_3", "content": ""},
]
EXPECTED_TOOLS = [
    {
        "type": "function",
        "function": {"name": "Read", "description": "Read a file", "parameters": SCHEMA},
    },
    {"type": "function", "function": {"name": "Bare", "parameters": {"type": "object"}}},
]


def _provider(api: ApiServer, **options: Any) -> OpenAIProvider:
    client = api.openai_client()
    return OpenAIProvider(client, **options)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# --------------------------------------------------------------------------- the wire


def test_request_is_converted_to_chat_completions(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"))
    _run(_provider(api_server).create(_request()))
    sent = api_server.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.json == {
        "model": "gpt-test",
        "messages": EXPECTED_MESSAGES,
        "max_tokens": 2048,
        "temperature": 0.2,
        "tools": EXPECTED_TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "Read"}},
    }
    for dropped in (
        b"cache_control",
        b"cache_edits",
        b"cache_reference",
        b"context_management",
        b"betas",
        b"thinking",
        b"signature",
        b"user_id",
    ):
        assert dropped not in sent.body
    assert "anthropic-beta" not in sent.headers


def test_streamed_request_asks_for_usage(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"), message("ok"))
    _run(_provider(api_server).create(_request(), stream=True))
    assert api_server.last.json["stream"] is True
    assert api_server.last.json["stream_options"] == {"include_usage": True}
    _run(_provider(api_server, stream_usage=False).create(_request(), stream=True))
    assert "stream_options" not in api_server.last.json


def test_max_completion_tokens_and_plain_requests(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"))
    plain: ProviderRequest = {
        "model": "o-test",
        "max_tokens": 99,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    _run(_provider(api_server, max_tokens_param="max_completion_tokens").create(plain))
    assert api_server.last.json == {
        "model": "o-test",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "max_completion_tokens": 99,
    }
    with pytest.raises(ConfigError, match="max_tokens_param"):
        OpenAIProvider(api_key="k", max_tokens_param="max_output_tokens")


def test_the_token_limit_is_named_for_where_requests_go(api_server: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAI's own API gets `max_completion_tokens` (its reasoning models refuse `max_tokens`);
    another Chat Completions server gets `max_tokens`; an explicit choice wins."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIProvider(api_key="k").wire.max_tokens_param == "max_completion_tokens"
    assert OpenAIProvider(openai.OpenAI(api_key="k")).wire.max_tokens_param == "max_completion_tokens"
    assert OpenAIProvider(api_key="k", base_url="https://api.openai.com/v1").wire.max_tokens_param == "max_completion_tokens"
    assert OpenAIProvider(base_url="http://localhost:11434/v1").wire.max_tokens_param == "max_tokens"
    assert OpenAIProvider(api_key="k", max_tokens_param="max_tokens").wire.max_tokens_param == "max_tokens"
    monkeypatch.setenv("OPENAI_BASE_URL", api_server.openai_base_url)
    api_server.openai.push(message("ok"))
    _run(OpenAIProvider(api_key="k").create({"model": "m", "max_tokens": 7, "messages": [{"role": "user", "content": "hi"}]}))
    assert api_server.last.json["max_tokens"] == 7  # a local server: the older name


def test_tool_choice_mapping() -> None:
    assert convert_tool_choice({"type": "auto"}) == "auto"
    assert convert_tool_choice({"type": "any"}) == "required"
    assert convert_tool_choice({"type": "none"}) == "none"
    assert convert_tool_choice({"type": "tool", "name": "Read"}) == {
        "type": "function",
        "function": {"name": "Read"},
    }


def test_parallel_tool_use_can_be_disabled(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"))
    _run(
        _provider(api_server).create(
            _request(tool_choice={"type": "any", "disable_parallel_tool_use": True})
        )
    )
    assert api_server.last.json["tool_choice"] == "required"
    assert api_server.last.json["parallel_tool_calls"] is False


def test_documents_become_text_or_file_parts(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"))
    request: ProviderRequest = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
                    },
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBER",
                        },
                        "title": "a.pdf",
                    },  # type: ignore[typeddict-unknown-key]
                ],
            }
        ],
    }
    _run(_provider(api_server).create(request))
    assert api_server.last.json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "notes"},
                {
                    "type": "file",
                    "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBER"},
                },
            ],
        }
    ]


# --------------------------------------------------------------------------- replies


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_become_tool_use_blocks(api_server: ApiServer, stream: bool) -> None:
    api_server.openai.push(
        message(
            thinking_block("not sent over Chat Completions"),
            "Let me look.",
            tool_use_block("Read", {"file_path": "/ü.py", "n": [1, None]}, id="call_a"),
            tool_use_block("Read", '{"file_path": "/b', id="call_b"),  # truncated JSON
            usage={"input_tokens": 70, "cache_read_input_tokens": 30, "output_tokens": 9},
            id="msg_77",
        )
    )
    reply = _run(_provider(api_server).create(_request(), stream=stream))
    assert reply.content == [
        {"type": "text", "text": "Let me look."},
        {
            "type": "tool_use",
            "id": "call_a",
            "name": "Read",
            "input": {"file_path": "/ü.py", "n": [1, None]},
        },
        {"type": "tool_use", "id": "call_b", "name": "Read", "input": {"raw": '{"file_path": "/b'}},
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.usage == {
        "input_tokens": 70,
        "output_tokens": 9,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 30,
    }
    assert (reply.id, reply.model) == ("chatcmpl-77", "gpt-test")
    assert reply.raw


@pytest.mark.parametrize("stream", [False, True])
def test_empty_reply_and_length_cut_off(api_server: ApiServer, stream: bool) -> None:
    api_server.openai.push(empty(), message("The summary was cut of", stop_reason="max_tokens"))
    provider = _provider(api_server)
    nothing = _run(provider.create(_request(), stream=stream))
    assert nothing.content == [] and nothing.stop_reason == "end_turn"
    assert nothing.usage["output_tokens"] == 0
    cut = _run(provider.create(_request(), stream=stream))
    assert cut.stop_reason == "max_tokens" and cut.text == "The summary was cut of"
    assert isinstance(provider, Provider) and provider.supports_cache_edits is False


def test_stream_without_usage_reports_no_usage(api_server: ApiServer) -> None:
    api_server.openai.push(message("hello"))
    reply = _run(_provider(api_server, stream_usage=False).create(_request(), stream=True))
    assert reply.text == "hello" and reply.usage == {}


def test_heartbeat_during_a_slow_streamed_reply(api_server: ApiServer) -> None:
    gate = StreamGate()
    api_server.openai.push(message("slow " * 6, chunk_size=5, delay=0.015, gate=gate))
    beats, beat = beats_opening(gate, 3)
    reply = _run(
        _provider(api_server, heartbeat_interval=0.025).create(
            _request(), stream=True, heartbeat=beat
        )
    )
    assert reply.text == "slow " * 6
    assert len(beats) >= 3 and beats == sorted(beats)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("stream", [False, True])
def test_context_length_exceeded_with_token_gap(api_server: ApiServer, stream: bool) -> None:
    api_server.openai.push(prompt_too_long())
    with pytest.raises(PromptTooLongError) as caught:
        _run(_provider(api_server).create(_request(), stream=stream))
    error = caught.value
    assert (error.actual_tokens, error.limit_tokens, error.token_gap) == (130_000, 128_000, 2_000)
    assert error.status == 400 and error.request_id == api_server.last.request_id
    assert error.body["code"] == "context_length_exceeded"


def test_vllm_style_context_error_without_a_code(api_server: ApiServer) -> None:
    text = (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
    )
    api_server.openai.push(bad_request(text))
    with pytest.raises(PromptTooLongError) as caught:
        _run(_provider(api_server).create(_request()))
    assert caught.value.token_gap == 904


@pytest.mark.parametrize(
    ("reply", "expected", "status"),
    [
        (bad_request(), BadRequestError, 400),
        (auth_error(), AuthenticationError, 401),
        (auth_error(403), AuthenticationError, 403),
        (overloaded(), OverloadedError, 503),
        (server_error(), ServerError, 500),
        (server_error(504), ServerError, 504),
    ],
)
def test_status_errors(
    api_server: ApiServer, reply: Any, expected: type[ProviderError], status: int
) -> None:
    api_server.openai.push(reply)
    with pytest.raises(expected) as caught:
        _run(_provider(api_server).create(_request()))
    assert type(caught.value) is expected
    assert caught.value.status == status
    assert caught.value.request_id == api_server.last.request_id


@pytest.mark.parametrize("stream", [False, True])
def test_rate_limited_with_retry_after(api_server: ApiServer, stream: bool) -> None:
    api_server.openai.push(rate_limited("3"))
    with pytest.raises(RateLimitedError) as caught:
        _run(_provider(api_server).create(_request(), stream=stream))
    assert caught.value.retry_after == 3.0 and caught.value.status == 429


def test_insufficient_quota_is_not_retryable(api_server: ApiServer) -> None:
    from apiserver import ApiError

    api_server.openai.push(
        ApiError(
            429,
            429,
            "rate_limit_error",
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota",
        )
    )
    with pytest.raises(ProviderError) as caught:
        _run(_provider(api_server).create(_request()))
    assert not isinstance(caught.value, RetryableError)


@pytest.mark.parametrize(("after_events", "clean_close"), [(3, False), (3, True), (0, True)])
def test_stream_cut_mid_way_is_a_server_error(
    api_server: ApiServer, after_events: int, clean_close: bool
) -> None:
    api_server.openai.push(
        cut_stream(
            message("never finished " * 4), after_events=after_events, clean_close=clean_close
        )
    )
    with pytest.raises(ServerError) as caught:
        _run(_provider(api_server).create(_request(), stream=True))
    assert caught.value.request_id == api_server.last.request_id


def test_error_inside_the_stream(api_server: ApiServer) -> None:
    api_server.openai.push(stream_error(error_type="server_error"))
    with pytest.raises(ServerError, match="Overloaded"):
        _run(_provider(api_server).create(_request(), stream=True))


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_json_and_cut_body_are_server_errors(api_server: ApiServer, stream: bool) -> None:
    api_server.openai.push(malformed(), cut_stream())
    provider = _provider(api_server)
    with pytest.raises(ServerError, match="malformed"):
        _run(provider.create(_request(), stream=stream))
    with pytest.raises(ServerError, match="connection"):
        _run(provider.create(_request(), stream=stream))


# --------------------------------------------------------------------------- clients and facades


def test_sync_client_and_sync_facade(api_server: ApiServer) -> None:
    client = api_server.openai_client(sync=True)
    provider = OpenAIProvider(client, heartbeat_interval=0.02)
    gate = StreamGate()
    api_server.openai.push(message("one"), message("two", delay=0.01, chunk_size=1, gate=gate), overloaded())
    assert _run(provider.create(_request())).text == "one"
    beats, beat = beats_opening(gate, 1)
    assert provider.create_sync(_request(), stream=True, heartbeat=beat).text == "two"
    assert beats
    with pytest.raises(OverloadedError):
        provider.create_sync(_request())


def test_sync_facade_with_an_async_client(api_server: ApiServer) -> None:
    provider = _provider(api_server)
    api_server.openai.push(message("a"), message("b"), message("c"))
    assert provider.create_sync(_request()).text == "a"
    assert provider.create_sync(_request(), stream=True).text == "b"
    assert _run(provider.create(_request())).text == "c"


def test_local_server_needs_no_api_key(
    api_server: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = OpenAIProvider(base_url=api_server.openai_base_url)
    api_server.openai.push(message("async"), message("sync"))
    assert _run(provider.create(_request())).text == "async"
    assert provider.create_sync(_request()).text == "sync"
    assert {r.headers["authorization"] for r in api_server.requests} == {
        f"Bearer {LOCAL_SERVER_API_KEY}"
    }
    assert all(r.headers["x-stainless-retry-count"] == "0" for r in api_server.requests)


def test_missing_credentials_fail_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="OpenAI client"):
        OpenAIProvider()


def test_rejects_other_clients() -> None:
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        OpenAIProvider(object())  # type: ignore[arg-type]


def test_missing_sdk_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError, match=r"pip install 'unbounded\[openai\]'"):
        OpenAIProvider(api_key="k")


def test_arguments_are_json_objects_on_the_wire(api_server: ApiServer) -> None:
    api_server.openai.push(message("ok"))
    _run(_provider(api_server).create(_request()))
    for entry in api_server.last.json["messages"]:
        for call in entry.get("tool_calls", []):
            assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_a_chat_system_message_inside_the_conversation_goes_back_where_it_was() -> None:
    reminder = {"role": "system", "content": "Be brief."}
    given: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "u0"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        reminder,
        {"role": "user", "content": "go on"},
    ]
    inbound = OpenAIChat().inbound(given)
    assert inbound.system == "You are terse."
    assert [m["role"] for m in inbound.messages] == ["user", "assistant", "user"]
    request: ProviderRequest = {"model": "gpt-5.4", "system": inbound.system, "messages": inbound.messages}
    sent = OpenAIChat().to_request(request, stream=False)["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "system", "user"]
    assert sent[4] == reminder and sent[5] == {"role": "user", "content": "go on"}


def test_a_chat_system_message_between_two_user_messages_stays_between_them() -> None:
    given: list[dict[str, Any]] = [
        {"role": "user", "content": "u0"},
        {"role": "assistant", "content": "a0"},
        {"role": "user", "content": "u1"},
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "u2"}]},
    ]
    inbound = OpenAIChat().inbound(given)
    assert inbound.system == "" and len(inbound.messages) == 3
    request: ProviderRequest = {"model": "gpt-5.4", "messages": inbound.messages}
    sent = OpenAIChat().to_request(request, stream=False)["messages"]
    assert sent == [*given[:4], {"role": "user", "content": "u2"}]
