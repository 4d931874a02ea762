"""`ReplayRecording`: a replay keeps its script and facts, and lets the loaded transcript go."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.evaluation.continuation import used_in_turns
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.evaluation.replay_recording import RecordedFuture, ReplayRecording
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript


def _options() -> ReplayOptions:
    # A small window so that the fixture compacts and the continuation looks ahead.
    return ReplayOptions(window=19_000, policy=Policy(autocompact_pct_override=80))


def _transcripts_alive() -> int:
    gc.collect()
    return sum(isinstance(thing, Transcript) for thing in gc.get_objects())


def _looked_ahead(main: list[Entry], first: int) -> list[Entry]:
    return [
        entry
        for entry in main[first:]
        if entry.is_compact_boundary
        or (entry.type == "assistant" and not entry.is_synthetic_api_error)
    ]


def test_the_replay_lets_the_loaded_transcript_go_and_reports_the_same(
    session_2_1: Path,
) -> None:
    expected = replay_session(load_transcript(session_2_1), _options()).to_dict(series=True)
    alive = _transcripts_alive()
    transcript = load_transcript(session_2_1)
    recording = ReplayRecording.of(transcript)
    assert recording.holds_transcript
    del transcript
    assert _transcripts_alive() == alive + 1
    held: list[int] = []

    def progress(done: int, total: int) -> None:
        held.append(_transcripts_alive() - alive)

    report = replay_session(recording, _options(), progress=progress)
    assert report.compactions >= 1
    assert held and set(held) == {0}  # let go before the first call was replayed
    assert not recording.holds_transcript
    assert report.to_dict(series=True) == expected


def test_the_future_keeps_only_the_boundaries_and_responses(session_2_1: Path) -> None:
    main = load_transcript(session_2_1).main_thread()
    future = RecordedFuture.of(main)
    responses = [entry for entry in main if entry.type == "assistant"]
    boundaries = [entry for entry in main if entry.is_compact_boundary]
    assert len(future.entries) == len(responses) + len(boundaries) == 10
    assert len(future.entries) < len(main)  # prompts, results and meta records are let go
    assert [main[position] for position in future.positions] == _looked_ahead(main, 0)
    for first in range(len(main) + 1):
        assert len(future.after(first)) == len(_looked_ahead(main, first))
        for turns in (1, 2, 30, None):
            assert used_in_turns(future.after(first), turns) == used_in_turns(main[first:], turns)


def test_the_future_keeps_ids_and_tool_calls_not_whole_records(session_2_1: Path) -> None:
    main = load_transcript(session_2_1).main_thread()
    future = RecordedFuture.of(main)
    calls = 0
    for position, slim in zip(future.positions, future.entries, strict=True):
        whole = main[position]
        assert (slim.type, slim.uuid, slim.message_id) == (whole.type, whole.uuid, whole.message_id)
        assert set(slim.data) <= {"type", "subtype", "uuid", "isApiErrorMessage", "message"}
        kept = slim.content
        assert isinstance(kept, list) and all(block["type"] == "tool_use" for block in kept)
        whole_calls = [
            b for b in whole.content if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        assert kept == whole_calls
        calls += len(kept)
    assert calls > 0
    texts = [b for e in main if e.type == "assistant" for b in e.content if b.get("type") == "text"]
    assert texts  # the fixture's responses say something, which the future does not keep


def test_the_future_stops_at_a_boundary_as_the_continuation_does() -> None:
    boundary = Entry({"type": "system", "subtype": "compact_boundary", "content": ""})
    prompt = Entry.user("go")
    answer = Entry.assistant([{"type": "text", "text": "done"}], message_id="m1")
    main = [prompt, answer, boundary, prompt, answer]
    future = RecordedFuture.of(main)
    assert future.positions == (1, 2, 4)
    assert [entry.type for entry in future.after(2)] == ["system", "assistant"]
    assert future.after(2)[0].is_compact_boundary
    assert [entry.message_id for entry in future.after(3)] == ["m1"]
    assert list(future.after(5)) == []


def test_a_recording_let_go_cannot_be_simulated_on_another_model(session_2_1: Path) -> None:
    recording = ReplayRecording.of(load_transcript(session_2_1))
    table = load_model_table()
    first = table.get("claude-sonnet-4-5")
    assert recording.fidelity(first) is recording.fidelity(first)
    with pytest.raises(ConfigError, match=r"ReplayRecording\.of\(transcript\)"):
        recording.fidelity(table.get("claude-opus-4-1"))
