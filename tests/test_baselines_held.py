"""What the baselines hold per call, counted as objects after N calls: beyond the messages
their requests send and the cache entries still alive, nothing grows with the calls (per
message and per block only packed numbers are kept)."""

from __future__ import annotations

from typing import Any

from held import bytes_held, reachable
from replay_settings import replayed_strategies

from unbounded.evaluation.baselines import (
    Baseline,
    ClearEveryTurnBaseline,
)


def _replayed(calls: int) -> list[Baseline]:
    """Every baseline and native strategy after `calls` tool-call turns of about 500 tokens
    (from 200 calls on, each strategy has changed its requests and simulates on its own)."""
    return replayed_strategies(calls)


def _objects_held(strategies: list[Baseline]) -> int:
    """Objects reachable from the strategies, not counting the messages their requests send
    (the shared history's, clear_every_turn's cleared copies) and what they hold, the
    replay's settings, each simulator's cache entries and token memo (bounded by the TTL and
    the memo's size, not by the calls), and the normalizers' sets of call ids and bounded
    logs of recent edits."""
    stop: set[int] = {id(strategies[0].settings)}
    messages: list[Any] = list(strategies[0].history.messages())
    for strategy in strategies:
        # The normalizer's set of call ids is its own (model/normalize.py), not a baseline's;
        # its log of recent edits is a deque of at most _EDITS_KEPT pairs, full or not yet
        # full depending on when each strategy's history last changed.
        normalizer = strategy.history.normalizer
        stop |= {id(normalizer._names), id(normalizer._edits)}
        assert normalizer._edits.maxlen is not None
        if isinstance(strategy, ClearEveryTurnBaseline):
            messages += strategy.clearing._result
        simulator = strategy.simulator
        if simulator is not None:
            messages += simulator._blocks._messages
            stop |= {id(simulator._entries), id(simulator._openai), id(simulator._token_memo)}
    stop |= {id(item) for item in reachable(messages)}
    return len(reachable(strategies, stop))


def test_the_objects_held_do_not_grow_with_the_calls() -> None:
    """Three times the calls hold at most a few more objects (a number that outgrew the
    shared small ints), not one per call or per message."""
    strategies = _replayed(250)
    assert all(strategy.simulator is not None for strategy in strategies)
    few, many = _objects_held(strategies), _objects_held(_replayed(750))
    assert many - few < 10


def _settled_bytes(strategies: list[Baseline]) -> int:
    """Bytes of the settled (husked) messages of the shared history, strings left out (their
    ids and texts are the entries' too)."""
    shared = strategies[0].history
    return bytes_held(shared.messages()[: shared.husked], skip=(str,))


def _figures_held(strategies: list[Baseline]) -> int:
    """Blocks whose figures the simulators of the strategies that send the whole history
    (`none`, `clear_every_turn`) hold."""
    return sum(
        len(strategy.simulator._blocks.tokens)
        for strategy in strategies
        if strategy.name in ("none", "clear_every_turn") and strategy.simulator is not None
    )


def test_settled_history_and_simulator_figures_stay_small_per_call() -> None:
    """Each settled message is one packed object (a reply and a tool result together about
    300 bytes a call, not a dict, a list and a husk per block: about 870), and the
    simulators of the strategies that send the whole history hold the figures of its last
    blocks only, not of every block."""
    few, many = _replayed(250), _replayed(750)
    per_call = (_settled_bytes(many) - _settled_bytes(few)) / 500
    assert 200 < per_call < 400
    assert _figures_held(many) - _figures_held(few) < 300  # not 3 blocks a call each
    assert _figures_held(many) < 2_000
