"""Review of the Session's incremental compaction inputs (i33a + i33b).

Two claims of that work, checked here:
- a compaction from the state kept turn by turn writes the same records as one computed from
  scratch (the view derived again from the entries), for any session: here a host that
  appends a transcript's records one at a time, so a partial compaction's boundary arrives
  before the summary its kept segment is anchored to;
- a session with automatic compaction off pays nothing per turn for it: no fold over the
  view or the working state is advanced on its turns.
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from summaries import nine_section_summary

from unbounded.compaction import auto, context, glue
from unbounded.compaction.rehydrate import WorkingStateReader
from unbounded.compaction.view_folds import ViewFolds
from unbounded.model import entries as entries_module
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig

CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=200_000,
)
SUMMARY = nine_section_summary("build it", analysis=False)


class Summarizer:
    """Answers every summary request with the same summary."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        return ModelResponse(
            [{"type": "text", "text": SUMMARY}],
            "end_turn",
            {"input_tokens": 1, "output_tokens": 1},
            "m",
        )


class Clock:
    """Two seconds a reading, from the same start on every run."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now


async def _turns(session: Session, count: int, tag: str) -> None:
    for turn in range(count):
        await session.prepare()
        call = {
            "type": "tool_use",
            "id": f"{tag}{turn}",
            "name": "Bash",
            "input": {"command": f"ls {tag}{turn}"},
        }
        session.record(
            ModelResponse(
                [{"type": "text", "text": f"turn {tag}{turn}"}, call],
                "tool_use",
                {"input_tokens": 10, "output_tokens": 1},
                "claude-sonnet-4-5",
                id=f"msg_{tag}{turn}",
            )
        )
        session.add_tool_results(
            [{"type": "tool_result", "tool_use_id": call["id"], "content": "out " * 30}]
        )
        session.add_user(f"next {tag}{turn}")


def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    counter: Iterator[int] = iter(range(1, 1 << 30))
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(counter)))
    monkeypatch.setattr(entries_module, "now_iso", lambda: "2026-01-01T00:00:00.000Z")


def _from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every compaction computed as before the change: the view derived from the entries."""
    real_start = auto.start_summary
    real_rehydrator_for = glue.rehydrator_for

    async def start_summary(*args: Any, **kwargs: Any) -> Any:
        kwargs["view"], kwargs["folds"] = None, None
        return await real_start(*args, **kwargs)

    def rehydrator_for(*args: Any, **kwargs: Any) -> Any:
        kwargs["recorded"] = None
        return real_rehydrator_for(*args, **kwargs)

    monkeypatch.setattr(auto, "start_summary", start_summary)
    monkeypatch.setattr(context, "rehydrator_for", rehydrator_for)


async def _mirrored_then_compacted(folder: Path) -> list[bytes]:
    """A session with a partial (up_to) compaction, its records appended one at a time to a
    second session (a host mirroring a transcript line by line), which then compacts."""
    policy = Policy(auto_compact_enabled=False)
    clock = Clock()
    first = Session.open(folder / "a", CONFIG, summarizer=Summarizer(), policy=policy, clock=clock)
    first.add_user("start")
    await _turns(first, 6, "a")
    prompts = [e.uuid for e in first.view if e.type == "user" and isinstance(e.content, str)]
    await first.compact(pivot=prompts[3], direction="up_to")
    records = [copy.deepcopy(entry.data) for entry in first.entries]
    first.close()
    second = Session.open(folder / "b", CONFIG, summarizer=Summarizer(), policy=policy, clock=clock)
    for data in records:
        second.append([Entry(data)])
    await _turns(second, 3, "b")
    await second.compact()
    out = [orjson.dumps(entry.data, option=orjson.OPT_SORT_KEYS) for entry in second.entries]
    second.close()
    return out


def test_mirrored_partial_compaction_compacts_as_from_scratch(tmp_path: Path) -> None:
    """The boundary of an up_to compaction appended before its summary: the session's view
    then lacks the kept segment that the entries derive (the anchor was not there yet). The
    old path summarized the derived view; the kept view must give the same records
    (`messagesSummarized`, the facts ledger in the summary, the receipt)."""
    runs = []
    for patch in (None, _from_scratch):
        with pytest.MonkeyPatch.context() as monkeypatch:
            _deterministic(monkeypatch)
            if patch is not None:
                patch(monkeypatch)
            # The same folder on both runs: its path is written in the summaries.
            runs.append(asyncio.run(_mirrored_then_compacted(tmp_path / "s")))
            shutil.rmtree(tmp_path / "s")
    kept, scratch = runs
    assert sum(b'"compact_boundary"' in record for record in kept) == 2
    assert kept == scratch


class _Counted:
    """Counts the records the per-turn folds read (`ViewFolds`, `WorkingStateReader`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = 0
        for cls in (ViewFolds, WorkingStateReader):
            real = cls._feed

            def feed(reader: Any, *args: Any, _real: Any = real) -> None:
                self.read += 1
                _real(reader, *args)

            monkeypatch.setattr(cls, "_feed", feed)


async def _plain_turns(folder: Path, policy: Policy) -> None:
    session = Session.open(folder, CONFIG, policy=policy)
    session.add_user("start")
    await _turns(session, 20, "t")
    session.close()


@pytest.mark.parametrize(
    "policy",
    [Policy(auto_compact_enabled=False), Policy(compact_enabled=False)],
    ids=["auto-off", "compaction-off"],
)
def test_no_automatic_compaction_reads_nothing_per_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: Policy
) -> None:
    """Without automatic compaction no turn compacts: nothing is read ahead for it (and
    nothing is kept per record: with compaction off, never released)."""
    counted = _Counted(monkeypatch)
    asyncio.run(_plain_turns(tmp_path / "off", policy))
    assert counted.read == 0


def test_automatic_compaction_reads_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control of the test above: with automatic compaction on, the turns read ahead."""
    counted = _Counted(monkeypatch)
    asyncio.run(_plain_turns(tmp_path / "on", Policy()))
    assert counted.read > 0


def test_a_mirrored_anchor_splices_the_kept_messages_in_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view is rebuilt when the awaited anchor arrives, and only then: a record that is not
    the anchor, appended while it is awaited, is appended to the view as any record is."""
    from unbounded.model.entries import messages_after_compact_boundary
    from unbounded.session_transcript import SessionTranscript

    async def partial() -> list[dict[str, Any]]:
        policy = Policy(auto_compact_enabled=False)
        first = Session.open(tmp_path / "a", CONFIG, summarizer=Summarizer(), policy=policy)
        first.add_user("start")
        await _turns(first, 6, "a")
        prompts = [e.uuid for e in first.view if e.type == "user" and isinstance(e.content, str)]
        await first.compact(pivot=prompts[3], direction="up_to")
        records = [copy.deepcopy(entry.data) for entry in first.entries]
        first.close()
        return records

    records = asyncio.run(partial())
    at = next(i for i, data in enumerate(records) if data.get("subtype") == "compact_boundary")
    anchor = records[at]["compactMetadata"]["preservedSegment"]["anchorUuid"]
    assert records[at + 1]["uuid"] == anchor  # the summary follows its boundary
    extras = []
    for name in ("not-the-anchor-1", "not-the-anchor-2"):
        extra = copy.deepcopy(next(d for d in records if d.get("type") == "user"))
        extra["uuid"], extra["parentUuid"] = name, None
        extras.append(extra)

    rebuilt = []
    real = SessionTranscript.rebuild_view

    def counted(self: SessionTranscript) -> None:
        rebuilt.append(len(self.entries))
        real(self)

    monkeypatch.setattr(SessionTranscript, "rebuild_view", counted)
    policy = Policy(auto_compact_enabled=False)
    second = Session.open(tmp_path / "b", CONFIG, summarizer=Summarizer(), policy=policy)
    for data in records[:at]:
        second.append([Entry(copy.deepcopy(data))])
    # The boundary with a record after it in one batch: the view's first record is the
    # boundary, its last is not.
    second.append([Entry(copy.deepcopy(records[at])), Entry(extras[0])])
    after_boundary = len(rebuilt)
    second.append([Entry(extras[1])])
    assert len(rebuilt) == after_boundary  # not the anchor: appended, no rebuild
    second.append([Entry(copy.deepcopy(records[at + 1]))])
    assert len(rebuilt) == after_boundary + 1  # the anchor: the kept messages spliced in
    derived = messages_after_compact_boundary(second.entries)
    assert [e.uuid for e in second.transcript.view] == [e.uuid for e in derived]
    head = records[at]["compactMetadata"]["preservedSegment"]["headUuid"]
    assert head in [e.uuid for e in second.transcript.view]  # the kept messages are in
    for data in records[at + 2 :]:
        second.append([Entry(copy.deepcopy(data))])
    assert len(rebuilt) == after_boundary + 1  # nothing awaited any more
    derived = messages_after_compact_boundary(second.entries)
    assert [e.uuid for e in second.transcript.view] == [e.uuid for e in derived]
    second.close()
