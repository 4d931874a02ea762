"""The raw server-sent events under an SDK stream the caller reads.

The SDKs' stream helpers (`messages.stream`, `responses.stream`, `responses.create(stream=True)`)
hand the drop-in only SDK objects, built in the SDK model's field order; a block or item the
library sends back as the server wrote it (a compaction block, a reasoning item) needs the
server's own JSON. The drop-in still hands the caller the SDK's own stream, and reads the same
bytes as the SDK reads them: the HTTP response's decoded byte iteration (decompressed: the
SDKs ask for gzip, and the APIs compress their streams) is wrapped so that each chunk also
goes, line by line, through `unbounded.wire.sse.SseDecoder` to a fold of raw events. Nothing
is read twice and nothing is read ahead of the caller.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from unbounded.errors import ServerError
from unbounded.wire.sse import SseDecoder

logger = logging.getLogger(__name__)


class RawEventTap:
    """The server-sent events of the bytes fed to it, as JSON dicts in the server's key order,
    each handed to `on_event`. A malformed event, or `on_event` failing on one, stops the tap
    (`failed`), never the caller's stream: the SDK reports what it makes of the same bytes."""

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
        except Exception:  # the fold's own failure: the caller's stream goes on regardless
            logger.warning("raw stream fold failed (the SDK's objects are read)", exc_info=True)
            self.failed = True


def http_response(stream: Any) -> Any | None:
    """The HTTP response under an SDK stream: its `response` (the SDKs' `Stream`, Anthropic's
    `MessageStream`), else the one OpenAI's `ResponseStream` keeps as `_response`."""
    found = getattr(stream, "response", None)
    return found if found is not None else getattr(stream, "_response", None)


def tap_response(response: Any, tap: RawEventTap) -> bool:
    """Send the body of `response` (the httpx response an SDK stream is about to read) through
    `tap` as the SDK reads it: its decoded bytes (`iter_bytes` / `aiter_bytes`, which undo a
    gzip, deflate, brotli or zstd `content-encoding`), the very iteration both SDKs' streams
    read. False when `response` has no such iteration (not an httpx response)."""
    sync_bytes = getattr(response, "iter_bytes", None)
    async_bytes = getattr(response, "aiter_bytes", None)
    if not callable(sync_bytes) or not callable(async_bytes):
        return False

    def iter_bytes(chunk_size: int | None = None) -> Iterator[bytes]:
        for chunk in sync_bytes(chunk_size):
            tap.feed(chunk)
            yield chunk

    async def aiter_bytes(chunk_size: int | None = None) -> AsyncIterator[bytes]:
        async for chunk in async_bytes(chunk_size):
            tap.feed(chunk)
            yield chunk

    # On the instance: this one response reads through the tap, its class is left alone.
    response.iter_bytes = iter_bytes
    response.aiter_bytes = aiter_bytes
    return True


__all__ = ["RawEventTap", "http_response", "tap_response"]
