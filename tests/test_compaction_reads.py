"""What a session's compactions read of its transcript: the readers of `RecordedState` (its
working state, the files as it showed them, its working folders) are fed each entry once over
the session's life, not the whole history again at every compaction."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recorded_calls import long_tool_session

from unbounded.catalog import ModelInfo
from unbounded.compaction.cut import LastPositions, contiguous_tail_start
from unbounded.compaction.glue import RecordedState, session_roots
from unbounded.compaction.recorded_files import RecordedFilesReader, recorded_files
from unbounded.compaction.rehydrate import (
    WorkingState,
    WorkingStateReader,
    working_state_from_entries,
)
from unbounded.evaluation.replay import ReplayOptions, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.spilled_entries import SpilledEntries
from unbounded.policy import Policy

MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)


class _FeedCounter:
    """Counts the entries each reader of a `RecordedState` is fed, and the transcript length
    at each of its reads (a compaction's) and at each time it was brought up to date (a
    session's turn, or a read)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fed = {"working": 0, "files": 0}
        self.reads: list[int] = []
        self.advanced: list[int] = []
        working_feed = WorkingStateReader._feed
        files_feed = RecordedFilesReader._feed
        working_read = WorkingStateReader.read
        working_advance = WorkingStateReader.advance

        def feed_working(reader: WorkingStateReader, index: int, entry: Entry) -> None:
            self.fed["working"] += 1
            working_feed(reader, index, entry)

        def feed_files(reader: RecordedFilesReader, position: int, entry: Entry) -> None:
            self.fed["files"] += 1
            files_feed(reader, position, entry)

        def read(reader: WorkingStateReader, entries: Sequence[Entry]) -> Any:
            self.reads.append(len(entries))
            return working_read(reader, entries)

        def advance(
            reader: WorkingStateReader, entries: Sequence[Entry], limit: int | None = None
        ) -> bool:
            self.advanced.append(len(entries))
            return working_advance(reader, entries, limit)

        monkeypatch.setattr(WorkingStateReader, "_feed", feed_working)
        monkeypatch.setattr(WorkingStateReader, "advance", advance)
        monkeypatch.setattr(RecordedFilesReader, "_feed", feed_files)
        monkeypatch.setattr(WorkingStateReader, "read", read)


@pytest.mark.parametrize("weak_hold", [True, False], ids=["weakref", "python-3.10"])
def test_a_replay_that_compacts_again_and_again_feeds_each_entry_once(
    monkeypatch: pytest.MonkeyPatch, weak_hold: bool
) -> None:
    if not weak_hold:  # as on Python 3.10: entries take no weak references, none is held
        monkeypatch.setattr(SpilledEntries, "_hold", lambda *_: None)
    counter = _FeedCounter(monkeypatch)
    recording = ReplayRecording.of(
        long_tool_session(
            240,
            result=lambda n: f"def handler_{n}(request):\n    return route(request, {n})\n" * 60,
            written=2_000,
            model=MODEL.name,
        )
    )
    policy = Policy.from_env().with_changes(background_summary=False)
    options = ReplayOptions(baselines=False, policy=policy, window=60_000)
    report = asyncio.run(_Replayer(recording, options).run(None))
    assert report.compactions >= 4
    assert len(counter.reads) >= 4  # the session-memory compactions rehydrated
    # Each entry fed once however many compactions (and turns) read the transcript: its
    # length when it was last brought up to date, not the sum of every read's.
    assert counter.fed == {"working": counter.advanced[-1], "files": counter.advanced[-1]}
    assert sum(counter.reads) > 3 * counter.advanced[-1] / 2  # a re-read would show
    # The session brings it up to date on every turn: a compaction reads only its turn's.
    assert len(counter.advanced) > 3 * len(counter.reads)


def test_reading_a_grown_list_again_feeds_only_what_was_appended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = _FeedCounter(monkeypatch)
    recorded = RecordedState()
    entries = [Entry.user(f"prompt {n}") for n in range(5)]
    recorded.working.read(entries)
    recorded.files.read(entries)
    entries += [Entry.user("later"), Entry.user("later still")]
    recorded.working.read(entries)
    recorded.files.read(entries)
    assert counter.fed == {"working": 7, "files": 7}
    recorded.working.read(list(entries))  # another list: read from its start
    assert counter.fed["working"] == 14


# -- incremental equals from scratch --------------------------------------------------------

_PATHS = ("a.py", "b.py", "plans/p.md", "/home/x/.claude/plans/plan.md")


@st.composite
def _call(draw: st.DrawFn, number: int) -> list[Entry]:
    """One tool call and (usually) its result: reads, writes, edits, todos, skills, plans."""
    tool_id = f"toolu_{number}"
    path = draw(st.sampled_from(_PATHS))
    text = draw(st.sampled_from(("one\ntwo\n", "two\nthree\n", "one\n")))
    kind = draw(st.sampled_from(("Read", "Write", "Edit", "TodoWrite", "Skill", "ExitPlanMode")))
    tool_input: dict[str, Any]
    if kind == "Read":
        tool_input = {"file_path": path}
        if draw(st.booleans()):
            tool_input["offset"] = 1
    elif kind == "Write":
        tool_input = {"file_path": path, "content": text}
    elif kind == "Edit":
        tool_input = {"file_path": path, "old_string": "two", "new_string": "2"}
    elif kind == "TodoWrite":
        tool_input = {"todos": [{"content": text, "status": "pending"}]}
    elif kind == "Skill":
        tool_input = {"skill": draw(st.sampled_from(("review", "test")))}
    else:
        tool_input = {"plan": text}
    use = Entry.assistant([{"type": "tool_use", "id": tool_id, "name": kind, "input": tool_input}])
    use.data["cwd"] = draw(st.sampled_from(("/w/one", "/w/two")))
    entries = [use]
    outcome = draw(st.sampled_from(("result", "stub", "error", "none")))
    if outcome == "none":
        return entries
    content = {
        "result": "\n".join(f"     {n}→{line}" for n, line in enumerate(text.split("\n"), 1)),
        "stub": "File unchanged since last read",
        "error": "failed",
    }[outcome]
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if outcome == "error":
        result["is_error"] = True
    entries.append(Entry.user([result]))
    if kind == "Skill" and draw(st.booleans()):
        entries.append(Entry.user(f"skill body {number}", is_meta=True))
    return entries


@st.composite
def _steps(draw: st.DrawFn) -> list[tuple[str, list[Entry]]]:
    """Steps on a transcript: calls appended, a compaction appended, a read by every reader,
    the last entry replaced, the transcript cut short or replaced by another list."""
    steps: list[tuple[str, list[Entry]]] = []
    for number in range(draw(st.integers(1, 25))):
        action = draw(
            st.sampled_from(("append", "append", "append", "read", "compact", "swap", "cut", "new"))
        )
        if action == "append":
            call = draw(_call(number))
            if len(call) > 1 and draw(st.booleans()):
                # The result arrives after a compaction read the call: its id is still needed.
                steps += [(action, call[:1]), ("read", []), (action, call[1:])]
            else:
                steps.append((action, call))
        elif action == "compact":
            boundary = create_compact_boundary("auto", 1_000)
            steps.append((action, [boundary, Entry.user("summary", is_compact_summary=True)]))
        elif action in ("swap", "new"):
            steps.append((action, draw(_call(number))))
        else:
            steps.append((action, []))
    steps.append(("read", []))
    return steps


@settings(max_examples=60, deadline=None)
@given(_steps())
def test_the_readers_kept_across_compactions_equal_a_read_from_scratch(
    steps: list[tuple[str, list[Entry]]],
) -> None:
    recorded = RecordedState()
    entries: list[Entry] = []
    returned: list[tuple[WorkingState, list[Entry]]] = []
    for action, new in steps:
        if action in ("append", "compact"):
            entries.extend(new)
        elif action == "swap" and entries:
            entries[-1] = new[0]  # the last entry seen replaced in place: not a grown list
        elif action == "cut":
            del entries[len(entries) // 2 :]
        elif action == "new" and entries:
            # Another transcript ending in the entry last seen, as long: read from its start.
            entries = [*(new * len(entries))[: len(entries) - 1], entries[-1]]
        working = recorded.working.read(entries)
        assert working == working_state_from_entries(entries)
        returned.append((working, list(entries)))
        assert recorded.files.read(entries) == recorded_files(entries)
        assert recorded.roots(entries) == session_roots(entries)
    # What a read returned stays as it was: the reader's later reads leave it alone.
    for working, seen in returned:
        assert working == working_state_from_entries(seen)


def test_a_call_s_id_is_kept_until_its_result_and_dropped_after() -> None:
    reader = WorkingStateReader()
    use = Entry.assistant(
        [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/a.py"}}]
    )
    entries = [use]
    assert reader.read(entries).files_read["/w/a.py"].unchanged_stub is False
    stub = {"type": "tool_result", "tool_use_id": "t1", "content": "File unchanged since last read"}
    entries.append(Entry.user([stub]))
    # The stub answered a call read before it: the id still names the file.
    assert reader.read(entries).files_read["/w/a.py"].unchanged_stub is True
    # Settled, the id is gone: the map does not grow with every call of the session.
    assert "t1" not in reader._call_paths


# -- where the view is one run of the transcript ---------------------------------------------


class _CountingList(list[Entry]):
    """A transcript that counts the records read from it one by one."""

    reads = 0

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            self.reads += 1
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        self.reads += len(self)
        return super().__iter__()


def test_the_tail_start_reads_the_transcript_only_as_far_as_the_view_reaches() -> None:
    history = [Entry.user(f"old {n}") for n in range(2_000)]
    view = [Entry.user(f"new {n}") for n in range(12)]
    entries = _CountingList([*history, create_compact_boundary("auto", 1), *view])
    assert contiguous_tail_start(entries, view) == 0
    assert entries.reads == len(view)


def test_a_record_s_last_position_stays_its_last_after_reading_past_earlier_copies() -> None:
    entries = [_record("a"), _record("b"), _record("a"), _record("c")]
    positions = LastPositions(entries)
    assert positions.get("a") == 2
    assert positions.get("missing") is None  # read to the start, past the first "a"
    assert [positions.get(uuid) for uuid in ("a", "b", "c", None, "")] == [2, 1, 3, None, None]


def _tail_start_from_scratch(entries: Sequence[Entry], view: Sequence[Entry]) -> int:
    """`contiguous_tail_start` by its definition: every record's last position first."""
    if not view:
        return 0
    positions = {entry.uuid: i for i, entry in enumerate(entries) if entry.uuid}
    start = len(view) - 1
    if positions.get(view[start].uuid) is None:
        return len(view)
    while start > 0:
        here, before = positions.get(view[start].uuid), positions.get(view[start - 1].uuid)
        if here is None or before is None or before != here - 1:
            break
        start -= 1
    return start


def _record(uuid: str | None) -> Entry:
    entry = Entry.user("x")
    entry.data["uuid"] = uuid
    return entry


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(("a", "b", "c", "d", "e", "", None)), max_size=14),
    st.lists(st.integers(0, 20), max_size=8),
    st.lists(st.sampled_from(("a", "c", "z", None)), max_size=3),
)
def test_the_tail_start_equals_its_definition(
    uuids: list[str | None], picks: list[int], strangers: list[str | None]
) -> None:
    entries = [_record(uuid) for uuid in uuids]
    # A view: records of the transcript (in any order, repeated), its tail, records not in it.
    view = [entries[i % len(entries)] for i in picks] if entries else []
    view += entries[len(entries) // 2 :] + [_record(uuid) for uuid in strangers]
    assert contiguous_tail_start(entries, view) == _tail_start_from_scratch(entries, view)
    tail = entries[len(entries) // 2 :]
    assert contiguous_tail_start(entries, tail) == _tail_start_from_scratch(entries, tail)


def test_the_readers_come_back_in_step_once_a_compaction_read_them_to_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn that appended more than a turn reads puts the files reader out of step (the
    compaction feeds it); once a compaction has read it to the end, the turns feed it again."""
    from unbounded.compaction.glue import TURN_READ_LIMIT, rehydrator_for

    counter = _FeedCounter(monkeypatch)
    recorded = RecordedState()
    entries = [Entry.user(f"prompt {n}") for n in range(TURN_READ_LIMIT + 10)]
    recorded.advance(entries, entries, "transcript")  # more than a turn reads: out of step
    recorded.advance(entries, entries, "transcript")  # the working state catches up
    recorded.roots(entries)  # the roots read to the end, the files not: still out of step
    recorded.advance(entries, entries, "transcript")
    assert counter.fed["files"] == 0
    rehydrator_for(entries, source="transcript", recorded=recorded)  # a compaction
    assert counter.fed["files"] == len(entries)
    entries += [Entry.user("later"), Entry.user("later still")]
    recorded.advance(entries, entries, "transcript")
    assert counter.fed["files"] == len(entries)  # fed on the turn, not by the next compaction
    entries += [Entry.user(f"burst {n}") for n in range(TURN_READ_LIMIT + 1)]
    recorded.advance(entries, entries, "transcript")  # out of step again
    assert counter.fed["files"] == len(entries) - TURN_READ_LIMIT - 1


def test_roots_come_back_in_step_for_a_disk_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The roots reader (disk sources) comes back in step the same way, and only once a
    compaction read it to within a turn's read of the end."""
    from unbounded.compaction.glue import TURN_READ_LIMIT, RootsReader, rehydrator_for

    reads: list[int] = []
    real_read = RootsReader.read

    def read(reader: RootsReader, entries: Sequence[Entry]) -> list[str]:
        reads.append(len(entries))
        return real_read(reader, entries)

    monkeypatch.setattr(RootsReader, "read", read)
    recorded = RecordedState()
    entries = [Entry.user(f"prompt {n}") for n in range(TURN_READ_LIMIT + 10)]
    recorded.advance(entries, entries, "disk")
    recorded.advance(entries, entries, "disk")
    assert reads == []
    rehydrator_for(entries, recorded=recorded)  # a compaction reads the roots to the end
    entries += [Entry.user(f"later {n}") for n in range(TURN_READ_LIMIT + 1)]
    recorded.advance(entries, entries, "disk")  # working: 1 left; roots too far behind
    recorded.advance(entries, entries, "disk")
    assert reads == [TURN_READ_LIMIT + 10]
    rehydrator_for(entries, recorded=recorded)
    entries.append(Entry.user("last"))
    recorded.advance(entries, entries, "disk")
    assert reads == [TURN_READ_LIMIT + 10, len(entries) - 1, len(entries)]
