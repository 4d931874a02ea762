"""The steps of `Session.prepare`, in order, over one `TurnContext` (turn.py says what each
does), and the working state only they keep between turns: the breakpoint planner, the
request parameters while config and policy stay, the warning level and repairs last
reported, the last request and its cache markers.

`PrepareSteps` serves one session through `SessionCore`; it leaves compacting to the
session's `SessionCompactor` and the recall receipts to its `SessionRecall`.
"""

from __future__ import annotations

from datetime import datetime, timezone

from unbounded.caching.breakpoints import CacheBreakpointPlanner
from unbounded.compaction.cached_micro import with_cache_edits
from unbounded.compaction.conversation import CacheSafeParams
from unbounded.compaction.decisions import (
    auto_compaction_allowed,
    decide_ttl_upgrade,
    microcompact_policy,
)
from unbounded.compaction.micro import MicrocompactResult, microcompact
from unbounded.events import (
    CacheTtlUpgraded,
    ContextWarning,
    MicrocompactApplied,
    RequestRepaired,
    emit,
)
from unbounded.model.normalize import validate_request
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy, WarningLevel
from unbounded.session_compaction import SessionCompactor
from unbounded.session_core import SessionCore
from unbounded.telemetry import set_attributes
from unbounded.turn import TurnContext, TurnStep


def iso_time(moment: datetime) -> str:
    """A moment as the transcript writes it (UTC, milliseconds, a Z)."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PrepareSteps:
    """The prepare steps of one session, and what they keep between turns."""

    def __init__(self, session: SessionCore, compactor: SessionCompactor) -> None:
        self.session = session
        self.compactor = compactor
        self.planner = CacheBreakpointPlanner()
        compactor.fork_planner = self.planner  # the summary request reuses its kept work
        self.last_request: ProviderRequest | None = None
        """The last request prepared (as it was sent, after every step)."""
        self.marked_messages: tuple[int, ...] = ()
        """Indices of the last request's messages that carry a cache marker."""
        self._level: WarningLevel = "ok"
        self._reported_repairs: tuple[str, ...] = ()
        self._request_params: (
            tuple[tuple[object, ...], CacheSafeParams, tuple[object, ...]] | None
        ) = None
        """The parameters of the session's own requests, while config, policy and the
        extensions' `tools_state` stay."""
        self.order: tuple[TurnStep, ...] = self.in_order()
        """What `prepare` runs (extensions hook in through `Extension`)."""

    async def run(self, now: datetime) -> ProviderRequest:
        """Run every step over a new turn and return its request."""
        turn = TurnContext(now=now)
        for step in self.order:
            await step(turn)
        return turn.built_request()

    def in_order(self) -> tuple[TurnStep, ...]:
        """The steps, in order (unbounded/turn.py says what each step does)."""
        return (
            self.answer_pending_calls,
            self.before_prepare,
            self.upgrade_cache_ttl,
            self.auto_compact,
            self.microcompact,
            self.build_request,
            self.place_breakpoints,
            self.attach_cache_edits,
            self.before_request,
            self.validate_request,
            self.record_prompt_state,
            self.finish_turn,
        )

    async def answer_pending_calls(self, turn: TurnContext) -> None:
        """Tool calls left without a result get a synthetic one."""
        self.session.answer_pending_calls("prepare")

    async def before_prepare(self, turn: TurnContext) -> None:
        """The extensions' `before_prepare`, in order."""
        for extension in self.session.deps.extensions:
            await extension.before_prepare(self.session)

    async def upgrade_cache_ttl(self, turn: TurnContext) -> None:
        """Count a pause towards the 1-hour cache TTL, and switch to it when it pays
        (`compaction.decisions.decide_ttl_upgrade`)."""
        session = self.session
        state = session.state
        upgrade = decide_ttl_upgrade(
            state.ttl_latch,
            query_source=session.config.query_source,
            model=session.model_info,
            policy=session.policy,
            now=session.deps.clock(),
            last_reply_at=session.transcript.last_reply_time(),
            idle_expiries=state.tracking.idle_expiries,
        )
        if upgrade is None:
            return
        events = session.events_sink()
        state.tracking.idle_expiries = upgrade.idle_expiries
        if upgrade.prefix_upgraded:
            emit(events, CacheTtlUpgraded(upgrade.idle_expiries, part="prefix"))
        if upgrade.latch is not None:
            state.ttl_latch = upgrade.latch
            emit(events, CacheTtlUpgraded(upgrade.idle_expiries))

    async def auto_compact(self, turn: TurnContext) -> None:
        """Compact at the threshold, or early when it pays (`SessionCompactor`)."""
        compactor = self.compactor
        session = self.session
        transcript = session.transcript
        # Every turn, so that the turn that compacts reads only its own records; only where
        # automatic compaction may run (a manual one reads the records afresh, and a session
        # that never compacts by itself should not pay or hold anything for it).
        if auto_compaction_allowed(session.policy, query_source=session.config.query_source):
            compactor.recorded.advance(
                transcript.entries, transcript.view, compactor.rehydrate_from
            )
        await compactor.maybe_auto_compact()

    async def microcompact(self, turn: TurnContext) -> None:
        """Clear stale tool results, queue cache edits; the turn's messages from here on."""
        session = self.session
        micro = session.state.micro
        now = turn.now
        last_reply_at = session.transcript.last_reply_time()
        session.recall.prepare_handles(micro, session.config.tools, session.policy)
        with session.deps.telemetry.span("unbounded.microcompaction") as span:
            result = microcompact(
                session.transcript.normalizer.borrowed_messages(),  # read here, never kept
                micro,
                policy=self._microcompact_policy(now, last_reply_at),
                now=now,
                last_assistant_at=last_reply_at,
                cache_edits_supported=session.config.cache_edits_supported,
                share_view=True,  # the planner copies it into the request this turn
            )
            set_attributes(
                span,
                {
                    "unbounded.microcompaction.tier": result.tier,
                    "unbounded.microcompaction.cleared": len(result.cleared_ids)
                    + len(result.deleted_ids),
                    "unbounded.microcompaction.tokens_saved": result.tokens_saved,
                    "unbounded.microcompaction.breaks_cache": result.breaks_cache,
                },
            )
        turn.microcompaction = result
        # Microcompaction's own list (no copy): read this turn only; the planner's request is
        # a new list.
        turn.messages = result.messages
        # Compared at C speed with what the planner took last turn: what later steps reuse.
        turn.first_changed = self.planner.reusable_prefix(turn.messages)
        if result.tier != "none":
            emit(
                session.events_sink(),
                MicrocompactApplied(
                    tier=result.tier,
                    cleared=len(result.cleared_ids) + len(result.deleted_ids),
                    tokens_saved=result.tokens_saved,
                    breaks_cache=result.breaks_cache,
                ),
            )
            self._write_receipt(result)

    def _microcompact_policy(self, now: datetime, last_reply_at: datetime | None) -> Policy:
        """The policy for this turn's microcompaction (`compaction.decisions`)."""
        session = self.session
        return microcompact_policy(
            session.settings.clearing,
            now=now,
            last_reply_at=last_reply_at,
            ttl=session.state.ttl_latch.ttl_for(session.config.query_source),
            tokens=session.transcript.counter.total,
            warning_threshold=session.thresholds.warning,
            cache_edits_supported=session.config.cache_edits_supported,
        )

    def _write_receipt(self, result: MicrocompactResult) -> None:
        """Append the receipt of a microcompaction that took results out (a system record)."""
        session = self.session
        written = session.recall.microcompact_receipt(
            result,
            entries=session.entries,
            micro=session.state.micro,
            redactor=session.deps.redactor,
            timestamp=iso_time(session.deps.clock()),
        )
        if written is None:
            return
        entry, event = written
        session.append([entry])
        emit(session.events_sink(), event)

    async def build_request(self, turn: TurnContext) -> None:
        """System, tools and the turn's messages into one request."""
        session = self.session
        key = (session.config, session.policy, session.model_info, session.offers_recall)
        tools = tuple(extension.tools_state(session) for extension in session.deps.extensions)
        memo = self._request_params
        if (
            memo is None
            or any(a is not b for a, b in zip(memo[0], key, strict=True))
            or memo[2] != tools
        ):
            memo = self._request_params = (key, session.cache_safe_params(), tools)
        turn.request = memo[1].request(turn.messages, shared=True)

    async def place_breakpoints(self, turn: TurnContext) -> None:
        """Cache markers (`CacheBreakpointPlanner`)."""
        ttl, prefix_ttl = self.session.cache_ttls()
        request = turn.built_request()
        # The hint holds for the turn's own messages (a step may have put others in).
        same = turn.first_changed if request.get("messages") is turn.messages else None
        plan = self.planner.plan(request, ttl=ttl, prefix_ttl=prefix_ttl, unchanged_prefix=same)
        turn.request = plan.request
        self.marked_messages = plan.marked_messages

    async def attach_cache_edits(self, turn: TurnContext) -> None:
        """The cache deletions microcompaction queued; the detector told of new ones."""
        result = turn.microcompaction
        if result is None:
            return
        if result.cache_edits:
            turn.request = with_cache_edits(turn.built_request(), result.cache_edits)
        if result.new_cache_edits:
            session = self.session
            micro = session.state.micro
            session.detector.notify_cache_deletion(
                session.config.query_source,
                micro.cached.pending_deleted_tokens,
                cache_deleted_baseline=micro.cache_deleted_input_tokens,
            )

    async def before_request(self, turn: TurnContext) -> None:
        """The extensions' `before_request`, in order (each may replace the request)."""
        for extension in self.session.deps.extensions:
            await extension.before_request(self.session, turn)

    async def validate_request(self, turn: TurnContext) -> None:
        """New repairs of the view reported; the request checked when the config asks."""
        session = self.session
        repairs = tuple(f"{r.kind}@{r.index}" for r in session.transcript.normalizer.repairs)
        if repairs and repairs != self._reported_repairs:
            emit(session.events_sink(), RequestRepaired(repairs))
        self._reported_repairs = repairs
        if session.config.validate_requests:
            validate_request(turn.built_request()["messages"])

    async def record_prompt_state(self, turn: TurnContext) -> None:
        """The break detector's snapshot of what is sent."""
        session = self.session
        session.detector.record_prompt_state(
            turn.built_request(),
            query_source=session.config.query_source,
            now=turn.now.timestamp(),
        )

    async def finish_turn(self, turn: TurnContext) -> None:
        """The request kept as sent, a warning when the level rose, the state saved."""
        session = self.session
        request = turn.built_request()
        if request.get("messages") is turn.messages:  # no step copied microcompaction's list
            request = turn.request = {**request, "messages": list(turn.messages)}
        self.last_request = request
        status = session.status()
        if status.level != self._level and status.level != "ok":
            emit(
                session.events_sink(),
                ContextWarning(status.level, status.tokens, status.percent_left),
            )
        self._level = status.level
        session.save_state()

    @property
    def level(self) -> WarningLevel:
        """The warning level of the last prepared turn."""
        return self._level


__all__ = ["PrepareSteps", "iso_time"]
