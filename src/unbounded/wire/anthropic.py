"""The Anthropic Messages wire format: the project's request is already in Messages shape, so
the request mapping is direct; the reply, its raw stream events and the SDK's errors come back
as the project's.

Every field the SDK method names is passed as a keyword (model, max_tokens, system, tools,
messages, thinking, metadata, tool_choice...); fields this SDK version does not name
(`temperature` in recent versions, `context_management` outside the beta endpoint) go through
`extra_body`, so the wire body is the same whatever the SDK version. `betas` becomes the
`anthropic-beta` list (the provider then calls `client.beta.messages`), with the compaction
beta added when the messages carry a server compaction block, which goes back unchanged.
`cache_edits` is sent as a top-level body field only by a format built with
`cache_edits=True`.

A compaction block goes back byte-for-byte: an SDK model re-orders a block's keys (its
fields' order, not the server's), so `from_response` takes the block as the raw JSON held it
when the provider read that (`raw_blocks`). In a stream the SDK's plain-Messages fold does
not know the compaction type, so it keeps the block's keys in the order the raw
`content_block_start` gave them, its values from the `compaction_delta` that fills it
(`tests/test_native_bytes.py` fails if an SDK version changes that).

`inbound` takes the caller's messages (SDK objects or dicts) as plain dicts without the
caller's cache markers, the form a session stores.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

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
from unbounded.model.content import ContentBlock, MessageParam, Usage
from unbounded.model.prefix import shared_prefix_length_own
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.wire.base import (
    ALL_FIELDS,
    InboundMessages,
    connection_failure,
    is_prompt_too_long_message,
    is_transport_error,
    parse_prompt_too_long,
    response_headers,
    retry_after_seconds,
)
from unbounded.wire.context_edits import COMPACTION_BETA, COMPACTION_BLOCK

NO_API_KEY = (
    "no Anthropic API key: set ANTHROPIC_API_KEY in the environment, or pass "
    "AnthropicProvider(api_key=...) or a client of your own"
)
"""What a call without any credentials fails with."""

_UNBOUNDED_ONLY = ("betas", "cache_edits")


@dataclass(frozen=True, slots=True)
class AnthropicMessages:
    """The Messages format of `messages.create` / `messages.stream` (and their beta twins)."""

    cache_edits: bool = False
    """Send a request's `cache_edits` (the server must support them); else they are dropped."""
    name: str = "anthropic-messages"
    _compaction_scan: _CompactionScan = field(
        default_factory=lambda: _CompactionScan(), compare=False, repr=False
    )

    def to_request(
        self, request: ProviderRequest, *, stream: bool, accepted: frozenset[str] = ALL_FIELDS
    ) -> dict[str, Any]:
        """The keyword arguments of `messages.create` or `messages.stream` (which one `stream`
        says, and neither takes `stream=` itself): the fields `accepted` names by name, the
        others in `extra_body`, unbounded's own `betas` as the beta header's list and
        `cache_edits` only when this format sends them."""
        kwargs: dict[str, Any] = {}
        extra_body: dict[str, Any] = {}
        for key, value in request.items():
            if key in _UNBOUNDED_ONLY:
                continue
            if key in accepted or "*" in accepted:
                kwargs[key] = value
            else:
                extra_body[key] = value
        betas = self.betas(request)
        if betas:
            kwargs["betas"] = betas
        if self.cache_edits and request.get("cache_edits"):
            extra_body["cache_edits"] = [dict(edit) for edit in request["cache_edits"]]
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    def betas(self, request: ProviderRequest) -> list[str]:
        """The request's beta headers, with the compaction beta added when its messages carry
        a server compaction block (the API refuses them without it, whichever path sends
        them: the main request, a summary fork, a drop-in's)."""
        betas = [str(beta) for beta in request.get("betas") or ()]
        if COMPACTION_BETA not in betas and self._compaction_scan.found(request.get("messages")):
            betas.append(COMPACTION_BETA)
        return betas

    def from_response(
        self, message: Any, *, raw_blocks: Mapping[int, Mapping[str, Any]] | None = None
    ) -> ModelResponse:
        """A ModelResponse from an SDK `Message` (or `BetaMessage`); `raw_blocks`: content
        blocks by index as the server's JSON held them (compaction blocks), taken as they are."""
        raw = raw_blocks or {}
        return ModelResponse(
            content=[
                cast(ContentBlock, dict(raw[i])) if i in raw else _block(b)
                for i, b in enumerate(message.content)
            ],
            stop_reason=message.stop_reason,
            usage=_usage(message.usage),
            model=str(message.model),
            id=str(message.id),
            raw=message.model_dump(mode="json"),
        )

    def map_error(self, exc: BaseException) -> ProviderError | None:
        """The unbounded error for an SDK or transport exception (None: not a provider error)."""
        sdk = sys.modules.get("anthropic")  # never imported: no exception is the SDK's own
        if sdk is not None:
            mapped = _sdk_error(sdk, exc)
            if mapped is not None:
                return mapped
        if is_transport_error(exc):
            return ServerError(
                connection_failure(exc, f"{type(exc).__name__}: {exc}", ANTHROPIC_ADDRESS)
            )
        if isinstance(exc, json.JSONDecodeError):
            return ServerError(f"malformed response (not JSON): {exc}")
        if _is_missing_credentials(exc):
            return AuthenticationError(NO_API_KEY, status=None)
        if isinstance(exc, ValueError):
            text = str(exc)
            if "Unable to parse" in text:
                return ServerError(f"malformed response: {text}")
            return BadRequestError(text, status=None)
        credentials_error = getattr(sdk, "CredentialsError", None)  # newer SDKs only
        if credentials_error is not None and isinstance(exc, credentials_error):
            return AuthenticationError(str(exc), status=None)
        if isinstance(exc, RuntimeError) and "Unexpected event order" in str(exc):
            return ServerError(f"malformed stream: {exc}")
        return None

    def raw_compaction_blocks(self, body: Any) -> dict[int, Mapping[str, Any]]:
        """The compaction blocks of a reply's raw JSON body, by index (`from_response`)."""
        content = body.get("content") if isinstance(body, Mapping) else None
        if not isinstance(content, list):
            return {}
        return {
            index: block
            for index, block in enumerate(content)
            if isinstance(block, Mapping) and block.get("type") == COMPACTION_BLOCK
        }

    def stream_error(
        self, event: Mapping[str, Any], request_id: str | None, headers: Mapping[str, str]
    ) -> ProviderError:
        """The error an `error` event of a raw stream carries (the stream's status was 200)."""
        body = dict(event)
        return _status_error(200, body, "the stream failed", request_id=request_id, headers=headers)

    def stream_assembler(self) -> AnthropicStreamAssembler:
        """A fresh fold for the raw events of one `create(stream=True)` reply."""
        return AnthropicStreamAssembler(self)

    def inbound(self, messages: Sequence[Any]) -> InboundMessages:
        """The caller's messages as plain dicts, their cache markers left out (the system
        prompt travels apart in this format: it is never among the messages)."""
        out: list[MessageParam] = []
        for index, message in enumerate(messages):
            data = plain_data(message)
            if not isinstance(data, Mapping) or data.get("role") not in ("user", "assistant"):
                raise ConfigError(
                    f"message {index}: a Messages API message is a dict with role user or "
                    f"assistant, not {message!r:.80}"
                )
            out.append(
                cast(
                    MessageParam,
                    {"role": data["role"], "content": stored_content(data.get("content"))},
                )
            )
        return InboundMessages("", out)


def _has_compaction_block(messages: Sequence[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == COMPACTION_BLOCK for b in content
        ):
            return True
    return False


class _CompactionScan:
    """Whether a request's messages carry a server compaction block, reading only the
    messages the last request without one did not have: a conversation sends its whole
    history every call, and walking every block of it was the drop-in's largest cost at
    thousands of messages (~20 ms a call at 10,000). Messages are matched with the last
    ones by identity or equality (`shared_prefix_length_own`), so a message changed into
    a new dict is read again."""

    def __init__(self) -> None:
        self._plain: list[Any] = []
        """The last messages found without a compaction block (the project's own copy)."""
        self._lock = threading.Lock()

    def found(self, messages: object) -> bool:
        """Whether `messages` (a request's list) holds a compaction block."""
        if not isinstance(messages, list):
            return False
        with self._lock:
            same = shared_prefix_length_own(messages, self._plain)
            del self._plain[same:]
            if _has_compaction_block(messages[same:]):
                return True
            self._plain.extend(messages[same:])
            return False

    def __reduce__(self) -> tuple[type[_CompactionScan], tuple[()]]:
        # A copy (a pickled or copied format) starts with nothing seen: the lock cannot go.
        return (_CompactionScan, ())


ANTHROPIC_ADDRESS = "ANTHROPIC_BASE_URL, or the client's base_url"
"""Where the address an Anthropic client connects to comes from (named when it fails)."""


def _sdk_error(sdk: Any, exc: BaseException) -> ProviderError | None:
    """The mapping of the SDK's own exception classes."""
    if isinstance(exc, sdk.APIStatusError):
        return _status_error(
            exc.status_code,
            exc.body,
            str(exc),
            request_id=exc.request_id,
            headers=response_headers(exc),
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ServerError(f"request timed out: {exc}")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        return ServerError(connection_failure(exc, str(cause or exc), ANTHROPIC_ADDRESS))
    if isinstance(exc, sdk.APIResponseValidationError):
        return ServerError(f"malformed response: {exc}", status=exc.status_code, body=exc.body)
    return None


@dataclass(slots=True)
class AnthropicStreamAssembler:
    """Folds the raw events of a streamed reply (`message_start` ... `message_stop`) into the
    SDK's message, with the SDK's own accumulator; events before `message_start` are
    ignored. Raw JSON events, and the SDK's beta events, are folded into the SDK's beta
    message, whose blocks include the server's `compaction` block (the plain `Message` has
    no such block: the SDK would type it as a text block and warn when dumping it); the
    SDK's plain events into its plain `Message`. A compaction block is also kept as the
    events wrote it (`raw_blocks`): its key order is what the server signed."""

    wire: AnthropicMessages
    snapshot: Any = None
    """The SDK message so far (None before `message_start`)."""
    stopped: bool = False
    """Whether `message_stop` has arrived."""
    raw_blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The compaction blocks by index, as the events wrote them (their delta applied)."""
    _buffers: dict[int, bytes] = field(default_factory=dict)
    _fold: Callable[..., Any] | None = None

    def add(self, event: Any) -> None:
        """Take the next event (an SDK event, or a raw one as a JSON dict)."""
        kind = _part(event, "type")
        if self._fold is None:
            if kind != "message_start":
                return
            plain = not isinstance(event, Mapping) and not type(event).__name__.startswith("Beta")
            self._fold = _accumulator(beta=not plain)
        self.snapshot = self._fold(event, self.snapshot, self._buffers)
        self._keep_compaction(event)
        _fill_compaction(self.snapshot, event)
        if kind == "message_stop":
            self.stopped = True

    def _keep_compaction(self, event: Any) -> None:
        """Keep a compaction block as it opens, and its delta's values in place."""
        kind = _part(event, "type")
        if kind == "content_block_start":
            block = _part(event, "content_block")
            if _part(block, "type") == COMPACTION_BLOCK:
                self.raw_blocks[int(_part(event, "index"))] = _raw_block(block)
        elif kind == "content_block_delta":
            delta = _part(event, "delta")
            kept = self.raw_blocks.get(int(_part(event, "index")))
            if kept is not None and _part(delta, "type") == "compaction_delta":
                kept["content"] = _part(delta, "content")
                kept["encrypted_content"] = _part(delta, "encrypted_content")

    def response(self) -> ModelResponse:
        """The reply so far as the session reads it (compaction blocks as the events wrote
        them)."""
        return self.wire.from_response(self.snapshot, raw_blocks=self.raw_blocks)

    def finish(self, request_id: str | None) -> ModelResponse:
        """The whole reply; a `ServerError` when the stream ended before `message_stop`."""
        if not self.stopped:
            raise ServerError(
                "the stream ended before message_stop (connection cut mid-reply)",
                request_id=request_id,
            )
        return self.response()


def _part(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _raw_block(block: Any) -> dict[str, Any]:
    """A block as its event wrote it: a raw event's JSON as it is; an SDK object's fields
    after its `type`, first as the API writes it (the SDK's field order is its own)."""
    if isinstance(block, Mapping):
        return dict(block)
    fields = block.model_dump(mode="json", exclude_unset=True)
    return {"type": fields.pop("type", COMPACTION_BLOCK), **fields}


def _fill_compaction(snapshot: Any, event: Any) -> None:
    """Apply a `compaction_delta` to its block: a server compaction streams its block empty,
    then the summary and state whole in one such delta, which the SDK's plain-Messages fold
    leaves out (its beta fold applies it the same way: the values replace, never append)."""
    if _part(event, "type") != "content_block_delta":
        return
    delta = _part(event, "delta")
    if _part(delta, "type") != "compaction_delta":
        return
    block = snapshot.content[int(_part(event, "index"))]
    if _part(block, "type") == COMPACTION_BLOCK:
        block.content = _part(delta, "content")
        block.encrypted_content = _part(delta, "encrypted_content")


@functools.cache
def _accumulator(*, beta: bool) -> Callable[[Any, Any, dict[int, bytes]], Any]:
    """The SDK's event fold (its beta one, or its plain-Messages one) as
    `fold(event, snapshot, json_buffers)`, whichever keywords this SDK version takes."""
    accumulate_event: Callable[..., Any]
    if beta:
        from anthropic.lib.streaming._beta_messages import accumulate_event
    else:
        from anthropic.lib.streaming._messages import accumulate_event
    accepted = inspect.signature(accumulate_event).parameters
    # `request_headers` (beta): only its fine-grained tool streaming beta changes how partial
    # tool input is parsed; a complete input parses the same either way.
    extra: dict[str, Any] = {"request_headers": None} if "request_headers" in accepted else {}
    buffered = "json_bufs" in accepted

    def fold(event: Any, snapshot: Any, buffers: dict[int, bytes]) -> Any:
        given: dict[str, Any] = {"json_bufs": buffers} if buffered else {}
        return accumulate_event(event=event, current_snapshot=snapshot, **given, **extra)

    return fold


def plain_data(value: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-ready data; other values unchanged."""
    if type(value) is dict:  # the usual message or block: nothing to look up
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return value


def block_dict(block: Any) -> dict[str, Any]:
    """A content block (an SDK block, a dict, or a bare string for text) as a plain dict."""
    dump = getattr(block, "model_dump", None)
    if getattr(block, "type", None) == "compaction" and callable(dump):
        # A compaction block goes back exactly as the server sent it, its nulls included.
        return dict(dump(mode="json", exclude_unset=True))
    data = plain_data(block)
    if isinstance(data, str):
        return {"type": "text", "text": data}
    if not isinstance(data, Mapping):
        raise ConfigError(f"a content block must be a dict or an SDK block, not {type(block)}")
    return dict(data)


def stored_content(content: Any) -> str | list[dict[str, Any]]:
    """Message content as the session stores it: plain dicts, caller cache markers removed."""
    if isinstance(content, str):
        return content
    if content is None:
        return []
    blocks: list[dict[str, Any]] = []
    for block in content:
        data = {k: v for k, v in block_dict(block).items() if k != "cache_control"}
        if data.get("type") == "tool_result" and isinstance(data.get("content"), list):
            data["content"] = [
                {k: v for k, v in block_dict(b).items() if k != "cache_control"}
                for b in data["content"]
            ]
        blocks.append(data)
    return blocks


def _status_error(
    status: int,
    body: Any,
    text: str,
    *,
    request_id: str | None,
    headers: Mapping[str, str] | None,
) -> ProviderError:
    kind, api_message = _error_details(body)
    message = api_message or text
    retry_after = retry_after_seconds(headers)
    common: dict[str, Any] = {"status": status, "request_id": request_id, "body": body}
    if status in (400, 413, 422) or (status == 200 and kind == "invalid_request_error"):
        if is_prompt_too_long_message(message):
            parsed = parse_prompt_too_long(message)
            return PromptTooLongError(
                message,
                actual_tokens=parsed[0] if parsed else None,
                limit_tokens=parsed[1] if parsed else None,
                **common,
            )
        return BadRequestError(message, **common)
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return AuthenticationError(message, **common)
    if status == 429 or kind == "rate_limit_error":
        return RateLimitedError(message, retry_after=retry_after, **common)
    if status in (503, 529) or kind == "overloaded_error":
        return OverloadedError(message, retry_after=retry_after, **common)
    if status >= 500 or status in (200, 408, 409) or kind in ("api_error", "timeout_error"):
        return ServerError(message, retry_after=retry_after, **common)
    return BadRequestError(message, **common)


def _block(block: Any) -> ContentBlock:
    kind = getattr(block, "type", None)
    if kind == "text":
        text: dict[str, Any] = {"type": "text", "text": block.text}
        if getattr(block, "citations", None):
            text["citations"] = [c.model_dump(mode="json") for c in block.citations]
        return cast(ContentBlock, text)
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    if kind == "compaction":
        # Sent back verbatim: exactly the fields the server sent, nulls included.
        return cast(ContentBlock, block.model_dump(mode="json", exclude_unset=True))
    return cast(ContentBlock, block.model_dump(mode="json", exclude_none=True))


def _usage(usage: Any) -> Usage:
    data: dict[str, Any] = usage.model_dump(mode="json") if usage is not None else {}
    out: Usage = {
        "input_tokens": int(data.get("input_tokens") or 0),
        "output_tokens": int(data.get("output_tokens") or 0),
        "cache_creation_input_tokens": int(data.get("cache_creation_input_tokens") or 0),
        "cache_read_input_tokens": int(data.get("cache_read_input_tokens") or 0),
    }
    split = data.get("cache_creation")
    if isinstance(split, Mapping):
        out["cache_creation"] = {k: int(v or 0) for k, v in split.items()}
    deleted = data.get("cache_deleted_input_tokens")
    if deleted is not None:
        out["cache_deleted_input_tokens"] = int(deleted)
    iterations = data.get("iterations")
    if isinstance(iterations, list) and iterations:
        out["iterations"] = [dict(item) for item in iterations if isinstance(item, Mapping)]
    return out


def _error_details(body: Any) -> tuple[str | None, str | None]:
    """(error type, message) from an Anthropic error body."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            kind, message = error.get("type"), error.get("message")
            return (
                kind if isinstance(kind, str) else None,
                message if isinstance(message, str) else None,
            )
    return None, None


def _is_missing_credentials(exc: BaseException) -> bool:
    """The SDK's refusal to send a request that has no authentication at all."""
    return isinstance(exc, TypeError) and "Could not resolve authentication method" in str(exc)
