"""A session that switches model mid-way (`Session.reconfigure`): the next request carries the
new model, the thresholds are the new model's, and the cache break that follows is explained
as the switch, not left unexplained."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from unbounded.caching.simulator import usage_cost_usd
from unbounded.catalog import load_model_table
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.events import CacheBreak, Event
from unbounded.policy import Policy, compute_thresholds
from unbounded.session import Session, SessionConfig
from unbounded.transcripts.loader import load_transcript

FIRST = "claude-haiku-4-5"
SECOND = "claude-opus-4-6"
SYSTEM = "You are a careful coding agent. " * 200  # long enough to be cached


def _turn(session: Session, n: int, *, read: int, written: int) -> None:
    session.add_user(f"step {n}: " + "details of the step. " * 200)
    asyncio.run(session.prepare())
    session.record(
        {
            "content": [{"type": "text", "text": f"done {n}"}],
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written,
                "output_tokens": 20,
            },
        }
    )


def test_a_model_switch_takes_the_new_model_and_explains_the_cache_drop() -> None:
    events: list[Event] = []
    config = SessionConfig(model=FIRST, system=SYSTEM, max_tokens=4_096)
    session = Session(config, policy=Policy(), events=events.append)
    _turn(session, 1, read=0, written=3_000)
    _turn(session, 2, read=3_000, written=1_200)
    _turn(session, 3, read=4_200, written=1_200)
    assert not [e for e in events if isinstance(e, CacheBreak)]

    session.reconfigure(dataclasses.replace(config, model=SECOND))
    request: Any = asyncio.run(session.prepare())
    assert request["model"] == SECOND
    table = load_model_table()
    wanted = compute_thresholds(
        table.get(SECOND), Policy().for_window(table.get(SECOND).context_window)
    )
    before = compute_thresholds(
        table.get(FIRST), Policy().for_window(table.get(FIRST).context_window)
    )
    assert wanted != before  # the two models' limits differ (their output caps)
    assert session.thresholds == wanted
    assert session.model_info.name == SECOND

    # The new model's cache is empty: everything is written again.
    session.record(
        {
            "content": [{"type": "text", "text": "done 4"}],
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 6_600,
                "output_tokens": 20,
            },
        }
    )
    breaks = [e for e in events if isinstance(e, CacheBreak)]
    assert len(breaks) == 1
    assert breaks[0].reason == f"model changed ({FIRST} → {SECOND})"
    assert breaks[0].previous_read == 4_200 and breaks[0].current_read == 0


def test_a_replayed_switch_prices_our_calls_at_their_model_with_a_new_cache() -> None:
    """A recorded session that switches from Opus to Haiku: our request at the switch reads
    nothing (the new model's cache is empty) and writes its whole prompt, and each of our calls
    is priced at its own model's rates."""
    fixture = Path(__file__).resolve().parent / "fixtures" / "sessions" / "mixed_models.jsonl"
    report = replay_session(load_transcript(str(fixture)), ReplayOptions(baselines=False))
    table = load_model_table()
    opus, haiku = table.get("claude-opus-4-6"), table.get("claude-haiku-4-5")
    calls = report.ours.main_calls
    switch = next(i for i, call in enumerate(calls) if "haiku" in call.model)
    assert switch == 10 and all("haiku" in call.model for call in calls[switch:])
    assert calls[switch - 1].cache_read_input_tokens > 20_000  # Opus's cache was warm
    assert calls[switch].cache_read_input_tokens == 0
    assert calls[switch].cache_creation_input_tokens == calls[switch].prompt_tokens
    assert calls[switch + 1].cache_read_input_tokens == calls[switch].prompt_tokens
    for call in calls:
        info = haiku if "haiku" in call.model else opus
        assert call.cost_usd == pytest.approx(
            usage_cost_usd(
                info,
                input_tokens=call.input_tokens,
                cache_creation_5m_input_tokens=call.cache_creation_5m_input_tokens,
                cache_creation_1h_input_tokens=call.cache_creation_1h_input_tokens,
                cache_read_input_tokens=call.cache_read_input_tokens,
                output_tokens=call.output_tokens,
            ),
            rel=1e-9,
        )
