"""`Session.prepare` is its list of steps; every step that keeps state between turns does
what its from-scratch twin does, on every turn of every recorded session.

Checking steps are put between the session's own (by patching `PrepareSteps.in_order`):
after `microcompact` the kept tool ledger equals a fresh scan and `first_changed`
marks where the messages stop matching the previous turn's; after `place_breakpoints` the
plan is `plan_cache_breakpoints` of the same request; after `record_prompt_state` the
detector's snapshot (digests of unchanged messages reused) is `snapshot_request`'s.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from unbounded.caching.blocks import canonical_json
from unbounded.caching.break_detector import PromptCacheBreakDetector, snapshot_request
from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.compaction.ledger import ToolLedger
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.policy import Policy
from unbounded.session_core import SessionCore
from unbounded.session_steps import PrepareSteps
from unbounded.transcripts.loader import load_transcript
from unbounded.turn import TurnContext, TurnStep

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "raw"
FIXTURES = ROOT / "tests" / "fixtures" / "sessions"


def _paths() -> Iterator[Any]:
    for path in sorted(FIXTURES.glob("*.jsonl")):
        yield pytest.param(path, id=f"fixture-{path.stem}")
    if CORPUS.is_dir():
        for path in sorted(CORPUS.iterdir()):
            if path.suffix in (".jsonl", ".traj") and "acompact" not in path.name:
                yield pytest.param(path, id=path.stem[:40])


class Checks:
    """Steps that compare the session's kept state with a from-scratch computation."""

    def __init__(self, session: SessionCore) -> None:
        self.session = session
        self.previous: list[Any] = []
        self.unplanned: Any = None
        self.turns = 0
        self.reused = 0
        self.messages = 0
        self.snapshots: list[Any] = []

    async def after_microcompact(self, turn: TurnContext) -> None:
        kept = self.session.micro.ledger
        fresh = ToolLedger(kept.tools)
        fresh.observe(self.session.transcript.messages)
        assert kept._records == fresh._records
        first = turn.first_changed
        assert turn.messages[:first] == self.previous[:first]
        assert first == min(len(turn.messages), len(self.previous)) or (
            turn.messages[first] != self.previous[first]
        )
        self.reused += first
        self.messages += len(turn.messages)

    async def before_breakpoints(self, turn: TurnContext) -> None:
        self.unplanned = copy.deepcopy(turn.built_request())

    async def after_breakpoints(self, turn: TurnContext) -> None:
        ttl, prefix_ttl = self.session.cache_ttls()
        expected = plan_cache_breakpoints(self.unplanned, ttl=ttl, prefix_ttl=prefix_ttl)
        assert canonical_json(turn.built_request()) == canonical_json(expected.request)
        assert self.session.marked_messages == expected.marked_messages

    async def after_snapshot(self, turn: TurnContext) -> None:
        self.previous = list(turn.messages)  # the step's list is reused next turn
        self.turns += 1

    def steps(self, steps: tuple[TurnStep, ...]) -> tuple[TurnStep, ...]:
        """The session's steps with the checks put in."""
        names = [getattr(step, "__name__", "") for step in steps]
        checked: list[TurnStep] = []
        for name, step in zip(names, steps, strict=True):
            if name == "place_breakpoints":
                checked.append(self.before_breakpoints)
            checked.append(step)
            if name == "microcompact":
                checked.append(self.after_microcompact)
            elif name == "place_breakpoints":
                checked.append(self.after_breakpoints)
            elif name == "record_prompt_state":
                checked.append(self.after_snapshot)
        assert len(checked) == len(steps) + 4, names
        return tuple(checked)


@pytest.mark.parametrize("path", list(_paths()))
def test_every_turn_of_every_session_steps_as_from_scratch(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ledger, plan and snapshot equal their twins on every prepared turn; reuse happens."""
    checks: list[Checks] = []
    real_steps = PrepareSteps.in_order
    real_record = PromptCacheBreakDetector.record_prompt_state

    def with_checks(steps: PrepareSteps) -> tuple[TurnStep, ...]:
        checks.append(Checks(steps.session))
        return checks[-1].steps(real_steps(steps))

    def recorded(self: PromptCacheBreakDetector, request: Any, **options: Any) -> Any:
        snapshot = real_record(self, request, **options)
        assert snapshot == snapshot_request(request)
        return snapshot

    monkeypatch.setattr(PrepareSteps, "in_order", with_checks)
    monkeypatch.setattr(PromptCacheBreakDetector, "record_prompt_state", recorded)
    report = replay_session(
        load_transcript(path), ReplayOptions(policy=Policy(), baselines=False)
    )
    turns = sum(check.turns for check in checks)
    assert turns >= report.calls > 0
    reused = sum(check.reused for check in checks)
    total = sum(check.messages for check in checks)
    assert reused >= total * 0.6 or total < 200  # the prefix really is carried over


def test_an_extensions_before_request_shapes_the_request_sent() -> None:
    """The documented extension point: `Extension.before_request` changes the request
    `prepare` returns and the one the session keeps as sent."""
    from unbounded.extension import Extension, ExtensionHost
    from unbounded.session import Session, SessionConfig
    from unbounded.storage import MemoryStore

    seen: list[int] = []

    class TagRequest(Extension):
        async def before_request(self, session: ExtensionHost, turn: TurnContext) -> None:
            seen.append(turn.first_changed)
            turn.request = {**turn.built_request(), "metadata": {"user_id": "u-42"}}  # type: ignore[typeddict-unknown-key]

    session = Session(
        SessionConfig(model="claude-sonnet-4-6"), store=MemoryStore(), extensions=[TagRequest()]
    )
    session.add_user("hello")
    request = asyncio.run(session.prepare())
    assert request["metadata"] == {"user_id": "u-42"}  # type: ignore[typeddict-item]
    assert session.last_request is request
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 9}})
    session.add_user("again")
    asyncio.run(session.prepare())
    assert seen == [0, 1]  # the second turn kept the first message, appended the rest
