"""Wire formats: each one round-trips the shapes it converts, with no SDK call made."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.errors import ConfigError, PromptTooLongError, ServerError
from unbounded.model.request import ProviderRequest
from unbounded.wire import FORMATS, AnthropicMessages, InboundMessages, OpenAIChat, wire_format
from unbounded.wire.base import ALL_FIELDS
from unbounded.wire.openai_chat import convert_messages

# -- the registry -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_registered_format_is_found_by_its_name_and_is_complete(name: str) -> None:
    wire = wire_format(name)
    assert wire.name == name
    for method in ("to_request", "from_response", "stream_assembler", "map_error", "inbound"):
        assert callable(getattr(wire, method)), method
    assert wire.inbound([]) == InboundMessages("", [])
    assert wire.map_error(KeyError("not a provider error")) is None


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="no wire format 'soap'; the formats are: anthropic-messages, openai-chat, openai-responses"):
        wire_format("soap")


# -- Chat Completions: Anthropic messages out and back --------------------------------------------

words = st.text(alphabet="abcdefgh xyz.", min_size=1, max_size=12).filter(lambda t: t.strip() == t and t != "")
ids = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8)
arguments = st.dictionaries(st.sampled_from(["path", "n", "flag"]), st.one_of(words, st.integers(0, 9), st.booleans()), max_size=3)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """An Anthropic-shaped request in the form Chat Completions carries without loss: user text,
    an assistant's text and tool calls, the results of those calls (and maybe a text after them)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(words)}]
    for _ in range(draw(st.integers(0, 4))):
        call_ids = draw(st.lists(ids, max_size=3, unique=True))
        text = draw(st.one_of(st.none(), words))
        blocks: list[dict[str, Any]] = [] if text is None else [{"type": "text", "text": text}]
        blocks += [{"type": "tool_use", "id": i, "name": draw(words), "input": draw(arguments)} for i in call_ids]
        if not blocks:
            blocks = [{"type": "text", "text": draw(words)}]
        messages.append({"role": "assistant", "content": blocks})
        if call_ids:
            results: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": draw(words)} for i in call_ids]
            after = draw(st.one_of(st.none(), words))
            messages.append({"role": "user", "content": results + ([] if after is None else [{"type": "text", "text": after}])})
        else:
            messages.append({"role": "user", "content": draw(words)})
    system = draw(st.one_of(st.just(""), words))
    return {"model": "m", "max_tokens": 100, "system": system, "messages": messages}


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_chat_messages_come_back_as_the_anthropic_messages_they_were_made_of(request: dict[str, Any]) -> None:
    back = OpenAIChat().inbound(convert_messages(request))  # type: ignore[arg-type]
    assert back == InboundMessages(request["system"], request["messages"])


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_every_tool_message_answers_a_call_of_the_assistant_message_before_it(request: dict[str, Any]) -> None:
    """The request stays valid for Chat Completions: a `tool` message follows the assistant
    message that made the call, with only other tool messages between them."""
    sent = OpenAIChat().to_request(request, stream=False)  # type: ignore[arg-type]
    open_calls: set[str] = set()
    for message in sent["messages"]:
        if message["role"] == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls", [])}
            assert all(json.loads(c["function"]["arguments"]) is not None for c in message.get("tool_calls", []))
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls or message["role"] == "system"
            open_calls = set()


def test_chat_inbound_reads_images_files_and_developer_messages() -> None:
    back = OpenAIChat().inbound([
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "file", "file": {"filename": "spec.pdf", "file_data": "data:application/pdf;base64,UERG"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "not json"}}]},
    ])
    assert back.system == "Be brief."
    assert back.messages[0]["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "UERG"}, "title": "spec.pdf"},
    ]
    assert back.messages[1]["content"] == [{"type": "tool_use", "id": "c1", "name": "Read", "input": {"raw": "not json"}}]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"role": "user", "content": "a"}, "hello"], "message 1: a Chat Completions message is a dict with a role"),
        ([{"role": "critic", "content": "a"}], "message 0: role 'critic' is not a Chat Completions role"),
        ([{"role": "function", "name": "ls", "content": "a"}], "message 0: role 'function' is the deprecated function calling .* 'tool' message"),
        ([{"role": "user", "content": [{"type": "input_audio"}]}], "message 0: user content part 'input_audio' is not one"),
        ([{"role": "user", "content": 3}], "message 0: content must be a string or a list of parts"),
    ],
)
def test_chat_inbound_says_which_message_it_cannot_read(messages: list[Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        OpenAIChat().inbound(messages)


def test_chat_format_refuses_an_unknown_max_tokens_parameter_when_built() -> None:
    with pytest.raises(ConfigError, match="max_tokens_param must be max_tokens or max_completion_tokens, not 'max_output'"):
        OpenAIChat(max_tokens_param="max_output")


def test_chat_reply_and_stream_come_back_in_anthropic_shape() -> None:
    openai = pytest.importorskip("openai")
    completion = openai.types.chat.ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": "{\"path\": \"a.py\"}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    })
    whole = OpenAIChat().from_response(completion)
    assert whole.content == [{"type": "text", "text": "Reading."}, {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a.py"}}]
    assert (whole.stop_reason, whole.usage["input_tokens"], whole.usage["output_tokens"]) == ("tool_use", 10, 3)
    chunk = openai.types.chat.ChatCompletionChunk.model_validate
    fold = OpenAIChat().stream_assembler()
    for delta, finish in (({"content": "Read"}, None), ({"content": "ing."}, None), ({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "Read", "arguments": "{\"path\": "}}]}, None), ({"tool_calls": [{"index": 0, "function": {"arguments": "\"a.py\"}"}}]}, "tool_calls")):
        fold.add(chunk({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    fold.add(chunk({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-x", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}))
    streamed = fold.finish("req-1")
    assert (streamed.content, streamed.stop_reason, streamed.usage) == (whole.content, whole.stop_reason, whole.usage)
    with pytest.raises(ServerError, match="without a finish_reason"):
        OpenAIChat().stream_assembler().finish("req-1")


# -- Anthropic Messages ------------------------------------------------------------------------------


def test_messages_fields_the_sdk_method_does_not_name_travel_in_extra_body() -> None:
    request: ProviderRequest = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5, "betas": ["b1"], "cache_edits": [{"type": "delete", "cache_reference": "t1"}]}  # type: ignore[typeddict-unknown-key, list-item]
    named = frozenset({"model", "max_tokens", "messages", "betas"})
    assert AnthropicMessages().to_request(request, stream=False, accepted=named) == {
        "model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "betas": ["b1"], "extra_body": {"temperature": 0.5},
    }
    sent = AnthropicMessages(cache_edits=True).to_request(request, stream=False, accepted=ALL_FIELDS)
    assert sent["extra_body"] == {"cache_edits": [{"type": "delete", "cache_reference": "t1"}]} and sent["temperature"] == 0.5


def test_messages_inbound_keeps_content_and_drops_the_callers_cache_markers() -> None:
    anthropic = pytest.importorskip("anthropic")
    sdk_block = anthropic.types.TextBlock(type="text", text="from the SDK")
    back = AnthropicMessages().inbound([
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [sdk_block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}]}]},
    ])
    assert back == InboundMessages("", [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "from the SDK"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]}]},
    ])
    with pytest.raises(ConfigError, match="message 0: a Messages API message is a dict with role user or assistant"):
        AnthropicMessages().inbound([{"role": "system", "content": "x"}])


def test_messages_stream_events_fold_into_the_whole_reply() -> None:
    anthropic = pytest.importorskip("anthropic")
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 7, "output_tokens": 1}}
    events = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    adapter: Any = anthropic.TypeAdapter(anthropic.types.RawMessageStreamEvent) if hasattr(anthropic, "TypeAdapter") else None
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(anthropic.types.RawMessageStreamEvent)
    fold = AnthropicMessages().stream_assembler()
    for event in events[:-1]:
        fold.add(adapter.validate_python(event))
    with pytest.raises(ServerError, match="before message_stop"):
        fold.finish("req-1")
    fold.add(adapter.validate_python(events[-1]))
    reply = fold.finish("req-1")
    assert (reply.text, reply.stop_reason, reply.usage["input_tokens"], reply.usage["output_tokens"], reply.id) == ("Hello", "end_turn", 7, 2, "msg_1")
    whole = AnthropicMessages().from_response(anthropic.types.Message.model_validate({**message, "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn", "usage": {"input_tokens": 7, "output_tokens": 2}}))
    assert (whole.content, whole.usage) == (reply.content, reply.usage)


def test_both_formats_map_a_prompt_too_long_status_alike() -> None:
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    import httpx

    request = httpx.Request("POST", "http://test")
    claude = anthropic.BadRequestError("prompt is too long: 210000 tokens > 200000 maximum", response=httpx.Response(400, request=request), body={"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
    gpt = openai.BadRequestError("too long", response=httpx.Response(400, request=request), body={"message": "This model's maximum context length is 200000 tokens. However, you requested 210000 tokens", "code": "context_length_exceeded"})
    for wire, error in ((AnthropicMessages(), claude), (OpenAIChat(), gpt)):
        mapped = wire.map_error(error)
        assert isinstance(mapped, PromptTooLongError) and (mapped.actual_tokens, mapped.limit_tokens, mapped.status) == (210_000, 200_000, 400)
