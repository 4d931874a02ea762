"""Rules of the spill columns (`evaluation/simulated_calls.py`) that the mutation check found
no test holding: a spill file refuses reads of what it never wrote, a table refuses positions
past either end, the first call reads back its own breakpoints, and a column moves its items
to the file at 32 KiB."""

from __future__ import annotations

import pytest

from unbounded.caching.simulator import SimulatedCall
from unbounded.evaluation.simulated_calls import SimulatedCalls, SpillColumn, SpillFile


def _call(n: int, breakpoints: tuple[int, ...]) -> SimulatedCall:
    return SimulatedCall(
        index=n,
        time=1_770_000_000.0 + n,
        query_source="repl_main_thread",
        model="claude-sonnet-4-6",
        input_tokens=100 + n,
        cache_creation_5m_input_tokens=10,
        cache_creation_1h_input_tokens=0,
        cache_read_input_tokens=1_000 * n,
        output_tokens=50,
        cost_usd=0.01 * n,
        breakpoints=breakpoints,
        read_until=None if n == 0 else n,
    )


def test_an_empty_spill_file_refuses_a_read() -> None:
    with pytest.raises(IndexError, match="nothing was written at 0"):
        SpillFile().read(0, 8)


def test_a_spill_file_refuses_a_read_past_what_was_written() -> None:
    file = SpillFile()
    assert file.write(b"abcdefgh") == 0 and file.write(b"ijkl") == 8
    assert file.read(4, 8) == b"efghijkl"
    # Past the end pread returns nothing: a read that never ends unless it is refused.
    with pytest.raises(IndexError, match="4 bytes at 12 were never written"):
        file.read(8, 8)


@pytest.mark.parametrize("chunk", [None, 2])
def test_a_table_refuses_positions_past_either_end(chunk: int | None) -> None:
    calls = [_call(n, (n, n + 1)) for n in range(5)]
    table = SimulatedCalls(chunk)
    table.extend(calls)
    assert table[-5] == calls[0] and table[4] == calls[4]
    for position in (5, -6, -7):
        with pytest.raises(IndexError, match=f"simulated call index {position} out of range"):
            table[position]


@pytest.mark.parametrize("chunk", [None, 2])
def test_the_first_call_read_by_position_keeps_all_its_breakpoints(chunk: int | None) -> None:
    calls = [_call(0, (0, 7, 19)), _call(1, (25,)), _call(2, ())]
    table = SimulatedCalls(chunk)
    table.extend(calls)
    assert table[0].breakpoints == (0, 7, 19)
    assert [table[n] for n in range(3)] == calls == table[0:3]


def test_a_column_of_8_byte_items_moves_them_to_its_file_at_32_kib() -> None:
    """The module's figure: a column holds under 32 KiB of 8-byte items in memory."""
    file = SpillFile()
    column = SpillColumn("q", file)
    most = 0
    for n in range(10_000):
        column.append(n)
        most = max(most, column.held_bytes)
    assert most == 32 * 1024 - 8
    assert file.write(b"") == 2 * 32 * 1024  # two full chunks moved, the rest in memory
    assert list(column) == list(range(10_000))
