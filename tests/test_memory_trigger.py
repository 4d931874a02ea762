"""The session-memory trigger's incremental `ProgressTracker` equals `progress_since`.

On generated views (appends, compactions, rewinds, copies, pointer moves, repeated uuids,
responses split over several lines, synthetic API errors) after every step, and on every turn
of replayed Claude Code sessions of the corpus; and it reads only the entries appended since
the previous call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_files
from unbounded.compaction import memory_trigger
from unbounded.compaction.memory_trigger import ProgressTracker, UpdateProgress, progress_since
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.entries import SYNTHETIC_MODEL, Entry, create_compact_boundary
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

UUIDS = st.one_of(st.none(), st.sampled_from(["u1", "u2", "u3", "u4", "u5", "u6"]))
"""Few uuids, so that they repeat (a pointer's uuid may appear again later)."""


def _entry(kind: str, uuid: str | None, text: str, calls: int, message_id: str | None) -> Entry:
    data: dict[str, Any] = {"type": kind}
    if uuid is not None:
        data["uuid"] = uuid
    if kind == "user":
        data["message"] = {"role": "user", "content": text}
    elif kind in ("assistant", "error"):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        blocks += [
            {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"p": text}}
            for n in range(calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": blocks}
        if message_id is not None:
            message["id"] = message_id
        data["type"] = "assistant"
        if kind == "error":  # a placeholder for an API error: never sent, never a response
            data["isApiErrorMessage"] = True
            message["model"] = SYNTHETIC_MODEL
        data["message"] = message
    else:  # a record that is not a message (tokens 0)
        data["type"] = "summary" if kind == "meta" else "system"
    return Entry(data)


entries = st.builds(
    _entry,
    st.sampled_from(["user", "assistant", "assistant", "error", "system", "meta"]),
    UUIDS,
    st.text(alphabet="ab c\n", max_size=40),
    st.integers(0, 3),
    st.one_of(st.none(), st.sampled_from(["m1", "m2", "m3"])),
)
STEPS = st.sampled_from(
    ["append", "append", "append", "compact", "rewind", "copy", "move_pointer", "check_twice"]
)


def _compacted(view: list[Entry], keep: int) -> list[Entry]:
    """A new view as a compaction leaves it: boundary, summary, the last `keep` entries."""
    summary = Entry(
        {
            "type": "user",
            "uuid": "summary",
            "isCompactSummary": True,
            "message": {"role": "user", "content": "summary"},
        }
    )
    return [create_compact_boundary("auto", 100), summary, *view[len(view) - keep :]]


def assert_same(tracker: ProgressTracker, view: Sequence[Entry], pointer: str | None) -> None:
    """The tracker's figures are the from-scratch ones."""
    assert tracker.progress(view, pointer) == progress_since(view, pointer)


@SETTINGS
@given(data=st.data(), start=st.lists(entries, max_size=6), steps=st.integers(1, 16))
def test_tracker_equals_progress_since_after_every_step(
    data: st.DataObject, start: list[Entry], steps: int
) -> None:
    tracker = ProgressTracker()
    view = list(start)
    pointer = data.draw(UUIDS)
    assert_same(tracker, view, pointer)
    for _ in range(steps):
        step = data.draw(STEPS)
        rescans, was_empty = tracker.rescans, not view
        if step == "compact" and view:
            view = _compacted(view, data.draw(st.integers(0, len(view))))
        elif step == "rewind" and view:  # the last entries go, new ones may follow
            del view[data.draw(st.integers(0, len(view) - 1)) :]
            view += data.draw(st.lists(entries, max_size=3))
        elif step == "copy":  # a copy of the same entries (update_now snapshots the view)
            view = list(view)
        elif step == "move_pointer":
            known = [e.uuid for e in view if e.uuid]
            pointer = data.draw(st.sampled_from([None, "gone", *known]))
        elif step == "check_twice":
            assert_same(tracker, view, pointer)
        else:
            view += data.draw(st.lists(entries, min_size=1, max_size=4))
        assert_same(tracker, view, pointer)
        if step in ("append", "copy", "check_twice") and not was_empty:
            assert tracker.rescans == rescans, "an appended or unchanged view is not rescanned"


def _long_view(turns: int) -> list[Entry]:
    view: list[Entry] = []
    for n in range(turns):
        view.append(_entry("user", f"user-{n}", "a result " * 20, 0, None))
        view.append(_entry("assistant", f"reply-{n}", "text", 1, f"response-{n}"))
    return view


def test_each_call_reads_only_the_appended_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first scan, a call estimates the tokens of the new entries only, and finds
    the last response and last uuid without walking back over the view."""
    counted: list[Entry] = []
    real_tokens = memory_trigger.entry_tokens

    def counting(entry: Entry) -> int:
        counted.append(entry)
        return real_tokens(entry)

    monkeypatch.setattr(memory_trigger, "entry_tokens", counting)
    tracker = ProgressTracker()
    view = _long_view(1_000)
    tracker.progress(view, None)
    assert len(counted) == len(view) and tracker.rescans == 1
    counted.clear()
    for n in range(1_000, 1_010):
        new = _long_view(n + 1)[-2:]
        view += new
        progress = tracker.progress(view, None)
        assert counted == new
        counted.clear()
        assert progress.last_uuid == f"reply-{n}" and progress.last_turn_tool_calls == 1
    assert tracker.rescans == 1
    # The pointer moves (an update covered everything): one scan, of what follows it only.
    tracker.progress(view, view[-1].uuid)
    assert counted == [] and tracker.rescans == 2
    assert tracker.progress(view, view[-1].uuid) == progress_since(view, view[-1].uuid)


def test_a_rewritten_view_is_scanned_again() -> None:
    """A compaction (new first entry), a rewind (shorter, or the watermark's entry replaced)."""
    tracker = ProgressTracker()
    view = _long_view(5)
    assert_same(tracker, view, "reply-1")
    view = _compacted(view, 3)
    assert_same(tracker, view, "reply-1")
    assert tracker.rescans == 2
    view = view[:-1]
    assert_same(tracker, view, "reply-1")
    view = [*view[:-1], _entry("assistant", "other", "x", 0, "m9"), *_long_view(1)]
    assert_same(tracker, view, "reply-1")
    assert tracker.rescans == 4


def _claude_code_sessions() -> list[Any]:
    return [
        pytest.param(path, id=path.stem[:40])
        for path in corpus_files("*.jsonl")
        if load_transcript(path).format == "claude-code"
    ]


@pytest.mark.parametrize("path", _claude_code_sessions())
def test_every_replayed_turn_tracks_as_from_scratch(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At every turn of a replayed Claude Code session (session memory on, with its updates,
    compactions and pointer moves), the tracker's figures are `progress_since`'s."""
    real_progress = ProgressTracker.progress
    checked: list[UpdateProgress] = []

    def checked_progress(
        self: ProgressTracker, view: Sequence[Entry], updated_through: str | None
    ) -> UpdateProgress:
        progress = real_progress(self, view, updated_through)
        assert progress == progress_since(view, updated_through)
        checked.append(progress)
        return progress

    monkeypatch.setattr(ProgressTracker, "progress", checked_progress)
    trackers: list[ProgressTracker] = []
    real_init = SessionMemory.__init__

    def keep_tracker(self: SessionMemory, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        trackers.append(self._tracker)

    monkeypatch.setattr(SessionMemory, "__init__", keep_tracker)
    report = replay_session(load_transcript(path), ReplayOptions(policy=Policy(), baselines=False))
    assert len(trackers) == 1
    assert len(checked) >= report.calls, "the trigger is checked at every turn"
    if report.calls > 20:  # incremental for real: most calls only add the new entries
        assert trackers[0].rescans < len(checked) / 2


def test_the_trigger_benchmark_reports_its_figures() -> None:
    """`benchmarks/memory_trigger.py` (listed in the README) runs as a user runs it and prints
    its four figures; nothing here is timed against a bound."""
    import json
    import math
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "memory_trigger.py"
    result = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert sorted(figures) == sorted(
        [
            "trigger_us_at_200",
            "from_scratch_us_at_200",
            "trigger_us_at_3000",
            "from_scratch_us_at_3000",
        ]
    )
    assert all(math.isfinite(value) and value > 0 for value in figures.values())
