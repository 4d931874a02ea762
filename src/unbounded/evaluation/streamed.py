"""`unbounded eval` on a Claude Code file of any size, in bounded memory.

The file is read as `unbounded inspect` reads it (`unbounded.inspection_stream`): pass 1
keeps a small summary per record, the main thread is chosen from the summaries, and the
records are read again by offset when they are needed. The evaluation points
(`evaluate.evaluation_points`) are then produced one at a time, each holding only what it
needs: the records since the boundary before it (what a summarizer compacts there) and
those up to the next boundary (what the agent did next). So at most two segments between
compact boundaries are in memory at once, whatever the length of the file; a file that
never compacted has one point, its whole main thread.

The points and the figures are those of `evaluate_transcripts` on the loaded transcript:
the same records, boundaries, recorded summaries, billed calls and model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from unbounded.compaction.facts import text_of
from unbounded.evaluation.continuation import is_agent_record
from unbounded.evaluation.evaluate import (
    EvalReport,
    EvaluationPoint,
    evaluate_session,
    int_or_none,
)
from unbounded.inspection_stream import (
    FileScan,
    RecordInfo,
    billed_call_counts,
    file_order_main_thread,
    read_records,
    rebuilt_main_thread,
    recorded_models,
    scan_records,
)
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.providers.base import Provider


@dataclass(slots=True)
class StreamedSession:
    """A Claude Code file read for evaluation: what pass 1 learned, and its points on demand."""

    scan: FileScan
    main: Sequence[int]
    """The main thread, as indexes into `scan.records` (file order)."""
    warnings: list[str] = field(default_factory=list)
    """What reading and choosing the thread noticed."""

    @property
    def model(self) -> str | None:
        """The main model (`Transcript.model`): the one with the most recorded calls."""
        return next(iter(recorded_models(self.scan.records, self.main)), None)

    @property
    def billed_calls(self) -> int:
        """`len(Transcript.billed_calls())`, from the record summaries."""
        return billed_call_counts(self.scan.records, self.main).billed

    @property
    def skipped_lines(self) -> int:
        """Invalid lines left out (`--skip-invalid`)."""
        return self.scan.report.skipped_lines

    def boundary_positions(self) -> list[int]:
        """Positions in `main` of the compact boundaries."""
        records = self.scan.records
        return [p for p, i in enumerate(self.main) if records[i].is_compact_boundary]

    def points(self) -> Iterator[EvaluationPoint]:
        """The evaluation points, read from the file one at a time (see the module docstring).

        A point's records are read when it is produced and dropped with it; the generator
        itself keeps the segment the next point compacts.
        """
        positions = self.boundary_positions()
        if not positions:
            yield EvaluationPoint("end", self._read(0, len(self.main)), "", [])
            return
        ends = [*positions[1:], len(self.main)]
        before = self._read(0, positions[0])
        for number, (position, end) in enumerate(zip(positions, ends, strict=True), 1):
            segment = self._read(position, end)  # the boundary, and what followed up to the next
            metadata = self.scan.boundaries.get(self.main[position], {})
            yield EvaluationPoint(
                label=f"boundary {number}",
                before=before,
                recorded_summary=self._recorded_summary(position),
                after=[entry for entry in segment[1:] if is_agent_record(entry)],
                recorded_pre_tokens=int_or_none(metadata.get("preTokens")),
            )
            before = segment

    def _read(self, start: int, end: int) -> list[Entry]:
        records = self.scan.records
        return list(read_records(self.scan.path, [records[i] for i in self.main[start:end]]))

    def _recorded_summary(self, position: int) -> str:
        """The text of the summary messages right after the boundary at `position`, up to the
        first other user or assistant record (as `compaction_points` finds them)."""
        records = self.scan.records
        summaries: list[RecordInfo] = []
        for index in self.main[position + 1 :]:
            record = records[index]
            if record.is_compact_summary:
                summaries.append(record)
            elif record.type in ("user", "assistant"):
                break
        entries = read_records(self.scan.path, summaries)
        return "\n".join(text_of(entry.content) for entry in entries)


def open_session(
    path: str | Path, *, skip_invalid: bool = False, file_order: bool = False
) -> StreamedSession:
    """Pass 1 over a Claude Code file and its main thread chosen (`--file-order`: in file
    order), no message content held."""
    scan = scan_records(path, skip_invalid=skip_invalid)
    select = file_order_main_thread if file_order else rebuilt_main_thread
    selected = select(scan.records, scan.summary_leaves)
    return StreamedSession(scan, selected.indexes, [*scan.report.warnings, *selected.warnings])


async def evaluate_stream(
    session: StreamedSession,
    summarizers: Sequence[Provider],
    *,
    name: str,
    model: str | None = None,
    policy: Policy | None = None,
    keep_entries: bool = False,
) -> EvalReport:
    """`evaluate_transcripts` of one opened file (`open_session`), one point at a time.
    `keep_entries` keeps each point's records on the report (the probe exam reads them),
    which gives up the memory bound."""
    from unbounded.catalog import DEFAULT_MODEL

    report = EvalReport(summarizers=[provider.name for provider in summarizers])
    report.sessions.append(name)
    report.calls[name] = session.billed_calls
    await evaluate_session(
        report,
        name,
        session.points(),
        summarizers,
        model=model or session.model or DEFAULT_MODEL,
        policy=policy,
        keep_entries=keep_entries,
    )
    return report
