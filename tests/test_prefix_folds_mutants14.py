"""PrefixFolds rules the session-14 mutation run left untested: only an assistant record's list
of blocks is walked for tools (a user record's blocks, an assistant's text, are not), and the
folds stop at the first position replaced by a record of another kind, whatever the order the
replacements come in."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.view_folds import PrefixFolds, ViewFolds
from unbounded.model.entries import Entry


def _entry(kind: str, uuid: str, content: Any) -> Entry:
    return Entry({"type": kind, "uuid": uuid, "message": {"role": kind, "content": content}})


def _call(name: str, tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def _fresh(view: list[Entry]) -> ViewFolds:
    folds = ViewFolds()
    folds.advance(view)
    return folds


def test_only_an_assistant_records_list_of_blocks_is_walked() -> None:
    # A user record holding something that is not a block (and a stray call block), and an
    # assistant whose content is a string: a summary's tools walk reads neither, so the
    # prefixes holding them are known and are what reading them gives.
    records: list[Entry | None] = [
        _entry("user", "u0", ["a plain string", _call("Stray", "s1")]),
        _entry("assistant", "a1", "just text, no blocks"),
        _entry("assistant", "a2", [_call("Read", "t1")]),
    ]
    view = [entry for entry in records if entry is not None]
    expected = _fresh(view)
    assert expected.usable
    folds = PrefixFolds()
    folds.advance(records, 10)
    for length in (1, 2, 3):
        given = folds.folds_of(records[:length], records, view[:length])
        assert given is not None, length
        assert given.facts() == _fresh(view[:length]).facts(), length
    given = folds.folds_of(records, records, view)
    assert given is not None
    facts = given.facts()
    assert facts is not None and facts == expected.facts() and facts.tools == ["Read"]


def test_the_folds_stop_at_the_first_position_replaced_whatever_the_order() -> None:
    records: list[Entry | None] = [
        _entry("user", "u0", "start"),
        _entry("assistant", "a1", [_call("Read", "t1")]),
        _entry("user", "r1", [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]),
        _entry("assistant", "a2", [_call("Bash", "t2")]),
        _entry("user", "r2", [{"type": "tool_result", "tool_use_id": "t2", "content": "y"}]),
        _entry("assistant", "a3", [_call("Grep", "t3")]),
    ]
    folds = PrefixFolds()
    folds.advance(records, 10)
    # The later one replaced first: the earlier one must still stop the folds there.
    for position, name in ((5, "Edit"), (1, "Write")):
        old = records[position]
        records[position] = _entry("assistant", f"n{position}", [_call(name, f"n{position}")])
        folds.replaced(position, old, records[position])
    view = [entry for entry in records if entry is not None]
    assert folds.folds_of(records[:1], records, view[:1]) is not None
    for length in (2, 3, 4, 5):
        assert folds.folds_of(records[:length], records, view[:length]) is None, length
