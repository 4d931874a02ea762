"""A transcript's context at a glance: size against the thresholds, where the tokens went.

This is the data behind `unbounded inspect` (like Claude Code's `/context`); it computes and
returns, and leaves printing to the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unbounded.catalog import (
    ModelInfo,
    ModelTable,
    as_provider,
    load_model_table,
    resolve_recorded_model,
)
from unbounded.compaction.facts import compaction_points
from unbounded.model.normalize import normalize_messages
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy, Thresholds, compute_thresholds
from unbounded.recall.receipts import Receipt, receipts_in
from unbounded.tokens.accounting import TokenAccounting
from unbounded.tokens.breakdown import Breakdown, ContextBreakdown
from unbounded.tokens.estimate import pre_compaction_tokens


@dataclass(frozen=True, slots=True)
class BoundaryInfo:
    """One compaction found in the transcript."""

    trigger: str | None
    pre_tokens: int | None
    """The boundary's own `preTokens`: the agent's count when it compacted."""
    uuid: str | None
    timestamp: str | None
    line: int | None
    counted_pre_tokens: int | None = None
    """The context it replaced, counted as `compact` and `eval` count it
    (`tokens.estimate.pre_compaction_tokens` of the records since the boundary before)."""


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """What was inspected: where, its format, and what reading it found."""

    path: str | None
    format: str
    records: int
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    models: dict[str, int] = field(default_factory=dict)
    """Recorded calls per model, the main model first (`Transcript.models`)."""
    unknown_record_types: dict[str, int] = field(default_factory=dict)
    """Record types the reader does not know, with their counts (kept, otherwise passed over)."""

    @classmethod
    def of(cls, transcript: Transcript, name: str | None = None) -> SourceSummary:
        """The summary of a loaded transcript (`name` when it has no path, e.g. a database)."""
        return cls(
            path=str(transcript.path) if transcript.path else name,
            format=transcript.format,
            records=transcript.records,
            skipped_lines=transcript.skipped_lines,
            warnings=list(transcript.warnings),
            models=transcript.models(),
            unknown_record_types=transcript.unknown_record_types,
        )


def unknown_records_note(types: dict[str, int]) -> str | None:
    """What inspect says about record types the reader does not know (None when there are
    none): "2 record types this version does not know: permission-mode ×1, last-prompt ×3"."""
    if not types:
        return None
    listed = ", ".join(f"{name} ×{count:,}" for name, count in types.items())
    noun = "record type" if len(types) == 1 else "record types"
    return (
        f"{len(types)} {noun} this version does not know: {listed} (kept and written back "
        "unchanged; otherwise passed over)"
    )


@dataclass(frozen=True, slots=True)
class CallCounts:
    """Billed calls by where they sit (`Transcript.billed_calls`), and inline sub-agents'."""

    thread: int = 0
    branch: int = 0
    """On branches the thread does not follow (rewinds, other sessions): billed, not replayed."""
    side: int = 0
    """The agent's own side calls recorded in the file (Codex's compaction summaries)."""
    subagent: int = 0
    """Inline sub-agents' calls (1.0.x `isSidechain`), counted apart from the agent's."""

    @property
    def billed(self) -> int:
        """Every billed call of the agent: thread, branches and side calls."""
        return self.thread + self.branch + self.side

    @classmethod
    def of(cls, transcript: Transcript) -> CallCounts:
        """The counts of a loaded transcript."""
        places = [call.place for call in transcript.billed_calls()]
        return cls(
            thread=places.count("thread"),
            branch=places.count("branch"),
            side=places.count("side"),
            subagent=len(transcript.subagent_calls()),
        )

    def to_dict(self) -> dict[str, int]:
        """JSON-ready counts."""
        return {
            "on_thread": self.thread,
            "on_branches": self.branch,
            "side_calls": self.side,
            "subagent_calls": self.subagent,
        }


@dataclass(slots=True)
class InspectReport:
    """Everything `unbounded inspect` shows."""

    source: SourceSummary
    model: ModelInfo
    model_source: str
    thresholds: Thresholds
    messages: int
    api_calls: int
    """Every billed call of the agent (`Transcript.billed_calls`), whichever branch it is on."""
    context_tokens: int
    anchored_tokens: int
    estimated_tokens: int
    boundaries: list[BoundaryInfo]
    accounting: TokenAccounting
    """Every category by length / 4 (tools by name, duplicate reads)."""
    breakdown: Breakdown
    """The context size in rows that add up to it, system prompt + tools first."""
    sidechains: int
    notes: list[str] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    """What each compaction and microcompaction took out (`unbounded.recall.receipts`)."""
    calls: CallCounts = field(default_factory=CallCounts)
    """`api_calls` by where the calls sit."""

    @property
    def percent_left(self) -> int:
        """Percent of the limit still free."""
        return self.thresholds.percent_left(self.context_tokens)

    @property
    def level(self) -> str:
        """ok, warning, error, autocompact or blocking."""
        return self.thresholds.level(self.context_tokens)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `unbounded inspect --json` prints."""
        source = self.source
        return {
            "path": source.path,
            "format": source.format,
            "records": source.records,
            "skipped_lines": source.skipped_lines,
            "warnings": list(source.warnings) + list(self.notes),
            "model": self.model.name,
            "model_source": self.model_source,
            "models": dict(source.models),
            "context_window": self.thresholds.context_window,
            "messages": self.messages,
            "api_calls": self.api_calls,
            "api_calls_by_place": self.calls.to_dict(),
            "sidechains": self.sidechains,
            "unknown_record_types": dict(source.unknown_record_types),
            "context_tokens": self.context_tokens,
            "context_tokens_reported": self.anchored_tokens,
            "context_tokens_estimated": self.estimated_tokens,
            "threshold": {
                "effective_window": self.thresholds.effective_window,
                "autocompact": self.thresholds.autocompact,
                "warning": self.thresholds.warning,
                "error": self.thresholds.error,
                "blocking": self.thresholds.blocking,
            },
            "percent_left": self.percent_left,
            "level": self.level,
            "boundaries": [
                {
                    "trigger": b.trigger,
                    "pre_tokens": b.pre_tokens,
                    "counted_pre_tokens": b.counted_pre_tokens,
                    "uuid": b.uuid,
                    "timestamp": b.timestamp,
                    "line": b.line,
                }
                for b in self.boundaries
            ],
            "accounting": self.accounting.to_dict(),
            "receipts": [receipt.to_dict() for receipt in self.receipts],
            "breakdown": self.breakdown.to_dict(),
        }


def resolve_model(
    transcript: Transcript, requested: str | None, table: ModelTable
) -> tuple[ModelInfo, str, list[str]]:
    """The model to plan for: the one asked for, else the transcript's (assumed from its
    provider when the table lacks it), else the default."""
    return resolve_model_name(transcript.model, requested, table, provider=transcript.provider)


def resolve_model_name(
    recorded: str | None,
    requested: str | None,
    table: ModelTable,
    *,
    provider: str | None = None,
) -> tuple[ModelInfo, str, list[str]]:
    """The model to plan for: the one asked for (`option`), else the recorded one
    (`transcript`, or `assumed` when the table lacks it: `resolve_recorded_model`), else
    the default."""
    if requested:
        return table.get(requested), "option", []
    return resolve_recorded_model(table, recorded, provider=as_provider(provider))


def inspect_transcript(
    transcript: Transcript,
    *,
    model: str | None = None,
    window: int | None = None,
    policy: Policy | None = None,
    table: ModelTable | None = None,
    name: str | None = None,
) -> InspectReport:
    """Measure a transcript's current context against the thresholds of its model.

    `name` is shown as its path when the transcript has none (a database session).
    """
    models = table or load_model_table()
    info, source, notes = resolve_model(transcript, model, models)
    unknown = unknown_records_note(transcript.unknown_record_types)
    if unknown is not None:
        notes.append(unknown)
    reported = transcript.reported_window
    if (
        window is None
        and source in ("transcript", "assumed")
        and reported not in (None, info.context_window)
    ):
        window = reported
        notes.append(
            f"window {reported:,} tokens, as the session reported for {transcript.model} (the "
            f"model's figures say {info.context_window:,}; use --window to choose)"
        )
    if window is not None:
        info = info.with_window(window)
    thresholds = compute_thresholds(info, policy or Policy.from_env())
    view = transcript.view_entries()
    tally = ContextBreakdown(view)
    counter = tally.counter
    main = transcript.main_thread()
    boundaries = [
        BoundaryInfo(
            trigger=(b := main[point.boundary_index]).compact_metadata.get("trigger"),
            pre_tokens=b.compact_metadata.get("preTokens"),
            uuid=b.uuid,
            timestamp=b.timestamp,
            line=b.line,
            counted_pre_tokens=pre_compaction_tokens(point.before),
        )
        for point in compaction_points(main)
    ]
    return InspectReport(
        source=SourceSummary.of(transcript, name),
        model=info,
        model_source=source,
        thresholds=thresholds,
        messages=len(normalize_messages(view)),
        api_calls=len(transcript.billed_calls()),
        context_tokens=counter.total,
        anchored_tokens=counter.anchor_tokens,
        estimated_tokens=counter.estimated_tokens,
        boundaries=boundaries,
        accounting=tally.accounting,
        breakdown=tally.breakdown(),
        sidechains=len(transcript.sidechains()),
        notes=notes,
        receipts=receipts_in(transcript.main_thread()),
        calls=CallCounts.of(transcript),
    )
