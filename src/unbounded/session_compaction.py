"""A session's compactions: which tiers run, when one runs (the auto-compact step), and what
applying one does to the session.

    maybe_auto_compact   the prepare step: at the threshold, the tiers; before it, an early
                         session-memory compaction when it pays (compaction/decisions.py)
    auto_compact         the tiers in order (`compaction_tiers()`), the breaker and the
                         summary-request budget tracked in the session's state
    compact              a manual compaction (`/compact`), optionally partial
    apply                append the compaction with its receipt; reset what referred to
                         the old messages; run the extensions' `after_compact`; save
    background           the summary written off the turn's path (`compaction/background.py`)
                         and swapped in at the threshold; `idle` compacts before a resume
                         when that pays (`compaction/idle.py`)

`SessionCompactor` serves one session through `SessionCore`; the decisions themselves are the
pure functions of `compaction/decisions.py`, the tiers those of `compaction/auto.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from unbounded.caching.breakpoints import CacheBreakpointPlanner, place_cache_breakpoints
from unbounded.caching.ttl import CacheTtl, ttl_seconds
from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    CompactionOutcome,
    DirectSummaryTier,
    SessionMemoryTier,
    SummaryTier,
    TierChoice,
    TieredCompaction,
    TierEntry,
    TierSlot,
    tier_slots,
)
from unbounded.compaction.background import BackgroundSummary, ThresholdStep, answered_hooks
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import (
    CompactionResult,
    FallbackReason,
    PreCompactDecision,
)
from unbounded.compaction.cut import turn_tail_start
from unbounded.compaction.decisions import (
    auto_compaction_allowed,
    background_summary_due,
    cache_expired,
    early_compaction_reason,
    should_auto_compact,
    summary_must_wait,
)
from unbounded.compaction.facts import RunningFacts
from unbounded.compaction.glue import RecordedState, RehydrateSource, running_facts_ledger
from unbounded.compaction.idle import cold_resume_pays, idle_compaction_pays
from unbounded.compaction.native import arrange_tiers, native_tiers
from unbounded.compaction.prompts import PartialDirection
from unbounded.events import EarlyCompaction, IdleCompaction, SummaryStall, emit
from unbounded.extension import offers_memory_compaction
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.request_budget import RequestBudget
from unbounded.model.response import Provider
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.recall.receipts import RECEIPT_KEY
from unbounded.redaction import redact_compaction, strings_in
from unbounded.session_core import SessionCore
from unbounded.session_recall import compaction_receipt_event
from unbounded.telemetry import set_attributes

logger = logging.getLogger(__name__)


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


def _sent_a_summary_request(result: CompactionResult, requests_before: int) -> bool:
    """The compaction sent a model request for its summary in this turn, so the turn waited
    for a call: its count of requests (which carries the earlier failed runs') grew. A summary
    from the session notes, or by the offline hand-over alone, sends none."""
    return result.summary_requests > requests_before


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
        self.background = BackgroundSummary(events=session.events_sink())
        """The summary written off the turn's path (`Policy.background_summary`)."""
        self.facts = RunningFacts()
        """The facts ledger's fold over the view, kept up to date call by call."""
        self.fork_planner: CacheBreakpointPlanner | None = None
        """The planner of the session's own requests (set by its prepare steps): the summary
        request, which repeats their messages, reuses the unmarked messages it keeps."""

    # -- when ---------------------------------------------------------------------------------
    async def maybe_auto_compact(self) -> None:
        """The auto-compact step: the tiers at the threshold, an early compaction before it
        when it pays (`compaction.decisions`)."""
        session = self.session
        tokens = session.transcript.counter.total
        policy, thresholds = session.policy, session.thresholds
        query_source = session.config.query_source
        if auto_compaction_allowed(policy, query_source=query_source):
            self.advance()
        if should_auto_compact(policy, thresholds, tokens, query_source=query_source):
            step = await self._background_at_threshold(tokens)
            if step is None:
                return
            requests_before = session.state.tracking.summary_requests
            result = await self.auto_compact(pre_compact=step.pre_compact)
            if result is not None and _sent_a_summary_request(result, requests_before):
                stall = SummaryStall(tokens, background=policy.background_summary)
                emit(session.events_sink(), stall)
            return
        if not auto_compaction_allowed(policy, query_source=query_source):
            return
        overhead = session.estimate_request_tokens([])
        reason = early_compaction_reason(
            policy,
            thresholds,
            tokens=tokens,
            overhead=overhead,
            cache_expired=self._cache_expired(),
            cache_edits_supported=session.config.cache_edits_supported,
            refused_at=self.early_refused_at,
            free_compaction_available=self.free_compaction_available,
            summary_pays_on_cold_cache=self._cold_resume_pays,
        )
        if reason is not None and await self._compact_early(reason) is not None:
            return
        if reason is not None:
            self.early_refused_at = tokens
        running = self.background.pending
        if background_summary_due(
            policy, thresholds, tokens=tokens, overhead=overhead, running=running
        ) and not self.free_compaction_available():
            self._start_background_summary()

    def advance(self) -> None:
        """Bring what a compaction reads of the whole view (the facts ledger's fold, the
        receipt's sums) up to date with the records added since the last call: work for what
        is new, so the compacting call only finishes them. Kept only where automatic
        compaction may run (a manual one reads the records afresh), the ledger's only where
        the session's summarizer takes one (the offline one lists the facts itself: a
        summarizer that comes later catches the fold up once)."""
        session = self.session
        transcript = session.transcript
        model = session.model_provider()
        profile = getattr(model, "profile", MODEL_PROFILE)  # a provider written without one
        if session.policy.facts_ledger and model is not None and not profile.includes_facts:
            self.facts.advance(transcript.view)
        session.recall.advance(transcript.entries, transcript.view, session.state.micro)

    async def _background_at_threshold(self, tokens: int) -> ThresholdStep | None:
        """The background summary's step at the threshold (`compaction.background`): None
        when it took the turn's compaction (swapped in, or the turn goes on without waiting),
        else the step after which the session compacts in the turn (its `pre_compact`: the
        hooks' answer at a refused swap)."""
        session = self.session
        if not (session.policy.background_summary or self.background.pending):
            return ThresholdStep()
        if self.free_compaction_available():
            return ThresholdStep()  # the notes compact at once, without a call
        must_wait = summary_must_wait(session.thresholds, tokens)
        step = await self.background.at_threshold(
            session.transcript.entries,
            now=session.deps.clock(),
            must_wait=must_wait,
            estimate=session.estimate_request_tokens,
            threshold=session.thresholds.autocompact,
            rehydrate=lambda: self.context().rehydrator(),
        )
        if step.waited:
            emit(session.events_sink(), SummaryStall(tokens, background=True))
        if step.outcome is not None and self._apply_background(step.outcome) is not None:
            return None
        if step.deferred:
            return None
        if step.pre_compact is None and not must_wait and session.policy.background_summary:
            self._start_background_summary()  # none ran, or it went stale: written again
            return None
        if not step.waited:
            return step  # the caller compacts in the turn, and counts the stall
        await self.auto_compact(pre_compact=step.pre_compact)  # the one it waited for is gone
        return None

    def _apply_background(self, outcome: CompactionOutcome) -> CompactionResult | None:
        """Apply a taken background summary; None when it failed (its counts are kept)."""
        tracking = self.session.state.tracking
        tracking.consecutive_failures = outcome.failures
        if outcome.result is None:
            tracking.summary_requests = outcome.summary_requests
            return None
        self.apply(outcome.result)
        return outcome.result

    async def _take_background(self) -> CompactionResult | PreCompactDecision | None:
        """The background summary in flight, waited for and swapped in (None when there is
        none, or it failed or went stale; the hooks' answer when they refused the swap): a
        summary already paid for is used first."""
        if not self.background.pending:
            return None
        session = self.session
        await self.background.settle()
        step = await self.background.take(
            session.transcript.entries,
            estimate=session.estimate_request_tokens,
            threshold=session.thresholds.autocompact,
            rehydrate=lambda: self.context().rehydrator(),
        )
        if step.outcome is None:
            return step.pre_compact
        return self._apply_background(step.outcome)

    def _start_background_summary(self) -> None:
        """Start the summary tiers on the conversation as it is now, off the turn's path."""
        session = self.session
        tracking = session.state.tracking
        budget = RequestBudget(
            session.policy.compact_max_summary_requests, used=tracking.summary_requests
        )
        context = replace(self.context(), budget=budget)
        if context.keep_from == "":
            return  # only the turn's own messages: nothing to summarize
        self.background.start(
            context,
            self.compaction_tiers(),
            failures=tracking.consecutive_failures,
            now=session.deps.clock(),
        )

    def _cold_resume_pays(self) -> bool:
        """A summary call before resuming on an expired cache costs less than the resume."""
        session = self.session
        return cold_resume_pays(
            session.policy,
            session.model_info,
            tokens=session.transcript.counter.total,
            overhead=session.estimate_request_tokens([]),
            ttl=session.state.ttl_latch.ttl_for(session.config.query_source),
        )

    def idle_deadline(self) -> datetime | None:
        """When a host should call `idle()`: `Policy.idle_compact_at_ttl_share` of the cache
        TTL after the last reply (None before any reply)."""
        session = self.session
        last = session.transcript.last_reply_time()
        if last is None:
            return None
        ttl = ttl_seconds(session.state.ttl_latch.ttl_for(session.config.query_source))
        return last + timedelta(seconds=ttl * session.policy.idle_compact_at_ttl_share)

    async def idle(self) -> CompactionResult | None:
        """Compact an idle session while its cache is warm when that costs less than the
        resume would (`compaction.idle`); None otherwise (see `Session.idle`)."""
        session = self.session
        policy = session.policy
        if not auto_compaction_allowed(policy, query_source=session.config.query_source):
            return None
        if policy.cold_cache_compact_fraction > 0 and self.free_compaction_available():
            return None  # the notes compact at the resume for free (the cold_cache rule)
        ttl = session.state.ttl_latch.ttl_for(session.config.query_source)
        last = session.transcript.last_reply_time()
        if last is None or cache_expired(session.deps.clock(), last, ttl):
            return None
        tokens = session.transcript.counter.total
        costs = idle_compaction_pays(
            policy,
            session.model_info,
            tokens=tokens,
            overhead=session.estimate_request_tokens([]),
            ttl=ttl,
        )
        if costs is None:
            return None
        logger.info(
            "idle compaction at %d tokens: $%.4f to compact now against $%.4f to resume as is",
            tokens,
            costs.compact_usd,
            costs.keep_usd,
        )
        taken = await self._take_background()
        if isinstance(taken, CompactionResult):
            result: CompactionResult | None = taken
        else:
            result = await self.auto_compact(pre_compact=taken)
        if result is not None:
            emit(session.events_sink(), IdleCompaction(tokens, costs.keep_usd, costs.compact_usd))
        return result

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
        `cold_cache_compact_min_saving` at a cold-cache moment); at a `cold_resume`, the
        summary tiers (the cold-resume guard found the summary call pays)."""
        session = self.session
        tokens = session.transcript.counter.total
        policy = session.policy
        if reason == "cold_resume":
            logger.info("the cache expired at %d tokens: compacting before resuming pays", tokens)
            result = await self.auto_compact()
            if result is not None:
                event = EarlyCompaction(reason, tokens, session.thresholds.autocompact)
                emit(session.events_sink(), event)
            return result
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
    async def auto_compact(
        self, *, pre_compact: PreCompactDecision | None = None
    ) -> CompactionResult | None:
        """The compaction tiers in order; the compaction, or None when it failed.
        `pre_compact`: the PreCompact hooks' answer already given (at a refused swap)."""
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
            context = replace(context, hooks=answered_hooks(context.hooks, pre_compact))
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
        """The session notes first, then in `Policy.compaction_tier_order`: the provider's own
        compaction where provider and model declare it, the model's cache-sharing and direct
        requests until the breaker trips or the summary requests are spent, the offline
        hand-over's two (without a model, only those, throughout)."""
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
            *arrange_tiers(
                self.session.policy.compaction_tier_order,
                native=native_tiers(summarizer, self.session.model_info),
                summary=(
                    TierSlot(CacheSharingSummaryTier(summarizer), "closed"),
                    TierSlot(DirectSummaryTier(summarizer), "closed"),
                ),
                offline=(
                    TierSlot(CacheSharingSummaryTier(extractive), "open"),
                    TierSlot(DirectSummaryTier(extractive), "open"),
                ),
            ),
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
            planner=self._fork_planner(ttl, prefix_ttl),
            facts_ledger=running_facts_ledger(self.facts, lambda: self.session.transcript.view),
            keep_from=turn_tail_start(transcript.entries, transcript.view),
        )

    def _fork_planner(
        self, ttl: CacheTtl, prefix_ttl: CacheTtl | None
    ) -> Callable[[ProviderRequest, bool], ProviderRequest]:
        """How the summary request gets its cache markers: the same as
        `place_cache_breakpoints`, from the session planner's kept work when there is one."""
        fork = self.fork_planner
        if fork is None:
            return lambda request, skip: place_cache_breakpoints(
                request, ttl=ttl, prefix_ttl=prefix_ttl, skip_cache_write=skip
            )
        return lambda request, skip: fork.plan_fork(
            request, ttl=ttl, prefix_ttl=prefix_ttl, skip_cache_write=skip
        ).request

    # -- applying one -------------------------------------------------------------------------
    def apply(self, result: CompactionResult) -> None:
        """Append a compaction and clean up what referred to the old messages (seed 004)."""
        session = self.session
        state, transcript = session.state, session.transcript
        self.early_refused_at = None
        self.background.discard("superseded")  # a summary of the history it replaces is stale
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
        # The receipt's items were each checked to encode as they were built (the redactor's
        # rewrite is checked again): the transcript does not encode them a second time.
        checked = session.recall.running_receipt.checked if redactor is None else None
        session.recall.running_receipt.checked = None
        session.transcript.append(result.new_entries(), checked=checked)
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
