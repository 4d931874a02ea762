"""Streamed replies of the OpenAI drop-in: the SDK's raw stream (`create(stream=True)`) and
its stream helpers' streams (`chat.completions.stream`, `responses.stream`), passed through
event by event while the wire format's fold rebuilds the reply, which is recorded once whole."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from unbounded.wire.base import StreamAssembler

logger = logging.getLogger(__name__)


class _Recorder:
    """Folds a passing stream and records its reply once: at the terminal event when the
    format has one (Responses), else when the stream is read to its end (Chat Completions,
    whose usage chunk follows the finish)."""

    def __init__(
        self, fold: StreamAssembler, on_reply: Callable[[Any], None], request_id: str | None
    ) -> None:
        self._fold = fold
        self._on_reply = on_reply
        self._request_id = request_id
        self.recorded = False

    def observe(self, event: Any) -> None:
        self._fold.add(event)
        if getattr(self._fold, "stopped", False):
            self.finish()

    def finish(self) -> None:
        if self.recorded:
            return
        self.recorded = True
        try:
            reply = self._fold.finish(self._request_id)
        except Exception as error:  # a cut stream: nothing whole to record
            logger.warning("a streamed reply was not recorded: %s", error)
            return
        self._on_reply(reply)


def _request_id(stream: Any) -> str | None:
    headers = getattr(getattr(stream, "response", None), "headers", None)
    return None if headers is None else headers.get("x-request-id")


class OpenAIRecordingStream:
    """The SDK's stream (`create(stream=True)`), passed through event by event; the reply
    is recorded once whole."""

    def __init__(self, stream: Any, fold: StreamAssembler, on_reply: Callable[[Any], None]) -> None:
        self._stream = stream
        self._recorder = _Recorder(fold, on_reply, _request_id(stream))

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            event = next(self._stream)
        except StopIteration:
            self._recorder.finish()
            raise
        self._recorder.observe(event)
        return event

    def __enter__(self) -> OpenAIRecordingStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the response (the reply is recorded only if it was read whole)."""
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class AsyncOpenAIRecordingStream:
    """`OpenAIRecordingStream` for the async client."""

    def __init__(self, stream: Any, fold: StreamAssembler, on_reply: Callable[[Any], None]) -> None:
        self._stream = stream
        self._recorder = _Recorder(fold, on_reply, _request_id(stream))

    def __aiter__(self) -> AsyncOpenAIRecordingStream:
        return self

    async def __anext__(self) -> Any:
        try:
            event = await self._stream.__anext__()
        except StopAsyncIteration:
            self._recorder.finish()
            raise
        self._recorder.observe(event)
        return event

    async def __aenter__(self) -> AsyncOpenAIRecordingStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the response (the reply is recorded only if it was read whole)."""
        await self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class _HelperEvents:
    """What the sync and async helper streams share: how an event of the SDK's stream
    helper feeds the fold (Chat Completions helpers wrap each raw chunk in a `chunk` event;
    Responses helpers yield the API's events, `response.completed` carrying the reply)."""

    def __init__(
        self, stream: Any, fold: StreamAssembler, on_reply: Callable[[Any], None], *, chat: bool
    ) -> None:
        self._stream = stream
        self._chat = chat
        self._recorder = _Recorder(fold, on_reply, None)

    def _observe(self, event: Any) -> None:
        if not self._chat:
            self._recorder.observe(event)
        elif getattr(event, "type", None) == "chunk":
            self._recorder.observe(event.chunk)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class HelperStream(_HelperEvents):
    """The SDK helper's stream (`chat.completions.stream`, `responses.stream`), passed
    through event by event; the reply is recorded once read whole (by iterating it, or by
    `get_final_completion` / `get_final_response` / `until_done`)."""

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            event = next(self._stream)
        except StopIteration:
            self._recorder.finish()
            raise
        self._observe(event)
        return event

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


class AsyncHelperStream(_HelperEvents):
    """`HelperStream` for the async client."""

    def __aiter__(self) -> AsyncHelperStream:
        return self

    async def __anext__(self) -> Any:
        try:
            event = await self._stream.__anext__()
        except StopAsyncIteration:
            self._recorder.finish()
            raise
        self._observe(event)
        return event

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
