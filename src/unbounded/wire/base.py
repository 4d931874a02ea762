"""The protocol of a wire format, and what every format's error mapping shares.

A wire format is pure: it turns a `ProviderRequest` (Anthropic Messages shape, the project's
one request shape) into the keyword arguments of one SDK call, turns that call's reply, or the
events of its stream, back into a `ModelResponse`, maps the SDK's exceptions onto the
project's errors, and converts the messages a caller holds in the format's own shape into the
project's. It never sends anything: the providers (`unbounded.providers`) and the drop-in
client hold the SDK clients and do the I/O.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from unbounded.errors import ProviderError
from unbounded.model.content import MessageParam
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse

ALL_FIELDS: frozenset[str] = frozenset({"*"})
"""`accepted` for an SDK method taking any keyword (`**kwargs`)."""


@dataclass(frozen=True, slots=True)
class InboundMessages:
    """A caller's conversation in the project's shape: the system prompt apart (Anthropic
    keeps it out of the messages) and the messages."""

    system: str = ""
    messages: list[MessageParam] = field(default_factory=list)


class StreamAssembler(Protocol):
    """Folds a stream's events, one at a time, into the whole reply."""

    @property
    def stopped(self) -> bool:
        """Whether the stream's terminal event arrived (a reader stops there: the server may
        keep the connection open after it)."""
        ...

    def add(self, event: Any) -> None:
        """Take the next event of the stream."""
        ...

    def finish(self, request_id: str | None) -> ModelResponse:
        """The whole reply; a `ServerError` when the stream was cut before its end."""
        ...


class WireFormat(Protocol):
    """One API's request and reply shapes, and its errors, for one SDK method."""

    @property
    def name(self) -> str:
        """The format's registered name (`unbounded.wire.FORMATS`)."""
        ...

    def to_request(
        self, request: ProviderRequest, *, stream: bool, accepted: frozenset[str] = ALL_FIELDS
    ) -> dict[str, Any]:
        """The SDK call's keyword arguments for `request`; `accepted` names the keywords the
        SDK method takes, for a format whose other fields travel another way."""
        ...

    def from_response(self, reply: Any) -> ModelResponse:
        """The `ModelResponse` of the SDK's whole (not streamed) reply."""
        ...

    def stream_assembler(self) -> StreamAssembler:
        """A fresh fold for the events of one streamed reply."""
        ...

    def map_error(self, exc: BaseException) -> ProviderError | None:
        """The project's error for an SDK or transport exception (None: not a provider error)."""
        ...

    def inbound(self, messages: Sequence[Any]) -> InboundMessages:
        """A caller's messages, in this format's shape, as the project's (Anthropic) messages."""
        ...


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def response_headers(exc: BaseException) -> Mapping[str, str] | None:
    """The HTTP headers of the response an SDK exception carries, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return cast("Mapping[str, str] | None", headers)


def is_transport_error(exc: BaseException) -> bool:
    """Whether `exc` comes from the HTTP stack (httpx/httpcore, any major version)."""
    return any(cls.__module__.startswith(("httpx", "httpcore")) for cls in type(exc).__mro__)


def connection_failure(exc: BaseException, detail: str, setting: str) -> str:
    """A failed connection's message: `detail` (what the transport said), with the address
    tried (scheme, host and port; never credentials or path) when the exception knows it, and
    what to check (`setting`: where that address comes from)."""
    url: Any
    try:  # httpx's `request` raises RuntimeError when the error was made without one
        url = getattr(getattr(exc, "request", None), "url", None)
    except RuntimeError:
        url = None
    host = getattr(url, "host", None)
    if not host:
        return f"connection error: {detail}"
    port = f":{url.port}" if getattr(url, "port", None) else ""
    return (
        f"connection error: cannot reach {url.scheme}://{host}{port} ({detail}); "
        f"check the address ({setting}) and that the server there is up"
    )


_PTL_PATTERN = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)\s*maximum", re.I)
_CONTEXT_PATTERNS = (
    re.compile(
        r"maximum context length is (\d+) tokens.*?(?:requested|resulted in|you requested) (\d+)",
        re.I | re.S,
    ),
    re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ \d+ > (\d+)", re.I),
)


def parse_prompt_too_long(message: str) -> tuple[int, int] | None:
    """(actual tokens, limit) from a provider's prompt-too-long message, when it says."""
    match = _PTL_PATTERN.search(message)
    if match:
        return int(match.group(1)), int(match.group(2))
    openai_style = _CONTEXT_PATTERNS[0].search(message)
    if openai_style:
        return int(openai_style.group(2)), int(openai_style.group(1))
    max_tokens_style = _CONTEXT_PATTERNS[1].search(message)
    if max_tokens_style:
        return int(max_tokens_style.group(1)), int(max_tokens_style.group(2))
    return None


def is_prompt_too_long_message(message: str) -> bool:
    """Whether an error message says the prompt exceeds the context window."""
    lowered = message.lower()
    return (
        "prompt is too long" in lowered
        or "maximum context length" in lowered
        or "context_length_exceeded" in lowered
        or "exceed context limit" in lowered
        or "input is too long" in lowered
    )
