"""The per-call figures of a replay, kept as columns of machine numbers.

A replay of 100,000 calls keeps one row per call for its charts and `--series`. As objects
(`CallPoint`, each with two dicts of baseline figures) a row takes about a kilobyte; as
columns of `array` numbers it takes about 100 bytes plus 16 per baseline. A row is built back
into a `CallPoint` only when it is read.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, overload

from unbounded.errors import ConfigError

CompactionKind = Literal["full", "session_memory"]
_KINDS: tuple[CompactionKind | None, ...] = (None, "full", "session_memory")
"""The compaction column's codes, by position."""
_NO_TOKENS = -1
"""The recorded-tokens column's code for a call without recorded usage."""


def iso_time(seconds: float) -> str:
    """A recorded time (seconds since the epoch) as ISO 8601 to the second, in UTC."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class CallPoint:
    """The figures of one replayed call, for charts and tables."""

    index: int
    time: float
    context_tokens: int
    """Our request's tokens (input + cache creation + cache read)."""
    cache_read: int
    cache_write: int
    uncached_input: int
    output_tokens: int
    cost: float
    """Our cost of this step, summary calls included."""
    recorded_context_tokens: int | None
    recorded_cost: float | None
    baseline_context_tokens: dict[str, int]
    baseline_cost: dict[str, float]
    compaction: CompactionKind | None = None
    microcompact: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "index": self.index,
            "time": iso_time(self.time),
            "context_tokens": self.context_tokens,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "uncached_input": self.uncached_input,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost, 6),
            "recorded_context_tokens": self.recorded_context_tokens,
            "recorded_cost": round(self.recorded_cost, 6)
            if self.recorded_cost is not None
            else None,
            "baseline_context_tokens": self.baseline_context_tokens,
            "baseline_cost": {k: round(v, 6) for k, v in self.baseline_cost.items()},
            "compaction": self.compaction,
            "microcompact": self.microcompact,
        }


_INT_COLUMNS = (
    "index",
    "context_tokens",
    "cache_read",
    "cache_write",
    "uncached_input",
    "output_tokens",
)


class CallSeries(Sequence[CallPoint]):
    """Replayed calls' figures in columns; reads as a sequence of `CallPoint` (module
    docstring). Every row has the figures of the same baselines, named by the first."""

    def __init__(self) -> None:
        self._ints = {name: array("q") for name in _INT_COLUMNS}
        self._time = array("d")
        self._cost = array("d")
        self._recorded_tokens = array("q")
        self._recorded_cost = array("d")  # NaN: no recorded usage
        self._compaction = array("b")
        self._microcompact = array("b")
        self._baselines: tuple[str, ...] | None = None
        self._baseline_tokens: list[array[int]] = []
        self._baseline_cost: list[array[float]] = []

    def append(self, point: CallPoint) -> None:
        """Add one call's figures (its baselines must be those of the first call)."""
        names = tuple(point.baseline_context_tokens)
        if self._baselines is None:
            self._baselines = names
            self._baseline_tokens = [array("q") for _ in names]
            self._baseline_cost = [array("d") for _ in names]
        if names != self._baselines or tuple(point.baseline_cost) != names:
            raise ConfigError(
                f"call {point.index}: baseline figures for {list(names)} (costs for "
                f"{list(point.baseline_cost)}), where the series holds {list(self._baselines)}"
            )
        for name in _INT_COLUMNS:
            self._ints[name].append(getattr(point, name))
        self._time.append(point.time)
        self._cost.append(point.cost)
        recorded = point.recorded_context_tokens
        self._recorded_tokens.append(_NO_TOKENS if recorded is None else recorded)
        cost = point.recorded_cost
        self._recorded_cost.append(math.nan if cost is None else cost)
        self._compaction.append(_KINDS.index(point.compaction))
        self._microcompact.append(int(point.microcompact))
        for position, name in enumerate(names):
            self._baseline_tokens[position].append(point.baseline_context_tokens[name])
            self._baseline_cost[position].append(point.baseline_cost[name])

    def __len__(self) -> int:
        return len(self._time)

    @overload
    def __getitem__(self, position: int) -> CallPoint: ...

    @overload
    def __getitem__(self, position: slice) -> list[CallPoint]: ...

    def __getitem__(self, position: int | slice) -> CallPoint | list[CallPoint]:
        if isinstance(position, slice):
            return [self._row(row) for row in range(*position.indices(len(self)))]
        size = len(self)
        row = position + size if position < 0 else position
        if not 0 <= row < size:
            raise IndexError(f"call series index {position} out of range ({size} calls)")
        return self._row(row)

    def __iter__(self) -> Iterator[CallPoint]:
        for row in range(len(self)):
            yield self._row(row)

    def _row(self, row: int) -> CallPoint:
        ints = self._ints
        names = self._baselines or ()
        recorded = self._recorded_tokens[row]
        cost = self._recorded_cost[row]
        return CallPoint(
            index=ints["index"][row],
            time=self._time[row],
            context_tokens=ints["context_tokens"][row],
            cache_read=ints["cache_read"][row],
            cache_write=ints["cache_write"][row],
            uncached_input=ints["uncached_input"][row],
            output_tokens=ints["output_tokens"][row],
            cost=self._cost[row],
            recorded_context_tokens=None if recorded == _NO_TOKENS else recorded,
            recorded_cost=None if math.isnan(cost) else cost,
            baseline_context_tokens={
                name: self._baseline_tokens[at][row] for at, name in enumerate(names)
            },
            baseline_cost={name: self._baseline_cost[at][row] for at, name in enumerate(names)},
            compaction=_KINDS[self._compaction[row]],
            microcompact=bool(self._microcompact[row]),
        )


__all__ = ["CallPoint", "CallSeries", "CompactionKind", "iso_time"]
