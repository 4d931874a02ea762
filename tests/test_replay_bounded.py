"""What a replay's run side holds and reads as the session grows: the per-call series as
columns (evaluation/call_series.py), and each compaction scored on the stretch it closed
(`SessionTranscript.keep_stretches`), never on a slice of the whole history."""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Sequence
from typing import Any

import pytest
from recorded_calls import long_tool_session

from unbounded.caching.simulator import SimulatedCall
from unbounded.catalog import ModelInfo
from unbounded.errors import ConfigError
from unbounded.evaluation.baselines import StrategyRun
from unbounded.evaluation.call_series import CallPoint, CallSeries
from unbounded.evaluation.replay import ReplayOptions, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.simulated_calls import SimulatedCalls
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.model.spilled_entries import SpilledEntries
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import MemoryStore

MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)


def _point(index: int, *, baselines: tuple[str, ...] = ("none", "truncate")) -> CallPoint:
    return CallPoint(
        index=index,
        time=1_770_000_000.0 + index * 7.25,
        context_tokens=10_000 + index,
        cache_read=9_000 + index,
        cache_write=900,
        uncached_input=100 - index % 3,
        output_tokens=50 + index,
        cost=0.0123456789 * (index + 1),
        recorded_context_tokens=None if index % 4 == 0 else 0 if index % 4 == 1 else 12_000 + index,
        recorded_cost=None if index % 5 == 0 else 0.001 * index,
        baseline_context_tokens={
            name: 20_000 + index * (n + 1) for n, name in enumerate(baselines)
        },
        baseline_cost={name: 0.02 * index + n / 3 for n, name in enumerate(baselines)},
        compaction=("full", "session_memory", None)[index % 3],
        microcompact=index % 2 == 1,
    )


def test_the_series_reads_back_every_figure_it_was_given() -> None:
    points = [_point(n) for n in range(40)]
    series = CallSeries()
    for point in points:
        series.append(point)
    assert len(series) == 40
    assert list(series) == points
    assert [p.to_dict() for p in series] == [p.to_dict() for p in points]
    assert series[-1] == points[-1] and series[0] == points[0]
    assert series[3:9:2] == points[3:9:2]
    with pytest.raises(IndexError, match="out of range"):
        series[40]
    with pytest.raises(IndexError, match="out of range"):
        series[-41]


def test_a_series_without_baselines_reads_back_empty_figures() -> None:
    series = CallSeries()
    point = _point(7, baselines=())
    series.append(point)
    assert series[0] == point and series[0].baseline_cost == {}


def test_a_call_with_other_baselines_than_the_first_is_refused() -> None:
    series = CallSeries()
    series.append(_point(0))
    with pytest.raises(ConfigError, match=r"call 1: baseline figures for \['none'\]"):
        series.append(_point(1, baselines=("none",)))
    assert len(series) == 1  # nothing half-added


def _reachable(root: Any) -> int:
    """Objects reachable from `root` (arrays count as one each: their numbers are not objects)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        stack.extend(gc.get_referents(item))
    return len(seen)


def test_the_series_holds_no_object_per_call() -> None:
    small, large = CallSeries(), CallSeries()
    for n in range(10):
        small.append(_point(n))
    for n in range(2_000):
        large.append(_point(n))
    # A list of points would hold a CallPoint and two dicts (and their numbers) per call.
    assert _reachable(large) - _reachable(small) < 50


def test_a_missing_recorded_cost_is_told_from_a_zero_one() -> None:
    series = CallSeries()
    for n in (5, 6):
        series.append(_point(n))
    assert series[0].recorded_cost is None
    assert series[1].recorded_cost is not None and math.isclose(series[1].recorded_cost, 0.006)


# -- the stretches a compaction closed -----------------------------------------------------------


def _boundary(pre: int, **kwargs: Any) -> Entry:
    return create_compact_boundary("auto", pre, **kwargs)


def _turn(n: int) -> list[Entry]:
    return [
        Entry.user(f"question {n}"),
        Entry.assistant([{"type": "text", "text": f"answer {n}"}], message_id=f"m{n}"),
    ]


def test_each_boundary_is_kept_with_the_view_it_closed() -> None:
    transcript = SessionTranscript(MemoryStore(), [], [])
    transcript.keep_stretches()
    whole: list[Entry] = []

    def append(entries: list[Entry]) -> None:
        transcript.append(entries)
        whole.extend(entries)

    append(_turn(0) + _turn(1))
    first = _boundary(900)
    append([first, Entry.user("summary one", is_compact_summary=True)])
    append(_turn(2))
    # Three boundaries in one batch, the first after new entries, the second keeping two
    # messages of its view verbatim (a partial compaction names them by uuid), the third
    # closing a view that holds them.
    second = _boundary(800)
    summary_two = Entry.user("summary two", is_compact_summary=True)
    kept = _turn(5)
    third = _boundary(700)
    third.compact_metadata["preservedSegment"] = {
        "headUuid": kept[0].uuid,
        "tailUuid": kept[-1].uuid,
        "anchorUuid": third.uuid,
    }
    fourth = _boundary(600)
    append([*_turn(4), second, summary_two, *kept, third, *_turn(6), fourth])
    stretches = transcript.take_stretches()
    assert [boundary for boundary, _ in stretches] == [first, second, third, fourth]
    spliced = stretches[-1][1]
    assert [e.uuid for e in spliced[1:3]] == [e.uuid for e in kept]  # the kept pair came back
    for boundary, stretch in stretches:
        position = next(i for i, e in enumerate(whole) if e is boundary)
        expected = messages_after_compact_boundary(whole[:position])
        assert [e.data for e in stretch] == [e.data for e in expected]
    assert transcript.take_stretches() == []  # taken once


def test_a_transcript_that_was_not_asked_keeps_no_stretch() -> None:
    transcript = SessionTranscript(MemoryStore(), [], [])
    transcript.append([*_turn(0), _boundary(500), Entry.user("s", is_compact_summary=True)])
    assert transcript.take_stretches() == []


class _SliceCounter(SpilledEntries):
    """The session's entries, counting how many entries each slice read copies."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        super().__init__(entries)
        self.counting = False
        self.largest = 0

    def __getitem__(self, key: Any) -> Any:
        if self.counting and isinstance(key, slice):
            self.largest = max(self.largest, len(range(*key.indices(len(self)))))
        return super().__getitem__(key)


def _long_session(calls: int) -> Transcript:
    """A recorded session whose results are large enough to compact every few dozen calls."""
    return long_tool_session(
        calls,
        result=lambda n: f"def handler_{n}(request):\n    return route(request, {n})\n" * 60,
        written=2_000,
        model=MODEL.name,
    )


def test_compaction_scoring_reads_only_the_stretch_since_the_last_boundary() -> None:
    recording = ReplayRecording.of(_long_session(240))
    policy = Policy.from_env().with_changes(background_summary=False)
    options = ReplayOptions(baselines=False, session_memory=False, policy=policy, window=60_000)
    replayer = _Replayer(recording, options)
    transcript = replayer.session.transcript
    counted = _SliceCounter(transcript.entries)
    transcript._entries = counted  # the replay's own spilling sequence, counted
    scored: list[int] = []
    original = replayer._compactions

    def compactions(*args: Any) -> Any:
        counted.counting = True
        try:
            kind = original(*args)
        finally:
            counted.counting = False
        if kind is not None:
            scored.append(len(counted))
        return kind

    replayer._compactions = compactions  # type: ignore[method-assign]
    report = asyncio.run(replayer.run(None))
    assert report.compactions >= 4 and len(scored) == report.compactions
    # Each compaction read at most the entries its own step appended, however long the
    # history it followed (the last one follows several hundred entries).
    assert scored[-1] > 300
    assert counted.largest <= 8


def _simulated(n: int) -> SimulatedCall:
    return SimulatedCall(
        index=n,
        time=1_770_000_000.5 + n,
        query_source=("main", "compact")[n % 2],
        model=("claude-opus-4-6", "claude-haiku-4-5", "gpt-5")[n % 3],
        input_tokens=3 + n,
        cache_creation_5m_input_tokens=100 * (n % 4),
        cache_creation_1h_input_tokens=7 * (n % 5),
        cache_read_input_tokens=20_000 + n,
        output_tokens=40 + n,
        cost_usd=0.001 * n + 1 / 7,
        cache_deleted_input_tokens=n % 6,
        breakpoints=tuple(range(n % 4)),
        read_until=None if n % 3 == 0 else (n - 1) * 2,
        cache_write_cost_usd=n / 9,
        cache_read_cost_usd=n / 11,
    )


def test_simulated_calls_read_back_equal_to_what_was_added() -> None:
    calls = [_simulated(n) for n in range(30)]
    kept = SimulatedCalls()
    kept.extend(calls)
    assert len(kept) == 30 and list(kept) == calls
    assert kept[-1] == calls[-1] and kept[4:20:3] == calls[4:20:3]
    assert kept[0].read_until is None and kept[0].breakpoints == ()
    assert kept[3].breakpoints == (0, 1, 2) and kept[4].read_until == 6 and kept[1].read_until == 0
    with pytest.raises(IndexError, match="out of range"):
        kept[30]


def test_simulated_calls_hold_no_object_per_call() -> None:
    small, large = SimulatedCalls(), SimulatedCalls()
    small.extend([_simulated(n) for n in range(10)])
    large.extend([_simulated(n) for n in range(2_000)])
    assert _reachable(large) - _reachable(small) < 20


def test_a_strategy_run_keeps_its_calls_in_columns() -> None:
    run = StrategyRun("none")
    for n in range(3):
        run.add(_simulated(n), [_simulated(100 + n)], 200_000)
    assert isinstance(run.main_calls, SimulatedCalls) and isinstance(run.side_calls, SimulatedCalls)
    assert list(run.main_calls) == [_simulated(n) for n in range(3)]
    assert list(run.cost_per_call) == [
        _simulated(n).cost_usd + _simulated(100 + n).cost_usd for n in range(3)
    ]
