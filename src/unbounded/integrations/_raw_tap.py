"""The raw server-sent events under an SDK stream the caller reads.

The SDKs' stream helpers (`messages.stream`, `responses.stream`, `responses.create(stream=True)`)
hand the drop-in only SDK objects, built in the SDK model's field order; a block or item the
library sends back as the server wrote it (a compaction block, a reasoning item) needs the
server's own JSON. The drop-in still hands the caller the SDK's own stream, and reads the same
bytes as the SDK reads them: the HTTP response's byte stream is wrapped so that each chunk
also goes, line by line, through `unbounded.wire.sse.SseDecoder` to a fold of raw events.
Nothing is read twice and nothing is read ahead of the caller.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from unbounded.errors import ServerError
from unbounded.wire.sse import SseDecoder

logger = logging.getLogger(__name__)


class RawEventTap:
    """The server-sent events of the bytes fed to it, as JSON dicts in the server's key order,
    each handed to `on_event`. A malformed event stops the tap (`failed`), never the caller's
    stream: the SDK reports what it makes of the same bytes."""

    def __init__(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        self._on_event = on_event
        self._decoder = SseDecoder()
        self._pending = b""
        self.failed = False
        """True once an event could not be read (the drop-in then reads the SDK's objects)."""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the body; complete lines are decoded now."""
        if self.failed:
            return
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        try:
            for line in lines:
                # A line end is never inside a UTF-8 sequence: each line decodes alone.
                event = self._decoder.feed(line.removesuffix(b"\r").decode("utf-8"))
                if event is not None:
                    self._on_event(event)
        except (ServerError, UnicodeDecodeError) as error:
            logger.debug("raw stream not read (the SDK's objects are): %s", error)
            self.failed = True


def http_response(stream: Any) -> Any | None:
    """The HTTP response under an SDK stream: its `response` (the SDKs' `Stream`, Anthropic's
    `MessageStream`), else the one OpenAI's `ResponseStream` keeps as `_response`."""
    found = getattr(stream, "response", None)
    return found if found is not None else getattr(stream, "_response", None)


def tap_response(response: Any, tap: RawEventTap) -> bool:
    """Send the body of `response` (the httpx response an SDK stream is about to read) through
    `tap` as the SDK reads it. False when it cannot: a compressed body (its raw bytes are not
    the events), or a response whose byte stream is not httpx's."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return False
    encoding = str(headers.get("content-encoding") or "identity").lower()
    stream = getattr(response, "stream", None)
    if encoding != "identity" or stream is None:
        return False
    for base in type(stream).__mro__:
        if base.__name__ == "SyncByteStream":
            response.stream = _sync_tee(base)(stream, tap)
            return True
        if base.__name__ == "AsyncByteStream":
            response.stream = _async_tee(base)(stream, tap)
            return True
    return False


@functools.cache
def _sync_tee(base: type) -> type:
    """A byte stream of `base`'s kind (httpx checks it) passing each chunk to a tap too."""

    class SyncTee(base):  # type: ignore[misc]
        def __init__(self, inner: Any, tap: RawEventTap) -> None:
            self._inner = inner
            self._tap = tap

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                self._tap.feed(chunk)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    return SyncTee


@functools.cache
def _async_tee(base: type) -> type:
    """`_sync_tee` for an async byte stream."""

    class AsyncTee(base):  # type: ignore[misc]
        def __init__(self, inner: Any, tap: RawEventTap) -> None:
            self._inner = inner
            self._tap = tap

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                self._tap.feed(chunk)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return AsyncTee


__all__ = ["RawEventTap", "http_response", "tap_response"]
