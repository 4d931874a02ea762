"""`open_recording`: a Claude Code file prepared for replay without loading it gives
what `ReplayRecording.of` gives on the loaded file, and holds per call, not per record."""

from __future__ import annotations

import gc
import tracemalloc
from array import array
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES
from unbounded.catalog import ModelInfo
from unbounded.errors import TranscriptError
from unbounded.evaluation.file_thread import FileThread
from unbounded.evaluation.recording_stream import FileSteps, open_recording
from unbounded.evaluation.replay_recording import ReplayRecording, _slim
from unbounded.inspection_stream import RecordTable
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.transcripts.loader import load_transcript

MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)
START = datetime(2026, 2, 1, 9, 0, tzinfo=timezone.utc)
RESULT_BYTES = 6_000
COMPACT_EVERY = 40

CLAUDE_CODE_FILES = sorted(
    [*(FIXTURES / "sessions").glob("*.jsonl"), *FIXTURES.glob("session_*.jsonl")]
)


def _write_session(path: Path, calls: int) -> Path:
    """A Claude Code file of `calls` API calls: each a response line of text and one of its
    tool call (one message id), a progress record and a tool result of RESULT_BYTES; the
    recording compacts every COMPACT_EVERY calls (a boundary and a summary)."""
    moment = START
    parent: str | None = None
    lines: list[bytes] = []

    def put(entry: Entry, *, chained: bool = True) -> None:
        nonlocal moment, parent
        moment += timedelta(seconds=3)
        entry.data["timestamp"] = moment.isoformat().replace("+00:00", "Z")
        entry.data["sessionId"] = "s-1"
        lines.append(orjson.dumps(entry.data))
        if chained:
            parent = entry.uuid

    put(Entry.user("Work through the tasks.", parent_uuid=parent))
    for call in range(calls):
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": 900,
            "cache_read_input_tokens": 3_000 + 900 * (call % COMPACT_EVERY),
            "output_tokens": 20,
        }
        message_id, tool_id = f"msg_{call:06d}", f"toolu_{call:06d}"
        put(
            Entry.assistant(
                [{"type": "text", "text": f"Step {call}."}],
                message_id=message_id,
                model=MODEL.name,
                usage=usage,
                parent_uuid=parent,
            )
        )
        put(
            Entry.assistant(
                [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"n": call}}],
                message_id=message_id,
                model=MODEL.name,
                usage=usage,
                stop_reason="tool_use",
                parent_uuid=parent,
            )
        )
        progress = Entry({"type": "progress", "parentUuid": parent, "uuid": f"p-{call}"})
        put(progress, chained=False)
        body = (f"{call:06d} " * (RESULT_BYTES // 7 + 1))[:RESULT_BYTES]
        result = [{"type": "tool_result", "tool_use_id": tool_id, "content": body}]
        put(Entry.user(result, parent_uuid=parent))
        if call % COMPACT_EVERY == COMPACT_EVERY - 1:
            put(create_compact_boundary("auto", 40_000, logical_parent_uuid=parent))
            summary = f"Summary of the work up to step {call}."
            put(Entry.user(summary, parent_uuid=parent, is_compact_summary=True))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _loaded(path: Path, *, file_order: bool = False) -> ReplayRecording:
    return ReplayRecording.of(load_transcript(path, file_order=file_order))


def _steps(recording: ReplayRecording) -> list[tuple[object, ...]]:
    return [
        (
            [(e.data, e.line) for e in step.before],
            step.call,
            [(e.data, e.line) for e in step.after],
        )
        for step in recording.script.steps
    ]


@pytest.mark.parametrize("path", CLAUDE_CODE_FILES, ids=lambda path: path.name)
@pytest.mark.parametrize("file_order", [False, True])
def test_an_opened_file_gives_what_the_loaded_transcript_gives(
    path: Path, file_order: bool
) -> None:
    loaded = _loaded(path, file_order=file_order)
    opened = open_recording(path, file_order=file_order)
    assert isinstance(opened.script.steps, FileSteps)  # streamed, not loaded
    assert _steps(opened) == _steps(loaded)
    assert opened.script.request_times == loaded.script.request_times
    assert opened.script.message_ids == loaded.script.message_ids
    assert opened.script.has_usage == loaded.script.has_usage
    assert (opened.model, opened.provider, opened.models, opened.name) == (
        loaded.model,
        loaded.provider,
        loaded.models,
        loaded.name,
    )
    assert opened.billed == loaded.billed
    assert opened.replies == loaded.replies
    assert list(opened.future.positions) == list(loaded.future.positions)
    for first in [0, *loaded.future.positions[::3]]:
        assert [_slim(e).data for e in opened.future.after(first)] == [
            e.data for e in loaded.future.after(first)
        ]
    assert opened.fidelity(MODEL).to_dict() == loaded.fidelity(MODEL).to_dict()
    assert not opened.holds_transcript


def test_a_rewound_file_simulates_its_branch_call_from_the_file() -> None:
    path = FIXTURES / "sessions" / "rewound.jsonl"
    opened = open_recording(path)
    assert any(call.place == "branch" for call in opened.billed)  # the case this covers
    assert opened.fidelity(MODEL).to_dict() == _loaded(path).fidelity(MODEL).to_dict()


def test_the_steps_are_read_again_on_each_walk(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "s.jsonl", 12)
    steps = open_recording(path).script.steps
    first, again = list(steps), list(steps)
    assert len(steps) == 12
    assert [s.call.message_id for s in first] == [f"msg_{n:06d}" for n in range(12)]
    assert first == again
    assert first[1].before[0] is not again[1].before[0]  # read from the file each time
    assert first[5] in steps


def test_a_file_changed_while_replayed_is_refused_saying_where(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "s.jsonl", 6)
    recording = open_recording(path)
    path.write_bytes(b"\n" * path.stat().st_size)  # the same size, every record gone
    with pytest.raises(TranscriptError, match=r"changed while it was being") as raised:
        list(recording.script.steps)
    assert "s.jsonl" in str(raised.value)
    assert ":1" in str(raised.value) or "line 1" in str(raised.value)


def _held(prepare: Callable[[Path], ReplayRecording], path: Path) -> tuple[int, int]:
    """Bytes a prepared and simulated recording holds, and the most its steps' walk adds."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        recording = prepare(path)
        recording.fidelity(MODEL)
        gc.collect()  # the simulator's own cycles
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in recording.script.steps:
            pass
        return held - before, tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()


def test_a_prepared_replay_holds_per_call_state_not_the_records(tmp_path: Path) -> None:
    # 320 more calls bring 1.9 MB more tool results: what a recording holds may grow with
    # the calls (their times, ids, usage, simulated figures), never with what they read;
    # walking the steps holds one step at a time.
    small, small_walk = _held(open_recording, _write_session(tmp_path / "s.jsonl", 80))
    large, large_walk = _held(open_recording, _write_session(tmp_path / "l.jsonl", 400))
    assert large - small < 320 * RESULT_BYTES / 2
    assert large_walk - small_walk < 5 * RESULT_BYTES


def test_a_file_thread_reads_the_records_it_is_asked_for(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "s.jsonl", 3)
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    offsets, lines, at = array("q"), array("q"), 0
    for number, raw in enumerate(path.read_bytes().splitlines(keepends=True), 1):
        offsets.append(at)
        lines.append(number)
        at += len(raw)
    thread = FileThread(path, offsets, lines)
    assert len(thread) == len(records)
    assert thread[0].data == records[0]
    assert thread[-1].data == records[-1] and thread[-1].line == len(records)
    assert [e.data for e in thread[2:5]] == records[2:5]
    assert [e.data for e in thread.tail(4)] == records[4:]
    assert [e.data for e in thread.tail(4).subset([1, 0])] == [records[5], records[4]]
    assert len(thread.tail(len(records) + 3)) == 0
    with pytest.raises(IndexError):
        thread[len(records)]
    with pytest.raises(ValueError, match="cannot start at"):
        FileThread(path, offsets, lines, start=len(offsets) + 1)


@pytest.mark.parametrize("prepare", [open_recording, _loaded], ids=["opened", "loaded"])
def test_attachments_reinjected_after_a_recorded_compaction_are_not_fed(
    tmp_path: Path, prepare: Callable[[Path], ReplayRecording]
) -> None:
    moment, parent, lines = START, None, []

    def put(entry: Entry) -> None:
        nonlocal moment, parent
        moment += timedelta(seconds=5)
        entry.data["timestamp"] = moment.isoformat().replace("+00:00", "Z")
        lines.append(orjson.dumps(entry.data))
        parent = entry.uuid

    usage = {"input_tokens": 5, "cache_read_input_tokens": 3_000, "output_tokens": 9}
    put(Entry.user("Start.", parent_uuid=parent))
    put(
        Entry.assistant(
            [{"type": "text", "text": "a"}], message_id="msg_a", usage=usage, parent_uuid=parent
        )
    )
    put(create_compact_boundary("auto", 9_000, logical_parent_uuid=parent))
    put(Entry.user("Summary.", parent_uuid=parent, is_compact_summary=True))
    for kind in ("file", "todo"):  # what Claude Code re-injects right after compacting
        put(Entry.attachment_record({"type": kind, "filename": "re.py"}, parent_uuid=parent))
    put(Entry.user("Next.", parent_uuid=parent))
    put(Entry.attachment_record({"type": "file", "filename": "new.py"}, parent_uuid=parent))
    put(
        Entry.assistant(
            [{"type": "text", "text": "b"}], message_id="msg_b", usage=usage, parent_uuid=parent
        )
    )
    path = tmp_path / "compacted.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    second = list(prepare(path).script.steps)[1]
    fed = [(e.type, (e.attachment or {}).get("filename")) for e in second.before]
    assert fed == [("user", None), ("attachment", "new.py")]


def _tables_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, RecordTable))


def test_the_record_summaries_go_before_the_simulation_unless_a_branch_needs_them(
    tmp_path: Path,
) -> None:
    alive = _tables_alive()
    plain = open_recording(_write_session(tmp_path / "s.jsonl", 5))
    assert _tables_alive() == alive
    rewound = open_recording(FIXTURES / "sessions" / "rewound.jsonl")
    assert _tables_alive() == alive + 1  # its branch call's conversation is rebuilt from them
    rewound.fidelity(MODEL)
    plain.fidelity(MODEL)
    assert _tables_alive() == alive


def test_a_prepared_replay_holds_a_few_hundred_bytes_a_call(tmp_path: Path) -> None:
    # A 100,000-call recording is held for the whole replay: its plan, its billed calls and
    # its fidelity simulation are kept as columns of numbers (PlannedCalls, FidelityCalls;
    # only the billed calls the script leaves out are kept), under 600 bytes a call where
    # objects took 1,700.
    small, _ = _held(open_recording, _write_session(tmp_path / "s.jsonl", 80))
    large, _ = _held(open_recording, _write_session(tmp_path / "l.jsonl", 400))
    assert (large - small) / 320 < 600


def _opened(path: Path) -> int:
    """Bytes a recording holds once opened, before its simulation."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        recording = open_recording(path)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        assert recording.holds_transcript  # its calls are held until the simulation
        return held
    finally:
        tracemalloc.stop()


def test_an_opened_recording_holds_its_calls_as_columns(tmp_path: Path) -> None:
    # Until the simulation, the thread's calls and the billed calls are held beside the
    # plan: as objects (usage dicts, timestamps, uuids, ids read twice) the opening held 950
    # bytes a call here; with the calls as columns and their ids shared with the plan, 780.
    _opened(_write_session(tmp_path / "w.jsonl", 80))  # what a first opening caches
    small = _opened(_write_session(tmp_path / "s.jsonl", 80))
    large = _opened(_write_session(tmp_path / "l.jsonl", 400))
    assert (large - small) / 320 < 820
