"""A strategy's simulated calls kept as columns of machine numbers.

Every strategy of a replay keeps each of its calls (`StrategyRun.main_calls`): at 100,000
calls and half a dozen strategies, `SimulatedCall` objects (each with its own floats, large
ints and a tuple of breakpoints) take hundreds of megabytes. Kept as `array` columns a call
takes about 100 bytes, and reads back as an equal `SimulatedCall`, built when it is read.
Token counts, the call index and prices take 8 bytes each; flat positions (breakpoints, the
last block read), where each call's breakpoints end and the codes of its names take 4 (a
request of 2**31 blocks is not one the API takes).

The columns are read back only for the report, at the end: each keeps its newest `CHUNK`
items in memory and moves every full chunk to its table's anonymous temporary file
(`SpillColumn`), so a table holds at most a chunk a column whatever the length of the replay
(at 100,000 calls the six strategies' columns would otherwise hold about 75 MB). A table of
fewer than `CHUNK` calls never opens a file. The file belongs to the process that opened it:
after fork() the other process reading or adding to a spilled column raises `RuntimeError`.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import IO, Any, overload

from unbounded.caching.simulator import SimulatedCall

_INT_FIELDS = (
    "index",
    "input_tokens",
    "cache_creation_5m_input_tokens",
    "cache_creation_1h_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "cache_deleted_input_tokens",
)
_FLOAT_FIELDS = ("time", "cost_usd", "cache_write_cost_usd", "cache_read_cost_usd")
_NOTHING_READ = -1
"""The `read_until` column's code for a call that read nothing from the cache."""
CHUNK = 4096
"""Items a `SpillColumn` keeps in memory before it moves them to its file (32 KiB of 8-byte
items: a read back costs one `pread` per chunk, not one per item)."""


class SpillFile:
    """An anonymous temporary file that the columns of one table move their full chunks to;
    opened at the first chunk, deleted when the table is collected."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._end = 0
        self._pid = 0
        """The process that opened the file (its id)."""

    def _descriptor(self, file: IO[bytes]) -> int:
        """The open file's descriptor, in the process that opened it only: after fork() both
        processes would append at the same offset, each over the other's chunks."""
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"these simulated-call columns spilled to a file opened by process {self._pid}; "
                f"process {os.getpid()} (a fork) cannot read or add to them: build the report "
                "in the process that reads it"
            )
        return file.fileno()

    def write(self, data: bytes) -> int:
        """Append `data` at the end of the file; the offset it starts at."""
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="unbounded-columns-")  # noqa: SIM115
            self._pid = os.getpid()
            weakref.finalize(self, self._file.close)
        descriptor, offset = self._descriptor(self._file), self._end
        written = 0
        while written < len(data):  # pwrite may write part of it
            written += os.pwrite(descriptor, data[written:], offset + written)
        self._end += len(data)
        return offset

    def read(self, offset: int, size: int) -> bytes:
        """`size` bytes written before, from `offset`."""
        if self._file is None:
            raise IndexError(f"nothing was written at {offset}: the file is empty")
        descriptor = self._descriptor(self._file)
        parts: list[bytes] = []
        while size:  # pread may return part of it
            part = os.pread(descriptor, size, offset)
            if not part:
                raise IndexError(f"{size} bytes at {offset} were never written")
            parts.append(part)
            offset += len(part)
            size -= len(part)
        return b"".join(parts)


class SpillColumn:
    """A column of machine numbers (an `array` type code) that keeps its newest chunk in
    memory and the full chunks before it in a `SpillFile`; reads by position like an array.
    The last chunk read back is kept, so reading in order costs one file read a chunk."""

    __slots__ = ("_cached", "_cached_chunk", "_chunk", "_file", "_offsets", "_tail")

    def __init__(self, typecode: str, file: SpillFile, chunk: int | None = None) -> None:
        self._tail: array[Any] = array(typecode)
        self._file = file
        self._chunk = chunk or CHUNK
        self._offsets = array("q")
        """Where each full chunk starts in the file, in order."""
        self._cached: array[Any] = array(typecode)
        self._cached_chunk = -1

    @property
    def itemsize(self) -> int:
        """Bytes an item takes."""
        return self._tail.itemsize

    @property
    def held_bytes(self) -> int:
        """Bytes of items this column holds in memory (its newest chunk and the one last
        read back), not counting the ones in its file."""
        return (len(self._tail) + len(self._cached)) * self.itemsize

    def append(self, value: Any) -> None:
        """Add one item at the end."""
        self._tail.append(value)
        if len(self._tail) >= self._chunk:
            self._offsets.append(self._file.write(self._tail.tobytes()))
            del self._tail[:]

    def extend(self, values: Iterable[Any]) -> None:
        """Add items at the end, in order."""
        for value in values:
            self.append(value)

    def __len__(self) -> int:
        return len(self._offsets) * self._chunk + len(self._tail)

    def _chunk_items(self, chunk: int) -> array[Any]:
        if chunk == len(self._offsets):
            return self._tail
        if chunk != self._cached_chunk:
            cached = array(self._tail.typecode)
            cached.frombytes(self._file.read(self._offsets[chunk], self._chunk * self.itemsize))
            self._cached, self._cached_chunk = cached, chunk
        return self._cached

    def __getitem__(self, position: int) -> Any:
        size = len(self)
        row = position + size if position < 0 else position
        if not 0 <= row < size:
            raise IndexError(f"column index {position} out of range ({size} items)")
        chunk, at = divmod(row, self._chunk)
        return self._chunk_items(chunk)[at]

    def items(self, start: int, stop: int) -> list[Any]:
        """The items from `start` to `stop` (positions from 0, `stop` excluded; a `stop` past
        the end reads to the end, as an array slice does)."""
        stop = min(stop, len(self))
        out: list[Any] = []
        size = self._chunk
        # One pass over the chunks the range touches: bounded whatever `start` and `stop` are.
        for chunk in range(start // size, (stop + size - 1) // size):
            base = chunk * size
            out.extend(self._chunk_items(chunk)[max(start - base, 0) : stop - base])
        return out

    def __iter__(self) -> Iterator[Any]:
        """The items in order. Adding items while iterating is not supported: the in-memory
        chunk being read is emptied when it fills and moves to the file, so the iteration may
        stop early or skip items; to read while adding, read positions below a `len` taken
        before."""
        for chunk in range(len(self._offsets) + 1):
            yield from self._chunk_items(chunk)


@dataclass(frozen=True, slots=True)
class CallTotals:
    """Sums over a table of simulated calls (`SimulatedCalls.totals`)."""

    calls: int
    prompt_tokens: int
    """Input + cache creation + cache read, over every call."""
    cache_read_input_tokens: int
    peak_prompt_tokens: int
    """The largest call's prompt tokens (0 for no call)."""
    cost_usd: float
    cache_write_cost_usd: float
    cache_read_cost_usd: float


class SimulatedCalls(Sequence[SimulatedCall]):
    """Simulated calls in columns; reads as a sequence of `SimulatedCall` (module docstring)."""

    def __init__(self, chunk: int | None = None) -> None:
        """`chunk`: items a column keeps in memory (default `CHUNK`, read when made)."""
        file = SpillFile()
        self._ints = {name: SpillColumn("q", file, chunk) for name in _INT_FIELDS}
        self._floats = {name: SpillColumn("d", file, chunk) for name in _FLOAT_FIELDS}
        self._read_until = SpillColumn("i", file, chunk)
        self._breakpoints = SpillColumn("i", file, chunk)
        """Every call's breakpoints, one after the other; `_ends` says where each call's end."""
        self._ends = SpillColumn("I", file, chunk)
        self._names: list[str] = []
        """The distinct query sources and models, coded by position."""
        self._codes: dict[str, int] = {}
        self._source = SpillColumn("I", file, chunk)
        self._model = SpillColumn("I", file, chunk)

    def append(self, call: SimulatedCall) -> None:
        """Add one call."""
        for name in _INT_FIELDS:
            self._ints[name].append(getattr(call, name))
        for name in _FLOAT_FIELDS:
            self._floats[name].append(getattr(call, name))
        self._read_until.append(_NOTHING_READ if call.read_until is None else call.read_until)
        self._breakpoints.extend(call.breakpoints)
        self._ends.append(len(self._breakpoints))
        self._source.append(self._code(call.query_source))
        self._model.append(self._code(call.model))

    def extend(self, calls: Sequence[SimulatedCall]) -> None:
        """Add several calls in order."""
        for call in calls:
            self.append(call)

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self._names)
            self._names.append(name)
        return code

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, position: int) -> SimulatedCall: ...

    @overload
    def __getitem__(self, position: slice) -> list[SimulatedCall]: ...

    def __getitem__(self, position: int | slice) -> SimulatedCall | list[SimulatedCall]:
        if isinstance(position, slice):
            return [self._row(row) for row in range(*position.indices(len(self)))]
        size = len(self)
        row = position + size if position < 0 else position
        if not 0 <= row < size:
            raise IndexError(f"simulated call index {position} out of range ({size} calls)")
        return self._row(row)

    def __iter__(self) -> Iterator[SimulatedCall]:
        # Column by column, chunk by chunk: no position lookups per item.
        names = self._names
        breakpoints = iter(self._breakpoints)
        start = 0
        rows = zip(
            *(self._ints[name] for name in _INT_FIELDS),
            *(self._floats[name] for name in _FLOAT_FIELDS),
            self._read_until,
            self._ends,
            self._source,
            self._model,
            strict=True,
        )
        for row in rows:
            index, uncached, write_5m, write_1h, read, output, deleted = row[:7]
            time, cost, write_cost, read_cost, read_until, end, source, model = row[7:]
            yield SimulatedCall(
                index=index,
                time=time,
                query_source=names[source],
                model=names[model],
                input_tokens=uncached,
                cache_creation_5m_input_tokens=write_5m,
                cache_creation_1h_input_tokens=write_1h,
                cache_read_input_tokens=read,
                output_tokens=output,
                cost_usd=cost,
                cache_deleted_input_tokens=deleted,
                breakpoints=tuple(islice(breakpoints, end - start)),
                read_until=None if read_until == _NOTHING_READ else read_until,
                cache_write_cost_usd=write_cost,
                cache_read_cost_usd=read_cost,
            )
            start = end

    def _row(self, row: int) -> SimulatedCall:
        ints, floats = self._ints, self._floats
        start = self._ends[row - 1] if row else 0
        read_until = self._read_until[row]
        return SimulatedCall(
            index=ints["index"][row],
            time=floats["time"][row],
            query_source=self._names[self._source[row]],
            model=self._names[self._model[row]],
            input_tokens=ints["input_tokens"][row],
            cache_creation_5m_input_tokens=ints["cache_creation_5m_input_tokens"][row],
            cache_creation_1h_input_tokens=ints["cache_creation_1h_input_tokens"][row],
            cache_read_input_tokens=ints["cache_read_input_tokens"][row],
            output_tokens=ints["output_tokens"][row],
            cost_usd=floats["cost_usd"][row],
            cache_deleted_input_tokens=ints["cache_deleted_input_tokens"][row],
            breakpoints=tuple(self._breakpoints.items(start, self._ends[row])),
            read_until=None if read_until == _NOTHING_READ else read_until,
            cache_write_cost_usd=floats["cache_write_cost_usd"][row],
            cache_read_cost_usd=floats["cache_read_cost_usd"][row],
        )

    def totals(self) -> CallTotals:
        """The table's sums, read from its columns: no `SimulatedCall` is built (a report's
        totals over 100,000 calls and half a dozen strategies built each call again for
        every figure). Floats are added in call order, as a sum over the calls adds them."""
        ints, floats = self._ints, self._floats
        prompts = map(
            sum,
            zip(
                ints["input_tokens"],
                ints["cache_creation_5m_input_tokens"],
                ints["cache_creation_1h_input_tokens"],
                ints["cache_read_input_tokens"],
                strict=True,
            ),
        )
        prompt = peak = 0
        for tokens in prompts:
            prompt += tokens
            peak = max(peak, tokens)
        return CallTotals(
            calls=len(self),
            prompt_tokens=prompt,
            cache_read_input_tokens=sum(ints["cache_read_input_tokens"]),
            peak_prompt_tokens=peak,
            cost_usd=sum(floats["cost_usd"]),
            cache_write_cost_usd=sum(floats["cache_write_cost_usd"]),
            cache_read_cost_usd=sum(floats["cache_read_cost_usd"]),
        )

    def columns(self) -> list[SpillColumn]:
        """Every column, for what they hold."""
        return [
            *self._ints.values(),
            *self._floats.values(),
            self._read_until,
            self._breakpoints,
            self._ends,
            self._source,
            self._model,
        ]


__all__ = ["CHUNK", "CallTotals", "SimulatedCalls", "SpillColumn", "SpillFile"]
