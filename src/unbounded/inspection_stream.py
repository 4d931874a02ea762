"""`unbounded inspect` on a Claude Code file of any size, in bounded memory.

Two passes over the file, neither holding message contents:

1. `scan_records` streams every line and keeps a small summary per record (a row of a
   `RecordTable`, `unbounded.record_table`, read through `RecordInfo`): where it is (line,
   byte offset), its type, uuid and parent, flags, response id, model and usage total. A
   boundary's metadata is kept too (there are few).
2. The main thread is chosen from those summaries by a `ThreadSelector`: by default
   `rebuilt_main_thread` (`unbounded.inspection_thread`), the rules of
   `unbounded.model.thread.rebuild_thread` (what `Transcript.main_thread` does) on the
   table's rows; or `file_order_main_thread` (`--file-order`). The view (the main thread
   from its last compact boundary on) is then read again record by record, by offset, and
   counted in one pass (`tally_view`): the anchored token count, the token breakdown, and
   the API messages (the normalizer holds the view's messages while they are counted).

A summary keeps what thread rebuilding reads: the links, the session id, the tool ids, how a
user message classifies, and a 64-bit digest of the content and time (to tell repeated
records apart) instead of the content.

A compact boundary's `counted_pre_tokens` reads the records since the boundary before it
again, one view at a time.

Memory: O(records) small summaries (about 130 bytes each, kept by column) + the longest
line + what rebuilding the thread holds while it runs + the current view's API messages:
what the model would be sent next, which a session that compacts keeps within its context
window (a file that never compacted has its whole main thread as view).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from unbounded.catalog import ModelTable, load_model_table
from unbounded.errors import TranscriptError
from unbounded.inspection import (
    BoundaryInfo,
    CallCounts,
    InspectReport,
    SourceSummary,
    resolve_model_name,
    unknown_records_note,
)
from unbounded.inspection_thread import (
    SelectedThread,
    is_subagent_file,
    rebuilt_branch,
    rebuilt_main_thread,
)
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.transcript import calls_per_model
from unbounded.policy import Policy, compute_thresholds
from unbounded.recall.receipts import Receipt
from unbounded.record_table import RecordInfo, RecordTable, UuidKey
from unbounded.tokens.breakdown import ContextBreakdown
from unbounded.tokens.estimate import pre_compaction_tokens
from unbounded.transcripts.claude_code import FORMAT, RECORD_TYPES, validate_record
from unbounded.transcripts.importing import UNKNOWN_RECORDS, count_unknown
from unbounded.transcripts.jsonl import ReadReport, iter_json_records, parse_lenient

ThreadSelector = Callable[[RecordTable, Sequence[str]], SelectedThread]
"""Picks the main thread from the record summaries and the summary records' leaf uuids."""


def file_order_main_thread(
    records: Sequence[RecordInfo], summary_leaves: Sequence[str] = ()
) -> SelectedThread:
    """Conversation records in file order, inline sub-agent records left out unless every
    conversation record is one (`--file-order`)."""
    keep_sidechains = is_subagent_file(records)
    return SelectedThread(
        [
            index
            for index, r in enumerate(records)
            if r.is_conversation and (keep_sidechains or not r.is_sidechain)
        ],
        [],
    )


@dataclass(slots=True)
class FileScan:
    """Pass 1's result: a summary per record, the boundaries' metadata, what the reader saw."""

    path: Path
    records: RecordTable
    boundaries: dict[int, dict[str, Any]]
    """compactMetadata of each boundary, by record index."""
    summary_leaves: list[str]
    """`leafUuid` of each `summary` record, in file order."""
    report: ReadReport
    receipts: dict[int, Receipt] = field(default_factory=dict)
    """Receipts of compactions and microcompactions, by record index (there are few)."""
    unknown_record_types: dict[str, int] = field(default_factory=dict)
    """Record types the reader does not know, with their counts, in the order first met."""


def scan_records(path: str | Path, *, skip_invalid: bool = False) -> FileScan:
    """Pass 1: stream the file and keep a summary per record (see the module docstring)."""
    source = Path(path)
    report = ReadReport()
    records = RecordTable()
    boundaries: dict[int, dict[str, Any]] = {}
    leaves: list[str] = []
    receipts: dict[int, Receipt] = {}
    unknown: dict[str, Any] = {}
    for item in iter_json_records(
        source, skip_invalid=skip_invalid, report=report, validate=validate_record
    ):
        entry = Entry(item.value, item.number)
        if entry.is_compact_boundary:
            boundaries[len(records)] = dict(entry.compact_metadata)
            boundaries[len(records)]["timestamp"] = entry.timestamp
        receipt = Receipt.from_entry(entry) if entry.type == "system" else None
        if receipt is not None:
            receipts[len(records)] = receipt
        if entry.type == "summary" and isinstance(entry.data.get("leafUuid"), str):
            leaves.append(entry.data["leafUuid"])
        if entry.type not in RECORD_TYPES:
            count_unknown(unknown, [entry.type])
        records.append(entry, item.offset)
    return FileScan(
        source, records, boundaries, leaves, report, receipts, unknown.get(UNKNOWN_RECORDS, {})
    )


def read_records(path: Path, records: Iterable[RecordInfo]) -> Iterator[Entry]:
    """Pass 2: read these records again by offset (in the order given), one at a time."""
    return read_at(path, ((record.offset, record.line) for record in records))


def read_at(path: Path, places: Iterable[tuple[int, int]]) -> Iterator[Entry]:
    """Read the records whose lines start at these (byte offset, line number) places, in the
    order given, one at a time."""
    with path.open("rb") as handle:
        for offset, line in places:
            handle.seek(offset)
            raw = handle.readline()
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                # Pass 1 repaired it the same way (BOM, invalid UTF-8, lone surrogates).
                lenient = parse_lenient(raw)
                value = lenient[0] if lenient is not None else None
            if not isinstance(value, dict):
                raise TranscriptError(
                    "the file changed while it was being inspected",
                    path=path,
                    line=line,
                    hint="read it again once the agent stopped writing, or read a copy",
                )
            yield Entry(value, line)


# -- counting a view ------------------------------------------------------------------------


@dataclass(slots=True)
class ViewTally:
    """What inspect reports about a view, counted in one pass."""

    messages: int
    tokens: ContextBreakdown


def tally_view(entries: Iterable[Entry]) -> ViewTally:
    """Messages, the anchored token count and the breakdown of a view, in one pass.

    The entries are dropped as they go; the API messages they make are held (by the
    normalizer, whose repairs decide how many there are) until they are counted.
    """
    tokens = ContextBreakdown()
    normalizer = MessageNormalizer()
    for entry in entries:
        tokens.append(entry)
        normalizer.append(entry)
    return ViewTally(len(normalizer.messages), tokens)


# -- the report ------------------------------------------------------------------------------------


def _sidechain_threads(records: Sequence[RecordInfo]) -> int:
    """`len(Transcript.sidechains())` on summaries."""
    conversation = [r for r in records if r.is_conversation]
    if conversation and all(r.is_sidechain for r in conversation):
        return 0
    roots = 0
    owner: dict[str, str] = {}
    for record in conversation:
        if not record.is_sidechain or record.uuid is None:
            continue
        parent = record.parent_uuid
        root = owner.get(parent) if parent is not None else None
        if root is None:
            root = record.uuid
            roots += 1
        owner[record.uuid] = root
    return roots


def _view_records(scan: FileScan, main: Sequence[int]) -> tuple[list[RecordInfo], bool]:
    """The records of the view, and whether it must be built in memory (partial compaction)."""
    records = scan.records
    position = next(
        (i for i in range(len(main) - 1, -1, -1) if records[main[i]].is_compact_boundary), -1
    )
    if position < 0:
        return [records[i] for i in main], False
    segment = scan.boundaries.get(main[position], {}).get("preservedSegment")
    view = [records[i] for i in main[position:]]
    if not isinstance(segment, dict):
        return view, False
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if not isinstance(head, str) or not isinstance(tail, str):
        return view, False
    start, end = (_first_with_uuid(records, main[:position], uuid) for uuid in (head, tail))
    if start is None or end is None:
        return view, False
    return [*(records[i] for i in main[start : end + 1]), *view], True


def _first_with_uuid(records: RecordTable, rows: Sequence[int], uuid: str) -> int | None:
    """The first position among these rows of the record with this uuid."""
    key = UuidKey.of(uuid)
    return next((p for p, row in enumerate(rows) if records.same_uuid(row, key)), None)


def recorded_models(records: Sequence[RecordInfo], main: Sequence[int]) -> dict[str, int]:
    """`Transcript.models` on summaries: recorded calls per model, the main model first."""
    calls: dict[str, tuple[int, str | None]] = {}  # response id -> (first position, model)
    for position, index in enumerate(main):
        record = records[index]
        if record.usage_total is None or record.message_id is None:
            continue
        first = calls.get(record.message_id, (position, None))[0]
        calls[record.message_id] = (first, record.model)
    if calls:
        named = [(rid, model) for rid, (_, model) in sorted(calls.items(), key=lambda kv: kv[1][0])]
    else:
        named = [
            (records[i].message_id or records[i].uuid or str(position), records[i].model)
            for position, i in enumerate(main)
            if records[i].type == "assistant" and not records[i].is_synthetic_api_error
        ]
    return calls_per_model(named)


def billed_call_counts(records: Sequence[RecordInfo], main: Sequence[int]) -> CallCounts:
    """`CallCounts.of` on summaries: each response id with usage once, on the thread or on a
    branch; inline sub-agents' apart."""
    keep_sidechains = is_subagent_file(records)
    on_thread = {
        records[i].message_id for i in main if records[i].usage_total is not None
    }
    agent: set[str] = set()
    subagent: set[str] = set()
    for record in records:
        if record.usage_total is None or record.message_id is None:
            continue
        if record.is_sidechain and not keep_sidechains:
            subagent.add(record.message_id)
        else:
            agent.add(record.message_id)
    thread = len(agent & on_thread)
    return CallCounts(thread=thread, branch=len(agent) - thread, subagent=len(subagent))


def inspect_file(
    path: str | Path,
    *,
    model: str | None = None,
    window: int | None = None,
    policy: Policy | None = None,
    table: ModelTable | None = None,
    skip_invalid: bool = False,
    select_thread: ThreadSelector = rebuilt_main_thread,
) -> InspectReport:
    """`inspect_transcript` for a Claude Code file, streamed (see the module docstring)."""
    scan = scan_records(path, skip_invalid=skip_invalid)
    records = scan.records
    selected = select_thread(records, scan.summary_leaves)
    main = selected.indexes
    models_called = recorded_models(records, main)
    models = table or load_model_table()
    info, source, notes = resolve_model_name(
        next(iter(models_called), None), model, models, provider="anthropic"
    )
    if window is not None:
        info = info.with_window(window)
    thresholds = compute_thresholds(info, policy or Policy.from_env())
    view_records, in_memory = _view_records(scan, main)
    entries: Iterable[Entry] = read_records(scan.path, view_records)
    if in_memory:
        entries = messages_after_compact_boundary(list(entries))
    tally = tally_view(entries)
    calls = billed_call_counts(records, main)
    unknown = unknown_records_note(scan.unknown_record_types)
    if unknown is not None:
        notes.append(unknown)
    boundaries: list[BoundaryInfo] = []
    since = 0  # position in `main` of the boundary before (the start of the view it ends)
    for position, i in enumerate(main):
        if not records[i].is_compact_boundary:
            continue
        before = list(read_records(scan.path, [records[j] for j in main[since:position]]))
        boundaries.append(
            BoundaryInfo(
                trigger=scan.boundaries[i].get("trigger"),
                pre_tokens=scan.boundaries[i].get("preTokens"),
                uuid=records[i].uuid,
                timestamp=scan.boundaries[i].get("timestamp"),
                line=records[i].line,
                counted_pre_tokens=pre_compaction_tokens(before),
            )
        )
        since = position
    return InspectReport(
        source=SourceSummary(
            path=str(scan.path),
            format=FORMAT,
            records=len(records),
            skipped_lines=scan.report.skipped_lines,
            warnings=[*scan.report.warnings, *selected.warnings],
            models=models_called,
            unknown_record_types=dict(scan.unknown_record_types),
        ),
        model=info,
        model_source=source,
        thresholds=thresholds,
        messages=tally.messages,
        api_calls=calls.billed,
        context_tokens=tally.tokens.counter.total,
        anchored_tokens=tally.tokens.counter.anchor_tokens,
        estimated_tokens=tally.tokens.counter.estimated_tokens,
        boundaries=boundaries,
        accounting=tally.tokens.accounting,
        breakdown=tally.tokens.breakdown(),
        sidechains=_sidechain_threads(records),
        notes=notes,
        receipts=[scan.receipts[i] for i in main if i in scan.receipts],
        calls=calls,
    )


__all__ = [
    "FileScan",
    "RecordInfo",
    "RecordTable",
    "SelectedThread",
    "ThreadSelector",
    "ViewTally",
    "billed_call_counts",
    "file_order_main_thread",
    "inspect_file",
    "is_subagent_file",
    "read_at",
    "read_records",
    "rebuilt_branch",
    "rebuilt_main_thread",
    "recorded_models",
    "scan_records",
    "tally_view",
]
