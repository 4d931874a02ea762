"""The streams the drop-ins hand back for a streamed reply: the SDK's stream, passed through
event by event to the caller, while a recorder watches the events go by and records the reply
once it is whole. The Anthropic and OpenAI drop-ins specialize these two classes (sync and
async) only by the recorder they give them and the events it reads."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Protocol

from typing_extensions import Self


class StreamRecorder(Protocol):
    """What watches a passing stream: each event as it goes by, and the stream's end."""

    def observe(self, event: Any) -> None:
        """Take the next event the caller receives."""
        ...

    def finish(self) -> None:
        """The stream was read to its end (no event follows)."""
        ...


class BaseRecordingStream:
    """A sync SDK stream passed through event by event to a `StreamRecorder`; closing it (or
    leaving its `with`) closes the SDK's stream. Other attributes are the SDK stream's."""

    def __init__(self, stream: Any, recorder: StreamRecorder) -> None:
        self._stream = stream
        self._recorder = recorder

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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the response (a reply not read whole is not recorded)."""
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


class AsyncBaseRecordingStream:
    """`BaseRecordingStream` for the async clients."""

    def __init__(self, stream: Any, recorder: StreamRecorder) -> None:
        self._stream = stream
        self._recorder = recorder

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            event = await self._stream.__anext__()
        except StopAsyncIteration:
            self._recorder.finish()
            raise
        self._recorder.observe(event)
        return event

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the response (a reply not read whole is not recorded)."""
        await self._stream.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


__all__ = ["AsyncBaseRecordingStream", "BaseRecordingStream", "StreamRecorder"]
