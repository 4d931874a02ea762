"""The baselines' per-call work reuses the last call's: truncate keeps its note message while
its cut stays, and what it sends equals the request built from scratch."""

from __future__ import annotations

from typing import Any

from replay_settings import recorded_call, replay_settings

from unbounded.evaluation.baselines import (
    CLEAR_PLACEHOLDER,
    TRUNCATION_NOTE,
    History,
    ToolResultClearing,
    TruncateBaseline,
    clear_tool_results_copy,
)
from unbounded.model.entries import Entry

CHUNK = "parser detail " * 1_500  # about 5,000 tokens




def _turn(n: int) -> list[Entry]:
    return [
        Entry.user(f"question {n}"),
        Entry.assistant([{"type": "text", "text": f"answer {n} " + CHUNK}], message_id=f"m{n}"),
    ]


def test_truncate_sends_the_same_note_message_while_its_cut_stays() -> None:
    truncate = TruncateBaseline(replay_settings(30_000))
    for n in range(10):
        truncate.feed(_turn(n))
    first = truncate.plan(recorded_call(0))
    again = truncate.plan(recorded_call(1))
    assert first.changed and again.changed
    assert again.messages[0] is first.messages[0]
    assert again.messages[0]["content"][0] == {"type": "text", "text": TRUNCATION_NOTE}
    assert again.messages[1:] == first.messages[1:]
    truncate.feed(_turn(10))
    moved = truncate.plan(recorded_call(2))
    assert truncate.cut > 0
    assert moved.messages[0] is not first.messages[0]
    assert moved.messages[0]["content"][1:] == [{"type": "text", "text": f"question {truncate.cut // 2}"}]


def test_a_history_gives_one_list_per_state_and_a_new_one_after_any_append() -> None:
    """Strategies sharing a history read one list until it is fed; an entry merged into the
    last message (the length does not change) still gives a new list."""
    history = History(1.0)
    history.normalizer.append(Entry.user("first"))
    once = history.messages()
    assert history.messages() is once
    history.normalizer.append(Entry.user("second"))  # merged into the first user message
    merged = history.messages()
    assert merged is not once
    assert merged == history.normalizer.messages
    assert len(merged) == len(once) == 1
    counts = history.tokens.counts(merged)
    assert history.tokens.counts(merged) is counts
    assert history.tokens.total(merged) == sum(counts) > history.tokens.total(once)


def _tool_turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"out {n}"}]},
    ]


def test_clearing_a_grown_history_keeps_the_copies_it_made_and_clears_by_position() -> None:
    """A message cleared on an earlier call is the same object on the next; only the result
    that fell out of the `keep` newest is cleared anew, and nothing waits but those."""
    clearing = ToolResultClearing(3)
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(6):
        history = [*history, *_tool_turn(n)]
    first = list(clearing.apply(history))  # type: ignore[arg-type]
    history = [*history, *_tool_turn(6)]
    second = clearing.apply(history)  # type: ignore[arg-type]
    assert second == clear_tool_results_copy(history)  # type: ignore[arg-type]
    assert all(second[i] is first[i] for i in (2, 4, 6))  # results 0-2, cleared before
    assert second[8] is not first[8] and second[8]["content"][0]["content"] == CLEAR_PLACEHOLDER
    assert [second[i] is history[i] for i in (10, 12, 14)] == [True, True, True]
    assert len(clearing._waiting) == 3
