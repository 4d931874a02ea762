"""`SimulatedCalls.totals` sums a table's columns in one pass: the same figures, to the last
bit, as sums over the calls read back, with the table's chunks in memory or in its file."""

from __future__ import annotations

import pytest

from unbounded.caching.simulator import SimulatedCall
from unbounded.evaluation.simulated_calls import SimulatedCalls


def _call(n: int) -> SimulatedCall:
    # Prices that are not exact binary fractions, so the order of the additions shows.
    return SimulatedCall(
        index=n,
        time=1_770_000_000.5 + n,
        query_source="repl_main_thread",
        model="claude-sonnet-4-6",
        input_tokens=(n * 7919) % 5_000,
        cache_creation_5m_input_tokens=(n * 31) % 900,
        cache_creation_1h_input_tokens=(n * 17) % 700 if n % 5 else 0,
        cache_read_input_tokens=(n * 104_729) % 180_000,
        output_tokens=400,
        cost_usd=0.1 * ((n * 13) % 97) / 3,
        breakpoints=(n,),
        cache_write_cost_usd=0.01 * ((n * 7) % 11) / 7,
        cache_read_cost_usd=0.003 * ((n * 5) % 23) / 9,
    )


@pytest.mark.parametrize(("calls", "chunk"), [(0, None), (1, None), (300, None), (300, 16)])
def test_the_totals_are_the_sums_over_the_calls(calls: int, chunk: int | None) -> None:
    made = [_call(n) for n in range(calls)]
    table = SimulatedCalls(chunk)
    table.extend(made)
    totals = table.totals()
    assert totals.calls == calls
    assert totals.prompt_tokens == sum(c.prompt_tokens for c in made)
    assert totals.cache_read_input_tokens == sum(c.cache_read_input_tokens for c in made)
    assert totals.peak_prompt_tokens == max((c.prompt_tokens for c in made), default=0)
    # Equal floats, not close ones: the report's figures must not move.
    assert totals.cost_usd == sum(c.cost_usd for c in made)
    assert totals.cache_write_cost_usd == sum(c.cache_write_cost_usd for c in made)
    assert totals.cache_read_cost_usd == sum(c.cache_read_cost_usd for c in made)


def test_the_peak_is_the_largest_prompt_not_the_last() -> None:
    table = SimulatedCalls()
    table.extend([_call(3), _call(1), _call(2)])
    assert table.totals().peak_prompt_tokens == max(_call(n).prompt_tokens for n in (1, 2, 3))
