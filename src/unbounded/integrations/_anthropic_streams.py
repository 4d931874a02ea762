"""Streamed replies of the drop-in: the raw event stream of `create(stream=True)`, recorded
when its `message_stop` arrives (the Messages format's fold rebuilds the reply), and the
managers `messages.stream(...)` returns, sync and async."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from unbounded.engine import open_turn, open_turn_blocking, turn_flow
from unbounded.integrations._raw_tap import RawEventTap, http_response, tap_response
from unbounded.integrations._recording_streams import AsyncBaseRecordingStream, BaseRecordingStream
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.wire.anthropic import AnthropicMessages

if TYPE_CHECKING:
    from anthropic.lib.streaming import AsyncMessageStream, MessageStream

    from unbounded.integrations._drop_in import DropInPipeline as ClientPipeline

logger = logging.getLogger(__name__)


def _final_snapshot(stream: Any) -> Any | None:
    """The complete message a `MessageStream` accumulated, or None when it did not finish."""
    getter = getattr(stream, "_current_snapshot_or_none", None)
    snapshot: Any
    if callable(getter):
        snapshot = getter()
    else:  # pragma: no cover - SDK versions without the private accessor
        try:
            snapshot = stream.current_message_snapshot
        except (AssertionError, AttributeError):
            snapshot = None
    if snapshot is None or getattr(snapshot, "stop_reason", None) is None:
        return None
    return snapshot


class _RawReply:
    """The reply under a `messages.stream(...)` the caller reads, folded from the same bytes
    as they pass (`_raw_tap`), so what the session records keeps the server's key order."""

    def __init__(self, stream: Any) -> None:
        self._fold = AnthropicMessages().stream_assembler()
        self._tap = RawEventTap(self._fold.add)
        self._tapped = tap_response(http_response(stream), self._tap)

    def reply(self, stream: Any) -> tuple[Any, ModelResponse | None] | None:
        """What to record once the caller is done with `stream` (None: not finished): the
        SDK's snapshot, whose `content` the caller sends back (its echo is known by identity),
        and the raw fold's reading of the same reply when the tap read it to its end."""
        snapshot = _final_snapshot(stream)
        if snapshot is None:
            return None
        if not self._tapped or self._tap.failed or not self._fold.stopped:
            return snapshot, None
        return snapshot, self._fold.response()


class _Accumulated:
    """A reply rebuilt from raw stream events by the Messages format's fold, handed to
    `on_message` as the session reads it (a `ModelResponse`, its compaction blocks as the
    events wrote them) once its `message_stop` arrives."""

    def __init__(self, on_message: Callable[[Any], None]) -> None:
        self._fold = AnthropicMessages().stream_assembler()
        self._on_message = on_message
        self.recorded = False
        self._broken = False
        """An event the fold could not read: the reply is not recorded (the caller's next
        call brings it in as the caller sends it back)."""

    def observe(self, event: Any) -> None:
        """Fold an event; record the reply at its `message_stop`. An event the fold cannot
        read (a tool input that is not valid JSON) is logged, never raised into the caller's
        loop: the bare SDK's raw stream yields every event."""
        if self._broken:
            return
        try:
            self._fold.add(event)
        except Exception:
            self._broken = True
            logger.warning(
                "a streamed reply could not be read (%s event): it is not recorded here",
                getattr(event, "type", type(event).__name__),
                exc_info=True,
            )
            return
        if self._fold.stopped and not self.recorded:
            self.recorded = True
            self._on_message(self._fold.response())

    def finish(self) -> None:
        """Nothing more to record: a stream that ended before its `message_stop` was cut."""


class RecordingStream(BaseRecordingStream):
    """The SDK's raw event stream (`create(stream=True)`), passed through event by event; the
    reply is recorded when its `message_stop` arrives."""

    def __init__(self, stream: Any, on_message: Callable[[Any], None]) -> None:
        super().__init__(stream, _Accumulated(on_message))


class AsyncRecordingStream(AsyncBaseRecordingStream):
    """`RecordingStream` for the async client."""

    def __init__(self, stream: Any, on_message: Callable[[Any], None]) -> None:
        super().__init__(stream, _Accumulated(on_message))


class _ManagerState:
    """What the sync and async `messages.stream(...)` managers share: the call's keywords, the
    SDK's manager and stream once open, and what to record when the `with` block ends."""

    def __init__(self, pipeline: ClientPipeline, sdk: Any, kwargs: dict[str, Any]) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._kwargs = kwargs
        self._inner: Any = None
        self._stream: Any = None
        self._raw: _RawReply | None = None
        self._records = True

    def _record_read_reply(self) -> None:
        """Record the reply if the caller read it to its end (a side call records nothing)."""
        if self._stream is None or self._raw is None or not self._records:
            return
        reply = self._raw.reply(self._stream)
        if reply is not None:
            snapshot, folded = reply
            self._pipeline.record(snapshot, folded)


class StreamManager(_ManagerState):
    """What `messages.stream(...)` returns: entering it runs a turn of the engine until the
    SDK's stream is open (the engine's one prompt-too-long retry included); leaving it records
    the reply when it was read to the end. A side call opens the SDK's stream with
    `side_kwargs`: over the session's view when it continues the conversation, else as given."""


    def _open(self, request: ProviderRequest, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        method = pipeline.messages_api(request, self._sdk).stream
        self._inner = method(**pipeline.call_kwargs(request, method, passthrough))
        stream = self._inner.__enter__()
        self._raw = _RawReply(stream)
        pipeline.mark_sent()
        return stream

    def __enter__(self) -> MessageStream[Any]:
        pipeline = self._pipeline
        passthrough = pipeline.begin(self._kwargs, streaming_helper=True)
        if passthrough is None:
            self._records = False
            method = self._sdk.messages.stream
            self._inner = method(**pipeline.side_kwargs(self._kwargs, method))
            self._stream = self._inner.__enter__()
            return cast("MessageStream[Any]", self._stream)
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        def send(request: ProviderRequest) -> Any:
            return self._open(request, passthrough)

        self._stream = open_turn_blocking(flow, send, pipeline.runner.run)
        return cast("MessageStream[Any]", self._stream)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._record_read_reply()
        finally:
            if self._inner is not None:
                self._inner.__exit__(exc_type, exc, traceback)


class AsyncStreamManager(_ManagerState):
    """`StreamManager` for the async client (`async with client.messages.stream(...)`)."""


    async def _open(self, request: ProviderRequest, passthrough: Mapping[str, Any]) -> Any:
        pipeline = self._pipeline
        method = pipeline.messages_api(request, self._sdk).stream
        self._inner = method(**pipeline.call_kwargs(request, method, passthrough))
        stream = await self._inner.__aenter__()
        self._raw = _RawReply(stream)
        pipeline.mark_sent()
        return stream

    async def __aenter__(self) -> AsyncMessageStream[Any]:
        pipeline = self._pipeline
        passthrough = pipeline.begin(self._kwargs, streaming_helper=True)
        if passthrough is None:
            self._records = False
            method = self._sdk.messages.stream
            self._inner = method(**pipeline.side_kwargs(self._kwargs, method))
            self._stream = await self._inner.__aenter__()
            return cast("AsyncMessageStream[Any]", self._stream)
        flow = turn_flow(pipeline.session, pipeline.turn_options)

        async def send(request: ProviderRequest) -> Any:
            return await self._open(request, passthrough)

        self._stream = await open_turn(flow, send)
        return cast("AsyncMessageStream[Any]", self._stream)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._record_read_reply()
        finally:
            if self._inner is not None:
                await self._inner.__aexit__(exc_type, exc, traceback)
