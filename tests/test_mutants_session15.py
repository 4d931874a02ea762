"""Rules of session 15 that the mutation check found held by no test (batch totals, codex
reading, policy files, record checks): each test fails when its rule is flipped or dropped."""

from __future__ import annotations

import json
import math
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from unbounded.cli.batch_totals import (
    BilledShares,
    billed_shares,
    find_repeats,
    first_record_time,
)
from unbounded.evaluation.call_series import CallPoint, CallSeries

if TYPE_CHECKING:
    from unbounded.evaluation.replay import ReplayReport
    from unbounded.evaluation.replay_recording import ReplayRecording


# -- cli/batch_totals.py -----------------------------------------------------------------------


def _shares(first_time: float | None, ids: list[int], recorded: list[float]) -> BilledShares:
    return BilledShares(
        first_time=first_time,
        ids=array("Q", ids),
        cost=array("d", [1.0] * len(ids)),
        recorded=array("d", recorded),
        replayed=bytes([1]) * len(ids),
    )


def test_the_first_time_is_read_from_the_first_64_records_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    head = [json.dumps({"type": "summary", "n": n}) for n in range(64)]
    stamped = json.dumps({"type": "user", "timestamp": "2026-03-02T09:00:00.000Z"})
    path.write_text("\n".join([*head[:63], stamped]) + "\n", encoding="utf-8")
    assert first_record_time(path) is not None  # the 64th record is read
    path.write_text("\n".join([*head, stamped]) + "\n", encoding="utf-8")
    assert first_record_time(path) is None  # the 65th is not


def test_a_repeated_call_without_a_recorded_cost_makes_the_recorded_total_unpriced() -> None:
    first = _shares(1.0, [7, 8], [0.5, 0.25])
    copy = _shares(2.0, [7, 8], [math.nan, 0.25])
    found = find_repeats([("a", first), ("b", copy)])
    assert found[0] is None
    repeats = found[1]
    assert repeats is not None
    assert (repeats.calls, repeats.recorded_priced, repeats.recorded_cost) == (2, False, 0.25)
    priced = find_repeats([("a", first), ("b", _shares(2.0, [7, 8], [0.5, 0.25]))])[1]
    assert priced is not None
    assert (priced.recorded_priced, priced.recorded_cost) == (True, 0.75)


def test_a_file_with_a_first_time_comes_before_one_without() -> None:
    # "a" sorts first by name, but has no time: the call is "b"'s, and "a" repeats it.
    found = find_repeats([("a", _shares(None, [7], [0.5])), ("b", _shares(5.0, [7], [0.5]))])
    assert found[1] is None
    assert found[0] is not None
    assert found[0].of == ("b",)


def _point(index: int, cost: float, recorded: float | None) -> CallPoint:
    return CallPoint(
        index=index,
        time=0.0,
        context_tokens=10,
        cache_read=0,
        cache_write=0,
        uncached_input=10,
        output_tokens=1,
        cost=cost,
        recorded_context_tokens=None,
        recorded_cost=recorded,
        baseline_context_tokens={},
        baseline_cost={},
    )


def test_billed_shares_reads_points_given_as_a_plain_list_as_a_call_series(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"timestamp": "2026-03-02T09:00:00Z"}) + "\n", encoding="utf-8")
    points = [_point(0, 0.5, None), _point(1, 0.25, 0.125)]
    series = CallSeries()
    for point in points:
        series.append(point)
    recording = cast(
        "ReplayRecording", SimpleNamespace(script=SimpleNamespace(message_ids=["m1", "m2"]))
    )
    made: list[BilledShares] = []
    for given in (points, series):
        report = cast(
            "ReplayReport", SimpleNamespace(points=given, not_replayed_costs=[("m3", 0.0, 1.0)])
        )
        made.append(billed_shares(path, recording, report))
    listed, columns = made
    assert listed.cost.tolist() == columns.cost.tolist() == [0.5, 0.25, 0.0]
    assert str(listed.recorded.tolist()) == str(columns.recorded.tolist()) == "[nan, 0.125, 1.0]"
    assert listed.replayed == columns.replayed == b"\x01\x01\x00"
    assert listed.ids == columns.ids
