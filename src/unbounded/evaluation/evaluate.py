"""`unbounded eval`: what a compaction keeps, measured deterministically (../shared/RETENTION.md).

For each transcript, the compaction point is each recorded `compact_boundary` (the facts come
from the main-thread records before it, from the previous boundary on, and the recorded
summary is the `isCompactSummary` message after it), or the end of the transcript when it has
none. At each point, each of our summarizers compacts exactly those records with
`compact_conversation` (re-injected attachments and the facts ledger included), and is scored
on its summary alone and on the full context after the boundary; the recorded summary is
scored on its text.

`pre_tokens` is the context the compaction replaces, counted as `compact` and `inspect` count
it (`tokens.estimate.pre_compaction_tokens`: the last recorded usage, which covers the system
prompt and tools, plus the estimate of what came after); `recorded_pre_tokens` is the
boundary's own `preTokens`, Claude Code's count at that moment. `post_tokens` is the context
right after, counted the same way: no response has reported usage for it yet, so it is the
padded estimate of the messages, as in `compact`. Compression is `1 - post / pre`.

Each session also reports its billed calls (`Transcript.billed_calls`), the figure `inspect`
and `replay` report.

The facts and the scoring are `unbounded.compaction.facts`; nothing here re-implements them.

At a recorded boundary, the turns the agent took after it also give the continuation
diagnostics (`unbounded.evaluation.continuation`): of the files, code tokens and commands
the agent went on to use and could have known before, what each compacted context holds
(recall) and how much of what it lists went unused (precision), for the next 10 and 30
turns and all turns up to the next compaction. These deterministic figures are diagnostics;
whether an agent can act on a hand-over is what the probe exam (`--llm`) measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.blocking import run_blocking
from unbounded.catalog import DEFAULT_MODEL
from unbounded.compaction.conversation import CacheSafeParams, compact_conversation
from unbounded.compaction.facts import compaction_points, extract_facts
from unbounded.compaction.glue import default_facts_ledger, rehydrator_for
from unbounded.evaluation.continuation import (
    HORIZONS,
    KINDS,
    Counts,
    KnownItems,
    TextIndex,
    after_point,
    continuation_scores,
    horizon_label,
)
from unbounded.evaluation.retention import (
    FACT_TYPES,
    RetentionTally,
    Scores,
    fraction,
    messages_text,
    score_text,
)
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.providers.base import Provider
from unbounded.tokens.estimate import (
    estimate_messages_tokens,
    pre_compaction_tokens,
    rough_token_count,
)

CONTINUATION_SOURCES = ("ours_summary", "ours_full", "recorded")
HEADLINE_HORIZON = "next_30"
"""The horizon `continuation` reports; every horizon is in `continuation_by_horizon`."""
Continuation = dict[str, dict[str, dict[str, Counts]]]
"""horizon -> source -> kind -> counts (held, used, listed)."""


@dataclass(frozen=True, slots=True)
class SummarizerResult:
    """One summarizer at one compaction point."""

    summary_scores: Scores
    full_scores: Scores
    post_tokens: int
    summary_text: str
    post_messages: list[MessageParam]


@dataclass(frozen=True, slots=True)
class PointEvaluation:
    """One compaction point of one transcript."""

    session: str
    point: str
    """`boundary N` (1-based) or `end`."""
    before: list[Entry]
    facts: dict[str, int]
    pre_tokens: int
    """The context the compaction replaces (`pre_compaction_tokens`, as compact reports it)."""
    ours: dict[str, SummarizerResult]
    recorded_scores: Scores | None
    recorded_summary: str
    continuation: Continuation = field(default_factory=dict)
    """For the primary summarizer; empty at a point with no recorded turns after it."""
    after: list[Entry] = field(default_factory=list)
    """What the agent did after the point, up to the next one (none at the end)."""
    recorded_pre_tokens: int | None = None
    """The recorded boundary's `preTokens` (None at the end of a transcript)."""

    @property
    def recorded_post_tokens(self) -> int | None:
        """Tokens of the recorded summary message, counted like `pre_tokens`."""
        if not self.recorded_summary:
            return None
        return estimate_messages_tokens([{"role": "user", "content": self.recorded_summary}])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, (kept, total) pairs per fact type."""
        return {
            "point": self.point,
            "facts": self.facts,
            "pre_tokens": self.pre_tokens,
            "recorded_pre_tokens": self.recorded_pre_tokens,
            "ours": {
                name: {
                    "post_tokens": result.post_tokens,
                    "summary_tokens": rough_token_count(result.summary_text),
                    "compression": _compression(self.pre_tokens, result.post_tokens),
                    "summary": {k: list(v) for k, v in result.summary_scores.items()},
                    "full": {k: list(v) for k, v in result.full_scores.items()},
                }
                for name, result in self.ours.items()
            },
            "recorded": None
            if self.recorded_scores is None
            else {
                "post_tokens": self.recorded_post_tokens,
                "summary_tokens": rough_token_count(self.recorded_summary),
                "compression": _compression(self.pre_tokens, self.recorded_post_tokens or 0),
                "summary": {k: list(v) for k, v in self.recorded_scores.items()},
            },
            "continuation": {
                horizon: {
                    source: {kind: counts.to_list() for kind, counts in kinds.items()}
                    for source, kinds in sources.items()
                }
                for horizon, sources in self.continuation.items()
            },
        }


def _compression(pre: int, post: int) -> float | None:
    return round(1 - post / pre, 4) if pre else None


@dataclass(slots=True, repr=False)
class EvalReport:
    """Retention and compression over several transcripts."""

    summarizers: list[str]
    points: list[PointEvaluation] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    llm: dict[str, Any] | None = None
    calls: dict[str, int] = field(default_factory=dict)
    """Billed calls of each session (`Transcript.billed_calls`), as inspect and replay count."""

    def __repr__(self) -> str:
        """A short form. The points' summaries run to megabytes on a long file, and
        `asyncio.run` (3.11) formats the finished task's result when it puts the SIGINT
        handler back: a full repr was an 80 MB string at the end of a 1 GiB `eval`."""
        return (
            f"EvalReport(summarizers={self.summarizers!r}, sessions={len(self.sessions)}, "
            f"points={len(self.points)})"
        )

    def tally(self, summarizer: str, kind: str) -> RetentionTally:
        """Summed scores of one summarizer (`summary` or `full`)."""
        tally = RetentionTally()
        for point in self.points:
            result = point.ours.get(summarizer)
            if result is not None:
                tally.add(result.summary_scores if kind == "summary" else result.full_scores)
        return tally

    def recorded_tally(self) -> RetentionTally:
        """Summed scores of the recorded summaries (points that have one)."""
        tally = RetentionTally()
        for point in self.points:
            if point.recorded_scores is not None:
                tally.add(point.recorded_scores)
        return tally

    def compression(self, summarizer: str) -> float | None:
        """1 - sum(post) / sum(pre) over the points, for one of our summarizers."""
        pre = sum(p.pre_tokens for p in self.points if summarizer in p.ours)
        post = sum(p.ours[summarizer].post_tokens for p in self.points if summarizer in p.ours)
        return _compression(pre, post)

    def recorded_compression(self) -> float | None:
        """The same for the recorded summaries (summary message only)."""
        with_summary = [p for p in self.points if p.recorded_post_tokens is not None]
        pre = sum(p.pre_tokens for p in with_summary)
        post = sum(p.recorded_post_tokens or 0 for p in with_summary)
        return _compression(pre, post)

    def continuation(self, horizon: str) -> dict[str, dict[str, dict[str, float | None]]]:
        """kind -> source -> recall, precision and score, from the counts of the points
        with turns after them added together."""
        sums: dict[str, dict[str, Counts]] = {
            kind: dict.fromkeys(CONTINUATION_SOURCES, Counts()) for kind in KINDS
        }
        for point in self.points:
            for source, kinds in point.continuation.get(horizon, {}).items():
                for kind, counts in kinds.items():
                    sums[kind][source] = sums[kind][source] + counts
        return {
            kind: {source: counts.figures() for source, counts in sources.items()}
            for kind, sources in sums.items()
        }

    def to_dict(self) -> dict[str, Any]:
        """The `eval --json` object."""
        primary = self.summarizers[0] if self.summarizers else "extractive"
        recorded = self.recorded_tally()
        data: dict[str, Any] = {
            "sessions": len(self.sessions),
            "points": len(self.points),
            "summarizer": primary,
            "recorded_points": recorded.points,
        }
        summary, full = self.tally(primary, "summary"), self.tally(primary, "full")
        for name in FACT_TYPES:
            data[name] = {
                "ours_summary": fraction(summary.scores.get(name, (0, 0))),
                "ours_full": fraction(full.scores.get(name, (0, 0))),
                "recorded": fraction(recorded.scores.get(name, (0, 0)))
                if recorded.points
                else None,
                "facts": summary.scores.get(name, (0, 0))[1],
            }
        data["continuation_points"] = sum(1 for p in self.points if p.continuation)
        data["continuation"] = self.continuation(HEADLINE_HORIZON)
        data["continuation_by_horizon"] = {
            horizon_label(h): self.continuation(horizon_label(h)) for h in HORIZONS
        }
        data["compression"] = self.compression(primary)
        data["recorded_compression"] = self.recorded_compression()
        data["by_summarizer"] = {
            name: {
                "summary": self.tally(name, "summary").fractions(),
                "full": self.tally(name, "full").fractions(),
                "compression": self.compression(name),
            }
            for name in self.summarizers
        }
        data["per_session"] = [
            {
                "session": session,
                "calls": self.calls.get(session, 0),
                "points": [p.to_dict() for p in self.points if p.session == session],
            }
            for session in self.sessions
        ]
        if self.llm is not None:
            data["llm"] = self.llm
        return data


@dataclass(frozen=True, slots=True)
class EvaluationPoint:
    """Where a transcript is evaluated: a recorded boundary, or its end."""

    label: str
    """`boundary N` (1-based) or `end`."""
    before: list[Entry]
    """The records a summarizer compacts there."""
    recorded_summary: str
    after: list[Entry]
    """What the agent did next (none at the end)."""
    recorded_pre_tokens: int | None = None
    """The boundary's `preTokens` (None at the end)."""


def evaluation_points(transcript: Transcript) -> list[EvaluationPoint]:
    """The compaction points of a transcript (see the module docstring)."""
    main = transcript.main_thread()
    points = compaction_points(main)
    if points:
        return [
            EvaluationPoint(
                label=f"boundary {number}",
                before=point.before,
                recorded_summary=point.recorded_summary,
                after=after_point(main, point.boundary_index),
                recorded_pre_tokens=int_or_none(
                    main[point.boundary_index].compact_metadata.get("preTokens")
                ),
            )
            for number, point in enumerate(points, 1)
        ]
    return [EvaluationPoint("end", messages_after_compact_boundary(main), "", [])]


def int_or_none(value: Any) -> int | None:
    """`value` when it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def point_continuation(
    before: Sequence[Entry],
    after: Sequence[Entry],
    ours: SummarizerResult | None,
    recorded_summary: str,
) -> Continuation:
    """The continuation measure at one point for each horizon and compacted context."""
    if not after:
        return {}
    knowable = KnownItems.of_entries(before)
    contexts: dict[str, TextIndex] = {}
    if ours is not None:
        contexts["ours_summary"] = TextIndex(ours.summary_text)
        contexts["ours_full"] = TextIndex(messages_text(ours.post_messages))
    if recorded_summary:
        contexts["recorded"] = TextIndex(recorded_summary)
    return {
        horizon_label(horizon): {
            source: continuation_scores(knowable, after, index, horizon)
            for source, index in contexts.items()
        }
        for horizon in HORIZONS
    }


async def evaluate_point(
    before: Sequence[Entry],
    summarizers: Sequence[Provider],
    *,
    model: str,
    policy: Policy | None = None,
) -> tuple[int, dict[str, SummarizerResult]]:
    """Compact `before` with each summarizer and score the result; (pre tokens, results)."""
    entries = list(before)
    pre = pre_compaction_tokens(entries)
    results: dict[str, SummarizerResult] = {}
    for provider in summarizers:
        result = await compact_conversation(
            entries,
            provider,
            params=CacheSafeParams(model=model),
            trigger="manual",
            rehydrate=rehydrator_for(entries, policy=policy),
            facts_ledger=default_facts_ledger,
            policy=policy or Policy(),
        )
        post_messages = normalize_messages(result.view())
        results[provider.name] = SummarizerResult(
            summary_scores=score_text(entries, result.summary_text),
            full_scores=score_text(entries, messages_text(post_messages)),
            post_tokens=result.post_tokens,
            summary_text=result.summary_text,
            post_messages=post_messages,
        )
    return pre, results


async def evaluate_transcripts(
    transcripts: Sequence[tuple[str, Transcript]],
    summarizers: Sequence[Provider],
    *,
    model: str | None = None,
    policy: Policy | None = None,
) -> EvalReport:
    """Retention and compression of our summarizers and the recorded summaries."""
    report = EvalReport(summarizers=[provider.name for provider in summarizers])
    for name, transcript in transcripts:
        report.sessions.append(name)
        report.calls[name] = len(transcript.billed_calls())
        await evaluate_session(
            report,
            name,
            evaluation_points(transcript),
            summarizers,
            model=model or transcript.model or DEFAULT_MODEL,
            policy=policy,
        )
    return report


async def evaluate_session(
    report: EvalReport,
    name: str,
    points: Iterable[EvaluationPoint],
    summarizers: Sequence[Provider],
    *,
    model: str,
    policy: Policy | None = None,
    keep_entries: bool = True,
) -> None:
    """Evaluate one session's points, in order, adding them to `report`.

    Without `keep_entries` the report keeps no records (`PointEvaluation.before` and `after`
    are empty): a point's records are dropped once it is scored, so a lazy `points` (a
    streamed file) is evaluated in the memory of one point.
    """
    for point in points:
        before, recorded, after = point.before, point.recorded_summary, point.after
        if any(e.type in ("user", "assistant") for e in before):
            pre, results = await evaluate_point(before, summarizers, model=model, policy=policy)
            counts = extract_facts(before).counts()
            report.points.append(
                PointEvaluation(
                    session=name,
                    point=point.label,
                    before=list(before) if keep_entries else [],
                    facts={
                        "user_prompts": counts["user_prompts"],
                        "modified_files": counts["files_modified"],
                        "read_files": counts["files_read"],
                        "errors": counts["errors"],
                        "commands": counts["commands"],
                    },
                    pre_tokens=pre,
                    ours=results,
                    recorded_scores=score_text(before, recorded) if recorded else None,
                    recorded_summary=recorded,
                    continuation=point_continuation(
                        before, after, results.get(report.summarizers[0]), recorded
                    ),
                    after=list(after) if keep_entries else [],
                    recorded_pre_tokens=point.recorded_pre_tokens,
                )
            )
        # Dropped before the next point is read: a lazy source then holds one point at a time.
        del point, before, after


def evaluate_sync(
    transcripts: Sequence[tuple[str, Transcript]],
    summarizers: Sequence[Provider],
    *,
    model: str | None = None,
    policy: Policy | None = None,
) -> EvalReport:
    """`evaluate_transcripts` for blocking code (see `unbounded.blocking`)."""
    report: EvalReport = run_blocking(
        evaluate_transcripts(transcripts, summarizers, model=model, policy=policy)
    )
    return report
