"""A transcript's entries with the older ones kept on disk: a sequence that reads them back.

A session that runs for thousands of calls only ever sends what follows its last compaction
boundary, yet its transcript is asked for older entries now and then (recall, receipts, a
caller reading `Session.entries`). `SpilledEntries` holds the newest entries in a list and
writes the ones before a position it is told (`spill_before`) to an anonymous temporary file,
one JSON record each; reading such a position decodes its record again.

Positions never change: `entries[k]` is the k-th entry whether it sits on disk or in memory.
A spilled entry that something still holds comes back as that same object (a weak cache by
position; Python 3.10's entries take no weak references, so there it always comes back as a new,
equal `Entry`), and one nobody holds comes back as a new, equal `Entry`. A reader that remembers
the last entry it saw asks `entry_in_place`, which accepts either. Spilled entries must not be
changed afterwards: the file keeps them as they were when spilled.

Reads and writes go through `os.pread`/`os.pwrite`: no shared file position, so a thread reading
old entries cannot interleave with one spilling new ones. The file belongs to the process that
opened it: after fork() the other process reading or spilling raises `RuntimeError`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, overload

import orjson

from unbounded.model.entries import Entry

_NO_LINE = -1
"""The `line` column of an entry that has none."""


class SpilledEntries(Sequence[Entry]):
    """Entries by position, those before `spilled` read back from a temporary file."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._live: list[Entry] = list(entries)
        self._offsets = array("q")
        """Where each spilled record starts in the file; its end is the next one's start."""
        self._lines = array("q")
        self._end = 0
        self._file: IO[bytes] | None = None
        self._pid = 0
        """The process that opened the file (its id)."""
        self._closed = False
        self._held: weakref.WeakValueDictionary[int, Entry] = weakref.WeakValueDictionary()

    @property
    def spilled(self) -> int:
        """How many entries (the first ones) live on disk."""
        return len(self._offsets)

    @property
    def live(self) -> list[Entry]:
        """The entries held in memory: positions `spilled` onwards."""
        return self._live

    def __len__(self) -> int:
        return len(self._offsets) + len(self._live)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return [self._at(position) for position in range(*index.indices(len(self)))]
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(f"entry {index} out of range (the transcript holds {len(self)})")
        return self._at(position)

    def __iter__(self) -> Iterator[Entry]:
        for position in range(len(self._offsets)):
            yield self._at(position)
        yield from self._live

    def __delitem__(self, index: int | slice) -> None:
        """Remove a tail (`del entries[start:]`): the only removal a transcript makes."""
        if not isinstance(index, slice):
            raise ValueError("only a tail of the entries can be removed (del entries[start:])")
        start, stop, step = index.indices(len(self))
        if stop != len(self) or step != 1:
            raise ValueError("only a tail of the entries can be removed (del entries[start:])")
        spilled = len(self._offsets)
        if start >= spilled:
            del self._live[start - spilled :]
            return
        # The tail reaches into the spill: its records are forgotten (the file only grows).
        self._live.clear()
        self._end = self._offsets[start]
        del self._offsets[start:]
        del self._lines[start:]
        # `_held` may keep objects at forgotten positions: `_at` consults it only below
        # `spilled`, and `spill_before` holds each position anew as it writes it.

    def append(self, entry: Entry) -> None:
        """Add one entry at the end (in memory)."""
        self._live.append(entry)

    def extend(self, entries: Iterable[Entry]) -> None:
        """Add entries at the end (in memory)."""
        self._live.extend(entries)

    def spill_before(self, position: int) -> None:
        """Move the entries before `position` to disk (those already there stay)."""
        spilled = len(self._offsets)
        count = min(position, len(self)) - spilled
        if count <= 0:
            return
        descriptor = self._open().fileno()
        for offset, entry in enumerate(self._live[:count]):
            record = orjson.dumps(entry.data)
            written = 0
            while written < len(record):  # pwrite may write part of a record
                written += os.pwrite(descriptor, record[written:], self._end + written)
            self._offsets.append(self._end)
            self._lines.append(_NO_LINE if entry.line is None else entry.line)
            self._end += len(record)
            self._hold(spilled + offset, entry)
        del self._live[:count]

    def close(self) -> None:
        """Delete the temporary file (the spilled entries cannot be read after this)."""
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def closed(self) -> bool:
        """True after `close()`."""
        return self._closed

    def _open(self) -> IO[bytes]:
        if self._closed:
            raise ValueError(
                "the transcript's spilled entries were closed (SessionTranscript.close or "
                "Session.close); read or add entries before closing the session"
            )
        if self._file is None:
            # Open while the sequence lives: `close`, or its collection, deletes the file.
            self._file = tempfile.TemporaryFile(prefix="unbounded-entries-")  # noqa: SIM115
            self._pid = os.getpid()
            weakref.finalize(self, self._file.close)
        elif os.getpid() != self._pid:
            # After fork() both processes share the file but each keeps its own end: their
            # records would overwrite each other's.
            raise RuntimeError(
                f"the transcript's spilled entries are in a file opened by process {self._pid}; "
                f"process {os.getpid()} (a fork) cannot read or add to them: open the session "
                "again in this process"
            )
        return self._file

    def _hold(self, position: int, entry: Entry) -> None:
        """Remember the object at a spilled position while anyone else holds it."""
        with contextlib.suppress(TypeError):  # Python 3.10: entries take no weak references
            self._held[position] = entry

    def _at(self, position: int) -> Entry:
        spilled = len(self._offsets)
        if position >= spilled:
            return self._live[position - spilled]
        held = self._held.get(position)
        if held is not None:
            return held
        start = self._offsets[position]
        end = self._offsets[position + 1] if position + 1 < spilled else self._end
        record = os.pread(self._open().fileno(), end - start, start)
        line = self._lines[position]
        entry = Entry(orjson.loads(record), None if line == _NO_LINE else line)
        self._hold(position, entry)
        return entry


def entry_in_place(entries: Sequence[Entry], position: int, entry: Entry | None) -> bool:
    """Whether `entries[position]` is still `entry`: the same object, or an equal one read back
    from a spilled position (spilled records never change, and on Python 3.10 a read gives a
    new object); an incremental reader's "my mark is still there" check."""
    found = entries[position]
    if found is entry:
        return True
    return (
        isinstance(entries, SpilledEntries)
        and position < entries.spilled
        and entry is not None
        and found == entry
    )


__all__ = ["SpilledEntries", "entry_in_place"]
