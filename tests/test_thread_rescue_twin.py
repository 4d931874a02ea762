"""Rescuing side-branch records walks each record's children in file order, as the
dict-of-lists it replaced did (the from-scratch twin below): same records, same count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.model.entries import Entry
from unbounded.model.thread import _only_tool_results, _rescue_siblings, _tool_ids


def _rescue_with_lists(
    candidates: Sequence[Entry], parents: Sequence[int | None], keep: set[int]
) -> int:
    """The rescue as written before, children in a dict of lists (kept as the oracle)."""
    children: dict[int, list[int]] = {}
    for index, parent in enumerate(parents):
        if parent is not None:
            children.setdefault(parent, []).append(index)
    response_ids: set[str] = set()
    called: set[str] = set()
    answered: set[str] = set()
    for index in keep:
        entry = candidates[index]
        if entry.type == "assistant":
            if entry.message_id:
                response_ids.add(entry.message_id)
            called.update(_tool_ids(entry, "tool_use", "id"))
        elif entry.type == "user":
            answered.update(_tool_ids(entry, "tool_result", "tool_use_id"))

    def belongs(entry: Entry) -> bool:
        kind = entry.type
        if kind in ("progress", "attachment"):
            return True
        if kind == "system":
            return not entry.is_compact_boundary
        if kind == "assistant":
            return entry.message_id is not None and entry.message_id in response_ids
        if kind == "user" and _only_tool_results(entry):
            ids = _tool_ids(entry, "tool_result", "tool_use_id")
            return all(i in called and i not in answered for i in ids)
        return False

    rescued = 0
    stack = [child for node in keep for child in children.get(node, ()) if child not in keep]
    while stack:
        index = stack.pop()
        if index in keep:
            continue
        entry = candidates[index]
        if not belongs(entry):
            continue
        keep.add(index)
        rescued += 1
        if entry.type == "user":
            answered.update(_tool_ids(entry, "tool_result", "tool_use_id"))
        elif entry.type == "assistant":
            called.update(_tool_ids(entry, "tool_use", "id"))
        stack.extend(child for child in children.get(index, ()) if child not in keep)
    return rescued


TOOL_IDS = st.lists(st.sampled_from(["t1", "t2", "t3"]), min_size=1, max_size=2, unique=True)


@st.composite
def _records(draw: Any) -> Entry:
    kind = draw(st.sampled_from(["assistant", "results", "prompt", "progress", "system"]))
    if kind == "assistant":
        calls = [{"type": "tool_use", "id": i, "name": "Read", "input": {}} for i in draw(TOOL_IDS)]
        return Entry.assistant(calls, message_id=draw(st.sampled_from(["m1", "m2", "m3"])))
    if kind == "results":
        ids = draw(TOOL_IDS)
        return Entry.user([{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids])
    if kind == "prompt":
        return Entry.user("go on")
    return Entry({"type": kind, "uuid": f"{kind}-{draw(st.integers(0, 99))}"})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_rescue_walks_children_in_file_order(data: Any) -> None:
    records = data.draw(st.lists(_records(), min_size=1, max_size=14))
    count = len(records)
    parents = [data.draw(st.none() | st.integers(0, count - 1)) for _ in range(count)]
    keep = set(data.draw(st.lists(st.integers(0, count - 1), max_size=count)))
    ours, theirs = set(keep), set(keep)
    assert _rescue_siblings(records, parents, ours) == _rescue_with_lists(records, parents, theirs)
    assert ours == theirs


def test_two_answers_to_one_call_are_walked_in_the_same_order() -> None:
    # Which of two side-branch answers to one call is rescued depends on the walk's order.
    call = Entry.assistant([{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}], message_id="m1")
    answers = [Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": c}]) for c in "ab"]
    records, parents = [call, *answers], [None, 0, 0]
    ours, theirs = {0}, {0}
    assert _rescue_siblings(records, parents, ours) == _rescue_with_lists(records, parents, theirs) == 1
    assert ours == theirs
