"""Review rev18c of the calibration-against-the-sent-request fix (i38c) and the linear
hand-over error resolution (i38h2): each finding a strict xfail while it is open."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from test_calibration_cleared import (
    SYSTEM_TOKENS,
    TRUE_RATIO,
    Clock,
    billed,
    config,
    read_files,
    turn,
)
from unbounded.compaction import handover
from unbounded.compaction.handover import read_handover
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.session import Session
from unbounded.storage import FolderStore
from unbounded.tokens.estimate import content_tokens, tool_result_tokens


def _close(session: Session) -> None:
    """Let go of the session's folder so it can be opened again."""
    assert isinstance(session.store, FolderStore)
    session.store.close()


@pytest.mark.parametrize("reply", ["pending", "no-usage"])
def test_reopened_after_a_clearing_prepare_keeps_the_calibration(
    tmp_path: Path, reply: str
) -> None:
    folder = tmp_path / "s"
    clock = Clock()
    session = Session.open(folder, config(tools=True), policy=Policy(), clock=clock)
    session.add_user("Read the modules one by one.")
    read_files(session, clock, 0, 10)
    measured = session.calibration
    assert measured == pytest.approx(TRUE_RATIO, rel=0.01)
    clock.now += timedelta(hours=2)  # past the time-based gap: the next prepare clears
    session.add_user("Go on.")
    if reply == "pending":  # prepared and sent, the process stops before the reply
        request = asyncio.run(session.prepare())
    else:  # the reply came without usage
        request = turn(session, [{"type": "text", "text": "Going on."}], usage=False)
    assert len(session.micro.cleared) == 5 and session.calibration == measured
    _close(session)
    again = Session.open(folder, config(tools=True), policy=Policy(), clock=clock)
    assert len(again.micro.cleared) == 5
    assert again.calibration == pytest.approx(measured)
    assert again.estimate_request_tokens(request["messages"]) == pytest.approx(
        billed(request), rel=0.02
    )


def billed_after_cache_edits(request: ProviderRequest) -> int:
    """What the fake model reports: exact for the messages sent, less the tool results the
    request's cache edits delete from the cached prefix (seed 004: the count drops)."""
    deleted = {edit["cache_reference"] for edit in request.get("cache_edits", [])}
    raw = 0
    for message in request["messages"]:
        content = message.get("content")
        raw += content_tokens(content)
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") in deleted:
                raw -= tool_result_tokens(block)
    return SYSTEM_TOKENS + math.ceil(raw * TRUE_RATIO)


@pytest.mark.xfail(
    strict=True,
    reason="review18c #3 (not a regression: base38 the same): results the cached tier deleted "
    "by cache edits are counted in full against a usage that no longer bills them (only "
    "`cleared` is subtracted): calibration 0.81 for 1.4, so a session-memory compaction's "
    "kept tail (sent without the edits) is counted 42%% short",
)
def test_calibration_is_taken_against_the_request_less_its_cache_edits() -> None:
    clock = Clock()
    session = Session(
        replace(config(tools=True), cache_edits_supported=True), policy=Policy(), clock=clock
    )
    session.add_user("Read the modules one by one.")
    for index in range(16):  # past the cached tier's trigger (12): the older ones deleted
        clock.now += timedelta(seconds=20)
        call = {"type": "tool_use", "id": f"toolu_{index:03d}", "name": "Read",
                "input": {"file_path": f"/src/module_{index}.py"}}  # fmt: skip
        request = asyncio.run(session.prepare())
        usage = {"input_tokens": billed_after_cache_edits(request), "output_tokens": 0}
        session.record({"content": [call], "usage": usage})
        body = f"    value_{index} = compute(value_{index - 1})\n" * 350
        session.add_tool_results(
            [{"type": "tool_result", "tool_use_id": call["id"], "content": body}]
        )
    request = asyncio.run(session.prepare())
    usage = {"input_tokens": billed_after_cache_edits(request), "output_tokens": 0}
    session.record({"content": [{"type": "text", "text": "Read."}], "usage": usage})
    assert session.micro.stats.cache_refs_deleted > 0 and not session.micro.cleared
    assert session.calibration == pytest.approx(TRUE_RATIO, rel=0.02)


def test_a_retry_with_an_equal_input_of_other_key_types_resolves_the_failure() -> None:
    messages = [
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "lookup", "input": {1: "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "Error: boom", "is_error": True}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "b", "name": "lookup", "input": {True: "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "ok"}]},
    ]  # fmt: skip
    (error,) = read_handover(messages).errors
    assert error.resolved_by is not None and error.resolved_by.tool_id == "b"


def test_failed_tool_calls_are_matched_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 2_000
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Search for the terms."}]
    for index in range(calls):
        failed = index % 2 == 0
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{index}", "name": "search",
                 "input": {"q": f"term {index}"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{index}", "is_error": failed,
                 "content": "Error: not found" if failed else "3 hits"}]},
        ]  # fmt: skip
    compared = 0
    same_input = handover._same_input

    def counted(later: handover.Call, failed: handover.Call) -> bool:
        nonlocal compared
        compared += 1
        return same_input(later, failed)

    monkeypatch.setattr(handover, "_same_input", counted)
    records = read_handover(messages).errors
    assert len(records) == calls // 2 and all(r.resolved_by is None for r in records)
    assert (
        compared <= 2 * calls
    )  # a bounded number of comparisons per failure, not every later call
