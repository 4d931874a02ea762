"""Per-call state a replay keeps for its whole run, in columns: the script's plan
(`PlannedCalls`, `IndexMarks`) and the fidelity simulation (`FidelityCalls`) read back
exactly what was put in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unbounded.caching.fidelity import FidelityCall, FidelityCalls, RecordedUsage
from unbounded.caching.simulator import SimulatedCall
from unbounded.errors import ConfigError
from unbounded.evaluation.planned_calls import IndexMarks, PlannedCall, PlannedCalls

counts = st.integers(min_value=0, max_value=2**40)
times = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = st.sampled_from(["claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", ""])

planned = st.builds(
    PlannedCall,
    message_id=st.text(max_size=12),
    lines=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=4).map(tuple),
    usage_line=st.none() | st.integers(min_value=0, max_value=10**6),
    request_time=times,
    response_time=times,
)


@given(st.lists(planned, max_size=30))
def test_planned_calls_read_back_what_was_planned(calls: list[PlannedCall]) -> None:
    columns = PlannedCalls(calls)
    assert len(columns) == len(calls)
    assert list(columns) == calls
    assert columns[1:-1] == calls[1:-1]
    if calls:
        assert columns[-1] == calls[-1]
    assert list(columns.request_times) == [c.request_time for c in calls]
    assert columns.message_ids == [c.message_id for c in calls]


def test_a_planned_call_out_of_range_is_an_index_error() -> None:
    columns = PlannedCalls([PlannedCall("m", (0, 1), None, 1.0, 2.0)])
    assert columns[-1].lines == (0, 1) and columns[-1].usage_line is None
    with pytest.raises(IndexError, match="planned call 1 out of range"):
        columns[1]
    with pytest.raises(IndexError):
        columns[-2]


@given(st.integers(min_value=0, max_value=60), st.sets(st.integers(min_value=0, max_value=59)))
def test_index_marks_hold_what_a_set_holds(size: int, marked: set[int]) -> None:
    inside = {index for index in marked if index < size}
    marks = IndexMarks(size, sorted(inside))
    assert [index in marks for index in range(-2, size + 2)] == [
        index in inside for index in range(-2, size + 2)
    ]
    assert len(marks) == len(inside)
    assert marks == IndexMarks(size, inside)


def test_an_index_mark_outside_its_bound_is_refused() -> None:
    marks = IndexMarks(3)
    with pytest.raises(IndexError, match=r"index 3 outside 0\.\.2"):
        marks.add(3)
    assert "3" not in marks  # type: ignore[operator]


simulated = st.builds(
    SimulatedCall,
    index=counts,
    time=times,
    query_source=st.sampled_from(["main", "compact", "baseline"]),
    model=names,
    input_tokens=counts,
    cache_creation_5m_input_tokens=counts,
    cache_creation_1h_input_tokens=counts,
    cache_read_input_tokens=counts,
    output_tokens=counts,
    cost_usd=times,
    cache_deleted_input_tokens=counts,
    breakpoints=st.lists(counts, max_size=4).map(tuple),
    read_until=st.none() | counts,
    cache_write_cost_usd=times,
    cache_read_cost_usd=times,
)
fidelity_call = st.builds(
    FidelityCall,
    index=counts,
    time=times,
    ttl=st.sampled_from(["5m", "1h"]),
    model=names,
    recorded=st.builds(RecordedUsage, counts, counts, counts, counts, counts),
    simulated=simulated,
    after_compaction=st.booleans(),
    prefix_changed=st.booleans(),
)


@given(st.lists(fidelity_call, max_size=20))
def test_fidelity_calls_read_back_what_was_simulated(calls: list[FidelityCall]) -> None:
    columns = FidelityCalls(calls)
    assert len(columns) == len(calls)
    assert list(columns) == calls
    assert columns == tuple(calls)
    assert columns[2:] == calls[2:]
    if calls:
        assert columns[-1] == calls[-1]
        assert columns != tuple(calls[:-1])


def test_fidelity_calls_refuse_more_names_than_a_byte_codes() -> None:
    call = FidelityCall(
        0,
        0.0,
        "5m",
        "m",
        RecordedUsage(0, 0, 0, 0, 0),
        SimulatedCall(0, 0.0, "main", "m", 0, 0, 0, 0, 0, 0.0),
    )
    columns = FidelityCalls()
    with pytest.raises(ConfigError, match="more than 256 distinct"):
        for number in range(300):
            columns.append(
                FidelityCall(number, 0.0, "5m", f"model-{number}", call.recorded, call.simulated)
            )
    # "5m", "main", "m" and 253 models were coded before the 257th name; the call that
    # brought it left every column as it was.
    assert len(columns) == 253
    assert list(columns)[-1].model == "model-252"
    assert all(len(column) == 253 for column in columns._ints.values())
