"""`unbounded replay`: the replay engine on our fixture, the demo session and the real corpus."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.evaluation.baselines import (
    CLEAR_PLACEHOLDER,
    clear_tool_results_copy,
    mark_last_message,
)
from unbounded.evaluation.recorded import build_replay_script
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.evaluation.sources import latest_claude_session
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

runner = CliRunner()
REQUIRED = {
    "calls",
    "compactions",
    "session_memory_compactions",
    "microcompacts",
    "cache_breaks",
    "invalid_requests",
    "overflows",
    "peak_context_tokens",
    "cache_read_share",
    "cost",
    "fidelity",
    "retention",
}
BASELINES = {"none", "truncate", "summarize_no_cache", "clear_every_turn", "server_compaction"}
LONG_SESSIONS = (
    "marot-spotter_4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "marot-spotter_8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
)


def replay_json(*args: str) -> dict[str, Any]:
    from unbounded.cli import replay_command  # noqa: F401

    result = runner.invoke(app, ["replay", *args, "--json"])
    assert result.exit_code == 0, result.stderr + result.stdout
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def check_shape(data: dict[str, Any]) -> None:
    assert set(data) >= REQUIRED
    assert set(data["cost"]) == {
        "unbounded",
        "recorded",
        "recorded_model",
        "recorded_comparable",
        "baselines",
    }
    assert set(data["cost"]["baselines"]) == BASELINES
    assert set(data["fidelity"]) >= {"recorded_cache_read_share", "simulated_cache_read_share"}
    for name in ("user_prompts", "modified_files", "read_files", "errors", "commands"):
        assert set(data["retention"][name]) >= {"summary", "full"}
    assert 0.0 <= data["cache_read_share"] <= 1.0


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`unbounded replay --json` with no PATH and a HOME without Claude Code sessions."""
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(home))
    try:
        return replay_json()
    finally:
        patch.undo()


def test_no_path_and_no_sessions_replays_the_demo(demo_run: dict[str, Any]) -> None:
    assert demo_run["source"] == "demo session (built in)"
    check_shape(demo_run)


def test_demo_replay_compacts_and_stays_valid(demo_run: dict[str, Any]) -> None:
    assert demo_run["calls"] >= 250
    assert demo_run["invalid_requests"] == 0
    assert demo_run["overflows"] == 0
    assert demo_run["compactions"] >= 1
    assert demo_run["peak_context_tokens"] < demo_run["context_window"]
    kinds = {event["kind"] for event in demo_run["timeline"]}
    assert {"compaction", "cache_break"} <= kinds


def test_demo_replay_clears_results_when_it_does_not_compact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Early free compactions leave the demo nothing to clear; without compaction, old results
    are cleared in batches (and the context still outgrows the window)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no session of this machine: the demo
    policy = tmp_path / "no_compaction.toml"
    policy.write_text("auto_compact_enabled = false\n")
    data = replay_json("--policy", str(policy))
    assert data["compactions"] == 0 and data["microcompacts"] >= 1
    assert "microcompact" in {event["kind"] for event in data["timeline"]}


def test_demo_cost_ordering_is_sane(demo_run: dict[str, Any]) -> None:
    cost = demo_run["cost"]
    ours, baselines = cost["unbounded"], cost["baselines"]
    assert cost["recorded"] is not None and cost["recorded"] > 0
    # Sending everything overflows the window, and costs more than managing it.
    assert demo_run["strategies"]["none"]["overflows"] > 0
    assert ours < baselines["none"]
    # Moving the cut (truncation) or the cleared set (LangChain) every turn misses the cache.
    assert ours < baselines["truncate"] < baselines["clear_every_turn"]
    assert demo_run["strategies"]["clear_every_turn"]["cache_read_share"] < 0.5
    # Early, free (session-memory) compactions make ours the cheapest strategy.
    assert ours < min(baselines.values())


def test_fixture_replay(session_2_1: Path, tmp_path: Path) -> None:
    data = replay_json(str(session_2_1))
    check_shape(data)
    assert data["calls"] == len(load_transcript(session_2_1).api_calls())
    assert data["invalid_requests"] == 0 and data["compactions"] == 0
    assert data["cost"]["recorded"] > 0
    # With no compaction, no clear and no pause, ours sends what doing nothing sends: recall is
    # offered once something was taken out, the prefix takes the 1-hour TTL after two pauses.
    assert set(data["cost"]["baselines"].values()) == {data["cost"]["unbounded"]}
    # Offered from the start, recall's schema is priced on every call; the prefix cached for
    # an hour from the start is 2x to write instead of 1.25x, never won back here.
    early = tmp_path / "early.toml"
    early.write_text("recall_from_start = true\n")
    with_recall = replay_json(str(session_2_1), "--policy", str(early))["cost"]["unbounded"]
    early.write_text("recall_from_start = true\nprefix_ttl_1h_after_pauses = 0\n")
    with_both = replay_json(str(session_2_1), "--policy", str(early))["cost"]["unbounded"]
    assert data["cost"]["unbounded"] < with_recall < with_both


def test_fixture_replay_is_deterministic(session_2_1: Path) -> None:
    transcript = load_transcript(session_2_1)
    first = replay_session(transcript, ReplayOptions(policy=Policy())).to_dict(series=True)
    again = replay_session(transcript, ReplayOptions(policy=Policy())).to_dict(series=True)
    assert first == again


def test_a_small_window_forces_compactions_on_the_fixture(session_2_1: Path) -> None:
    report = replay_session(
        load_transcript(session_2_1), ReplayOptions(window=19_000, policy=Policy(autocompact_pct_override=80))
    )
    assert report.invalid_requests == 0
    assert report.compactions >= 1
    assert report.retention_summary.points == report.compactions


def test_script_skips_recorded_compactions_and_feeds_results_after_the_response(
    session_2_1: Path,
) -> None:
    transcript = load_transcript(session_2_1)
    script = build_replay_script(transcript)
    fed = [e for step in script.steps for e in (*step.before, *step.after)]
    assert not any(e.is_compact_boundary or e.is_compact_summary for e in fed)
    assert list(script.message_ids) == [c.message_id for c in transcript.api_calls()]
    assert [step.call.message_id for step in script.steps] == list(script.message_ids)
    for step in script.steps:
        uses = {b["id"] for b in step.call.content if b.get("type") == "tool_use"}
        for entry in step.after:
            content = entry.content
            if isinstance(content, list):
                results = {b["tool_use_id"] for b in content if b.get("type") == "tool_result"}
                assert results <= uses


def test_unknown_model_falls_back_with_a_note(session_2_1: Path) -> None:
    transcript = load_transcript(session_2_1)
    for entry in transcript.entries:
        message = entry.message
        if message is not None and "model" in message:
            message["model"] = "some-local-model"
    report = replay_session(transcript, ReplayOptions(policy=Policy(), baselines=False))
    assert report.notes and "some-local-model" in report.notes[0]


def test_unknown_model_option_is_a_clean_error(session_2_1: Path) -> None:
    from unbounded.cli import replay_command  # noqa: F401

    result = runner.invoke(app, ["replay", str(session_2_1), "--model", "no-such-model"])
    assert result.exit_code == 2 and "no-such-model" in result.stderr


def test_latest_session_skips_subagent_files(tmp_path: Path) -> None:
    projects = tmp_path / ".claude" / "projects" / "p"
    projects.mkdir(parents=True)
    older, newer, agent = projects / "a.jsonl", projects / "b.jsonl", projects / "agent-x.jsonl"
    for number, path in enumerate((older, newer, agent)):
        path.write_text("{}\n")
        os.utime(path, (1_000 + number, 1_000 + number))
    assert latest_claude_session(tmp_path / ".claude" / "projects") == newer
    assert latest_claude_session(tmp_path / "missing") is None


def test_clear_every_turn_keeps_the_three_latest_results() -> None:
    messages: list[Any] = []
    for number in range(5):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{number}", "name": "Read", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{number}",
                        "content": f"body {number}",
                    }
                ],
            }
        )
    cleared = clear_tool_results_copy(messages)
    contents = [m["content"][0].get("content") for m in cleared if m["role"] == "user"]
    assert contents == [CLEAR_PLACEHOLDER, CLEAR_PLACEHOLDER, "body 2", "body 3", "body 4"]
    assert messages[1]["content"][0]["content"] == "body 0"  # the history is untouched
    marked = mark_last_message(cleared, {"type": "ephemeral"})
    assert "cache_control" in marked[-1]["content"][-1]
    assert "cache_control" not in cleared[-1]["content"][-1]


def _shifted(transcript: Transcript, after: int, hours: float) -> Transcript:
    main = transcript.main_thread()
    moved = {id(e) for e in main[after:]}
    entries = []
    for entry in transcript.entries:
        data = dict(entry.data)
        if id(entry) in moved and entry.time is not None:
            stamp = entry.time + timedelta(hours=hours)
            data["timestamp"] = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entries.append(Entry(data, entry.line))
    return Transcript(entries=entries, format=transcript.format, path=transcript.path)


def _corpus(name: str) -> Path:
    path = CORPUS / name
    if not path.exists():
        pytest.skip("../shared/corpus/raw is not present")
    return path


@pytest.mark.corpus
@pytest.mark.parametrize("name", LONG_SESSIONS)
def test_corpus_window_100k_compacts_at_least_twice(name: str) -> None:
    data = replay_json(str(_corpus(name)), "--window", "100000")
    check_shape(data)
    assert data["compactions"] >= 2
    assert data["invalid_requests"] == 0 and data["overflows"] == 0
    assert data["peak_context_tokens"] < 100_000
    assert data["cost"]["unbounded"] < data["cost"]["baselines"]["none"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", LONG_SESSIONS)
def test_corpus_window_120k_is_valid(name: str) -> None:
    data = replay_json(str(_corpus(name)), "--window", "120000")
    assert data["invalid_requests"] == 0 and data["overflows"] == 0
    assert data["compactions"] >= 1
    fidelity = data["fidelity"]
    assert (
        abs(fidelity["simulated_cache_read_share"] - fidelity["recorded_cache_read_share"]) < 0.02
    )
    if name.startswith("marot-spotter_4d5611e5"):
        # Its 4-hour idle gap: the time-based tier clears old results at the next call.
        assert data["microcompacts"] >= 1


@pytest.mark.corpus
def test_corpus_idle_gap_microcompacts_at_120k() -> None:
    """8463c716 has no idle gap; with its second half moved 2 hours later it has one."""
    transcript = load_transcript(_corpus(LONG_SESSIONS[1]))
    shifted = _shifted(transcript, len(transcript.main_thread()) // 2, 2.0)
    report = replay_session(shifted, ReplayOptions(window=120_000, policy=Policy()))
    assert report.microcompacts >= 1
    assert any(e.kind == "microcompact" and "time" in e.summary for e in report.timeline)
    assert report.invalid_requests == 0


@pytest.mark.corpus
@pytest.mark.xfail(
    strict=True,
    reason="open: since ranged reads of a known file keep its text (session 18), more files are "
    "re-read after the first compaction (post-compaction 68,000 tokens against 50,900 before and "
    "42,600 recorded), and Claude Code's numbers compact a second time near the end",
)
def test_corpus_replay_at_the_default_window_matches_the_recording() -> None:
    report = replay_session(
        load_transcript(_corpus(LONG_SESSIONS[1])), ReplayOptions(policy=Policy.claude_code())
    )
    assert report.invalid_requests == 0 and report.compactions == 1
    # Claude Code compacted at 167,731 tokens; we compact at the same threshold.
    (record,) = report.compaction_records
    assert 160_000 < record.pre_tokens < 180_000
    assert report.recorded_cost is not None
    assert abs(report.ours.cost_usd - report.recorded_cost) < 0.15 * report.recorded_cost
