"""Idle compaction and the cold-resume guard: the break-even of `compaction/idle.py`, and
`Session.idle()` / the guard in a session (issue 28, point 2)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from unbounded.catalog import load_model_table
from unbounded.compaction.idle import cold_resume_pays, idle_compaction_pays, resume_costs
from unbounded.events import EarlyCompaction, Event, IdleCompaction
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig

# Round prices, so the break-even can be worked out by hand: $3 / $15 per million, writes
# 1.25x (5 minutes) or 2x (1 hour), reads 0.1x.
MODEL = dataclasses.replace(
    load_model_table().get("claude-sonnet-4-6"),
    input_per_mtok=3.0,
    output_per_mtok=15.0,
    cache_write_5m_multiplier=1.25,
    cache_write_1h_multiplier=2.0,
    cache_read_multiplier=0.1,
)
# After a compaction: 10,000 of system prompt and tools, a 4,000-token summary, 10,000 of files.
POLICY = Policy(compaction_summary_tokens=4_000, rehydrate_total_file_tokens=10_000, compaction_payback_turns=5)


def test_the_break_even_by_hand() -> None:
    costs = resume_costs(POLICY, MODEL, tokens=150_000, overhead=10_000, ttl="5m", cache_warm=True)
    # keep: 1.25 * 150,000 + 5 * 0.1 * 150,000 = 262,500 input-token prices
    assert costs.keep_usd == pytest.approx(262_500 * 3e-6)
    # compact: 0.1 * 150,000 + 5 * 4,000 + 1.25 * 24,000 + 5 * 0.1 * 24,000 = 77,000
    assert costs.compact_usd == pytest.approx(77_000 * 3e-6)
    cold = resume_costs(POLICY, MODEL, tokens=150_000, overhead=10_000, ttl="5m", cache_warm=False)
    assert cold.compact_usd == pytest.approx((1.25 * 150_000 + 20_000 + 30_000 + 12_000) * 3e-6)
    hour = resume_costs(POLICY, MODEL, tokens=150_000, overhead=10_000, ttl="1h", cache_warm=True)
    assert hour.keep_usd == pytest.approx((2.0 * 150_000 + 75_000) * 3e-6)


def test_the_cold_resume_pays_from_its_break_even_on() -> None:
    # keep 1.75 C against 1.25 C + 62,000: even at C = 124,000.
    assert not cold_resume_pays(POLICY, MODEL, tokens=124_000, overhead=10_000, ttl="5m")
    assert cold_resume_pays(POLICY, MODEL, tokens=124_001, overhead=10_000, ttl="5m")
    # Counting only the resume (no turns after it) a summary call never pays on a cold cache.
    alone = POLICY.with_changes(compaction_payback_turns=0)
    assert not cold_resume_pays(alone, MODEL, tokens=190_000, overhead=10_000, ttl="5m")


def test_idle_compaction_needs_its_floor_and_the_break_even() -> None:
    assert idle_compaction_pays(POLICY, MODEL, tokens=49_999, overhead=10_000, ttl="5m") is None
    assert idle_compaction_pays(POLICY, MODEL, tokens=50_000, overhead=10_000, ttl="5m") is not None
    # keep 1.75 C against 0.1 C + 62,000: even at C = 37,575.8.
    low = POLICY.with_changes(idle_compact_min_tokens=0)
    assert idle_compaction_pays(low, MODEL, tokens=37_575, overhead=10_000, ttl="5m") is None
    assert idle_compaction_pays(low, MODEL, tokens=37_576, overhead=10_000, ttl="5m") is not None


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


CONFIG = SessionConfig(model="claude-sonnet-4-6", system="You are careful.", context_window=200_000)


def _session(clock: Clock, events: list[Event], tmp_path: Path, tokens: int, **policy: Any) -> Session:
    session = Session.open(
        tmp_path / "s", CONFIG, policy=Policy(**policy), summarizer=ExtractiveSummarizer(),
        events=events.append, clock=clock,
    )
    session.add_user("Here is the log:\n" + "a line of the build log\n" * 2_000)
    session.record({
        "content": [{"type": "text", "text": "The build fails at the link step."}],
        "usage": {"input_tokens": tokens, "output_tokens": 10},
    })
    return session


def test_idle_compacts_a_large_context_while_the_cache_is_warm(tmp_path: Path) -> None:
    clock, events = Clock(), []  # type: ignore[var-annotated]
    session = _session(clock, events, tmp_path, 120_000)
    deadline = session.idle_deadline()
    assert deadline == clock.now + timedelta(seconds=0.9 * 300)  # 4.5 minutes of the 5-minute cache
    clock.now = deadline
    result = asyncio.run(session.idle())
    assert result is not None and session.status().compactions == 1
    [idle] = [e for e in events if isinstance(e, IdleCompaction)]
    assert idle.tokens >= 120_000 and idle.compact_cost_usd < idle.keep_cost_usd
    session.close()


def test_idle_does_nothing_on_a_small_context_or_an_expired_cache(tmp_path: Path) -> None:
    clock, events = Clock(), []  # type: ignore[var-annotated]
    small = _session(clock, events, tmp_path / "a", 20_000)
    assert asyncio.run(small.idle()) is None
    small.close()
    large = _session(clock, events, tmp_path / "b", 120_000)
    clock.now += timedelta(seconds=301)  # the 5-minute cache has expired: the guard decides
    assert asyncio.run(large.idle()) is None
    assert large.status().compactions == 0 and not any(isinstance(e, IdleCompaction) for e in events)
    large.close()


def test_a_cold_resume_compacts_first_when_it_pays_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock, events = Clock(), []  # type: ignore[var-annotated]
    session = _session(clock, events, tmp_path, 150_000)
    session.add_user("I'm back. Go on.")
    clock.now += timedelta(hours=2)
    with caplog.at_level("INFO", logger="unbounded.session_compaction"):
        asyncio.run(session.prepare())
    assert [e.reason for e in events if isinstance(e, EarlyCompaction)] == ["cold_resume"]
    assert session.status().compactions == 1
    assert "compacting before resuming pays" in caplog.text
    session.close()


def test_a_cold_resume_below_the_break_even_is_resumed_as_it_is(tmp_path: Path) -> None:
    clock, events = Clock(), []  # type: ignore[var-annotated]
    session = _session(clock, events, tmp_path, 100_000)
    session.add_user("I'm back. Go on.")
    clock.now += timedelta(hours=2)
    asyncio.run(session.prepare())
    assert not any(isinstance(e, EarlyCompaction) for e in events)
    assert session.status().compactions == 0
    session.close()


def test_idle_leaves_a_session_with_notes_to_the_free_compaction_at_the_resume(tmp_path: Path) -> None:
    from unbounded.compaction.memory_updaters import OfflineNotesUpdater
    from unbounded.extensions.session_memory import SessionMemory

    clock, events = Clock(), []  # type: ignore[var-annotated]
    session = Session.open(
        tmp_path / "s", CONFIG, policy=Policy(), summarizer=ExtractiveSummarizer(),
        events=events.append, clock=clock, extensions=[SessionMemory(OfflineNotesUpdater(), background=False)],
    )
    session.add_user("Here is the log:\n" + "a line of the build log\n" * 2_000)
    session.record({"content": [{"type": "text", "text": "The build fails."}], "usage": {"input_tokens": 120_000, "output_tokens": 10}})
    session.write_notes("# Current State\nFixing the link step of the build.\n")
    assert asyncio.run(session.idle()) is None
    without_rule = Policy(cold_cache_compact_fraction=0.0)
    session.reconfigure(policy=without_rule)
    assert asyncio.run(session.idle()) is not None  # nothing else would compact the resume
    session.close()


def test_an_unpriced_model_never_pays_to_compact() -> None:
    # The drop-ins price a model they have no prices for at 0: no division by it.
    from unbounded.integrations.openai_client import model_from_arguments

    unpriced = model_from_arguments("qwen3-coder", 131072, None, None)
    assert unpriced.input_per_mtok == 0
    assert not cold_resume_pays(Policy(), unpriced, tokens=120_000, overhead=1_000, ttl="5m")
    low = Policy(idle_compact_min_tokens=0)
    assert idle_compaction_pays(low, unpriced, tokens=120_000, overhead=1_000, ttl="5m") is None


def test_no_idle_or_cold_resume_event_when_the_compaction_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.session_compaction import SessionCompactor

    async def fails(self: SessionCompactor, **_: object) -> None:
        return None

    monkeypatch.setattr(SessionCompactor, "auto_compact", fails)
    clock, events = Clock(), []  # type: ignore[var-annotated]
    idle = _session(clock, events, tmp_path / "a", 120_000)
    clock.now += timedelta(seconds=270)
    assert asyncio.run(idle.idle()) is None
    idle.close()
    cold = _session(clock, events, tmp_path / "b", 150_000)
    cold.add_user("I'm back. Go on.")
    clock.now += timedelta(hours=2)
    asyncio.run(cold.prepare())
    assert cold.status().compactions == 0
    assert not [e for e in events if isinstance(e, (IdleCompaction, EarlyCompaction))]
    cold.close()
