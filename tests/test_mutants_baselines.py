"""Rules of `evaluation/baselines.py` (the shared history and its settling) that the mutation
check found no test holding: a history's shared prefix is `shared_prefix_length`'s whatever
lists it is given, a strategy that does not say how much it is past settles nothing, settling
waits for `none`'s first call and husks the shared history whoever diverged, and a marker
holds a settled message at any index; and of the strategies: the calls of no strategy
price nothing, `none`'s figures are its own whoever replays beside it, truncate cuts only
over its threshold and never past the last user message, its note leaves the cut message's
tool results out, the marker goes on the last markable block, summarize_no_cache summarizes
two messages and says so, clear_every_turn clears only over its trigger, and the clearing
counts its own edits and holds settled messages."""

from __future__ import annotations

from typing import Any

import pytest
from replay_settings import recorded_call, replay_settings, tool_turn

from unbounded.caching.blocks import FlatBlock
from unbounded.caching.husks import HuskedBlock, husk_blocks, husk_message, is_husked_message
from unbounded.errors import SettledMessageError
from unbounded.evaluation.baselines import (
    CLEAR_PLACEHOLDER,
    TRUNCATION_NOTE,
    Baseline,
    ClearEveryTurnBaseline,
    History,
    LastMarked,
    NoneBaseline,
    SummarizeNoCacheBaseline,
    ToolResultClearing,
    TruncateBaseline,
    _truncated_head,
    feed_strategies,
    husk_settled,
    make_baselines,
    mark_last_message,
    run_baselines,
)
from unbounded.model.entries import Entry
from unbounded.model.prefix import shared_prefix_length

CALLS = 12


def _tokens(block: FlatBlock, digest: bytes) -> int:
    return 3 + digest[0] % 5


def _run(strategies: list[Baseline], calls: int = CALLS) -> None:
    feed_strategies(strategies, [Entry.user("start the work")])
    for n in range(calls):
        run_baselines(strategies, recorded_call(n))
        feed_strategies(strategies, tool_turn(n))


def test_a_history_s_shared_prefix_is_that_of_the_lists_it_is_given() -> None:
    """Told what changed only between its current and previous lists: any other pair, one
    of them its own, is compared in full."""
    history = History(1.0, [Entry.user("start"), *tool_turn(0), *tool_turn(1)])
    before = history.messages()
    history.normalizer.append(tool_turn(2)[0])
    now = history.messages()
    assert now is not before and len(now) == len(before) + 1
    other_first = [{"role": "user", "content": "another start"}, *now[1:]]
    for new, old in (
        (now, before),
        (now, other_first),
        (other_first, before),
        (now, now[:2]),
        (before[:3], before),
    ):
        assert history.shared_prefix(new, old) == shared_prefix_length(new, old)
    assert history.shared_prefix(now, other_first) == 0


class _ReadsEverything(Baseline):
    """A strategy that does not say how much of the history it is past."""

    name = "reads_everything"


def test_a_strategy_that_does_not_say_how_far_it_is_past_settles_nothing() -> None:
    shared = History(1.0)
    config = replay_settings(1_000_000)
    strategies: list[Baseline] = [NoneBaseline(config, shared), _ReadsEverything(config, shared)]
    _run(strategies)
    assert shared.husked == 0
    assert not any(is_husked_message(message) for message in shared.messages())
    assert NoneBaseline(config, shared).settled(shared) == len(shared.messages())


def test_settling_waits_for_none_s_first_call_and_needs_strategies() -> None:
    shared = History(1.0, [Entry.user("start"), *tool_turn(0), *tool_turn(1), *tool_turn(2)])
    config = replay_settings(1_000_000)
    strategies: list[Baseline] = [NoneBaseline(config, shared), TruncateBaseline(config, shared)]
    husk_settled([])  # nothing to settle, nothing raised
    husk_settled(strategies)  # none has simulated nothing yet: no counter to husk with
    assert shared.husked == 0


def test_the_shared_history_settles_while_a_later_strategy_shares_none_s_calls() -> None:
    """Truncate, under its threshold, never simulates on its own (no simulator of its own):
    the shared history settles by `none`'s."""
    shared = History(1.0)
    config = replay_settings(1_000_000)
    truncate = TruncateBaseline(config, shared)
    strategies: list[Baseline] = [NoneBaseline(config, shared), truncate]
    _run(strategies)
    assert truncate.simulator is None
    assert shared.husked > 0
    assert any(is_husked_message(message) for message in shared.messages())


def test_the_shared_history_settles_when_a_later_strategy_has_a_history_of_its_own() -> None:
    """Once summarize_no_cache has summarized it reads its own history, not the shared one:
    the shared history settles all the same, and its own is left as it is."""
    shared = History(1.0)
    config = replay_settings(6_000)
    summarize = SummarizeNoCacheBaseline(config, shared)
    strategies: list[Baseline] = [NoneBaseline(config, shared), summarize]
    _run(strategies, 20)
    assert summarize.history is not shared  # it summarized
    assert shared.husked > 0
    assert any(is_husked_message(message) for message in shared.messages())
    assert summarize.history.husked == 0


def test_a_marker_holds_a_settled_message_at_index_0_too() -> None:
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}],
    }
    marker = LastMarked()
    marked = marker.mark([reply, result], {"type": "ephemeral"})
    assert marked[0] is reply
    settled = husk_message(reply, 0, _tokens, 1)
    assert settled is not None
    marker.swap([(0, reply, settled)])
    assert marked[0] is settled


def _history(turns: int) -> History:
    entries = [Entry.user("start the work")]
    for n in range(turns):
        entries += tool_turn(n)
    return History(1.0, entries)


def test_the_calls_of_no_strategy_price_nothing() -> None:
    assert run_baselines([], recorded_call(0)) == {}


def test_none_s_figures_are_its_own_whoever_replays_beside_it() -> None:
    """Truncate, over its threshold from the first call, takes a copy of none's cache state
    (none's simulator made for it first): none's figures are those it has alone."""
    alone: list[Baseline] = [NoneBaseline(replay_settings(3_000), History(1.0))]
    shared = History(1.0)
    truncate = TruncateBaseline(replay_settings(3_000), shared)
    beside: list[Baseline] = [NoneBaseline(replay_settings(3_000), shared), truncate]
    for strategies in (alone, beside):
        feed_strategies(strategies, [Entry.user("start the work")])
        for n in range(6):
            feed_strategies(strategies, tool_turn(n))
    figures: list[list[Any]] = [[], []]
    for n in range(8):
        for k, strategies in enumerate((alone, beside)):
            figures[k].append(run_baselines(strategies, recorded_call(n))["none"])
            feed_strategies(strategies, tool_turn(6 + n))
        assert truncate.diverged
    assert figures[0] == figures[1]


def test_truncate_sends_everything_up_to_its_threshold_and_cuts_past_it() -> None:
    history = _history(6)
    total = 2_000 + history.tokens.total(history.messages())  # the prefix and the messages
    at = TruncateBaseline(replay_settings(total), history).plan(recorded_call(0))
    assert at.messages is history.messages() and not at.changed
    over = TruncateBaseline(replay_settings(total - 1), history).plan(recorded_call(0))
    assert over.changed and over.messages[0]["content"][0]["text"] == TRUNCATION_NOTE


def test_truncate_under_its_prefix_cuts_at_the_last_user_message() -> None:
    history = _history(4)
    messages = history.messages()
    plan = TruncateBaseline(replay_settings(100), history).plan(recorded_call(0))
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert plan.changed and len(plan.messages) == len(messages) - last_user
    assert plan.messages[0]["content"] == [{"type": "text", "text": TRUNCATION_NOTE}]


def test_truncate_with_one_user_message_sends_it_whole() -> None:
    history = History(1.0, [Entry.user("a long first request " * 2_000)])
    plan = TruncateBaseline(replay_settings(3_000), history).plan(recorded_call(0))
    assert plan.messages is history.messages() and not plan.changed


def test_the_note_leaves_the_cut_message_s_tool_results_out() -> None:
    result = {"type": "tool_result", "tool_use_id": "t", "content": "r"}
    text = {"type": "text", "text": "and this"}
    head = _truncated_head({"role": "user", "content": [result, text]})
    assert head["content"] == [{"type": "text", "text": TRUNCATION_NOTE}, text]


def test_the_marker_goes_on_the_last_markable_block() -> None:
    marker = {"type": "ephemeral"}
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "b"}, thinking]}
    marked = mark_last_message([{"role": "user", "content": "a"}, reply], marker)
    assert marked[1]["content"] == [
        {"type": "text", "text": "b", "cache_control": marker},
        thinking,
    ]
    three = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    marked = mark_last_message([*three, {"role": "user", "content": ""}], marker)
    assert marked[1]["content"] == [{"type": "text", "text": "b", "cache_control": marker}]
    assert marked[0]["content"] == "a"


def test_summarize_no_cache_summarizes_two_messages_and_says_so() -> None:
    history = History(
        1.0,
        [
            Entry.user("start the work " * 1_000),
            Entry.assistant([{"type": "text", "text": "done " * 1_000}], message_id="m0"),
        ],
    )
    assert len(history.messages()) == 2
    summarize = SummarizeNoCacheBaseline(replay_settings(3_000), history)
    plan = summarize.plan(recorded_call(0))
    assert plan.changed and len(plan.side) == 1
    assert (summarize.summaries, summarize.run.compactions) == (1, 1)
    assert summarize.plan(recorded_call(1)).changed  # its own history from now on
    fresh = SummarizeNoCacheBaseline(replay_settings(1_000_000), _history(2))
    assert not fresh.plan(recorded_call(0)).changed


def test_clear_every_turn_clears_only_over_its_trigger() -> None:
    under = _history(6)  # six results, far under 100,000 tokens
    plan = ClearEveryTurnBaseline(replay_settings(1_000_000), under).plan(recorded_call(0))
    assert plan.messages is under.messages() and not plan.changed
    entries = [Entry.user("start the work")]
    for n in range(6):
        reply, result = tool_turn(n)
        block = {**result.data["message"]["content"][0], "content": "x" * 80_000}
        entries += [reply, Entry.user([block])]
    over = History(1.0, entries)
    plan = ClearEveryTurnBaseline(replay_settings(1_000_000), over).plan(recorded_call(0))
    results = [
        m["content"][0]["content"]
        for m in plan.messages
        if m["role"] == "user" and isinstance(m["content"], list)
    ]
    assert plan.changed and results == [CLEAR_PLACEHOLDER] * 3 + ["x" * 80_000] * 3


def _round(n: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"r{n}"}],
        },
    ]


def test_the_clearing_s_own_list_compared_with_itself_counts_its_edits() -> None:
    clearing = ToolResultClearing(1)
    messages: list[Any] = [{"role": "user", "content": "start"}, *_round(0)]
    result = clearing.apply(messages)
    clearing.shared_prefix(result, result)
    before = list(result)
    messages = [*messages, *_round(1)]
    assert clearing.apply(messages) is result  # edited in place: result 0 cleared now
    unchanged = clearing.shared_prefix(result, result)
    assert unchanged <= shared_prefix_length(result, before) < len(before)


def test_the_clearing_holds_settled_messages_and_settles_its_cleared_copies() -> None:
    clearing = ToolResultClearing(1, husk_tokens=lambda: _tokens)
    messages: list[Any] = [*_round(0), *_round(1)]
    result = clearing.apply(messages)
    reply, cleared_copy = messages[0], result[1]
    assert result[0] is reply and cleared_copy is not messages[1]
    swaps = []
    for index in (0, 1):
        settled = husk_message(messages[index], index, _tokens, 1)
        assert settled is not None
        swaps.append((index, messages[index], settled))
        messages[index] = settled  # as History.husk settles the list in place
    copies = clearing.swap(swaps)
    assert result[0] is messages[0]
    assert is_husked_message(result[1]) and result[1] is not messages[1]
    assert copies == [(1, cleared_copy, result[1])]
    held = list(result)
    assert clearing.swap(swaps) == [] and result == held  # told again: nothing changes


def test_the_clearing_s_own_list_against_another_is_compared_in_full() -> None:
    clearing = ToolResultClearing(1)
    messages: list[Any] = [{"role": "user", "content": "start"}, *_round(0), *_round(1)]
    result = clearing.apply(messages)
    assert clearing.shared_prefix(result, result) == 0  # first asked: nothing known yet
    assert clearing.shared_prefix(result, result) == len(result)
    other = [{"role": "user", "content": "another start"}, *result[1:]]
    assert clearing.shared_prefix(result, other) == 0


def test_a_settled_cleared_copy_clears_only_the_results_the_copy_cleared() -> None:
    """Two results in one message, the newest kept: settled, its cleared copy clears the
    first alone, as the dict copy does."""
    calls = [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}} for n in (0, 1)]
    results = [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"r{n}"} for n in (0, 1)]
    messages: list[Any] = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]
    clearing = ToolResultClearing(1, husk_tokens=lambda: _tokens)
    result = clearing.apply(messages)
    copy = result[2]
    assert [b["content"] for b in copy["content"]] == [CLEAR_PLACEHOLDER, "r1"]
    settled = husk_message(messages[2], 2, _tokens, 1)
    assert settled is not None
    old, messages[2] = messages[2], settled
    clearing.swap([(2, old, settled)])
    expected = husk_message(copy, 2, _tokens, -1)
    assert expected is not None and is_husked_message(result[2])
    assert [(b.kind, b.digest, b.tokens) for b in result[2].blocks()] == [
        (b.kind, b.digest, b.tokens) for b in expected.blocks()
    ]


def test_clearing_a_settled_message_without_its_counter_fails_loudly() -> None:
    messages: list[Any] = [*_round(0), *_round(1)]
    settled = husk_message(messages[1], 1, _tokens, 1)
    assert settled is not None
    messages[1] = settled
    with pytest.raises(SettledMessageError, match="no counter"):
        ToolResultClearing(1).apply(messages)


def test_a_husked_result_cleared_is_a_husk_with_a_counter_and_a_dict_without() -> None:
    def husked_list() -> list[Any]:
        text = {"type": "text", "text": "see"}
        mixed = {"role": "user", "content": [_round(0)[1]["content"][0], text]}
        husk_blocks(mixed, 1, _tokens)
        return [_round(0)[0], mixed, *_round(1)]

    counted = ToolResultClearing(1, husk_tokens=lambda: _tokens).apply(husked_list())
    block = counted[1]["content"][0]
    assert type(block) is HuskedBlock and block.fields() == {
        "type": "tool_result",
        "tool_use_id": "t0",
    }
    uncounted = ToolResultClearing(1).apply(husked_list())
    assert uncounted[1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t0",
        "content": CLEAR_PLACEHOLDER,
    }


def test_the_baselines_share_one_history_given_or_not() -> None:
    config = replay_settings(30_000)
    made = make_baselines(config)
    assert len({id(b.history) for b in made}) == 1
    given = History(1.0)
    assert all(b.history is given for b in make_baselines(config, given))
