"""The per-call figures of a replay, kept as columns of machine numbers.

A replay of 100,000 calls keeps one row per call for its charts and `--series`. As objects
(`CallPoint`, each with two dicts of baseline figures) a row takes about a kilobyte; as
columns of machine numbers it takes about 80 bytes plus 16 per baseline, and those live in a
temporary file once a chunk of them is full (`SpillColumn`): the report reads them only at the
end. A row is built back into a `CallPoint` only when it is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, overload

from unbounded.errors import ConfigError
from unbounded.evaluation.simulated_calls import SpillColumn, SpillFile

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

    def __init__(self, chunk: int | None = None) -> None:
        """`chunk`: items a column keeps in memory (default `CHUNK`, read when made)."""
        self._file = file = SpillFile()
        self._chunk = chunk
        self._ints = {name: SpillColumn("q", file, chunk) for name in _INT_COLUMNS}
        self._time = SpillColumn("d", file, chunk)
        self._cost = SpillColumn("d", file, chunk)
        self._recorded_tokens = SpillColumn("q", file, chunk)
        self._recorded_cost = SpillColumn("d", file, chunk)  # NaN: no recorded usage
        self._compaction = SpillColumn("b", file, chunk)
        self._microcompact = SpillColumn("b", file, chunk)
        self._baselines: tuple[str, ...] | None = None
        self._baseline_tokens: list[SpillColumn] = []
        self._baseline_cost: list[SpillColumn] = []

    def columns(self) -> list[SpillColumn]:
        """Every column, for what they hold."""
        return [
            *self._ints.values(),
            self._time,
            self._cost,
            self._recorded_tokens,
            self._recorded_cost,
            self._compaction,
            self._microcompact,
            *self._baseline_tokens,
            *self._baseline_cost,
        ]

    def append(self, point: CallPoint) -> None:
        """Add one call's figures (its baselines must be those of the first call)."""
        names = tuple(point.baseline_context_tokens)
        if self._baselines is None:
            self._baselines = names
            file, chunk = self._file, self._chunk
            self._baseline_tokens = [SpillColumn("q", file, chunk) for _ in names]
            self._baseline_cost = [SpillColumn("d", file, chunk) for _ in names]
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

    def costs(self) -> Iterator[tuple[float, float | None]]:
        """Each call's cost and recorded cost (None: no recorded usage), read from the two
        columns alone (no row built)."""
        for cost, recorded in zip(self._cost, self._recorded_cost, strict=True):
            yield cost, None if math.isnan(recorded) else recorded

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
        # Column by column, chunk by chunk: no position lookups per item.
        names = self._baselines or ()
        width = len(names)
        rows = zip(
            *(self._ints[name] for name in _INT_COLUMNS),
            self._time,
            self._cost,
            self._recorded_tokens,
            self._recorded_cost,
            self._compaction,
            self._microcompact,
            *self._baseline_tokens,
            *self._baseline_cost,
            strict=True,
        )
        for row in rows:
            index, context, read, write, uncached, output = row[:6]
            time, cost, recorded, recorded_cost, compaction, microcompact = row[6:12]
            tokens, costs = row[12 : 12 + width], row[12 + width :]
            yield CallPoint(
                index=index,
                time=time,
                context_tokens=context,
                cache_read=read,
                cache_write=write,
                uncached_input=uncached,
                output_tokens=output,
                cost=cost,
                recorded_context_tokens=None if recorded == _NO_TOKENS else recorded,
                recorded_cost=None if math.isnan(recorded_cost) else recorded_cost,
                baseline_context_tokens=dict(zip(names, tokens, strict=True)),
                baseline_cost=dict(zip(names, costs, strict=True)),
                compaction=_KINDS[compaction],
                microcompact=bool(microcompact),
            )

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
