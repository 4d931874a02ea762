"""A scripted local server speaking the Anthropic Messages, OpenAI Chat Completions and OpenAI
Responses APIs.

Tests start it on 127.0.0.1 (ephemeral port, one thread per connection), queue the replies
each API should give, point the real SDKs at it and then assert on what the SDKs sent: every
request is recorded with its path, headers and raw body bytes.

    with start_server() as api:
        api.anthropic.push(message("hello"), prompt_too_long())
        client = api.anthropic_client()  # or anthropic.AsyncAnthropic(base_url=api.anthropic_base_url)
        ...
        assert api.requests[0].json["model"] == "claude-sonnet-5-5"
        assert b'"content":"hi"' in api.requests[0].body

Replies are API-neutral where they can be: the same `message(...)` renders as an Anthropic
message (JSON or the real SSE event sequence) or as an OpenAI chat completion (JSON or
`data:` chunks ending in `data: [DONE]`) or as an OpenAI response (JSON or the Responses
API's typed SSE events, `response.created` to `response.completed`), depending on the path it
answers. For the Responses API, a content block of any other type (`reasoning`, `compaction`)
is an output item sent as it is. Errors use each
API's exact body shape. A reply may also be a callable taking the `RecordedRequest` and
returning a reply, for dynamic behaviour.

Like the real API, a Messages request that could never be valid is answered 400 before any
scripted reply is used: a `tool_use` without its `tool_result` in the next message (or a
result answering no call, or two results for one call), a tool_use id with characters other
than letters, digits, `_` and `-`, a final assistant message ending with whitespace, more
than 4 `cache_control` markers, a 1-hour marker after a
5-minute one, `max_tokens` not above the thinking budget, server compaction asked for or
compaction blocks sent without the `compact-2026-01-12` beta, a compaction trigger under
50,000 tokens, `clear_thinking_20251015` not first among several edits, a compaction block
with empty content or one altered since the server signed it (`compaction_block`), and a
prompt over
`ApiServer.context_window` (estimated as body bytes / 4; "prompt is too long"). Each such
request is kept in `ApiServer.rejected`, and the fixture fails a test that got one without
saying so (`api.rejected.clear()` once checked); `api.validate = False` turns the checks off.
The OpenAI APIs are checked the same way, in their own wording: a Chat Completions `tool`
message answering no call of the assistant message before it, or tool calls left without
their `tool` messages; a Responses `function_call_output` without its `function_call`, a
`function_call` without its output, a `reasoning` item with no item after it, a
`context_management` that is not a list of `compaction` entries, a compaction item this
server signed (`responses_compaction_item`, id `cmpsig_...`) sent back altered; and a prompt
over the window (`context_length_exceeded`).

Responses compaction: past a request's `compact_threshold` (body bytes / 4) the scripted
reply opens with a compaction item, as the server compacts first; `POST /v1/responses/compact`
needs no script and answers with the input's user messages and one compaction item
(`compacted_response`).

The `api_server` pytest fixture is defined here (as `api_server_fixture`, so that test
parameters do not shadow an import): `from apiserver import api_server_fixture` registers it.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import re
import socket
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

ANTHROPIC = "anthropic"
OPENAI = "openai"
RESPONSES = "responses"
RESPONSES_COMPACT = "responses_compact"
COUNT_TOKENS = "count_tokens"

ANTHROPIC_PTL_DEFAULT = (212_345, 200_000)
OPENAI_PTL_DEFAULT = (130_000, 128_000)

DEFAULT_USAGE: dict[str, Any] = {
    "input_tokens": 100,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 20,
}


# --------------------------------------------------------------------------- replies


@dataclass(frozen=True, eq=False)
class StreamGate:
    """Where a streamed reply stops until the test lets it go on: after `after_events` events
    the server sets `reached` and waits for `opened` (at most `GATE_LIMIT` seconds), so what
    must happen while a stream is open happens however slow the machine is."""

    after_events: int = 1
    reached: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Message:
    """A model reply: Anthropic-shaped content blocks, stop reason and usage.

    `delay` is slept before every streamed event (or once before a JSON body);
    `chunk_size` is how many characters each text/thinking/JSON delta carries.
    """

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str | None = None
    usage: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_USAGE))
    model: str | None = None
    id: str = "msg_test_01"
    delay: float = 0.0
    chunk_size: int = 8
    headers: Mapping[str, str] = field(default_factory=dict)
    gate: StreamGate | None = None

    @property
    def effective_stop_reason(self) -> str:
        """The stop reason, defaulting to tool_use when there are tool calls."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(b["type"] == "tool_use" for b in self.content) else "end_turn"


@dataclass(frozen=True)
class ApiError:
    """An HTTP error with each API's exact body shape.

    `anthropic_status`/`openai_status` differ only for overload (529 vs 503).
    """

    anthropic_status: int
    openai_status: int
    anthropic_type: str
    openai_type: str
    openai_code: str | None
    message: str
    openai_message: str | None = None
    openai_param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CutStream:
    """Send the first `after_events` events of `message` (or half its JSON body), then drop.

    With `clean_close`, the stream is ended properly (a complete HTTP body) but early: the
    events after `after_events`, message_stop / [DONE] included, are never sent.
    """

    message: Message
    after_events: int = 3
    clean_close: bool = False


@dataclass(frozen=True)
class StreamError:
    """Stream `after_events` events, then an in-stream error event (Anthropic `event: error`)."""

    message: Message
    after_events: int = 3
    error_type: str = "overloaded_error"
    error_message: str = "Overloaded"


@dataclass(frozen=True)
class Malformed:
    """A 200 reply whose JSON body (or first SSE event's data) is not valid JSON."""

    body: bytes = b'{"id": "msg_broken", "type": "message", "content": [{"type": "te'


@dataclass(frozen=True)
class TokenCount:
    """A count_tokens answer."""

    input_tokens: int


Reply = (
    Message
    | ApiError
    | CutStream
    | StreamError
    | Malformed
    | TokenCount
    | Callable[["RecordedRequest"], "Reply"]
)


def text_block(text: str) -> dict[str, Any]:
    """An Anthropic text block."""
    return {"type": "text", "text": text}


def tool_use_block(name: str, input: dict[str, Any] | str, id: str = "toolu_01") -> dict[str, Any]:
    """A tool_use block; a str `input` is sent verbatim as the (possibly invalid) JSON."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "sig_test") -> dict[str, Any]:
    """A thinking block with its signature."""
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def message(
    *content: str | dict[str, Any],
    stop_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str | None = None,
    id: str = "msg_test_01",
    delay: float = 0.0,
    chunk_size: int = 8,
    headers: Mapping[str, str] | None = None,
    gate: StreamGate | None = None,
) -> Message:
    """A reply; bare strings become text blocks, usage keys override the defaults."""
    blocks = tuple(text_block(c) if isinstance(c, str) else dict(c) for c in content)
    return Message(
        content=blocks,
        stop_reason=stop_reason,
        usage={**DEFAULT_USAGE, **(usage or {})},
        model=model,
        id=id,
        delay=delay,
        chunk_size=chunk_size,
        headers=dict(headers or {}),
        gate=gate,
    )


COMPACTION_BETA = "compact-2026-01-12"
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
MIN_COMPACTION_TRIGGER = 50_000


def compaction_signature(content: str | None, encrypted: str | None) -> str:
    """The signature this server puts on a compaction block (checked when it comes back)."""
    digest = hashlib.sha256(json.dumps([content, encrypted]).encode()).hexdigest()
    return f"sig_compaction_{digest[:24]}"


def compaction_block(summary: str | None, encrypted: str | None = "opaque-state-1") -> dict[str, Any]:
    """A server compaction block, signed over its content."""
    return {
        "type": "compaction",
        "content": summary,
        "encrypted_content": encrypted,
        "signature": compaction_signature(summary, encrypted),
    }


RESPONSES_COMPACTION_PREFIX = "cmpsig_"


def responses_compaction_item(state: str) -> dict[str, Any]:
    """A Responses compaction item as this server writes it: its id signs its encrypted
    content, so an item altered on the way back is refused."""
    digest = hashlib.sha256(state.encode()).hexdigest()[:24]
    return {"id": f"{RESPONSES_COMPACTION_PREFIX}{digest}", "type": "compaction", "encrypted_content": state, "created_by": None}


def responses_compaction_error(body: Any) -> str | None:
    """The Responses API's 400 message for a bad `context_management`, or a compaction item this
    server signed that came back altered; None when the request is fine."""
    if not isinstance(body, dict):
        return None
    management = body.get("context_management")
    if management is not None:
        if not isinstance(management, list):
            return "Invalid type for 'context_management': expected an array."
        for index, entry in enumerate(management):
            if not isinstance(entry, dict) or entry.get("type") != "compaction":
                return f"Invalid value for 'context_management[{index}].type': only 'compaction' is supported."
            threshold = entry.get("compact_threshold")
            if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1):
                return f"Invalid 'context_management[{index}].compact_threshold': expected a positive integer."
    items = body.get("input")
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or item.get("type") != "compaction":
            continue
        item_id = str(item.get("id") or "")
        signed = responses_compaction_item(str(item.get("encrypted_content")))["id"]
        if item_id.startswith(RESPONSES_COMPACTION_PREFIX) and signed != item_id:
            return f"input[{index}]: invalid compaction item {item_id} (send it back unchanged)"
    return None


def responses_compact_threshold(body: Any) -> int | None:
    """The `compact_threshold` a Responses request asks for (None: no server compaction)."""
    management = body.get("context_management") if isinstance(body, dict) else None
    for entry in management if isinstance(management, list) else []:
        if isinstance(entry, dict) and entry.get("type") == "compaction":
            threshold = entry.get("compact_threshold")
            return threshold if isinstance(threshold, int) else DEFAULT_RESPONSES_COMPACT_THRESHOLD
    return None


DEFAULT_RESPONSES_COMPACT_THRESHOLD = 200_000
"""The threshold this server uses for a compaction entry without one."""


def compacted_response(body: Any, size: int) -> dict[str, Any]:
    """What `POST /v1/responses/compact` answers: the input's user messages, then one compaction
    item standing for everything else; its usage is the compaction pass's own."""
    items = body.get("input") if isinstance(body, dict) else None
    kept = [
        {"type": "message", **item}
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"
    ]
    state = "compacted:" + hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()[:32]
    input_tokens = max(1, size // 4)
    return {
        "id": f"resp_compact_{state[-12:]}",
        "object": "response.compaction",
        "created_at": 1_700_000_000,
        "output": [*kept, responses_compaction_item(state)],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 400,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + 400,
        },
    }


def compaction_usage(
    compaction: Mapping[str, int], message: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """A usage whose `iterations` hold a compaction step and a message step; the top-level
    fields are the message step's (the compaction step is not in them)."""
    step = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        **dict(message or DEFAULT_USAGE),
    }
    compacting = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        **dict(compaction),
    }
    return {
        **{k: v for k, v in step.items()},
        "iterations": [{"type": "compaction", **compacting}, {"type": "message", **step}],
    }


def anthropic_compaction_error(body: Any, headers: Mapping[str, str]) -> str | None:
    """The API's 400 message for a request whose compaction or context edits it refuses."""
    if not isinstance(body, dict):
        return None
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}
    edits = (body.get("context_management") or {}).get("edits") or []
    kinds = [str(edit.get("type")) for edit in edits if isinstance(edit, dict)]
    for index, edit in enumerate(edits):
        if edit.get("type") == "compact_20260112":
            if COMPACTION_BETA not in betas:
                return f"context_management.edits.{index}: compact_20260112 requires the {COMPACTION_BETA} beta"
            trigger = edit.get("trigger") or {}
            if isinstance(trigger, dict) and int(trigger.get("value", MIN_COMPACTION_TRIGGER)) < MIN_COMPACTION_TRIGGER:
                return (
                    f"context_management.edits.{index}.trigger.value: must be greater than or "
                    f"equal to {MIN_COMPACTION_TRIGGER}"
                )
        elif (
            edit.get("type") in ("clear_tool_uses_20250919", "clear_thinking_20251015")
            and CONTEXT_EDITING_BETA not in betas
        ):
            return f"context_management.edits.{index}: {edit.get('type')} requires the {CONTEXT_EDITING_BETA} beta"
    if "clear_thinking_20251015" in kinds and len(kinds) > 1 and kinds[0] != "clear_thinking_20251015":
        return "context_management.edits: clear_thinking_20251015 must be the first edit when several are given"
    for m, message in enumerate(body.get("messages") or []):
        for b, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") != "compaction":
                continue
            where = f"messages.{m}.content.{b}"
            if COMPACTION_BETA not in betas:
                return f"{where}: compaction blocks require the {COMPACTION_BETA} beta"
            if message.get("role") != "assistant":
                return f"{where}: a compaction block must be in an assistant message"
            if block.get("content") == "":
                return f"{where}.content: empty string content is not allowed"
            expected = compaction_signature(block.get("content"), block.get("encrypted_content"))
            if block.get("signature") != expected:
                return f"{where}: invalid compaction signature (send the block back unchanged)"
    return None


def sdk_http_package() -> Any:
    """The HTTP package the installed anthropic SDK is built on (httpx, or httpx2 in later
    releases): a test's own transport wraps that package's transport."""
    import anthropic

    base = next(c for c in anthropic.DefaultAsyncHttpxClient.__mro__ if c.__module__.startswith("httpx"))
    return importlib.import_module(base.__module__.partition(".")[0])


def with_read_timeout(request: Any, seconds: float) -> None:
    """Give one outgoing SDK request (in a test's own transport) its own read timeout."""
    timeouts = dict(request.extensions.get("timeout") or {})
    request.extensions = {**request.extensions, "timeout": {**timeouts, "read": seconds}}


GATE_LIMIT = 30.0
"""How long a reply `after` a gate waits for it at most (seconds): a hang guard."""


def after(gate: threading.Event, reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """`reply`, sent once `gate` is set (or `GATE_LIMIT` seconds on): the test sets it when
    the client has done what must happen while the request is open, instead of racing a
    delay against it."""

    def gated(request: RecordedRequest) -> Reply:
        gate.wait(GATE_LIMIT)
        return reply

    return gated


def beats_opening(gate: StreamGate, count: int) -> tuple[list[float], Callable[[float], None]]:
    """(beats, heartbeat): a heartbeat that records the beats made while the stream stands
    open at `gate` and lets it go on at the `count`-th, so the beats a test needs happen
    mid-stream however slow the machine is (beats before the stream opened are not counted)."""
    beats: list[float] = []

    def beat(elapsed: float) -> None:
        if not gate.reached.is_set():
            return
        beats.append(elapsed)
        if len(beats) >= count:
            gate.opened.set()

    return beats, beat


def empty(**kwargs: Any) -> Message:
    """A reply with no content at all."""
    kwargs.setdefault("usage", {"output_tokens": 0})
    return message(**kwargs)


def prompt_too_long(actual: int | None = None, limit: int | None = None) -> Callable[..., Reply]:
    """400 prompt-too-long in each API's wording (defaults 212345 > 200000 / 130000 > 128000)."""

    def reply(request: RecordedRequest) -> Reply:
        if request.api in (OPENAI, RESPONSES):
            got, most = actual or OPENAI_PTL_DEFAULT[0], limit or OPENAI_PTL_DEFAULT[1]
        else:
            got, most = actual or ANTHROPIC_PTL_DEFAULT[0], limit or ANTHROPIC_PTL_DEFAULT[1]
        return ApiError(
            400,
            400,
            "invalid_request_error",
            "invalid_request_error",
            "context_length_exceeded",
            f"prompt is too long: {got} tokens > {most} maximum",
            openai_message=(
                f"This model's maximum context length is {most} tokens. However, your messages "
                f"resulted in {got} tokens. Please reduce the length of the messages."
            ),
            openai_param="messages",
        )

    return reply


def rate_limited(retry_after: str | float | None = "7") -> ApiError:
    """429 with a `retry-after` header (seconds; None for no header)."""
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    return ApiError(
        429,
        429,
        "rate_limit_error",
        "requests",
        "rate_limit_exceeded",
        "Number of request tokens has exceeded your per-minute rate limit",
        openai_message="Rate limit reached for requests. Please try again in 7s.",
        headers=headers,
    )


def overloaded() -> ApiError:
    """529 overloaded_error (Anthropic) / 503 (OpenAI)."""
    return ApiError(
        529,
        503,
        "overloaded_error",
        "server_error",
        None,
        "Overloaded",
        openai_message="The engine is currently overloaded, please try again later",
    )


def server_error(status: int = 500) -> ApiError:
    """500 api_error / server_error."""
    return ApiError(
        status,
        status,
        "api_error",
        "server_error",
        None,
        "Internal server error",
        openai_message="The server had an error while processing your request. Sorry about that!",
    )


def auth_error(status: int = 401) -> ApiError:
    """401 authentication_error / invalid_api_key (403 permission_error when asked)."""
    kind = "authentication_error" if status == 401 else "permission_error"
    return ApiError(
        status,
        status,
        kind,
        "invalid_request_error",
        "invalid_api_key",
        "invalid x-api-key" if status == 401 else "Your API key does not have permission",
        openai_message="Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
    )


def bad_request(text: str = "messages.0.content: Field required", status: int = 400) -> ApiError:
    """400 (or 422) invalid_request_error that is not about the prompt length."""
    return ApiError(status, status, "invalid_request_error", "invalid_request_error", None, text)


def cut_stream(
    reply: Message | None = None, after_events: int = 3, *, clean_close: bool = False
) -> CutStream:
    """Drop the connection part-way through the reply (or end the body early, cleanly)."""
    return CutStream(reply or message("this reply will never finish"), after_events, clean_close)


def stream_error(
    reply: Message | None = None, after_events: int = 3, error_type: str = "overloaded_error"
) -> StreamError:
    """An error event in the middle of a stream (Anthropic sends overloaded this way)."""
    return StreamError(reply or message("partial"), after_events, error_type)


def malformed(body: bytes | None = None) -> Malformed:
    """A 200 reply that is not valid JSON."""
    return Malformed(body) if body is not None else Malformed()


# --------------------------------------------------------------------------- recording


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    api: str
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any
    request_id: str
    reply: bytearray = field(default_factory=bytearray, compare=False)
    """The bytes of the reply body the server wrote (a stream's events, in order)."""

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed reply."""
        return isinstance(self.json, dict) and self.json.get("stream") is True


class ReplyQueue:
    """Replies one API gives, in order (thread-safe)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: deque[Reply] = deque()
        self._lock = threading.Lock()

    def push(self, *replies: Reply) -> ReplyQueue:
        """Queue replies; returns self for chaining."""
        with self._lock:
            self._items.extend(replies)
        return self

    def pop(self) -> Reply | None:
        """The next reply, or None when the script ran out."""
        with self._lock:
            return self._items.popleft() if self._items else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


HOLD_LIMIT = 10.0
"""How long `ApiServer.hold_streams` keeps a finished stream open at most (seconds)."""


@dataclass
class ApiServer:
    """The running server: reply queues per API, requests received, base URLs."""

    base_url: str = ""
    anthropic: ReplyQueue = field(default_factory=lambda: ReplyQueue(ANTHROPIC))
    openai: ReplyQueue = field(default_factory=lambda: ReplyQueue(OPENAI))
    responses: ReplyQueue = field(default_factory=lambda: ReplyQueue(RESPONSES))
    count_tokens: ReplyQueue = field(default_factory=lambda: ReplyQueue(COUNT_TOKENS))
    requests: list[RecordedRequest] = field(default_factory=list)
    unscripted: list[RecordedRequest] = field(default_factory=list)
    rejected: list[tuple[RecordedRequest, str]] = field(default_factory=list)
    """Requests refused as invalid (see the module docstring), with the error message."""
    abandoned: list[RecordedRequest] = field(default_factory=list)
    """Streamed requests whose client went away before the reply was sent whole."""
    responses_done: bool = False
    """End each streamed Responses reply with `data: [DONE]`, as OpenAI-compatible servers do
    (the OpenAI API itself does not)."""
    gzip_streams: bool = False
    """Compress each streamed reply with gzip (`content-encoding: gzip`, flushed after every
    event) when the request accepts it, as the real APIs do for the SDKs, which ask for it;
    requests still record the reply's bytes as they were before compression."""
    hold_streams: threading.Event | None = None
    """When given, a streamed reply, its last event ([DONE] included) sent, keeps its
    connection open until the event is set (at most `HOLD_LIMIT` seconds), as a server may:
    a reader that waits for the connection to close waits there."""
    held_to_limit: list[RecordedRequest] = field(default_factory=list)
    """Streamed requests whose reply was still held open when `HOLD_LIMIT` ran out (their
    client read on past the last event instead of stopping)."""
    validate: bool = True
    context_window: int | None = 200_000
    """Prompts estimated over this many tokens are refused as too long (None: no limit)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _seq: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _http_clients: list[Any] = field(default_factory=list, repr=False)
    """The HTTP clients made for the SDK clients handed out, closed when the server stops."""

    @property
    def anthropic_base_url(self) -> str:
        """What to give `anthropic.Anthropic(base_url=...)`."""
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        """What to give `openai.OpenAI(base_url=...)`."""
        return f"{self.base_url}/v1"

    def anthropic_client(self, *, sync: bool = False, **options: Any) -> Any:
        """An `anthropic.AsyncAnthropic` (or `Anthropic`) client for this server, no retries."""
        import anthropic

        return self._client(anthropic, "Anthropic", self.anthropic_base_url, sync, options)

    def openai_client(self, *, sync: bool = False, **options: Any) -> Any:
        """An `openai.AsyncOpenAI` (or `OpenAI`) client for this server, no retries."""
        import openai

        return self._client(openai, "OpenAI", self.openai_base_url, sync, options)

    def _client(self, sdk: Any, name: str, base_url: str, sync: bool, options: dict[str, Any]) -> Any:
        # Plain HTTP to 127.0.0.1: skipping certificate loading saves ~50 ms per client.
        http = sdk.DefaultHttpxClient if sync else sdk.DefaultAsyncHttpxClient
        factory = getattr(sdk, name if sync else f"Async{name}")
        options = {"api_key": "test-key", "max_retries": 0, **options}
        if "http_client" not in options:
            options["http_client"] = http(verify=False)
            self._http_clients.append(options["http_client"])
        return factory(base_url=base_url, **options)

    def close_clients(self) -> None:
        """Close the HTTP clients of the blocking SDK clients handed out (their sockets too).
        An async client's connections belong to the event loop that used them, which a test
        has closed by now; they are left to the garbage collector."""
        for client in self._http_clients:
            if not hasattr(client, "aclose"):
                client.close()
        self._http_clients.clear()

    @property
    def last(self) -> RecordedRequest:
        """The most recent request."""
        with self._lock:
            return self.requests[-1]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_id(self) -> str:
        with self._lock:
            return f"req_test_{next(self._seq):04d}"


# --------------------------------------------------------------------------- rendering


def compact_json(data: Any) -> bytes:
    """JSON as the APIs and the SDKs write it: no spaces, UTF-8 as it is."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, bytes) else compact_json(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def _anthropic_message_json(reply: Message, model: str) -> dict[str, Any]:
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {**b, "input": _tool_input_object(b["input"])} if b["type"] == "tool_use" else b
            for b in reply.content
        ],
        "stop_reason": reply.effective_stop_reason,
        "stop_sequence": None,
        "usage": dict(reply.usage),
    }


def _tool_input_object(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return {}
    return value


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _anthropic_events(reply: Message, model: str) -> list[bytes]:
    start_usage = {k: v for k, v in reply.usage.items() if k != "output_tokens"}
    start_usage["output_tokens"] = 1
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": reply.id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        _sse("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.content):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": part}
                for part in _chunks(block["text"], reply.chunk_size)
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": part}
                for part in _chunks(block["thinking"], reply.chunk_size)
            ]
            if block.get("signature"):
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(raw, reply.chunk_size)
            ]
        elif kind == "compaction":
            # As the API streams it: the block opens empty, one compaction_delta fills it.
            start = {**block, "content": "", "encrypted_content": ""}
            deltas = [
                {
                    "type": "compaction_delta",
                    "content": block.get("content"),
                    "encrypted_content": block.get("encrypted_content"),
                }
            ]
        else:
            start = dict(block)
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.extend(
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.effective_stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": reply.usage.get("output_tokens", 0)},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


_OPENAI_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _openai_usage(reply: Message) -> dict[str, Any]:
    usage = reply.usage
    cached = int(usage.get("cache_read_input_tokens") or 0)
    prompt = (
        int(usage.get("input_tokens") or 0)
        + cached
        + int(usage.get("cache_creation_input_tokens") or 0)
    )
    completion = int(usage.get("output_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _openai_tool_calls(reply: Message) -> list[dict[str, Any]]:
    return [
        {
            "id": b["id"],
            "type": "function",
            "function": {
                "name": b["name"],
                "arguments": b["input"] if isinstance(b["input"], str) else json.dumps(b["input"]),
            },
        }
        for b in reply.content
        if b["type"] == "tool_use"
    ]


def _openai_text(reply: Message) -> str | None:
    texts = [b["text"] for b in reply.content if b["type"] == "text"]
    return "".join(texts) if texts else None


def _openai_completion_json(reply: Message, model: str) -> dict[str, Any]:
    message_json: dict[str, Any] = {
        "role": "assistant",
        "content": _openai_text(reply),
        "refusal": None,
        "annotations": [],
    }
    tool_calls = _openai_tool_calls(reply)
    if tool_calls:
        message_json["tool_calls"] = tool_calls
    return {
        "id": reply.id.replace("msg_", "chatcmpl-"),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message_json,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH.get(reply.effective_stop_reason, "stop"),
            }
        ],
        "usage": _openai_usage(reply),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _openai_chunks(reply: Message, model: str, include_usage: bool) -> list[bytes]:
    base = {
        "id": reply.id.replace("msg_", "chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            payload["usage"] = None
        return _sse(None, payload)

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    text = _openai_text(reply)
    if text:
        out.extend(chunk({"content": part}) for part in _chunks(text, reply.chunk_size))
    for index, call in enumerate(_openai_tool_calls(reply)):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        out.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in _chunks(call["function"]["arguments"], reply.chunk_size)
        )
    out.append(chunk({}, _OPENAI_FINISH.get(reply.effective_stop_reason, "stop")))
    if include_usage:
        out.append(_sse(None, {**base, "choices": [], "usage": _openai_usage(reply)}))
    out.append(b"data: [DONE]\n\n")
    return out


def _error_body(api: str, error: ApiError, request_id: str) -> tuple[int, dict[str, Any]]:
    if api in (OPENAI, RESPONSES, RESPONSES_COMPACT):
        return error.openai_status, {
            "error": {
                "message": error.openai_message or error.message,
                "type": error.openai_type,
                "param": error.openai_param,
                "code": error.openai_code,
            }
        }
    return error.anthropic_status, {
        "type": "error",
        "error": {"type": error.anthropic_type, "message": error.message},
        "request_id": request_id,
    }


# --------------------------------------------------------------------------- Responses API

_INCOMPLETE = {"max_tokens": "max_output_tokens", "refusal": "content_filter"}


def _responses_usage(reply: Message) -> dict[str, Any]:
    usage = _openai_usage(reply)
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {
            "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"],
            "cache_write_tokens": int(reply.usage.get("cache_creation_input_tokens") or 0),
        },
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["total_tokens"],
    }


def _output_items(reply: Message) -> list[dict[str, Any]]:
    """The reply's content as Responses output items, in order: text as message items, calls
    as function_call items, any other block type as an item sent as it is."""
    items: list[dict[str, Any]] = []
    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "text":
            items.append(
                {
                    "id": f"msg_{reply.id}_{index}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block["text"], "annotations": [], "logprobs": []}],
                }
            )
        elif kind == "tool_use":
            arguments = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            items.append(
                {
                    "id": f"fc_{block['id']}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": arguments,
                }
            )
        elif kind != "thinking":
            items.append(dict(block))
    return items


def _response_json(reply: Message, model: str, *, status: str | None = None) -> dict[str, Any]:
    stop = reply.effective_stop_reason
    final = "incomplete" if stop in _INCOMPLETE else "completed"
    current = status or final
    return {
        "id": reply.id.replace("msg_", "resp_"),
        "object": "response",
        "created_at": 1_700_000_000,
        "status": current,
        "model": model,
        "output": _output_items(reply) if current != "in_progress" else [],
        "usage": _responses_usage(reply) if current != "in_progress" else None,
        "incomplete_details": {"reason": _INCOMPLETE[stop]} if current == "incomplete" else None,
        "error": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
    }


def _responses_events(reply: Message, model: str) -> list[bytes]:
    """The typed SSE events the Responses API streams for a reply."""
    events: list[dict[str, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    add("response.created", response=_response_json(reply, model, status="in_progress"))
    add("response.in_progress", response=_response_json(reply, model, status="in_progress"))
    for index, item in enumerate(_output_items(reply)):
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            add("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []})
            empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            add("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=empty_part)
            for part in _chunks(text, reply.chunk_size):
                add("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0, delta=part, logprobs=[])
            add("response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text, logprobs=[])
            add("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=item["content"][0])
        elif kind == "function_call":
            add("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "arguments": ""})
            for part in _chunks(item["arguments"], reply.chunk_size):
                add("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=part)
            add("response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=item["arguments"])
        else:
            add("response.output_item.added", output_index=index, item=item)
        add("response.output_item.done", output_index=index, item=item)
    final = _response_json(reply, model)
    add(f"response.{final['status']}", response=final)
    return [_sse(event["type"], event) for event in events]


def _openai_invalid(message: str, code: str | None = None, param: str | None = "input") -> ApiError:
    return ApiError(400, 400, "invalid_request_error", "invalid_request_error", code, message, openai_param=param)


def _over_window(context_window: int | None, size: int) -> ApiError | None:
    if context_window is not None and size // 4 > context_window:
        got = size // 4
        return _openai_invalid(
            f"This model's maximum context length is {context_window} tokens. However, your messages "
            f"resulted in {got} tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )
    return None


def openai_chat_request_error(body: Any, context_window: int | None, size: int) -> ApiError | None:
    """The API's 400 for a Chat Completions request that can never succeed, else None."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return _openai_invalid("[] is too short - 'messages'", param="messages")
    pending: list[str] = []
    for index, message in enumerate(body["messages"]):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in pending:
                return _openai_invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    "message with 'tool_calls'.",
                    param=f"messages.[{index}].role",
                )
            pending.remove(call_id)
            continue
        if pending:
            return _openai_invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages responding "
                f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(pending)}",
                param="messages",
            )
        if role == "assistant":
            pending = [str(call.get("id")) for call in message.get("tool_calls") or []]
    return _over_window(context_window, size)


def responses_request_error(body: Any, context_window: int | None, size: int) -> ApiError | None:
    """The API's 400 for a Responses request that can never succeed, else None."""
    if not isinstance(body, dict) or "input" not in body:
        return _openai_invalid("Missing required parameter: 'input'.", code="missing_required_parameter")
    items = body["input"]
    if isinstance(items, list):
        calls: set[str] = set()
        answered: set[str] = set()
        for index, item in enumerate(items):
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "function_call_output":
                call_id = str(item.get("call_id"))
                if call_id not in calls:
                    return _openai_invalid(f"No tool call found for function call output with call_id {call_id}.")
                answered.add(call_id)
            elif kind == "function_call":
                calls.add(str(item.get("call_id")))
            elif kind == "reasoning" and index == len(items) - 1:
                return _openai_invalid(
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its required following item."
                )
        missing = sorted(calls - answered)
        if missing:
            return _openai_invalid(f"No tool output found for function call {missing[0]}.")
    return _over_window(context_window, size)


# --------------------------------------------------------------------------- validation

MAX_CACHE_MARKERS = 4


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _markers(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, ttl) of every cache_control marker, in API order (tools, system, messages)."""
    found: list[tuple[str, str]] = []

    def look(where: str, block: dict[str, Any]) -> None:
        marker = block.get("cache_control")
        if isinstance(marker, dict):
            found.append((where, str(marker.get("ttl", "5m"))))

    for index, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict):
            look(f"tools.{index}", tool)
    for index, block in enumerate(_blocks(body.get("system"))):
        look(f"system.{index}", block)
    for m, message in enumerate(body.get("messages") or []):
        for b, block in enumerate(_blocks(message.get("content"))):
            look(f"messages.{m}.content.{b}", block)
            for i, inner in enumerate(_blocks(block.get("content"))):
                look(f"messages.{m}.content.{b}.content.{i}", inner)
    return found


def anthropic_request_error(body: Any, context_window: int | None, size: int) -> str | None:
    """The API's 400 message for a Messages request that can never succeed, else None."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return "messages.0.role: the first message must use the \"user\" role"
    pending: list[str] = []
    for index, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_use" and not re.fullmatch(r"[a-zA-Z0-9_-]+", str(block.get("id"))):
                return f"messages.{index}.content.{position}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if message.get("role") == "user":
            answered = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
            for position, tool_use_id in enumerate(answered):
                if tool_use_id in answered[:position]:
                    return (
                        f"messages.{index}.content.{position}: each tool_use must have a single result. "
                        f"Found multiple `tool_result` blocks with id: {tool_use_id}"
                    )
            missing = [i for i in pending if i not in answered]
            if missing:
                return (
                    f"messages.{index - 1}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block must "
                    "have a corresponding `tool_result` block in the next message."
                )
            leading = blocks[: len(pending)]
            if pending and any(b.get("type") != "tool_result" for b in leading):
                return (
                    f"messages.{index}: a message answering `tool_use` blocks must begin with "
                    f"their {len(pending)} `tool_result` block(s), before any other content"
                )
            extra = [i for i in answered if i not in pending]
            if extra:
                return (
                    f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {', '.join(extra)}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
            pending = []
        else:
            if pending:
                return (
                    f"messages.{index - 1}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(pending)}. Each `tool_use` block must "
                    "have a corresponding `tool_result` block in the next message."
                )
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if not body.get("tools") and any(
        b.get("type") in ("tool_use", "tool_result")
        for message in messages
        for b in _blocks(message.get("content"))
    ):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    final = messages[-1].get("content")
    last = [{"type": "text", "text": final}] if isinstance(final, str) else _blocks(final)
    if messages[-1].get("role") == "assistant" and last and last[-1].get("type") == "text":
        text = str(last[-1].get("text", ""))
        if text != text.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    markers = _markers(body)
    if len(markers) > MAX_CACHE_MARKERS:
        return (
            f"A maximum of {MAX_CACHE_MARKERS} blocks with cache_control may be provided. "
            f"Found {len(markers)}."
        )
    shorter: str | None = None
    for where, ttl in markers:
        if ttl != "1h":
            shorter = shorter or where
        elif shorter is not None:
            return (
                f"{where}.cache_control: a ttl='1h' cache_control block must not come after a "
                f"ttl='5m' cache_control block ({shorter})"
            )
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = int(thinking.get("budget_tokens") or 0)
        if int(body.get("max_tokens") or 0) <= budget:
            return (
                f"`max_tokens` must be greater than `thinking.budget_tokens` "
                f"({body.get('max_tokens')} <= {budget})"
            )
    if context_window is not None and size // 4 > context_window:
        return f"prompt is too long: {size // 4} tokens > {context_window} maximum"
    return None


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: ApiServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its kept-alive connection is normal here (tests cut streams and
        close clients): say nothing. Anything else is a bug in the server: print it."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)


def _route(path: str) -> str | None:
    if path in ("/v1/messages", "/messages"):
        return ANTHROPIC
    if path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
        return COUNT_TOKENS
    if path in ("/v1/chat/completions", "/chat/completions"):
        return OPENAI
    if path in ("/v1/responses", "/responses"):
        return RESPONSES
    if path in ("/v1/responses/compact", "/responses/compact"):
        return RESPONSES_COMPACT
    return None


class _Handler(BaseHTTPRequestHandler):
    # Headers and body are written separately: without TCP_NODELAY each reply waits ~40 ms
    # for a delayed ACK.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    # -- plumbing

    def _handle(self, method: str) -> None:
        api_server = self.server.api
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        path, _, query = self.path.partition("?")
        api = _route(path) if method == "POST" else None
        request = RecordedRequest(
            api=api or "unknown",
            method=method,
            path=path,
            query=query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=raw,
            json=parsed,
            request_id=api_server._next_id(),
        )
        api_server._record(request)
        if api is None:
            self._send_json(
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": path}},
                request,
            )
            return
        if api == ANTHROPIC and api_server.validate:
            problem = anthropic_compaction_error(parsed, request.headers) or anthropic_request_error(
                parsed, api_server.context_window, len(raw)
            )
            if problem is not None:
                api_server.rejected.append((request, problem))
                self._render(api, request, bad_request(problem))
                return
        if api in (OPENAI, RESPONSES, RESPONSES_COMPACT) and api_server.validate:
            check = openai_chat_request_error if api == OPENAI else responses_request_error
            refusal = check(parsed, api_server.context_window, len(raw))
            problem = None if api == OPENAI else responses_compaction_error(parsed)
            if refusal is None and problem is not None:
                refusal = _openai_invalid(problem)
            if refusal is not None:
                api_server.rejected.append((request, refusal.message))
                self._render(api, request, refusal)
                return
        if api == RESPONSES_COMPACT:
            self._send_json(200, compacted_response(parsed, len(raw)), request)
            return
        queue = {
            ANTHROPIC: api_server.anthropic,
            OPENAI: api_server.openai,
            RESPONSES: api_server.responses,
            COUNT_TOKENS: api_server.count_tokens,
        }[api]
        reply = queue.pop()
        if reply is None and api == COUNT_TOKENS:
            reply = TokenCount(max(1, len(raw) // 4))
        if reply is None:
            api_server.unscripted.append(request)
            reply = replace(server_error(500), message=f"apiserver: no reply scripted for {path}")
        while callable(reply):
            reply = reply(request)
        threshold = responses_compact_threshold(parsed) if api == RESPONSES else None
        if isinstance(reply, Message) and threshold is not None and len(raw) // 4 >= threshold:
            # Past its threshold the server compacts first: the item opens the output.
            state = "auto:" + hashlib.sha256(raw).hexdigest()[:32]
            reply = replace(reply, content=(responses_compaction_item(state), *reply.content))
        self._render(api, request, reply)

    def _common_headers(self, request: RecordedRequest) -> None:
        self.send_header(
            "x-request-id" if request.api in (OPENAI, RESPONSES, RESPONSES_COMPACT) else "request-id",
            request.request_id,
        )

    def _send_json(
        self,
        status: int,
        payload: Any,
        request: RecordedRequest,
        headers: Mapping[str, str] | None = None,
        *,
        truncate: bool = False,
    ) -> None:
        data = payload if isinstance(payload, bytes) else compact_json(payload)
        request.reply.extend(data)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self._common_headers(request)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if truncate:
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self.wfile.write(data)
        self.wfile.flush()

    def _start_sse(self, request: RecordedRequest, headers: Mapping[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        accepted = str(self.headers.get("accept-encoding") or "").lower()
        self._gzip = (
            zlib.compressobj(wbits=31)
            if self.server.api.gzip_streams and "gzip" in accepted
            else None
        )
        if self._gzip is not None:
            self.send_header("content-encoding", "gzip")
        self._common_headers(request)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.flush()
        self._replying = request

    def _chunk(self, data: bytes) -> None:
        replying: RecordedRequest | None = getattr(self, "_replying", None)
        if replying is not None:
            replying.reply.extend(data)
        gzip: Any = getattr(self, "_gzip", None)
        if gzip is not None:  # each event sent whole at once, as a streaming server does
            data = gzip.compress(data) + gzip.flush(zlib.Z_SYNC_FLUSH)
        self._write_chunk(data)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _hold(self, request: RecordedRequest) -> None:
        """Keep a finished stream's connection open while `hold_streams` says so."""
        hold = self.server.api.hold_streams
        if hold is not None and not hold.wait(HOLD_LIMIT):
            with self.server.api._lock:
                self.server.api.held_to_limit.append(request)

    def _end_chunks(self) -> None:
        gzip: Any = getattr(self, "_gzip", None)
        if gzip is not None:
            self._write_chunk(gzip.flush())
            self._gzip = None
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection without finishing the response body."""
        self.wfile.flush()
        self.close_connection = True
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(
        self, events: list[bytes], request: RecordedRequest, reply: Message, stop_after: int | None
    ) -> bool:
        """Send events (sleeping `reply.delay` before each); False when the client went away."""
        self._start_sse(request, reply.headers)
        for count, event in enumerate(events):
            if stop_after is not None and count >= stop_after:
                break
            if reply.gate is not None and count == reply.gate.after_events:
                reply.gate.reached.set()
                reply.gate.opened.wait(GATE_LIMIT)
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self._chunk(event)
            except OSError:
                self.close_connection = True
                with self.server.api._lock:
                    self.server.api.abandoned.append(request)
                return False
        return True

    def _render(self, api: str, request: RecordedRequest, reply: Reply) -> None:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model") or "test-model")
        if isinstance(reply, TokenCount):
            self._send_json(200, {"input_tokens": reply.input_tokens}, request)
        elif isinstance(reply, ApiError):
            status, payload = _error_body(api, reply, request.request_id)
            self._send_json(status, payload, request, reply.headers)
        elif isinstance(reply, Malformed):
            if request.stream:
                self._start_sse(request, {})
                event = {ANTHROPIC: "message_start", RESPONSES: "response.created"}.get(api)
                self._chunk(_sse(event, reply.body))
                self._end_chunks()
            else:
                self._send_json(200, reply.body, request)
        elif isinstance(reply, Message | CutStream | StreamError):
            msg = reply if isinstance(reply, Message) else reply.message
            if msg.model is not None:
                model = msg.model
            if request.stream:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                if api == ANTHROPIC:
                    events = _anthropic_events(msg, model)
                elif api == RESPONSES:
                    events = _responses_events(msg, model)
                    if self.server.api.responses_done:
                        events.append(b"data: [DONE]\n\n")
                else:
                    events = _openai_chunks(msg, model, include_usage)
                if isinstance(reply, CutStream):
                    if self._stream(events, request, msg, reply.after_events):
                        if reply.clean_close:
                            self._end_chunks()
                        else:
                            self._drop()
                    return
                if isinstance(reply, StreamError):
                    if not self._stream(events, request, msg, reply.after_events):
                        return
                    error = {"type": reply.error_type, "message": reply.error_message}
                    if api == ANTHROPIC:
                        self._chunk(_sse("error", {"type": "error", "error": error}))
                    elif api == RESPONSES:
                        payload = {"type": "error", "code": reply.error_type,
                                   "message": reply.error_message, "param": None,
                                   "sequence_number": len(events)}
                        self._chunk(_sse("error", payload))
                    else:
                        self._chunk(_sse(None, {"error": {**error, "param": None, "code": None}}))
                    self._end_chunks()
                    return
                if self._stream(events, request, msg, None):
                    self._hold(request)
                    self._end_chunks()
                return
            if msg.delay:
                time.sleep(msg.delay)
            if api == ANTHROPIC:
                payload = _anthropic_message_json(msg, model)
            elif api == RESPONSES:
                payload = _response_json(msg, model)
            else:
                payload = _openai_completion_json(msg, model)
            self._send_json(
                200, payload, request, msg.headers, truncate=isinstance(reply, CutStream)
            )
        else:  # pragma: no cover - the type union is exhausted above
            raise TypeError(f"not a reply: {reply!r}")


@contextmanager
def start_server() -> Iterator[ApiServer]:
    """Run an ApiServer on an ephemeral 127.0.0.1 port for the duration of the block."""
    api = ApiServer()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = api
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.daemon = True
    thread.start()
    try:
        yield api
    finally:
        api.close_clients()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(name="api_server")
def api_server_fixture() -> Iterator[ApiServer]:
    """A running ApiServer; the test fails if a request arrived that no reply was scripted for,
    or one the API would refuse as invalid (unless the test cleared `rejected`)."""
    with start_server() as api:
        yield api
        assert not api.unscripted, f"unscripted requests: {[r.path for r in api.unscripted]}"
        assert not api.rejected, f"invalid requests refused: {[why for _, why in api.rejected]}"
