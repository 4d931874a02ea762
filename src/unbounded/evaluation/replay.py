"""Replay a recorded session through the full `Session` pipeline and price it against
baselines.

For each recorded API call, in order:

1. the records before it (user messages, tool results, attachments; see `recorded.py`) are
   appended to a `Session` (its store, `ReplayStore`, keeps no second copy), whose clock
   follows the recorded times;
2. `await session.prepare()` builds the request our pipeline would send (microcompaction,
   auto-compaction, cache planning), which is checked with `validate_request` (through a
   `RequestValidator`: each message once, not once per call) and priced by the cache
   simulator at the recorded time; the summary calls of compactions made in that step are
   priced too (they share the main conversation's cache);
3. the recorded response is recorded as the model's answer with the usage re-derived for OUR
   request (the simulator's input / cache figures plus the recorded output tokens), so token
   counting, thresholds and cache-break detection follow our context, not the recorded one;
4. the tool results that arrived between the response's lines are appended.

Compactions change the view from then on: later recorded messages follow our summary. They
happen only in `prepare()`, when every result of the previous response is in, so tool pairs
stay valid. The baselines of `baselines.py` are fed the same records and priced the same way.

Prices and caching follow the replayed model's provider: explicit breakpoints for Anthropic,
automatic prefix caching for OpenAI (`caching/simulator.py`). The model is the transcript's
own unless `model` is given (a model the table lacks gets its provider's figures under its
own name, `catalog.resolve_recorded_model`: an OpenAI rollout is never priced as a Claude
model), and the window the one the transcript reported (a Codex rollout's
`model_context_window`) when it did and no `window` is given. The recorded cost is
the recorded usage priced at the replayed model when both are of one provider; otherwise it
is priced at the recorded model's own prices and marked not comparable
(`recorded_comparable`): another provider's cache and tokenizer made those figures. When no
model can price it (1-hour cache writes on a model without that tier) it is None.

The library never prints: progress goes to a callback, everything else into `ReplayReport`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any, cast

from unbounded.blocking import run_blocking
from unbounded.caching.fidelity import FidelityReport, RecordedUsage
from unbounded.caching.simulator import SimulatedCall, usage_cost_usd
from unbounded.caching.ttl import CacheTtl, ttl_seconds
from unbounded.catalog import (
    ModelInfo,
    ModelTable,
    as_provider,
    load_model_table,
    resolve_recorded_model,
)
from unbounded.compaction.background import BACKGROUND_FIELD
from unbounded.compaction.facts import text_of
from unbounded.errors import ConfigError, InvalidRequestError
from unbounded.evaluation.baselines import (
    BASELINES,
    Baseline,
    History,
    ReplaySettings,
    StrategyRun,
    feed_strategies,
    make_baselines,
    run_baselines,
)
from unbounded.evaluation.call_series import CallPoint, CallSeries, CompactionKind
from unbounded.evaluation.call_series import iso_time as _iso
from unbounded.evaluation.continuation import (
    Counts,
    KnownItems,
    TextIndex,
    continuation_scores,
)
from unbounded.evaluation.native_strategies import NATIVE_STRATEGIES, native_strategies
from unbounded.evaluation.prefix import RECORDED_TOOLS, OpaquePrefix
from unbounded.evaluation.receipt_lines import ReceiptLine
from unbounded.evaluation.recorded import RecordedCall, ReplayScript
from unbounded.evaluation.refetch import RecallTally, RefetchCounter
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.replay_store import ReplayStore
from unbounded.evaluation.retention import RetentionTally, Scores, messages_text, score_text
from unbounded.events import (
    BackgroundSummaryDiscarded,
    BackgroundSummaryStarted,
    BackgroundSummarySwapped,
    CacheBreak,
    CompactionFailed,
    CompactionRetried,
    ContextWarning,
    EarlyCompaction,
    Event,
    ExpectedCacheDrop,
    MicrocompactApplied,
    SessionMemoryCompactionSkipped,
    SessionMemoryUpdated,
    SessionMemoryUpdateFailed,
    SessionMemoryWaitTimedOut,
    SummaryStall,
)
from unbounded.extension import Extension
from unbounded.model.content import Usage
from unbounded.model.entries import Entry
from unbounded.model.normalize import MISSING_START_TEXT, RequestValidator
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ProviderWrapper
from unbounded.model.transcript import Transcript
from unbounded.policy import MIN_COMPACTION_ROOM, Policy, Thresholds, compute_thresholds
from unbounded.providers.base import Heartbeat, ModelResponse, Provider
from unbounded.recall.receipts import Receipt
from unbounded.session import Session, SessionConfig
from unbounded.tokens.estimate import rough_token_count

Progress = Callable[[int, int], None]
"""Called with (calls done, calls in all) after each replayed call."""

CONTINUE_PROMPT = "[replay: the recorded session continued here without a user message]"
"""Added when a recorded call follows an assistant message with nothing in between."""


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay: the model and window to plan for, the summarizer, the policy."""

    model: str | None = None
    """Model to plan and price for (default: the transcript's, with its provider's figures when
    the model table lacks it; claude-sonnet-5-5 when the transcript names none)."""
    window: int | None = None
    """Context window to plan for (default: the one the transcript reported for its own
    model, else the model's)."""
    summarizer: Provider | None = None
    """Summarizer of our compactions (default: the offline extractive one)."""
    policy: Policy | None = None
    """Pipeline policy (default: `Policy.from_env()`)."""
    model_table: ModelTable | None = None
    baselines: bool = True
    """Also simulate the baselines of `baselines.py`."""
    source: str | None = None
    """How reports name the session (default: the transcript's file name)."""
    session_memory: bool = True
    """Keep session-memory notes (offline updater) so compaction can skip the summary call."""
    summary_seconds: float = 60.0
    """How long a summary call is taken to last (the offline summarizer writes at once; a
    model takes 30 s to a few minutes): a background summary is ready this long after it
    started, on the recorded clock."""
    idle_compaction: bool = False
    """Call `Session.idle()` in every recorded pause longer than the cache TTL, at
    `Policy.idle_compact_at_ttl_share` of the TTL after the call before it."""
    variants: bool = False
    """Also replay our policy with the background summary on (when this run waited for a
    summary) and with idle compaction (when the recording pauses longer than the cache TTL),
    reported as strategies beside ours (`ReplayReport.variants`)."""

    def __post_init__(self) -> None:
        if self.summary_seconds < 0:
            raise ConfigError(f"summary_seconds must be >= 0, not {self.summary_seconds}")


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """Something that happened at a replayed call."""

    call: int
    time: float
    kind: str
    """microcompact, compaction, compaction_failed, cache_break, expected_cache_drop, warning,
    invalid_request, overflow, continuation, or a session-memory event's kind."""
    summary: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (time as ISO 8601)."""
        return {
            "call": self.call,
            "time": _iso(self.time),
            "kind": self.kind,
            "summary": self.summary,
            **({"data": self.data} if self.data else {}),
        }


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One of our compactions, with the retention figures at that point."""

    call: int
    kind: CompactionKind
    pre_tokens: int
    post_tokens: int
    """Tokens of the request built right after it (prefix included)."""
    summary_tokens: int
    summary_scores: Scores
    full_scores: Scores
    continuation: dict[str, dict[str, Counts]] = field(default_factory=dict)
    """`summary` / `full` -> kind -> counts (held, used, listed) over the next 30 recorded
    turns: what the recorded agent went on to use that our compacted context holds, and
    what it lists (a diagnostic: `unbounded.evaluation.continuation`)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "call": self.call,
            "kind": self.kind,
            "pre_tokens": self.pre_tokens,
            "post_tokens": self.post_tokens,
            "summary_tokens": self.summary_tokens,
            "summary": {k: list(v) for k, v in self.summary_scores.items()},
            "full": {k: list(v) for k, v in self.full_scores.items()},
            "continuation": {
                context: {kind: counts.to_list() for kind, counts in kinds.items()}
                for context, kinds in self.continuation.items()
            },
        }


@dataclass(frozen=True, slots=True)
class VariantRun:
    """Our policy replayed with one change: its cost, stalls and compactions."""

    run: StrategyRun
    stalls: int
    compactions: int
    idle_compactions: int
    background: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "cost": round(self.run.cost_usd, 6),
            "summary_calls": len(self.run.side_calls),
            "stalls": self.stalls,
            "compactions": self.compactions,
            "idle_compactions": self.idle_compactions,
            "background_summary": dict(self.background),
        }


@dataclass(slots=True, repr=False)
class ReplayReport:
    """Everything a replay found: per-call figures, the timeline, costs and retention."""

    source: str
    model: str
    context_window: int
    thresholds: Thresholds
    summarizer: str
    prefix: OpaquePrefix
    ttl: CacheTtl
    points: Sequence[CallPoint]
    """Per-call figures (a `CallSeries`: columns, each row built when read)."""
    timeline: list[TimelineEvent]
    compaction_records: list[CompactionRecord]
    ours: StrategyRun
    baselines: dict[str, StrategyRun]
    recorded_cost: float | None
    fidelity: FidelityReport
    recorded_model: str | None = None
    """The model whose prices the recorded cost uses."""
    recorded_calls: int = 0
    """Every billed call of the recording (`Transcript.billed_calls`): the replayed ones, the
    ones on branches the thread does not follow, the agent's own side calls."""
    not_replayed: dict[str, int] = field(default_factory=dict)
    """Billed calls the replay does not follow, by place (`branch`, `side`)."""
    not_replayed_costs: list[tuple[str, float, float | None]] = field(default_factory=list)
    """Each billed call the replay does not follow: its response id, its share of our cost
    (a branch call's recorded cost, else 0) and its recorded cost (None: not priced)."""
    recorded_comparable: bool = True
    """Whether the recorded cost can be set against ours (same provider's cache and prices)."""
    model_assumed: bool = False
    """The recorded model is not in the model table: its provider's figures were assumed."""
    microcompacts: int = 0
    cache_breaks: int = 0
    invalid_requests: int = 0
    retention_summary: RetentionTally = field(default_factory=RetentionTally)
    retention_full: RetentionTally = field(default_factory=RetentionTally)
    notes: list[str] = field(default_factory=list)
    session_memory_updates: int = 0
    models: dict[str, int] = field(default_factory=dict)
    """Recorded calls per model, the main model first (each call priced with its own)."""
    recall: RecallTally = field(default_factory=RecallTally)
    """Re-fetches of results our policy took out, and what recalls would have cost."""
    receipts: list[ReceiptLine] = field(default_factory=list)
    """What the report shows of each receipt of our compactions and microcompactions."""
    stalls: int = 0
    """Turns that waited for a summary call (`SummaryStall`)."""
    background: dict[str, int] = field(default_factory=dict)
    """The background summary: on (1/0), started, swapped, discarded, its summary calls."""
    idle_compactions: int = 0
    """Compactions `Session.idle()` made in the recorded pauses (`ReplayOptions.idle_compaction`
    on)."""
    pauses: dict[str, int] = field(default_factory=dict)
    """Recorded pauses between calls longer than the cache TTL (`over_ttl`) and than an hour
    (`over_1h`)."""
    variants: dict[str, VariantRun] = field(default_factory=dict)
    """Our policy replayed again with one change (`background_summary`, `idle_compaction`)."""

    def __repr__(self) -> str:
        """A short form. The timeline, receipts and runs of a long replay are megabytes, and
        `asyncio.run` (3.11) formats the finished task's result when it puts the SIGINT
        handler back (`replay_session` runs the replay that way)."""
        return (
            f"ReplayReport(source={self.source!r}, model={self.model!r}, "
            f"calls={len(self.points)}, compactions={len(self.compaction_records)})"
        )

    @property
    def calls(self) -> int:
        """Recorded calls replayed."""
        return len(self.points)

    @property
    def compactions(self) -> int:
        """Our compactions, of any kind."""
        return len(self.compaction_records)

    @property
    def session_memory_compactions(self) -> int:
        """Our compactions made from session memory (no summary call)."""
        return sum(1 for r in self.compaction_records if r.kind == "session_memory")

    def costs(self) -> dict[str, Any]:
        """Cost in USD: ours, the recorded session's (when it has usage), each baseline's."""
        recorded = self.recorded_cost
        return {
            "unbounded": round(self.ours.cost_usd, 6),
            "recorded": round(recorded, 6) if recorded is not None else None,
            "recorded_model": self.recorded_model if recorded is not None else None,
            "recorded_comparable": recorded is not None and self.recorded_comparable,
            "baselines": {name: round(run.cost_usd, 6) for name, run in self.baselines.items()},
        }

    def continuation(self) -> dict[str, dict[str, dict[str, float | None]]]:
        """kind -> {summary, full} -> recall, precision and score over our compactions (next
        30 turns), from their counts added together."""
        sums: dict[str, dict[str, Counts]] = {}
        for record in self.compaction_records:
            for context, kinds in record.continuation.items():
                for kind, counts in kinds.items():
                    by_context = sums.setdefault(kind, {})
                    by_context[context] = by_context.get(context, Counts()) + counts
        return {
            kind: {context: counts.figures() for context, counts in by_context.items()}
            for kind, by_context in sums.items()
        }

    def retention(self) -> dict[str, Any]:
        """RETENTION.md figures at our compaction points, summed per fact type."""
        summary = self.retention_summary.to_dict()
        full = self.retention_full.to_dict()
        return {
            "points": self.retention_summary.points,
            **{
                name: {
                    "summary": summary[name]["fraction"],
                    "full": full[name]["fraction"],
                    "facts": summary[name]["total"],
                }
                for name in summary
            },
        }

    def to_dict(self, *, series: bool = False) -> dict[str, Any]:
        """The `replay --json` object (`series=True` adds per-call figures)."""
        data: dict[str, Any] = {
            "source": self.source,
            "model": self.model,
            "model_assumed": self.model_assumed,
            "models": dict(self.models),
            "context_window": self.context_window,
            "thresholds": {
                "autocompact": self.thresholds.autocompact,
                "warning": self.thresholds.warning,
                "blocking": self.thresholds.blocking,
            },
            "summarizer": self.summarizer,
            "calls": self.recorded_calls,
            "replayed_calls": self.calls,
            "calls_not_replayed": dict(self.not_replayed),
            "compactions": self.compactions,
            "session_memory_compactions": self.session_memory_compactions,
            "session_memory_updates": self.session_memory_updates,
            "microcompacts": self.microcompacts,
            "cache_breaks": self.cache_breaks,
            "invalid_requests": self.invalid_requests,
            "overflows": self.ours.overflows,
            "peak_context_tokens": self.ours.peak_context_tokens,
            "cache_read_share": round(self.ours.cache_read_share, 5),
            "cost": self.costs(),
            "stalls": self.stalls,
            "background_summary": dict(self.background),
            "idle_compactions": self.idle_compactions,
            "pauses": dict(self.pauses),
            "variants": {name: variant.to_dict() for name, variant in self.variants.items()},
            "strategies": {
                "unbounded": self.ours.to_dict(),
                **{f"unbounded+{name}": v.run.to_dict() for name, v in self.variants.items()},
                **{name: run.to_dict() for name, run in self.baselines.items()},
            },
            "fidelity": {
                "recorded_cache_read_share": round(self.fidelity.recorded_cache_read_share, 5),
                "simulated_cache_read_share": round(self.fidelity.simulated_cache_read_share, 5),
                "calls": len(self.fidelity.calls),
            },
            "prefix": self.prefix.to_dict(),
            "cache_ttl": self.ttl,
            "retention": self.retention(),
            "continuation": self.continuation(),
            "recall": self.recall.to_dict(),
            "compaction_points": [r.to_dict() for r in self.compaction_records],
            "timeline": [event.to_dict() for event in self.timeline],
            "notes": list(self.notes),
        }
        if series:
            data["series"] = [point.to_dict() for point in self.points]
        return data

    def json_text(self, *, series: bool = False) -> Iterator[str]:
        """`json.dumps(self.to_dict(series=series), indent=2)`, in pieces: the series a point
        at a time, so a long replay's output is not built whole in memory first (every point's
        dict and the whole text at once: a 71 MB peak at 10,000 calls, growing with them)."""
        head = json.dumps(self.to_dict(), indent=2)
        if not series:
            yield head
            return
        # The series is the object's last key: its text goes where the closing brace was.
        yield head[: -len("\n}")] + ',\n  "series": ['
        first = True
        for point in self.points:
            # A point two levels in: each of its lines indented by four more spaces.
            text = json.dumps(point.to_dict(), indent=2).replace("\n", "\n    ")
            yield ("\n    " if first else ",\n    ") + text
            first = False
        yield "]\n}" if first else "\n  ]\n}"


# -- helpers ----------------------------------------------------------------------------------


class ReplayClock:
    """The session's clock: it shows the recorded time the replay has reached."""

    def __init__(self, start: float) -> None:
        self.seconds = start

    def set(self, seconds: float) -> None:
        """Move to a recorded time (never backwards)."""
        self.seconds = max(self.seconds, seconds)

    def __call__(self) -> datetime:
        """The current recorded time."""
        return datetime.fromtimestamp(self.seconds, tz=timezone.utc)


class RecordingProvider(ProviderWrapper):
    """Wraps the summarizer so that every summary call can be priced afterwards."""

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
        self.calls: list[tuple[ProviderRequest, ModelResponse]] = []

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Forward the call and remember the request and the reply."""
        response = await self.inner.create(request, stream=stream, heartbeat=heartbeat)
        self.calls.append((request, response))
        return response

    def take(self) -> list[tuple[ProviderRequest, ModelResponse]]:
        """The calls made since the last take."""
        calls, self.calls = self.calls, []
        return calls


def _summary_output_tokens(
    provider: RecordingProvider, response: ModelResponse, scale: float
) -> int:
    reported = response.usage.get("output_tokens") if response.usage else None
    if not provider.profile.offline and isinstance(reported, int) and reported > 0:
        return reported
    return round(rough_token_count(response.text) * scale)


def _recording_ttl(report: FidelityReport) -> CacheTtl:
    hours = sum(1 for call in report.calls if call.ttl == "1h")
    return "1h" if report.calls and hours * 2 > len(report.calls) else "5m"


def _recorded_cost(recorded: Usage | None, model: ModelInfo, ttl: CacheTtl) -> float | None:
    """A recorded usage at a model's prices (None without usage, or for 1-hour cache writes
    on a model without that tier)."""
    if recorded is None:
        return None
    usage = RecordedUsage.from_usage(recorded, ttl)
    if usage.cache_creation_1h_input_tokens and model.cache_write_1h_multiplier is None:
        return None
    return usage_cost_usd(
        model,
        input_tokens=usage.input_tokens,
        cache_creation_5m_input_tokens=usage.cache_creation_5m_input_tokens,
        cache_creation_1h_input_tokens=usage.cache_creation_1h_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
        output_tokens=usage.output_tokens,
    )


def _calls(count: int, word: str) -> str:
    """ "1 side call", "3 side calls"."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


class _EventLog:
    """Collects the session's events until taken (a cache break reaches the sink twice: kept
    once). Taken events are let go: a long replay holds one turn's events, not the run's."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._last: Event | None = None

    def __call__(self, event: Event) -> None:
        if event is self._last:
            return
        self._last = event
        self.events.append(event)

    def take(self) -> list[Event]:
        """The events since the last take."""
        events, self.events = self.events, []
        return events


def _timeline_event(event: Event, call: int, time: float) -> TimelineEvent | None:
    if isinstance(event, MicrocompactApplied):
        return TimelineEvent(
            call,
            time,
            "microcompact",
            f"{event.tier} microcompact: {event.cleared} tool "
            f"{'result' if event.cleared == 1 else 'results'} cleared, "
            f"{event.tokens_saved:,} tokens saved"
            + (" (changes the cached prefix)" if event.breaks_cache else ""),
            {"tier": event.tier, "cleared": event.cleared, "tokens_saved": event.tokens_saved},
        )
    if isinstance(event, CacheBreak):
        return TimelineEvent(
            call,
            time,
            "cache_break",
            f"cache break: read {event.previous_read:,} -> {event.current_read:,} tokens; "
            f"{event.reason}",
            {
                "previous_read": event.previous_read,
                "current_read": event.current_read,
                "reason": event.reason,
            },
        )
    if isinstance(event, ExpectedCacheDrop):
        return TimelineEvent(
            call,
            time,
            "expected_cache_drop",
            f"expected cache drop after {event.reason.replace('_', ' ')}: read "
            f"{event.previous_read:,} -> {event.current_read:,} tokens",
        )
    if isinstance(event, ContextWarning):
        return TimelineEvent(
            call,
            time,
            "warning",
            f"{_LEVEL_WORDS.get(event.level, event.level)}: {event.tokens:,} tokens, "
            f"{event.percent_left}% left before auto-compact",
            {"level": event.level, "tokens": event.tokens},
        )
    if isinstance(event, CompactionFailed):
        return TimelineEvent(
            call, time, "compaction_failed", f"compaction failed ({event.reason}): {event.message}"
        )
    if isinstance(event, BackgroundSummaryStarted):
        return TimelineEvent(
            call,
            time,
            "background_summary",
            f"background summary started at {event.tokens:,} tokens",
        )
    if isinstance(event, BackgroundSummarySwapped):
        return TimelineEvent(
            call,
            time,
            "background_summary",
            f"background summary swapped in: {event.started_tokens:,} tokens when it started, "
            f"{event.post_tokens:,} after, {event.kept_since:,} records since kept after it",
        )
    if isinstance(event, BackgroundSummaryDiscarded):
        return TimelineEvent(
            call, time, "background_summary", f"background summary discarded ({event.reason})"
        )
    if isinstance(event, SummaryStall):
        return TimelineEvent(
            call,
            time,
            "stall",
            f"the turn waited for a summary call at {event.tokens:,} tokens"
            + (" (the background summary was not ready)" if event.background else ""),
        )
    if isinstance(event, CompactionRetried):
        return TimelineEvent(
            call, time, "compaction_retried", f"summary request too long: retry {event.attempt}"
        )
    if isinstance(
        event,
        (SessionMemoryUpdateFailed, SessionMemoryCompactionSkipped, SessionMemoryWaitTimedOut),
    ):
        data = asdict(event)
        return TimelineEvent(call, time, event.kind, event.kind.replace("_", " "), data)
    return None


_LEVEL_WORDS = {
    "warning": "context filling up",
    "error": "context nearly full",
    "autocompact": "context at the auto-compact threshold",
    "blocking": "context at the blocking limit",
}
"""How a context warning reads in the timeline, by level."""


# -- the replay ---------------------------------------------------------------------------------


class _Replayer:
    """State of one replay in progress."""

    def __init__(self, recording: ReplayRecording, options: ReplayOptions) -> None:
        """`recording` is shared by the replays of one transcript (the variants replay it
        again: the recording is simulated once)."""
        table = options.model_table or load_model_table()
        self.notes: list[str] = []
        # A recorded model the table lacks gets its provider's figures under its own name
        # (an OpenAI rollout is never priced as a Claude model), added to this replay's table.
        recorded, how, notes = resolve_recorded_model(
            table, recording.model, provider=as_provider(recording.provider)
        )
        self.model_assumed = how == "assumed"
        if self.model_assumed:
            table = table.with_model(recorded)
            if options.model is None:
                self.notes.extend(notes)
        self.table = table
        self.model_name = options.model or recorded.name
        self.model = table.get(self.model_name)
        self.recorded_model: ModelInfo = recorded if recording.model else self.model
        self.recorded_comparable = self.recorded_model.provider == self.model.provider
        if not self.recorded_comparable:
            self.notes.append(
                f"the session was recorded on {self.recorded_model.name} "
                f"({self.recorded_model.provider}); replayed on {self.model.name} "
                f"({self.model.provider}), whose cache and prices differ: the recorded cost is "
                f"priced at {self.recorded_model.name} and not comparable with ours"
            )
        self.unpriced_calls = 0
        self.script: ReplayScript = recording.script
        self.future = recording.future  # what the recording did next, for continuation
        # The simulator checks itself against the recording on the recording's own model.
        fidelity_model = self.model if self.recorded_comparable else self.recorded_model
        self.fidelity = recording.fidelity(fidelity_model)
        if self.fidelity.untimed_calls:
            self.notes.append(
                f"{_calls(self.fidelity.untimed_calls, 'recorded call')} without a timestamp: "
                "each taken to follow the call before it at once, so no cache expires "
                "between them"
            )
        self.prefix = OpaquePrefix.from_fidelity(self.fidelity)
        self.ttl = _recording_ttl(self.fidelity)
        self.policy = options.policy or Policy.from_env()
        window = options.window or self._reported_window(recording) or self.model.context_window
        self.window = window
        self.thresholds = compute_thresholds(self.model.with_window(window), self.policy)
        room = self.thresholds.autocompact - self.prefix.tokens
        if room < self.policy.compaction_room_needed():
            what = (
                f"the recorded session's system prompt and tools (or context it did not "
                f"write down) take about {self.prefix.tokens:,} tokens of the "
                f"{self.thresholds.autocompact:,} a {window:,}-token window holds before "
                f"compacting, leaving {max(room, 0):,} (a summary and one more turn need "
                f"{MIN_COMPACTION_ROOM:,})"
            )
            if options.window is not None:
                raise ConfigError(
                    f"{what}: no compaction can make room, every call would compact; use a "
                    "larger --window"
                )
            self.notes.append(f"{what}: there is nothing our policy could compact")
            self.policy = self.policy.with_changes(auto_compact_enabled=False)
        times = self.script.request_times
        start = times[0] if times else 0.0
        # Each recorded call is planned and priced with its own model when the table knows it;
        # `options.model` replaces the session's main model only.
        self.call_models: dict[str, ModelInfo] = {}
        replaced = recording.model if options.model is not None else None
        for name in recording.models:
            info = table.find(name)
            # A dated id of the main model (`claude-sonnet-4-5-20250929`) is the main model: its
            # requests carry the main name, the one the warm prefix is primed under.
            if info is not None and info.name != self.model.name and name != replaced:
                self.call_models[name] = info
        self.models_called = recording.models
        self.billed = recording.billed
        self.billed_calls = recording.billed_calls
        self.not_replayed: dict[str, int] = {}
        self.not_replayed_costs: list[tuple[str, float, float | None]] = []
        self.settings = ReplaySettings(
            model=self.model,
            model_name=self.model_name,
            prefix=self.prefix,
            ttl=self.ttl,
            context_window=window,
            threshold=self.thresholds.autocompact,
            start_time=start,
            call_models=self.call_models,
        )
        if options.summarizer is None:
            from unbounded.providers.extractive import ExtractiveSummarizer

            summarizer: Provider = ExtractiveSummarizer()
        else:
            summarizer = options.summarizer
        self.summarizer = RecordingProvider(summarizer)
        self.clock = ReplayClock(start)
        self.log = _EventLog()
        extensions: list[Extension] = []
        if options.session_memory:
            from unbounded.compaction.memory_updaters import OfflineNotesUpdater
            from unbounded.extensions.session_memory import SessionMemory

            extensions.append(SessionMemory(OfflineNotesUpdater(), background=False))
        self.session = Session(
            SessionConfig(
                model=self.model_name,
                system=self.prefix.system_blocks(),
                system_tokens=self.prefix.tokens,
                # The recorded tools are inside the opaque prefix; this stand-in says tools
                # are in use, so requests offer `recall` and are priced with its schema.
                tools=[RECORDED_TOOLS] if self.policy.recall_enabled else [],
                context_window=window,
                validate_requests=False,
            ),
            store=ReplayStore(),
            policy=self.policy,
            summarizer=self.summarizer,
            model_table=table,
            events=self.log,
            rehydrate_from="transcript",
            ttl_eligible=self.ttl == "1h",
            clock=self.clock,
            extensions=extensions,
        )
        # Each compaction is scored on the stretch it closed, kept as the boundary came.
        self.session.transcript.keep_stretches()
        # A replay only ever reads back what its compactions closed: older entries go to disk.
        self.session.transcript.spill_history()
        # Primed with the tools of our first request: recall joins later (Session.offers_recall).
        self.simulator = self.settings.simulator(self.session.offered_tools())
        self.ours = StrategyRun("unbounded")
        shared = History(self.prefix.scale)  # the recorded history, fed once for them all
        self.baselines: list[Baseline] = (
            [*make_baselines(self.settings, shared), *native_strategies(self.settings, shared)]
            if options.baselines
            else []
        )
        self.source = options.source or recording.name or "session"
        self.points = CallSeries()
        self.timeline: list[TimelineEvent] = []
        self.records: list[CompactionRecord] = []
        self.retention_summary = RetentionTally()
        self.retention_full = RetentionTally()
        self.memory_updates = 0
        self.cache_breaks = 0
        self.invalid = 0
        self.recorded_total: float | None = 0.0 if self.script.has_usage else None
        self.refetch = RefetchCounter()
        self.validator = RequestValidator()  # each message checked once, not once per call
        self.receipts: list[ReceiptLine] = []
        self.session.background.assumed_latency = timedelta(seconds=options.summary_seconds)
        self.idle = options.idle_compaction
        self.stalls = 0
        self.background_calls = 0
        self.idle_compactions = 0
        self.previous_time: float | None = None

    def _recorded_pricing(self, recorded_model: str | None) -> ModelInfo:
        """The model whose prices a recorded call's usage is priced at (module docstring):
        the call's own model when the replay plans it apart, else the replayed model when
        the recording is comparable, else the recorded model's own prices."""
        if recorded_model and recorded_model in self.call_models:
            return self.call_models[recorded_model]
        if self.recorded_comparable:
            return self.model
        own = self.table.find(recorded_model) if recorded_model else None
        return own or self.recorded_model

    def _price_calls_not_replayed(self) -> None:
        """Price the billed calls the replay does not follow, and say what they are.

        Calls on branches the thread does not follow were paid whatever the policy: they go
        into the recorded cost and, as a fixed cost, into every strategy. The agent's own side
        calls (Codex's compaction summaries) go into the recorded cost only: our compactions
        are priced as ours. A thread call the script could not replay in order goes into the
        recorded cost only.
        """
        costs: dict[str, float] = {}
        counts: dict[str, int] = {}
        for call in self.billed:  # the recording keeps only the calls its script leaves out
            counts[call.place] = counts.get(call.place, 0) + 1
            cost = _recorded_cost(call.usage, self._recorded_pricing(call.model), self.ttl)
            ours = cost if cost is not None and call.place == "branch" else 0.0
            self.not_replayed_costs.append((call.message_id, ours, cost))
            if cost is None:
                self.unpriced_calls += 1
                continue
            costs[call.place] = costs.get(call.place, 0.0) + cost
            if self.recorded_total is not None:
                self.recorded_total += cost
        self.not_replayed = counts
        fixed = costs.get("branch", 0.0)
        self.ours.fixed_cost_usd = fixed
        for baseline in self.baselines:
            baseline.run.fixed_cost_usd = fixed
        if counts.get("branch"):
            self.notes.append(
                f"not replayed: {_calls(counts['branch'], 'billed call')} on branches the "
                f"thread does not follow (rewound or abandoned work, ${fixed:,.2f}), priced as "
                "recorded in the recorded cost and in every strategy alike"
            )
        if counts.get("side"):
            self.notes.append(
                f"not replayed: {_calls(counts['side'], 'side call')} of the recorded agent "
                f"(its own compaction summaries, ${costs.get('side', 0.0):,.2f}), in the "
                "recorded cost only: our compactions are priced as ours"
            )
        if counts.get("thread"):
            self.notes.append(
                f"not replayed: {_calls(counts['thread'], 'recorded call')} of the thread whose "
                f"lines interleave with another call's (${costs.get('thread', 0.0):,.2f}), in "
                "the recorded cost only"
            )

    def _reported_window(self, recording: ReplayRecording) -> int | None:
        """The window the agent itself reported for the recording's model, if any."""
        reported = recording.reported_window
        if reported is None or self.model_name != recording.model:
            return None
        if reported == self.model.context_window:
            return None
        self.notes.append(
            f"planned for the {reported:,}-token window the session reported for "
            f"{self.model_name} (the model's figures say {self.model.context_window:,}; use "
            "--window to choose)"
        )
        return reported

    async def run(self, progress: Progress | None) -> ReplayReport:
        """Replay every step and report; the session is closed after, on error too."""
        try:
            return await self._run(progress)
        finally:
            # Its spill file goes with the run, not at the next cyclic garbage collection.
            self.session.close()

    async def _run(self, progress: Progress | None) -> ReplayReport:
        steps = self.script.steps
        for number, step in enumerate(steps):
            await self._step(step.before, step.call, step.after)
            if progress is not None:
                progress(number + 1, len(steps))
        self._price_calls_not_replayed()
        if self.unpriced_calls and self.recorded_total is not None:
            self.recorded_total = None
            self.notes.append(
                f"recorded cost not computed: {self.unpriced_calls} recorded calls wrote to a "
                f"1-hour cache, which {self.recorded_model.name} has no price for"
            )
        return ReplayReport(
            source=self.source,
            model=self.model_name,
            context_window=self.window,
            thresholds=self.thresholds,
            summarizer=self.summarizer.name,
            prefix=self.prefix,
            ttl=self.ttl,
            points=self.points,
            timeline=self.timeline,
            compaction_records=self.records,
            ours=replace(self.ours, compactions=len(self.records)),
            baselines={b.name: b.run for b in self.baselines},
            recorded_cost=self.recorded_total,
            fidelity=self.fidelity,
            recorded_model=self.recorded_model.name,
            recorded_comparable=self.recorded_comparable,
            recorded_calls=self.billed_calls,
            model_assumed=self.model_assumed,
            not_replayed=self.not_replayed,
            not_replayed_costs=self.not_replayed_costs,
            microcompacts=self.session.micro.stats.microcompactions,
            cache_breaks=self.cache_breaks,
            invalid_requests=self.invalid,
            retention_summary=self.retention_summary,
            retention_full=self.retention_full,
            notes=self.notes,
            session_memory_updates=self.memory_updates,
            models=self.models_called,
            recall=self.refetch.finish(self.session),
            receipts=self.receipts,
            stalls=self.stalls,
            background=self._background_figures(),
            idle_compactions=self.idle_compactions,
            pauses=self._pauses(),
        )

    def _background_figures(self) -> dict[str, int]:
        background = self.session.background
        return {
            "enabled": int(self.policy.background_summary),
            "started": background.started,
            "swapped": background.swapped,
            "discarded": background.discarded,
            "summary_calls": self.background_calls,
        }

    def _pauses(self) -> dict[str, int]:
        """Recorded pauses between calls over the cache TTL and over an hour."""
        gaps = [after - before for before, after in pairwise(self.script.request_times)]
        return {
            "over_ttl": sum(1 for gap in gaps if gap > ttl_seconds(self.ttl)),
            "over_1h": sum(1 for gap in gaps if gap > ttl_seconds("1h")),
        }

    def _price_summaries(self, at: float) -> list[SimulatedCall]:
        """The summary calls made since the last take, priced at recorded time `at`."""
        scale = self.prefix.scale
        return [
            self.simulator.step(
                at,
                summary_request,
                query_source="compact",
                output_tokens=_summary_output_tokens(self.summarizer, response, scale),
            )
            for summary_request, response in self.summarizer.take()
        ]

    async def _idle_in_pause(
        self, call: RecordedCall, before: Sequence[Entry]
    ) -> tuple[list[SimulatedCall], Sequence[Entry]]:
        """`Session.idle()` in the pause before `call`, when it outlasts the cache TTL: at
        `Policy.idle_compact_at_ttl_share` of the TTL after the call before it, the records
        of `before` written by then appended first. Returns its summary calls, priced, and
        the records of `before` still to append."""
        previous = self.previous_time
        if not self.idle or previous is None:
            return [], before
        ttl = ttl_seconds(self.session.cache_ttls()[0])
        if call.request_time - previous <= ttl:
            return [], before
        at = previous + ttl * self.policy.idle_compact_at_ttl_share
        written = 0
        while written < len(before) and (moment := before[written].time) is not None:
            if moment.timestamp() > at:
                break
            written += 1
        if written:
            self.session.append(list(before[:written]))
        self.clock.set(at)
        result = await self.session.idle()
        if result is not None:
            self.idle_compactions += 1
            self._event(
                TimelineEvent(
                    call.index,
                    at,
                    "idle_compaction",
                    f"idle compaction in a {(call.request_time - previous) / 60:,.0f}-minute "
                    f"pause: {result.pre_tokens:,} tokens summarized before the cache expired",
                )
            )
        return self._price_summaries(at), before[written:]

    def _event(self, event: TimelineEvent) -> None:
        self.timeline.append(event)

    async def _step(
        self, before: Sequence[Entry], call: RecordedCall, after: Sequence[Entry]
    ) -> None:
        session = self.session
        index = call.index
        compactions_from = len(session.entries)  # an idle compaction's boundary included
        idle_calls, rest = await self._idle_in_pause(call, before)
        if rest:
            session.append(list(rest))
        feed_strategies(self.baselines, before)
        messages = session.messages
        if not messages:
            # A sub-agent file can start with the agent's first response: its prompt was
            # never written. A placeholder stands in for it so the request is well formed.
            opening = Entry.user(MISSING_START_TEXT, is_meta=True)
            session.append([opening])
            feed_strategies(self.baselines, [opening])
            self._event(
                TimelineEvent(
                    index,
                    call.request_time,
                    "continuation",
                    "the first recorded call has no prompt in the file: a placeholder was added",
                )
            )
        elif messages[-1]["role"] == "assistant":
            continuation = Entry.user(CONTINUE_PROMPT, is_meta=True)
            session.append([continuation])
            feed_strategies(self.baselines, [continuation])
            self._event(
                TimelineEvent(
                    index,
                    call.request_time,
                    "continuation",
                    "a recorded call follows an assistant message: a meta user line was added",
                )
            )

        self.clock.set(call.request_time)
        self.log.take()  # what came before this call's prepare is not this turn's
        prepared_from = len(session.entries)
        request = await session.prepare()
        side = idle_calls + self._price_summaries(call.request_time)
        summarized = bool(side)
        if session.background.pending:
            # Written now (the offline summarizer takes no time); ready on the recorded clock
            # `summary_seconds` later (`BackgroundSummary.assumed_latency`).
            await session.background.settle()
            background_calls = self._price_summaries(call.request_time)
            self.background_calls += len(background_calls)
            side += background_calls
        self.refetch.observe(session, request, call.content)
        for entry in session.entries[compactions_from:]:
            receipt = Receipt.from_entry(entry) if entry.type == "system" else None
            if receipt is not None:
                self.receipts.append(ReceiptLine.of(index, receipt))
        try:
            self.validator.check(request["messages"])
        except InvalidRequestError as error:
            self.invalid += 1
            self._event(TimelineEvent(index, call.request_time, "invalid_request", str(error)))

        call_model = self.settings.model_for(call)
        if call_model != request.get("model"):
            request = cast(ProviderRequest, {**request, "model": call_model})
        main = self.simulator.step(call.request_time, request, output_tokens=call.output_tokens)
        self.ours.add(main, side, self.window)
        if main.prompt_tokens > self.window:
            self._event(
                TimelineEvent(
                    index,
                    call.request_time,
                    "overflow",
                    f"request of {main.prompt_tokens:,} tokens is over the "
                    f"{self.window:,}-token window",
                )
            )
        compaction = self._compactions(compactions_from, index, call, main, summarized)

        # The response is recorded at its request's start: the cache simulator counts a
        # cache entry's life from the request that used it, and the break detector measures
        # the gap between calls from the time `record` sees.
        session.record(
            {
                "content": list(call.content),
                "usage": dict(main.usage()),
                "model": call_model,
                "id": call.message_id,
                "stop_reason": call.stop_reason,
            }
        )
        if after:
            session.append(list(after))

        baseline_tokens: dict[str, int] = {}
        baseline_cost: dict[str, float] = {}
        if self.baselines:
            response = Entry.assistant(list(call.content), message_id=call.message_id)
            for name, simulated in run_baselines(self.baselines, call).items():
                baseline_tokens[name] = simulated.prompt_tokens
            feed_strategies(self.baselines, [response, *after])
            for baseline in self.baselines:
                baseline_cost[baseline.name] = baseline.run.cost_per_call[-1]

        microcompacted = False
        turn_events = self.log.take()
        if _turn_waited(session.entries[prepared_from:], turn_events):
            self.stalls += 1
        for event in turn_events:
            if isinstance(event, SessionMemoryUpdated):
                self.memory_updates += 1
                continue
            line = _timeline_event(event, index, call.request_time)
            if line is None:
                continue
            if line.kind == "microcompact":
                microcompacted = True
            elif line.kind == "cache_break":
                self.cache_breaks += 1
            self._event(line)

        recorded_cost = _recorded_cost(call.usage, self._recorded_pricing(call.model), self.ttl)
        if call.usage is not None and recorded_cost is None:
            self.unpriced_calls += 1
        if self.recorded_total is not None and recorded_cost is not None:
            self.recorded_total += recorded_cost
        self.points.append(
            CallPoint(
                index=index,
                time=call.request_time,
                context_tokens=main.prompt_tokens,
                cache_read=main.cache_read_input_tokens,
                cache_write=main.cache_creation_input_tokens,
                uncached_input=main.input_tokens,
                output_tokens=main.output_tokens,
                cost=self.ours.cost_per_call[-1],
                recorded_context_tokens=call.recorded_prompt_tokens,
                recorded_cost=recorded_cost,
                baseline_context_tokens=baseline_tokens,
                baseline_cost=baseline_cost,
                compaction=compaction,
                microcompact=microcompacted,
            )
        )
        self.previous_time = call.request_time

    def _compactions(
        self,
        entries_at: int,
        index: int,
        call: RecordedCall,
        main: SimulatedCall,
        summarized: bool,
    ) -> CompactionKind | None:
        """Record the compactions `prepare()` appended (boundaries after `entries_at`), each
        scored on the stretch it closed (`SessionTranscript.take_stretches`), not on the
        whole history."""
        entries = self.session.entries
        closed = self.session.transcript.take_stretches()
        kind: CompactionKind | None = None
        for boundary, before in closed:
            position = _position_of(entries, boundary, entries_at)
            if position is None:
                continue  # appended outside a step's prepare: not one of this call's
            metadata = boundary.compact_metadata
            memory = bool(metadata.get("sessionMemory"))
            written_before = bool(metadata.get(BACKGROUND_FIELD))  # its calls priced then
            kind = "session_memory" if memory or not (summarized or written_before) else "full"
            summary = "\n".join(
                text_of(e.content) for e in entries[position + 1 :] if e.is_compact_summary
            )
            full_text = messages_text(self.session.messages)
            summary_scores = score_text(before, summary)
            full_scores = score_text(before, full_text)
            after = self.future.after(call.first)
            knowable = KnownItems.of_entries(before)
            continuation = {
                context: continuation_scores(knowable, after, TextIndex(text), 30)
                for context, text in (("summary", summary), ("full", full_text))
            }
            self.retention_summary.add(summary_scores)
            self.retention_full.add(full_scores)
            pre = int(boundary.compact_metadata.get("preTokens") or 0)
            record = CompactionRecord(
                call=index,
                kind=kind,
                pre_tokens=pre,
                post_tokens=main.prompt_tokens,
                summary_tokens=rough_token_count(summary),
                summary_scores=summary_scores,
                full_scores=full_scores,
                continuation=continuation,
            )
            self.records.append(record)
            label = (
                f"full compaction (summary call, {self.summarizer.name})"
                if kind == "full"
                else "session-memory compaction (notes, no summary call)"
            )
            self._event(
                TimelineEvent(
                    index,
                    call.request_time,
                    "compaction",
                    f"{label}: {pre:,} -> {main.prompt_tokens:,} tokens "
                    f"(summary {record.summary_tokens:,} tokens)",
                    {"kind": kind, "pre_tokens": pre, "post_tokens": main.prompt_tokens},
                )
            )
        return kind


async def replay_transcript(
    transcript: Transcript | ReplayRecording,
    options: ReplayOptions | None = None,
    *,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay a recorded session through the pipeline and the baselines (module docstring)."""
    chosen = options or ReplayOptions()
    # A recording prepared by the caller lets the loaded transcript go once simulated.
    recording = (
        transcript if isinstance(transcript, ReplayRecording) else ReplayRecording.of(transcript)
    )
    del transcript
    report = await _Replayer(recording, chosen).run(progress)
    # The replayer (its baselines' history, simulators, recall index) is dropped here, before
    # a variant replays the recording again: its memory is reused, not added to.
    if chosen.variants:
        report.variants = await _variants(recording, chosen, report)
    return report


async def _variants(
    recording: ReplayRecording,
    options: ReplayOptions,
    report: ReplayReport,
) -> dict[str, VariantRun]:
    """Our policy again with the background summary on, when this run waited for a summary,
    and with idle compaction, when the recording pauses longer than the cache TTL."""
    policy = options.policy or Policy.from_env()
    plain = replace(options, baselines=False, variants=False)
    chosen: dict[str, ReplayOptions] = {}
    if not policy.background_summary and report.stalls:
        chosen["background_summary"] = replace(
            plain, policy=policy.with_changes(background_summary=True)
        )
    if not options.idle_compaction and report.pauses.get("over_ttl"):
        chosen["idle_compaction"] = replace(plain, policy=policy, idle_compaction=True)
    runs: dict[str, VariantRun] = {}
    for name, variant in chosen.items():
        done = await _Replayer(recording, variant).run(None)
        runs[name] = VariantRun(
            run=done.ours,
            stalls=done.stalls,
            compactions=done.compactions,
            idle_compactions=done.idle_compactions,
            background=done.background,
        )
    return runs


def _position_of(entries: Sequence[Entry], entry: Entry, start: int) -> int | None:
    """Where `entry` (the very object) is in `entries`, looking from `start` on."""
    for position in range(start, len(entries)):
        if entries[position] is entry:
            return position
    return None


def _turn_waited(appended: Sequence[Entry], events: Sequence[Event]) -> bool:
    """The replayed turn waited for a summary at the threshold (a stall), as `SummaryStall`
    counts it: it waited for the background summary, or compacted in the turn with a summary,
    whose stand-in summarizer writes at once where a model takes tens of seconds (so the
    session, seeing no call, reports no `SummaryStall`). A compaction from the notes, a
    background summary swapped in when ready, or one before the threshold (`EarlyCompaction`:
    the cold-resume guard after a pause) is no stall."""
    if any(isinstance(event, SummaryStall) for event in events):
        return True
    if any(isinstance(event, EarlyCompaction) for event in events):
        return False
    for entry in appended:
        metadata = entry.compact_metadata if entry.is_compact_boundary else {}
        if entry.is_compact_boundary and not (
            metadata.get("sessionMemory") or metadata.get(BACKGROUND_FIELD)
        ):
            return True
    return False


def replay_session(
    transcript: Transcript | ReplayRecording,
    options: ReplayOptions | None = None,
    *,
    progress: Progress | None = None,
) -> ReplayReport:
    """`replay_transcript` for blocking code (see `unbounded.blocking`)."""
    report: ReplayReport = run_blocking(replay_transcript(transcript, options, progress=progress))
    return report


def strategy_names() -> tuple[str, ...]:
    """Strategies a report compares, in order: ours, then the baselines."""
    return ("unbounded", *BASELINES, *NATIVE_STRATEGIES)


def cumulative(values: Sequence[float]) -> list[float]:
    """Running sums."""
    total = 0.0
    out: list[float] = []
    for value in values:
        total += value
        out.append(total)
    return out


def point_costs(points: Sequence[CallPoint], strategy: str) -> list[float]:
    """Per-call cost of one strategy (`unbounded`, `recorded` or a baseline name)."""
    if strategy == "unbounded":
        return [p.cost for p in points]
    if strategy == "recorded":
        return [p.recorded_cost or 0.0 for p in points]
    return [p.baseline_cost.get(strategy, 0.0) for p in points]
