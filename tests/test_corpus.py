"""The real transcripts of ../shared/corpus/raw: load, round-trip, valid at every API call."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from conftest import corpus_files
from unbounded import load_transcript
from unbounded.model.entries import messages_after_compact_boundary
from unbounded.model.normalize import MessageNormalizer, validate_request
from unbounded.tokens.estimate import ContextCounter, token_count_with_estimation
from unbounded.transcripts import codex, write_claude_code

pytestmark = pytest.mark.corpus

ALL = corpus_files()
CLAUDE = corpus_files("*.jsonl")


def _skip_if_absent() -> None:
    if not ALL:
        pytest.skip("../shared/corpus/raw is not present")


@pytest.mark.parametrize("path", ALL or [None], ids=lambda p: p.name if p else "absent")
def test_every_file_loads(path: Path | None) -> None:
    _skip_if_absent()
    assert path is not None
    transcript = load_transcript(path)
    assert transcript.records > 0
    # A Codex rollout older than turn_context names no model: the reader's only expected
    # warning says which one it assumed. Anything else it noticed is a failure.
    assert [w for w in transcript.warnings if codex.MODEL_ASSUMED not in w] == []
    assert transcript.main_thread()


@pytest.mark.parametrize("path", CLAUDE or [None], ids=lambda p: p.name if p else "absent")
def test_claude_code_round_trip(path: Path | None, tmp_path: Path) -> None:
    _skip_if_absent()
    assert path is not None
    transcript = load_transcript(path)
    out = tmp_path / path.name
    write_claude_code(transcript.entries, out)
    again = load_transcript(out)
    assert len(again.entries) == len(transcript.entries)
    assert [e.data for e in again.entries] == [e.data for e in transcript.entries]


@pytest.mark.parametrize("path", ALL or [None], ids=lambda p: p.name if p else "absent")
def test_valid_request_before_every_recorded_call(path: Path | None) -> None:
    """The normalized view before each recorded API call is a valid Messages request."""
    _skip_if_absent()
    assert path is not None
    transcript = load_transcript(path)
    main = transcript.main_thread()
    calls = transcript.api_calls()
    checked = 0
    for call in calls:
        view = messages_after_compact_boundary(main[: call.first])
        messages = MessageNormalizer(view).messages
        if not messages and call.first == 0:
            continue  # a sub-agent file's first call: its prompt is not in the file
        validate_request(messages)
        checked += 1
    if transcript.format == "claude-code":
        assert checked >= len(calls) - 1 and checked > 0
    validate_request(MessageNormalizer(transcript.view_entries()).messages)


def test_incremental_counter_matches_the_recorded_usage(corpus: Path) -> None:
    """Anchored counting predicts the next call's prompt within a few percent (median)."""
    errors = []
    for path in sorted(corpus.glob("*.jsonl")):
        transcript = load_transcript(path)
        main = transcript.main_thread()
        counter = ContextCounter()
        calls = {call.first: call for call in transcript.api_calls()}
        for index, entry in enumerate(main):
            call = calls.get(index)
            if entry.is_compact_boundary:
                counter.reset()
            if call is not None and counter.anchored:
                errors.append(abs(counter.total - call.prompt_tokens) / call.prompt_tokens)
            counter.append(entry)
    assert len(errors) > 250
    assert statistics.median(errors) < 0.02


def _percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation (as benchmarks/estimation_accuracy.py)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def test_readme_token_count_figures(corpus: Path) -> None:
    """README: anchored counting has a "median error 0.08 %, 90th percentile 0.8 %, over 1,213
    calls of 12 real sessions" (every call with recorded usage of a session with two such
    calls, the estimate of the entries before it against its recorded prompt)."""
    errors: list[float] = []
    sessions = 0
    for path in CLAUDE:
        transcript = load_transcript(path)
        main = transcript.main_thread()
        calls = [call for call in transcript.api_calls() if call.prompt_tokens > 0]
        if len(calls) < 2:
            continue
        sessions += 1
        for call in calls:
            view = messages_after_compact_boundary(main[: call.first])
            if any(entry.usage is not None for entry in view):
                estimate = token_count_with_estimation(view)
                errors.append(abs(estimate - call.prompt_tokens) / call.prompt_tokens * 100)
    assert (sessions, len(errors)) == (12, 1_213)
    assert round(statistics.median(errors), 2) == 0.08
    assert round(_percentile(errors, 90), 1) == 0.8


def test_recorded_boundaries_are_found(corpus: Path) -> None:
    pre = {}
    for path in corpus.glob("marot-spotter_[48]*.jsonl"):
        boundaries = load_transcript(path).boundaries()
        pre[path.name[:22]] = [b.compact_metadata["preTokens"] for b in boundaries]
        assert all(b.logical_parent_uuid for b in boundaries)
    assert sorted(pre.values()) == [[167_731], [170_251]]
