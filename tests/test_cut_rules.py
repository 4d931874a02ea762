"""Rules of `unbounded.compaction.cut.LastPositions` the mutation check found unheld: a lookup
reads the transcript from its end only as far as it must (older records may be on disk)."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.cut import LastPositions, contiguous_tail_start
from unbounded.model.entries import Entry


class _CountingList(list[Entry]):
    """A list that counts the records read from it by position."""

    reads = 0

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            self.reads += 1
        return super().__getitem__(key)


def _record(uuid: str | None) -> Entry:
    entry = Entry.user("x")
    entry.data["uuid"] = uuid
    return entry


def test_a_lookup_without_a_uuid_reads_no_record() -> None:
    entries = _CountingList([_record(f"u{n}") for n in range(50)])
    positions = LastPositions(entries)
    assert positions.get(None) is None and positions.get("") is None
    assert entries.reads == 0
    assert positions.get("u49") == 49 and entries.reads == 1


def test_a_view_ending_in_a_record_without_uuid_reads_no_record() -> None:
    entries = _CountingList([_record(f"u{n}") for n in range(50)])
    view = [entries[48], entries[49], _record(None)]
    entries.reads = 0
    assert contiguous_tail_start(entries, view) == len(view)
    assert entries.reads == 0
