"""`benchmarks/turn_speed.py --at-trigger`: each entry point, run from scratch with the default
policy, reaches the policy's compaction and reports the turn that compacted (on a small
window here, so that it comes after a few dozen turns); nothing here is timed against a
bound."""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path
from typing import Any

import pytest


def _turn_speed() -> Any:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "turn_speed.py"
    spec = importlib.util.spec_from_file_location("turn_speed_at_trigger", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PACKAGES = {"dropin": "anthropic", "middleware": "langchain.agents.middleware"}
"""The optional package each entry point needs (the Session needs none)."""


def _needs_package_of(entry: str) -> None:
    """Skip the test when the package `entry` runs on is not installed."""
    if entry in _PACKAGES:
        pytest.importorskip(_PACKAGES[entry])


@pytest.mark.parametrize("entry", ["session", "dropin", "middleware"])
def test_each_entry_point_reaches_the_default_trigger_and_times_that_turn(entry: str) -> None:
    _needs_package_of(entry)
    module = _turn_speed()
    module.TRIGGER_TURNS = 400
    elapsed, length = getattr(module, f"{entry}_at_trigger")(50_000)
    assert 0 < elapsed < 60 and math.isfinite(elapsed)
    # It compacted a history that had grown, not the first turn's.
    assert length > 20


@pytest.mark.parametrize("entry", ["session", "dropin", "middleware"])
def test_the_timed_turn_is_the_one_that_compacted(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_package_of(entry)
    from unbounded.compaction import conversation

    preparing = conversation.SummaryJob._prepare

    async def slow_preparing(self: Any, *args: Any, **kwargs: Any) -> Any:
        # CPU the compaction's own work spends: only the turn that compacts holds it (every
        # entry point prepares its summary's messages once, on that turn)
        until = time.thread_time() + 0.3
        while time.thread_time() < until:
            pass
        return await preparing(self, *args, **kwargs)

    monkeypatch.setattr(conversation.SummaryJob, "_prepare", slow_preparing)
    module = _turn_speed()
    module.TRIGGER_TURNS = 400
    elapsed, _length = getattr(module, f"{entry}_at_trigger")(50_000)
    assert elapsed >= 0.3


def test_a_run_that_never_compacts_is_an_error_not_a_figure() -> None:
    module = _turn_speed()
    module.TRIGGER_TURNS = 5  # far below the trigger
    with pytest.raises(RuntimeError, match="never compacted"):
        module.session_at_trigger(50_000)


def test_the_trigger_table_has_a_row_per_entry_point_and_the_check() -> None:
    module = _turn_speed()
    figures = {
        "session_compaction_us": 12_000.0,
        "session_compaction_max_us": 15_000.0,
        "session_compaction_messages": 480,
        "middleware_compaction_us": 30_000.0,
        "middleware_compaction_max_us": 31_000.0,
        "middleware_compaction_messages": 5_317,
    }
    rows = module.trigger_table(figures).splitlines()
    assert len(rows) == 3
    assert rows[1].startswith("Session turn") and rows[1].split()[-1] == "ok"
    assert "5,317" in rows[2] and rows[2].split()[-1] == "OVER"


@pytest.mark.parametrize("entry", ["session", "dropin", "middleware"])
def test_the_second_compaction_is_timed_on_the_turn_that_made_it(entry: str) -> None:
    _needs_package_of(entry)
    module = _turn_speed()
    module.TRIGGER_TURNS = 400
    at = getattr(module, f"{entry}_at_trigger")
    _elapsed, first = at(50_000)
    elapsed, second = at(50_000, nth=2)
    assert 0 < elapsed < 60
    # The run went on past its first compaction (the same run is deterministic: a run that
    # stopped at the first would report the same length).
    assert second != first


def test_the_trigger_table_names_the_compaction_it_timed() -> None:
    module = _turn_speed()
    figures = {
        "session_compaction_us": 12_000.0,
        "session_compaction_max_us": 15_000.0,
        "session_compaction_messages": 900,
        "compaction_nth": 2,
    }
    assert module.trigger_table(figures).splitlines()[0].startswith("compaction 2 of each run")
