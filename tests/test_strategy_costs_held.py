"""A strategy's cost per call is a column whose full chunks go to a file
(`StrategyRun.cost_per_call`): a replay of 100,000 calls keeps a chunk of them in memory per
strategy, not one float a call, and reads back the same figures and the same total."""

from __future__ import annotations

from typing import Any

from unbounded.caching.simulator import SimulatedCall
from unbounded.evaluation.baselines import StrategyRun
from unbounded.evaluation.simulated_calls import CHUNK


def _call(n: int, cost: float) -> SimulatedCall:
    return SimulatedCall(
        index=n,
        time=1_770_000_000.0 + n,
        query_source="main",
        model="claude-sonnet-4-6",
        input_tokens=3,
        cache_creation_5m_input_tokens=10,
        cache_creation_1h_input_tokens=0,
        cache_read_input_tokens=20_000,
        output_tokens=40,
        cost_usd=cost,
        cache_deleted_input_tokens=0,
        breakpoints=(),
        read_until=None,
        cache_write_cost_usd=0.0,
        cache_read_cost_usd=0.0,
    )


def _held_bytes(column: Any) -> int:
    """Bytes of costs a column holds in memory (a plain array holds all of them)."""
    held = getattr(column, "held_bytes", None)
    return int(held) if held is not None else len(column) * column.itemsize


def test_a_long_run_holds_a_chunk_of_its_costs_and_reads_back_every_one() -> None:
    calls = 3 * CHUNK + 5
    run = StrategyRun("none", fixed_cost_usd=0.25)
    added: list[float] = []
    for n in range(calls):
        # Costs whose sum depends on the order of the additions (not exact in binary).
        main, side = _call(n, 0.1 * (n % 7) + 1 / (n + 3)), [_call(n, 0.5)] if n % 1000 == 0 else []
        run.add(main, side, 200_000)
        added.append(main.cost_usd + sum(s.cost_usd for s in side))
        assert run.cost_per_call[-1] == added[-1]  # what the replay reads each call
    assert len(run.cost_per_call) == calls
    assert list(run.cost_per_call) == added
    assert run.cost_usd == sum(added) + 0.25  # the same total, summed in call order
    # The newest chunk and the one last read back, at most: not 8 bytes a call.
    assert _held_bytes(run.cost_per_call) <= 2 * CHUNK * 8 < calls * 8
