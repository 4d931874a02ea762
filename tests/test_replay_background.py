"""`replay` prices the background summary and idle compaction (issue 28, point 4): stalls
with and without the background summary, its calls priced, idle compaction in the pauses.

The session is written here: an agent reading files (1,500-token results) every 30 seconds,
on a 40,000-token window without session notes or clearing, so every compaction needs a
summary call;
one pause of two hours in the middle."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from unbounded import load_transcript
from unbounded.evaluation.replay import ReplayOptions, ReplayReport, replay_session
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy

SESSION = "5b9e2c1a-0000-4000-8000-00000000abcd"
TURNS = 60
PAUSE_AFTER = 36
NO_NOTES = Policy(session_memory_enabled=False, microcompact_enabled=False)


def _line(kind: str, number: int, parent: str | None, seconds: int, message: dict[str, Any]) -> dict[str, Any]:
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return {
        "parentUuid": parent, "isSidechain": False, "type": kind, "sessionId": SESSION,
        "uuid": f"00000000-0000-4000-8000-{number:012d}",
        "timestamp": f"2026-03-01T{9 + hours:02d}:{minute:02d}:{second:02d}.000Z", "message": message,
    }


def _write_session(path: Path) -> Path:
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    seconds = 0
    number = 1
    lines.append(_line("user", number, None, seconds, {"role": "user", "content": "Read every module and fix the parser."}))
    parent = lines[-1]["uuid"]
    for turn in range(TURNS):
        number += 1
        seconds += 30
        if turn == PAUSE_AFTER:  # the agent stops, the user comes back two hours later
            done = {
                "model": "claude-sonnet-4-6", "id": f"msg_{turn:04d}", "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": "Done for now."}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            lines.append(_line("assistant", number, parent, seconds, done))
            number += 1
            seconds += 2 * 3600
            lines.append(_line("user", number, lines[-1]["uuid"], seconds, {"role": "user", "content": "I am back: go on."}))
            parent = lines[-1]["uuid"]
            continue
        call_id = f"toolu_{turn:04d}"
        reply = {
            "model": "claude-sonnet-4-6", "id": f"msg_{turn:04d}", "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": f"Reading module {turn}."}, {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": f"/src/m{turn}.py"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 60},
        }
        lines.append(_line("assistant", number, parent, seconds, reply))
        parent = lines[-1]["uuid"]
        number += 1
        body = "\n".join(f"def function_{turn}_{i}(value): return value * {i}  # line {i}" for i in range(120))
        lines.append(_line("user", number, parent, seconds + 1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": body}]}))
        parent = lines[-1]["uuid"]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


@pytest.fixture(scope="module")
def agent_session(tmp_path_factory: pytest.TempPathFactory) -> Transcript:
    return load_transcript(_write_session(tmp_path_factory.mktemp("s") / "agent.jsonl"))


def _replay(transcript: Transcript, policy: Policy, **options: Any) -> ReplayReport:
    logging.getLogger("unbounded").setLevel(logging.ERROR)
    return replay_session(transcript, ReplayOptions(window=40_000, policy=policy, baselines=False, **options))


def test_without_the_background_summary_every_summary_is_a_stall(agent_session: Transcript) -> None:
    report = _replay(agent_session, NO_NOTES)
    assert report.invalid_requests == 0
    full = [r for r in report.compaction_records if r.kind == "full"]
    assert len(full) >= 2 and report.stalls == len(full)
    data = report.to_dict()
    assert data["stalls"] == report.stalls and data["background_summary"]["enabled"] == 0


def test_with_the_background_summary_no_turn_waits_and_its_calls_are_priced(agent_session: Transcript) -> None:
    report = _replay(agent_session, NO_NOTES.with_changes(background_summary=True))
    assert report.invalid_requests == 0 and report.ours.overflows == 0
    background = report.background
    assert report.stalls == 0
    assert background["started"] >= background["swapped"] >= 2
    assert background["summary_calls"] >= background["started"]
    assert len(report.ours.side_calls) == background["summary_calls"]  # each priced as a summary call
    assert sum(1 for r in report.compaction_records if r.kind == "full") == background["swapped"]
    assert {e.kind for e in report.timeline} >= {"background_summary", "compaction"}


def test_a_slow_summary_at_the_window_edge_is_a_stall(agent_session: Transcript) -> None:
    """Assumed to take an hour, no summary is ready in time: the turns at the edge wait."""
    report = _replay(agent_session, NO_NOTES.with_changes(background_summary=True), summary_seconds=3_600)
    assert report.stalls >= 1 and report.invalid_requests == 0 and report.ours.overflows == 0


def test_idle_compaction_in_the_long_pause_is_priced_as_a_strategy(agent_session: Transcript) -> None:
    report = replay_session(agent_session, ReplayOptions(window=40_000, policy=NO_NOTES.with_changes(idle_compact_min_tokens=10_000), variants=True))
    assert report.pauses == {"over_ttl": 1, "over_1h": 1}
    idle = report.variants["idle_compaction"]
    assert idle.idle_compactions == 1
    assert report.variants["background_summary"].stalls == 0
    data = report.to_dict()
    assert set(data["strategies"]) >= {"unbounded", "unbounded+idle_compaction", "unbounded+background_summary"}
    assert data["variants"]["idle_compaction"]["cost"] == round(idle.run.cost_usd, 6)
    assert idle.run.cost_usd < report.ours.cost_usd  # the resume reads a small context


def test_a_compaction_at_a_cold_resume_is_no_stall(agent_session: Transcript) -> None:
    """Counting 30 turns after the resume, the cold-resume guard compacts after the two-hour
    pause, below the threshold: a cost the session chose then, not a wait at the threshold."""
    report = _replay(agent_session, NO_NOTES.with_changes(compaction_payback_turns=30))
    full = [r for r in report.compaction_records if r.kind == "full"]
    resumed = [r for r in full if r.pre_tokens < report.thresholds.autocompact]
    assert len(resumed) == 1 and len(full) >= 3
    assert report.stalls == len(full) - 1


def test_the_main_replay_is_freed_before_a_variant_replays(
    agent_session: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant replays the recording again: the main replay's state (its baselines' history,
    simulators, recall index) must be gone by then, or the peak is the sum of both runs."""
    import weakref

    import unbounded.evaluation.replay as replay_module

    made: list[weakref.ref[Any]] = []
    alive_at_variants: list[bool] = []
    init = replay_module._Replayer.__init__
    variants = replay_module._variants

    def remember(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    async def check(*args: Any, **kwargs: Any) -> Any:
        alive_at_variants.append(made[0]() is not None)
        return await variants(*args, **kwargs)

    monkeypatch.setattr(replay_module._Replayer, "__init__", remember)
    monkeypatch.setattr(replay_module, "_variants", check)
    report = replay_session(agent_session, ReplayOptions(window=40_000, policy=NO_NOTES, variants=True))
    assert report.variants and alive_at_variants == [False]
