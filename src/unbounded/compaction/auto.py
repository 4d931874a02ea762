"""Automatic compaction as a list of tiers behind one circuit breaker.

    TieredCompaction([
        SessionMemoryTier(compact_from_notes),                  # no LLM call
        TierSlot(SummaryTier(summarizer), when_breaker="closed"),
        TierSlot(SummaryTier(ExtractiveSummarizer()), when_breaker="open"),
    ])

A tier (`CompactionTier`) has one method, `compact(context)`: a `CompactionResult`, None when
it does not apply (the next tier is tried), or a `CompactionError` / `ProviderError` when it
failed. `TieredCompaction.run` tries the tiers in order and returns the first result; the
caller appends it (nothing is written here). A summary tier's one call already carries its
own fallbacks (`compact_conversation`: the cache-sharing request, then a direct request with
the compact system prompt, prompt-too-long retries), so they are not tiers of their own.

The breaker counts failed runs, at most one per run, and any success resets it. A tier slotted
`when_breaker="closed"` (the summarizer) is tried while fewer than `failure_limit` (3) runs in
a row failed; its failure that reaches the limit trips the breaker (`CircuitBreakerTripped`),
and from then on the `"open"` tiers (the offline extractive summarizer) take its place, at
once in the same run (`hand_over_at_once`, the session) or from the next run (the LangChain
middleware, which leaves that model call uncompacted). The count is passed in and returned
(`CompactionOutcome.failures`): the session persists it in its store, the middleware in the
agent state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CompactionResult, Trigger, compact_conversation
from unbounded.compaction.prompts import PartialDirection
from unbounded.compaction.summary_text import CompactionError
from unbounded.errors import ConfigError, ProviderError
from unbounded.events import CircuitBreakerTripped, CompactionFailed, emit
from unbounded.model.response import Provider

CIRCUIT_BREAKER_FAILURES = 3
"""Consecutive failed automatic compactions before the fallback tiers take over."""
BreakerState = Literal["any", "closed", "open"]
NotesCompactor = Callable[[CompactionContext, int | None], Awaitable[CompactionResult | None]]
"""Builds a compaction from the session notes (context, most tokens it may leave), or None."""


class CompactionTier(Protocol):
    """One way to compact: a result, None to fall through, or an error counted as a failure."""

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
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
class SummaryTier:
    """A summary call to `provider` over the conversation (`compact_conversation`).

    An automatic one keeps the turn's messages the context names (`keep_from`) verbatim and
    does not apply (a `nothing_to_summarize` failure event, None) when they are all there is.
    A manual one may be partial around `pivot` (both `pivot` and `direction`, or neither).
    """

    provider: Provider
    trigger: Trigger = "auto"
    instructions: str | None = None
    pivot: str | None = None
    direction: PartialDirection | None = None

    def __post_init__(self) -> None:
        if not callable(getattr(self.provider, "create", None)):
            raise ConfigError("SummaryTier needs a provider with an async create(request) method")
        if self.trigger not in ("auto", "manual"):
            raise ConfigError(
                f"SummaryTier.trigger must be 'auto' or 'manual', not {self.trigger!r}"
            )
        if (self.pivot is None) != (self.direction is None):
            raise ConfigError("a partial SummaryTier needs both a pivot and a direction")
        if self.trigger == "auto" and self.pivot is not None:
            raise ConfigError("a partial compaction (pivot) is manual: use trigger='manual'")

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        """The summary compaction (None: nothing to summarize); raises CompactionError /
        ProviderError when it failed."""
        if self.trigger == "auto" and context.keep_from == "":
            emit(
                context.events,
                CompactionFailed(
                    trigger="auto",
                    reason="nothing_to_summarize",
                    message="only the messages of this turn are left, and they are kept whole",
                ),
            )
            return None
        return await self.summarize(context)

    async def summarize(self, context: CompactionContext) -> CompactionResult:
        """`compact_conversation` over the context's fields (errors raised, not counted)."""
        keep_from = context.keep_from if self.trigger == "auto" else None
        sent = list(context.sent_messages) if context.sent_messages is not None else None
        return await compact_conversation(
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
        )


class TieredCompaction:
    """Tries its tiers in order behind one circuit breaker (see the module docstring)."""

    def __init__(
        self,
        tiers: Sequence[CompactionTier | TierSlot],
        *,
        failure_limit: int = CIRCUIT_BREAKER_FAILURES,
        hand_over_at_once: bool = True,
    ) -> None:
        if not tiers:
            raise ConfigError("TieredCompaction needs at least one tier")
        if failure_limit < 1:
            raise ConfigError(f"TieredCompaction.failure_limit must be >= 1, not {failure_limit}")
        self.slots: tuple[TierSlot, ...] = tuple(
            tier if isinstance(tier, TierSlot) else TierSlot(tier) for tier in tiers
        )
        self.failure_limit = failure_limit
        self.hand_over_at_once = hand_over_at_once

    def is_open(self, failures: int) -> bool:
        """Whether `failures` failed runs in a row have tripped the breaker."""
        return failures >= self.failure_limit

    async def run(self, context: CompactionContext, *, failures: int = 0) -> CompactionOutcome:
        """The first tier's result that applies; `failures` is the count before this run."""
        if failures < 0:
            raise ConfigError(f"failures must be >= 0, not {failures}")
        tripped = False
        counted = False
        for slot in self.slots:
            is_open = self.is_open(failures)
            if (slot.when_breaker == "closed" and is_open) or (
                slot.when_breaker == "open" and not is_open
            ):
                continue
            try:
                result = await slot.tier.compact(context)
            except (CompactionError, ProviderError) as error:
                if not counted:  # a run fails once, whatever its fallbacks do after
                    failures += 1
                    counted = True
                if slot.when_breaker == "closed" and self.is_open(failures):
                    emit(context.events, CircuitBreakerTripped(failures, str(error)))
                    tripped = True
                    if self.hand_over_at_once:
                        continue
                return CompactionOutcome(None, failures, tripped)
            if result is not None:
                return CompactionOutcome(result, 0, tripped)  # any success resets the breaker
        return CompactionOutcome(None, failures, tripped)


__all__ = [
    "CIRCUIT_BREAKER_FAILURES",
    "BreakerState",
    "CompactionContext",
    "CompactionOutcome",
    "CompactionTier",
    "NotesCompactor",
    "SessionMemoryTier",
    "SummaryTier",
    "TierSlot",
    "TieredCompaction",
]
