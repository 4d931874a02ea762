"""A cache simulator keeps its request figures per head (`CacheSimulator._blocks_for`): a
session that switches models back and forth computes, at each switch, what the model's
request added since its last one, not its whole history; and it prices every call as a
simulator that computes every request from scratch does."""

from __future__ import annotations

import copy
import gc
import weakref
from typing import Any

import pytest

from unbounded.caching import request_blocks
from unbounded.caching.blocks import FlatBlock
from unbounded.caching.husks import husk_message
from unbounded.caching.request_blocks import RequestBlocks
from unbounded.caching.simulator import CacheSimulator
from unbounded.catalog import ModelInfo

MARK = {"type": "ephemeral"}
SONNET = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)
OPUS = ModelInfo("claude-opus-4-6", "anthropic", 200_000, 64_000, 5.0, 25.0)
OLD = ModelInfo(
    "claude-sonnet-4", "anthropic", 200_000, 64_000, 3.0, 15.0, keeps_previous_thinking=False
)
GPT = ModelInfo("gpt-5", "openai", 400_000, 128_000, 1.25, 10.0)
MODELS = {m.name: m for m in (OPUS, OLD, GPT)}


class Message(dict[str, Any]):
    """A message dict that can be watched with a weak reference."""


def _exchange(k: int) -> list[Message]:
    """One call's worth of history: an assistant turn with thinking and a tool call, and
    its result (every tenth, a new user turn first)."""
    out: list[Message] = []
    if k % 10 == 0:
        out.append(Message(role="user", content=[{"type": "text", "text": f"task {k} " * 20}]))
    out.append(
        Message(
            role="assistant",
            content=[
                {"type": "thinking", "thinking": f"hm {k} " * 30, "signature": "s"},
                {"type": "tool_use", "id": f"u{k}", "name": "Read", "input": {"n": k}},
            ],
        )
    )
    out.append(
        Message(
            role="user",
            content=[{"type": "tool_result", "tool_use_id": f"u{k}", "content": "x = 1\n" * 90}],
        )
    )
    return out


def _request(model: str, messages: list[Any]) -> dict[str, Any]:
    """A request with a marked system block and a marker on the last message (a copy)."""
    marked = list(messages)
    last = marked[-1]
    content = last["content"]
    marked[-1] = {**last, "content": [*content[:-1], {**content[-1], "cache_control": MARK}]}
    return {
        "model": model,
        "system": [{"type": "text", "text": "system " * 400, "cache_control": MARK}],
        "messages": marked,
    }


def _simulator(fold: bool = False) -> CacheSimulator:
    simulator = CacheSimulator(SONNET, other_models=MODELS)
    simulator.fold_settled = fold
    return simulator


def _model_of(k: int) -> str:
    """Mostly sonnet; opus and a model that drops earlier thinking now and then, GPT twice
    in a row now and then."""
    if k % 25 == 7:
        return OPUS.name
    if k % 25 in (12, 13):
        return GPT.name
    if k % 9 == 4:
        return OLD.name
    return SONNET.name


def _added(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element counter of the messages every `RequestBlocks` computes figures for."""
    added = [0]
    original = RequestBlocks._add_message

    def counting(self: RequestBlocks, index: int, message: Any, turn_start: int) -> None:
        added[0] += 1
        original(self, index, message, turn_start)

    monkeypatch.setattr(RequestBlocks, "_add_message", counting)
    return added


@pytest.mark.parametrize("fold", [False, True])
def test_a_switch_back_computes_what_was_added_since_not_the_history(
    fold: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three heads (all kept), switched between: a switch costs the messages that head has
    not seen yet (and its last turn, when earlier thinking is dropped), however long the
    history."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)
    added = _added(monkeypatch)
    simulator = _simulator(fold)
    history: list[Message] = []
    last_seen: dict[str, int] = {}
    worst = 0
    for k in range(160):
        history += _exchange(k)
        model = OPUS.name if k % 25 == 7 else OLD.name if k % 9 == 4 else SONNET.name
        before = added[0]
        simulator.step(10.0 * k, _request(model, history))
        if k >= 60:
            # At most what came since this model's last request, its last turn (<= 21
            # messages) and the marked message before.
            unseen = len(history) - last_seen.get(model, 0)
            worst = max(worst, added[0] - before - unseen)
        last_seen[model] = len(history)
    assert len(history) > 300
    assert worst <= 22


def test_every_call_is_priced_as_from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching heads (thinking dropped or kept, OpenAI caching between), with the list's
    maker promising what it shares with its last request (`unchanged`), every call equals
    the call of a simulator that computes every request in full (a fork each call)."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)
    for fold in (False, True):
        simulator, scratch = _simulator(fold), _simulator(False)
        source = object()
        history: list[Message] = []
        last: list[Any] = []
        for k in range(120):
            history += _exchange(k)
            request = _request(_model_of(k), history)
            messages = request["messages"]
            same = next(
                (i for i, (a, b) in enumerate(zip(messages, last, strict=False)) if a is not b),
                min(len(messages), len(last)),
            )
            got = simulator.step(10.0 * k, request, unchanged=(source, same))
            scratch = scratch.fork()  # the same cache, no figures: computed in full
            assert got == scratch.step(10.0 * k, request), (fold, k)
            last = messages


def test_the_least_recently_sent_head_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two heads besides the last are kept: of four, the first is computed in full again,
    the second is not."""
    added = _added(monkeypatch)
    simulator = _simulator()
    history = [m for k in range(30) for m in _exchange(k)]
    for k, system in enumerate(["a", "b", "c", "d"]):
        request = _request(SONNET.name, history)
        request["system"] = [{"type": "text", "text": system * 5000, "cache_control": MARK}]
        simulator.step(float(k), request)
    costs = []
    for system in ["b", "a"]:
        request = _request(SONNET.name, history)
        request["system"] = [{"type": "text", "text": system * 5000, "cache_control": MARK}]
        before = added[0]
        simulator.step(10.0, request)
        costs.append(added[0] - before)
    assert costs == [0, len(history)]  # b: nothing (an equal request); a: everything


def _settle(simulator: CacheSimulator, message: Message, index: int) -> Any:
    husk = husk_message(message, index, simulator.block_tokens, 100)
    assert husk is not None
    return husk


def test_a_settled_message_is_let_go_by_every_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message settled while its figures are shelved under another head is swapped there
    too: no head keeps the original (its text) alive."""
    simulator = _simulator()
    history: list[Any] = [m for k in range(4) for m in _exchange(k)]
    simulator.step(0.0, _request(SONNET.name, history))
    simulator.step(1.0, _request(OPUS.name, history))  # sonnet's figures are shelved
    index = 2
    original = history[index]
    watch = weakref.ref(original)
    husk = _settle(simulator, original, index)
    assert simulator.swap_message(index, original, husk)
    history[index] = husk
    del original
    gc.collect()
    assert watch() is None


def test_a_resumed_head_holds_the_request_own_messages() -> None:
    """Taken up again, a head's figures hold the request's messages, not equal ones that
    only they still hold (a copy settled while they were shelved)."""
    simulator = _simulator()
    history: list[Any] = [m for k in range(4) for m in _exchange(k)]
    simulator.step(0.0, _request(SONNET.name, history))
    watch = weakref.ref(history[2])
    history[2] = Message(copy.deepcopy(dict(history[2])))  # equal, another object
    # Opus's request holds the copy; sonnet's shelved figures the original (equal: shared).
    simulator.step(1.0, _request(OPUS.name, history))
    simulator.step(2.0, _request(SONNET.name, history))
    gc.collect()
    assert watch() is None


def test_resume_keeps_nothing_from_the_request_before() -> None:
    """After `resume` the next update compares every message (no promise of the source
    holds) and keeps no block from "the request before" (`kept` 0), reusing its own."""
    counted: list[FlatBlock] = []

    def count(block: FlatBlock, digest: bytes) -> int:
        counted.append(block)
        return 10

    blocks = RequestBlocks(count)
    source = object()
    history = [m for k in range(3) for m in _exchange(k)]
    request = _request(SONNET.name, history)
    blocks.update(request, drop_earlier_thinking=False, unchanged=(source, 0))
    # The same list but the first message changed: a promise of 5 unchanged would be false.
    changed = dict(
        request, messages=[Message(role="user", content="new"), *request["messages"][1:]]
    )
    blocks.resume()
    counted.clear()
    blocks.update(changed, drop_earlier_thinking=False, unchanged=(source, 5))
    assert blocks.kept == 0
    assert [b.index for b in counted] == [0]  # the first message again, nothing else


def test_a_switch_ends_the_openai_bookkeeping_of_the_last_request() -> None:
    """Between two OpenAI models, the prefixes a resumed head cuts are written with the
    time its own last request used them, not the other model's last request's."""
    mini = ModelInfo("gpt-5-mini", "openai", 400_000, 128_000, 0.25, 2.0)
    simulator = CacheSimulator(SONNET, other_models={GPT.name: GPT, mini.name: mini})
    scratch = CacheSimulator(SONNET, other_models={GPT.name: GPT, mini.name: mini})
    history = [m for k in range(20) for m in _exchange(k)]
    calls = [
        (0.0, GPT.name, history),
        (200.0, mini.name, history),
        (250.0, GPT.name, [*history[:-4], *_exchange(20)]),  # cuts the last 4 messages
        (400.0, GPT.name, history),  # its whole prefix: used at 0 s, gone by 400 s
    ]
    for time, model, messages in calls:
        request = _request(model, messages)
        scratch = scratch.fork()
        assert simulator.step(time, request) == scratch.step(time, request), time


def _shelf_of(simulator: CacheSimulator) -> list[RequestBlocks]:
    return simulator._shelf


@pytest.mark.parametrize("fold", [False, True])
def test_a_shelved_head_lets_go_of_a_replaced_history(fold: bool) -> None:
    """Once its source's history is replaced (a summary), a shelved head holds none of the
    messages it had: they are no more shared by any later request, and nothing else holds
    them."""
    simulator = _simulator(fold)
    history: list[Any] = [m for k in range(40) for m in _exchange(k)]
    simulator.step(0.0, _request(OPUS.name, history))
    simulator.step(1.0, _request(SONNET.name, history))  # opus's figures are shelved
    watches = [weakref.ref(m) for m in history]
    summary = Message(role="user", content=[{"type": "text", "text": "summary " * 50}])
    history = [summary, *_exchange(40)]
    simulator.step(2.0, _request(SONNET.name, history))
    gc.collect()
    assert sum(w() is not None for w in watches) == 0
    assert [len(b._messages) for b in _shelf_of(simulator)] == [0]


def test_a_switch_lets_go_of_what_the_request_no_longer_shares() -> None:
    """At a switch, the head just shelved and the others keep only the messages the new
    request shares with theirs."""
    simulator = _simulator()
    history: list[Any] = [m for k in range(10) for m in _exchange(k)]
    simulator.step(0.0, _request(OPUS.name, history))
    simulator.step(1.0, _request(SONNET.name, history))
    kept = history[:12]
    history = [*kept, *_exchange(10)]
    simulator.step(2.0, _request(OLD.name, history))  # a switch: both others trimmed
    assert sorted(len(b._messages) for b in _shelf_of(simulator)) == [12, 12]


def test_a_trim_costs_no_more_than_the_change_it_follows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shelved head trimmed where its source changed a message computes, taken up again,
    from there, as it would have untrimmed: the messages after the change and the new ones."""
    added = _added(monkeypatch)
    simulator = _simulator()
    history: list[Any] = [m for k in range(30) for m in _exchange(k)]
    simulator.step(0.0, _request(OPUS.name, history))
    simulator.step(1.0, _request(SONNET.name, history))
    history[40] = Message(role="user", content=[{"type": "text", "text": "cleared"}])
    simulator.step(2.0, _request(SONNET.name, history))
    history += _exchange(30)
    before = added[0]
    simulator.step(3.0, _request(OPUS.name, history))
    assert added[0] - before == len(history) - 40


def test_a_folded_shelved_head_changed_in_its_folded_part_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shelved head whose source changed a message it folded would be computed in full
    again: it is dropped at once, not kept (its figures and messages held for nothing)."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)
    monkeypatch.setattr("unbounded.caching.simulator.FOLD_KEEP_MESSAGES", 4)
    simulator = _simulator(fold=True)
    history: list[Any] = [m for k in range(40) for m in _exchange(k)]
    for k in range(3):
        history += _exchange(40 + k)
        simulator.step(float(k), _request(OPUS.name, history))
    assert simulator._blocks.folded
    simulator.step(5.0, _request(SONNET.name, history))
    assert len(_shelf_of(simulator)) == 1
    history[3] = Message(role="user", content=[{"type": "text", "text": "cleared"}])
    simulator.step(6.0, _request(SONNET.name, history))
    assert _shelf_of(simulator) == []


def test_a_trimmed_head_keeps_where_its_last_turn_was() -> None:
    """A head that drops earlier thinking, trimmed inside the last turn of its last request
    and taken up with no later turn: the thinking of that turn's assistant messages counts
    again (the trim kept where its last request's last turn was), as computed from scratch."""
    simulator, scratch = _simulator(), _simulator()
    history: list[Any] = [m for k in range(25) for m in _exchange(k)]
    # Turns start at the messages of k = 0, 10, 20; the last turn is message 63 (k = 20).
    turn = max(i for i, m in enumerate(history) if m["content"][0]["type"] == "text")
    steps: list[tuple[str, list[Any]]] = [
        (OLD.name, history),
        (SONNET.name, history),
        # A change after the one-but-last turn, before the last: trimmed there.
        (SONNET.name, [*history[: turn - 4], *_exchange(91)]),
    ]
    steps.append((OLD.name, steps[-1][1]))
    for time, (model, messages) in enumerate(steps):
        request = _request(model, messages)
        scratch = scratch.fork()
        assert simulator.step(float(time), request) == scratch.step(float(time), request), time


def test_a_recomputed_request_still_trims_the_others_where_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last head changes a message it folded (computed in full again): the others are
    trimmed where the request changed, not emptied (they still share what came before)."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)
    simulator = _simulator(fold=True)
    history: list[Any] = [m for k in range(14) for m in _exchange(k)]
    simulator.step(0.0, _request(OPUS.name, history))  # under 64 messages: nothing folded
    for k in range(40):
        history += _exchange(14 + k)
        simulator.step(1.0 + k, _request(SONNET.name, history))
    assert simulator._blocks.folded
    history[5] = Message(role="user", content=[{"type": "text", "text": "cleared"}])
    simulator.step(50.0, _request(SONNET.name, history))
    assert [len(b._messages) for b in _shelf_of(simulator)] == [5]


def test_a_trim_leaves_the_openai_bookkeeping_alone() -> None:
    """Trimming a shelved head while the last request is cached the OpenAI way writes none of
    that request's prefixes (they are not the trimmed head's): every call is priced as from
    scratch."""
    simulator, scratch = _simulator(), _simulator()
    history: list[Any] = [m for k in range(20) for m in _exchange(k)]
    changed = [*history[:10], Message(role="user", content="cleared"), *history[11:]]
    calls = [
        (0.0, SONNET.name, history),
        (10.0, GPT.name, history),
        (20.0, GPT.name, changed),  # trims sonnet's figures at message 10
        (30.0, GPT.name, [*changed, *_exchange(20)]),
    ]
    for time, model, messages in calls:
        request = _request(model, messages)
        scratch = scratch.fork()
        assert simulator.step(time, request) == scratch.step(time, request), time


def test_settling_a_message_only_a_shelved_head_holds_is_told() -> None:
    """`swap_message` says the message was there when only a shelved head held it (the
    last request sent an equal copy in its place)."""
    simulator = _simulator()
    history: list[Any] = [m for k in range(4) for m in _exchange(k)]
    simulator.step(0.0, _request(SONNET.name, history))
    index = 2
    copied = list(history)
    copied[index] = Message(copy.deepcopy(dict(history[index])))
    simulator.step(1.0, _request(OPUS.name, copied))
    original = history[index]
    assert simulator.swap_message(index, original, _settle(simulator, original, index))
