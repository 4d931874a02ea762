"""PrefixFolds: the ViewFolds of every prefix of a list that grows (the LangChain middleware's
view), handed to a summary as folds that read exactly that prefix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from unbounded.compaction import view_folds
from unbounded.compaction.conversation import CacheSafeParams, start_summary
from unbounded.compaction.view_folds import PrefixFolds, ViewFolds
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE

IMAGE = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}


def _assistant(uuid: str, *blocks: Any) -> Entry:
    return Entry(
        {
            "type": "assistant",
            "uuid": uuid,
            "message": {"role": "assistant", "content": list(blocks)},
        }
    )


def _user(uuid: str, content: Any) -> Entry:
    return Entry({"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}})


def _result(uuid: str, tool_id: str, content: Any = "output") -> Entry:
    return _user(uuid, [{"type": "tool_result", "tool_use_id": tool_id, "content": content}])


def _call(name: str, tool_id: str = "t") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def _records() -> list[Entry | None]:
    """A view of every kind a fold tells apart: prompts, calls of several tools (one called
    again later), results, a message never sent (None), a record that is no message, media in
    a result, a repeated uuid."""
    system = Entry({"type": "system", "uuid": "s", "content": "note"})
    return [
        _user("u0", "start"),
        _assistant("a1", {"type": "text", "text": "reading"}, _call("Read", "t1")),
        _result("r1", "t1"),
        None,
        _assistant("a2", _call("Bash", "t2")),
        _result("r2", "t2", [IMAGE]),
        system,
        _assistant("a3", _call("Read", "t3"), _call("Grep", "t4")),
        _result("u0", "t3"),  # a uuid seen before: its first position stands
        _user("u4", "go on"),
        _assistant("a5", _call("Edit", "t5")),
    ]


def _fresh(view: list[Entry]) -> ViewFolds:
    folds = ViewFolds()
    folds.advance(view)
    return folds


def _present(records: list[Entry | None]) -> list[Entry]:
    return [entry for entry in records if entry is not None]


def test_the_folds_of_every_prefix_are_those_of_reading_it() -> None:
    records = _records()
    folds = PrefixFolds()
    while folds.count < len(records):
        folds.advance(records, 3)  # caught up over a few calls
    for length in range(len(records) + 1):
        head = records[:length]
        view = _present(head)
        given = folds.folds_of(head, records, view)
        assert given is not None
        expected = _fresh(view)
        assert given.facts() == expected.facts(), length
        assert given.first == expected.first, length


def test_the_summary_reads_nothing_of_the_folds_it_is_given() -> None:
    records = _records()
    folds = PrefixFolds()
    folds.advance(records, 100)
    view = _present(records[:6])
    given = folds.folds_of(records[:6], records, view)
    assert given is not None
    read: list[int] = []
    original = ViewFolds._feed

    def feed(self: ViewFolds, index: int, entry: Entry) -> None:
        read.append(index)
        original(self, index, entry)

    ViewFolds._feed = feed  # type: ignore[method-assign]
    try:
        assert given.advance(view)
    finally:
        ViewFolds._feed = original  # type: ignore[method-assign]
    assert read == []
    # The list grows after it: the new records are read, the uuids before them as well.
    view.append(_user("late", "x"))
    given.advance(view)
    assert given.facts() == _fresh(view).facts() and given.first == _fresh(view).first


def test_a_prefix_not_folded_yet_is_not_known() -> None:
    records = _records()
    folds = PrefixFolds()
    folds.advance(records, 4)
    assert folds.folds_of(records[:4], records, _present(records[:4])) is not None
    assert folds.folds_of(records[:5], records, _present(records[:5])) is None


def test_a_block_the_tools_walk_fails_on_leaves_the_prefixes_holding_it_unknown() -> None:
    records: list[Entry | None] = [
        _user("u", "hi"),
        _assistant("a", _call("Read")),
        _assistant("b", "not a block", _call("Bash")),
    ]
    folds = PrefixFolds()
    folds.advance(records, 10)
    assert folds.folds_of(records[:2], records, _present(records[:2])) is not None
    assert folds.folds_of(records, records, _present(records)) is None


def test_a_result_cleared_after_it_was_folded_changes_nothing_but_other_records_stop_it() -> None:
    records = _records()
    folds = PrefixFolds()
    folds.advance(records, 100)
    old = records[2]
    records[2] = _result("r1", "t1", "[cleared]")
    folds.replaced(2, old, records[2])
    given = folds.folds_of(records, records, _present(records))
    assert given is not None and given.facts() == _fresh(_present(records)).facts()
    # An assistant record replaced: the prefixes holding it are no longer known.
    old = records[4]
    records[4] = _assistant("a2", _call("Other", "t2"))
    folds.replaced(4, old, records[4])
    assert folds.folds_of(records[:4], records, _present(records[:4])) is not None
    assert folds.folds_of(records[:5], records, _present(records[:5])) is None
    # A record not folded yet is read as it is when it is folded.
    later = PrefixFolds()
    later.advance(records, 2)
    later.replaced(7, records[7], records[1])
    assert later.folds_of(records[:8], records, _present(records[:8])) is None  # not folded
    later.advance(records, 100)
    assert later.folds_of(records, records, _present(records)) is not None


def test_media_a_replacement_brings_in_is_noticed() -> None:
    records: list[Entry | None] = [_user("u", "hi"), _result("r", "t"), _user("v", "more")]
    folds = PrefixFolds()
    folds.advance(records, 10)
    given = folds.folds_of(records, records, _present(records))
    assert given is not None and not given.rewritten
    old = records[1]
    records[1] = _result("r", "t", [IMAGE])
    folds.replaced(1, old, records[1])
    given = folds.folds_of(records, records, _present(records))
    assert given is not None and given.rewritten
    assert folds.folds_of(records[:1], records, _present(records[:1])).rewritten is False  # type: ignore[union-attr]


def test_a_head_that_differs_from_the_list_is_read_where_it_differs() -> None:
    records = _records()
    folds = PrefixFolds()
    folds.advance(records, 100)
    # The head holds a result as it was (this call clears it), the list its placeholder.
    records_now = list(records)
    records_now[2] = _result("r1", "t1", "[cleared]")
    head = list(records)
    head[2] = _result("r1", "t1", [IMAGE])
    given = folds.folds_of(head[:3], records_now, _present(head[:3]))
    assert given is not None and given.rewritten
    assert given.facts() == _fresh(_present(head[:3])).facts()
    # A head whose record differs in kind (an assistant one): not known.
    head[2] = _assistant("x", _call("Grep"))
    assert folds.folds_of(head[:3], records_now, _present(head[:3])) is None


def test_another_list_is_folded_from_its_start() -> None:
    records = _records()
    folds = PrefixFolds()
    folds.advance(records, 100)
    folds.reset()
    other: list[Entry | None] = [_assistant("z", _call("Only"))]
    folds.advance(other, 10)
    given = folds.folds_of(other, other, _present(other))
    assert given is not None and given.facts() == (["Only"], 1, False)


class _Unused:
    name = "unused"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
        raise AssertionError("the preparation sends nothing")


@pytest.mark.parametrize("keep", [False, True])
def test_a_summary_reads_the_uuids_positions_only_for_a_kept_tail(keep: bool) -> None:
    view = [
        _user("u0", "start"),
        Entry.assistant([{"type": "text", "text": "ok"}], message_id="m1", uuid="a1"),
        _user("u2", "next"),
        Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", uuid="a3"),
    ]
    folds = PrefixFolds()
    folds.advance(list(view), 10)
    given = folds.folds_of(list(view), list(view), view)
    assert given is not None
    reads: list[int] = []
    original = view_folds.ViewFolds._first_positions

    def spy(self: ViewFolds) -> dict[str, int]:
        if self._first is None:
            reads.append(1)
        return original(self)

    view_folds.ViewFolds._first_positions = spy  # type: ignore[method-assign]
    try:
        asyncio.run(
            start_summary(
                view,
                _Unused(),
                params=CacheSafeParams(model="claude-sonnet-4-6"),
                trigger="auto",
                view=view,
                folds=given,
                keep_from="u2" if keep else None,
            )
        )
    finally:
        view_folds.ViewFolds._first_positions = original  # type: ignore[method-assign]
    assert reads == ([1] if keep else [])
