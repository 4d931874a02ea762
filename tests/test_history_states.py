"""Each state of a baselines `History` (what `History.messages` gives per version) reads the
history's own list up to where it keeps its own copy (`_HistoryList`): a new state costs what
changed, not a copy of every message, and a state held reads the same messages however the
history changes after it (appends, merges, repairs, a missing first user message)."""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.evaluation.baselines import History, _HistoryList
from unbounded.model.entries import Entry


def _entry(kind: int, tool: int, reply: int) -> Entry:
    """Entries that append, merge into the last message, need a repair or change nothing."""
    tool_id = f"t{tool}"  # few ids: repeated ones make duplicate-id repairs
    if kind == 0:
        return Entry.user(f"question {tool}")
    if kind == 1:
        return Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": "out"}])
    if kind == 2:  # a repeated response id merges into the last assistant message
        use = {"type": "tool_use", "id": tool_id, "name": "Read", "input": {}}
        return Entry.assistant([use], message_id=f"m{reply}")
    if kind == 3:  # sent stripped while it is the last message
        return Entry.assistant([{"type": "text", "text": "done \n"}], message_id=f"m{reply}")
    return Entry({"type": "system", "content": "not sent"})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 3), st.booleans()),
        max_size=60,
    ),
    st.booleans(),
)
def test_every_state_held_reads_what_the_history_was_then(
    steps: list[tuple[int, int, int, bool]], assistant_first: bool
) -> None:
    history = History(1.0)
    if assistant_first:  # each read then opens with a user message made anew
        history.normalizer.append(Entry.assistant([{"type": "text", "text": "hi"}]))
    held: list[tuple[Any, list[Any]]] = []
    for kind, tool, reply, read in steps:
        history.normalizer.append(_entry(kind, tool, reply))
        if read:
            state = history.messages()
            assert list(state) == history.normalizer.messages  # equal (a read makes some anew)
            held.append((state, list(state)))
    for state, then in held:  # the very messages it read then
        assert len(state) == len(then)
        assert all(a is b for a, b in zip(state, then, strict=True))
        assert all(state[n] is then[n] for n in range(-len(then), len(then)))
        assert state[1:-1] == then[1:-1] and state[::2] == then[::2]
        assert state == then and list(state) == then


def test_a_new_state_refers_to_what_changed_not_to_every_message() -> None:
    history = History(1.0)
    history.normalizer.append(Entry.user("start"))
    for n in range(1_500):
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}
        history.normalizer.append(Entry.assistant([use], message_id=f"m{n}"))
        history.normalizer.append(
            Entry.user([{"type": "tool_result", "tool_use_id": f"t{n}", "content": "out"}])
        )
    before = history.messages()
    history.normalizer.append(Entry.assistant([{"type": "text", "text": "done"}], message_id="z"))
    after = history.messages()
    assert len(after) == len(before) + 1 == 3_002
    # A list would refer to its 3,002 messages; a state to the history's list and its copy of
    # the messages past the change (the one before it may change with it).
    assert len(gc.get_referents(after)) < 10
    assert len(gc.get_referents(before)) < 10
    assert list(after) == history.normalizer.messages


def test_a_history_that_changes_from_its_first_message_copies_no_state(monkeypatch: Any) -> None:
    """A history whose first message is made anew at each read (it opens with an assistant
    message) changes from message 0 at every state: the states held keep the old list, which
    nothing edits again, instead of each copying its messages."""
    copied: list[int] = []
    keep_from = _HistoryList.keep_from

    def counted(state: _HistoryList, start: int) -> None:
        copied.append(len(state) - start)
        keep_from(state, start)

    monkeypatch.setattr(_HistoryList, "keep_from", counted)
    history = History(1.0)
    history.normalizer.append(Entry.assistant([{"type": "text", "text": "hi"}]))
    held = []
    for n in range(50):
        history.normalizer.append(_entry(0, n, 0))
        history.normalizer.append(_entry(2, n, n))
        state = history.messages()
        held.append((state, list(state)))
    assert sum(copied) == 0
    for state, then in held:
        assert all(a is b for a, b in zip(state, then, strict=True)) and len(state) == len(then)
