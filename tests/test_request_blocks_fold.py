"""Folded request figures (`RequestBlocks.fold`, `CacheSimulator.fold_settled`): what stays
held reads as the unfolded figures do, a request that needs a folded figure is computed in
full again, a folding simulator prices every request as one that keeps everything, and the
figures held stop growing with the history."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.caching import request_blocks
from unbounded.caching import simulator as simulator_module
from unbounded.caching.blocks import FlatBlock
from unbounded.caching.request_blocks import FoldedColumn, RequestBlocks
from unbounded.caching.simulator import CacheSimulator
from unbounded.catalog import ModelInfo

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MARK = {"type": "ephemeral"}
MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)
OLD = ModelInfo(
    "claude-haiku-4-5", "anthropic", 200_000, 64_000, 1.0, 5.0, keeps_previous_thinking=False
)
GPT = ModelInfo("gpt-5", "openai", 400_000, 128_000, 1.25, 10.0)


def count(block: FlatBlock, digest: bytes) -> int:
    return len(str(block.block)) // 4 + digest[0] % 3


BLOCKS = st.sampled_from(
    [
        {"type": "text", "text": "reading the module " * 30},
        {"type": "thinking", "thinking": "hm " * 40, "signature": "s"},
        {"type": "tool_use", "id": "t", "name": "Read", "input": {"path": "/a"}},
        {"type": "tool_result", "tool_use_id": "t", "content": "x = 1\n" * 200},
    ]
)
MESSAGE = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(st.just("hi"), st.just([]), st.lists(BLOCKS, min_size=1, max_size=3)),
)


def marked(messages: list[dict[str, Any]], at: int = -1) -> list[dict[str, Any]]:
    """The list with a cache marker on the last block of message `at` (a new dict)."""
    out = list(messages)
    if not out:
        return out
    index = at % len(out)
    content = out[index]["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not content:
        return out
    out[index] = {**out[index], "content": [*content[:-1], {**content[-1], "cache_control": MARK}]}
    return out


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fold as soon as one block can go, so short histories fold."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)


@SETTINGS
@given(data=st.data(), steps=st.integers(1, 14), drop=st.booleans())
def test_what_is_held_reads_as_the_unfolded_figures(
    data: st.DataObject, steps: int, drop: bool
) -> None:
    folding, whole = RequestBlocks(count), RequestBlocks(count)
    history: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for _ in range(steps):
        how = data.draw(st.sampled_from(["append", "append", "append", "copy", "shorter"]))
        if how == "append":
            history = [*history, *data.draw(st.lists(MESSAGE, min_size=1, max_size=4))]
        elif how == "copy":
            history = copy.deepcopy(history)
        else:
            history = history[: max(1, len(history) - data.draw(st.integers(1, 6)))]
        request = {"model": "m", "system": "s", "messages": marked(history)}
        folding.update(request, drop_earlier_thinking=drop)
        whole.update(request, drop_earlier_thinking=drop)
        assert folding.size == len(whole.tokens) and folding.markers == whole.markers
        columns = folding.columns()
        for position in range(folding.size):
            if folding.readable(position, position):
                assert columns[0][position] == whole.tokens[position]
                assert columns[1][position] == whole.cumulative[position]
                assert columns[2][position] == whole.hashes[position]
            else:
                with pytest.raises(IndexError):
                    columns[1][position]
        folding.fold(data.draw(st.integers(0, folding.size)), data.draw(st.integers(0, 3)))


def test_a_folded_column_reads_by_flat_position() -> None:
    column = FoldedColumn([10, 11, 15, 16], head=2, folded=3)
    assert len(column) == 7
    assert [column[i] for i in (0, 1, 5, 6, -1)] == [10, 11, 15, 16, 16]
    for folded in (2, 3, 4):
        with pytest.raises(IndexError):
            column[folded]


def test_folding_lets_the_figures_go_but_the_last_messages() -> None:
    blocks = RequestBlocks(count)
    history = [{"role": "user", "content": f"m{n}"} for n in range(100)]
    blocks.update({"model": "m", "system": "s", "messages": history}, drop_earlier_thinking=False)
    blocks.fold(90, 5)  # messages 0-88 end before flat position 90 (the system block is 0)
    assert blocks.size == 101 and len(blocks.tokens) == 1 + 11
    blocks.fold(1_000, 5)
    assert blocks.size == 101 and len(blocks.tokens) == 1 + 5  # the system block, 5 messages
    assert not blocks.readable(50, 60) and blocks.readable(96, 100) and blocks.readable(0, 0)
    blocks.update(
        {"model": "m", "system": "s", "messages": [*history, {"role": "user", "content": "x"}]},
        drop_earlier_thinking=False,
    )
    assert len(blocks.tokens) == 1 + 6  # appended after what is held: nothing recomputed


def _requests(n: int) -> list[tuple[float, dict[str, Any]]]:
    """A growing conversation marked on its last message, with a copy, a cut, a model that
    drops earlier thinking, an OpenAI call, a cache edit and a marker far back on the way."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "start " * 300}]
    out: list[tuple[float, dict[str, Any]]] = []
    for k in range(n):
        history = [
            *history,
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"think {k} " * 50, "signature": "s"},
                    {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"k": k}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": f"r{k} " * 400}]
                + ([{"type": "text", "text": f"turn {k}"}] if k % 7 == 0 else []),
            },
        ]
        if k == 30:
            history = copy.deepcopy(history)
        if k == 45:
            history = history[:-10]
        model = OLD.name if 50 <= k < 60 else GPT.name if k == 70 else MODEL.name
        request: dict[str, Any] = {
            "model": model,
            "system": [{"type": "text", "text": "system " * 300, "cache_control": MARK}],
            "messages": marked(history, 3 if k == 80 else -1),  # 80: a marker far back
        }
        if k == 90:
            request["cache_edits"] = [{"type": "delete", "cache_reference": "t3"}]
        out.append((10.0 * k, request))
    return out


def _simulator(fold: bool) -> CacheSimulator:
    simulator = CacheSimulator(MODEL, other_models={OLD.name: OLD, GPT.name: GPT})
    simulator.fold_settled = fold
    return simulator


@pytest.mark.parametrize("keep", [64, 1])
def test_a_folding_simulator_prices_every_request_as_one_that_keeps_everything(
    keep: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Keeping 1 message, a new message's marker looks back into what was folded: the
    request is computed in full again.)"""
    monkeypatch.setattr(simulator_module, "FOLD_KEEP_MESSAGES", keep)
    requests = _requests(120)
    folding, whole = _simulator(True), _simulator(False)
    held: list[int] = []
    for time, request in requests:
        assert folding.step(time, request) == whole.step(time, request)
        held.append(len(folding._blocks.tokens))
    assert folding._blocks.folded > 0
    assert max(held[100:]) < len(whole._blocks.tokens) // 2


def test_a_simulator_folds_only_when_asked() -> None:
    simulator = _simulator(False)
    for time, request in _requests(40):
        simulator.step(time, request)
    assert simulator._blocks.folded == 0


def test_a_new_turn_that_drops_earlier_thinking_recomputes_from_the_last_turn_alone() -> None:
    """With earlier thinking dropped, a new user turn changes the messages from the last turn
    start: those stay unfolded, so they are re-added (from what the cut kept), not all."""
    counted: list[FlatBlock] = []

    def counting(block: FlatBlock, digest: bytes) -> int:
        counted.append(block)
        return 10

    blocks = RequestBlocks(counting)
    history: list[dict[str, Any]] = []
    per_call: list[int] = []
    for k in range(90):
        if k % 30 == 0:
            history.append({"role": "user", "content": [{"type": "text", "text": f"turn {k}"}]})
        history += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"t{k}", "signature": "s"},
                    {"type": "tool_use", "id": f"u{k}", "name": "Read", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"u{k}", "content": "r"}]},
        ]
        counted.clear()
        blocks.update({"model": "m", "messages": marked(history)}, drop_earlier_thinking=True)
        blocks.fold(blocks.size, 2)
        per_call.append(len(counted))
    assert blocks.folded > 0
    # The new round (and a new turn's message), the message that lost its marker: never the
    # whole turn again.
    assert max(per_call[1:]) <= 6, per_call
