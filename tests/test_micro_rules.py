"""Rules of microcompaction the mutation check found no test holding (session 16).

What a saved state reads back as, what the counters say after a known run, what a call that
clears nothing reports, which results a restored or restarted ledger still offers to clearing,
and what a compaction lets go of.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from test_microcompact import T0, cleared, conversation, results
from unbounded.compaction import (
    CLEARED_TOOL_RESULT,
    CompactableTools,
    MicrocompactState,
    clear_tool_results,
    count_based_microcompact,
    microcompact,
    select_count_based,
    select_time_based,
    time_based_microcompact,
)
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.errors import ConfigError
from unbounded.policy import Policy

ZERO_STATS = {
    "turns": 0,
    "count_clear_events": 0,
    "time_clear_events": 0,
    "results_cleared": 0,
    "tokens_cleared": 0,
    "cache_breaking_changes": 0,
    "cache_edit_batches": 0,
    "cache_refs_deleted": 0,
    "cache_tokens_deleted": 0,
    "cache_expiries": 0,
    "compactions": 0,
}


def _open_ids(state: MicrocompactState) -> list[str]:
    return [record.tool_use_id for record in state.ledger.open_results()]


# -- saved state ------------------------------------------------------------------------------


def test_a_state_saved_as_version_1_reads_back() -> None:
    """The saved format is version 1: a file written by an earlier run still loads."""
    saved: dict[str, Any] = {
        "version": 1,
        "tools": CompactableTools.default().to_dict(),
        "cleared": [["t0", 10_000]],
        "cached": {},
        "stats": {"turns": 3, "count_clear_events": 1},
    }
    state = MicrocompactState.from_dict(saved)
    assert state.cleared == {"t0": 10_000}
    assert state.stats.to_dict() == {**ZERO_STATS, "turns": 3, "count_clear_events": 1}
    assert state.to_dict()["version"] == 1
    with pytest.raises(ConfigError):
        MicrocompactState.from_dict({**saved, "version": 2})


def test_a_saved_counter_that_is_not_a_whole_number_is_refused() -> None:
    base = MicrocompactState().to_dict()
    for bad in (-1, True, "3", 1.5, None):
        with pytest.raises(ConfigError, match=r"stats\.turns"):
            MicrocompactState.from_dict({**base, "stats": {"turns": bad}})
    assert MicrocompactState.from_dict({**base, "stats": {"turns": 0}}).stats.turns == 0


# -- counters ---------------------------------------------------------------------------------


def test_a_new_state_counts_nothing_and_a_run_counts_exactly_what_happened() -> None:
    state = MicrocompactState()
    assert state.stats.to_dict() == ZERO_STATS
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]
    count_based_microcompact(conversation(calls), state)  # clears t0..t3: 40,000 tokens
    assert state.stats.to_dict() == {
        **ZERO_STATS,
        "turns": 1,
        "count_clear_events": 1,
        "results_cleared": 4,
        "tokens_cleared": 40_000,
        "cache_breaking_changes": 1,
    }


def test_only_a_response_showing_expiry_counts_as_one() -> None:
    state = MicrocompactState()
    assert not state.observe_response({"cache_read_input_tokens": 80_000})
    assert state.stats.cache_expiries == 0
    assert state.observe_response({"cache_read_input_tokens": 0})
    assert state.stats.cache_expiries == 1


def test_a_call_that_clears_nothing_saves_nothing() -> None:
    result = count_based_microcompact(conversation([("t0", "Bash", 100)]), MicrocompactState())
    assert result.tier == "none" and result.tokens_saved == 0 and result.cleared_ids == ()


# -- what the ledger offers to clearing -------------------------------------------------------


def test_a_restored_or_restarted_ledger_offers_no_cleared_result_again() -> None:
    """`observe` tells a new ledger, and one that started over, which results are cleared:
    only the others are open to clearing (the ids a state restores are not offered again)."""
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(4)])
    saved = MicrocompactState().to_dict()
    state = MicrocompactState.from_dict({**saved, "cleared": [["t0", 10_000], ["t1", 10_000]]})
    state.observe(messages)
    assert _open_ids(state) == ["t2", "t3"]
    other = conversation([(f"o{i}", "Bash", 10_000) for i in range(4)])
    generation = state.ledger.generation
    state.observe(other)  # another conversation: the ledger starts over...
    state.observe(messages)  # ...and over again, with this one
    assert state.ledger.generation == generation + 2
    assert _open_ids(state) == ["t2", "t3"]


# -- the saved [id, tokens] pairs ----------------------------------------------------------------


def test_the_saved_pairs_are_those_of_the_cleared_ids_even_when_edited_from_outside() -> None:
    """The pairs are built as ids are added; a dict put in place of `cleared`, or an id taken
    out of it, is saved as it now is, not from the pairs made before."""
    state = MicrocompactState()
    state.cleared.update({"a": 1, "b": 2})
    assert state.cleared_pairs() == [["a", 1], ["b", 2]]
    state.cleared = {"c": 3, "d": 4, "e": 5}
    assert state.cleared_pairs() == [["c", 3], ["d", 4], ["e", 5]]
    del state.cleared["d"]
    assert state.cleared_pairs() == [["c", 3], ["e", 5]]
    assert state.to_dict()["cleared"] == [["c", 3], ["e", 5]]


def test_a_compaction_lets_go_of_the_saved_pairs_not_of_the_cleared_ids() -> None:
    """What waits to be freed after a compaction is the pairs list `to_dict` built (the
    large list), here 2 pairs while 3 ids are cleared."""
    state = MicrocompactState()
    state.cleared.update({"a": 1, "b": 2})
    assert len(state.cleared_pairs()) == 2
    state.cleared["c"] = 3  # not saved since
    state.reset_after_compaction()
    assert state._release.pending == 2


def test_saved_state_that_is_not_the_saved_shape_is_refused() -> None:
    good = MicrocompactState().to_dict()
    tools = good["tools"]
    bad_parts: list[dict[str, Any]] = [
        {"version": None},
        {"tools": ["Bash"]},
        {"tools": {**tools, "tools": "Bash"}},
        {"tools": {**tools, "aliases": ["x"]}},
        {"tools": {"aliases": tools["aliases"]}},
        {"cleared": {"t0": 5}},
        {"cleared": 5},
        {"cleared": [["t0", 5, 1]]},
        {"cleared": [("t0", 5)]},
        {"cleared": [[5, 5]]},
        {"cleared": [["t0", "5"]]},
        {"cleared": [["t0", True]]},
        {"cleared": [["t0", -1]]},
        {"cached": []},
        {"stats": []},
    ]
    for part in bad_parts:
        with pytest.raises(ConfigError):
            MicrocompactState.from_dict({**good, **part})


def test_an_empty_result_cleared_by_the_time_tier_is_saved_and_read_back() -> None:
    """An empty result counts 0 tokens; once cleared, its [id, 0] pair loads again."""
    messages = conversation([("empty", "Bash", ""), *[(f"t{i}", "Bash", 10) for i in range(5)]])
    state = MicrocompactState()
    result = time_based_microcompact(
        messages, state, now=T0 + timedelta(hours=2), last_assistant_at=T0
    )
    assert result.cleared_ids == ("empty",) and result.tokens_saved == 0
    again = MicrocompactState.from_dict(state.to_dict())
    assert again.cleared == {"empty": 0}


def test_a_saved_registry_is_used_unless_one_is_given() -> None:
    """A tool registered in a session stays compactable in the state read back; a registry
    passed to `from_dict` replaces the saved one."""
    state = MicrocompactState()
    assert state.register_compactable("MyFetch")
    saved = state.to_dict()
    assert MicrocompactState.from_dict(saved).tools.is_compactable("MyFetch")
    given = CompactableTools.default()
    again = MicrocompactState.from_dict(saved, given)
    assert again.tools is given and not again.tools.is_compactable("MyFetch")


# -- the pure building blocks ---------------------------------------------------------------


def test_clearing_searches_every_position_it_is_given_the_first_too_and_ignores_the_rest() -> None:
    first: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 40}],
    }
    messages = [first, *conversation([("b", "Bash", 10)])]
    out, found = clear_tool_results(messages, {"a", "b"}, indices=[0, 3, 99, -1])
    assert found == {"a", "b"}
    assert cleared(out) == {"a", "b"}
    out, found = clear_tool_results(messages, {"a", "b"}, indices=[3])
    assert found == {"b"} and cleared(out) == {"b"}


def test_only_tool_results_of_user_messages_are_cleared_and_other_items_are_kept() -> None:
    """A loose string in a content list, a block of another kind naming the id, or a result
    block quoted in an assistant message is left as it is."""
    quoted = {"type": "tool_result", "tool_use_id": "a", "content": "quoted"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [quoted, {"type": "tool_use", "id": "a", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                "loose text",
                {"type": "text", "tool_use_id": "a", "content": "a note"},
                {"type": "tool_result", "tool_use_id": "a", "content": "x" * 40},
            ],
        },
    ]
    out, found = clear_tool_results(messages, {"a"})
    assert found == {"a"}
    assert out[1] is messages[1] and out[1]["content"][0] == quoted
    assert out[2]["content"][:2] == messages[2]["content"][:2]
    assert out[2]["content"][2]["content"] == CLEARED_TOOL_RESULT


def test_count_selection_returns_nothing_under_the_minimum_saving() -> None:
    candidates = [("a", 100), ("b", 200), ("c", 50)]
    assert select_count_based(candidates, keep_recent=1, protect_tokens=0, min_savings=301) == (
        [],
        0,
    )
    assert select_count_based(candidates, keep_recent=1, protect_tokens=0, min_savings=300) == (
        ["a", "b"],
        300,
    )


def test_the_time_tier_keeps_exactly_one_result_when_told_to_keep_one() -> None:
    ids = ["a", "b", "c"]
    assert select_time_based(ids, keep_recent=1) == ["a", "b"]
    assert select_time_based(ids, keep_recent=0) == ids
    messages = conversation([(f"t{i}", "Bash", 10) for i in range(3)])
    result = time_based_microcompact(
        messages,
        MicrocompactState(),
        now=T0 + timedelta(hours=2),
        last_assistant_at=T0,
        policy=Policy(time_based_keep_recent=1),
    )
    assert result.cleared_ids == ("t0", "t1")
    assert cleared(result.messages) == {"t0", "t1"}


# -- the view, turn after turn ----------------------------------------------------------------


def _result(tool_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def _two_calls_one_answered() -> list[dict[str, Any]]:
    uses = [{"type": "tool_use", "id": i, "name": "Bash", "input": {}} for i in ("a", "b")]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [_result("a", "x" * 400)]},
    ]


def test_nothing_cleared_lends_the_input_itself_when_sharing() -> None:
    messages = conversation([("t0", "Bash", 10)])
    shared = microcompact(messages, MicrocompactState(), share_view=True)
    assert shared.tier == "none" and shared.messages is messages
    copied = microcompact(messages, MicrocompactState())
    assert copied.messages == messages and copied.messages is not messages


def test_a_cleared_result_stays_cleared_when_its_message_gets_another_result() -> None:
    """Parallel calls answered in two transcript lines: the last user message first holds
    one result (cleared after a pause), then both. The next view still has it cleared."""
    state = MicrocompactState()
    first = microcompact(
        _two_calls_one_answered(),
        state,
        now=T0 + timedelta(hours=2),
        last_assistant_at=T0,
        policy=Policy(time_based_keep_recent=0),
    )
    assert first.cleared_ids == ("a",)
    grown = _two_calls_one_answered()
    grown[2] = {"role": "user", "content": [_result("a", "x" * 400), _result("b", "y" * 40)]}
    second = microcompact(grown, state)
    assert second.tier == "none"
    assert results(second.messages)["a"]["content"] == CLEARED_TOOL_RESULT
    assert results(second.messages)["b"]["content"] == "y" * 40


def test_placeholders_name_the_recall_handle_from_the_turn_the_state_does() -> None:
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(8)])
    state = MicrocompactState()
    first = microcompact(messages, state)
    assert cleared(first.messages) == {"t0", "t1", "t2", "t3"}
    state.name_handles = True  # the session now offers `recall`
    second = microcompact(messages, state)
    for tool_id in ("t0", "t1", "t2", "t3"):
        assert results(second.messages)[tool_id]["content"] == cleared_stub(tool_id)
    assert not cleared(second.messages)


def test_the_view_follows_the_cleared_ids_even_when_edited_from_outside() -> None:
    """`_apply_all` is the definition: an id taken out of `cleared` is shown again, one not in
    the messages is skipped, one put in is cleared."""
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(8)])
    state = MicrocompactState()
    assert cleared(microcompact(messages, state).messages) == {"t0", "t1", "t2", "t3"}
    del state.cleared["t0"]
    assert cleared(state.apply_clears(messages)) == {"t1", "t2", "t3"}
    state.cleared["gone"] = 5  # a result of an older history
    state.cleared["t5"] = 10_000
    assert cleared(state.apply_clears(messages)) == {"t1", "t2", "t3", "t5"}
    assert cleared(microcompact(messages, state).messages) == {"t1", "t2", "t3", "t5"}


def test_a_result_is_cleared_where_it_is_when_a_misplaced_copy_misled_the_ledger() -> None:
    """A result block first seen in an assistant message (where clearing never looks) puts the
    ledger on the wrong message: the user message's result is then searched for and cleared,
    whether the view is built from scratch or from the last one."""
    uses = [{"type": "tool_use", "id": i, "name": "Bash", "input": {}} for i in ("a", "b")]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": uses},
        {"role": "assistant", "content": [_result("a", "misplaced")]},
        {"role": "user", "content": [_result("a", "x" * 400), _result("b", "y" * 400)]},
    ]
    state = MicrocompactState()
    state.cleared["a"] = 100
    assert cleared(state.apply_clears(messages)) == {"a"}
    state = MicrocompactState()
    state.cleared["b"] = 100
    assert cleared(state.apply_clears(messages)) == {"b"}
    state.cleared["a"] = 100
    view = state.apply_clears(messages)
    assert cleared(view) == {"a", "b"} and view[2] is messages[2]


def test_only_reads_give_a_path_to_drop_from_read_file_state() -> None:
    calls = [("r0", "Read", 10_000), *[(f"t{i}", "Bash", 10_000) for i in range(7)]]
    result = count_based_microcompact(conversation(calls), MicrocompactState())
    assert result.cleared_ids == ("r0", "t0", "t1", "t2")
    assert result.cleared_read_paths == ("/src/r0.py",)


def test_a_cleared_id_whose_call_is_not_answered_in_the_view_changes_nothing() -> None:
    """A call whose result is not (or no longer) in the messages has nothing to clear."""
    messages = _two_calls_one_answered()  # b is not answered
    state = MicrocompactState()
    state.cleared["a"] = 100
    assert cleared(state.apply_clears(messages)) == {"a"}
    state.cleared["b"] = 10
    view = state.apply_clears(messages)
    assert cleared(view) == {"a"} and view[1] is messages[1]


# -- the tiers and the switches ---------------------------------------------------------------


def test_without_apply_the_clears_are_decided_and_the_input_returned_as_it_is() -> None:
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(8)])
    state = MicrocompactState()
    result = microcompact(messages, state, apply=False)
    assert result.cleared_ids == ("t0", "t1", "t2", "t3")
    assert result.messages is messages and not cleared(result.messages)
    assert cleared(state.apply_clears(messages)) == {"t0", "t1", "t2", "t3"}


def test_with_no_minimum_saving_an_old_empty_result_is_cleared_too() -> None:
    """Nothing protected, no minimum saving: every result but the kept one goes, an empty one
    (0 tokens saved) too."""
    policy = Policy(
        microcompact_keep_recent=1, microcompact_protect_recent_tokens=0, microcompact_min_savings=0
    )
    messages = conversation([("e0", "Bash", ""), ("t1", "Bash", 100)])
    result = microcompact(messages, MicrocompactState(), policy=policy)
    assert result.tier == "count" and result.cleared_ids == ("e0",)
    assert result.tokens_saved == 0 and cleared(result.messages) == {"e0"}


def test_a_pause_with_no_more_than_the_kept_results_clears_and_counts_nothing() -> None:
    state = MicrocompactState()
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(5)])
    result = microcompact(messages, state, now=T0 + timedelta(hours=2), last_assistant_at=T0)
    assert result.tier == "none" and result.cleared_ids == ()
    assert state.stats.time_clear_events == 0
    more = conversation([(f"t{i}", "Bash", 10_000) for i in range(6)])
    result = microcompact(more, state, now=T0 + timedelta(hours=2), last_assistant_at=T0)
    assert result.tier == "time" and result.cleared_ids == ("t0",)
    assert state.stats.to_dict() == {
        **ZERO_STATS,
        "turns": 2,
        "time_clear_events": 1,
        "results_cleared": 1,
        "tokens_cleared": 10_000,
    }


def test_switched_off_nothing_new_is_cleared_and_pinned_edits_go_only_where_supported() -> None:
    off = Policy(microcompact_enabled=False)
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]
    state = MicrocompactState()
    result = microcompact(conversation(calls), state, policy=off)
    assert result.tier == "none" and not cleared(result.messages) and not state.cleared
    timed = microcompact(
        conversation(calls), state, policy=off, now=T0 + timedelta(hours=2), last_assistant_at=T0
    )
    assert timed.tier == "none" and not state.cleared

    cached = MicrocompactState()
    calls = [(f"t{i}", "Bash", 1000) for i in range(12)]
    queued = microcompact(conversation(calls), cached, cache_edits_supported=True)
    assert queued.tier == "cached" and queued.new_cache_edits
    kept = microcompact(conversation(calls), cached, policy=off, cache_edits_supported=True)
    assert kept.cache_edits == queued.new_cache_edits
    dropped = microcompact(conversation(calls), cached, policy=off)
    assert dropped.cache_edits == ()
