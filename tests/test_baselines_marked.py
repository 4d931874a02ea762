"""The baselines' requests cost what changed, not the history's length: the last message is
marked in the strategy's own list (no copy of the whole list per call), and the cache
simulator, told how many first messages are unchanged, compares only the rest; what is sent
equals the request marked from scratch."""

from __future__ import annotations

from typing import Any

import pytest
from replay_settings import MODEL, recorded_call, replay_settings, tool_turn

from unbounded.caching import request_blocks
from unbounded.caching.blocks import FlatBlock
from unbounded.caching.request_blocks import RequestBlocks
from unbounded.caching.simulator import CacheSimulator
from unbounded.evaluation import baselines
from unbounded.evaluation.baselines import (
    ClearEveryTurnBaseline,
    History,
    LastMarked,
    NoneBaseline,
    feed_strategies,
    mark_last_message,
    run_baselines,
)
from unbounded.model.entries import Entry

MARK = {"type": "ephemeral"}


def test_last_marked_equals_marking_from_scratch_in_its_own_list() -> None:
    """Grown, merged into and cut lists: each result equals `mark_last_message`, is the same
    list object, and `unchanged` never claims a message that changed."""
    history = History(1.0)
    marker = LastMarked(history.shared_prefix)
    history.normalizer.append(Entry.user("go"))
    previous: list[Any] = []
    for n in range(40):
        history.normalizer.append(Entry.assistant(f"answer {n}", message_id=f"a{n}"))
        history.normalizer.append(Entry.user(f"question {n}"))
        if n % 3 == 0:
            history.normalizer.append(Entry.user(f"and {n}"))  # merged into the last message
        messages = history.messages()
        out = marker.mark(messages, MARK)
        assert out == mark_last_message(messages, MARK)
        assert all(out[i] is previous[i] for i in range(marker.unchanged))
        assert marker.unchanged >= len(messages) - 4
        previous = list(out)
    other = [*history.messages()[:10]]  # another list: compared in full
    assert marker.mark(other, MARK) == mark_last_message(other, MARK)
    assert marker.unchanged <= 9


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the whole-list walks and copies the baselines' requests could make."""
    seen = {"own": 0, "copies": 0, "longest": 0}
    own, plain = request_blocks.shared_prefix_length_own, request_blocks.shared_prefix_length

    def counting_own(new: Any, old: Any) -> int:
        seen["own"] += 1
        return own(new, old)

    def measuring(new: Any, old: Any) -> int:
        seen["longest"] = max(seen["longest"], min(len(new), len(old)))
        assert min(len(new), len(old)) < 10
        return plain(new, old)

    def copying(messages: Any, marker: Any) -> Any:
        seen["copies"] += 1
        return mark_last_message(messages, marker)

    monkeypatch.setattr(request_blocks, "shared_prefix_length_own", counting_own)
    monkeypatch.setattr(request_blocks, "shared_prefix_length", measuring)
    monkeypatch.setattr(baselines, "shared_prefix_length", measuring)
    monkeypatch.setattr(baselines, "mark_last_message", copying)
    return seen


def test_the_whole_history_strategies_walk_only_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`none` and `clear_every_turn` (diverged from 200 calls on) at 500+ messages: no copy
    of the list, no comparison of it from the start, and every request sent is the history
    (cleared) marked from scratch."""
    shared = History(1.0)
    config = replay_settings(30_000)
    strategies = [NoneBaseline(config, shared), ClearEveryTurnBaseline(config, shared)]
    feed_strategies(strategies, [Entry.user("start the work")])
    for n in range(250):
        run_baselines(strategies, recorded_call(n))
        feed_strategies(strategies, tool_turn(n))
    assert strategies[1].diverged
    sent: list[list[Any]] = []
    step = CacheSimulator.step

    def recording(self: CacheSimulator, time: Any, request: Any, **options: Any) -> Any:
        sent.append(list(request["messages"]))
        return step(self, time, request, **options)

    monkeypatch.setattr(CacheSimulator, "step", recording)
    seen = _spy(monkeypatch)
    for n in range(250, 300):
        plans = [strategy.plan(recorded_call(n)) for strategy in strategies]
        # (Marked before the call: after it, the lists hold the messages it settled.)
        expected = [mark_last_message(plan.messages, MARK) for plan in plans]
        sent.clear()
        run_baselines(strategies, recorded_call(n))
        assert sent == expected
        feed_strategies(strategies, tool_turn(n))
    assert len(shared.messages()) > 500
    assert seen == {"own": 0, "copies": 0, "longest": seen["longest"]}
    assert seen["longest"] < 10


def _count(block: FlatBlock, digest: bytes) -> int:
    return 3


def _request(messages: list[Any]) -> dict[str, Any]:
    return {"model": "m", "messages": messages}


def test_request_blocks_take_the_unchanged_count_only_from_the_same_source() -> None:
    """A count from another source than the last update's (or after an update with none) is
    not trusted: the figures equal those computed from scratch even when the count lies."""
    messages = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    changed = [*messages[:2], *({"role": "user", "content": f"x{i}"} for i in range(4))]
    source, other = object(), object()
    told = RequestBlocks(_count)
    told.update(_request(messages), drop_earlier_thinking=False, unchanged=(source, 0))
    told.update(_request(changed), drop_earlier_thinking=False, unchanged=(other, 6))
    fresh = RequestBlocks(_count)
    fresh.update(_request(changed), drop_earlier_thinking=False)
    assert list(told.hashes) == list(fresh.hashes)
    told.update(_request(messages), drop_earlier_thinking=False)
    told.update(_request(changed), drop_earlier_thinking=False, unchanged=(other, 6))
    assert list(told.hashes) == list(fresh.hashes)
    # The same source, telling the truth: only the messages from the count on are compared.
    told.update(_request(messages), drop_earlier_thinking=False, unchanged=(source, 0))
    told.update(_request(changed), drop_earlier_thinking=False, unchanged=(source, 2))
    assert list(told.hashes) == list(fresh.hashes)
    assert told.kept == fresh.size - 4 * 1


def _said(role: str, letter: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": letter * 400}]}


def test_a_new_marked_copy_inside_the_shared_messages_is_not_promised_unchanged() -> None:
    """[u, a, u] then [u, a, thinking only]: the last markable message moves back into the
    shared part (the assistant's, now a marked copy). The count handed to the simulator stops
    before it, so the simulator prices every call as it does when told nothing."""
    thinking = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}],
    }
    first, second = _said("user", "a"), _said("assistant", "b")
    turns = [
        [first, second, _said("user", "c")],
        [first, second, thinking],
        [first, second, thinking, _said("user", "d")],
    ]
    marker = LastMarked()
    marker.mark(turns[0], MARK)
    assert marker.mark(turns[1], MARK)[1] != second and marker.unchanged <= 1

    def priced(promise: bool) -> list[tuple[Any, ...]]:
        simulator, marker = CacheSimulator(MODEL), LastMarked()
        out = []
        for time, messages in enumerate(turns):
            request = {"model": MODEL.name, "max_tokens": 10, "messages": marker.mark(messages, MARK)}
            unchanged = (marker, marker.unchanged) if promise else None
            call = simulator.step(float(time), request, unchanged=unchanged)
            out.append((call.breakpoints, call.cache_read_input_tokens, call.input_tokens))
        return out

    told, untold = priced(True), priced(False)
    assert told == untold and untold[1][0] == (1,)
