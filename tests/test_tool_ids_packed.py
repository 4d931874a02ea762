"""The names a conversation's tool calls were given are held packed (`PackedNames`): the same
answers as a set of strs, without a str object and a set slot per name (a long replay's
normalizer keeps every call's name for the whole run)."""

from __future__ import annotations

import random
import sys

import pytest
from held import reachable

from unbounded.model.tool_ids import PackedNames, ToolCallNames

CALLS = 5_000


def test_packed_names_answer_as_a_set_of_strs_does() -> None:
    rng = random.Random(7)
    packed, reference = PackedNames(), set()
    for _ in range(20_000):
        # Repeats, names that differ only at the end, non-ASCII: membership decides by the
        # whole name, not by where the hash put it.
        name = f"toolu_{rng.randrange(12_000)}" + rng.choice(["", "é", "_2", "x" * 40])
        assert (name in packed) == (name in reference)
        packed.add(name)
        reference.add(name)
        assert len(packed) == len(reference)
    assert all(name in packed for name in reference)
    assert "toolu_never" not in packed
    assert 12 not in packed


def test_default_names_are_the_names_a_set_of_strs_gives() -> None:
    rng = random.Random(11)
    packed = ToolCallNames()
    taken: set[str] = set()
    reference = ToolCallNames(taken=taken)
    for reply in range(3_000):
        packed.new_reply()
        reference.new_reply()
        for _ in range(rng.randrange(1, 4)):
            # A provider numbering per reply, ids with refused characters, unique ids.
            tool_id = rng.choice([f"functions.Bash:{rng.randrange(3)}", f"toolu_{reply}", "a b"])
            name = packed.call(tool_id)
            assert name == reference.call(tool_id)
            taken.add(name)
            assert packed.result(tool_id) == reference.result(tool_id)
    assert len(taken) > 3_000  # the repeats were renamed `_2`, `_3`, ...


def test_the_names_of_many_calls_are_held_without_a_str_each() -> None:
    names = ToolCallNames()
    for number in range(CALLS):
        names.new_reply()
        names.call(f"toolu_01{number:022d}")  # a Messages API id's length (30 characters)
    held = reachable([names])
    strs = [item for item in held if type(item) is str]
    assert len(strs) <= 2  # the open reply's call only, not one per call
    total = sum(sys.getsizeof(item) for item in held)
    assert total < 64 * CALLS  # a set of strs: ~120 bytes a name


def test_packed_names_are_numbered_in_the_order_they_were_added() -> None:
    packed = PackedNames()
    names = [f"call_{n}" for n in range(100)] + ["ünï"]
    assert [packed.add(name) for name in names] == list(range(101))
    assert packed.add("call_7") == 7  # held already: its number, nothing added
    assert len(packed) == 101
    assert list(packed) == names
    assert [packed.number(name) for name in names] == list(range(101))
    assert packed.number("call_100") == -1
    assert [packed.name(n) for n in (0, 99, 100)] == ["call_0", "call_99", "ünï"]
    with pytest.raises(IndexError):
        packed.name(101)
    with pytest.raises(IndexError):
        packed.name(-1)


def test_a_name_that_is_not_a_str_is_never_held() -> None:
    """Membership asks about strs only: 5 is not the name "5"."""
    names = PackedNames()
    names.add("5")
    assert "5" in names and 5 not in names and b"5" not in names


def test_lone_surrogates_are_names_like_any_other() -> None:
    """A str no JSON file parses to but a caller may pass (a lone surrogate) is held, found
    and given back as it was, apart from the name with the character it would replace it by."""
    names = PackedNames()
    odd, replaced = "t\ud800", "t\ufffd"
    assert names.add(odd) == 0 and names.add(replaced) == 1
    assert (names.number(odd), names.number(replaced), names.name(0)) == (0, 1, odd)
    assert odd in names and list(names) == [odd, replaced]
