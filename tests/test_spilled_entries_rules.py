"""Rules of `unbounded.model.spilled_entries` checked against a plain list: every operation a
transcript makes (append, extend, spill, remove a tail, read by index or slice) leaves a
`SpilledEntries` reading as the list the same operations build, at every boundary between
its spilled and its live part."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.model.entries import Entry
from unbounded.model.spilled_entries import SpilledEntries, entry_in_place


def _entry(n: int) -> Entry:
    """The same record for the same `n` (a new object each time)."""
    data = {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": f"p{n}"}}
    return Entry(data, None if n % 3 == 0 else n)


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 99)),
        st.tuples(st.just("extend"), st.integers(0, 3)),
        st.tuples(st.just("spill"), st.integers(-1, 12)),
        st.tuples(st.just("cut"), st.integers(-12, 12)),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 6), _operations)
def test_it_reads_as_the_list_the_same_operations_build(
    start: int, operations: list[tuple[str, int]]
) -> None:
    # Only `(data, line)` pairs are kept outside: no spilled entry is held by anyone (an
    # entry holds no cycle, so it is freed at once), and a read of a spilled position
    # decodes it from the file.
    spilled = SpilledEntries(_entry(n) for n in range(start))
    model = [(_entry(n).data, _entry(n).line) for n in range(start)]
    for name, value in operations:
        if name == "append":
            spilled.append(_entry(value))
            model.append((_entry(value).data, _entry(value).line))
        elif name == "extend":
            spilled.extend(_entry(100 + k) for k in range(value))
            model += [(_entry(100 + k).data, _entry(100 + k).line) for k in range(value)]
        elif name == "spill":
            before = spilled.spilled
            spilled.spill_before(value)
            assert spilled.spilled == max(before, min(value, len(model)))
        else:
            del spilled[value:]
            del model[value:]
            assert spilled.spilled <= len(model)
        assert len(spilled) == len(model)
        assert len(spilled.live) == len(model) - spilled.spilled
    assert [(e.data, e.line) for e in spilled] == model
    assert [(spilled[i].data, spilled[i].line) for i in range(len(model))] == model
    assert [(spilled[i].data, spilled[i].line) for i in range(-len(model), 0)] == model
    assert [(e.data, e.line) for e in spilled[1:-1]] == model[1:-1]
    for index in (len(model), -len(model) - 1):
        with pytest.raises(IndexError):
            spilled[index]
    spilled.close()


@pytest.mark.parametrize("spill", [0, 2, 4])
def test_removing_the_tail_from_the_first_live_position_keeps_the_spill(spill: int) -> None:
    spilled = SpilledEntries(_entry(n) for n in range(4))
    spilled.spill_before(spill)
    del spilled[spill:]
    assert (spilled.spilled, len(spilled)) == (spill, spill)
    spilled.append(_entry(9))
    spilled.spill_before(spill + 1)
    assert [e.data for e in spilled] == [_entry(n).data for n in [*range(spill), 9]]


def test_a_spilled_position_stays_in_place_for_an_equal_entry_only() -> None:
    spilled = SpilledEntries(_entry(n) for n in range(3))
    spilled.spill_before(2)
    gc.collect()
    assert entry_in_place(spilled, 1, _entry(1))  # an equal record read back
    assert not entry_in_place(spilled, 1, _entry(0))
    assert not entry_in_place(spilled, 2, _entry(2))  # live: only the very object
    assert entry_in_place(spilled, 2, spilled[2])


@pytest.mark.parametrize("position", [-1, 0, 1, 2])
def test_spilling_before_a_position_already_on_disk_moves_nothing(position: int) -> None:
    spilled = SpilledEntries(_entry(n) for n in range(5))
    spilled.spill_before(2)
    live = list(spilled.live)
    spilled.spill_before(position)
    assert spilled.spilled == 2
    assert all(a is b for a, b in zip(spilled.live, live, strict=True))
