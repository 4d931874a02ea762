"""Items and blocks the library does not read go back byte-for-byte (issue 28, Must show): an
OpenAI response carrying a compaction item, and an Anthropic reply carrying a compaction
block, streamed or not, through the real SDKs against the local server. The server writes
compact JSON, as the SDKs do, so an item's bytes in the reply are its bytes in the next
request when nothing was re-ordered, re-typed or dropped on the way."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (  # noqa: F401  (api_server_fixture registers the api_server fixture)
    ApiServer,
    api_server_fixture,
    compaction_block,
    compaction_usage,
    cut_stream,
    malformed,
    message,
    stream_error,
)
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

openai = pytest.importorskip("openai")

# The server's key order (id, type, then the rest) differs from the SDK model's field order
# (id, encrypted_content, type, created_by): re-serializing the SDK object moves the keys.
COMPACTION_ITEM = {
    "id": "cmp_0a1b2c",
    "type": "compaction",
    "encrypted_content": "gAAAAABpZ2VuY3J5cHRlZC1zdGF0ZS0x+/==",
    "created_by": None,
}
REASONING_ITEM = {"id": "rs_7f", "type": "reasoning", "summary": [], "encrypted_content": "enc/1=", "status": None}


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _session(model: str) -> Session:
    return Session(SessionConfig(model=model, system="You are a coding agent."), store=MemoryStore())


@pytest.mark.parametrize(("stream", "gzip"), [(False, False), (True, False), (True, True)])
def test_an_openai_compaction_item_is_sent_back_byte_for_byte(api_server: ApiServer, stream: bool, gzip: bool) -> None:
    from unbounded.providers.openai import OpenAIProvider

    api_server.gzip_streams = gzip  # the real API gzips its streams
    api_server.responses.push(message(REASONING_ITEM, COMPACTION_ITEM, "Going on with the parser."), message("Done."))
    provider = OpenAIProvider(api_server.openai_client(), api="responses")
    session = _session("gpt-5.4")
    session.add_user("Fix the parser in src/parse.py")
    asyncio.run(session.call(provider, stream=stream))
    session.add_user("And the tests?")
    asyncio.run(session.call(provider, stream=stream))
    for item in (COMPACTION_ITEM, REASONING_ITEM):
        sent = _compact(item)
        assert sent in api_server.requests[0].reply  # as the server wrote it
        assert sent in api_server.requests[1].body, f"{item['type']} item not sent back as received"
    assert not api_server.rejected


def _responses_provider(api_server: ApiServer, *, sync: bool = False) -> Any:
    from unbounded.providers.openai import OpenAIProvider

    return OpenAIProvider(api_server.openai_client(sync=sync), api="responses")


REQUEST: Any = {"model": "gpt-5.4", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize("stream", [False, True])
def test_a_raw_responses_reply_that_is_malformed_cut_or_failed_is_a_server_error(api_server: ApiServer, stream: bool, sync: bool) -> None:
    from unbounded.errors import ServerError

    api_server.responses.push(malformed(), cut_stream(message("never finished " * 4), after_events=3), message("whole"))
    provider = _responses_provider(api_server, sync=sync)
    create = provider.create_sync if sync else (lambda r, **k: asyncio.run(provider.create(r, **k)))
    with pytest.raises(ServerError, match="malformed"):
        create(REQUEST, stream=stream)
    with pytest.raises(ServerError) as cut:
        create(REQUEST, stream=stream)
    assert cut.value.request_id == api_server.requests[1].request_id
    reply = create(REQUEST, stream=stream)
    assert reply.text == "whole" and reply.id.startswith("resp_")
    if stream:
        api_server.responses.push(stream_error(error_type="server_error"))
        with pytest.raises(ServerError, match="Overloaded"):
            create(REQUEST, stream=True)


def test_the_sse_decoder_joins_data_lines_and_refuses_what_is_not_a_json_object() -> None:
    from unbounded.errors import ServerError
    from unbounded.wire.sse import SseDecoder

    decoder = SseDecoder()
    lines = ["event: response.created", 'data: {"type":"response.created",', 'data: "b":1}', ""]
    assert [decoder.feed(line) for line in lines] == [None, None, None, {"type": "response.created", "b": 1}]
    assert decoder.feed("") is None and decoder.feed(": keep-alive") is None
    decoder.feed("data: [1]")
    with pytest.raises(ServerError, match="not an object"):
        decoder.feed("")
    decoder.feed("data: {nope")
    with pytest.raises(ServerError, match="not JSON"):
        decoder.feed("")


def test_the_sse_decoder_ends_the_stream_at_done() -> None:
    from unbounded.wire.sse import SseDecoder

    decoder = SseDecoder()
    assert [decoder.feed(line) for line in ['data: {"type":"a"}', "", "data: [DONE]", ""]] == [None, {"type": "a"}, None, None]
    assert decoder.finished
    assert [decoder.feed(line) for line in ['data: {"type":"b"}', ""]] == [None, None]  # nothing after the end


@pytest.mark.parametrize("sync", [False, True])
def test_a_streamed_responses_reply_ending_in_done_is_read_whole(api_server: ApiServer, sync: bool) -> None:
    api_server.responses_done = True
    api_server.responses.push(message("whole"))
    provider = _responses_provider(api_server, sync=sync)
    reply = provider.create_sync(REQUEST, stream=True) if sync else asyncio.run(provider.create(REQUEST, stream=True))
    assert reply.text == "whole"
    assert api_server.requests[0].reply.endswith(b"data: [DONE]\n\n")  # the server did send it


# -- Anthropic: a compaction block, non-streamed or streamed (one compaction_delta) ----------------


@pytest.mark.parametrize("stream", ["no", "create", "helper"])
@pytest.mark.parametrize("full_history", [True, False])
@pytest.mark.parametrize("gzip", [False, True])  # the real APIs gzip their streams
def test_server_compaction_through_the_anthropic_drop_in_keeps_the_block_whole(api_server: ApiServer, stream: str, full_history: bool, gzip: bool) -> None:
    api_server.gzip_streams = gzip
    """`wrap(client, session)` with `ServerCompaction`: the compact edit goes out, the reply's
    block (streamed as the API streams it) comes back to the caller, and the next request
    carries it unchanged, whether the caller sends the whole history or only the new turn."""
    pytest.importorskip("anthropic")
    from unbounded.compaction.native import ServerCompaction
    from unbounded.integrations.dropin import wrap

    block = compaction_block(nine_section_summary("the parser"))
    api_server.anthropic.push(message(block, "Going on with the parser.", usage=compaction_usage({"input_tokens": 60_000, "output_tokens": 900})), message("Done."))
    session = Session(SessionConfig(model="claude-sonnet-4-6", system="You are a coding agent."), store=MemoryStore(), extensions=[ServerCompaction()])
    client = wrap(api_server.anthropic_client(sync=True), session)  # the drop-in names its provider
    history: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
    options = {"model": "claude-sonnet-4-6", "max_tokens": 1_000}
    if stream == "helper":
        with client.messages.stream(messages=history, **options) as events:
            reply = events.get_final_message()
    elif stream == "create":  # the raw events, folded by the drop-in
        with client.messages.create(messages=history, stream=True, **options) as events:
            kinds = [event.type for event in events]
        assert "content_block_delta" in kinds
    else:
        reply = client.messages.create(messages=history, **options)
    recorded = session.entries[-1].content
    assert isinstance(recorded, list) and recorded[0] == block  # recorded whole
    content: Any = recorded if stream == "create" else reply.content  # what the caller has
    if stream != "create":
        assert reply.content[0].model_dump(mode="json", exclude_unset=True) == block
    assert api_server.requests[0].json["context_management"]["edits"][0]["type"] == "compact_20260112"
    turn = {"role": "user", "content": "And the tests?"}
    history += [{"role": "assistant", "content": content}, turn]
    client.messages.create(messages=history if full_history else [turn], **options)
    assert not api_server.rejected  # the server checked the block's signature
    sent = api_server.requests[1].json["messages"][1]["content"][0]
    assert {k: v for k, v in sent.items() if k != "cache_control"} == block


@pytest.mark.parametrize(("stream", "gzip"), [(False, False), (True, False), (True, True)])
def test_an_anthropic_compaction_block_is_sent_back_byte_for_byte(api_server: ApiServer, stream: bool, gzip: bool) -> None:
    """The server writes the block type first (the SDK model would put `content` first); a
    stream opens it empty and fills it with one compaction_delta. Either way the next
    request carries the bytes a non-streamed reply holds."""
    pytest.importorskip("anthropic")
    from unbounded.compaction.native import ServerCompaction
    from unbounded.providers.anthropic import AnthropicProvider

    api_server.gzip_streams = gzip  # the real API gzips its streams
    block = compaction_block(nine_section_summary("the parser"), None)  # a null kept as null
    api_server.anthropic.push(message(block, "Going on.", usage=compaction_usage({"input_tokens": 60_000, "output_tokens": 900})), message("Done."))
    config = SessionConfig(model="claude-sonnet-4-6", system="You are a coding agent.", max_tokens=4_000)
    session = Session(config, store=MemoryStore(), extensions=[ServerCompaction()])
    provider = AnthropicProvider(api_server.anthropic_client())
    session.add_user("Fix the parser in src/parse.py")
    asyncio.run(session.call(provider, stream=stream))
    assert api_server.requests[0].stream is stream
    session.add_user("And the tests?")
    asyncio.run(session.call(provider, stream=stream))
    sent = _compact(block)
    if not stream:
        assert sent in api_server.requests[0].reply  # as the server wrote it
    # The cache marker the pipeline may add goes after the block's own keys.
    assert sent[:-1] in api_server.requests[1].body, "the compaction block was not sent back as received"
    assert not api_server.rejected


@pytest.mark.parametrize("summarizer", [None, "extractive"])
def test_the_anthropic_drop_in_asks_for_server_compaction_whatever_writes_the_summaries(api_server: ApiServer, summarizer: str | None) -> None:
    """The compact edit follows the provider the requests go to, not the summarizer: an
    offline summarizer (or none, on a session the caller built) still gets the edit sent."""
    pytest.importorskip("anthropic")
    from unbounded.compaction.native import ServerCompaction
    from unbounded.integrations.dropin import wrap

    api_server.anthropic.push(message("Looking."))
    session = Session(SessionConfig(model="claude-sonnet-4-6"), store=MemoryStore(), extensions=[ServerCompaction()])
    client = wrap(api_server.anthropic_client(sync=True), session, summarizer=summarizer)
    client.messages.create(model="claude-sonnet-4-6", max_tokens=1_000, messages=[{"role": "user", "content": "Fix the parser"}])
    edits = api_server.requests[0].json["context_management"]["edits"]
    assert [edit["type"] for edit in edits] == ["compact_20260112"]
    provider = session.call_provider()
    assert provider is not None and "compact_20260112" in provider.profile.native_context_edits


# -- through the drop-ins: the caller holds SDK objects, the next request carries the server's bytes


# The SDK's stream helpers (and the OpenAI SDK's event stream) hand the caller SDK objects in the
# SDK model's field order; the drop-in reads the same bytes raw as they pass (`_raw_tap`).


@pytest.mark.parametrize("stream", ["no", "create", "helper"])
@pytest.mark.parametrize("gzip", [False, True])  # the real APIs gzip their streams
def test_the_anthropic_drop_in_sends_a_compaction_block_back_byte_for_byte(api_server: ApiServer, stream: str, gzip: bool) -> None:
    api_server.gzip_streams = gzip
    """The caller sends the SDK's content objects back (or, for raw events, what it folded
    itself); the next request carries the block as the server wrote it, not in the SDK
    model's key order."""
    pytest.importorskip("anthropic")
    from unbounded.compaction.native import ServerCompaction
    from unbounded.integrations.dropin import wrap

    block = compaction_block(nine_section_summary("the parser"), None)
    api_server.anthropic.push(message(block, "Going on.", usage=compaction_usage({"input_tokens": 60_000, "output_tokens": 900})), message("Done."))
    session = Session(SessionConfig(model="claude-sonnet-4-6"), store=MemoryStore(), extensions=[ServerCompaction()])
    client = wrap(api_server.anthropic_client(sync=True), session)
    history: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
    options = {"model": "claude-sonnet-4-6", "max_tokens": 1_000}
    if stream == "helper":
        with client.messages.stream(messages=history, **options) as events:
            content: Any = events.get_final_message().content
    elif stream == "create":
        with client.messages.create(messages=history, stream=True, **options) as events:
            starts = [event.content_block for event in events if event.type == "content_block_start"]
        content = [{"type": "compaction", "content": block["content"], "encrypted_content": None, "signature": block["signature"]}, starts[1]]
        content[1].text = "Going on."
    else:
        content = client.messages.create(messages=history, **options).content
    history += [{"role": "assistant", "content": content}, {"role": "user", "content": "And the tests?"}]
    client.messages.create(messages=history, **options)
    assert not api_server.rejected
    assert _compact(block)[:-1] in api_server.requests[1].body, "the compaction block was not sent back as received"


@pytest.mark.parametrize("stream", ["no", "create", "helper"])
@pytest.mark.parametrize("gzip", [False, True])  # the real APIs gzip their streams
def test_the_openai_drop_in_sends_reasoning_and_compaction_items_back_byte_for_byte(api_server: ApiServer, stream: str, gzip: bool) -> None:
    api_server.gzip_streams = gzip
    """The caller sends the SDK's output items back (`reply.output`); the next request's
    input carries them as the server wrote them."""
    from unbounded.integrations.dropin import wrap

    api_server.responses.push(message(REASONING_ITEM, COMPACTION_ITEM, "Going on with the parser."), message("Done."))
    client = wrap(api_server.openai_client(sync=True), _session("gpt-5.4"))
    items: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
    if stream == "helper":
        with client.responses.stream(model="gpt-5.4", input=items) as events:
            output = events.get_final_response().output
    elif stream == "create":
        events = client.responses.create(model="gpt-5.4", input=items, stream=True)
        output = next(event for event in events if event.type == "response.completed").response.output
    else:
        output = client.responses.create(model="gpt-5.4", input=items).output
    items += [*output, {"role": "user", "content": "And the tests?"}]
    client.responses.create(model="gpt-5.4", input=items)
    assert not api_server.rejected
    for item in (COMPACTION_ITEM, REASONING_ITEM):
        assert _compact(item) in api_server.requests[1].body, f"{item['type']} item not sent back as received"
