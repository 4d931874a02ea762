"""Rules of `unbounded.caching.packed_digests`: a `PackedDigests` behaves as a list of 32-byte
digests under every operation it offers (the mutation check found its bounds unheld)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unbounded.caching.packed_digests import DIGEST_SIZE, PackedDigests


def _digest(n: int) -> bytes:
    return hashlib.sha256(str(n).encode()).digest()


def _packed(count: int) -> PackedDigests:
    packed = PackedDigests()
    for n in range(count):
        packed.append(_digest(n))
    return packed


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 50)),
        st.tuples(st.just("cut"), st.integers(-3, 12)),
        st.tuples(st.just("clear"), st.just(0)),
    ),
    max_size=30,
)


@given(_operations)
def test_it_reads_as_the_list_the_same_operations_build(operations: list[tuple[str, int]]) -> None:
    packed, model = PackedDigests(), []
    for name, value in operations:
        if name == "append":
            packed.append(_digest(value))
            model.append(_digest(value))
        elif name == "cut":
            packed.cut(value)
            del model[max(0, value) :]
        else:
            packed.clear()
            model.clear()
    assert len(packed) == len(model)
    assert list(packed) == model
    assert [packed[i] for i in range(len(model))] == model
    assert [packed[-i] for i in range(1, len(model) + 1)] == [
        model[-i] for i in range(1, len(model) + 1)
    ]
    assert packed == model and packed == tuple(model)


@given(
    st.integers(0, 8), st.integers(-10, 10), st.integers(-10, 10), st.sampled_from([None, 1, 2, -1])
)
def test_a_slice_is_the_list_slice(count: int, start: int, stop: int, step: int | None) -> None:
    model = [_digest(n) for n in range(count)]
    assert _packed(count)[start:stop:step] == model[start:stop:step]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_an_index_one_past_either_end_is_refused(count: int) -> None:
    packed = _packed(count)
    for index in (count, -count - 1):
        with pytest.raises(IndexError):
            packed[index]
    if count:
        assert packed[count - 1] == _digest(count - 1) and packed[-count] == _digest(0)


@pytest.mark.parametrize("size", [DIGEST_SIZE - 1, DIGEST_SIZE + 1, 0])
def test_a_digest_of_another_size_is_refused_and_nothing_is_added(size: int) -> None:
    packed = _packed(2)
    with pytest.raises(ValueError, match=f"not {size}"):
        packed.append(b"x" * size)
    assert list(packed) == [_digest(0), _digest(1)]


def test_a_cut_below_zero_empties_it_and_a_cut_past_the_end_keeps_all() -> None:
    packed = _packed(3)
    packed.cut(5)
    assert len(packed) == 3
    packed.cut(-1)
    assert len(packed) == 0 and list(packed) == []


def test_equality_tells_contents_and_lengths_apart() -> None:
    assert _packed(2) == _packed(2)
    assert _packed(2) != _packed(3)
    assert _packed(2) != [_digest(0)]
    assert _packed(2) != [_digest(0), _digest(2)]
    assert _packed(1) != [_digest(0), _digest(1)]
    assert _packed(0) == []
    assert (_packed(1) == "x") is False
