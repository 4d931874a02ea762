"""A Claude Code file prepared for replay without loading it: `open_recording`.

The file is read as `unbounded inspect` reads it (`unbounded.inspection_stream`): pass 1
keeps a small summary per record and the main thread is chosen from the summaries, with the
rules `Transcript.main_thread` follows. What a replay needs is then taken from the summaries,
reading records again by offset only where their content decides:

- the script (`unbounded.evaluation.recorded`) is planned from the summaries, with the
  attachments after a boundary and the records that time the calls read again; its steps are
  read from the file when the replay reaches them, one step's records at a time;
- the recorded future, the billed calls and the models, as `ReplayRecording.of` takes them
  from a loaded transcript;
- the fidelity simulation walks the main thread (and a branch call's conversation) record by
  record from the file.

The summaries are let go before the calls' records are read (the billed calls and the
thread's calls are kept until the simulation, as columns: `unbounded.model.call_columns`),
unless a billed call on a branch needs its conversation rebuilt from them: then once the
recording has been simulated. The steps keep only each main-thread record's byte offset and
line. Output is that of `ReplayRecording.of` on the loaded file.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import overload

from unbounded.caching.fidelity import RecordedConversation
from unbounded.evaluation.file_thread import FileThread
from unbounded.evaluation.recorded import ReplayStep, ScriptPlan, plan_script, replay_steps
from unbounded.evaluation.replay_recording import RecordedFuture, ReplayRecording, not_replayed
from unbounded.inspection_stream import (
    RecordInfo,
    RecordTable,
    file_order_main_thread,
    is_subagent_file,
    rebuilt_branch,
    rebuilt_main_thread,
    recorded_models,
    scan_records,
)
from unbounded.model.call_columns import ApiCallColumns, BilledCallColumns
from unbounded.model.entries import Entry
from unbounded.model.transcript import billed_lines, response_lines


class FileSteps(Collection[ReplayStep]):
    """A script's steps read from the file as they are reached (`replay_steps`): iterating
    again reads them again."""

    def __init__(self, plan: ScriptPlan, main: FileThread) -> None:
        """The steps of `plan`, whose indices are `main`'s."""
        self._plan = plan
        self._main = main

    def __len__(self) -> int:
        return len(self._plan.calls)

    def __iter__(self) -> Iterator[ReplayStep]:
        main = self._main
        return replay_steps(self._plan, lambda start, end: main[start:end])

    def __contains__(self, step: object) -> bool:
        return any(step == own for own in self)


class _Rows(Sequence[RecordInfo]):
    """The summaries of some rows of a table, in a given order, made on access."""

    def __init__(self, table: RecordTable, rows: Sequence[int]) -> None:
        self._table = table
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> RecordInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecordInfo]: ...

    def __getitem__(self, index: int | slice) -> RecordInfo | list[RecordInfo]:
        if isinstance(index, slice):
            return [RecordInfo(self._table, row) for row in self._rows[index]]
        return RecordInfo(self._table, self._rows[index])


def _has_usage(record: RecordInfo) -> bool:
    return record.usage_total is not None


def _thread_calls(lines: Iterable[tuple[int, Entry]], planned_ids: Iterable[str]) -> ApiCallColumns:
    """`indexed_api_calls` of the thread's records with usage, held as columns; a response
    id the script plans is held as the script's own string (the script keeps it anyway)."""
    known = {message_id: message_id for message_id in planned_ids}
    columns = ApiCallColumns()
    for index, entry, message_id, usage in response_lines(lines):
        shared = known.get(message_id, message_id)
        columns.add(index, shared, usage, entry.model, entry.timestamp)
    columns.finish()
    return columns


def _billed_calls(
    billed_rows: FileThread, sidechains: bool, thread_calls: ApiCallColumns
) -> BilledCallColumns:
    """`Transcript.billed_calls()` of a Claude Code file (it records no side calls), held as
    columns: only the records with usage (`billed_rows`, in file order) are read again."""
    # One string per response id: a thread call's id is also its billed call's.
    thread_ids = {message_id: message_id for message_id in thread_calls.message_ids()}
    columns = BilledCallColumns()
    for entry, message_id, usage in billed_lines(billed_rows, sidechains=sidechains):
        shared = thread_ids.get(message_id)
        columns.add(
            shared or message_id,
            usage,
            entry.model,
            entry.timestamp,
            entry.line,
            "thread" if shared is not None else "branch",
            entry.uuid,
        )
    # First met is file order here (the rows ascend), the order `billed_calls()` sorts to.
    columns.finish()
    return columns


def _billed_rows(table: RecordTable) -> array[int]:
    """The rows of the records with usage and a response id: what is billed."""
    return array(
        "q",
        (
            row
            for row in range(len(table))
            if table.usage_totals[row] >= 0 and table.message_ids[row] is not None
        ),
    )


def _has_branch_call(
    table: RecordTable, billed_rows: Sequence[int], thread_rows: Iterable[int], sidechains: bool
) -> bool:
    """Whether a billed response is on no main-thread record (`BilledCall.place == "branch"`)."""
    on_thread = {table.message_ids[row] for row in thread_rows}
    return any(
        table.message_ids[row] not in on_thread
        for row in billed_rows
        if sidechains or not RecordInfo(table, row).is_sidechain
    )


def _branch_thread(path: Path, table: RecordTable, leaf_uuid: str) -> FileThread:
    """The conversation ending at the record with this uuid (`Transcript.branch_thread`)."""
    return FileThread.of(path, table, rebuilt_branch(table, leaf_uuid))


def _no_branch(path: Path, leaf_uuid: str) -> FileThread:
    """What a file without branch calls answers for a branch's conversation."""
    raise ValueError(f"{path} has no billed call on a branch: no branch ends at {leaf_uuid}")


def open_recording(
    path: str | Path, *, skip_invalid: bool = False, file_order: bool = False
) -> ReplayRecording:
    """A session file prepared for replay without keeping it loaded: a Claude Code file
    streamed (see the module docstring), other formats (small) loaded and prepared with
    `ReplayRecording.of`; `file_order` takes the records in file order instead of rebuilding
    the thread from parent links."""
    from unbounded.transcripts.loader import detect_format, load_transcript

    if detect_format(path) != "claude-code":
        loaded = load_transcript(path, skip_invalid=skip_invalid, file_order=file_order)
        return ReplayRecording.of(loaded)
    return _open_claude_code(Path(path), skip_invalid=skip_invalid, file_order=file_order)


def _open_claude_code(source: Path, *, skip_invalid: bool, file_order: bool) -> ReplayRecording:
    """A Claude Code file prepared for replay in two passes (module docstring)."""
    scan = scan_records(source, skip_invalid=skip_invalid)
    table = scan.records
    select = file_order_main_thread if file_order else rebuilt_main_thread
    selected = select(table, scan.summary_leaves)
    rows = array("q", selected.indexes)
    warnings = (*scan.report.warnings, *selected.warnings)
    skipped_lines = scan.report.skipped_lines
    del scan, selected
    shapes = _Rows(table, rows)
    main = FileThread.of(source, table, rows)
    plan = plan_script(shapes, _has_usage, main.read)
    models = recorded_models(table, rows)
    model = next(iter(models), None)
    with_usage = array("q", (p for p, r in enumerate(shapes) if _has_usage(r) and r.message_id))
    replies = any(r.type == "assistant" and not r.is_synthetic_api_error for r in shapes)
    future = RecordedFuture.in_file(shapes, main)
    sidechains = is_subagent_file(table)
    billed_rows = _billed_rows(table)
    billed_records = FileThread.of(source, table, billed_rows)
    # Only a branch call's conversation needs the summaries after this: without one, they go
    # now, before each call's records are read and kept (the peak of the opening).
    if _has_branch_call(table, billed_rows, (rows[p] for p in with_usage), sidechains):
        branch_thread = partial(_branch_thread, source, table)
    else:
        branch_thread = partial(_no_branch, source)
    del table, shapes, billed_rows

    thread_calls = _thread_calls(
        zip(with_usage, main.read(with_usage), strict=True), plan.calls.message_ids
    )
    del with_usage
    billed = _billed_calls(billed_records, sidechains, thread_calls)
    del billed_records
    script = plan.script(FileSteps(plan, main), model)
    return ReplayRecording(
        script=script,
        future=future,
        model=model,
        provider="anthropic",
        models=models,
        billed=not_replayed(billed, script),
        billed_calls=len(billed),
        reported_window=None,
        name=source.name,
        replies=replies,
        warnings=warnings,
        skipped_lines=skipped_lines,
        _source=RecordedConversation(
            main=main,
            thread_calls=thread_calls,
            billed=billed,
            branch_thread=branch_thread,
            model=model,
            provider="anthropic",
            session=source.name,
        ),
    )


__all__ = ["FileSteps", "open_recording"]
