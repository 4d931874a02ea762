"""The drop-ins' recording-stream base: events pass through in order, the recorder sees each
one and the stream's end, closing closes the SDK's stream, other attributes are the SDK's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from unbounded.integrations._recording_streams import (
    AsyncBaseRecordingStream,
    BaseRecordingStream,
)


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.finished = 0

    def observe(self, event: Any) -> None:
        self.seen.append(event)

    def finish(self) -> None:
        self.finished += 1


class _SdkStream:
    """A stand-in for an SDK stream: its events, `close`, and an attribute of its own."""

    def __init__(self, events: list[Any]) -> None:
        self._events = iter(events)
        self.closed = False
        self.response = "the HTTP response"

    def __next__(self) -> Any:
        return next(self._events)

    async def __anext__(self) -> Any:
        try:
            return next(self._events)
        except StopIteration:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self.closed = True


class _AsyncSdkStream(_SdkStream):
    async def close(self) -> None:  # type: ignore[override]
        self.closed = True


def test_sync_stream_passes_every_event_and_tells_the_end_once() -> None:
    recorder, sdk = _Recorder(), _SdkStream(["a", "b", "c"])
    with BaseRecordingStream(sdk, recorder) as stream:
        assert list(stream) == ["a", "b", "c"]
        assert recorder.seen == ["a", "b", "c"]
        assert recorder.finished == 1
        assert not sdk.closed
    assert sdk.closed


def test_sync_stream_left_early_does_not_tell_the_end() -> None:
    recorder, sdk = _Recorder(), _SdkStream(["a", "b"])
    stream = BaseRecordingStream(sdk, recorder)
    assert next(stream) == "a"
    stream.close()
    assert (recorder.seen, recorder.finished, sdk.closed) == (["a"], 0, True)


def test_sync_stream_other_attributes_are_the_sdk_streams() -> None:
    stream = BaseRecordingStream(_SdkStream([]), _Recorder())
    assert stream.response == "the HTTP response"
    with pytest.raises(AttributeError):
        stream._events  # noqa: B018 - private names are not forwarded


def test_async_stream_passes_every_event_and_tells_the_end_once() -> None:
    recorder, sdk = _Recorder(), _AsyncSdkStream(["a", "b", "c"])

    async def read() -> list[Any]:
        async with AsyncBaseRecordingStream(sdk, recorder) as stream:
            got = [event async for event in stream]
            assert not sdk.closed
        return got

    assert asyncio.run(read()) == ["a", "b", "c"]
    assert (recorder.seen, recorder.finished, sdk.closed) == (["a", "b", "c"], 1, True)


def test_async_stream_left_early_does_not_tell_the_end() -> None:
    recorder, sdk = _Recorder(), _AsyncSdkStream(["a", "b"])

    async def read() -> Any:
        stream = AsyncBaseRecordingStream(sdk, recorder)
        first = await stream.__anext__()
        await stream.close()
        return first

    assert asyncio.run(read()) == "a"
    assert (recorder.seen, recorder.finished, sdk.closed) == (["a"], 0, True)
    assert AsyncBaseRecordingStream(sdk, recorder).response == "the HTTP response"
