"""A replay script's plan kept as columns of machine numbers: `PlannedCalls`, `IndexMarks`.

A plan has one entry per recorded call for the whole replay (100,000 calls: 100,000 entries).
As objects (a `PlannedCall` with its tuple of lines, a frozenset of the lines not fed) a call
takes about 250 bytes; as `array` columns it takes about 50 plus its response id. A call is
built back into a `PlannedCall` only when it is read.
"""

from __future__ import annotations

from array import array
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

_NO_LINE = -1
"""The usage-line column's code for a call without usage."""


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A call of the script before its records are read: where its lines are and its times."""

    message_id: str
    lines: tuple[int, ...]
    usage_line: int | None
    """Main-thread index of the line whose usage is the call's (the last with usage)."""
    request_time: float
    response_time: float


class PlannedCalls(Sequence[PlannedCall]):
    """Planned calls in columns; reads as a sequence of `PlannedCall` (module docstring)."""

    def __init__(self, calls: Iterable[PlannedCall] = ()) -> None:
        """The calls, in order."""
        self.message_ids: list[str] = []
        self.request_times = array("d")
        self.response_times = array("d")
        self._usage_lines = array("q")
        self._lines = array("q")
        self._starts = array("q", [0])
        """Call i's lines are `_lines[_starts[i]:_starts[i + 1]]`."""
        for call in calls:
            self.append(call)

    def append(self, call: PlannedCall) -> None:
        """Add a call after the others."""
        self.message_ids.append(call.message_id)
        self.request_times.append(call.request_time)
        self.response_times.append(call.response_time)
        self._usage_lines.append(_NO_LINE if call.usage_line is None else call.usage_line)
        self._lines.extend(call.lines)
        self._starts.append(len(self._lines))

    def __len__(self) -> int:
        return len(self.message_ids)

    @overload
    def __getitem__(self, position: int) -> PlannedCall: ...

    @overload
    def __getitem__(self, position: slice) -> list[PlannedCall]: ...

    def __getitem__(self, position: int | slice) -> PlannedCall | list[PlannedCall]:
        if isinstance(position, slice):
            return [self._row(row) for row in range(*position.indices(len(self)))]
        size = len(self)
        row = position + size if position < 0 else position
        if not 0 <= row < size:
            raise IndexError(f"planned call {position} out of range ({size} calls)")
        return self._row(row)

    def __iter__(self) -> Iterator[PlannedCall]:
        for row in range(len(self)):
            yield self._row(row)

    def _row(self, row: int) -> PlannedCall:
        usage_line = self._usage_lines[row]
        return PlannedCall(
            message_id=self.message_ids[row],
            lines=tuple(self._lines[self._starts[row] : self._starts[row + 1]]),
            usage_line=None if usage_line == _NO_LINE else usage_line,
            request_time=self.request_times[row],
            response_time=self.response_times[row],
        )


class IndexMarks(Container[int]):
    """A set of indices below a bound, one byte per index (`i in marks`)."""

    def __init__(self, size: int, marked: Iterable[int] = ()) -> None:
        """Indices 0 to `size - 1`, those in `marked` marked."""
        self._marks = bytearray(size)
        for index in marked:
            self.add(index)

    def add(self, index: int) -> None:
        """Mark an index (below the bound)."""
        if not 0 <= index < len(self._marks):
            raise IndexError(f"index {index} outside 0..{len(self._marks) - 1}")
        self._marks[index] = 1

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and 0 <= index < len(self._marks) and bool(self._marks[index])

    def __len__(self) -> int:
        """How many indices are marked."""
        return self._marks.count(1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexMarks) and self._marks == other._marks

    __hash__ = None  # type: ignore[assignment]


__all__ = ["IndexMarks", "PlannedCall", "PlannedCalls"]
