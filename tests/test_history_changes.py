"""The history tells its readers where its list changed (`MessageNormalizer.first_changed_since`,
`History.shared_prefix`): the hint is a true lower bound, tight for an append, and the hinted
comparison equals the full one on random sessions (merges, repairs, stripped and left-out last
messages, a missing first user message, hints too old to give)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.evaluation.baselines import History, ToolResultClearing, clear_tool_results_copy
from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.prefix import shared_prefix_length


def _tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Read", "input": {}}


def _result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": f"out {tool_id}"}


def _entry(kind: int, tool: int, reply: int) -> Entry:
    """One of the entry shapes that change the list in different ways."""
    tool_id = f"t{tool}"  # few ids: repeats make duplicate-id repairs
    if kind == 0:
        return Entry.user(f"question {tool}")
    if kind == 1:
        return Entry.user([_result(tool_id)])  # answers, orphans or repeats a call
    if kind == 2:  # a response; a repeated id merges into the last assistant message
        return Entry.assistant([_tool_use(tool_id)], message_id=f"m{reply}")
    if kind == 3:
        return Entry.assistant([{"type": "text", "text": "done \n"}], message_id=f"m{reply}")
    if kind == 4:  # thinking alone: left out while it is the last message
        return Entry.assistant(
            [{"type": "thinking", "thinking": "hmm", "signature": "s"}], message_id=f"m{reply}"
        )
    return Entry({"type": "system", "content": "not sent"})  # a new version that changes nothing


_steps = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.integers(0, 4),
        st.integers(0, 3),
        st.booleans(),  # read the history after this entry
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_steps, st.booleans())
def test_the_hint_is_a_lower_bound_and_the_hinted_comparison_equals_the_full_one(
    steps: list[tuple[int, int, int, bool]], assistant_first: bool
) -> None:
    """Every message before the hint is the same object in both lists, so the comparison that
    starts there agrees with the one from the start, for every pair of lists read in turn."""
    history = History(1.0)
    if assistant_first:  # the list read then opens with an inserted user message
        history.normalizer.append(Entry.assistant([{"type": "text", "text": "hi"}]))
    previous = history.messages()
    for kind, tool, reply, read in steps:
        history.normalizer.append(_entry(kind, tool, reply))
        if not read:
            continue
        current = history.messages()
        if current is previous:
            continue
        unchanged = history._lists.unchanged
        assert all(current[i] is previous[i] for i in range(min(unchanged, len(previous))))
        assert history.shared_prefix(current, previous) == shared_prefix_length(
            current, previous
        )
        previous = current


@settings(max_examples=100, deadline=None)
@given(_steps)
def test_clearing_and_counts_of_a_hinted_history_equal_those_from_scratch(
    steps: list[tuple[int, int, int, bool]],
) -> None:
    """The readers that take the hint give what they give on a fresh list."""
    history = History(1.0)
    clearing = ToolResultClearing(2, history.shared_prefix)
    for kind, tool, reply, _ in steps:
        history.normalizer.append(_entry(kind, tool, reply))
        messages = history.messages()
        assert clearing.apply(messages) == clear_tool_results_copy(messages, keep=2)
        fresh = History(1.0)
        assert list(history.tokens.counts(messages)) == list(fresh.tokens.counts(messages))


def test_an_append_changes_the_list_from_the_message_before_it() -> None:
    """The hint after an appended message is the index of the message before it: the edit of
    the version read is not counted again, nor is the one before the change skipped."""
    normalizer = MessageNormalizer([Entry.user("first")])
    normalizer.append(Entry.assistant([{"type": "text", "text": "second"}], message_id="m1"))
    seen = normalizer.version
    assert normalizer.first_changed_since(seen) == 1  # nothing since: the last may be redone
    normalizer.append(Entry.user("third"))
    normalizer.append(Entry({"type": "system", "content": "not sent"}))
    assert normalizer.first_changed_since(seen) == 1
    assert normalizer.first_changed_since(seen - 1) == 0
    assert normalizer.first_changed_since(normalizer.version + 1) is None


def test_a_stripped_last_message_counts_as_changed_when_a_message_follows() -> None:
    """The last assistant message is sent stripped of trailing whitespace while it is last; a
    following message brings back the message itself, one before the appended one."""
    history = History(1.0)
    history.normalizer.append(Entry.user("go"))
    history.normalizer.append(
        Entry.assistant([{"type": "text", "text": "answer  "}], message_id="m1")
    )
    before = history.messages()
    history.normalizer.append(Entry.user("more"))
    after = history.messages()
    assert after[1] is not before[1] and after[0] is before[0]
    assert history.shared_prefix(after, before) == 1 == shared_prefix_length(after, before)


def test_a_reader_too_far_behind_compares_the_lists() -> None:
    """Past the versions the normalizer remembers it gives no hint, and the history compares
    from the start."""
    history = History(1.0)
    history.normalizer.append(Entry.user("go"))
    before = history.messages()
    for n in range(300):
        history.normalizer.append(Entry.assistant([_tool_use(f"x{n}")], message_id=f"r{n}"))
        history.normalizer.append(Entry.user([_result(f"x{n}")]))
    assert history.normalizer.first_changed_since(1) is None
    after = history.messages()
    assert history._lists.previous is None
    assert history.shared_prefix(after, before) == 1


def test_the_normalizer_answers_for_every_version_whose_later_edits_it_kept() -> None:
    """With one more list-changing version than it keeps, the first version's edit is
    forgotten: it answers from that version on (the edits after it are all kept), not before."""
    normalizer = MessageNormalizer()
    for n in range(257):  # versions 1-257, each appending one message at index n
        if n % 2:
            normalizer.append(Entry.assistant([{"type": "text", "text": f"a{n}"}], message_id=f"m{n}"))
        else:
            normalizer.append(Entry.user(f"q{n}"))
    assert normalizer.first_changed_since(0) is None
    assert normalizer.first_changed_since(1) == 0  # the edit of version 2 at index 1, less one
    assert normalizer.first_changed_since(200) == 199
