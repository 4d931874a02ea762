"""Automatic compaction as a list of tiers behind one circuit breaker.

    TieredCompaction([
        SessionMemoryTier(compact_from_notes),                       # no LLM call
        TierSlot(CacheSharingSummaryTier(summarizer), "closed"),     # forks the cached prefix
        TierSlot(DirectSummaryTier(summarizer), "closed"),           # a plain summary request
        TierSlot(CacheSharingSummaryTier(ExtractiveSummarizer()), "open"),
        TierSlot(DirectSummaryTier(ExtractiveSummarizer()), "open"),
    ])

A tier (`CompactionTier`) has one method, `compact(context)`: a `CompactionResult`, None when
it does not apply (the next tier is tried), or a `CompactionError` / `ProviderError` when it
failed (a `CacheSharingSummaryTier` may also return a `SummaryHandover`, below).
`TieredCompaction.run` tries the tiers in order and returns the first result; the
caller appends it (nothing is written here).

The two summary requests are one summary (one `CompactionStarted`, one PreCompact hook run,
one `CompactionFinished` or `CompactionFailed`): a `CacheSharingSummaryTier` whose request
fails in a way a direct request may mend (an API error, a reply without a usable summary)
returns a `SummaryHandover`, and the run passes that summary in `context.handover` to the next
tier when it is the `DirectSummaryTier` of the same provider and settings, which goes on
from the same messages and attempt count. When no such tier follows, the handed-over
failure is the run's. `SummaryTier` is both requests in one tier (`compact_conversation`).

The breaker counts failed runs, at most one per run, and any success resets it. A tier slotted
`when_breaker="closed"` (the summarizer) is tried while fewer than `failure_limit` (3) runs in
a row failed and the compaction has summary requests left (`CompactionContext.budget`, a
`RequestBudget` every request and retry is taken from); its failure that reaches the limit
trips the breaker (`CircuitBreakerTripped`), one that spends the budget emits
`SummaryRequestsSpent`, and the `"open"` tiers (the offline hand-over) take its place, at
once in the same run (`hand_over_at_once`) or from the next run; their result says why
(`fallback`: `breaker_open`, `request_budget`). The count and the requests spent are passed in
and returned (`CompactionOutcome.failures`, `.summary_requests`): the session persists them in
its store, the middleware in the agent state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import (
    CompactionResult,
    FallbackReason,
    SummaryJob,
    Trigger,
    start_summary,
)
from unbounded.compaction.prompts import PartialDirection
from unbounded.errors import CompactionError, ConfigError, ProviderError
from unbounded.events import (
    CircuitBreakerTripped,
    CompactionFailed,
    SummaryRequestsSpent,
    emit,
)
from unbounded.model.request_budget import RequestBudget
from unbounded.model.response import Provider

logger = logging.getLogger(__name__)
CIRCUIT_BREAKER_FAILURES = 3
"""Consecutive failed automatic compactions before the fallback tiers take over."""
BreakerState = Literal["any", "closed", "open"]
NotesCompactor = Callable[[CompactionContext, int | None], Awaitable[CompactionResult | None]]
"""Builds a compaction from the session notes (context, most tokens it may leave), or None."""


class CompactionTier(Protocol):
    """One way to compact: a result, None to fall through, or an error counted as a failure
    (a `CacheSharingSummaryTier` may also return a `SummaryHandover`)."""

    async def compact(
        self, context: CompactionContext
    ) -> CompactionResult | SummaryHandover | None:
        """Compact the conversation `context` describes; nothing is written."""
        ...


@dataclass(frozen=True, slots=True)
class TierSlot:
    """A tier in a `TieredCompaction` and the breaker state it runs in."""

    tier: CompactionTier
    when_breaker: BreakerState = "any"
    """"closed": only before the breaker trips (its failure can trip it); "open": only once it
    has tripped (the fallback); "any": always."""

    def __post_init__(self) -> None:
        if self.when_breaker not in ("any", "closed", "open"):
            raise ConfigError(
                f"TierSlot.when_breaker must be 'any', 'closed' or 'open', "
                f"not {self.when_breaker!r}"
            )
        if not callable(getattr(self.tier, "compact", None)):
            raise ConfigError(
                f"{type(self.tier).__name__} is not a compaction tier: it needs an async "
                "compact(context) method"
            )


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What a run of the tiers gave: the compaction (None when none happened) and the
    breaker's count of failed runs in a row afterwards."""

    result: CompactionResult | None
    failures: int
    tripped: bool = False
    """This run tripped the breaker."""
    summary_requests: int = 0
    """Model requests the compaction has sent for its summary, this run and the failed runs
    before it (`CompactionContext.budget`; 0 without a budget)."""


@dataclass(frozen=True, slots=True)
class SessionMemoryTier:
    """The session notes become the summary: no LLM call (None when the notes cannot)."""

    compact_from_notes: NotesCompactor
    max_post_tokens: int | None = None
    """The most tokens the result may leave (None: under the auto-compact threshold)."""

    def __post_init__(self) -> None:
        if not callable(self.compact_from_notes):
            raise ConfigError("SessionMemoryTier needs a callable compact_from_notes")
        if self.max_post_tokens is not None and self.max_post_tokens < 0:
            raise ConfigError(
                f"SessionMemoryTier.max_post_tokens must be >= 0, not {self.max_post_tokens}"
            )

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        """The notes compaction, or None to fall through to a summary."""
        return await self.compact_from_notes(context, self.max_post_tokens)


@dataclass(frozen=True, slots=True)
class SummaryRequestSettings:
    """What a summary tier asks `provider` for (the base of the three summary tiers).

    An automatic summary keeps the turn's messages the context names (`keep_from`) verbatim
    and does not apply (a `nothing_to_summarize` failure event, None) when they are all there
    is. A manual one may be partial around `pivot` (both `pivot` and `direction`, or neither).
    """

    provider: Provider
    trigger: Trigger = "auto"
    instructions: str | None = None
    pivot: str | None = None
    direction: PartialDirection | None = None
    fallback: FallbackReason | None = None
    """Why this summarizer is a fallback wherever it runs (`no_model`, `asked_for`), reported
    with its summary; a tier slotted "open" is reported as `breaker_open` or
    `request_budget` by the run (`CompactionContext.fallback`)."""

    def __post_init__(self) -> None:
        name = type(self).__name__
        if not callable(getattr(self.provider, "create", None)):
            raise ConfigError(f"{name} needs a provider with an async create(request) method")
        if self.trigger not in ("auto", "manual"):
            raise ConfigError(f"{name}.trigger must be 'auto' or 'manual', not {self.trigger!r}")
        if (self.pivot is None) != (self.direction is None):
            raise ConfigError(f"a partial {name} needs both a pivot and a direction")
        if self.trigger == "auto" and self.pivot is not None:
            raise ConfigError("a partial compaction (pivot) is manual: use trigger='manual'")

    def nothing_to_summarize(self, context: CompactionContext) -> bool:
        """An automatic summary with only this turn's messages left: reported, not tried."""
        if self.trigger != "auto" or context.keep_from != "":
            return False
        emit(
            context.events,
            CompactionFailed(
                trigger="auto",
                reason="nothing_to_summarize",
                message="only the messages of this turn are left, and they are kept whole",
            ),
        )
        return True

    def same_summary(self, other: SummaryRequestSettings) -> bool:
        """`other` asks for the same summary (provider, trigger, instructions, pivot)."""
        return self.provider is other.provider and (
            self.trigger,
            self.instructions,
            self.pivot,
            self.direction,
        ) == (other.trigger, other.instructions, other.pivot, other.direction)

    async def start(self, context: CompactionContext) -> SummaryJob:
        """The summary's first step over the context's fields (`start_summary`)."""
        keep_from = context.keep_from if self.trigger == "auto" else None
        # A context with `recorded` is a session's: its view is its transcript's, derived from
        # its entries and kept up to date, and folded as it grew (`ViewFolds`).
        sent = list(context.sent_messages) if context.sent_messages is not None else None
        return await start_summary(
            context.entries,
            self.provider,
            params=context.params,
            trigger=self.trigger,
            instructions=self.instructions,
            direction=self.direction,
            pivot_uuid=self.pivot,
            sent_messages=sent,
            transcript_path=context.transcript_path,
            hooks=context.hooks,
            rehydrate=context.rehydrator(),
            facts_ledger=context.facts_ledger,
            planner=context.planner,
            policy=context.policy,
            events=context.events,
            boundary_metadata=dict(context.boundary_metadata) or None,
            keep_from=keep_from,
            fits=context.post_fit(),
            budget=context.budget,
            fallback=context.fallback or self.fallback,
            view=context.view if context.recorded is not None else None,
            folds=context.recorded.view if context.recorded is not None else None,
            rewritten=context.rewritten,
        )


@dataclass(frozen=True, slots=True)
class SummaryTier(SummaryRequestSettings):
    """A summary by `provider`: the cache-sharing request, then the direct one if it failed,
    in one tier (`compact_conversation`). `CacheSharingSummaryTier` and `DirectSummaryTier`
    are the same two requests as two tiers."""

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        """The summary compaction (None: nothing to summarize); raises CompactionError /
        ProviderError when it failed."""
        if self.nothing_to_summarize(context):
            return None
        return await self.summarize(context)

    async def summarize(self, context: CompactionContext) -> CompactionResult:
        """The summary whatever the context's `keep_from` (errors raised, not counted)."""
        job = await self.start(context)
        return await job.summarize()


@dataclass(frozen=True, slots=True)
class CacheSharingSummaryTier(SummaryRequestSettings):
    """The summary request that forks the main conversation's cached prefix (same system
    prompt, tools and messages, the summary prompt appended).

    When it fails in a way a direct request may mend (an API error, a reply without a usable
    summary) it returns a `SummaryHandover` for the `DirectSummaryTier` after it; other
    failures (a prompt still too long after the retries, a blocking hook) are raised.
    """

    async def compact(self, context: CompactionContext) -> CompactionResult | SummaryHandover:
        """The summary compaction, or the hand-over to the direct tier."""
        if self.nothing_to_summarize(context):
            return SummaryHandover(self, None)  # the direct tier does not apply either
        job = await self.start(context)
        if await job.request("cache_sharing"):
            return await job.finish()
        return SummaryHandover(self, job)


@dataclass(frozen=True, slots=True)
class DirectSummaryTier(SummaryRequestSettings):
    """A plain summary request: the compact system prompt, no cache, the tools only as the API
    requires them (not callable), the compaction output cap. Goes on with the summary a
    `CacheSharingSummaryTier` of the same provider and settings handed over
    (`context.handover`); alone, it starts its own."""

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        """The summary compaction (None: nothing to summarize); raises CompactionError /
        ProviderError when it failed."""
        handover = context.handover
        if handover is not None and handover.taken_by(self):
            if handover.job is None:
                return None  # nothing to summarize, already reported
            return await self._ask(handover.job)
        if self.nothing_to_summarize(context):
            return None
        return await self._ask(await self.start(context))

    async def _ask(self, job: SummaryJob) -> CompactionResult:
        await job.request("direct")
        return await job.finish()


@dataclass(frozen=True, slots=True)
class SummaryHandover:
    """A `CacheSharingSummaryTier` passes its summary on to the `DirectSummaryTier` after it.

    `job` is the summary in progress (why its request failed in `job.handed_over`), or None
    when there was nothing to summarize. `TieredCompaction` offers it to the next tier in
    `context.handover`."""

    tier: SummaryRequestSettings
    job: SummaryJob | None

    def taken_by(self, tier: object) -> bool:
        """`tier` finishes this summary: a direct tier asking for the same one."""
        return isinstance(tier, DirectSummaryTier) and tier.same_summary(self.tier)

    def give_up(self) -> CompactionError | ProviderError | None:
        """No tier takes it over: the failure, reported (`CompactionFailed`) as the summary's
        end (None when there was nothing to summarize)."""
        return None if self.job is None else self.job.give_up()


TierEntry = CompactionTier | TierSlot
"""A tier, or a tier in its slot."""
TierChoice = Sequence[TierEntry] | Callable[[tuple[TierEntry, ...]], Sequence[TierEntry]]
"""A tier list, or a function from the default list to one (`Session(compaction_tiers=...)`)."""


def tier_slots(tiers: object, *, name: str = "tiers") -> tuple[TierSlot, ...]:
    """`tiers` as slots, checked: ConfigError naming the entry (`name[i]`) that is no tier."""
    if isinstance(tiers, (str, bytes)) or not isinstance(tiers, Sequence):
        raise ConfigError(
            f"{name} must be a list of compaction tiers (objects with an async "
            f"compact(context) method, or TierSlot), not {type(tiers).__name__}"
        )
    if not tiers:
        raise ConfigError(f"{name} needs at least one tier")
    slots: list[TierSlot] = []
    for index, tier in enumerate(tiers):
        try:
            slots.append(tier if isinstance(tier, TierSlot) else TierSlot(tier))
        except ConfigError as error:
            raise ConfigError(f"{name}[{index}]: {error}") from None
    return tuple(slots)


class TieredCompaction:
    """Tries its tiers in order behind one circuit breaker (see the module docstring)."""

    def __init__(
        self,
        tiers: Sequence[CompactionTier | TierSlot],
        *,
        failure_limit: int = CIRCUIT_BREAKER_FAILURES,
        hand_over_at_once: bool = True,
    ) -> None:
        if failure_limit < 1:
            raise ConfigError(f"TieredCompaction.failure_limit must be >= 1, not {failure_limit}")
        self.slots: tuple[TierSlot, ...] = tier_slots(tiers, name="TieredCompaction tiers")
        self.failure_limit = failure_limit
        self.hand_over_at_once = hand_over_at_once

    def is_open(self, failures: int) -> bool:
        """Whether `failures` failed runs in a row have tripped the breaker."""
        return failures >= self.failure_limit

    def _fallback(self, failures: int, budget: RequestBudget | None) -> FallbackReason | None:
        """Why the "open" tiers run now: the breaker tripped, or the compaction spent its
        summary requests; None while the "closed" ones do."""
        if self.is_open(failures):
            return "breaker_open"
        if budget is not None and budget.spent:
            return "request_budget"
        return None

    @staticmethod
    def _runs(slot: TierSlot, fallback: FallbackReason | None) -> bool:
        return slot.when_breaker == "any" or (slot.when_breaker == "open") == (fallback is not None)

    def _next_runnable(self, index: int, fallback: FallbackReason | None) -> TierSlot | None:
        return next((s for s in self.slots[index + 1 :] if self._runs(s, fallback)), None)

    async def run(self, context: CompactionContext, *, failures: int = 0) -> CompactionOutcome:
        """The first tier's result that applies; `failures` is the count before this run.

        With a budget (`context.budget`), a "closed" tier runs only while requests are left,
        and once they are spent the "open" tiers take over as if the breaker had tripped (in
        the same run with `hand_over_at_once`)."""
        if failures < 0:
            raise ConfigError(f"failures must be >= 0, not {failures}")
        budget = context.budget
        tripped = False
        counted = False
        offered: SummaryHandover | None = None
        for index, slot in enumerate(self.slots):
            fallback = self._fallback(failures, budget)
            if not self._runs(slot, fallback):
                continue
            tier_context = context
            if slot.when_breaker == "open" and fallback is not None:
                tier_context = replace(tier_context, fallback=fallback)
            if offered is not None:
                tier_context = replace(tier_context, handover=offered)
            offered = None
            error: CompactionError | ProviderError | None
            try:
                answer = await slot.tier.compact(tier_context)
            except (CompactionError, ProviderError) as raised:
                error = raised
            else:
                if isinstance(answer, SummaryHandover):
                    following = self._next_runnable(index, self._fallback(failures, budget))
                    if following is not None and answer.taken_by(following.tier):
                        offered = answer
                        continue
                    error = answer.give_up()
                    if error is None:
                        continue  # nothing to summarize: the next tier is tried
                elif answer is not None:
                    # A success resets the breaker (and the caller the budget).
                    return CompactionOutcome(answer, 0, tripped, self._used(budget))
                else:
                    continue
            if not counted:  # a run fails once, whatever its fallbacks do after
                failures += 1
                counted = True
            if slot.when_breaker == "closed":
                reason = self._fallback(failures, budget)
                if reason == "breaker_open" and not tripped:
                    logger.warning(
                        "circuit breaker tripped after %d failed summaries (%s): the offline "
                        "hand-over writes them now",
                        failures,
                        error,
                    )
                    emit(context.events, CircuitBreakerTripped(failures, str(error)))
                    tripped = True
                elif reason == "request_budget" and budget is not None:
                    emit(context.events, SummaryRequestsSpent(budget.used, budget.limit))
                if reason is not None and self.hand_over_at_once:
                    continue
            return CompactionOutcome(None, failures, tripped, self._used(budget))
        return CompactionOutcome(None, failures, tripped, self._used(budget))

    @staticmethod
    def _used(budget: RequestBudget | None) -> int:
        return budget.used if budget is not None else 0


__all__ = [
    "CIRCUIT_BREAKER_FAILURES",
    "BreakerState",
    "CacheSharingSummaryTier",
    "CompactionOutcome",
    "CompactionTier",
    "DirectSummaryTier",
    "NotesCompactor",
    "SessionMemoryTier",
    "SummaryHandover",
    "SummaryRequestSettings",
    "SummaryTier",
    "TierChoice",
    "TierEntry",
    "TierSlot",
    "TieredCompaction",
    "tier_slots",
]
