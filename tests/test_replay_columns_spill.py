"""The per-call columns of a replay's report (`SimulatedCalls`, `CallSeries`) keep a chunk in
memory and the rest in a temporary file: they read back exactly what was added, and what they
hold in memory does not grow with the calls replayed."""

from __future__ import annotations

import asyncio
import math
import os

import pytest
from forking import runtime_error_in_a_fork
from recorded_calls import long_tool_session

from unbounded.caching.simulator import SimulatedCall
from unbounded.evaluation import simulated_calls
from unbounded.evaluation.call_series import CallPoint, CallSeries
from unbounded.evaluation.replay import ReplayOptions, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.simulated_calls import SimulatedCalls, SpillColumn, SpillFile
from unbounded.policy import Policy


def _simulated(n: int) -> SimulatedCall:
    return SimulatedCall(
        index=n,
        time=1_770_000_000.5 + n / 3,
        query_source=("main", "compact")[n % 2],
        model=("claude-opus-4-6", "claude-haiku-4-5")[n % 2],
        input_tokens=3_000_000_000 + n,
        cache_creation_5m_input_tokens=100 * (n % 4),
        cache_creation_1h_input_tokens=7 * (n % 5),
        cache_read_input_tokens=20_000 + n,
        output_tokens=40 + n,
        cost_usd=0.001 * n + 1 / 7,
        cache_deleted_input_tokens=n % 6,
        breakpoints=tuple(range(n, n + n % 5)),  # 0 to 4 a call: ends fall across chunks
        read_until=None if n % 3 == 0 else n * 2,
        cache_write_cost_usd=n / 9,
        cache_read_cost_usd=n / 11,
    )


def _point(n: int) -> CallPoint:
    return CallPoint(
        index=n,
        time=1_770_000_000.0 + n * 7.25,
        context_tokens=10_000 + n,
        cache_read=9_000 + n,
        cache_write=900,
        uncached_input=100 - n % 3,
        output_tokens=50 + n,
        cost=0.0123456789 * (n + 1),
        recorded_context_tokens=None if n % 4 == 0 else 12_000 + n,
        recorded_cost=None if n % 5 == 0 else 0.001 * n,
        baseline_context_tokens={"none": 20_000 + n, "truncate": 30_000 - n},
        baseline_cost={"none": n / 3, "truncate": n / 7},
        compaction=("full", "session_memory", None)[n % 3],
        microcompact=n % 2 == 1,
    )


def test_a_column_reads_back_its_items_from_the_file_and_from_memory() -> None:
    column = SpillColumn("q", SpillFile(), chunk=8)
    values = [n * 1_000_003 - 5 for n in range(45)]
    column.extend(values)
    assert len(column) == 45 and list(column) == values
    assert [column[n] for n in range(45)] == values  # 5 chunks on disk, 5 items in memory
    assert column[-1] == values[-1] and column[-45] == values[0]
    assert column.items(3, 30) == values[3:30] and column.items(40, 40) == []
    with pytest.raises(IndexError, match="out of range"):
        column[45]
    with pytest.raises(IndexError, match="out of range"):
        column[-46]


def test_a_column_keeps_one_chunk_in_memory_and_one_read_back() -> None:
    column = SpillColumn("d", SpillFile(), chunk=16)
    column.extend(float(n) for n in range(1_000))
    assert column.held_bytes == (1_000 % 16) * 8  # the rest is in the file
    assert column[3] == 3.0
    assert column.held_bytes == (1_000 % 16 + 16) * 8  # and the chunk read back


def test_reading_past_the_end_stops_at_the_end_as_an_array_slice_does() -> None:
    column = SpillColumn("q", SpillFile(), chunk=3)
    column.extend(range(4))  # one chunk in the file, one item in memory
    assert column.items(2, 5) == [2, 3]
    assert column.items(0, 100) == [0, 1, 2, 3] and column.items(4, 9) == []


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offsets of every `SpillFile.read`, in order."""
    offsets: list[int] = []
    read = SpillFile.read

    def counting(self: SpillFile, offset: int, size: int) -> bytes:
        offsets.append(offset)
        return read(self, offset, size)

    monkeypatch.setattr(SpillFile, "read", counting)
    return offsets


def test_reading_a_spilled_column_in_order_reads_the_file_once_a_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    column = SpillColumn("q", SpillFile(), chunk=8)
    column.extend(range(45))  # 5 chunks in the file
    reads = _counting_reads(monkeypatch)
    assert [column[n] for n in range(45)] == list(range(45))
    assert len(reads) == 5 and reads == sorted(set(reads))
    reads.clear()
    assert list(column) == list(range(45)) and len(reads) == 5
    reads.clear()
    assert column.items(0, 45) == list(range(45)) and len(reads) == 5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_fork_can_neither_add_to_nor_read_a_spilled_column() -> None:
    """Both processes would append at the same offset of the shared file: the fork is
    refused, and the parent reads back what it added."""
    column = SpillColumn("q", SpillFile(), chunk=2)
    column.extend(range(4))  # two chunks in the file
    assert "opened by process" in runtime_error_in_a_fork(lambda: column.extend(range(100, 104)))
    assert "(a fork) cannot read" in runtime_error_in_a_fork(lambda: column[0])
    column.extend(range(200, 204))
    assert list(column) == [0, 1, 2, 3, 200, 201, 202, 203]
    fresh = SpillColumn("q", SpillFile(), chunk=2)

    def spill_in_the_child() -> None:  # the file is opened there: the child's own
        fresh.extend(range(4))
        if fresh.items(0, 4) != [0, 1, 2, 3]:
            raise AssertionError(fresh.items(0, 4))

    assert runtime_error_in_a_fork(spill_in_the_child) == ""


def test_spilled_simulated_calls_read_back_equal_to_what_was_added() -> None:
    calls = [_simulated(n) for n in range(300)]
    kept = SimulatedCalls(chunk=16)
    kept.extend(calls)
    assert len(kept) == 300 and list(kept) == calls
    assert [kept[n] for n in range(300)] == calls  # by position: chunks read back out of order
    assert kept[-1] == calls[-1] and kept[17:290:13] == calls[17:290:13]


def test_a_spilled_series_reads_back_every_figure() -> None:
    points = [_point(n) for n in range(200)]
    series = CallSeries(chunk=16)
    for point in points:
        series.append(point)
    assert list(series) == points
    assert [p.to_dict() for p in series] == [p.to_dict() for p in points]
    assert series[5] == points[5] and series[-1] == points[-1]
    assert series[0].recorded_cost is None and math.isnan(series._recorded_cost[0])


def _held(replayer: _Replayer) -> int:
    runs = [replayer.ours, *(baseline.run for baseline in replayer.baselines)]
    columns = [*replayer.points.columns()]
    for run in runs:
        columns += run.main_calls.columns() + run.side_calls.columns()
    return sum(column.held_bytes for column in columns)


def test_the_columns_of_a_replay_hold_no_more_at_300_calls_than_at_100(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(simulated_calls, "CHUNK", 8)
    transcript = long_tool_session(
        300,
        result=lambda n: f"def handler_{n}(request):\n    return route(request, {n})\n" * 20,
        written=500,
        model="claude-sonnet-4-6",
    )
    policy = Policy.from_env().with_changes(background_summary=False)
    options = ReplayOptions(session_memory=False, policy=policy)
    replayer = _Replayer(ReplayRecording.of(transcript), options)
    held: dict[int, int] = {}

    def progress(done: int, total: int) -> None:
        if done in (100, 300):
            held[done] = _held(replayer)

    report = asyncio.run(replayer.run(progress))
    assert report.calls == 300 and len(report.baselines) >= 4
    # Every column holds at most its newest chunk and one read back (none yet): a few
    # hundred bytes, where all 200 calls' rows of six strategies take over 150 KB.
    assert held[300] - held[100] < 4_000
    assert len(report.ours.main_calls) == 300 and len(list(report.points)) == 300
