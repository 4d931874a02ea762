"""AnthropicProvider through the real `anthropic` SDK against the scripted local server."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    StreamGate,
    after,
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
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.wire.base import retry_after_seconds

anthropic = pytest.importorskip("anthropic")

TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
        "cache_control": {"type": "ephemeral", "ttl": "1h"},  # 1h markers precede 5m ones
    }
]
PNG = "iVBORw0KGgo="


def _request(**extra: Any) -> ProviderRequest:
    request: dict[str, Any] = {
        "model": "claude-test-model",
        "max_tokens": 1024,
        "system": [
            {"type": "text", "text": "You are terse."},
            {
                "type": "text",
                "text": "Ünïcode stays as is ✓",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        ],
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "read /a.py"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read it", "signature": "sig"},
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Read",
                        "input": {"file_path": "/a.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": "print('hi')"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG,
                                },
                            },
                        ],
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                    {"type": "text", "text": "and summarize"},
                ],
            },
        ],
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "metadata": {"user_id": "u-1"},
        "temperature": 0.0,
        "tool_choice": {"type": "auto"},
    }
    request.update(extra)
    return request  # type: ignore[return-value]


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _provider(api: ApiServer, **options: Any) -> AnthropicProvider:
    client = api.anthropic_client()
    return AnthropicProvider(client, **options)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# --------------------------------------------------------------------------- the wire


def test_request_reaches_the_wire_exactly(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    request = _request()
    _run(_provider(api_server).create(request))
    sent = api_server.last
    assert sent.path == "/v1/messages" and "anthropic-beta" not in sent.headers
    assert sent.json == dict(request)
    # The cached prefix depends on these bytes: messages, system and tools go out unchanged.
    for key in ("messages", "system", "tools"):
        assert _compact(request[key]) in sent.body  # type: ignore[literal-required]
    assert (
        sent.headers["authorization"] == "Bearer test-key"
        or sent.headers.get("x-api-key") == "test-key"
    )


def test_streamed_request_adds_only_stream_true(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    _run(_provider(api_server).create(_request(), stream=True))
    assert api_server.last.json == {**_request(), "stream": True}
    assert api_server.last.stream


def test_betas_use_the_beta_endpoint_and_header(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    management = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    request = _request(
        betas=["context-management-2025-06-27", "interleaved-thinking-2025-05-14"],
        context_management=management,
    )
    _run(_provider(api_server).create(request))
    sent = api_server.last
    assert (
        sent.headers["anthropic-beta"]
        == "context-management-2025-06-27,interleaved-thinking-2025-05-14"
    )
    assert sent.json == {k: v for k, v in request.items() if k != "betas"}
    assert sent.json["context_management"] == management


def test_context_management_without_betas_still_reaches_the_body(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    api_server.validate = False  # the API wants the edit's beta too; the routing is checked here
    management = {"edits": [{"type": "clear_thinking_20251015"}]}
    _run(_provider(api_server).create(_request(context_management=management)))
    assert api_server.last.json["context_management"] == management
    assert "anthropic-beta" not in api_server.last.headers


def test_cache_edits_never_reach_the_wire_by_default(api_server: ApiServer) -> None:
    edits = [{"type": "delete", "cache_reference": "toolu_1"}]
    api_server.anthropic.push(message("ok"), message("ok"), message("ok"))
    provider = _provider(api_server)
    assert provider.supports_cache_edits is False
    _run(provider.create(_request(cache_edits=edits)))
    _run(provider.create(_request(cache_edits=edits, betas=["b"]), stream=True))
    for sent in api_server.requests:
        assert b"cache_edits" not in sent.body and b"cache_reference" not in sent.body
    _run(_provider(api_server, supports_cache_edits=True).create(_request(cache_edits=edits)))
    assert api_server.last.json["cache_edits"] == edits


# --------------------------------------------------------------------------- replies


def test_text_reply_non_streamed_and_streamed_agree(api_server: ApiServer) -> None:
    usage = {
        "input_tokens": 12,
        "output_tokens": 34,
        "cache_creation_input_tokens": 56,
        "cache_read_input_tokens": 78,
        "cache_creation": {"ephemeral_5m_input_tokens": 50, "ephemeral_1h_input_tokens": 6},
    }
    reply = message(
        thinking_block("hmm", "sig-2"), "Hello there, in several deltas", usage=usage, id="msg_42"
    )
    api_server.anthropic.push(reply, reply)
    provider = _provider(api_server)
    plain = _run(provider.create(_request()))
    streamed = _run(provider.create(_request(), stream=True))
    assert plain == streamed
    assert plain.content == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig-2"},
        {"type": "text", "text": "Hello there, in several deltas"},
    ]
    assert plain.text == "Hello there, in several deltas"
    assert plain.stop_reason == "end_turn"
    assert plain.usage == usage
    assert (plain.id, plain.model) == ("msg_42", "claude-test-model")
    assert plain.raw["usage"]["cache_read_input_tokens"] == 78
    assert isinstance(provider, Provider)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_reply(api_server: ApiServer, stream: bool) -> None:
    api_server.anthropic.push(
        message(
            "Let me look.",
            tool_use_block("Read", {"file_path": "/ü.py", "n": [1, None]}, id="toolu_7"),
        )
    )
    reply = _run(_provider(api_server).create(_request(), stream=stream))
    assert reply.stop_reason == "tool_use"
    assert reply.tool_uses == [
        {
            "type": "tool_use",
            "id": "toolu_7",
            "name": "Read",
            "input": {"file_path": "/ü.py", "n": [1, None]},
        }
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_empty_reply_and_max_tokens_cut_off(api_server: ApiServer, stream: bool) -> None:
    api_server.anthropic.push(empty(), message("The summary was cut of", stop_reason="max_tokens"))
    provider = _provider(api_server)
    nothing = _run(provider.create(_request(), stream=stream))
    assert nothing.content == [] and nothing.text == "" and nothing.stop_reason == "end_turn"
    assert nothing.usage["output_tokens"] == 0
    cut = _run(provider.create(_request(), stream=stream))
    assert cut.stop_reason == "max_tokens" and cut.text == "The summary was cut of"


def test_heartbeat_during_a_slow_streamed_reply(api_server: ApiServer) -> None:
    gate = StreamGate()
    api_server.anthropic.push(message("slow " * 6, chunk_size=5, delay=0.015, gate=gate))
    beats, beat = beats_opening(gate, 3)
    reply = _run(
        _provider(api_server, heartbeat_interval=0.025).create(
            _request(), stream=True, heartbeat=beat
        )
    )
    assert reply.text == "slow " * 6
    assert len(beats) >= 3
    assert beats == sorted(beats) and beats[0] >= 0.02


def test_async_heartbeat_and_non_streamed_calls(api_server: ApiServer) -> None:
    gate = threading.Event()
    api_server.anthropic.push(after(gate, message("done")))
    beats: list[float] = []

    async def beat(elapsed: float) -> None:
        beats.append(elapsed)
        if len(beats) >= 2:
            gate.set()

    reply = _run(_provider(api_server, heartbeat_interval=0.02).create(_request(), heartbeat=beat))
    assert reply.text == "done" and len(beats) >= 2


def test_no_heartbeat_for_a_fast_reply(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("quick"))
    beats: list[float] = []
    _run(
        _provider(api_server, heartbeat_interval=60).create(  # far beyond any stall
            _request(), stream=True, heartbeat=beats.append
        )
    )
    assert beats == []


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_too_long_with_token_gap(api_server: ApiServer, stream: bool) -> None:
    api_server.anthropic.push(prompt_too_long())
    with pytest.raises(PromptTooLongError) as caught:
        _run(_provider(api_server).create(_request(), stream=stream))
    error = caught.value
    assert (error.actual_tokens, error.limit_tokens, error.token_gap) == (212_345, 200_000, 12_345)
    assert error.status == 400
    assert error.request_id == api_server.last.request_id
    assert error.body["error"]["type"] == "invalid_request_error"
    assert not isinstance(error, RetryableError)


@pytest.mark.parametrize(
    ("reply", "expected", "status"),
    [
        (bad_request(), BadRequestError, 400),
        (bad_request("max_tokens: must be positive", status=422), BadRequestError, 422),
        (auth_error(), AuthenticationError, 401),
        (auth_error(403), AuthenticationError, 403),
        (overloaded(), OverloadedError, 529),
        (server_error(), ServerError, 500),
        (server_error(502), ServerError, 502),
    ],
)
def test_status_errors(
    api_server: ApiServer, reply: Any, expected: type[ProviderError], status: int
) -> None:
    api_server.anthropic.push(reply)
    with pytest.raises(expected) as caught:
        _run(_provider(api_server).create(_request()))
    assert type(caught.value) is expected
    assert caught.value.status == status
    assert caught.value.request_id == api_server.last.request_id


@pytest.mark.parametrize("stream", [False, True])
def test_rate_limited_with_retry_after(api_server: ApiServer, stream: bool) -> None:
    api_server.anthropic.push(rate_limited("7"))
    with pytest.raises(RateLimitedError) as caught:
        _run(_provider(api_server).create(_request(), stream=stream))
    assert caught.value.retry_after == 7.0
    assert caught.value.status == 429
    assert caught.value.request_id == api_server.last.request_id


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None


@pytest.mark.parametrize(("after_events", "clean_close"), [(4, False), (4, True), (0, True)])
def test_stream_cut_mid_way_is_a_server_error(
    api_server: ApiServer, after_events: int, clean_close: bool
) -> None:
    api_server.anthropic.push(
        cut_stream(
            message("never finished " * 4), after_events=after_events, clean_close=clean_close
        )
    )
    with pytest.raises(ServerError) as caught:
        _run(_provider(api_server).create(_request(), stream=True))
    assert caught.value.request_id == api_server.last.request_id


def test_non_streamed_body_cut_is_a_server_error(api_server: ApiServer) -> None:
    api_server.anthropic.push(cut_stream())
    with pytest.raises(ServerError, match="connection"):
        _run(_provider(api_server).create(_request()))


def test_error_event_inside_the_stream(api_server: ApiServer) -> None:
    api_server.anthropic.push(stream_error(), stream_error(error_type="api_error"))
    provider = _provider(api_server)
    with pytest.raises(OverloadedError):
        _run(provider.create(_request(), stream=True))
    with pytest.raises(ServerError):
        _run(provider.create(_request(), stream=True))


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_json_is_a_server_error(api_server: ApiServer, stream: bool) -> None:
    api_server.anthropic.push(malformed())
    with pytest.raises(ServerError, match="malformed"):
        _run(_provider(api_server).create(_request(), stream=stream))


def test_connection_refused_is_a_server_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = AnthropicProvider(api_key="k", base_url=f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(ServerError, match="connection") as caught:
        _run(provider.create(_request()))
    assert caught.value.status is None


def test_unrelated_exceptions_are_not_mapped() -> None:
    assert AnthropicProvider(api_key="k").wire.map_error(KeyError("x")) is None


# --------------------------------------------------------------------------- clients and facades


def test_sync_client_via_thread_and_sync_facade(api_server: ApiServer) -> None:
    client = api_server.anthropic_client(sync=True)
    provider = AnthropicProvider(client, heartbeat_interval=0.02)
    gate = StreamGate()
    api_server.anthropic.push(message("one"), message("two", delay=0.01, chunk_size=1, gate=gate), prompt_too_long())
    assert _run(provider.create(_request())).text == "one"
    beats, beat = beats_opening(gate, 1)
    assert provider.create_sync(_request(), stream=True, heartbeat=beat).text == "two"
    assert beats
    with pytest.raises(PromptTooLongError):
        provider.create_sync(_request())


def test_sync_facade_with_an_async_client_survives_many_calls(api_server: ApiServer) -> None:
    provider = _provider(api_server)
    api_server.anthropic.push(message("a"), message("b"), message("c"))
    assert provider.create_sync(_request()).text == "a"
    assert provider.create_sync(_request(), stream=True).text == "b"
    assert _run(provider.create(_request())).text == "c"


def test_an_async_client_outlives_its_first_event_loop(api_server: ApiServer) -> None:
    provider = _provider(api_server)
    api_server.anthropic.push(message("first"), message("second"), message("third"))
    assert _run(provider.create(_request())).text == "first"
    # The first loop is closed now: its pooled connection cannot be reused on the next one.
    assert _run(provider.create(_request())).text == "second"
    assert _run(provider.create(_request(), stream=True)).text == "third"


def test_provider_builds_its_own_clients(api_server: ApiServer) -> None:
    provider = AnthropicProvider(api_key="own-key", base_url=api_server.anthropic_base_url)
    api_server.anthropic.push(message("async"), message("sync"))
    assert _run(provider.create(_request())).text == "async"
    assert provider.create_sync(_request()).text == "sync"
    assert all(b"own-key" in json.dumps(r.headers).encode() for r in api_server.requests)
    assert all(r.headers["x-stainless-retry-count"] == "0" for r in api_server.requests)


def test_sync_facade_works_inside_an_event_loop(api_server: ApiServer) -> None:
    provider = _provider(api_server)
    api_server.anthropic.push(message("from a worker thread"), message("awaited"))

    async def inside() -> tuple[str, str]:
        blocking = provider.create_sync(_request())  # on a worker thread (unbounded.blocking)
        return blocking.text, (await provider.create(_request())).text

    assert _run(inside()) == ("from a worker thread", "awaited")


def test_rejects_other_clients() -> None:
    with pytest.raises(ConfigError, match="AsyncAnthropic"):
        AnthropicProvider(object())  # type: ignore[arg-type]


def test_missing_sdk_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigError, match=r"pip install 'unbounded\[anthropic\]'"):
        AnthropicProvider()


def test_importing_unbounded_does_not_import_the_sdks() -> None:
    code = (
        "import sys, unbounded, unbounded.providers, unbounded.providers.anthropic, "
        "unbounded.providers.openai; "
        "print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- newcomer's path


@pytest.mark.parametrize("sync", [False, True])
def test_a_large_max_tokens_is_streamed_when_the_sdk_requires_it(
    api_server: ApiServer, sync: bool
) -> None:
    # 32,000 output tokens could run past the SDK's 10-minute non-streaming timeout: the SDK
    # refuses to send it unstreamed, so the provider streams it instead.
    api_server.anthropic.push(message("long answer"))
    provider = AnthropicProvider(api_server.anthropic_client(sync=sync))
    request = _request(max_tokens=32_000)
    response = provider.create_sync(request) if sync else _run(provider.create(request))
    assert response.text == "long answer"
    assert len(api_server.requests) == 1
    assert api_server.requests[0].stream
    assert api_server.requests[0].json["max_tokens"] == 32_000


def test_a_small_max_tokens_is_not_streamed_unless_asked(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("short"))
    response = _run(_provider(api_server).create(_request(max_tokens=1024)))
    assert response.text == "short"
    assert not api_server.requests[0].stream


def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials file either


def test_no_api_key_is_said_plainly_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    _no_credentials(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match="no Anthropic API key: set ANTHROPIC_API_KEY"):
        AnthropicProvider()
    AnthropicProvider(api_key="sk-ant-given")  # a key given in code is enough


def test_a_client_without_a_key_fails_with_no_api_key_and_sends_nothing(
    api_server: ApiServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    _no_credentials(monkeypatch, tmp_path)
    client = anthropic.AsyncAnthropic(base_url=api_server.anthropic_base_url, max_retries=0)
    provider = AnthropicProvider(client)
    for max_tokens in (1024, 32_000):  # unstreamed, and streamed because of its size
        with pytest.raises(AuthenticationError, match="no Anthropic API key") as caught:
            _run(provider.create(_request(max_tokens=max_tokens)))
        assert caught.value.status is None
    assert api_server.requests == []
