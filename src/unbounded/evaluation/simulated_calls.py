"""A strategy's simulated calls kept as columns of machine numbers.

Every strategy of a replay keeps each of its calls (`StrategyRun.main_calls`): at 100,000
calls and half a dozen strategies, `SimulatedCall` objects (each with its own floats, large
ints and a tuple of breakpoints) take hundreds of megabytes. Kept as `array` columns a call
takes about 100 bytes, and reads back as an equal `SimulatedCall`, built when it is read.
Token counts, the call index and prices take 8 bytes each; flat positions (breakpoints, the
last block read), where each call's breakpoints end and the codes of its names take 4 (a
request of 2**31 blocks is not one the API takes).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import overload

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


class SimulatedCalls(Sequence[SimulatedCall]):
    """Simulated calls in columns; reads as a sequence of `SimulatedCall` (module docstring)."""

    def __init__(self) -> None:
        self._ints = {name: array("q") for name in _INT_FIELDS}
        self._floats = {name: array("d") for name in _FLOAT_FIELDS}
        self._read_until = array("i")
        self._breakpoints = array("i")
        """Every call's breakpoints, one after the other; `_ends` says where each call's end."""
        self._ends = array("I")
        self._names: list[str] = []
        """The distinct query sources and models, coded by position."""
        self._codes: dict[str, int] = {}
        self._source = array("I")
        self._model = array("I")

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
        for row in range(len(self)):
            yield self._row(row)

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
            breakpoints=tuple(self._breakpoints[start : self._ends[row]]),
            read_until=None if read_until == _NOTHING_READ else read_until,
            cache_write_cost_usd=floats["cache_write_cost_usd"][row],
            cache_read_cost_usd=floats["cache_read_cost_usd"][row],
        )


__all__ = ["SimulatedCalls"]
