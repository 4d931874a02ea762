"""Microcompaction's per-turn shortcuts equal their from-scratch definitions.

The ledger keeps the results count-based clearing chooses from (`open_results`) and the
superseded reads as calls arrive, and `_apply` builds this turn's view from the last one. On
generated conversations (reads and writes of a few files, results of every kind, requests
at every turn, now and then an equal copy of the history or a shorter one), every turn's
figures are checked against `compactable_results` filtered, `superseded_reads` over all
records, and `_apply_all` over the whole list.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_micro_properties import policies, result_content
from unbounded.compaction.ledger import ToolLedger
from unbounded.compaction.micro import (
    MicrocompactState,
    _apply_all,
    microcompact,
    superseded_reads,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PATHS = ["/a.py", "/b.py", "/c.py"]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A tool loop over three files: reads, edits, writes and commands, answered in order."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for number in range(draw(st.integers(1, 25))):
        uses, answers = [], []
        for call in range(draw(st.integers(1, 3))):
            tool_id = f"toolu_{number:02d}_{call}"
            name = draw(st.sampled_from(["Read", "Read", "Edit", "Write", "Bash", "Grep"]))
            uses.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": name,
                    "input": {"file_path": draw(st.sampled_from(PATHS)), "command": "ls"},
                }
            )
            answers.append(
                {"type": "tool_result", "tool_use_id": tool_id, "content": draw(result_content())}
            )
        messages.append({"role": "assistant", "content": uses})
        messages.append({"role": "user", "content": answers})
    return messages


def assert_ledger_matches(ledger: ToolLedger, cleared: dict[str, int]) -> None:
    expected = [
        r for r in ledger.compactable_results() if r.tool_use_id not in cleared and not r.precleared
    ]
    assert [r.tool_use_id for r in ledger.open_results()] == [
        r.tool_use_id for r in expected
    ]
    assert ledger.superseded_reads() == set(superseded_reads(ledger.records()))


@SETTINGS
@given(messages=conversations(), policy=policies, data=st.data())
def test_every_turn_equals_its_from_scratch_twin(
    messages: list[dict[str, Any]], policy: Any, data: st.DataObject
) -> None:
    state = MicrocompactState()
    state.name_handles = data.draw(st.booleans())
    for end in range(1, len(messages) + 1, 2):
        view: list[dict[str, Any]] = messages[:end]
        how = data.draw(st.sampled_from(["grow", "grow", "grow", "copy", "shorter"]))
        if how == "copy":
            view = copy.deepcopy(view)  # equal messages, other objects
        elif how == "shorter" and end > 2:
            view = view[: end - 2]  # the ledger rescans, its marks are made again
        result = microcompact(view, state, policy=policy)
        assert result.messages == _apply_all(state, view)
        assert_ledger_matches(state.ledger, state.cleared)


def test_a_clear_in_the_reused_part_is_applied_without_a_rescan() -> None:
    """The view reuses the last one: the turn's new clear is applied at its index."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n in range(6):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": f"/{n}"}}],
            }
        )
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 40_000}]})
    state = MicrocompactState()
    policy_off = microcompact(messages[:5], state).messages  # nothing to clear yet
    assert policy_off == messages[:5]
    result = microcompact(messages, state)
    assert result.cleared_ids and result.messages == _apply_all(state, messages)
    generation = state.ledger.generation
    again = microcompact(messages, state)  # nothing new: the last view, unchanged
    assert again.messages == result.messages and state.ledger.generation == generation


def test_the_saved_cleared_ids_follow_every_clear_and_reset() -> None:
    """`to_dict` builds its [id, tokens] pairs as ids are added; each dict it returns is its
    own (a later clear does not change what an earlier save holds)."""
    state = MicrocompactState()
    state.cleared["a"] = 10
    first = state.to_dict()["cleared"]
    state.cleared["b"] = 20
    second = state.to_dict()["cleared"]
    assert first == [["a", 10]] and second == [["a", 10], ["b", 20]]
    state.reset_after_compaction()
    state.cleared["c"] = 5
    assert state.to_dict()["cleared"] == [["c", 5]]
    assert MicrocompactState.from_dict(state.to_dict()).cleared == {"c": 5}
