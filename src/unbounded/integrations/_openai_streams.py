"""Streamed replies of the OpenAI drop-in: the SDK's raw stream (`create(stream=True)`) and
its stream helpers' streams (`chat.completions.stream`, `responses.stream`), passed through
event by event while the wire format's fold rebuilds the reply, which is recorded once whole."""

from __future__ import annotations

import logging
from collections import deque
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


class ChatPassage:
    """How the events of a Chat Completions stream pass to the caller. The drop-in asks for
    the usage chunk (`stream_options.include_usage`) to record the reply's usage; when the
    caller did not ask for it, that chunk (empty `choices`) is `swallowed`, so the caller gets
    the chunks the SDK would give. At the chunk carrying the `finish_reason` the stream is
    read to its end before that chunk is handed over (`finishes`): only the usage chunk and
    `[DONE]` follow it, and a caller who stops at the finish still has the reply recorded."""

    def __init__(self, *, swallow_usage: bool, helper: bool) -> None:
        self.swallow_usage = swallow_usage
        self.helper = helper

    def _chunk(self, event: Any) -> Any:
        if not self.helper:
            return event
        return event.chunk if getattr(event, "type", None) == "chunk" else None

    def swallowed(self, event: Any) -> bool:
        """Whether `event` is the usage chunk only the drop-in asked for."""
        chunk = self._chunk(event)
        return (
            self.swallow_usage
            and chunk is not None
            and not chunk.choices
            and getattr(chunk, "usage", None) is not None
        )

    def finishes(self, event: Any) -> bool:
        """Whether `event` is a chunk ending the reply (a `finish_reason`)."""
        chunk = self._chunk(event)
        return chunk is not None and any(c.finish_reason for c in chunk.choices or [])


class _ReadAhead:
    """The events read past the finish chunk, handed over after it; an error met while
    reading them is raised once they are (where the caller's loop would have met it)."""

    def __init__(self) -> None:
        self.events: deque[Any] = deque()
        self.error: BaseException | None = None

    def next(self, end: Exception) -> Any:
        """The next event read ahead, else the error met, else `end` (the stream's end)."""
        if self.events:
            return self.events.popleft()
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        raise end


def _request_id(stream: Any) -> str | None:
    headers = getattr(getattr(stream, "response", None), "headers", None)
    return None if headers is None else headers.get("x-request-id")


class _ChatPassing(BaseRecordingStream):
    """A sync stream whose Chat Completions events pass as `ChatPassage` says (any other
    stream's events pass unchanged)."""

    def __init__(self, stream: Any, recorder: _Recorder, passage: ChatPassage | None) -> None:
        super().__init__(stream, recorder)
        self._passage = passage
        self._ahead: _ReadAhead | None = None

    def __next__(self) -> Any:
        passage = self._passage
        if passage is None:
            return super().__next__()
        if self._ahead is not None:
            return self._ahead.next(StopIteration())
        while True:
            event = super().__next__()
            if passage.swallowed(event):
                continue
            if passage.finishes(event):
                self._ahead = ahead = _ReadAhead()
                try:
                    while True:
                        later = super().__next__()
                        if not passage.swallowed(later):
                            ahead.events.append(later)
                except StopIteration:
                    pass
                except Exception as error:  # the caller meets it after the events before it
                    ahead.error = error
            return event


class _AsyncChatPassing(AsyncBaseRecordingStream):
    """`_ChatPassing` for the async client."""

    def __init__(self, stream: Any, recorder: _Recorder, passage: ChatPassage | None) -> None:
        super().__init__(stream, recorder)
        self._passage = passage
        self._ahead: _ReadAhead | None = None

    async def __anext__(self) -> Any:
        passage = self._passage
        if passage is None:
            return await super().__anext__()
        if self._ahead is not None:
            return self._ahead.next(StopAsyncIteration())
        while True:
            event = await super().__anext__()
            if passage.swallowed(event):
                continue
            if passage.finishes(event):
                self._ahead = ahead = _ReadAhead()
                try:
                    while True:
                        later = await super().__anext__()
                        if not passage.swallowed(later):
                            ahead.events.append(later)
                except StopAsyncIteration:
                    pass
                except Exception as error:  # the caller meets it after the events before it
                    ahead.error = error
            return event


class OpenAIRecordingStream(_ChatPassing):
    """The SDK's stream (`create(stream=True)`), passed through event by event; the reply
    is recorded once whole (a Chat Completions stream's as `ChatPassage` says)."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        raw_fold: StreamAssembler | None = None,
        passage: ChatPassage | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _Recorder(fold, on_reply, _request_id(stream), raw), passage)


class AsyncOpenAIRecordingStream(_AsyncChatPassing):
    """`OpenAIRecordingStream` for the async client."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        raw_fold: StreamAssembler | None = None,
        passage: ChatPassage | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _Recorder(fold, on_reply, _request_id(stream), raw), passage)


class HelperStream(_ChatPassing):
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
        passage: ChatPassage | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _HelperRecorder(fold, on_reply, chat=chat, raw=raw), passage)

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


class AsyncHelperStream(_AsyncChatPassing):
    """`HelperStream` for the async client."""

    def __init__(
        self,
        stream: Any,
        fold: StreamAssembler,
        on_reply: Callable[[Any], None],
        *,
        chat: bool,
        raw_fold: StreamAssembler | None = None,
        passage: ChatPassage | None = None,
    ) -> None:
        raw = None if raw_fold is None else (stream, raw_fold)
        super().__init__(stream, _HelperRecorder(fold, on_reply, chat=chat, raw=raw), passage)

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
    "ChatPassage",
    "HelperStream",
    "OpenAIRecordingStream",
]
