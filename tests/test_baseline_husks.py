"""The shared baseline history lets go of tool-result text no strategy reads again, and the
figures stay those of a history that keeps it."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_settings import MODEL, recorded_call, replay_settings

from unbounded.caching.husks import HuskedBlock, HuskedMessage, SettledBlock, block_type
from unbounded.catalog import ModelInfo
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

OTHER = ModelInfo(
    "claude-haiku-4-5", "anthropic", 200_000, 64_000, 1.0, 5.0, keeps_previous_thinking=False
)
"""A model some calls switch to: each switch prices the whole request again (husks too)."""


# One call: (size of each tool result in words, whether the response is recorded, whether
# the call is to the other model).
Step = tuple[list[int], bool, bool]


def _strategies(threshold: int) -> list[Baseline]:
    shared = History(1.0)
    config = replay_settings(threshold, {OTHER.name: OTHER})
    return [*make_baselines(config, shared), *native_strategies(config, shared)]


def _replay(steps: list[Step], threshold: int) -> tuple[list[Baseline], list[dict[str, Any]]]:
    """Feed and price the steps as the replay loop does; every strategy's figures per call."""
    strategies = _strategies(threshold)
    feed_strategies(strategies, [Entry.user("start the work")])
    figures: list[dict[str, Any]] = []
    for n, (sizes, answered, switched) in enumerate(steps):
        calls = [
            {"type": "tool_use", "id": f"t{n}_{k}", "name": "Read", "input": {"k": k}}
            for k in range(len(sizes))
        ]
        results = [
            # One entry per result: the normalizer merges them into one user message.
            Entry.user(
                [{"type": "tool_result", "tool_use_id": f"t{n}_{k}", "content": f"r{n} " * size}]
            )
            for k, size in enumerate(sizes)
        ]
        priced = run_baselines(strategies, recorded_call(n, model=OTHER.name if switched else MODEL.name))
        figures.append(dict(priced))
        # An unrecorded response leaves the next results to merge into the last user message.
        thinking = {"type": "thinking", "thinking": f"plan {n} " * 50, "signature": f"s{n}"}
        text = {"type": "text", "text": f"step {n}"}
        response = [Entry.assistant([thinking, text, *calls], message_id=f"m{n}")]
        # Every third step the user adds a line: truncate moves such text behind its note.
        note = [Entry.user(f"note {n}")] if n % 3 == 2 else []
        feed_strategies(strategies, [*(response if answered else []), *results, *note])
    figures.append({s.name: s.run.to_dict() for s in strategies})
    return strategies, figures


def _blocks(message: Any) -> list[Any]:
    """A message's blocks: a settled message's `SettledBlock`s, else its content's blocks."""
    if type(message) is HuskedMessage:
        return message.blocks()
    return message["content"] if isinstance(message["content"], list) else []


def _kind(block: Any) -> Any:
    return block.kind if isinstance(block, SettledBlock) else block_type(block)


def _result_contents(messages: list[Any]) -> list[Any]:
    """Each tool result's content (a husked result: the husk itself)."""
    return [
        block if isinstance(block, (HuskedBlock, SettledBlock)) else block.get("content")
        for message in messages
        for block in _blocks(message)
        if _kind(block) == "tool_result"
    ]


def _held_result_chars(messages: list[Any]) -> int:
    return sum(len(c) for c in _result_contents(messages) if isinstance(c, str))


def _no_husk(self: History, upto: int, tokens_of: Any) -> None:
    return None


STEPS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 4_000), min_size=1, max_size=3), st.booleans(), st.booleans()
    ),
    min_size=10,
    max_size=50,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# 30,000: summarize_no_cache summarizes before server_compaction compacts; 80,000: after.
@given(steps=STEPS, threshold=st.sampled_from([30_000, 80_000]))
def test_husking_changes_no_figure(steps: list[Step], threshold: int) -> None:
    """Every strategy's usage per call and its totals equal those of a history that keeps
    every tool result's text."""
    _, husked = _replay(steps, threshold)
    with mock.patch.object(History, "husk", _no_husk):
        _, kept = _replay(steps, threshold)
    assert husked == kept


@pytest.mark.parametrize("threshold", [30_000, 80_000])
def test_a_long_session_husks_and_prices_as_one_that_keeps_the_text(threshold: int) -> None:
    """Past both summaries (summarize_no_cache first at 30,000, server_compaction first at
    80,000), with calls that switch models (every block priced again), figures are equal."""
    steps: list[Step] = [([1_500, 2_500], n % 4 != 0, n % 5 == 4) for n in range(70)]
    strategies, husked = _replay(steps, threshold)
    assert strategies[0].history.husked > 50
    # clear_every_turn's cleared copies of settled messages are settled whole themselves,
    # one object held by the clearing, the marker and the simulator alike.
    clear = next(s for s in strategies if isinstance(s, ClearEveryTurnBaseline))
    history = clear.history.messages()
    copies = [
        (i, m)
        for i, (m, kept) in enumerate(zip(clear.clearing._result, history, strict=False))
        if m is not kept and type(m) is HuskedMessage
    ]
    assert len(copies) > 20
    assert clear.simulator is not None
    assert all(clear.marker._result[i] is m for i, m in copies)
    assert all(clear.simulator._blocks._messages[i] is m for i, m in copies)
    settled = [i for i in range(clear.history.husked) if type(history[i]) is HuskedMessage]
    assert all(type(clear.clearing._result[i]) is HuskedMessage for i in settled)
    with mock.patch.object(History, "husk", _no_husk):
        _, kept = _replay(steps, threshold)
    assert husked == kept


def test_tool_results_before_the_tail_give_up_their_text_once_every_summary_is_made() -> None:
    """Once the summarizing strategies have their own history, the shared one keeps no
    tool-result text but the last messages'; before that it keeps all of it."""
    steps: list[Step] = [([2_000, 1_000], n % 3 != 0, n % 7 == 6) for n in range(60)]
    strategies, _ = _replay(steps[:5], 55_000)
    shared = strategies[0].history
    assert shared.husked == 0  # the summaries, still to come, read every result
    # Steps 1, 2 and 4 answered (the others' results are orphans, sent as text).
    assert _held_result_chars(shared.messages()) == 3 * 3_000 * len("r0 ")
    strategies, _ = _replay(steps, 55_000)
    shared = strategies[0].history
    assert [s.name for s in strategies if s.history is shared] == [
        "none",
        "truncate",
        "clear_every_turn",
    ]
    messages = shared.messages()
    assert shared.husked == len(messages) - 2 - 4  # at the last call, before its response
    settled = _result_contents(messages[: shared.husked])
    # 40 answered steps, 2 results each; the last 3 steps' are in the unsettled tail.
    assert len(_result_contents(messages)) == 80
    assert len(settled) == 80 - 6
    # A message of tool results only, and every reply, is settled whole; a user message
    # with text keeps its text whole and its results husked.
    assert all(isinstance(content, (SettledBlock, HuskedBlock)) for content in settled)
    assert sum(isinstance(content, SettledBlock) for content in settled) > 30
    assert all(set(c.fields()) == {"tool_use_id"} for c in settled if isinstance(c, SettledBlock))
    assert all(set(c.fields()) == {"type", "tool_use_id"} for c in settled if isinstance(c, HuskedBlock))
    replies = [m for m in messages[: shared.husked] if m["role"] == "assistant"]
    assert all(type(m) is HuskedMessage for m in replies)
    blocks = [b for m in replies for b in m.blocks()]
    assert {b.kind for b in blocks} == {"thinking", "text", "tool_use"}
    assert all(b.fields() == {} for b in blocks if b.kind != "tool_use")
    assert all(b.fields() == {} for b in blocks)  # a reply keeps no id
    notes = [b for m in messages[: shared.husked] if m["role"] == "user" for b in _blocks(m) if _kind(b) == "text"]
    assert {"type": "text", "text": "note 2"} in notes  # a user's text stays whole
    assert _held_result_chars(messages) == 3 * 3_000 * len("r59 ")


def test_a_summarizing_strategy_reads_the_results_it_shares_before_its_summary() -> None:
    """`summarize_no_cache` summarizes the shared history's text: nothing of it is husked
    before its summary, so an early error result still reaches the summary (the baselines
    alone: the server compaction, which also reads it all, would hide the rule)."""
    strategies = make_baselines(replay_settings(30_000, {OTHER.name: OTHER}), History(1.0))
    feed_strategies(strategies, [Entry.user("start the work")])
    error = "ImportError: no module named frobnicate_widgets"
    for n in range(40):
        call = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "make"}}
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{n}"}
        result |= {"content": error, "is_error": True} if n == 0 else {"content": f"ok {n} " * 1_000}
        run_baselines(strategies, recorded_call(n))
        response = Entry.assistant([{"type": "text", "text": f"step {n}"}, call], message_id=f"m{n}")
        feed_strategies(strategies, [response, Entry.user([result])])
    summarizing = next(s for s in strategies if s.name == "summarize_no_cache")
    assert summarizing.run.compactions >= 1
    summary = summarizing.history.messages()[0]["content"]
    assert "frobnicate_widgets" in str(summary)
