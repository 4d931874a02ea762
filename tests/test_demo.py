"""The built-in demo session: deterministic, loadable, long and tool-heavy."""

from __future__ import annotations

import itertools
from pathlib import Path

from unbounded.cli.demo import demo_records, demo_transcript, write_demo_session
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.transcripts.loader import load_transcript


def test_demo_is_deterministic(tmp_path: Path) -> None:
    assert demo_records() == demo_records()
    first = write_demo_session(tmp_path / "a.jsonl").read_bytes()
    second = write_demo_session(tmp_path / "b.jsonl").read_bytes()
    assert first == second


def test_demo_loads_as_a_claude_code_session(tmp_path: Path) -> None:
    path = write_demo_session(tmp_path / "demo.jsonl")
    transcript = load_transcript(path)
    assert transcript.format == "claude-code" and not transcript.warnings
    assert transcript.records == len(demo_records())


def test_demo_is_long_and_tool_heavy() -> None:
    transcript = demo_transcript()
    main = transcript.main_thread()
    calls = transcript.api_calls()
    assert 280 <= len(calls) <= 420
    tools = [
        b["name"]
        for e in main
        if e.type == "assistant"
        for b in e.content
        if b.get("type") == "tool_use"
    ]
    for name in ("Read", "Edit", "Write", "Bash", "Grep", "TodoWrite", "Task"):
        assert name in tools
    errors = [
        b
        for e in main
        if e.type == "user" and isinstance(e.content, list)
        for b in e.content
        if b.get("is_error")
    ]
    assert len(errors) >= 10
    prompts = [
        e
        for e in main
        if e.type == "user" and isinstance(e.content, str) and not e.is_compact_summary
    ]
    assert len(prompts) >= 12
    # Parallel tool calls: results written between the lines of one response.
    assert any(
        c.last - c.first
        > len([i for i in range(c.first, c.last + 1) if main[i].message_id == c.message_id]) - 1
        for c in calls
    )


def test_demo_timestamps_and_usage_look_real() -> None:
    transcript = demo_transcript()
    main = transcript.main_thread()
    times = [e.time for e in main]
    assert all(t is not None for t in times)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times) if a and b]
    assert min(gaps) >= 0
    assert max(gaps) > 3600  # the lunch break: the cache expires, time-based microcompaction
    assert (times[-1] - times[0]).total_seconds() > 4 * 3600  # type: ignore[operator]
    prompts = [c.prompt_tokens for c in transcript.api_calls()]
    assert prompts[0] < 25_000 and max(prompts) > 150_000
    # Like Claude Code, the recording compacted itself at the threshold.
    assert len(transcript.boundaries()) >= 2
    assert max(prompts) < 200_000


def test_demo_requests_are_valid_before_every_call() -> None:
    transcript = demo_transcript()
    main = transcript.main_thread()
    for call in transcript.api_calls()[::25]:
        before = main[: call.first]
        start = max((i for i, e in enumerate(before) if e.is_compact_boundary), default=0)
        validate_request(normalize_messages(before[start:]))
