"""Rules of `model/tool_ids.py` that the mutation check found no test holding: a name not held
numbers -1 however few names are held, the packed names cost a bounded number of bytes a
name, and a result that already answered a call by its new name leaves no call waiting."""

from __future__ import annotations

from unbounded.model.tool_ids import PackedNames, ToolCallNames, name_results


def test_a_name_not_held_numbers_minus_one_before_and_after_the_table_grows() -> None:
    packed = PackedNames()
    assert packed.number("absent") == -1
    for count in range(1, 40):
        packed.add(f"call_{count}")
        assert packed.number("absent") == -1
        assert packed.number(f"call_{count}") == count - 1


def test_the_names_cost_their_utf8_and_at_most_24_bytes_a_name_more() -> None:
    """8 bytes of end offset and a table kept at most half full after growing by doubling
    (at most 4 slots of 4 bytes a name): 24 bytes a name over the names' own bytes."""
    packed = PackedNames()
    utf8 = 0
    for count in range(1, 3_000):
        name = f"toolu_{count:024d}"
        packed.add(name)
        utf8 += len(name.encode())
        if count >= 2:
            assert packed.nbytes() <= utf8 + 24 * count, count


def test_a_result_naming_the_new_name_answers_that_call_only_once() -> None:
    """A host that answers with the new name (`p_1`) answers that call; a repeat of the result
    with the provider's id then finds no call waiting and keeps its id."""
    names = ToolCallNames()
    names.new_reply()
    assert names.call("p:1") == "p_1"
    assert names.result("p_1") == "p_1"
    assert names.result("p:1") == "p:1"
    blocks = [
        {"type": "tool_result", "tool_use_id": "p_1", "content": "first"},
        {"type": "tool_result", "tool_use_id": "p:1", "content": "repeat"},
    ]
    named = name_results(blocks, [("p:1", "p_1")])
    assert [block["tool_use_id"] for block in named] == ["p_1", "p:1"]


def test_every_name_stays_found_through_every_growth_of_the_table() -> None:
    """Name number 0 is a name like any other when the table is rebuilt (hashes vary between
    runs, so many small sets are tried: in each, a later name may land on its slot)."""
    for trial in range(300):
        packed = PackedNames()
        names = [f"n{trial}_{k}" for k in range(40)]  # the table grows 8 -> 16 -> 32 -> 64 -> 128
        for name in names:
            packed.add(name)
        assert all(name in packed for name in names), trial
        assert [packed.number(name) for name in names] == list(range(40))
