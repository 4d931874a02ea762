"""Streamed replies of the OpenAI drop-in: the SDK's raw stream (`create(stream=True)`) and
its stream helpers' streams (`chat.completions.stream`, `responses.stream`), passed through
event by event while the wire format's fold rebuilds the reply, which is recorded once whole."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from unbounded.integrations._raw_tap import RawEventTap, http_response, tap_response
from unbounded.integrations._recording_streams import AsyncBaseRecordingStream, BaseRecordingStream
from unbounded.wire.base import StreamAssembler

logger = logging.getLogger(__name__)


class _Recorder:
    """Folds a passing stream and records its reply once: at the terminal event when the
    format has one (Responses), else when the stream is read to its end (Chat Completions,
    whose usage chunk follows the finish)."""

    def __init__(
        self,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        request_id: str | None,
        raw: tuple[Any, StreamAssembler] | None = None,
    ) -> None:
        self._fold = fold
        self._on_reply = on_reply
        self._request_id = request_id
        self.recorded = False
        self._raw: tuple[RawEventTap, StreamAssembler] | None = None
        """The tap on the stream's bytes and its fold of the raw events, when `raw` (the SDK
        stream and a second fold) could be tapped: the reply is then read from the server's
        JSON (Responses items keep its key order), the SDK's events being the fallback."""
        if raw is not None:
            stream, raw_fold = raw
            tap = RawEventTap(raw_fold.add)
            if tap_response(http_response(stream), tap):
                self._raw = (tap, raw_fold)

    def observe(self, event: Any) -> None:
        """Fold an event; record the reply at the format's terminal event."""
        self._fold.add(event)
        if getattr(self._fold, "stopped", False):
            self.finish()

    def finish(self) -> None:
        """Record the reply, once (a stream cut short records nothing)."""
        if self.recorded:
            return
        self.recorded = True
        fold = self._fold
        if self._raw is not None:
            tap, raw_fold = self._raw
            if not tap.failed and getattr(raw_fold, "stopped", False):
                fold = raw_fold
        try:
            reply = fold.finish(self._request_id)
        except Exception as error:  # a cut stream: nothing whole to record
            logger.warning("a streamed reply was not recorded: %s", error)
            return
        self._on_reply(reply)


class _HelperRecorder(_Recorder):
    """A `_Recorder` reading the events of the SDK's stream helpers: Chat Completions helpers
    wrap each raw chunk in a `chunk` event (their other events repeat what the chunks say);
    Responses helpers yield the API's events, `response.completed` carrying the reply."""

    def __init__(
        self,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        *,
        chat: bool,
        raw: tuple[Any, StreamAssembler] | None = None,
    ) -> None:
        super().__init__(fold, on_reply, None, raw)
        self._chat = chat

    def observe(self, event: Any) -> None:
        """Fold the raw event the helper's event carries."""
        if not self._chat:
            super().observe(event)
        elif getattr(event, "type", None) == "chunk":
            super().observe(event.chunk)


def _request_id(stream: Any) -> str | None:
    headers = getattr(getattr(stream, "response", None), "headers", None)
    return None if headers is None else headers.get("x-request-id")


class OpenAIRecordingStream(BaseRecordingStream):
    """The SDK's stream (`create(stream=True)`), passed through event by event; the reply
    is recorded once whole."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        raw_fold: StreamAssembler | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _Recorder(fold, on_reply, _request_id(stream), raw))


class AsyncOpenAIRecordingStream(AsyncBaseRecordingStream):
    """`OpenAIRecordingStream` for the async client."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        raw_fold: StreamAssembler | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _Recorder(fold, on_reply, _request_id(stream), raw))


class HelperStream(BaseRecordingStream):
    """The SDK helper's stream (`chat.completions.stream`, `responses.stream`), passed
    through event by event; the reply is recorded once read whole (by iterating it, or by
    `get_final_completion` / `get_final_response` / `until_done`)."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        *,
        chat: bool,
        raw_fold: StreamAssembler | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _HelperRecorder(fold, on_reply, chat=chat, raw=raw))

    def until_done(self) -> HelperStream:
        """Read the stream to its end (recording the reply)."""
        for _ in self:
            pass
        return self

    def get_final_completion(self) -> Any:
        """The SDK's whole completion, once the stream is read (and recorded)."""
        self.until_done()
        return self._stream.get_final_completion()

    def get_final_response(self) -> Any:
        """The SDK's whole response, once the stream is read (and recorded)."""
        self.until_done()
        return self._stream.get_final_response()


class AsyncHelperStream(AsyncBaseRecordingStream):
    """`HelperStream` for the async client."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        *,
        chat: bool,
        raw_fold: StreamAssembler | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _HelperRecorder(fold, on_reply, chat=chat, raw=raw))

    async def until_done(self) -> AsyncHelperStream:
        """Read the stream to its end (recording the reply)."""
        async for _ in self:
            pass
        return self

    async def get_final_completion(self) -> Any:
        """The SDK's whole completion, once the stream is read (and recorded)."""
        await self.until_done()
        return await self._stream.get_final_completion()

    async def get_final_response(self) -> Any:
        """The SDK's whole response, once the stream is read (and recorded)."""
        await self.until_done()
        return await self._stream.get_final_response()


__all__ = [
    "AsyncHelperStream",
    "AsyncOpenAIRecordingStream",
    "HelperStream",
    "OpenAIRecordingStream",
]
