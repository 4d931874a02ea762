"""A session's compactions: which tiers run, when one runs (the auto-compact step), and what
applying one does to the session.

    maybe_auto_compact   the prepare step: at the threshold, the tiers; before it, an early
                         session-memory compaction when it pays (compaction/decisions.py)
    auto_compact         the tiers in order (`compaction_tiers()`), the breaker and the
                         summary-request budget tracked in the session's state
    compact              a manual compaction (`/compact`), optionally partial
    apply                append the compaction with its receipt; reset what referred to
                         the old messages; run the extensions' `after_compact`; save

`SessionCompactor` serves one session through `SessionCore`; the decisions themselves are the
pure functions of `compaction/decisions.py`, the tiers those of `compaction/auto.py`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    DirectSummaryTier,
    SessionMemoryTier,
    SummaryTier,
    TierChoice,
    TieredCompaction,
    TierEntry,
    TierSlot,
    tier_slots,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CompactionResult, FallbackReason
from unbounded.compaction.cut import turn_tail_start
from unbounded.compaction.decisions import (
    auto_compaction_allowed,
    cache_expired,
    early_compaction_reason,
    should_auto_compact,
)
from unbounded.compaction.glue import RecordedState, RehydrateSource, default_facts_ledger
from unbounded.compaction.prompts import PartialDirection
from unbounded.events import EarlyCompaction, emit
from unbounded.extension import offers_memory_compaction
from unbounded.model.request_budget import RequestBudget
from unbounded.model.response import Provider
from unbounded.recall.receipts import RECEIPT_KEY
from unbounded.redaction import redact_compaction, strings_in
from unbounded.session_core import SessionCore
from unbounded.session_recall import compaction_receipt_event
from unbounded.telemetry import set_attributes


def _compaction_attributes(span: Any, result: CompactionResult | None) -> None:
    """What a compaction span reports: whether it happened, and its sizes."""
    if result is None:
        set_attributes(span, {"unbounded.compaction.succeeded": False})
        return
    set_attributes(
        span,
        {
            "unbounded.compaction.succeeded": True,
            "unbounded.compaction.summarizer": result.summarizer,
            "unbounded.compaction.pre_tokens": result.pre_tokens,
            "unbounded.compaction.post_tokens": result.post_tokens,
            "unbounded.compaction.summary_tokens": result.summary_tokens,
        },
    )


class SessionCompactor:
    """The compactions of one session."""

    def __init__(
        self,
        session: SessionCore,
        *,
        tiers: TierChoice | None,
        rehydrate_from: RehydrateSource,
    ) -> None:
        self.session = session
        self.tiers = tiers
        """The `compaction_tiers` option: None (the defaults), checked slots, or a function of
        the defaults (checked on each use)."""
        self.rehydrate_from: RehydrateSource = rehydrate_from
        self.recorded = RecordedState()
        """What compactions read of the transcript (its working state), read once per entry."""
        self.early_refused_at: int | None = None
        """The token count at which an early compaction was last refused (not tried again
        until the context grows past it, or a compaction lands)."""

    # -- when ---------------------------------------------------------------------------------
    async def maybe_auto_compact(self) -> None:
        """The auto-compact step: the tiers at the threshold, an early compaction before it
        when it pays (`compaction.decisions`)."""
        session = self.session
        tokens = session.transcript.counter.total
        policy, thresholds = session.policy, session.thresholds
        query_source = session.config.query_source
        if should_auto_compact(policy, thresholds, tokens, query_source=query_source):
            await self.auto_compact()
            return
        if not auto_compaction_allowed(policy, query_source=query_source):
            return
        reason = early_compaction_reason(
            policy,
            thresholds,
            tokens=tokens,
            overhead=session.estimate_request_tokens([]),
            cache_expired=self._cache_expired(),
            cache_edits_supported=session.config.cache_edits_supported,
            refused_at=self.early_refused_at,
            free_compaction_available=self.free_compaction_available,
        )
        if reason is None:
            return
        if await self._compact_early(reason) is None:
            self.early_refused_at = tokens

    def _cache_expired(self) -> bool:
        """The gap since the last response is over the session's cache TTL."""
        session = self.session
        ttl = session.state.ttl_latch.ttl_for(session.config.query_source)
        return cache_expired(session.deps.clock(), session.transcript.last_reply_time(), ttl)

    def free_compaction_available(self) -> bool:
        """A compaction without a summary call: session notes exist to compact from."""
        session = self.session
        if not any(offers_memory_compaction(e) for e in session.deps.extensions):
            return False
        notes = session.store.read_memory()
        return bool(notes and notes.strip())

    async def _compact_early(self, reason: str) -> CompactionResult | None:
        """A session-memory compaction before the threshold (None when it is refused: also
        when it would free less than `Policy.early_compact_min_saving` of the context, or
        `cold_cache_compact_min_saving` at a cold-cache moment)."""
        session = self.session
        tokens = session.transcript.counter.total
        policy = session.policy
        saving = (
            policy.cold_cache_compact_min_saving
            if reason == "cold_cache"
            else policy.early_compact_min_saving
        )
        # The limit goes to the compactor so a refused compaction announces and hooks nothing.
        tiers = TieredCompaction(self._memory_tiers(max_post_tokens=int((1 - saving) * tokens)))
        tracking = session.state.tracking
        outcome = await tiers.run(self.context(), failures=tracking.consecutive_failures)
        if outcome.result is None:
            return None
        emit(
            session.events_sink(),
            EarlyCompaction(reason, tokens, session.thresholds.autocompact),
        )
        tracking.consecutive_failures = outcome.failures
        self.apply(outcome.result)
        return outcome.result

    # -- what ---------------------------------------------------------------------------------
    async def auto_compact(self) -> CompactionResult | None:
        """The compaction tiers in order; the compaction, or None when it failed."""
        session = self.session
        with session.deps.telemetry.span(
            "unbounded.compaction", {"unbounded.compaction.trigger": "auto"}
        ) as span:
            tiers = self.compaction_tiers()
            tracking = session.state.tracking
            before = tracking.consecutive_failures, tracking.summary_requests
            budget = RequestBudget(
                session.policy.compact_max_summary_requests, used=tracking.summary_requests
            )
            context = replace(self.context(), budget=budget)
            outcome = await TieredCompaction(tiers).run(context, failures=before[0])
            tracking.consecutive_failures = outcome.failures
            if outcome.result is not None:
                self.apply(outcome.result)
            else:
                tracking.summary_requests = outcome.summary_requests
                if (outcome.failures, outcome.summary_requests) != before:
                    session.save_state()
            _compaction_attributes(span, outcome.result)
            return outcome.result

    async def compact(
        self,
        *,
        instructions: str | None,
        pivot: str | None,
        direction: PartialDirection | None,
    ) -> CompactionResult:
        """A manual compaction by the session's model (the offline hand-over without one)."""
        session = self.session
        model = session.model_provider()
        provider, reason = (model, None) if model is not None else self.offline_summarizer()
        telemetry = session.deps.telemetry
        with telemetry.span(
            "unbounded.compaction", {"unbounded.compaction.trigger": "manual"}
        ) as span:
            tier = SummaryTier(
                telemetry.traced(provider),
                trigger="manual",
                instructions=instructions,
                pivot=pivot,
                direction=direction,
                fallback=reason,
            )
            budget = RequestBudget(session.policy.compact_max_summary_requests)
            # compact_conversation reports its own failures (CompactionFailed) to the sink.
            result = await tier.summarize(replace(self.context(), budget=budget))
            self.apply(result)
            _compaction_attributes(span, result)
            return result

    def offline_summarizer(self) -> tuple[Provider, FallbackReason]:
        """The offline hand-over this session falls back to, and why it runs when there is
        no model: the one given as `summarizer` (asked for), else a default one."""
        summarizer = self.session.deps.summarizer
        if summarizer is not None and summarizer.profile.offline:
            return summarizer, "asked_for"
        from unbounded.providers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer(), "no_model"

    def compaction_tiers(self) -> tuple[TierEntry, ...]:
        """The `compaction_tiers` option's tiers, or `default_compaction_tiers()`."""
        chosen = self.tiers
        if chosen is None:
            return self.default_compaction_tiers()
        if callable(chosen):
            return tier_slots(
                chosen(self.default_compaction_tiers()), name="compaction_tiers(defaults)"
            )
        return tuple(chosen)

    def default_compaction_tiers(self) -> tuple[TierEntry, ...]:
        """The tiers cheapest first: the session notes, then the model's cache-sharing and
        direct requests until the breaker trips or the summary requests are spent, the
        offline hand-over's two after (without a model, throughout)."""
        offline, reason = self.offline_summarizer()
        telemetry = self.session.deps.telemetry
        extractive = telemetry.traced(offline)
        model = self.session.model_provider()
        if model is None:
            return (
                *self._memory_tiers(),
                CacheSharingSummaryTier(extractive, fallback=reason),
                DirectSummaryTier(extractive, fallback=reason),
            )
        summarizer = telemetry.traced(model)  # one wrapper: the two share a summary
        return (
            *self._memory_tiers(),
            TierSlot(CacheSharingSummaryTier(summarizer), "closed"),
            TierSlot(DirectSummaryTier(summarizer), "closed"),
            TierSlot(CacheSharingSummaryTier(extractive), "open"),
            TierSlot(DirectSummaryTier(extractive), "open"),
        )

    def _memory_tiers(self, *, max_post_tokens: int | None = None) -> tuple[SessionMemoryTier, ...]:
        """The session-memory tier over the extensions' `compact_from_memory` (none when no
        extension offers one): the first that compacts wins."""
        session = self.session
        offering = [e for e in session.deps.extensions if offers_memory_compaction(e)]
        if not offering:
            return ()

        async def from_notes(_: CompactionContext, limit: int | None) -> CompactionResult | None:
            # The hook takes the session (it builds the context it needs).
            for extension in offering:
                result = await extension.compact_from_memory(session, max_post_tokens=limit)
                if result is not None:
                    return result
            return None

        return (SessionMemoryTier(from_notes, max_post_tokens=max_post_tokens),)

    def context(self) -> CompactionContext:
        """What a compaction of this conversation reads now (`compaction.context`)."""
        session = self.session
        tracking = session.state.tracking
        transcript = session.transcript
        config, thresholds = session.config, session.thresholds
        metadata: dict[str, Any] = {
            "querySource": config.query_source,
            "autoCompactThreshold": thresholds.autocompact,
            "isRecompactionInChain": tracking.turns_at_last_compaction is not None,
        }
        if tracking.turns_at_last_compaction is not None:
            metadata["turnsSincePreviousCompact"] = (
                tracking.turns - tracking.turns_at_last_compaction
            )
            metadata["previousCompactTurnId"] = tracking.last_compaction_turn_id
        ttl, prefix_ttl = session.cache_ttls()
        store = session.store
        return CompactionContext(
            entries=transcript.entries,
            view=transcript.view,
            policy=session.policy,
            params=session.cache_safe_params(),
            autocompact_threshold=thresholds.autocompact,
            tokens=transcript.counter.total,
            calibration=session.state.calibration,
            estimate_request_tokens=session.estimate_request_tokens,
            transcript_path=store.transcript_path,
            notes_path=store.memory_path,
            read_notes=store.read_memory,
            allowed_roots=session.deps.allowed_roots,
            rehydrate_from=self.rehydrate_from,
            recorded=self.recorded,
            hooks=session.deps.hooks,
            events=session.events_sink(),
            boundary_metadata=metadata,
            # The prefix the main requests sent (earlier clears applied), so the fork shares it.
            sent_messages=session.state.micro.apply_clears(transcript.messages),
            planner=lambda request, skip: place_cache_breakpoints(
                request, ttl=ttl, prefix_ttl=prefix_ttl, skip_cache_write=skip
            ),
            facts_ledger=default_facts_ledger,
            keep_from=turn_tail_start(transcript.entries, transcript.view),
        )

    # -- applying one -------------------------------------------------------------------------
    def apply(self, result: CompactionResult) -> None:
        """Append a compaction and clean up what referred to the old messages (seed 004)."""
        session = self.session
        state, transcript = session.state, session.transcript
        self.early_refused_at = None
        receipt = session.recall.compaction_receipt(
            result,
            entries=transcript.entries,
            view=transcript.view,
            micro=state.micro,
            tools=session.config.tools,
            policy=session.policy,
        )
        redactor = session.deps.redactor
        if redactor is not None:
            # A summary may quote a secret cut short, or a piece of one: the secrets found in
            # what it summarized are redacted wherever they appear in it, whole or in pieces.
            redactor = redactor.learning_from(strings_in([e.content for e in transcript.view]))
            redact_compaction(result, redactor)
            receipt = result.boundary.compact_metadata.get(RECEIPT_KEY, receipt)
        session.append(result.new_entries())
        emit(session.events_sink(), compaction_receipt_event(result, receipt))
        state.micro.reset_after_compaction()
        session.detector.notify_compaction(session.config.query_source)
        tracking = state.tracking
        tracking.turns_at_last_compaction = tracking.turns
        tracking.last_compaction_turn_id = result.boundary.uuid
        tracking.last_summary = result.author
        tracking.summary_requests = 0  # the next compaction has a budget of its own
        for extension in session.deps.extensions:
            extension.after_compact(session, result)
        session.save_state()


__all__ = ["SessionCompactor"]
