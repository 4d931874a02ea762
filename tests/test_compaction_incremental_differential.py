"""Compactions from state kept turn by turn equal compactions computed from scratch.

A session keeps what its compactions read of the whole history up to date on every turn
(`RecordedState.advance`: the working state the rehydrator reads, `ViewFolds` over the view),
and its summaries take the transcript's own view. These tests drive seeded random sessions
(file reads, writes and edits, todo lists, skills, images or none, unchanged-file stubs, clearing
after long pauses, replies discarded and recorded again, reopening from disk, manual full and partial
compactions, several automatic compactions) twice: once as the session runs, once with every
compaction computed from scratch (the view derived again from the entries, the working state
read again from the first entry). Every summary request, every prepared request and every
record of the transcript (boundaries, summaries, re-injected attachments, receipts) must be
the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import shutil
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from summaries import nine_section_summary

from unbounded import session_transcript
from unbounded.caching import breakpoints
from unbounded.caching.breakpoints import CacheBreakpointPlanner, plan_cache_breakpoints
from unbounded.compaction import auto, context, glue
from unbounded.compaction.view_folds import ViewFolds
from unbounded.errors import CompactionError, ConfigError
from unbounded.model import entries as entries_module
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig

SUMMARY = nine_section_summary("build it", analysis=False)
CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=60_000,
)
TURNS = 70


class RecordingSummarizer:
    """Answers every summary request with the same summary and keeps each request's bytes."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        self.requests.append(orjson.dumps(request, option=orjson.OPT_SORT_KEYS))
        return ModelResponse(
            [{"type": "text", "text": SUMMARY}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m"
        )


class Clock:
    """Two seconds a reading, and now and then a long pause (clearing by time)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now

    def pause(self) -> None:
        self.now += timedelta(hours=2)


def _tool_call(rng: random.Random, turn: int, repo: Path) -> dict[str, Any]:
    path = str(repo / f"module_{rng.randrange(30)}.py")
    kind = rng.choice(["Read", "Read", "Write", "Edit", "Bash", "TodoWrite", "Skill", "Glob"])
    if kind == "Read":
        tool_input: dict[str, Any] = {"file_path": path}
    elif kind == "Write":
        tool_input = {"file_path": path, "content": f"print({turn})\n" * rng.randint(1, 30)}
    elif kind == "Edit":
        tool_input = {"file_path": path, "old_string": "print", "new_string": "log"}
    elif kind == "TodoWrite":
        tool_input = {"todos": [{"content": f"step {turn}", "status": "in_progress"}]}
    elif kind == "Skill":
        tool_input = {"skill": f"skill-{rng.randrange(3)}"}
    else:
        tool_input = {"command": f"make step{turn}"}
    return {"type": "tool_use", "id": f"t{turn}", "name": kind, "input": tool_input}


def _result(rng: random.Random, call: dict[str, Any], images: bool) -> dict[str, Any]:
    roll = rng.random()
    content: Any
    if call["name"] == "Read" and roll < 0.2:
        content = "File unchanged since last read. Refer to the earlier read."
    elif images and roll < 0.1:
        content = [
            {"type": "text", "text": "a screenshot"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]
    else:
        content = "".join(f"{n:6}\u2192line {n} of {call['id']}\n" for n in range(rng.randint(50, 900)))
    return {"type": "tool_result", "tool_use_id": call["id"], "content": content}


def _reply(rng: random.Random, turn: int, repo: Path, request: ProviderRequest) -> ModelResponse:
    call = _tool_call(rng, turn, repo)
    size = len(orjson.dumps(request["messages"])) // 4
    return ModelResponse(
        [{"type": "text", "text": f"Turn {turn}."}, call],
        "tool_use",
        {"input_tokens": 50, "cache_read_input_tokens": size, "output_tokens": 40},
        "claude-sonnet-4-5",
        id=f"msg_{turn}",
    )


def _pivot(rng: random.Random, view: Sequence[Entry]) -> str | None:
    users = [e.uuid for e in view if e.type == "user" and isinstance(e.content, str) and e.uuid]
    return rng.choice(users) if users else None


async def _drive(seed: int, folder: Path, repo: Path) -> tuple[list[bytes], list[bytes], list[bytes]]:
    rng = random.Random(seed)
    summarizer = RecordingSummarizer()
    clock = Clock()
    source = "transcript" if seed % 2 else "disk"
    options: dict[str, Any] = {
        "policy": Policy(),
        "summarizer": summarizer,
        "clock": clock,
        "rehydrate_from": source,
        "allowed_roots": [str(repo)] if source == "disk" else None,
    }
    session = Session.open(folder, CONFIG, **options)
    session.add_user("Please build the thing.")
    prepared: list[bytes] = []
    for turn in range(TURNS):
        if rng.random() < 0.06:
            clock.pause()
        request = await session.prepare()
        prepared.append(orjson.dumps(request, option=orjson.OPT_SORT_KEYS))
        reply = _reply(rng, turn, repo, request)
        session.record(reply)
        if rng.random() < 0.08:  # a reply taken back and answered again
            session.discard_last_reply()
            reply = _reply(rng, turn, repo, request)
            session.record(reply)
        session.add_tool_results([_result(rng, reply.content[1], images=seed % 3 != 0)])
        roll = rng.random()
        if roll < 0.15:
            session.add_user(f"Now task {turn}.")
        elif roll < 0.2:  # reopened from its folder: state read again from the stored records
            session.close()
            session = Session.open(folder, CONFIG, **options)
        elif roll < 0.22:  # a manual full compaction, outside the turn's steps
            await session.compact(instructions="keep the file names")
        elif roll < 0.26:
            pivot = _pivot(rng, session.view)
            if pivot is not None:
                # Refused the same way on both paths, when it is (the transcript says so).
                with contextlib.suppress(ConfigError, CompactionError):
                    await session.compact(pivot=pivot, direction=rng.choice(["up_to", "from"]))
    records = [orjson.dumps(entry.data, option=orjson.OPT_SORT_KEYS) for entry in session.entries]
    session.close()
    return summarizer.requests, prepared, records


def _from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every compaction computed from scratch: the view derived again from the entries and
    the working state read from the first entry, nothing kept from earlier turns."""
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
    # The transcript's view derived across a boundary from the whole history.
    real_derive = session_transcript.messages_after_compact_boundary
    monkeypatch.setattr(
        session_transcript,
        "messages_after_compact_boundary",
        lambda entries, **_: real_derive(entries),
    )
    # The summary request's markers placed from scratch, not from the session planner's work.
    monkeypatch.setattr(
        CacheBreakpointPlanner,
        "plan_fork",
        lambda self, request, **options: plan_cache_breakpoints(request, **options),
    )


def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """uuids and timestamps the same on both runs (counted from 1 on each)."""
    counter = iter(range(1, 1 << 30))
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(counter)))
    monkeypatch.setattr(entries_module, "now_iso", lambda: "2026-01-01T00:00:00.000Z")


def _run(
    seed: int, folder: Path, repo: Path, patch: Callable[[pytest.MonkeyPatch], None] | None
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    shutil.rmtree(folder, ignore_errors=True)  # the same folder on every run: its path is
    with pytest.MonkeyPatch.context() as monkeypatch:  # written in the summaries
        _deterministic(monkeypatch)
        if patch is not None:
            patch(monkeypatch)
        return asyncio.run(_drive(seed, folder, repo))


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for n in range(30):
        (repo / f"module_{n}.py").write_text(f"print('module {n}')\n" * 40)
    return repo


def _turn_limit(limit: int) -> Callable[[pytest.MonkeyPatch], None]:
    """The kept path, reading at most `limit` entries a turn (a reopened session catches up
    over several turns, and a compaction reads what is left)."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(glue, "TURN_READ_LIMIT", limit)

    return patch


@pytest.mark.parametrize(("seed", "limit"), [(1, None), (2, None), (3, None), (4, None), (5, None), (6, None), (7, 3), (8, 3)])
def test_kept_state_compacts_as_from_scratch(tmp_path: Path, seed: int, limit: int | None) -> None:
    repo = _repo(tmp_path)
    kept = _run(seed, tmp_path / "session", repo, None if limit is None else _turn_limit(limit))
    scratch = _run(seed, tmp_path / "session", repo, _from_scratch)
    summaries, prepared, records = kept
    assert len(summaries) >= 2  # several compactions happened
    assert sum(b'"compact_boundary"' in record for record in records) >= 2
    assert summaries == scratch[0]
    assert prepared == scratch[1]
    assert records == scratch[2]


def test_a_wrong_fold_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above fails when the kept folds go wrong (here: a view read from the
    start again is not started over), so it tests the rule and not only itself."""
    real_reset = ViewFolds._reset

    def keep_going(self: ViewFolds) -> None:
        if not hasattr(self, "tools"):
            real_reset(self)

    repo = _repo(tmp_path)
    scratch = _run(2, tmp_path / "session", repo, _from_scratch)
    with monkeypatch.context() as patched:
        patched.setattr(ViewFolds, "_reset", keep_going)
        wrong = _run(2, tmp_path / "session", repo, None)
    assert wrong[0] != scratch[0] or wrong[2] != scratch[2]


def test_a_stale_fork_plan_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary request reuses the session planner's unmarked messages only as far as they
    are the request's own: trusting all it kept (no comparison) changes the bytes."""

    def trusting(self: CacheBreakpointPlanner, request: ProviderRequest, **options: Any) -> Any:
        messages = list(request["messages"])
        done, counts, relative = self._unmarked
        same = min(len(done), len(messages))
        tail, tail_counts = breakpoints._unmarked_messages(messages[same:])
        unmarked = (
            [*done[:same], *tail],
            [*counts[:same], *tail_counts],
            [*relative[: same + 1], *list(itertools.accumulate(tail_counts, initial=relative[same]))[1:]],
        )
        return breakpoints._plan(
            request,
            unmarked,
            previous_message_breakpoint=None,
            lookback_blocks=breakpoints.CACHE_LOOKBACK_BLOCKS,
            max_breakpoints=breakpoints.MAX_CACHE_BREAKPOINTS,
            enable_prompt_caching=True,
            **options,
        )

    repo = _repo(tmp_path)
    scratch = _run(2, tmp_path / "session", repo, _from_scratch)
    with monkeypatch.context() as patched:
        patched.setattr(CacheBreakpointPlanner, "plan_fork", trusting)
        wrong = _run(2, tmp_path / "session", repo, None)
    assert wrong[0] != scratch[0]


def test_the_summary_request_is_planned_from_the_session_planner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's summary requests reuse its planner's work: the messages planned afresh
    for a compaction in the turn's steps are a few, not the whole history."""
    seen: list[int] = []
    real_plan_fork = CacheBreakpointPlanner.plan_fork
    real_unmarked = breakpoints._unmarked_messages

    def plan_fork(self: CacheBreakpointPlanner, request: ProviderRequest, **options: Any) -> Any:
        def counted(messages: Any) -> Any:
            seen.append(len(messages))
            return real_unmarked(messages)

        with monkeypatch.context() as patched:
            patched.setattr(breakpoints, "_unmarked_messages", counted)
            return real_plan_fork(self, request, **options)

    monkeypatch.setattr(CacheBreakpointPlanner, "plan_fork", plan_fork)
    summaries, _, _ = _run(1, tmp_path / "session", _repo(tmp_path), None)
    assert len(summaries) >= 2
    # After a reopen (a new planner) or a partial compaction the request is not the last
    # one grown: those plan more, from the first message that differs.
    assert sum(1 for count in seen if count <= 4) >= 2
