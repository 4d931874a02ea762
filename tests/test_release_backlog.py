"""What a start-over or a compaction lets go of is freed even when they come every call: the
memory held stays bounded by the live conversation (rev14s reproducers for `DeferredRelease`)."""

from __future__ import annotations

import gc
from typing import Any

from unbounded.caching.break_detector import PromptCacheBreakDetector, _MessageDigests
from unbounded.compaction.ledger import ToolLedger, ToolRecord
from unbounded.compaction.micro import MicrocompactState, count_based_microcompact
from unbounded.policy import Policy


def _conversation(tag: str, calls: int) -> list[dict[str, Any]]:
    """`calls` reads and their results, with ids of their own."""
    messages: list[dict[str, Any]] = []
    for i in range(calls):
        tool_id = f"{tag}{i}"
        use = {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": tool_id}}
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": "x" * 400}
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    return messages


def _alive(kind: type) -> int:
    gc.collect()
    return sum(type(item) is kind for item in gc.get_objects())


def test_a_ledger_passed_two_conversations_in_turn_keeps_one_conversations_records() -> None:
    # "another conversation was passed": each observe starts over (the module's docstring).
    first, second = _conversation("a", 300), _conversation("b", 250)
    before = _alive(ToolRecord)
    ledger = ToolLedger()
    for call in range(200):
        ledger.observe(first if call % 2 == 0 else second)
    # At 106ecf7: 250 (the current conversation's). Bounded by a few conversations' worth,
    # not by the number of calls (200 x ~275).
    assert _alive(ToolRecord) - before <= 3 * 550


def test_count_based_clearing_of_two_conversations_in_turn_keeps_one_conversations_records() -> (
    None
):
    first, second = _conversation("a", 300), _conversation("b", 250)
    before = _alive(ToolRecord)
    state = MicrocompactState()
    for call in range(200):
        count_based_microcompact(first if call % 2 == 0 else second, state, Policy())
    assert _alive(ToolRecord) - before <= 3 * 550


def _request(tag: str, count: int) -> dict[str, Any]:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} {i}"}
        for i in range(count)
    ]
    return {"model": "claude-sonnet-4-5", "system": "s", "messages": messages}


def test_a_compaction_every_call_keeps_one_requests_digests() -> None:
    # A session that compacts on every turn (each summary leaves it at the threshold again).
    before = _alive(_MessageDigests)
    detector = PromptCacheBreakDetector(messages_immutable=True)
    for call in range(200):
        detector.record_prompt_state(_request(str(call), 300), now=float(call))
        detector.notify_compaction()
    # At 106ecf7: 0 (each compaction let the 300 go). Not 200 x 300.
    assert _alive(_MessageDigests) - before <= 3 * 300


def test_a_sliding_window_history_keeps_one_windows_records() -> None:
    # An agent that sends its last 200 messages: each turn the first tool call moved, so the
    # ledger starts over on every call (its module docstring), and let go of the last window.
    history = _conversation("w", 400)
    before = _alive(ToolRecord)
    state = MicrocompactState()
    for turn in range(300):
        count_based_microcompact(history[2 * turn : 2 * turn + 200], state, Policy())
    # At 106ecf7: 100 (one window's calls). Not 300 windows' worth.
    assert _alive(ToolRecord) - before <= 3 * 100
