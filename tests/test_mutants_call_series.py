"""Rules of a replay's per-call series (`evaluation/call_series.py`) that the mutation check
found no test holding: the JSON form of a call (`replay --json --series`) gives its costs to
six decimals and its time in UTC to the second, as it reads back from spilled columns."""

from __future__ import annotations

import json

import pytest

from unbounded.evaluation.call_series import CallPoint, CallSeries, iso_time


def _point(n: int) -> CallPoint:
    return CallPoint(
        index=n,
        time=1_770_000_000.75 + n,
        context_tokens=20_000,
        cache_read=19_000,
        cache_write=900,
        uncached_input=100,
        output_tokens=60,
        cost=0.012345678 + n,
        recorded_context_tokens=None if n % 2 else 21_000,
        recorded_cost=0.000987654321 if n % 2 else None,
        baseline_context_tokens={"none": 30_000},
        baseline_cost={"none": 0.0555555555},
    )


@pytest.mark.parametrize("chunk", [None, 2])
def test_a_call_s_costs_are_given_to_six_decimals(chunk: int | None) -> None:
    series = CallSeries(chunk)
    for n in range(5):
        series.append(_point(n))
    rows = [json.loads(json.dumps(point.to_dict())) for point in series]
    assert [row["cost"] for row in rows] == [0.012346, 1.012346, 2.012346, 3.012346, 4.012346]
    assert [row["recorded_cost"] for row in rows] == [None, 0.000988, None, 0.000988, None]
    assert {row["baseline_cost"]["none"] for row in rows} == {0.055556}
    assert [row["recorded_context_tokens"] for row in rows] == [21_000, None, 21_000, None, 21_000]


def test_a_call_s_time_is_utc_to_the_second() -> None:
    assert iso_time(1_770_000_000.75) == "2026-02-02T02:40:00Z"
    assert _point(3).to_dict()["time"] == "2026-02-02T02:40:03Z"
