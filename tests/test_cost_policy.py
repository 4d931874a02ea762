"""Cost-aware compaction: early and cold-cache compactions, compaction instead of a clearing
that breaks the cache, superseded reads, policy files, and `unbounded tune`."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import corpus_files
from unbounded.cli import app
from unbounded.compaction.ledger import ToolLedger
from unbounded.compaction.memory_updaters import OfflineNotesUpdater
from unbounded.compaction.micro import MicrocompactState, count_based_microcompact, superseded_reads
from unbounded.errors import ConfigError
from unbounded.evaluation.tune import draw_candidates, tune_policy, with_keep
from unbounded.events import EarlyCompaction, Event
from unbounded.extensions.session_memory import SessionMemory
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG = SessionConfig(model="claude-sonnet-4-5", system="You are a coding agent.", context_window=100_000)
START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def run_turns(session: Session, clock: Clock, turns: int, *, pause: timedelta = timedelta(seconds=20)) -> list[int]:
    """Turns of ~1,000 tokens each; returns the turns at which a compaction happened."""
    compacted: list[int] = []
    for turn in range(turns):
        clock.now += pause
        session.add_user(f"turn {turn}: change parse_config in module_{turn}.py " + "because " * 500)
        asyncio.run(session.prepare())
        if session.status().compactions > len(compacted):
            compacted.append(turn)
        session.record({"content": [{"type": "text", "text": f"done {turn}"}], "usage": {"input_tokens": session.status().tokens, "output_tokens": 20}})
    return compacted


def memory_session(policy: Policy, clock: Clock, events: list[Event]) -> Session:
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    return Session(CONFIG, policy=policy, extensions=[memory], events=events.append, clock=clock)


def test_a_free_compaction_happens_early_and_only_with_notes() -> None:
    events: list[Event] = []
    clock = Clock()
    session = memory_session(Policy(), clock, events)
    compacted = run_turns(session, clock, 60)
    early = [e for e in events if isinstance(e, EarlyCompaction)]
    assert early and compacted
    room = session.thresholds.autocompact - session.estimate_request_tokens([])
    assert all(e.tokens - session.estimate_request_tokens([]) >= Policy().early_compact_fraction * room for e in early)
    assert all(e.tokens < session.thresholds.autocompact for e in early)
    assert all(b - a > 1 for a, b in itertools.pairwise(compacted))  # never in a row
    # without session notes nothing compacts before the threshold
    plain_events: list[Event] = []
    plain = Session(CONFIG, policy=Policy(), events=plain_events.append, clock=Clock())
    run_turns(plain, Clock(), 40)
    assert not [e for e in plain_events if isinstance(e, EarlyCompaction)]
    # the seeds' policy compacts only at the threshold
    seeds_events: list[Event] = []
    seeds = memory_session(Policy.claude_code(), Clock(), seeds_events)
    run_turns(seeds, Clock(), 40)
    assert not [e for e in seeds_events if isinstance(e, EarlyCompaction)]


def test_a_cold_cache_compacts_before_the_early_level() -> None:
    events: list[Event] = []
    clock = Clock()
    policy = Policy(early_compact_fraction=1.0, compact_instead_of_clearing=False)
    session = memory_session(policy, clock, events)
    run_turns(session, clock, 14)  # about a third of the room, cache warm: nothing happens
    assert not [e for e in events if isinstance(e, EarlyCompaction)]
    clock.now += timedelta(minutes=12)  # the 5-minute cache expired meanwhile
    session.add_user("back from lunch: go on")
    asyncio.run(session.prepare())
    (event,) = [e for e in events if isinstance(e, EarlyCompaction)]
    assert event.reason == "cold_cache"


def test_superseded_reads_are_found_and_cleared() -> None:
    def read(tool_id: str, path: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "x = 1\n" * 4_000}]},
        ]

    edit = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "e1", "name": "Edit", "input": {"file_path": "/a.py", "old_string": "1", "new_string": "2"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "e1", "content": "ok"}]},
    ]
    messages: list[Any] = [{"role": "user", "content": "go"}, *read("r1", "/a.py"), *read("r2", "/b.py"), *edit, *read("r3", "/a.py"), *read("r4", "/c.py")]
    ledger = ToolLedger()
    ledger.observe(messages)
    assert superseded_reads(ledger.records()) == ["r1"]
    policy = Policy(microcompact_protect_recent_tokens=1_000_000, microcompact_min_savings=1_000)
    result = count_based_microcompact(messages, MicrocompactState(), policy)
    assert result.cleared_ids == ("r1",)  # protected by the token budget, cleared as stale
    off = count_based_microcompact(messages, MicrocompactState(), policy.with_changes(clear_superseded_reads=False))
    assert off.cleared_ids == ()


def test_policy_files(tmp_path: Path) -> None:
    policy = Policy(early_compact_fraction=0.6, cache_ttl_1h_query_sources=("sdk",))
    path = tmp_path / "policy.toml"
    path.write_text(policy.to_toml())
    assert Policy.from_file(path) == policy
    session = Session(CONFIG, policy=path)
    assert session.policy.early_compact_fraction == 0.6
    path.write_text("[policy]\nearly_compact_fracton = 0.6\n")
    with pytest.raises(ConfigError, match="unknown policy field 'early_compact_fracton'"):
        Policy.from_file(path)
    path.write_text("[policy]\nearly_compact_fraction = 'half'\n")
    with pytest.raises(ConfigError, match="wrong type"):
        Policy.from_file(path)
    path.write_text("[policy]\nearly_compact_fraction = 1.5\n")
    with pytest.raises(ConfigError, match="must be in"):
        Policy.from_file(path)
    result = CliRunner().invoke(app, ["replay", str(FIXTURES / "session_2_1.jsonl"), "--policy", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2 and "no such policy file" in result.output


def test_candidates_are_deterministic_and_distinct() -> None:
    first, second = draw_candidates(10, seed=3), draw_candidates(10, seed=3)
    assert first == second and len({json.dumps(c, sort_keys=True) for c in first}) == 10
    assert with_keep({"session_memory_keep_max_tokens": 8_000}, Policy())["session_memory_keep_min_tokens"] == 3_200


COMPACTED = [p for p in corpus_files("*.jsonl") if p.name.startswith(("marot-spotter_4d5611e5", "marot-spotter_8463c716", "Smartagent"))]


@pytest.mark.corpus
def test_tune_writes_a_policy_whose_replay_reproduces_its_cost(tmp_path: Path) -> None:
    if not COMPACTED:
        pytest.skip("../shared/corpus/raw is not present")
    paths = COMPACTED[:1]
    report = tune_policy(paths, trials=3, jobs=1, seed=1)
    assert report.best.continuation >= report.default.continuation
    assert report.best.cost <= report.default.cost
    out = tmp_path / "tuned.toml"
    result = CliRunner().invoke(app, ["tune", *map(str, paths), "--trials", "3", "--seed", "1", "--jobs", "1", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["best"]["cost"] == pytest.approx(report.best.cost, abs=1e-3)
    replayed = CliRunner().invoke(app, ["replay", str(paths[0]), "--policy", str(out), "--json"])
    assert json.loads(replayed.stdout)["cost"]["unbounded"] == pytest.approx(data["best"]["cost"], abs=1e-3)


@pytest.mark.corpus
@pytest.mark.parametrize("path", COMPACTED, ids=lambda p: p.name[:30])
def test_corpus_cost_below_recorded_and_every_baseline(path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(path), "--json"])
    data = json.loads(result.stdout)
    cost = data["cost"]
    assert cost["unbounded"] <= 0.85 * cost["recorded"]
    assert cost["unbounded"] < min(cost["baselines"].values())
    assert data["invalid_requests"] == 0


@pytest.mark.corpus
def test_a_compaction_calls_own_transcript_replays_with_a_note() -> None:
    """The transcript of a compaction request holds one call whose input (the conversation it
    summarized) is over the threshold: replayed as it is, nothing to compact, exit 0."""
    paths = [p for p in corpus_files("*.jsonl") if "acompact" in p.name]
    if not paths:
        pytest.skip("../shared/corpus/raw is not present")
    for path in paths:
        result = CliRunner().invoke(app, ["replay", str(path), "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["compactions"] == 0 and data["invalid_requests"] == 0
        assert any("nothing our policy could compact" in note for note in data["notes"])
