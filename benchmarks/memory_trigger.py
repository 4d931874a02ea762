"""The session-memory trigger's per-turn cost against history length.

A view of tool-call turns (an assistant reply calling one tool, then its result; the turns of
`core_speed.generated_turn`) grows past 200 and then 3,000 entries, with no notes yet (the
pointer None: everything is uncovered, the case that walked the whole view). At each turn one
turn is appended and the figures `SessionMemory.should_update` needs are read:

- `trigger_us_at_200` / `trigger_us_at_3000`: `ProgressTracker.progress` (adds the new
  entries to running sums). Target: the second within 1.5x of the first.
- `from_scratch_us_at_200` / `from_scratch_us_at_3000`: `progress_since` (walks the view),
  what `should_update` did before, for comparison.

Each figure is the median over the turns just past the mark. Run: python
benchmarks/memory_trigger.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable

from core_speed import generated_turn  # beside this script

from unbounded.compaction.memory_trigger import ProgressTracker, progress_since
from unbounded.model.entries import Entry

MARKS = (200, 3_000)


def per_turn_us(read: Callable[[list[Entry]], object], mark: int, turns: int) -> float:
    """Median µs of `read(view)` after each of `turns` appended turns past `mark` entries."""
    view: list[Entry] = [Entry.user("Start the task.")]
    index = 0
    while len(view) < mark:
        view += generated_turn(index)
        index += 1
        read(view)  # the reader sees every turn, as the session's trigger does
    samples: list[float] = []
    for _ in range(turns):
        view += generated_turn(index)
        index += 1
        start = time.perf_counter()
        read(view)
        samples.append(time.perf_counter() - start)
    return round(statistics.median(samples) * 1e6, 1)


def run(quick: bool = False) -> dict[str, float]:
    """The four figures of the module docstring."""
    turns = 30 if quick else 200
    figures: dict[str, float] = {}
    for mark in MARKS:
        tracked = functools.partial(ProgressTracker().progress, updated_through=None)
        figures[f"trigger_us_at_{mark}"] = per_turn_us(tracked, mark, turns)
        from_scratch = functools.partial(progress_since, updated_through=None)
        figures[f"from_scratch_us_at_{mark}"] = per_turn_us(from_scratch, mark, turns)
    return figures


def main() -> int:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed turns")
    print(json.dumps(run(quick=parser.parse_args().quick), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
