"""The scripted API server itself: the real SDKs must parse every reply it gives."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    RecordedRequest,
    TokenCount,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    auth_error,
    bad_request,
    cut_stream,
    empty,
    malformed,
    message,
    openai_chat_request_error,
    overloaded,
    prompt_too_long,
    rate_limited,
    responses_request_error,
    server_error,
    start_server,
    stream_error,
    thinking_block,
    tool_use_block,
)

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

USER = [{"role": "user", "content": "hi"}]


def _anthropic(api: ApiServer) -> Any:
    return api.anthropic_client(sync=True)


def _openai(api: ApiServer) -> Any:
    return api.openai_client(sync=True)


def _rich_reply() -> Any:
    return message(
        thinking_block("let me think", signature="sig-1"),
        "héllo wörld, a longer text split into deltas",
        tool_use_block("Read", {"file_path": "/a.py", "limit": None}, id="toolu_9"),
        usage={
            "input_tokens": 11,
            "output_tokens": 22,
            "cache_creation_input_tokens": 33,
            "cache_read_input_tokens": 44,
            "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 3},
        },
    )


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_json_reply_parses_in_the_sdk(api_server: ApiServer) -> None:
    api_server.anthropic.push(_rich_reply())
    reply = _anthropic(api_server).messages.create(
        model="claude-test", max_tokens=50, messages=USER
    )
    assert [b.type for b in reply.content] == ["thinking", "text", "tool_use"]
    assert reply.content[0].signature == "sig-1"
    assert reply.content[2].input == {"file_path": "/a.py", "limit": None}
    assert reply.stop_reason == "tool_use"
    assert reply.model == "claude-test"  # echoed from the request
    assert reply.usage.cache_read_input_tokens == 44
    assert reply.usage.cache_creation.ephemeral_1h_input_tokens == 3
    assert reply._request_id == api_server.last.request_id


def test_anthropic_sse_has_the_real_event_sequence(api_server: ApiServer) -> None:
    api_server.anthropic.push(_rich_reply())
    raw = _anthropic(api_server).messages.create(
        model="claude-test", max_tokens=50, messages=USER, stream=True
    )
    kinds = []
    for event in raw:
        kind = event.type
        if kind == "content_block_delta":
            kind = f"delta:{event.delta.type}"
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    assert kinds == [
        "message_start",
        "content_block_start",
        "delta:thinking_delta",
        "delta:signature_delta",
        "content_block_stop",
        "content_block_start",
        "delta:text_delta",
        "content_block_stop",
        "content_block_start",
        "delta:input_json_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_anthropic_stream_helper_assembles_the_same_message(api_server: ApiServer) -> None:
    client = _anthropic(api_server)
    api_server.anthropic.push(_rich_reply(), _rich_reply())
    plain = client.messages.create(model="m", max_tokens=5, messages=USER)
    with client.messages.stream(model="m", max_tokens=5, messages=USER) as stream:
        streamed = stream.get_final_message()
    assert [b.model_dump(exclude_none=True) for b in streamed.content] == [
        b.model_dump(exclude_none=True) for b in plain.content
    ]
    assert streamed.usage.model_dump() == plain.usage.model_dump()
    assert streamed.stop_reason == plain.stop_reason == "tool_use"


@pytest.mark.parametrize("accepted", ["gzip, deflate", "identity"])
def test_gzip_streams_compress_each_streamed_reply_the_client_accepts_compressed(api_server: ApiServer, accepted: str) -> None:
    import httpx

    api_server.gzip_streams = True
    api_server.anthropic.push(_rich_reply(), _rich_reply())
    body = {"model": "m", "max_tokens": 5, "messages": USER, "stream": True}
    url = f"{api_server.anthropic_base_url}/v1/messages"
    with httpx.Client() as http:
        with http.stream("POST", url, json=body, headers={"accept-encoding": accepted}) as reply:
            raw = b"".join(reply.iter_raw())
            encoding = reply.headers.get("content-encoding")
        plain = api_server.requests[-1].reply
        with http.stream("POST", url, json=body, headers={"accept-encoding": accepted}) as reply:
            decoded = b"".join(reply.iter_bytes())
    assert b"event: message_stop" in plain and decoded == plain  # the record is the plain body
    if accepted == "identity":
        assert encoding is None and raw == plain
    else:
        assert encoding == "gzip" and raw != plain and zlib.decompress(raw, 31) == plain


def test_anthropic_empty_and_max_tokens_replies(api_server: ApiServer) -> None:
    client = _anthropic(api_server)
    api_server.anthropic.push(empty(), message("cut he", stop_reason="max_tokens"))
    nothing = client.messages.create(model="m", max_tokens=5, messages=USER)
    assert nothing.content == [] and nothing.usage.output_tokens == 0
    with client.messages.stream(model="m", max_tokens=5, messages=USER) as stream:
        cut = stream.get_final_message()
    assert cut.stop_reason == "max_tokens" and cut.content[0].text == "cut he"


@pytest.mark.parametrize(
    ("reply", "sdk_error", "status", "error_type"),
    [
        (prompt_too_long(), "BadRequestError", 400, "invalid_request_error"),
        (bad_request(), "BadRequestError", 400, "invalid_request_error"),
        (auth_error(), "AuthenticationError", 401, "authentication_error"),
        (auth_error(403), "PermissionDeniedError", 403, "permission_error"),
        (rate_limited(), "RateLimitError", 429, "rate_limit_error"),
        (overloaded(), "OverloadedError", 529, "overloaded_error"),
        (server_error(), "InternalServerError", 500, "api_error"),
    ],
)
def test_anthropic_error_shapes(
    api_server: ApiServer, reply: Any, sdk_error: str, status: int, error_type: str
) -> None:
    api_server.anthropic.push(reply)
    with pytest.raises(getattr(anthropic, sdk_error)) as caught:
        _anthropic(api_server).messages.create(model="m", max_tokens=5, messages=USER)
    error = caught.value
    assert error.status_code == status
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == error_type
    assert error.request_id == api_server.last.request_id


def test_anthropic_prompt_too_long_wording(api_server: ApiServer) -> None:
    api_server.anthropic.push(prompt_too_long(), prompt_too_long(300_000, 200_000))
    client = _anthropic(api_server)
    for expected in (
        "prompt is too long: 212345 tokens > 200000 maximum",
        "prompt is too long: 300000 tokens > 200000 maximum",
    ):
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="m", max_tokens=5, messages=USER)
        assert caught.value.body["error"]["message"] == expected


def test_retry_after_header_is_sent(api_server: ApiServer) -> None:
    api_server.anthropic.push(rate_limited("2.5"))
    with pytest.raises(anthropic.RateLimitError) as caught:
        _anthropic(api_server).messages.create(model="m", max_tokens=5, messages=USER)
    assert caught.value.response.headers["retry-after"] == "2.5"


def test_anthropic_stream_failures(api_server: ApiServer) -> None:
    client = _anthropic(api_server)
    api_server.anthropic.push(cut_stream(), stream_error(), malformed())
    stream_args: dict[str, Any] = {"model": "m", "max_tokens": 5, "messages": USER}
    with (
        pytest.raises(Exception, match="incomplete chunked read"),
        client.messages.stream(**stream_args) as stream,
    ):
        stream.get_final_message()
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(**stream_args) as stream,
    ):
        stream.get_final_message()
    assert caught.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(ValueError), client.messages.stream(**stream_args) as stream:
        stream.get_final_message()


def test_non_streamed_cut_and_malformed(api_server: ApiServer) -> None:
    client = _anthropic(api_server)
    api_server.anthropic.push(cut_stream(), malformed())
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model="m", max_tokens=5, messages=USER)
    with pytest.raises(json.JSONDecodeError):
        client.messages.create(model="m", max_tokens=5, messages=USER)


def test_invalid_requests_are_refused_like_the_api(api_server: ApiServer) -> None:
    """A request the real API would refuse gets its 400 here, and no scripted reply is used."""
    client = _anthropic(api_server)
    api_server.anthropic.push(message("only for the valid request"))
    call = [
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
    ]
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"messages": [*call, {"role": "user", "content": "title?"}]}, "without `tool_result`"),
        ({"messages": [*call[:1], {"role": "assistant", "content": "ok"}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}]}, "unexpected `tool_use_id`"),
        ({"system": [marked] * 4, "messages": [{"role": "user", "content": [marked]}]}, "A maximum of 4 blocks"),
        ({"system": [marked], "messages": [{"role": "user", "content": [{**marked, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}, "ttl='1h'"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2_000}, "messages": USER}, "budget_tokens"),
        ({"messages": [{"role": "user", "content": "x" * 4_000}]}, "prompt is too long: 1"),
        ({"messages": [*call, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}, {"type": "tool_result", "tool_use_id": "toolu_1", "content": "b"}]}]}, "Found multiple `tool_result` blocks with id: toolu_1"),
        ({"messages": [call[0], {"role": "assistant", "content": [{"type": "tool_use", "id": "call.1", "name": "Read", "input": {}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call.1", "content": "a"}]}]}, "tool_use.id: String should match pattern"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is "}]}, "cannot end with trailing whitespace"),
        ({"messages": [*call, {"role": "user", "content": [{"type": "text", "text": "here"}, {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}]}, "must begin with their 1 `tool_result`"),
    ]
    api_server.context_window = 800
    for body, wording in cases:
        with pytest.raises(anthropic.BadRequestError, match=wording):
            client.messages.create(**{"model": "claude-test", "max_tokens": 1_000, **body})
    assert api_server.rejected[0][1].startswith("messages.1: `tool_use` ids")
    assert len(api_server.rejected) == len(cases) and len(api_server.anthropic) == 1
    api_server.rejected.clear()
    assert client.messages.create(model="claude-test", max_tokens=10, messages=USER).content[0].text == "only for the valid request"


def test_count_tokens_scripted_and_default(api_server: ApiServer) -> None:
    client = _anthropic(api_server)
    api_server.count_tokens.push(TokenCount(1234))
    assert client.messages.count_tokens(model="m", messages=USER).input_tokens == 1234
    assert client.messages.count_tokens(model="m", messages=USER).input_tokens > 0
    assert [r.api for r in api_server.requests] == ["count_tokens", "count_tokens"]


# --------------------------------------------------------------------------- OpenAI


def test_openai_json_reply_parses_in_the_sdk(api_server: ApiServer) -> None:
    api_server.openai.push(_rich_reply())
    reply = _openai(api_server).chat.completions.create(model="gpt-test", messages=USER)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "héllo wörld, a longer text split into deltas"
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name) == ("toolu_9", "Read")
    assert json.loads(call.function.arguments) == {"file_path": "/a.py", "limit": None}
    assert reply.usage.prompt_tokens == 11 + 33 + 44
    assert reply.usage.prompt_tokens_details.cached_tokens == 44
    assert reply.usage.completion_tokens == 22
    assert reply._request_id == api_server.last.request_id


def test_openai_stream_with_and_without_usage(api_server: ApiServer) -> None:
    client = _openai(api_server)
    api_server.openai.push(_rich_reply(), _rich_reply())
    chunks = list(
        client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 22
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert text == "héllo wörld, a longer text split into deltas"
    assert json.loads(arguments) == {"file_path": "/a.py", "limit": None}
    bare = list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert all(c.usage is None for c in bare)


@pytest.mark.parametrize(
    ("reply", "sdk_error", "status", "code"),
    [
        (prompt_too_long(), "BadRequestError", 400, "context_length_exceeded"),
        (auth_error(), "AuthenticationError", 401, "invalid_api_key"),
        (rate_limited(), "RateLimitError", 429, "rate_limit_exceeded"),
        (overloaded(), "InternalServerError", 503, None),
        (server_error(), "InternalServerError", 500, None),
    ],
)
def test_openai_error_shapes(
    api_server: ApiServer, reply: Any, sdk_error: str, status: int, code: str | None
) -> None:
    api_server.openai.push(reply)
    with pytest.raises(getattr(openai, sdk_error)) as caught:
        _openai(api_server).chat.completions.create(model="m", messages=USER)
    error = caught.value
    assert error.status_code == status
    assert error.code == code
    assert set(error.body) == {"message", "type", "param", "code"}
    assert error.request_id == api_server.last.request_id


def test_openai_prompt_too_long_wording(api_server: ApiServer) -> None:
    api_server.openai.push(prompt_too_long())
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(api_server).chat.completions.create(model="m", messages=USER)
    assert caught.value.body["message"].startswith(
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens"
    )


def test_openai_stream_failures(api_server: ApiServer) -> None:
    client = _openai(api_server)
    api_server.openai.push(cut_stream(), stream_error(error_type="server_error"), malformed())
    with pytest.raises(openai.APIConnectionError):
        list(client.chat.completions.create(model="m", messages=USER, stream=True))
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert caught.value.type == "server_error"
    with pytest.raises(ValueError):
        list(client.chat.completions.create(model="m", messages=USER, stream=True))


# --------------------------------------------------------------------------- the harness


def test_every_request_is_recorded_byte_for_byte(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    _anthropic(api_server).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "ünïcode"}]
    )
    recorded = api_server.last
    assert recorded.method == "POST" and recorded.path == "/v1/messages"
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.json == {
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "ünïcode"}],
        "model": "m",
    }
    assert "ünïcode".encode() in recorded.body
    assert json.loads(recorded.body) == recorded.json
    assert not recorded.stream


def test_callable_replies_see_the_request(api_server: ApiServer) -> None:
    def echo(request: RecordedRequest) -> Any:
        return message(f"you said {request.json['messages'][-1]['content']}")

    api_server.openai.push(echo)
    reply = _openai(api_server).chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content == "you said hi"


def test_unscripted_requests_fail_loudly() -> None:
    with start_server() as api:
        with pytest.raises(anthropic.InternalServerError, match="no reply scripted"):
            _anthropic(api).messages.create(model="m", max_tokens=5, messages=USER)
        assert [r.path for r in api.unscripted] == ["/v1/messages"]


def test_unknown_paths_are_404(api_server: ApiServer) -> None:
    with pytest.raises(anthropic.NotFoundError):
        _anthropic(api_server).models.list()
    assert api_server.last.method == "GET"


# -- the OpenAI APIs' refusals ------------------------------------------------------------------

CALL = {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "a.py"}


@pytest.mark.parametrize(
    ("items", "refusal"),
    [
        ([{"role": "user", "content": "hi"}, OUTPUT], "No tool call found for function call output with call_id c1."),
        ([{"role": "user", "content": "hi"}, CALL], "No tool output found for function call c1."),
        (
            [{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1", "summary": []}],
            "Item 'rs_1' of type 'reasoning' was provided without its required following item.",
        ),
        ([{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1", "summary": []}, CALL, OUTPUT], None),
    ],
)
def test_the_responses_api_refuses_broken_item_lists(items: list[Any], refusal: str | None) -> None:
    error = responses_request_error({"model": "m", "input": items}, None, 10)
    assert (error.message if error else None) == refusal


def test_the_openai_apis_refuse_a_prompt_over_the_window() -> None:
    error = responses_request_error({"model": "m", "input": "hi"}, 100, 404)
    assert error is not None and error.openai_code == "context_length_exceeded"
    assert responses_request_error({"model": "m", "input": "hi"}, 100, 403) is None
    chat = openai_chat_request_error({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, 100, 404)
    assert chat is not None and "maximum context length is 100 tokens" in chat.message


@pytest.mark.parametrize(
    ("messages", "refusal"),
    [
        ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c1", "content": "x"}], "must be a response to a preceeding message"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c1"}, {"id": "c2"}]}, {"role": "tool", "tool_call_id": "c1", "content": "x"}, {"role": "user", "content": "go"}],
            "did not have response messages: c2",
        ),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c1"}]}, {"role": "tool", "tool_call_id": "c1", "content": "x"}], None),
    ],
)
def test_chat_completions_refuses_unpaired_tool_messages(messages: list[Any], refusal: str | None) -> None:
    error = openai_chat_request_error({"model": "m", "messages": messages}, None, 10)
    assert (error.message if error else None) == refusal or (refusal is not None and error is not None and refusal in error.message)


def test_a_refused_responses_request_is_an_sdk_error_and_is_kept(api_server: ApiServer) -> None:
    openai = pytest.importorskip("openai")
    client = api_server.openai_client(sync=True)
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        client.responses.create(model="m", input=[{"role": "user", "content": "hi"}, OUTPUT])
    assert [why for _, why in api_server.rejected] == ["No tool call found for function call output with call_id c1."]
    api_server.rejected.clear()
