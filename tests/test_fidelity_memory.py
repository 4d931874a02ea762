"""What the fidelity simulation holds while it runs (caching/fidelity.py): it runs over every
recorded call at the start of a replay, so at 100,000 calls what it keeps per call sets the
process's peak."""

from __future__ import annotations

import importlib.util
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from unbounded.caching import fidelity, simulator
from unbounded.caching.fidelity import (
    RecordedConversation,
    _laid_out_calls,
    _LaidCall,
    _ViewEstimates,
    _views,
    simulate_recorded_session,
)
from unbounded.caching.simulator import as_block_counter
from unbounded.catalog import load_model_table
from unbounded.evaluation.recording_stream import open_recording

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _generator() -> ModuleType:
    """benchmarks/long_session.py, whose `generate` writes a session of real-session shape."""
    spec = importlib.util.spec_from_file_location("long_session", BENCHMARKS / "long_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Generated sessions of 250 and 750 calls."""
    generate = _generator().generate
    folder = tmp_path_factory.mktemp("fidelity-memory")
    paths = {}
    for calls in (250, 750):
        paths[calls] = folder / f"session-{calls}.jsonl"
        generate(paths[calls], calls)
    return paths


def _source(path: Path) -> RecordedConversation:
    """What a streamed replay simulates: the file's thread and calls, held as columns."""
    source = open_recording(path)._source
    assert isinstance(source, RecordedConversation)
    return source


def _traced(run: Callable[[], object]) -> tuple[int, int]:
    """(peak, held after) bytes that `run` allocated, above what was held before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        held, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak - before, held - before


def test_the_laid_out_calls_hold_a_few_numbers_a_call(sessions: dict[int, Path]) -> None:
    # Columns: about 60 bytes a call. A list of call objects, each with the usage dict its
    # columns built and a datetime, held about 900.
    held = {}
    for calls, path in sessions.items():
        source = _source(path)
        _, held[calls] = _traced(lambda source=source: _laid_out_calls(source))  # type: ignore[misc]
    assert len(_laid_out_calls(_source(sessions[250]))) == 250
    assert (held[750] - held[250]) / 500 < 120


def test_the_simulation_peaks_at_a_few_hundred_bytes_a_call(
    sessions: dict[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session of 100,000 calls must simulate in the replay's memory. Per call at the peak:
    # the report's columns (about 200 bytes), the laid-out calls', usages', times' and
    # estimates' columns (about 150), a bounded memo of block counts. Per-call objects (a
    # usage dict copy, a RecordedUsage, lists of times, TTLs and estimates) and a memo
    # growing with the session peaked at about 1,900 bytes a call.
    # Both memos of block counts bounded well within 250 calls, as 100,000 calls bound them.
    monkeypatch.setattr(fidelity, "_MEMO_LIMIT", 500)
    monkeypatch.setattr(simulator, "TOKEN_MEMO_SIZE", 500)
    model = load_model_table().get("claude-sonnet-4-5")
    peaks = {}
    for calls, path in sessions.items():
        source = _source(path)
        peaks[calls], _ = _traced(
            lambda source=source: simulate_recorded_session(source, model)  # type: ignore[misc]
        )
    assert (peaks[750] - peaks[250]) / 500 < 600


def test_the_block_memo_is_bounded_and_counts_as_an_unbounded_one(
    monkeypatch: pytest.MonkeyPatch, sessions: dict[int, Path]
) -> None:
    source = _source(sessions[250])
    laid = _laid_out_calls(source)
    places = [
        _LaidCall(laid.chain(i), laid.first(i), 0, {}, None, 0, None, True) for i in range(40)
    ]
    counter = as_block_counter(None)

    def estimates(limit: int) -> tuple[list[int], int]:
        monkeypatch.setattr(fidelity, "_MEMO_LIMIT", limit)
        memo: dict[bytes, int] = {}
        sizes = _ViewEstimates(counter, memo)
        most = 0
        figures = []
        for _, messages in _views(places):
            figures.append(sizes.estimate(messages))
            most = max(most, len(memo))
        return figures, most

    unbounded_figures, unbounded_most = estimates(10**9)
    bounded_figures, bounded_most = estimates(30)
    assert unbounded_most > 30  # the bound is reached, and then holds
    assert bounded_most <= 30
    assert bounded_figures == unbounded_figures


def test_a_slice_of_the_calls_builds_none_of_them(sessions: dict[int, Path]) -> None:
    # The replay pairs each call with the one before (`report.calls[1:]`, prefix.py): a list
    # built all 100,000 calls at once, about 700 bytes each.
    model = load_model_table().get("claude-sonnet-4-5")
    calls = simulate_recorded_session(_source(sessions[250]), model).calls
    _, held = _traced(lambda: calls[1:])
    assert held < 2_000
    later = calls[1:]
    assert len(later) == len(calls) - 1
    assert list(later) == list(calls)[1:] and later == list(calls)[1:]
    assert later[-1] == calls[-1] and later[0] == calls[1]
    assert later[10:20:3] == list(calls)[11:21:3]
    with pytest.raises(IndexError, match="out of range"):
        later[len(calls)]
