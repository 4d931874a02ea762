"""`DigestRun` behaves as the tuple of its items, and shares its unchanged chunks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.caching.digest_run import CHUNK, DigestRun

edits = st.lists(
    st.tuples(st.integers(0, 3 * CHUNK), st.lists(st.integers(0, 9), max_size=CHUNK + 3)),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(start=st.lists(st.integers(0, 9), max_size=3 * CHUNK), edits=edits)
def test_every_edit_equals_the_tuple_it_stands_for(
    start: list[int], edits: list[tuple[int, list[int]]]
) -> None:
    run, flat = DigestRun(start), tuple(start)
    for keep, items in edits:
        before = tuple(run)
        run = run.extended(keep, items)
        flat = flat[: max(0, min(keep, len(flat)))] + tuple(items)
        assert tuple(run) == flat and len(run) == len(flat)
        assert run == flat and flat == run and hash(run) == hash(flat)
        assert run == DigestRun(flat)  # the chunking depends on the items alone
        for index in {0, len(flat) // 2, len(flat) - 1} if flat else ():
            assert run[index] == flat[index] and run[index - len(flat)] == flat[index]
        assert run[1:-1] == flat[1:-1]
        assert tuple(run) != before or flat == before


def test_a_changed_tail_shares_every_full_chunk_before_it() -> None:
    run = DigestRun(range(3 * CHUNK + 10))
    changed = run.extended(len(run) - 1, ["new"])
    assert changed[-1] == "new" and changed[: len(run) - 1] == tuple(range(3 * CHUNK + 9))
    assert all(changed._chunks[i] is run._chunks[i] for i in range(3))
    assert run[-1] == 3 * CHUNK + 9  # the run it was made from is unchanged


def test_out_of_range_and_other_types() -> None:
    run = DigestRun(["a", "b"])
    with pytest.raises(IndexError):
        run[2]
    with pytest.raises(IndexError):
        run[-3]
    assert run != ["a", "b"] and DigestRun() == () and not DigestRun()
    assert repr(run) == "DigestRun(('a', 'b'))"
