"""Concurrency: two processes on one session folder, and a session-memory update in flight
when compaction starts."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from unbounded import storage
from unbounded.compaction.memory_updaters import OfflineNotesUpdater
from unbounded.compaction.notes import missing_sections, parse_notes
from unbounded.errors import ConfigError, SessionLockedError
from unbounded.events import (
    CompactionFinished,
    Event,
    SessionMemoryUpdated,
    SessionMemoryWaitTimedOut,
)
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore
from unbounded.tokens.estimate import estimate_messages_tokens
from unbounded.transcripts.claude_code import read_claude_code

HELPERS = Path(__file__).resolve().parent / "helpers"
CONFIG = SessionConfig(model="claude-sonnet-4-5", system="sys", context_window=60_000)


# -- two processes, one folder ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def context() -> Any:
    if str(HELPERS) not in sys.path:
        sys.path.insert(0, str(HELPERS))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["unbounded.session", "pytest"])
    return context


@pytest.fixture
def holder(context: Any, tmp_path: Path) -> Iterator[tuple[Path, Any, Any]]:
    """Another process holding tmp_path/s's lock: (folder, its end of the pipe, the process)."""
    import session_child

    folder = tmp_path / "s"
    mine, theirs = context.Pipe()
    process = context.Process(target=session_child.hold_lock, args=(str(folder), theirs))
    process.start()
    theirs.close()
    assert mine.poll(60) and mine.recv()[0] == "locked"  # a hang guard: ends at the message
    yield folder, mine, process
    if process.is_alive():
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    mine.close()


class FakeClock:
    """Stands in for the store's time module (only there: patching the real one would stall
    multiprocessing's own waits): a sleep advances the clock, and each one is recorded."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_second_process_gets_a_clear_error_at_once(holder: tuple[Path, Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _, _ = holder
    clock = FakeClock()
    monkeypatch.setattr(storage, "time", clock)
    with pytest.raises(SessionLockedError, match=r"in use by another process.*wait="):
        FolderStore(folder)
    with pytest.raises(SessionLockedError):
        Session.open(folder, CONFIG, policy=Policy())
    assert clock.sleeps == []  # refused without waiting


def test_waiting_gives_up_after_the_timeout(holder: tuple[Path, Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _, _ = holder
    clock = FakeClock()
    monkeypatch.setattr(storage, "time", clock)
    with pytest.raises(SessionLockedError, match=r"after waiting 0\.3 s"):
        FolderStore(folder, wait=0.3)
    # polled every LOCK_POLL_SECONDS until exactly the wait had passed, then gave up (float
    # rounding of the clock may leave one last sliver of a sleep, never a whole extra poll)
    full_polls = [s for s in clock.sleeps if s == pytest.approx(storage.LOCK_POLL_SECONDS)]
    assert sum(clock.sleeps) == pytest.approx(0.3) and len(full_polls) == round(0.3 / storage.LOCK_POLL_SECONDS)
    assert len(clock.sleeps) - len(full_polls) <= 1
    assert all(0 < s <= storage.LOCK_POLL_SECONDS for s in clock.sleeps)


def test_waiting_gets_the_lock_once_the_other_process_lets_go(holder: tuple[Path, Any, Any]) -> None:
    folder, pipe, _ = holder
    threading.Timer(0.3, pipe.send, args=("release",)).start()
    with FolderStore(folder, wait=60) as store:  # generous: a loaded machine may be slow to hand over
        acquired = time.monotonic()
        assert store.locked
    assert pipe.poll(30)
    _, released = pipe.recv()
    assert acquired >= released  # it waited for the other process, then got the lock


def test_waiting_forever_and_a_lock_that_dies_with_its_process(holder: tuple[Path, Any, Any]) -> None:
    folder, _, process = holder
    threading.Timer(0.2, os.kill, args=(process.pid, signal.SIGKILL)).start()
    with FolderStore(folder, wait=float("inf")) as store:  # the kernel drops a dead process's lock
        assert store.locked
    process.join(30)
    assert process.exitcode == -signal.SIGKILL  # the lock came free because its holder died


def test_a_read_only_store_reads_while_another_process_writes(holder: tuple[Path, Any, Any]) -> None:
    folder, _, _ = holder
    reader = FolderStore(folder, lock=False)
    assert reader.load().entries == [] and not reader.locked
    with pytest.raises(SessionLockedError):
        reader.recover()


def test_two_stores_in_one_process_also_exclude_each_other(tmp_path: Path) -> None:
    with FolderStore(tmp_path / "s"), pytest.raises(SessionLockedError):
        FolderStore(tmp_path / "s")
    with FolderStore(tmp_path / "s") as again:  # released on close
        assert again.locked


def test_bad_wait_values(tmp_path: Path) -> None:
    for wait in (-1.0, float("nan")):
        with pytest.raises(ConfigError):
            FolderStore(tmp_path / "s", wait=wait)


# -- session memory: an update in flight when compaction starts --------------------------------------


POLICY = Policy(
    session_memory_init_tokens=1_000,
    session_memory_min_tokens_between_updates=1_000,
    session_memory_keep_min_tokens=2_000,
    session_memory_keep_min_text_messages=2,
    session_memory_keep_max_tokens=6_000,
)
MARKER = "- written by the update that was in flight"


class GatedUpdater:
    """The offline updater, held at a gate until the test opens it; marks its notes."""

    name = "gated"
    offline = False

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.inner = OfflineNotesUpdater()
        self.finished_at: float | None = None

    async def update(self, job: Any) -> Any:
        await self.gate.wait()
        outcome = await self.inner.update(job)
        notes = parse_notes(outcome.notes or job.notes)
        for section in notes.sections:
            if section.title == "Current State":
                section.body.append(MARKER)
        self.finished_at = time.monotonic()
        return type(outcome)(notes=notes.render(), accepted=True, applied=1)


def step(session: Session, turn: int, size: int = 1_600) -> list[str]:
    """One tool call and its result; every few turns a final answer and a new request."""
    added = []
    session.append([Entry.assistant([{"type": "tool_use", "id": f"a{turn}", "name": "Bash", "input": {"command": f"make {turn}"}}], message_id=f"msg_{turn}")])
    added.append(str(session.add_tool_results([{"type": "tool_result", "tool_use_id": f"a{turn}", "content": "o" * size}]).uuid))
    if turn % 3 == 0:
        tokens = estimate_messages_tokens(session.messages)
        session.record(ModelResponse([{"type": "text", "text": f"Step {turn} is done."}], "end_turn", {"input_tokens": tokens, "output_tokens": 5}, "m"))
        added.append(str(session.add_user(f"Continue with step {turn + 1}.").uuid))
    return added


async def setup(folder: Path, wait: float) -> tuple[Session, Any, GatedUpdater, list[Event]]:
    """A session whose notes cover its first steps, with an update in flight (held at the gate)."""
    events: list[Event] = []
    gated = GatedUpdater()
    memory = SessionMemory(OfflineNotesUpdater(), background=True)
    session = Session.open(folder, CONFIG, policy=POLICY.with_changes(session_memory_wait_seconds=wait), events=events.append, extensions=[memory])
    session.add_user("Build the step runner.")
    for turn in range(12):
        step(session, turn)
    assert await memory.wait_for_update(30)  # background updates the steps started (a hang guard)
    await memory.update_now(session)
    assert MARKER not in (session.store.read_memory() or "")
    memory.updater = gated
    for turn in range(12, 15):
        step(session, turn)
    task = await memory.maybe_update(session)
    await asyncio.sleep(0.02)
    assert task is not None and memory.in_flight and not task.done()  # held at the gate
    return session, memory, gated, events


def consistent_on_disk(session: Session) -> None:
    """The transcript reloads; every boundary is followed by its summary; the view is valid."""
    assert isinstance(session.store, FolderStore)
    loaded = read_claude_code(session.store.transcript_file)
    entries = loaded.entries
    for index, entry in enumerate(entries):
        if entry.is_compact_boundary:
            assert entries[index + 1].is_compact_summary
    validate_request(normalize_messages(session.view))
    notes = session.store.read_memory() or ""
    assert missing_sections(notes) == []


def test_compaction_waits_for_an_update_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        # The wait is far longer than the gate's 0.1 s: a stalled loop must not end it first.
        session, _, gated, events = await setup(tmp_path / "s", wait=30.0)
        asyncio.get_running_loop().call_later(0.1, gated.gate.set)
        assert not gated.gate.is_set() and gated.finished_at is None  # the update is in flight
        result = await session.auto_compact()
        assert result is not None and result.summarizer == "session_memory"
        updated = next(i for i, e in enumerate(events) if isinstance(e, SessionMemoryUpdated) and e.updater == "gated")
        finished = next(i for i, e in enumerate(events) if isinstance(e, CompactionFinished))
        assert updated < finished  # the update landed before the compaction was written
        assert MARKER in str(result.summary_messages[0].content)  # and the summary used it
        assert not any(isinstance(e, SessionMemoryWaitTimedOut) for e in events)
        consistent_on_disk(session)

    asyncio.run(scenario())


def test_compaction_proceeds_after_the_wait_and_the_late_update_stays_consistent(tmp_path: Path) -> None:
    async def scenario() -> None:
        session, memory, gated, events = await setup(tmp_path / "s", wait=0.05)
        task = await memory.maybe_update(session)  # the update in flight (one at a time)
        assert task is not None
        result = await session.auto_compact()
        assert result is not None and result.summarizer == "session_memory"
        assert any(isinstance(e, SessionMemoryWaitTimedOut) for e in events)
        assert MARKER not in str(result.summary_messages[0].content)  # the notes as they were
        assert memory.in_flight and gated.finished_at is None
        kept = {e.uuid for e in result.messages_to_keep}
        gated.gate.set()  # the update lands after the compaction
        await task
        assert MARKER in (session.store.read_memory() or "")
        # The pointer it set names a message still in the view (one the compaction kept), so
        # the next compaction keeps everything after it: nothing falls between notes and view.
        pointer = memory.updated_through
        assert pointer in kept and pointer in {e.uuid for e in session.view}
        consistent_on_disk(session)
        added = []
        for turn in range(15, 21):
            added += step(session, turn)
        uncovered = [e.uuid for e in session.view[[e.uuid for e in session.view].index(pointer) + 1 :]]
        memory.updater = OfflineNotesUpdater()
        second = await session.auto_compact()
        assert second is not None and second.summarizer == "session_memory"
        still_kept = {e.uuid for e in second.messages_to_keep}
        # what the notes did not cover when the second compaction started is kept verbatim
        covered_now = memory.updated_through
        for uuid in uncovered:
            assert uuid in still_kept or uuid == covered_now or uuid in _covered_by(session, covered_now)
        consistent_on_disk(session)
        request = await session.prepare()
        validate_request(request["messages"])

    asyncio.run(scenario())


def _covered_by(session: Session, pointer: str | None) -> set[str]:
    """uuids up to and including the pointer, in file order (what the notes cover)."""
    uuids: set[str] = set()
    for entry in session.entries:
        if entry.uuid:
            uuids.add(entry.uuid)
        if entry.uuid == pointer:
            return uuids
    return set()


def test_a_full_compaction_while_an_update_is_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        events: list[Event] = []
        gated = GatedUpdater()
        memory = SessionMemory(gated, background=True)
        session = Session.open(tmp_path / "s", CONFIG, policy=POLICY.with_changes(session_memory_wait_seconds=0.05), events=events.append, extensions=[memory])
        session.add_user("Build the step runner.")
        for turn in range(14):
            step(session, turn)
        task = await memory.maybe_update(session)  # the first notes, still in flight
        await asyncio.sleep(0.02)
        assert task is not None and not task.done()
        step(session, 14)  # one more round: the compaction keeps it (the turn's messages)
        result = await session.auto_compact()  # no notes yet: the summary call (extractive)
        assert result is not None and result.summarizer == "extractive"
        gated.gate.set()
        await task
        # the late pointer names a message the compaction summarized: the notes are taken to
        # cover nothing of the new view, so nothing after the boundary is dropped later
        assert memory.updated_through not in {e.uuid for e in session.view}
        assert memory.progress(session).start <= 2
        consistent_on_disk(session)
        for turn in range(15, 18):
            step(session, turn)
        validate_request((await session.prepare())["messages"])

    asyncio.run(scenario())
