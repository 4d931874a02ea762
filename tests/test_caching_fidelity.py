"""Fidelity: the simulator, laid out as Claude Code sends its requests, reproduces the recorded
cache-read share of real sessions within 2 percentage points."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, corpus_files
from unbounded import load_transcript
from unbounded.caching.fidelity import (
    RecordedUsage,
    prefix_change_events,
    simulate_recorded_session,
)
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.transcript import Transcript
from unbounded.models import load_model_table
from unbounded.tokens.exact import TiktokenCounter

CLAUDE = corpus_files("*.jsonl")
START = datetime(2026, 2, 1, 12, 0, tzinfo=timezone.utc)
SHARE_TOLERANCE = {"anthropic": 0.02, "openai": 0.04}
"""How far the simulated cache-read share may be from the recorded one, per provider.

Anthropic's cache is deterministic given the markers and the TTL, so 2 points. OpenAI's is
best-effort: in the corpus Codex rollout the API missed a warm prefix a few seconds after it
was written (calls 2, 5, 111, 219…) and read one after gaps of up to 13.6 minutes, past the
5-minute retention the simulator assumes (OpenAI documents 5 to 10 minutes, up to an hour
off-peak). Neither is predictable from a transcript: the simulator's share is 3.4 points under
the recorded one there (2.1 over with a 10-minute retention), hence 4 points."""


@pytest.mark.corpus
@pytest.mark.parametrize("path", CLAUDE or [None], ids=lambda p: p.name if p else "absent")
def test_corpus_session_share_within_two_points(path: Path | None) -> None:
    if path is None:
        pytest.skip("../shared/corpus/raw is not present")
    transcript = load_transcript(path)
    if transcript.format not in ("claude-code", "codex") or len(transcript.api_calls()) < 2:
        pytest.skip("no recorded cache usage (format) or fewer than two recorded calls")
    report = simulate_recorded_session(transcript)
    tolerance = SHARE_TOLERANCE[load_model_table().get(report.model).provider]
    assert abs(report.simulated_cache_read_share - report.recorded_cache_read_share) <= tolerance, (
        report.to_dict()
    )
    assert len(report.calls) == len(transcript.api_calls())


@pytest.mark.corpus
def test_corpus_with_exact_counter(corpus: Path) -> None:
    path = corpus / "marot-spotter_8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not path.exists():
        pytest.skip("session not in the corpus")
    report = simulate_recorded_session(load_transcript(path), counter=TiktokenCounter())
    assert report.counter == "text:o200k_base"
    assert abs(report.share_error) <= 0.02
    assert report.compactions == 1


# -- synthetic sessions ---------------------------------------------------------------------


def _time(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _usage(read: int, creation: int, ttl: str = "5m") -> dict[str, Any]:
    split = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    split[f"ephemeral_{ttl}_input_tokens"] = creation
    return {
        "input_tokens": 3,
        "cache_creation_input_tokens": creation,
        "cache_read_input_tokens": read,
        "cache_creation": split,
        "output_tokens": 10,
    }


def _session(calls: list[tuple[float, int, int]], *, ttl: str = "5m") -> Transcript:
    """A prompt, then per call a user note (sent 1 s before), a tool call and its result:
    (seconds, recorded read, recorded creation)."""
    entries = [Entry.user("Please fix the bug. " * 50, timestamp=_time(-1))]
    for index, (seconds, read, creation) in enumerate(calls):
        tool_id = f"toolu_{index}"
        if index:
            entries.append(Entry.user(f"Now step {index}.", timestamp=_time(seconds - 1)))
        entries.append(
            Entry.assistant(
                [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"n": index}}],
                message_id=f"msg_{index}",
                model="claude-sonnet-4-5",
                usage=_usage(read, creation, ttl),
                timestamp=_time(seconds),
            )
        )
        entries.append(
            Entry.user(
                [{"type": "tool_result", "tool_use_id": tool_id, "content": "x" * 4000}],
                timestamp=_time(seconds + 1),
            )
        )
    return Transcript(entries=entries, format="claude-code")


def test_a_gap_longer_than_the_ttl_is_a_miss() -> None:
    transcript = _session(
        [(0, 0, 20_000), (30, 20_000, 1_000), (700, 0, 22_000), (710, 22_000, 1_000)]
    )
    report = simulate_recorded_session(transcript)
    reads = [call.simulated.cache_read_input_tokens for call in report.calls]
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0 and reads[3] > 0
    assert [call.ttl for call in report.calls] == ["5m"] * 4


def test_one_hour_sessions_survive_the_gap() -> None:
    transcript = _session([(0, 0, 20_000), (30, 20_000, 1_000), (700, 21_000, 1_000)], ttl="1h")
    report = simulate_recorded_session(transcript)
    assert report.calls[2].simulated.cache_read_input_tokens > 0
    assert report.calls[2].simulated.cache_creation_1h_input_tokens > 0
    assert report.calls[2].ttl == "1h"


def test_warm_start_and_calibration() -> None:
    transcript = _session([(0, 15_000, 6_000), (10, 21_000, 1_000), (20, 22_000, 1_000)])
    report = simulate_recorded_session(transcript)
    assert report.warm_prefix_tokens == 15_000
    assert report.calls[0].simulated.cache_read_input_tokens == 15_000
    # The recorded prompts grow ~1,000 tokens a call; the estimate of a 4,000-char result is
    # ~1,000 too, so the calibration stays near 1.
    assert 0.8 <= report.scale <= 1.3
    assert abs(report.share_error) < 0.02
    uncalibrated = simulate_recorded_session(transcript, calibrate=False)
    assert uncalibrated.scale == 1.0


def test_compaction_misses_the_messages_and_reads_the_prefix() -> None:
    transcript = _session([(0, 0, 20_000), (10, 20_000, 1_000)])
    boundary = create_compact_boundary("auto", 21_000, timestamp=_time(20))
    summary = Entry.user("Summary: " + "s" * 2000, timestamp=_time(21), is_compact_summary=True)
    after = Entry.assistant(
        [{"type": "text", "text": "Continuing."}],
        message_id="msg_after",
        model="claude-sonnet-4-5",
        usage=_usage(18_000, 600),
        timestamp=_time(30),
    )
    transcript.entries.extend([boundary, summary, after])
    report = simulate_recorded_session(transcript)
    last = report.calls[-1]
    assert last.after_compaction
    assert report.compactions == 1
    assert last.simulated.cache_read_input_tokens == report.prefix_tokens
    assert last.simulated.cache_creation_input_tokens > 0


def test_mcp_reconnection_changes_the_prefix() -> None:
    transcript = _session([(0, 10_000, 12_000), (10, 22_000, 1_000)])
    transcript.entries.extend(
        [
            Entry.user("<command-name>/mcp</command-name>", timestamp=_time(20)),
            Entry.user(
                "<local-command-stdout>Reconnected to tidewave.</local-command-stdout>",
                timestamp=_time(20),
            ),
            Entry.user("next", timestamp=_time(21)),
            Entry.assistant(
                [{"type": "text", "text": "ok"}],
                message_id="msg_x",
                model="claude-sonnet-4-5",
                usage=_usage(10_000, 14_000),
                timestamp=_time(30),
            ),
        ]
    )
    report = simulate_recorded_session(transcript)
    assert report.calls[-1].prefix_changed
    assert report.prefix_changes == ("call 2: mcp servers changed (/mcp)",)
    assert report.calls[-1].simulated.cache_read_input_tokens == report.warm_prefix_tokens
    dismissed = [
        Entry.user("<command-name>/mcp</command-name>"),
        Entry.user("<local-command-stdout>MCP dialog dismissed</local-command-stdout>"),
    ]
    assert prefix_change_events(dismissed) == []


def test_model_change_is_a_prefix_change() -> None:
    transcript = _session([(0, 0, 20_000), (10, 20_000, 1_000)])
    transcript.entries.append(
        Entry.assistant(
            [{"type": "text", "text": "ok"}],
            message_id="msg_opus",
            model="claude-opus-4-6",
            usage=_usage(0, 22_000),
            timestamp=_time(30),
        )
    )
    report = simulate_recorded_session(transcript, load_model_table().get("claude-sonnet-4-5"))
    assert report.calls[-1].prefix_changed
    assert report.calls[-1].simulated.cache_read_input_tokens == 0


def test_recorded_usage_without_split() -> None:
    usage = {"input_tokens": 1, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 9}
    assert RecordedUsage.from_usage(usage, "1h").cache_creation_1h_input_tokens == 500
    assert RecordedUsage.from_usage(usage, "5m").cache_creation_5m_input_tokens == 500
    assert RecordedUsage.from_usage(usage, "5m").prompt_tokens == 510


def test_fixture_report_is_json_ready() -> None:
    report = simulate_recorded_session(load_transcript(FIXTURES / "session_2_1.jsonl"))
    data = report.to_dict()
    json.dumps(data)
    assert data["calls"] == len(report.calls) > 0
    assert data["session"] == "session_2_1.jsonl"
    assert 0 <= data["simulated_cache_read_share"] <= 1
    assert report.simulated_cost_usd > 0 and report.recorded_cost_usd > 0


def test_a_transcript_without_calls() -> None:
    report = simulate_recorded_session(Transcript(entries=[Entry.user("hi")], format="claude-code"))
    assert report.calls == ()
    assert report.simulated_cache_read_share == 0.0
