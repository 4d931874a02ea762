"""`RequestBlocks` (the cache simulator's per-request figures, reusing the previous request's)
equals its from-scratch definition on every request of generated sequences: conversations
that grow, move their cache marker, drop their earlier thinking at a new user turn, change
their system prompt, send an equal copy or a shorter history."""

from __future__ import annotations

import copy
import gc
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.caching.blocks import (
    FlatBlock,
    block_digest,
    flatten_request,
    prefix_hashes,
    without_earlier_thinking,
)
from unbounded.caching.request_blocks import RequestBlocks

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARK = {"type": "ephemeral"}


def count(block: FlatBlock, digest: bytes) -> int:
    return len(str(block.block)) // 4 + digest[0] % 3


def expected(request: dict[str, Any], drop: bool) -> tuple[list[Any], ...]:
    flat = flatten_request(request)
    if drop:
        flat = without_earlier_thinking(flat)
    digests = [block_digest(block) for block in flat]
    tokens = [count(block, digest) for block, digest in zip(flat, digests, strict=True)]
    cumulative = [sum(tokens[: i + 1]) for i in range(len(tokens))]
    markers = [i for i, block in enumerate(flat) if block.cache_control is not None]
    return flat, digests, tokens, cumulative, prefix_hashes(request, flat, digests), markers


blocks = st.sampled_from(
    [
        {"type": "text", "text": "reading the module"},
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "tool_use", "id": "t", "name": "Read", "input": {"path": "/a"}},
        {"type": "tool_result", "tool_use_id": "t", "content": "x = 1\n" * 20},
    ]
)
message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(st.sampled_from(["hi", ""]), st.lists(blocks, max_size=3)),
)


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list with a cache marker on the last message's last block (a new dict)."""
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        content = out[index]["content"]
        if isinstance(content, list) and content:
            out[index] = {**out[index], "content": [*content[:-1], {**content[-1], "cache_control": MARK}]}
            break
    return out


@SETTINGS
@given(data=st.data(), start=st.lists(message, max_size=4), steps=st.integers(1, 12), drop=st.booleans())
def test_every_request_equals_its_from_scratch_twin(
    data: st.DataObject, start: list[dict[str, Any]], steps: int, drop: bool
) -> None:
    reusing = RequestBlocks(count)
    history = list(start)
    system: Any = [{"type": "text", "text": "system", "cache_control": MARK}]
    for _ in range(steps):
        how = data.draw(st.sampled_from(["append", "append", "append", "copy", "shorter", "system"]))
        if how == "append":
            history = [*history, *data.draw(st.lists(message, min_size=1, max_size=3))]
        elif how == "copy":
            history = copy.deepcopy(history)
        elif how == "shorter":
            history = history[: max(0, len(history) - 2)]
        else:
            system = data.draw(st.sampled_from(["other system", system]))
        request = {"model": "m", "system": system, "tools": [{"name": "Read"}], "messages": marked(history)}
        reusing.update(request, drop_earlier_thinking=drop)
        flat, digests, tokens, cumulative, hashes, markers = expected(request, drop)
        assert list(reusing.digests) == digests
        assert list(reusing.tokens) == tokens
        assert list(reusing.cumulative) == cumulative
        assert [h.hex() for h in reusing.hashes] == hashes
        assert reusing.markers == markers
        assert reusing.marker_controls == [flat[i].cache_control for i in markers]


def test_a_request_computes_only_what_it_adds() -> None:
    """The repeated messages are not digested again (the count is asked for new blocks)."""
    asked: list[FlatBlock] = []

    def counting(block: FlatBlock, digest: bytes) -> int:
        asked.append(block)
        return 1

    reusing = RequestBlocks(counting)
    history = [{"role": "user", "content": [{"type": "text", "text": f"m{n}"}]} for n in range(50)]
    reusing.update({"model": "m", "messages": history}, drop_earlier_thinking=False)
    asked.clear()
    history = [*history, {"role": "assistant", "content": [{"type": "text", "text": "new"}]}]
    reusing.update({"model": "m", "messages": history}, drop_earlier_thinking=False)
    assert [block.block["text"] for block in asked] == ["new"]


def test_a_shifted_history_is_not_digested_again() -> None:
    """Messages that come back at other positions (a cut moving forward under a new first
    message) keep the digests and tokens they had: only the new first message is counted."""
    asked: list[FlatBlock] = []

    def counting(block: FlatBlock, digest: bytes) -> int:
        asked.append(block)
        return 1

    reusing = RequestBlocks(counting)
    history = [{"role": "user", "content": [{"type": "text", "text": f"m{n}"}]} for n in range(50)]
    reusing.update({"model": "m", "messages": history}, drop_earlier_thinking=False)
    asked.clear()
    shifted = [{"role": "user", "content": [{"type": "text", "text": "note"}]}, *history[10:]]
    reusing.update({"model": "m", "messages": shifted}, drop_earlier_thinking=False)
    assert [block.block["text"] for block in asked] == ["note"]
    flat = flatten_request({"model": "m", "messages": shifted})
    assert list(reusing.digests) == [block_digest(block) for block in flat]


def _reachable(root: object, stop: set[int]) -> list[object]:
    """Objects reachable from `root` through references, not entering those in `stop`."""
    seen: set[int] = set()
    found: list[object] = []
    todo: list[object] = [root]
    while todo:
        item = todo.pop()
        if id(item) in seen or id(item) in stop or isinstance(item, type):
            continue
        seen.add(id(item))
        found.append(item)
        todo.extend(gc.get_referents(item))
    return found


def _long_request(blocks_per_message: int, messages: int, tag: str) -> dict[str, Any]:
    history = [
        {
            "role": "user" if n % 2 else "assistant",
            "content": [
                {"type": "text", "text": f"{tag} {n}.{b} " + "x" * 400}
                for b in range(blocks_per_message)
            ],
        }
        for n in range(messages)
    ]
    return {"model": "m", "messages": marked(history)}


def test_what_is_held_per_block_is_numbers_not_content() -> None:
    """Beyond the last request's own messages, a block costs its packed digest and prefix
    hash and two 8-byte integers, plus its message's share of two packed columns."""
    reusing = RequestBlocks(count)
    request = _long_request(4, 500, "a")
    reusing.update(request, drop_earlier_thinking=False)
    own = {id(message) for message in request["messages"]}
    held = _reachable(reusing, own | {id(count)})
    per_block = sum(sys.getsizeof(item) for item in held) / len(reusing.tokens)
    assert per_block < 100


def _objects_held(messages: int) -> int:
    """How many objects a RequestBlocks holds beyond its request's messages, after a
    request of `messages` messages that each end a turn (small ints are shared, not held)."""
    reusing = RequestBlocks(count)
    history = [
        {"role": "user", "content": [{"type": "text", "text": f"q{n} " + "x" * 300}]}
        for n in range(messages)
    ]
    request = {"model": "m", "messages": marked(history)}
    reusing.update(request, drop_earlier_thinking=True)
    own = {id(message) for message in request["messages"]}
    return len(_reachable(reusing, own | {id(count)}))


def test_what_is_held_per_message_is_no_object() -> None:
    """Per message the figures hold its first position and a flag in packed columns, not an
    object (nor a hash, nor a large int) each: ten times the messages hold as many objects."""
    assert _objects_held(500) == _objects_held(50)


def test_the_blocks_of_a_replaced_history_are_released() -> None:
    """Once a request no longer holds a message, the figures keep nothing of its content."""
    reusing = RequestBlocks(count)
    before = _long_request(3, 40, "old")
    reusing.update(before, drop_earlier_thinking=False)
    after = _long_request(3, 5, "new")
    reusing.update(after, drop_earlier_thinking=False)
    old_blocks = {id(block) for message in before["messages"] for block in message["content"]}
    held = _reachable(reusing, {id(count)})
    assert not [item for item in held if id(item) in old_blocks]
    assert any(item is after["messages"][0] for item in held)


result_messages = st.lists(
    st.one_of(
        st.just({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]}),
        st.builds(
            lambda n: {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "out"} for i in range(n)] + [{"type": "text", "text": "note"}]},
            st.integers(0, 3),
        ),
    ),
    max_size=4,
)


@SETTINGS
@given(data=st.data(), steps=st.integers(1, 10), keep=st.integers(0, 4))
def test_clearing_every_turn_equals_clearing_a_copy(data: st.DataObject, steps: int, keep: int) -> None:
    """The clear_every_turn baseline's incremental clearing equals its from-scratch copy."""
    from unbounded.evaluation.baselines import ToolResultClearing, clear_tool_results_copy

    clearing = ToolResultClearing(keep)
    history: list[Any] = []
    for _ in range(steps):
        if data.draw(st.integers(0, 4)) == 0 and history:
            history = history[: data.draw(st.integers(0, len(history)))]
        history = [*history, *data.draw(result_messages)]
        assert clearing.apply(history) == clear_tool_results_copy(history, keep=keep)
