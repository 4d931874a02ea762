"""`CacheBreakpointPlanner.follow` / `forked`: a summary request repeating messages a planner
followed (some replaced by messages the caller unmarked already) is planned as from scratch,
and only the messages neither knows are read for markers."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from unbounded.caching import breakpoints
from unbounded.caching.breakpoints import (
    CacheBreakpointPlanner,
    plan_cache_breakpoints,
    unmarked_message,
)


class Known(NamedTuple):
    message: Any
    unmarked: dict[str, Any]
    count: int


def _messages(count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n in range(count):
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {n}"},
                    {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}},
                ],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x"}],
            }
        )
    return out


def _request(messages: list[Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "system": "sys",
        "tools": [{"name": "Read", "input_schema": {}}],
        "messages": [*messages, {"role": "user", "content": "summarize"}],
    }


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each read for markers took."""
    taken: list[int] = []
    real = breakpoints._unmarked_messages

    def spy(messages: Any) -> Any:
        taken.append(len(messages or []))
        return real(messages)

    monkeypatch.setattr(breakpoints, "_unmarked_messages", spy)
    return taken


def test_a_fork_of_followed_messages_reads_only_the_ones_it_does_not_know(reads: list[int]) -> None:
    messages = _messages(6)
    planner = CacheBreakpointPlanner()
    planner.follow(messages[:5])
    planner.follow(messages)  # the work is what was added
    assert reads == [5, 8]
    # Position 4 replaced by a message the caller unmarked already (a swap), 6 by one with a
    # marker nobody knows, 8 by one the caller knows but not as this object.
    sent = list(messages)
    swapped = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "[cleared]"}],
    }
    sent[4] = swapped
    sent[6] = {
        "role": "user",
        "content": [{"type": "text", "text": "m", "cache_control": {"type": "ephemeral"}}],
    }
    sent[8] = dict(messages[8])
    known = {4: Known(swapped, *unmarked_message(swapped)), 8: Known(messages[8], messages[8], 1)}
    reads.clear()
    fork = planner.forked(sent, known)
    assert reads == [1, 1]  # positions 6 and 8 only
    for skip in (True, False):
        request = _request(sent)
        reads.clear()
        planned = fork.plan_fork(request, skip_cache_write=skip)
        assert reads == [1]  # the prompt
        assert planned == plan_cache_breakpoints(request, skip_cache_write=skip)
        assert planned.request == plan_cache_breakpoints(request, skip_cache_write=skip).request


def test_a_known_message_gives_its_own_count_and_unmarked_form() -> None:
    messages = _messages(3)
    planner = CacheBreakpointPlanner()
    planner.follow(messages)
    sent = list(messages)
    two = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    sent[2] = two
    fork = planner.forked(sent, {2: Known(two, *unmarked_message(two))})
    request = _request(sent)
    # The flat positions of the markers count the known message's two blocks.
    assert fork.plan_fork(request) == plan_cache_breakpoints(request)


def test_a_planner_that_left_an_item_out_forks_nothing(reads: list[int]) -> None:
    messages: list[Any] = [*_messages(2), "not a message"]
    planner = CacheBreakpointPlanner()
    planner.follow(messages)
    fork = planner.forked(messages[:4], {})
    request = _request(messages[:4])
    expected = plan_cache_breakpoints(request)
    reads.clear()
    assert fork.plan_fork(request) == expected
    assert reads == [5]  # every message read again


def test_an_item_that_is_not_a_message_in_the_fork_forks_nothing(reads: list[int]) -> None:
    messages = _messages(2)
    planner = CacheBreakpointPlanner()
    planner.follow(messages)
    sent: list[Any] = list(messages)
    sent[1] = "not a message"
    fork = planner.forked(sent, {})
    request = _request(sent)
    expected = plan_cache_breakpoints(request)
    reads.clear()
    assert fork.plan_fork(request) == expected
    assert reads == [len(sent) + 1]


def test_a_fork_longer_than_what_was_followed_forks_nothing(reads: list[int]) -> None:
    messages = _messages(3)
    planner = CacheBreakpointPlanner()
    planner.follow(messages[:3])
    fork = planner.forked(messages, {})
    request = _request(messages)
    expected = plan_cache_breakpoints(request)
    reads.clear()
    assert fork.plan_fork(request) == expected
    assert reads == [len(messages) + 1]
