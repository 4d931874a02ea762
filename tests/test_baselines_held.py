"""What the baselines hold per call, counted as objects after N calls: beyond the messages
their requests send and the cache entries still alive, nothing grows with the calls (per
message and per block only packed numbers are kept)."""

from __future__ import annotations

import gc
import sys
import types
from typing import Any

from replay_settings import recorded_call, replay_settings

from unbounded.evaluation.baselines import (
    Baseline,
    ClearEveryTurnBaseline,
    History,
    feed_strategies,
    make_baselines,
    run_baselines,
)
from unbounded.evaluation.native_strategies import native_strategies
from unbounded.model.entries import Entry


def _replayed(calls: int) -> list[Baseline]:
    """Every baseline and native strategy after `calls` tool-call turns of about 500 tokens
    (from 200 calls on, each strategy has changed its requests and simulates on its own)."""
    shared = History(1.0)
    config = replay_settings(30_000)
    strategies = [*make_baselines(config, shared), *native_strategies(config, shared)]
    feed_strategies(strategies, [Entry.user("start the work")])
    for n in range(calls):
        run_baselines(strategies, recorded_call(n))
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"line {n}\n" * 200}
        feed_strategies(
            strategies,
            [
                Entry.assistant([{"type": "text", "text": f"step {n}"}, use], message_id=f"m{n}"),
                Entry.user([result]),
            ],
        )
    return strategies


def _reachable(roots: list[Any], stop: set[int]) -> set[int]:
    """Ids of the objects reachable from `roots`, not through `stop` (nor classes, modules
    or functions: code, not data)."""
    seen: set[int] = set()
    todo: list[object] = list(roots)
    while todo:
        item = todo.pop()
        if id(item) in seen or id(item) in stop or isinstance(item, _CODE):
            continue
        seen.add(id(item))
        todo.extend(gc.get_referents(item))
    return seen


_CODE = (type, types.ModuleType, types.FunctionType)


def _objects_held(strategies: list[Baseline]) -> int:
    """Objects reachable from the strategies, not counting the messages their requests send
    (the shared history's, clear_every_turn's cleared copies) and what they hold, the
    replay's settings, each simulator's cache entries and token memo (bounded by the TTL and
    the memo's size, not by the calls), and the normalizers' sets of call ids."""
    stop: set[int] = {id(strategies[0].settings)}
    messages: list[Any] = list(strategies[0].history.messages())
    for strategy in strategies:
        # The normalizer's set of call ids is its own (model/normalize.py), not a baseline's.
        stop.add(id(strategy.history.normalizer._names))
        if isinstance(strategy, ClearEveryTurnBaseline):
            messages += strategy.clearing._result
        simulator = strategy.simulator
        if simulator is not None:
            messages += simulator._blocks._messages
            stop |= {id(simulator._entries), id(simulator._openai), id(simulator._token_memo)}
    stop |= _reachable(messages, set())
    return len(_reachable(list(strategies), stop))


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
    seen: set[int] = set()
    todo: list[object] = list(shared.messages()[: shared.husked])
    total = 0
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, (str, *_CODE)):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        todo.extend(gc.get_referents(item))
    return total


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
