"""A thread of records of a file, read again by offset when asked for: `FileThread`.

What a replay walks (the main thread, a branch call's conversation, the records the
continuation scores look ahead into) is held as each record's byte offset and line number,
and each record is read from the file when it is reached, so a thread of any length costs 16
bytes a record.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from unbounded.inspection_stream import RecordTable, read_at
from unbounded.model.entries import Entry

_RECENT = 8
"""Records a thread keeps of its last single reads (a call's first line is asked for twice)."""


class FileThread(Sequence[Entry]):
    """Records of a file in a given order, read again by offset when asked for: only each
    record's byte offset and line number are held."""

    def __init__(self, path: Path, offsets: array[int], lines: array[int], start: int = 0) -> None:
        """`offsets[start + i]` and `lines[start + i]`: where the i-th record's line starts,
        and its number."""
        if not 0 <= start <= len(offsets) or len(lines) != len(offsets):
            raise ValueError(
                f"a thread of {len(offsets)} offsets and {len(lines)} lines cannot start at "
                f"{start}: give one line per offset and a start within them"
            )
        self.path = path
        self._offsets = offsets
        self._lines = lines
        self._start = start
        self._recent: dict[int, Entry] = {}

    @classmethod
    def of(cls, path: Path, table: RecordTable, rows: Iterable[int]) -> FileThread:
        """The records at these rows of a file's summaries, in this order."""
        offsets, lines = array("q"), array("q")
        for row in rows:
            offsets.append(table.offsets[row])
            lines.append(table.lines[row])
        return cls(path, offsets, lines)

    def subset(self, indices: Iterable[int]) -> FileThread:
        """The records at these indices, in this order (nothing read)."""
        offsets, lines = array("q"), array("q")
        for index in indices:
            offsets.append(self._offsets[self._start + index])
            lines.append(self._lines[self._start + index])
        return FileThread(self.path, offsets, lines)

    def tail(self, first: int) -> FileThread:
        """The records from index `first` on, sharing this thread's places (nothing copied)."""
        return FileThread(
            self.path, self._offsets, self._lines, self._start + min(first, len(self))
        )

    def __len__(self) -> int:
        return len(self._offsets) - self._start

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return list(self.read(range(len(self))[index]))
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        entry = self._recent.get(index)
        if entry is None:
            if len(self._recent) >= _RECENT:
                self._recent.clear()
            entry = self._recent[index] = next(self.read([index]))
        return entry

    def __iter__(self) -> Iterator[Entry]:
        return self.read(range(len(self)))

    def read(self, indices: Iterable[int]) -> Iterator[Entry]:
        """The records at these indices, in the order given, one at a time."""
        start = self._start
        places = ((self._offsets[start + i], self._lines[start + i]) for i in indices)
        return read_at(self.path, places)


__all__ = ["FileThread"]
