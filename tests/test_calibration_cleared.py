"""The session's calibration is taken against what the billed request sent: tool results that
microcompaction cleared count as their placeholders, not in full.

The fake model here bills exactly `TRUE_RATIO` tokens per length/4 token of the messages it
was sent (plus `SYSTEM_TOKENS`), so the right calibration is known.
"""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.micro import MicrocompactState
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.session_state import CALIBRATION_MIN
from unbounded.storage import FolderStore
from unbounded.tokens.estimate import content_tokens, rough_token_count

SYSTEM_TOKENS = 1_000
TRUE_RATIO = 1.4
"""Billed tokens per length/4 token of the sent messages: off both calibration bounds."""
START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
READ_TOOL = {
    "name": "Read",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def config(*, tools: bool) -> SessionConfig:
    """A session whose system prompt and tools count exactly `SYSTEM_TOKENS`; with `tools`
    it offers `recall`, so cleared results name their handle (a longer placeholder)."""
    return SessionConfig(
        model="claude-sonnet-4-5",
        system="You are a coding agent.",
        context_window=200_000,
        system_tokens=SYSTEM_TOKENS,
        tools=[READ_TOOL] if tools else [],
    )


def billed(request: ProviderRequest) -> int:
    """What the fake model reports for `request`: exact for what it was sent."""
    raw = sum(content_tokens(m.get("content")) for m in request["messages"])
    return SYSTEM_TOKENS + math.ceil(raw * TRUE_RATIO)


def turn(session: Session, content: list[dict[str, Any]], *, usage: bool = True) -> ProviderRequest:
    """Prepare a request, and record `content` as the answer billed for it."""
    request = asyncio.run(session.prepare())
    reported = {"input_tokens": billed(request), "output_tokens": 0} if usage else {}
    session.record({"content": content, "usage": reported})
    return request


def read_files(session: Session, clock: Clock, first: int, count: int) -> None:
    """`count` Read calls in a row, each answered with a ~3,500-token file."""
    for index in range(first, first + count):
        clock.now += timedelta(seconds=20)
        call = {"type": "tool_use", "id": f"toolu_{index:03d}", "name": "Read",
                "input": {"file_path": f"/src/module_{index}.py"}}
        turn(session, [call])
        body = f"    value_{index} = compute(value_{index - 1})\n" * 350
        session.add_tool_results([{"type": "tool_result", "tool_use_id": call["id"], "content": body}])


def after_a_time_based_clear(session: Session, clock: Clock) -> ProviderRequest:
    """Ten reads, then a pause past the time-based gap: the next request clears the older
    results; returns that request (billed and recorded)."""
    session.add_user("Read the modules one by one.")
    read_files(session, clock, 0, 10)
    clock.now += timedelta(hours=2)
    session.add_user("Go on.")
    request = turn(session, [{"type": "text", "text": "Going on."}])
    assert session.micro.stats.time_clear_events == 1 and len(session.micro.cleared) == 5
    return request


@pytest.mark.parametrize("tools", [False, True], ids=["seed-placeholder", "recall-handle"])
def test_calibration_is_taken_against_the_cleared_request(tools: bool) -> None:
    clock = Clock()
    session = Session(config(tools=tools), policy=Policy(), clock=clock)
    request = after_a_time_based_clear(session, clock)
    # Counted in full, the five cleared results (~17,500 tokens) halve the ratio: 0.70,
    # floored at 0.75; counted as sent, it is the fake model's own.
    assert session.calibration == pytest.approx(TRUE_RATIO, rel=0.01)
    assert session.calibration > CALIBRATION_MIN
    truth = billed(request)
    assert session.estimate_request_tokens(request["messages"]) == pytest.approx(truth, rel=0.01)
    # The next request sends the same clears and one more short message: it is not counted short.
    session.add_user("And the tests.")
    following = asyncio.run(session.prepare())
    assert session.estimate_request_tokens(following["messages"]) >= billed(following) * 0.99


def test_calibration_before_any_clear_is_unchanged() -> None:
    """Nothing cleared: the ratio is the reported usage over the whole view's estimate."""
    clock = Clock()
    session = Session(config(tools=False), policy=Policy(), clock=clock)
    session.add_user("Read the modules one by one.")
    read_files(session, clock, 0, 4)
    request = turn(session, [{"type": "text", "text": "Done."}])
    assert not session.micro.cleared
    assert session.calibration == pytest.approx(TRUE_RATIO, rel=0.01)
    assert session.estimate_request_tokens(request["messages"]) == pytest.approx(billed(request), rel=0.01)


def test_a_reply_without_usage_keeps_the_calibration() -> None:
    """Results cleared for a request whose reply reports no usage: the last usage was billed
    for a request without those clears, so its ratio stands as it was measured."""
    clock = Clock()
    session = Session(config(tools=False), policy=Policy(), clock=clock)
    after_a_time_based_clear(session, clock)
    read_files(session, clock, 10, 8)
    measured = session.calibration
    clock.now += timedelta(hours=2)
    session.add_user("Once more.")
    turn(session, [{"type": "text", "text": "Once more."}], usage=False)
    assert session.micro.stats.time_clear_events == 2 and len(session.micro.cleared) == 13
    assert session.calibration == measured


def test_a_reopened_session_keeps_the_calibration(tmp_path: Path) -> None:
    """Reopened, the session measures the last usage against the same cleared request."""
    folder = tmp_path / "s"
    clock = Clock()
    session = Session.open(folder, config(tools=True), policy=Policy(), clock=clock)
    after_a_time_based_clear(session, clock)
    measured = session.calibration
    assert isinstance(session.store, FolderStore)
    session.store.close()
    again = Session.open(folder, config(tools=True), policy=Policy(), clock=clock)
    assert len(again.micro.cleared) == 5
    assert again.calibration == pytest.approx(measured) == pytest.approx(TRUE_RATIO, rel=0.01)


def test_cleared_savings_counts_each_result_less_its_placeholder() -> None:
    micro = MicrocompactState()
    assert micro.cleared_savings() == 0
    micro.cleared["toolu_a"] = 1_000
    seed_stub = rough_token_count(cleared_stub())
    assert micro.cleared_savings() == 1_000 - seed_stub
    micro.cleared["toolu_b"] = 3  # a result shorter than its placeholder: clearing adds tokens
    assert micro.cleared_savings() == 1_003 - 2 * seed_stub
    micro.name_handles = True  # the placeholders name their handles: counted again, longer
    handles = rough_token_count(cleared_stub("toolu_a")) + rough_token_count(cleared_stub("toolu_b"))
    assert handles > 2 * seed_stub
    assert micro.cleared_savings() == 1_003 - handles
    micro.reset_after_compaction()  # a new dict of cleared ids, as many in it as before
    micro.cleared["toolu_c"] = 50
    micro.cleared["toolu_d"] = 70
    stubs = rough_token_count(cleared_stub("toolu_c")) + rough_token_count(cleared_stub("toolu_d"))
    assert micro.cleared_savings() == 120 - stubs
    del micro.cleared["toolu_d"]  # fewer ids than were summed: summed afresh
    assert micro.cleared_savings() == 50 - rough_token_count(cleared_stub("toolu_c"))
    # A state read back from its saved pairs sums the same.
    again = MicrocompactState.from_dict(micro.to_dict())
    again.name_handles = True
    assert again.cleared_savings() == micro.cleared_savings()
