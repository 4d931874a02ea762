"""The summary prepared off the critical path, swapped in at the threshold when still valid.

    below the mark           nothing
    at the mark (`Policy.background_summary_fraction` of the room below the threshold):
                             `start`: the summary tiers run as an asyncio task on a snapshot
                             of the transcript, sharing the turn's cache-safe prefix
    at the threshold         `at_threshold`:
      summary ready          swapped in if nothing it replaced changed; the records appended
                             since the snapshot are kept verbatim after it
      not ready              the turn goes on without waiting, unless the request would leave
                             no room for the reply (the effective window): then it waits, a
                             stall (`SummaryStall`)
      stale or failed        discarded and started again (or, at the window's edge, the
                             session compacts in the turn: a stall)

Concurrency: the task reads a snapshot (copies of the entry lists; the records themselves are
never edited) and appends nothing; the session applies its result in a prepare step, so a turn
recorded while it runs is after the snapshot and is kept verbatim, never summarized and never
lost. A task that fails or is cancelled changes nothing in the session (logged,
`BackgroundSummaryDiscarded`); closing the session cancels it, and the summary call with it.

Hooks and events at the swap: the task runs the summary tiers without the session's hooks and
holds their events, because until the swap nothing has been compacted. At the swap the
PreCompact hooks are asked, the held events (`CompactionStarted`, ..., `CompactionFinished`)
reach the session's sink, SessionStart's texts join the compaction and PostCompact is told the
summary, as for a compaction in the turn. A summary discarded as stale, too large, superseded
or closed fires no hook and sends none of its events (only `BackgroundSummaryDiscarded`); a
failed one sends its events (`CompactionFailed` says why) and fires no hook. When PreCompact
blocks at the swap, or adds instructions the summary was not written with, the summary is
discarded (`hook`) and the session compacts in the turn with that answer
(`ThresholdStep.pre_compact`), so the hooks are asked once per compaction.

Validity (`take`): the snapshot's records are still the transcript's first records (the same
objects: the transcript only grows), no compaction was appended since, and the records kept
after the summary are one run of the transcript (a boundary relinks one run only). Files
re-read after the summary are read again at the swap: the turns since may have changed them.

Nothing here imports the session: `Session` passes the context, the tiers and the clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from unbounded.compaction.auto import (
    CompactionOutcome,
    SessionMemoryTier,
    TieredCompaction,
    TierEntry,
    TierSlot,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import (
    CompactionHooks,
    CompactionResult,
    PreCompactDecision,
    Trigger,
)
from unbounded.compaction.cut import is_one_run
from unbounded.compaction.glue import Rehydrator
from unbounded.compaction.prompts import PRESERVED_NOTE
from unbounded.compaction.server_blocks import kept_holds_server_compaction
from unbounded.errors import ConfigError
from unbounded.events import (
    BackgroundSummaryDiscarded,
    BackgroundSummaryStarted,
    BackgroundSummarySwapped,
    CompactionFinished,
    Event,
    EventSink,
    emit,
)
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages

logger = logging.getLogger(__name__)

BACKGROUND_FIELD = "backgroundSummary"
"""Set in the compactMetadata of a boundary whose summary was written in the background."""
DiscardReason = Literal["stale", "failed", "too_large", "superseded", "closed", "hook"]
RequestEstimator = Callable[[Sequence[MessageParam]], int]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What the summary was started on."""

    length: int
    """Records of the transcript at the start."""
    last: Entry | None
    """The last of them (the transcript only grows: it must still be there, the same object)."""
    started_at: datetime
    tokens: int
    hooks: CompactionHooks | None
    """The session's hooks, fired at the swap (the task runs without them)."""
    sink: EventSink | None
    """The session's sink, which the held events reach at the swap."""
    held: list[Event]
    """The task's events, held until the swap."""


@dataclass(frozen=True, slots=True)
class ThresholdStep:
    """What the session does at the threshold: apply `outcome` (a swapped summary), wait for
    nothing (`deferred`: the background summary is still being written, or was started
    again), or compact in the turn (neither)."""

    outcome: CompactionOutcome | None = None
    deferred: bool = False
    waited: bool = False
    """The turn waited for the background summary (a stall)."""
    pre_compact: PreCompactDecision | None = None
    """The PreCompact hooks' answer at the swap when it refused the summary (they blocked, or
    added instructions it was not written with): the turn's compaction takes this answer
    instead of asking them again (`answered_hooks`)."""


class _AnsweredHooks:
    """`hooks` with the PreCompact answer already given (`ThresholdStep.pre_compact`)."""

    def __init__(self, hooks: CompactionHooks, answer: PreCompactDecision) -> None:
        self._hooks = hooks
        self._answer = answer

    async def arun_pre_compact(
        self, trigger: Trigger, custom_instructions: str | None = None, /
    ) -> PreCompactDecision:
        """The answer the hooks gave at the swap."""
        return self._answer

    async def arun_session_start(self, source: str = "compact", /) -> list[str]:
        """The hooks' own SessionStart."""
        return await self._hooks.arun_session_start(source)

    async def arun_post_compact(self, trigger: Trigger, compact_summary: str = "", /) -> object:
        """The hooks' own PostCompact."""
        return await self._hooks.arun_post_compact(trigger, compact_summary)


def answered_hooks(
    hooks: CompactionHooks | None, answer: PreCompactDecision | None
) -> CompactionHooks | None:
    """`hooks` for the compaction after a refused swap: PreCompact answered by `answer`
    (the hooks are not asked twice for one compaction); `hooks` itself without an answer."""
    if hooks is None or answer is None:
        return hooks
    return _AnsweredHooks(hooks, answer)


def summary_tiers(tiers: Sequence[TierEntry]) -> tuple[TierEntry, ...]:
    """The tiers a background summary runs: all but the session-notes tier, which reads the
    live session and costs no call (it runs in the turn, at the threshold, as before)."""
    kept = tuple(
        entry
        for entry in tiers
        if not isinstance(entry.tier if isinstance(entry, TierSlot) else entry, SessionMemoryTier)
    )
    return kept


class BackgroundSummary:
    """One background summary at a time, for one session (see the module docstring)."""

    def __init__(
        self, *, events: EventSink | None = None, assumed_latency: timedelta = timedelta(0)
    ) -> None:
        if assumed_latency < timedelta(0):
            raise ConfigError(f"assumed_latency must be >= 0, not {assumed_latency}")
        self._events = events
        self.assumed_latency = assumed_latency
        """A summary counts as ready this long after its start on the session's clock, even
        when its task is done (0: when its task is done). `replay` sets it: there the summary
        is written at once, but a model's takes tens of seconds to minutes."""
        self._task: asyncio.Task[CompactionOutcome | None] | None = None
        self._snapshot: _Snapshot | None = None
        self.started = 0
        """Background summaries started."""
        self.swapped = 0
        """Background summaries swapped in."""
        self.discarded = 0
        """Background summaries discarded (stale, failed, too large, superseded, closed)."""

    @property
    def pending(self) -> bool:
        """A background summary was started and not yet swapped in or discarded."""
        return self._task is not None

    def start(
        self,
        context: CompactionContext,
        tiers: Sequence[TierEntry],
        *,
        failures: int,
        now: datetime,
    ) -> None:
        """Start writing the summary of `context` as a task (the caller checked it is due)."""
        if self._task is not None:
            raise ConfigError("a background summary is already running: take or discard it first")
        entries = list(context.entries)
        held: list[Event] = []
        snapshot = replace(
            context, entries=entries, view=list(context.view), hooks=None, events=held.append
        )
        self._snapshot = _Snapshot(
            length=len(entries),
            last=entries[-1] if entries else None,
            started_at=now,
            tokens=context.tokens,
            hooks=context.hooks,
            sink=context.events,
            held=held,
        )
        runner = TieredCompaction(summary_tiers(tiers))
        self._task = asyncio.get_running_loop().create_task(
            self._run(runner, snapshot, failures), name="unbounded-background-summary"
        )
        self.started += 1
        emit(self._events, BackgroundSummaryStarted(tokens=context.tokens))
        logger.info("background summary started at %d tokens", context.tokens)

    @staticmethod
    async def _run(
        runner: TieredCompaction, context: CompactionContext, failures: int
    ) -> CompactionOutcome | None:
        try:
            return await runner.run(context, failures=failures)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in a tier must not surface in an unrelated later turn
            logger.exception("background summary failed")
            return None

    def ready(self, now: datetime) -> bool:
        """The summary is written and its assumed latency has passed."""
        task, snapshot = self._task, self._snapshot
        if task is None or snapshot is None or not task.done():
            return False
        return now >= snapshot.started_at + self.assumed_latency

    async def settle(self) -> None:
        """Wait until the task is done (its result stays pending until taken)."""
        if self._task is not None:
            await asyncio.wait({self._task})

    async def at_threshold(
        self,
        entries: Sequence[Entry],
        *,
        now: datetime,
        must_wait: bool,
        estimate: RequestEstimator,
        threshold: int,
        rehydrate: Callable[[], Rehydrator | None],
    ) -> ThresholdStep:
        """The step at the threshold: swap in a ready summary, or go on without waiting
        (`deferred`) while the request still leaves room for the reply (`must_wait` False);
        a summary not yet ready is awaited only when `must_wait` (a stall)."""
        if self._task is None:
            return ThresholdStep()
        waited = False
        if not self.ready(now):
            if not must_wait:
                return ThresholdStep(deferred=True)
            await self.settle()
            waited = True
        step = await self.take(entries, estimate=estimate, threshold=threshold, rehydrate=rehydrate)
        return replace(step, waited=waited)

    async def take(
        self,
        entries: Sequence[Entry],
        *,
        estimate: RequestEstimator,
        threshold: int,
        rehydrate: Callable[[], Rehydrator | None],
    ) -> ThresholdStep:
        """The finished summary made to fit `entries` as they are now (the records since the
        snapshot kept after it; `rehydrate` gives what re-reads files for them), its hooks
        fired and its events sent (the module docstring). No outcome when there is none, or
        it was discarded; an outcome without a result when it failed."""
        task, snapshot = self._task, self._snapshot
        if task is None or snapshot is None or not task.done():
            return ThresholdStep()
        self._task = self._snapshot = None
        outcome = None if task.cancelled() else task.result()
        if outcome is None or outcome.result is None:
            for event in snapshot.held:  # why it failed (no hook ran: nothing was compacted)
                emit(snapshot.sink, event)
            self._discard("failed")
            return ThresholdStep(outcome=outcome)
        result = outcome.result
        since = list(entries[snapshot.length :])
        if (
            not _unchanged(entries, snapshot)
            or any(e.is_compact_boundary for e in since)
            or kept_holds_server_compaction(since)  # the server compacted since: superseded
        ):
            self._discard("stale")
            return ThresholdStep()
        kept = [*result.messages_to_keep, *since]
        if since and (any(e.uuid is None for e in since) or not is_one_run(entries, kept)):
            self._discard("stale")
            return ThresholdStep()
        swapped = _with_kept(result, kept, entries, rehydrate())
        post = estimate(normalize_messages(swapped.view()))
        if post >= threshold:
            self._discard("too_large")
            return ThresholdStep()
        hooks = snapshot.hooks
        if hooks is not None:
            answer = await hooks.arun_pre_compact("auto", None)
            if answer.blocked or answer.new_custom_instructions:
                self._discard("hook")
                return ThresholdStep(pre_compact=answer)
            swapped.user_display_message = answer.user_display_message
        swapped.post_tokens = post
        finished = [e for e in snapshot.held if isinstance(e, CompactionFinished)]
        for event in snapshot.held:
            if not isinstance(event, CompactionFinished):
                emit(snapshot.sink, event)
        if hooks is not None:
            texts = await hooks.arun_session_start("compact")
            if texts:
                swapped.hook_results = [Entry.user(text, is_meta=True) for text in texts]
                post = swapped.post_tokens = estimate(normalize_messages(swapped.view()))
            await hooks.arun_post_compact("auto", swapped.summary_text)
        for event in finished:
            emit(snapshot.sink, replace(event, post_tokens=post))
        self.swapped += 1
        emit(
            self._events,
            BackgroundSummarySwapped(
                started_tokens=snapshot.tokens, kept_since=len(since), post_tokens=post
            ),
        )
        logger.info(
            "background summary swapped in: %d records recorded since kept after it", len(since)
        )
        return ThresholdStep(outcome=replace(outcome, result=swapped))

    def discard(self, reason: DiscardReason) -> None:
        """Cancel the summary in flight (its call too) or drop the finished one."""
        task = self._task
        if task is None:
            return
        self._task = self._snapshot = None
        task.cancel()
        self._discard(reason)

    def _discard(self, reason: DiscardReason) -> None:
        self.discarded += 1
        logger.info("background summary discarded (%s)", reason)
        emit(self._events, BackgroundSummaryDiscarded(reason))


def _unchanged(entries: Sequence[Entry], snapshot: _Snapshot) -> bool:
    """The snapshot's records are still the first ones (its last, the same object)."""
    if len(entries) < snapshot.length:
        return False
    return snapshot.length == 0 or entries[snapshot.length - 1] is snapshot.last


def _with_kept(
    result: CompactionResult,
    kept: list[Entry],
    entries: Sequence[Entry],
    rehydrate: Rehydrator | None,
) -> CompactionResult:
    """`result` keeping `kept` after its summary, linked to the transcript as it is now."""
    boundary = Entry(dict(result.boundary.data), result.boundary.line)
    metadata = dict(boundary.compact_metadata)
    summary = result.summary_messages[0] if result.summary_messages else None
    summary_messages = list(result.summary_messages)
    if kept and summary is not None:
        metadata["preservedSegment"] = {
            "headUuid": kept[0].uuid,
            "anchorUuid": summary.uuid,
            "tailUuid": kept[-1].uuid,
        }
        message = summary.message
        text = message.get("content") if message is not None else None
        if not result.messages_to_keep and isinstance(text, str) and message is not None:
            # The summary was written with nothing kept after it; now there is.
            data = dict(summary.data)
            data["message"] = {**message, "content": f"{text}\n\n{PRESERVED_NOTE}"}
            summary_messages[0] = Entry(data, summary.line)
    metadata[BACKGROUND_FIELD] = True
    boundary.data["compactMetadata"] = metadata
    boundary.data["logicalParentUuid"] = next((e.uuid for e in reversed(entries) if e.uuid), None)
    attachments, skipped = result.attachments, result.skipped_attachments
    if rehydrate is not None:
        payloads, skipped = rehydrate(kept)
        attachments = [Entry.attachment_record(payload) for payload in payloads]
    return replace(
        result,
        boundary=boundary,
        summary_messages=summary_messages,
        messages_to_keep=kept,
        attachments=attachments,
        skipped_attachments=skipped,
    )


__all__ = [
    "BACKGROUND_FIELD",
    "BackgroundSummary",
    "DiscardReason",
    "ThresholdStep",
    "answered_hooks",
    "summary_tiers",
]
