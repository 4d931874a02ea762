"""The Anthropic Messages format's rules, each stated as what a caller sees: which error an SDK
or transport failure becomes, what a reply's blocks and usage read as, what the stream fold
keeps, and what the caller's messages are stored as. Found by the mutation check of
`wire/anthropic.py` (each test fails when the rule it states is flipped or dropped)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver import compaction_usage, sdk_http_package
from unbounded.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from unbounded.wire import AnthropicMessages, InboundMessages

anthropic = pytest.importorskip("anthropic")

WIRE = AnthropicMessages()


def _http_request() -> Any:
    return sdk_http_package().Request("POST", "https://api.anthropic.com/v1/messages")


def _status_error(status: int, body: Any, text: str = "Error code: from the SDK") -> Any:
    response = sdk_http_package().Response(status, request=_http_request())
    return anthropic.APIStatusError(text, response=response, body=body)


def _body(kind: str, message: str = "said by the API") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- errors: SDK exceptions, plain exceptions -------------------------------------------------------


def test_a_timeout_says_the_request_timed_out_not_that_the_connection_failed() -> None:
    mapped = WIRE.map_error(anthropic.APITimeoutError(request=_http_request()))
    assert isinstance(mapped, ServerError) and str(mapped).startswith("request timed out")


def test_a_connection_failure_names_its_cause_or_else_the_sdks_own_text() -> None:
    caused = anthropic.APIConnectionError(message="Connection error.", request=_http_request())
    caused.__cause__ = OSError("Name or service not known")
    mapped = WIRE.map_error(caused)
    assert isinstance(mapped, ServerError) and "Name or service not known" in str(mapped)
    bare = WIRE.map_error(anthropic.APIConnectionError(message="Connection reset.", request=_http_request()))
    assert isinstance(bare, ServerError) and "Connection reset." in str(bare)


def test_a_reply_the_sdk_cannot_validate_is_a_malformed_response_with_its_status() -> None:
    response = sdk_http_package().Response(200, request=_http_request())
    error = anthropic.APIResponseValidationError(response=response, body={"content": 7})
    mapped = WIRE.map_error(error)
    assert isinstance(mapped, ServerError) and str(mapped).startswith("malformed response")
    assert (mapped.status, mapped.body) == (200, {"content": 7})


def test_a_value_error_is_a_bad_request_unless_the_reply_could_not_be_parsed() -> None:
    refused = WIRE.map_error(ValueError("max_tokens must be positive"))
    assert type(refused) is BadRequestError and refused.status is None
    assert str(refused) == "max_tokens must be positive"
    unparsed = WIRE.map_error(ValueError("Unable to parse the response body"))
    assert type(unparsed) is ServerError and str(unparsed).startswith("malformed response")


def test_the_sdks_credentials_error_is_an_authentication_error() -> None:
    mapped = WIRE.map_error(anthropic.CredentialsError("the token could not be refreshed"))
    assert type(mapped) is AuthenticationError and mapped.status is None


def test_a_stream_out_of_order_is_malformed_and_other_runtime_errors_are_not_mapped() -> None:
    mapped = WIRE.map_error(RuntimeError("Unexpected event order, got content_block_delta before message_start"))
    assert type(mapped) is ServerError and str(mapped).startswith("malformed stream")
    assert WIRE.map_error(RuntimeError("event loop is closed")) is None


def test_a_type_error_of_the_callers_code_is_not_missing_credentials() -> None:
    assert WIRE.map_error(TypeError("unsupported operand type(s) for +: 'int' and 'str'")) is None
    missing = WIRE.map_error(TypeError('"Could not resolve authentication method. Expected the api_key"'))
    assert type(missing) is AuthenticationError


# -- errors: statuses and the API's error types ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, BadRequestError),
        (404, BadRequestError),
        (413, BadRequestError),
        (422, BadRequestError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (429, RateLimitedError),
        (503, OverloadedError),
        (529, OverloadedError),
        (500, ServerError),
        (502, ServerError),
        (408, ServerError),
        (409, ServerError),
    ],
)
def test_a_status_without_an_error_body_is_mapped_by_the_status_alone(status: int, expected: type[ProviderError]) -> None:
    """A proxy's or gateway's answer carries no Anthropic error body: its status decides."""
    mapped = WIRE.map_error(_status_error(status, None, "a gateway's page"))
    assert type(mapped) is expected and mapped.status == status
    assert str(mapped) == "a gateway's page"  # no API message: the SDK's text


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_prompt_too_long_refusal_is_read_under_each_refusal_status(status: int) -> None:
    body = _body("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum")
    mapped = WIRE.map_error(_status_error(status, body))
    assert isinstance(mapped, PromptTooLongError) and (mapped.actual_tokens, mapped.limit_tokens) == (212_345, 200_000)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("api_error", ServerError),
        ("timeout_error", ServerError),
        ("not_found_error", BadRequestError),
        ("overloaded_error", OverloadedError),
        ("rate_limit_error", RateLimitedError),
        ("permission_error", AuthenticationError),
    ],
)
def test_an_unlisted_status_is_mapped_by_the_apis_error_type(kind: str, expected: type[ProviderError]) -> None:
    mapped = WIRE.map_error(_status_error(418, _body(kind)))
    assert type(mapped) is expected and mapped.status == 418


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("invalid_request_error", BadRequestError),
        ("authentication_error", AuthenticationError),
        ("permission_error", AuthenticationError),
        ("rate_limit_error", RateLimitedError),
        ("overloaded_error", OverloadedError),
        ("api_error", ServerError),
        ("some_new_error", ServerError),
    ],
)
def test_an_error_event_inside_a_stream_is_mapped_by_its_type_with_status_200(kind: str, expected: type[ProviderError]) -> None:
    event = _body(kind, f"the server says {kind}")
    mapped = WIRE.stream_error(event, "req_1", {})
    assert type(mapped) is expected
    assert (mapped.status, mapped.request_id, str(mapped)) == (200, "req_1", f"the server says {kind}")


def test_a_prompt_too_long_error_event_inside_a_stream_is_a_prompt_too_long_error() -> None:
    event = _body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    mapped = WIRE.stream_error(event, None, {})
    assert isinstance(mapped, PromptTooLongError) and mapped.token_gap == 10_000 and mapped.status == 200


def test_the_apis_own_message_is_the_errors_text_and_a_non_text_one_is_not() -> None:
    said = WIRE.map_error(_status_error(400, _body("invalid_request_error", "messages: at least one message is required")))
    assert str(said) == "messages: at least one message is required"
    odd = WIRE.map_error(_status_error(400, {"error": {"type": "invalid_request_error", "message": {"nested": 1}}}))
    assert str(odd) == "Error code: from the SDK"


# -- a reply's blocks and usage --------------------------------------------------------------------


def _message(content: list[dict[str, Any]], usage: dict[str, Any] | None = None, *, beta: bool = False) -> Any:
    data = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 5, "output_tokens": 2},
    }
    kind = anthropic.types.beta.BetaMessage if beta else anthropic.types.Message
    return kind.model_validate(data)


def test_a_replys_blocks_are_stored_with_their_type_first_and_only_their_own_fields() -> None:
    """The SDK's models order their fields alphabetically and add fields of their own (a
    tool call's `caller`); the stored blocks are written as the API writes them, whatever
    the SDK version, so a session's file and its next request keep the same bytes."""
    reply = WIRE.from_response(
        _message([
            {"type": "thinking", "thinking": "look first", "signature": "sig_1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a.py"}, "caller": {"type": "direct"}},
        ])
    )
    assert [json.dumps(block) for block in reply.content] == [
        '{"type": "thinking", "thinking": "look first", "signature": "sig_1"}',
        '{"type": "redacted_thinking", "data": "opaque"}',
        '{"type": "text", "text": "Reading."}',
        '{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a.py"}}',
    ]


def test_a_texts_citations_are_kept_as_the_server_gave_them_nulls_included() -> None:
    citation = {"type": "char_location", "cited_text": "a", "document_index": 0, "document_title": None, "start_char_index": 0, "end_char_index": 1}
    reply = WIRE.from_response(_message([{"type": "text", "text": "As cited.", "citations": [citation]}]))
    (block,) = reply.content
    assert block["type"] == "text" and block["text"] == "As cited."
    assert block["citations"][0]["document_title"] is None and block["citations"][0]["cited_text"] == "a"  # type: ignore[typeddict-item]


def test_a_compaction_block_without_its_raw_json_keeps_its_nulls() -> None:
    block = {"type": "compaction", "content": "the summary", "encrypted_content": None}
    reply = WIRE.from_response(_message([block], beta=True))
    assert reply.content == [block]


def test_usage_fields_the_server_left_null_or_zero_read_as_zero() -> None:
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }
    reply = WIRE.from_response(_message([{"type": "text", "text": "ok"}], usage))
    assert reply.usage == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }


def test_usage_keeps_deleted_cache_tokens_and_iterations_only_when_there_are_some() -> None:
    usage = {**compaction_usage({"input_tokens": 60_000, "output_tokens": 900}, {"input_tokens": 5, "output_tokens": 2}), "cache_deleted_input_tokens": 1_200}
    full = WIRE.from_response(_message([{"type": "text", "text": "ok"}], usage, beta=True)).usage
    assert full.get("cache_deleted_input_tokens") == 1_200
    assert [(step["type"], step["input_tokens"]) for step in full.get("iterations", [])] == [("compaction", 60_000), ("message", 5)]
    bare = WIRE.from_response(_message([{"type": "text", "text": "ok"}], {"input_tokens": 5, "output_tokens": 2, "iterations": []}, beta=True)).usage
    assert "iterations" not in bare and "cache_deleted_input_tokens" not in bare


def test_the_raw_compaction_blocks_of_a_body_are_found_by_index_and_nothing_else() -> None:
    block = {"type": "compaction", "content": "s", "encrypted_content": None, "signature": "x"}
    body = {"content": ["a stray string", {"type": "text", "text": "hi"}, block]}
    assert WIRE.raw_compaction_blocks(body) == {2: block}
    for nothing in (None, [block], {"content": None}, {"id": "msg_1"}):
        assert WIRE.raw_compaction_blocks(nothing) == {}


# -- the stream fold -------------------------------------------------------------------------------


def _sdk_event(event: dict[str, Any]) -> Any:
    """An event as the SDK's plain-Messages stream builds it (leniently: a compaction block
    start is kept, as the drop-in's raw `create(stream=True)` hands it over)."""
    from anthropic._models import construct_type

    return construct_type(type_=anthropic.types.RawMessageStreamEvent, value=event)


START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 7, "output_tokens": 1}}}
END = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]


def test_events_before_message_start_are_ignored() -> None:
    fold = WIRE.stream_assembler()
    for event in [{"type": "ping"}, START, {"type": "ping"}, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}, {"type": "content_block_stop", "index": 0}, *END]:
        fold.add(event)
    assert fold.finish(None).text == "Hi"


@pytest.mark.filterwarnings("ignore::UserWarning")  # the plain SDK model warns dumping a compaction block
def test_the_plain_sdk_folds_message_gets_its_compaction_blocks_summary() -> None:
    """The SDK's plain-Messages fold leaves a compaction delta out; the fold applies it, so
    the SDK message it holds (and the reply's raw dump) carry the summary."""
    events = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", "content": None, "encrypted_content": None, "signature": "sig_1"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", "content": "the summary", "encrypted_content": "state-1"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Going on."}},
        {"type": "content_block_stop", "index": 1},
        *END,
    ]
    fold = WIRE.stream_assembler()
    for event in events:
        fold.add(_sdk_event(event))
    block = fold.snapshot.content[0]
    assert (block.content, block.encrypted_content) == ("the summary", "state-1")
    reply = fold.finish(None)
    assert reply.content[0] == {"type": "compaction", "content": "the summary", "encrypted_content": "state-1", "signature": "sig_1"}
    assert reply.raw["content"][0]["content"] == "the summary"
    assert reply.content[1] == {"type": "text", "text": "Going on."}


def test_a_compaction_delta_at_a_block_that_is_no_compaction_changes_nothing() -> None:
    events = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", "content": "stray", "encrypted_content": None}},
        {"type": "content_block_stop", "index": 0},
        *END,
    ]
    fold = WIRE.stream_assembler()
    for event in events:
        fold.add(_sdk_event(event))
    reply = fold.finish(None)
    assert reply.content == [{"type": "text", "text": "Hi"}] and fold.raw_blocks == {}


@pytest.mark.filterwarnings("ignore::UserWarning")  # the plain SDK model warns dumping a compaction block
def test_a_delta_of_another_kind_at_a_compaction_block_leaves_its_values() -> None:
    events = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", "content": None, "encrypted_content": None, "signature": "sig_1"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", "content": "the summary", "encrypted_content": "state-1"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "stray"}},
        {"type": "content_block_stop", "index": 0},
        *END,
    ]
    fold = WIRE.stream_assembler()
    for event in events:
        fold.add(_sdk_event(event))
    block = fold.snapshot.content[0]
    assert (block.content, block.encrypted_content) == ("the summary", "state-1")
    assert fold.finish(None).content[0] == {"type": "compaction", "content": "the summary", "encrypted_content": "state-1", "signature": "sig_1"}


# -- the caller's messages, as the session stores them ---------------------------------------------


def test_inbound_keeps_string_content_and_reads_missing_content_as_no_blocks() -> None:
    back = WIRE.inbound([{"role": "user", "content": "fix the parser"}, {"role": "assistant"}])
    assert back == InboundMessages("", [{"role": "user", "content": "fix the parser"}, {"role": "assistant", "content": []}])


def test_inbound_reads_a_bare_string_block_as_text_and_refuses_what_is_no_block() -> None:
    back = WIRE.inbound([{"role": "user", "content": ["look at this", {"type": "text", "text": "and this"}]}])
    assert back.messages[0]["content"] == [{"type": "text", "text": "look at this"}, {"type": "text", "text": "and this"}]
    with pytest.raises(ConfigError, match="a content block must be a dict or an SDK block"):
        WIRE.inbound([{"role": "user", "content": [3]}])


def test_inbound_keeps_a_tool_results_string_content_as_it_is() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "file contents", "cache_control": {"type": "ephemeral"}}
    back = WIRE.inbound([{"role": "user", "content": [result]}])
    assert back.messages[0]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "file contents"}]


def test_inbound_stores_an_sdk_block_without_its_null_fields_but_a_compaction_block_with_them() -> None:
    """A reply's SDK text block carries `citations: null`, which the session does not store;
    a compaction block goes back exactly as the server sent it, its nulls included."""
    text = anthropic.types.TextBlock(type="text", text="Reading.", citations=None)
    compaction = anthropic.types.beta.BetaCompactionBlock(type="compaction", content="the summary", encrypted_content=None)
    back = WIRE.inbound([{"role": "assistant", "content": [text, compaction]}])
    assert back.messages[0]["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "compaction", "content": "the summary", "encrypted_content": None},
    ]
