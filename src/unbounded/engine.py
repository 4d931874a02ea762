"""The turn engine: the steps of one turn, written once, driven by every entry point.

    prepare -> yield the request -> (the driver sends it) -> receive the reply or the error
      error, prompt too long, first time this send: compact (reactive), prepare, yield again
      error, otherwise: raised to the driver
      reply whose tool calls the session all answers itself (`recall`, an extension's tool),
      rounds left: answered, recorded as a recall round, prepare, yield again
      reply: recorded; the turn is over

`TurnFlow` is that flow as an async generator in the manner of httpx's `auth_flow`: it never
sends anything itself, so the same steps serve `Session.call`, `SyncSession`, the Anthropic
drop-in (sync and async, streamed or not) and the agent loop, each only sending what the flow
yields: `drive_turn` / `drive_turn_blocking` run a turn to its recorded reply, `open_turn` /
`open_turn_blocking` until a stream is open (its reply is recorded once read). It is async,
not sans-I/O all the way down, because preparing a request may compact, and a compaction
awaits its summary.

The flow reaches the session through `TurnSession`, the few methods it calls, so this module
sits below `session.py` and imports nothing of it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from unbounded.errors import ConfigError, PromptTooLongError
from unbounded.events import EventSink, ReactiveCompaction, emit
from unbounded.model.entries import Entry
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy

RECALL_ROUND_FIELD = "isRecallRound"
"""Marks the records of a recall round answered inside the flow: the caller never saw them,
so a drop-in leaves them out when it matches the caller's messages against the transcript."""

T = TypeVar("T")


class CompactingSession(Protocol):
    """What the reactive compaction needs: a policy, a way to compact, where events go (a
    `Session`, or the LangChain middleware's call)."""

    @property
    def policy(self) -> Policy:
        """The session's policy."""
        ...

    async def auto_compact(self) -> Any:
        """Compact now; None when it failed."""
        ...

    def events_sink(self) -> EventSink | None:
        """Where the session's events go."""
        ...


class TurnSession(CompactingSession, Protocol):
    """What a turn needs of a session (`Session` is one)."""

    @property
    def offers_recall(self) -> bool:
        """Whether requests offer the `recall` tool now."""
        ...

    async def prepare(self) -> ProviderRequest:
        """The request to send now."""
        ...

    def record(
        self, response: ModelResponse | Mapping[str, Any], *, extra: Mapping[str, Any] | None = ...
    ) -> Entry:
        """Record the model's answer."""
        ...

    def run_recall(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a `recall` call."""
        ...

    def answers_tool(self, name: str) -> bool:
        """Whether the session answers calls of the tool `name` itself (`recall` while it is
        offered, an extension's tool)."""
        ...

    async def answer_tool(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """The tool_result for a call the session answers itself."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append records to the transcript."""
        ...


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """How a driver wants its turns run."""

    recall_rounds: int = 0
    """Replies calling only `recall` answered inside the flow, at most this many per turn
    (0: such a reply goes to the caller, who answers it with `Session.run_recall`)."""
    is_prompt_too_long: Callable[[BaseException], bool] = lambda error: isinstance(
        error, PromptTooLongError
    )
    """Whether an error the send raised is the API refusing the prompt as over the window
    (a driver that sends through an SDK maps the SDK's exceptions here)."""

    def __post_init__(self) -> None:
        if self.recall_rounds < 0:
            raise ConfigError(f"recall_rounds must be >= 0, not {self.recall_rounds}")


async def reactive_compaction(session: CompactingSession, error: BaseException) -> bool:
    """The one reactive compaction after a prompt-too-long answer: True when the conversation
    was compacted (send again, once), False when compaction is off or failed."""
    emit(session.events_sink(), ReactiveCompaction(str(error)))
    if not session.policy.compact_enabled:
        return False
    return await session.auto_compact() is not None


def is_recall_round(session: TurnSession, response: ModelResponse) -> bool:
    """Whether a reply calls tools and the session answers every call itself (its own
    `recall`, an extension's tool such as `compact_context`)."""
    uses = response.tool_uses
    return bool(uses) and all(session.answers_tool(str(use.get("name"))) for use in uses)


async def answer_recall_round(session: TurnSession, response: ModelResponse) -> None:
    """Record a reply whose calls the session answers itself and its answers to them, both
    marked as a round the caller did not see."""
    mark = {RECALL_ROUND_FIELD: True}
    session.record(response, extra=mark)
    answers = [await session.answer_tool(use) for use in response.tool_uses]
    session.append([Entry.user(answers, extra=mark)])


TurnFlow = AsyncGenerator[ProviderRequest, "ModelResponse | BaseException"]
"""Yields each request to send; is sent the reply, or the error the send raised."""


async def turn_flow(session: TurnSession, options: TurnOptions = TurnOptions()) -> TurnFlow:
    """One turn (see the module docstring). Ends after recording the final reply; raises the
    error it was sent when no retry applies."""
    request = await session.prepare()
    compacted = False  # a reactive compaction for the current send (one per send)
    rounds = 0
    while True:
        outcome = yield request
        if isinstance(outcome, BaseException):
            if (
                compacted
                or not options.is_prompt_too_long(outcome)
                or not await reactive_compaction(session, outcome)
            ):
                raise outcome
            compacted = True
        elif rounds < options.recall_rounds and is_recall_round(session, outcome):
            await answer_recall_round(session, outcome)
            rounds += 1
            compacted = False
        else:
            session.record(outcome)
            return
        request = await session.prepare()


async def drive_turn(
    flow: TurnFlow,
    send: Callable[[ProviderRequest], Awaitable[T]],
    to_response: Callable[[T], ModelResponse | Awaitable[ModelResponse]],
) -> T:
    """Run a turn to its end with an async `send`; returns the last reply as `send` gave it
    (`to_response` reads it as a `ModelResponse`, awaited when it returns an awaitable)."""
    request = await flow.__anext__()
    while True:
        try:
            reply = await send(request)
        except Exception as error:  # the flow decides: a retry, or raised again
            request = await flow.asend(error)
            continue
        response = to_response(reply)
        if inspect.isawaitable(response):
            response = await response
        try:
            request = await flow.asend(response)
        except StopAsyncIteration:
            return reply


def drive_turn_blocking(
    flow: TurnFlow,
    send: Callable[[ProviderRequest], T],
    to_response: Callable[[T], ModelResponse],
    run: Callable[[Awaitable[Any]], Any],
) -> T:
    """`drive_turn` for a blocking `send`: the flow's own steps run with `run`, a runner that
    keeps one event loop (`unbounded.blocking.BlockingRunner.run`), so the generator stays
    on the loop it started on."""
    request: ProviderRequest = run(flow.__anext__())
    while True:
        try:
            reply = send(request)
        except Exception as error:
            request = run(flow.asend(error))
            continue
        try:
            request = run(flow.asend(to_response(reply)))
        except StopAsyncIteration:
            return reply


async def open_turn(flow: TurnFlow, send: Callable[[ProviderRequest], Awaitable[T]]) -> T:
    """Drive a turn until one send is accepted and return what it gave (a stream the caller
    reads): the flow is closed there, and the reply is recorded once it has been read."""
    request = await flow.__anext__()
    while True:
        try:
            opened = await send(request)
        except Exception as error:
            request = await flow.asend(error)
            continue
        await flow.aclose()
        return opened


def open_turn_blocking(
    flow: TurnFlow, send: Callable[[ProviderRequest], T], run: Callable[[Awaitable[Any]], Any]
) -> T:
    """`open_turn` for a blocking `send` (the flow's steps run with `run`)."""
    request: ProviderRequest = run(flow.__anext__())
    while True:
        try:
            opened = send(request)
        except Exception as error:
            request = run(flow.asend(error))
            continue
        run(flow.aclose())
        return opened


__all__ = [
    "RECALL_ROUND_FIELD",
    "CompactingSession",
    "TurnFlow",
    "TurnOptions",
    "TurnSession",
    "answer_recall_round",
    "drive_turn",
    "drive_turn_blocking",
    "is_recall_round",
    "open_turn",
    "open_turn_blocking",
    "reactive_compaction",
    "turn_flow",
]
