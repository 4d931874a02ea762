"""A replay starts every strategy with the prefix the recording found warm, whatever name
the recording gave its model: a dated id (`claude-sonnet-4-5-20250929`) is the catalog's model
(`claude-sonnet-4-5`), and the cache the earlier session left is keyed by the name the
replayed requests carry."""

from __future__ import annotations

import pytest
from recorded_calls import tool_call_session

from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.transcript import Transcript

WARM = 15_000
"""Tokens the recording's first call read: cached by an earlier session."""


def _session(model: str) -> Transcript:
    """Three calls 10 s apart, the first reading `WARM` tokens written before the session."""
    calls = [(0, WARM, 2_000), (10, WARM + 2_000, 1_000), (20, WARM + 3_000, 1_000)]
    return tool_call_session(calls, models=[model] * len(calls))


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-sonnet-4-5-20250929"])
def test_every_strategy_reads_the_warm_prefix_on_its_first_call(model: str) -> None:
    report = replay_session(_session(model), ReplayOptions())
    first = report.points[0]
    assert report.prefix.warm_tokens == WARM
    # Ours reads what the earlier session cached (before the fix, a dated id wrote it all).
    assert first.cache_read >= WARM
    assert first.cache_write < first.context_tokens - WARM + 1
    # Every baseline is primed the same way: its first call costs what ours costs.
    assert set(first.baseline_cost) and all(
        cost == pytest.approx(first.cost) for cost in first.baseline_cost.values()
    )


def test_a_dated_model_id_replays_as_its_catalog_model() -> None:
    dated = replay_session(_session("claude-sonnet-4-5-20250929"), ReplayOptions())
    plain = replay_session(_session("claude-sonnet-4-5"), ReplayOptions())
    assert dated.ours.cost_usd == pytest.approx(plain.ours.cost_usd)
    assert [p.cache_read for p in dated.points] == [p.cache_read for p in plain.points]
