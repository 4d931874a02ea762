"""The drop-in reads the raw events under the SDK stream the caller reads (`_raw_tap`): the
bytes are split into lines and events as they pass, whatever the chunking; a malformed event
stops the tap, never the caller's stream; a compressed body is read decoded, as the SDK reads
it (the real APIs gzip their streams). Through the async
clients' stream helpers, what the next request sends back is the server's own JSON."""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import ApiServer, api_server_fixture, compaction_block, compaction_usage, message  # noqa: F401  (registers the api_server fixture)
from unbounded.integrations._raw_tap import RawEventTap, tap_response
from unbounded.session import Session, SessionConfig

EVENTS = [{"type": "a", "text": "caf\u00e9"}, {"type": "b", "n": 2}]
BODY = "".join(f"event: {e['type']}\r\ndata: {json.dumps(e, ensure_ascii=False)}\r\n\r\n" for e in EVENTS).encode()


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("size", [1, 2, 7, len(BODY)])
def test_the_tap_reads_every_event_whatever_the_chunks(size: int) -> None:
    seen: list[dict[str, Any]] = []
    tap = RawEventTap(seen.append)
    for start in range(0, len(BODY), size):
        tap.feed(BODY[start : start + size])  # a chunk may end inside a line or a character
    assert seen == EVENTS and not tap.failed
    assert [list(event) for event in seen] == [list(event) for event in EVENTS]  # the server's key order


def test_a_malformed_event_stops_the_tap_without_raising() -> None:
    seen: list[dict[str, Any]] = []
    tap = RawEventTap(seen.append)
    tap.feed(b'data: {"type":"a"}\n\ndata: {not json\n\ndata: {"type":"b"}\n\n')
    assert tap.failed and seen == [{"type": "a"}]


@pytest.mark.parametrize("encoding", ["identity", "gzip", "deflate"])
def test_the_tap_reads_the_decoded_body_whatever_its_encoding(encoding: str) -> None:
    httpx = pytest.importorskip("httpx")
    compress = {"identity": lambda b: b, "gzip": lambda b: zlib_compress(b, 31), "deflate": lambda b: zlib_compress(b, 15)}[encoding]
    seen: list[dict[str, Any]] = []
    tap = RawEventTap(seen.append)
    response = httpx.Response(200, headers={"content-encoding": encoding}, stream=httpx.ByteStream(compress(BODY)))
    assert tap_response(response, tap)
    assert b"".join(response.iter_bytes()) == BODY  # the SDK's read is the same
    assert seen == EVENTS and not tap.failed


def zlib_compress(body: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(wbits=wbits)
    return compressor.compress(body) + compressor.flush()


def test_a_fold_that_fails_stops_the_tap_never_the_callers_read() -> None:
    httpx = pytest.importorskip("httpx")
    seen: list[dict[str, Any]] = []

    def fold(event: dict[str, Any]) -> None:
        seen.append(event)
        raise IndexError("no block at that index")  # a bug of the fold, not of the stream

    tap = RawEventTap(fold)
    response = httpx.Response(200, stream=httpx.ByteStream(BODY))
    assert tap_response(response, tap)
    assert b"".join(response.iter_bytes()) == BODY  # the caller reads every byte
    assert tap.failed and seen == EVENTS[:1]


def test_a_response_without_a_decoded_iteration_is_not_tapped() -> None:
    tap = RawEventTap(lambda event: None)
    assert not tap_response(object(), tap)
    assert not tap_response(None, tap)


@pytest.mark.parametrize("gzip", [False, True])
def test_the_async_anthropic_stream_helper_sends_the_compaction_block_back_as_the_server_wrote_it(api_server: ApiServer, gzip: bool) -> None:
    api_server.gzip_streams = gzip
    pytest.importorskip("anthropic")
    from unbounded.compaction.native import ServerCompaction
    from unbounded.integrations.dropin import wrap

    block = compaction_block(nine_section_summary("the parser"), None)
    api_server.anthropic.push(message(block, "Going on.", usage=compaction_usage({"input_tokens": 60_000, "output_tokens": 900})), message("Done."))
    session = Session(SessionConfig(model="claude-sonnet-4-6"), extensions=[ServerCompaction()])
    options = {"model": "claude-sonnet-4-6", "max_tokens": 1_000}

    async def run() -> None:
        client = wrap(api_server.anthropic_client(), session)
        history: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
        async with client.messages.stream(messages=history, **options) as events:
            content = (await events.get_final_message()).content
        history += [{"role": "assistant", "content": content}, {"role": "user", "content": "And the tests?"}]
        await client.messages.create(messages=history, **options)

    asyncio.run(run())
    assert not api_server.rejected
    assert _compact(block)[:-1] in api_server.requests[1].body


COMPACTION_ITEM = {"id": "cmp_0a1b2c", "type": "compaction", "encrypted_content": "gAAAAABpZ2VuY3J5cHRlZC1zdGF0ZS0x+/==", "created_by": None}


@pytest.mark.parametrize("gzip", [False, True])
@pytest.mark.parametrize("stream", ["create", "helper"])
def test_the_async_openai_stream_helpers_send_the_compaction_item_back_as_the_server_wrote_it(api_server: ApiServer, stream: str, gzip: bool) -> None:
    api_server.gzip_streams = gzip
    pytest.importorskip("openai")
    from unbounded.integrations.dropin import wrap

    api_server.responses.push(message(COMPACTION_ITEM, "Going on with the parser."), message("Done."))

    async def run() -> None:
        client = wrap(api_server.openai_client(), Session(SessionConfig(model="gpt-5.4")))
        items: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
        if stream == "helper":
            async with client.responses.stream(model="gpt-5.4", input=items) as events:
                output = (await events.get_final_response()).output
        else:
            events = await client.responses.create(model="gpt-5.4", input=items, stream=True)
            completed = [event async for event in events if event.type == "response.completed"]
            output = completed[-1].response.output
        items.extend([*output, {"role": "user", "content": "And the tests?"}])
        await client.responses.create(model="gpt-5.4", input=items)

    asyncio.run(run())
    assert not api_server.rejected
    assert _compact(COMPACTION_ITEM) in api_server.requests[1].body


@pytest.mark.parametrize("gzip", [False, True])
@pytest.mark.parametrize("sync", [True, False])
def test_the_echo_of_a_stream_helper_reply_is_known_without_reading_it_again(api_server: ApiServer, sync: bool, gzip: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    api_server.gzip_streams = gzip
    pytest.importorskip("anthropic")
    from unbounded.integrations import _anthropic_prints
    from unbounded.integrations.dropin import wrap

    echoes: list[bool] = []
    is_echoed_by = _anthropic_prints._ReplyEcho.is_echoed_by

    def spy(echo: Any, sent: Any) -> bool:
        echoes.append(is_echoed_by(echo, sent))
        return echoes[-1]

    monkeypatch.setattr(_anthropic_prints._ReplyEcho, "is_echoed_by", spy)
    api_server.anthropic.push(message("Reading the parser."), message("Done."))
    options = {"model": "claude-sonnet-4-6", "max_tokens": 1_000}
    history: list[Any] = [{"role": "user", "content": "Fix the parser in src/parse.py"}]
    if sync:
        client = wrap(api_server.anthropic_client(sync=True), Session(SessionConfig(model="claude-sonnet-4-6")))
        with client.messages.stream(messages=history, **options) as events:
            content = events.get_final_message().content
        history += [{"role": "assistant", "content": content}, {"role": "user", "content": "And the tests?"}]
        client.messages.create(messages=history, **options)
    else:

        async def run() -> None:
            client = wrap(api_server.anthropic_client(), Session(SessionConfig(model="claude-sonnet-4-6")))
            async with client.messages.stream(messages=history, **options) as events:
                content = (await events.get_final_message()).content
            history.extend([{"role": "assistant", "content": content}, {"role": "user", "content": "And the tests?"}])
            await client.messages.create(messages=history, **options)

        asyncio.run(run())
    # The caller sends back the SDK's own content list: the echo is that very list, not read again.
    assert echoes[0] is True, echoes
    assert json.loads(api_server.requests[1].body)["messages"][1]["content"][0]["text"] == "Reading the parser."
