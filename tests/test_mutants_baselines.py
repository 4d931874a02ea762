"""Rules of `evaluation/baselines.py` (the shared history and its settling) that the mutation
check found no test holding: a history's shared prefix is `shared_prefix_length`'s whatever
lists it is given, a strategy that does not say how much it is past settles nothing, settling
waits for `none`'s first call and husks the shared history whoever diverged, and a marker
holds a settled message at any index."""

from __future__ import annotations

from typing import Any

from replay_settings import recorded_call, replay_settings, tool_turn

from unbounded.caching.blocks import FlatBlock
from unbounded.caching.husks import husk_message, is_husked_message
from unbounded.evaluation.baselines import (
    Baseline,
    History,
    LastMarked,
    NoneBaseline,
    SummarizeNoCacheBaseline,
    TruncateBaseline,
    feed_strategies,
    husk_settled,
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
