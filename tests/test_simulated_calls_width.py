"""The columns of `SimulatedCalls` take 8 bytes for a count or a price and 4 for a flat
position, an end or a name's code: what a call costs to keep, and that it reads back equal."""

from __future__ import annotations

from unbounded.caching.simulator import SimulatedCall
from unbounded.evaluation.simulated_calls import SimulatedCalls


def _call(n: int) -> SimulatedCall:
    return SimulatedCall(
        index=n,
        time=1_770_000_000.5 + n,
        query_source="repl_main_thread" if n % 2 else "compact",
        model="claude-sonnet-4-6",
        input_tokens=3_000_000_000 + n,  # past 32 bits: counts keep 8 bytes
        cache_creation_5m_input_tokens=n,
        cache_creation_1h_input_tokens=2 * n,
        cache_read_input_tokens=150_000 + n,
        output_tokens=400,
        cost_usd=0.01 * n,
        cache_deleted_input_tokens=n % 3,
        breakpoints=(0, 1, 40_000 + n),
        read_until=None if n % 4 == 0 else 39_999 + n,
        cache_write_cost_usd=0.001 * n,
        cache_read_cost_usd=0.002 * n,
    )


def _bytes_held(calls: SimulatedCalls) -> int:
    columns = [*calls._ints.values(), *calls._floats.values()]
    columns += [calls._read_until, calls._breakpoints, calls._ends, calls._source, calls._model]
    return sum(column.itemsize * len(column) for column in columns)


def test_a_call_with_three_breakpoints_takes_116_bytes_and_reads_back_equal() -> None:
    calls = [_call(n) for n in range(50)]
    kept = SimulatedCalls()
    kept.extend(calls)
    assert list(kept) == calls
    # 7 counts and 4 prices at 8 bytes; the last block read, 3 breakpoints, their end and
    # two name codes at 4.
    assert _bytes_held(kept) == 50 * (11 * 8 + 7 * 4)
