"""Rules of `unbounded.evaluation.planned_calls` the mutation check found unheld: reading a
call by each index, and when two sets of index marks are equal."""

from __future__ import annotations

import pytest

from unbounded.evaluation.planned_calls import IndexMarks, PlannedCall, PlannedCalls

CALLS = [
    PlannedCall("m0", (0, 1), None, 1.0, 2.0),
    PlannedCall("m1", (2,), 2, 3.0, 4.0),
    PlannedCall("m2", (), 0, 5.0, 6.0),
]


def test_every_index_from_either_end_reads_its_call() -> None:
    columns = PlannedCalls(CALLS)
    assert [columns[i] for i in range(len(CALLS))] == CALLS
    assert [columns[i] for i in range(-len(CALLS), 0)] == CALLS
    for index in (len(CALLS), -len(CALLS) - 1):
        with pytest.raises(IndexError):
            columns[index]


def test_marks_are_equal_only_with_the_same_marks() -> None:
    assert IndexMarks(4, [1, 3]) == IndexMarks(4, [3, 1])
    assert IndexMarks(4, [1]) != IndexMarks(4, [2])
    assert IndexMarks(4, [1]) != IndexMarks(5, [1])
    assert IndexMarks(4, [1]) != {1}
