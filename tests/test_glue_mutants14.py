"""`compaction.glue` rules the session-14 mutation run left untested: a turn that re-injects
nothing reads nothing, a reader read to the very end of the transcript is in step, and a
transcript's relative paths are read in the session's latest working folder."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from unbounded.compaction.glue import RecordedState, RootsReader, rehydrator_for
from unbounded.compaction.rehydrate import WorkingStateReader
from unbounded.model.entries import Entry


def _spy_roots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real_read = RootsReader.read

    def read(reader: RootsReader, entries: Sequence[Entry]) -> list[str]:
        reads.append(len(entries))
        return real_read(reader, entries)

    monkeypatch.setattr(RootsReader, "read", read)
    return reads


def test_a_turn_that_re_injects_nothing_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _spy_roots(monkeypatch)
    fed: list[int] = []
    real_feed = WorkingStateReader._feed

    def feed(reader: WorkingStateReader, index: int, entry: Entry) -> None:
        fed.append(index)
        real_feed(reader, index, entry)

    monkeypatch.setattr(WorkingStateReader, "_feed", feed)
    recorded = RecordedState()
    entries = [Entry.user(f"prompt {n}") for n in range(5)]
    recorded.advance(entries, entries, None)
    assert fed == [] and reads == []
    recorded.advance(entries, entries, "disk")  # the same turn re-injecting: it reads
    assert fed == list(range(5)) and reads == [5]


def test_a_reader_read_to_the_very_end_is_back_in_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction read the roots to the end and nothing was appended since: the next turn
    is in step and reads them (the entries it adds later are then read turn by turn)."""
    from unbounded.compaction.glue import TURN_READ_LIMIT

    reads = _spy_roots(monkeypatch)
    recorded = RecordedState()
    entries = [Entry.user(f"prompt {n}") for n in range(TURN_READ_LIMIT + 10)]
    recorded.advance(entries, entries, "disk")  # more than a turn reads: out of step
    recorded.advance(entries, entries, "disk")  # the working state catches up
    assert reads == []
    rehydrator_for(entries, recorded=recorded)  # a compaction reads the roots to the end
    recorded.advance(entries, entries, "disk")  # nothing appended since
    assert reads == [len(entries), len(entries)]


def _in(cwd: str, entry: Entry) -> Entry:
    entry.data["cwd"] = cwd
    return entry


def test_relative_paths_of_a_transcript_are_read_in_its_latest_folder() -> None:
    # "a.py" read in the latest folder is the file a kept message read by its full name
    # there: it is not restored again (in the first folder it would be another file).
    def read(call_id: str, path: str) -> Entry:
        call = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
        return Entry.assistant([call])

    def shown(call_id: str, text: str) -> Entry:
        return Entry.user([{"type": "tool_result", "tool_use_id": call_id, "content": text}])

    entries = [
        _in("/first/project", Entry.user("start")),
        _in("/second/project", read("r1", "a.py")),
        _in("/second/project", shown("r1", "     1\tA = 1\n")),
        _in("/second/project", read("r2", "b.py")),
        _in("/second/project", shown("r2", "     1\tB = 1\n")),
    ]
    kept = [read("r3", "/second/project/a.py")]
    attachments, _ = rehydrator_for(entries, source="transcript")(kept)
    files = [a["filename"] for a in attachments if a["type"] == "file"]
    assert files == ["b.py"]
