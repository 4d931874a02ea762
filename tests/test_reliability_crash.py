"""Crash consistency: a child process driving a folder-backed Session is SIGKILLed at 50
seeded points (after random delays, at random steps, and in the middle of an append or of a
compaction's batch write). After every kill the transcript loads, holds each compaction
whole or not at all, duplicates and tears nothing in the middle, keeps every append that had
returned, and sets a torn tail aside in a private side file.

Also the deterministic pieces: torn-line recovery, an unfinished batch undone, an append
that fails in process truncated away, a read-only store that repairs nothing.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import stat
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson
import pytest

from unbounded import storage
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy
from unbounded.session import Session
from unbounded.storage import PENDING_NAME, FolderStore
from unbounded.transcripts.claude_code import read_claude_code

HELPERS = Path(__file__).resolve().parent / "helpers"
KILLS = 50
SEED = 50_8
PLAN = ("delay",) * 16 + ("step",) * 14 + ("torn",) * 10 + ("torn-batch",) * 10


@pytest.fixture(scope="module")
def session_child() -> Any:
    """The helper module; children are forked from a fork server that preloaded unbounded."""
    if str(HELPERS) not in sys.path:
        sys.path.insert(0, str(HELPERS))
    import session_child as module

    return module


def _side_files(folder: Path) -> set[Path]:
    return set(folder.glob("transcript.jsonl.torn-*"))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _drain(conn: Connection, until: Any, timeout: float) -> list[tuple[Any, ...]]:
    """Messages from the child until `until(message)` is true (or the timeout)."""
    seen: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not conn.poll(max(0.0, deadline - time.monotonic())):
            break
        try:
            message = conn.recv()
        except EOFError:
            break
        seen.append(message)
        if message[0] == "error":
            pytest.fail(f"the child failed: {message[1]}")
        if until(message):
            break
    return seen


def _rest(conn: Connection) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    while conn.poll(0):
        try:
            seen.append(conn.recv())
        except EOFError:
            break
    return seen


def check_folder(folder: Path, acked: list[str]) -> tuple[list[Entry], list[str]]:
    """Open with the lock (which repairs), then check every crash-consistency promise."""
    with FolderStore(folder) as store:
        transcript = store.load()
    if not (folder / "transcript.jsonl").exists():
        # Killed before its first append (a loaded machine may not run the child at all in a
        # "delay" round's few milliseconds): nothing was written, and nothing acknowledged.
        assert acked == [] and transcript.entries == []
        return [], list(transcript.warnings)
    raw = (folder / "transcript.jsonl").read_bytes()
    assert not raw or raw.endswith(b"\n"), "the transcript does not end on a whole line"
    again = read_claude_code(folder / "transcript.jsonl")  # every line parses, none skipped
    assert not again.warnings and again.skipped_lines == 0
    entries = transcript.entries
    uuids = [entry.uuid for entry in entries]
    assert len(set(uuids)) == len(uuids), "a record is duplicated"
    positions = {uuid: index for index, uuid in enumerate(uuids)}
    lost = [uuid for uuid in acked if uuid not in positions]
    assert not lost, f"appends that had returned were lost: {lost}"
    order = [positions[uuid] for uuid in acked]
    assert order == sorted(order)
    for index, entry in enumerate(entries):
        if entry.is_compact_boundary:
            assert index + 1 < len(entries), "a boundary without its summary"
            summary = entries[index + 1]
            assert summary.is_compact_summary and summary.data["parentUuid"] == entry.uuid
    assert not (folder / PENDING_NAME).exists()
    state = folder / "state" / "session.json"
    if state.exists():
        assert isinstance(orjson.loads(state.read_bytes()), dict)
    return entries, list(transcript.warnings)


def test_fifty_kills_leave_a_consistent_transcript(tmp_path: Path, session_child: Any) -> None:
    folder = tmp_path / "session"
    folder.mkdir(mode=0o700)
    context = multiprocessing.get_context("forkserver")
    # Python 3.11's fork server ignores sys.path when preloading: preload the package (the
    # helper module itself is small and imported per child). Each child also re-runs the main
    # script (pytest's), so pytest is preloaded too.
    context.set_forkserver_preload(["unbounded.session", "pytest"])
    rng = random.Random(SEED)
    plan = list(PLAN)
    rng.shuffle(plan)
    acked: list[str] = []
    figures: Counter[str] = Counter()
    for round_no, mode in enumerate(plan):
        target = {"delay": 0, "step": rng.randint(1, 40), "torn": rng.randint(1, 12), "torn-batch": rng.randint(1, 6)}[mode]
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=session_child.child, args=(str(folder), round_no, mode, target, sender))
        process.start()
        sender.close()
        messages = _drain(receiver, lambda m: m[0] == "opened", timeout=60)  # hang guards: each ends at its message
        assert messages and messages[-1][0] == "opened", f"round {round_no}: the child did not start"
        if mode == "delay":
            messages += _drain(receiver, lambda m: False, timeout=rng.uniform(0.0, 0.1))
        elif mode == "step":
            messages += _drain(receiver, lambda m, t=target: m[0] == "step" and m[1] >= t, timeout=60)  # type: ignore[misc]
        else:
            messages += _drain(receiver, lambda m: m[0] == "torn", timeout=60)
            assert messages[-1][0] == "torn", f"round {round_no}: no torn write happened"
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=30)
        assert process.exitcode == -signal.SIGKILL
        messages += _rest(receiver)
        receiver.close()
        acked += [m[1] for m in messages if m[0] == "acked"]
        steps = [m[2] for m in messages if m[0] == "step"]
        if steps and steps[-1] == "compaction-started":
            figures["killed during compaction"] += 1
        torn = next((m[1] for m in messages if m[0] == "torn"), None)

        before = _side_files(folder)
        entries, warnings = check_folder(folder, acked)
        created = _side_files(folder) - before
        for side in created:
            assert _mode(side) == 0o600
            assert any(str(side) in warning for warning in warnings)
        if torn is not None:
            figures[f"torn ({mode})"] += 1
            if mode == "torn-batch":
                assert [side.read_bytes() for side in created] == [torn], "the partial batch was not set aside whole"
                figures["batches undone"] += 1
            elif created:
                assert [side.read_bytes() for side in created] == [torn]
            else:  # only the newline was missing: the record was whole, and completed
                assert torn.endswith(b"}") and any("completed" in w for w in warnings)
        figures["side files"] += len(created)
        figures["kills"] += 1
        figures["records"] = len(entries)
        figures["boundaries"] = sum(1 for e in entries if e.is_compact_boundary)

    assert figures["kills"] == KILLS and figures["batches undone"] == 10
    # Kills inside a compaction's write are forced 10 times ("batches undone"); how many
    # random kills also land inside one depends on timing, so it is reported, not asserted.
    assert figures["boundaries"] >= 5
    # The session resumes after the last crash and its next request is valid.
    session = Session.open(folder, session_child.CONFIG, policy=Policy(), allowed_roots=[str(folder)])
    if session.entries and session.entries[-1].type == "assistant":
        session.add_tool_results([{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in session.entries[-1].content if b.get("type") == "tool_use"])
    validate_request(asyncio.run(session.prepare())["messages"])
    print(f"\ncrash: {dict(figures)}; acknowledged appends {len(acked)}, all present")


# -- the pieces, deterministically ---------------------------------------------------------------


def _line(text: str) -> bytes:
    return orjson.dumps(Entry.user(text).data) + b"\n"


def test_a_torn_last_line_is_set_aside_privately_and_later_appends_start_clean(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with FolderStore(folder) as store:
        store.append([Entry.user("one"), Entry.user("two")])
    path = folder / "transcript.jsonl"
    torn = _line("three")[:25]
    with path.open("ab") as handle:
        handle.write(torn)
    readonly = FolderStore(folder, lock=False)
    seen = readonly.load()  # a reader without the lock reports it and changes nothing
    assert len(seen.entries) == 2 and "torn last line" in seen.warnings[0]
    assert path.read_bytes().endswith(torn) and not _side_files(folder)
    with FolderStore(folder) as store:
        loaded = store.load()
        assert [e.content for e in loaded.entries] == ["one", "two"]
        (side,) = _side_files(folder)
        assert side.read_bytes() == torn and _mode(side) == 0o600
        assert str(side) in loaded.warnings[0] and "torn last line" in loaded.warnings[0]
        assert path.read_bytes().endswith(b"\n")
        store.append([Entry.user("four")])
    with FolderStore(folder) as store:
        assert [e.content for e in store.load().entries] == ["one", "two", "four"]


def test_a_whole_record_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    path = folder / "transcript.jsonl"
    with FolderStore(folder) as store:
        store.append([Entry.user("one")])
        with path.open("ab") as handle:
            handle.write(_line("two")[:-1])
        loaded = store.load()
    assert [e.content for e in loaded.entries] == ["one", "two"] and "completed" in loaded.warnings[0]
    assert path.read_bytes().endswith(b"}\n") and not _side_files(folder)


def test_an_unfinished_compaction_batch_is_undone_whole(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    path = folder / "transcript.jsonl"
    with FolderStore(folder) as store:
        store.append([Entry.user("before")])
    size = path.stat().st_size
    boundary = create_compact_boundary("auto", 1000)
    summary = Entry.user("Summary: ...", is_compact_summary=True, parent_uuid=boundary.uuid)
    batch = orjson.dumps(boundary.data) + b"\n" + orjson.dumps(summary.data) + b"\n"
    cut = len(orjson.dumps(boundary.data)) + 1 + 10  # the boundary whole, the summary torn
    (folder / PENDING_NAME).write_bytes(orjson.dumps({"offset": size, "lines": 2}))
    with path.open("ab") as handle:
        handle.write(batch[:cut])
    with FolderStore(folder) as store:
        loaded = store.load()
    assert [e.content for e in loaded.entries] == ["before"]
    assert not any(e.is_compact_boundary for e in loaded.entries)
    (side,) = _side_files(folder)
    assert side.read_bytes() == batch[:cut] and "cut short by a crash" in loaded.warnings[0]
    assert not (folder / PENDING_NAME).exists()


def test_a_finished_batch_with_a_stale_announcement_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    boundary = create_compact_boundary("auto", 1000)
    with FolderStore(folder) as store:
        store.append([Entry.user("before")])
        store.append([boundary, Entry.user("Summary", is_compact_summary=True, parent_uuid=boundary.uuid)])
        (folder / PENDING_NAME).write_bytes(orjson.dumps({"offset": 0, "lines": 2}))
        loaded = store.load()
    assert len(loaded.entries) == 3 and not loaded.warnings and not _side_files(folder)


def test_the_announcement_is_written_before_and_removed_after_a_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = storage.append_private

    def spy(path: Any, payload: bytes, *, fsync: bool = True) -> None:
        seen.append((tmp_path / "s" / PENDING_NAME).exists())
        real(path, payload, fsync=fsync)

    monkeypatch.setattr(storage, "append_private", spy)
    with FolderStore(tmp_path / "s") as store:
        store.append([Entry.user("single")])
        store.append([Entry.user("a"), Entry.user("b")])
    assert seen == [False, True] and not (tmp_path / "s" / PENDING_NAME).exists()


def test_an_append_that_fails_in_process_is_truncated_away(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "s"
    path = folder / "transcript.jsonl"
    with FolderStore(folder) as store:
        store.append([Entry.user("one")])
        size = path.stat().st_size

        def disk_full(target: Any, payload: bytes, *, fsync: bool = True) -> None:
            with open(target, "ab") as handle:
                handle.write(payload[:7])
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(storage, "append_private", disk_full)
        with pytest.raises(OSError):
            store.append([Entry.user("two"), Entry.user("three")])
        assert path.stat().st_size == size
        monkeypatch.undo()
        store.append([Entry.user("four")])
        assert [e.content for e in store.load().entries] == ["one", "four"]


def test_a_session_that_failed_to_append_keeps_memory_and_disk_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.session import SessionConfig

    session = Session.open(tmp_path / "s", SessionConfig(model="claude-sonnet-4-5"), policy=Policy())
    session.add_user("one")

    def broken(target: Any, payload: bytes, *, fsync: bool = True) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(storage, "append_private", broken)
    with pytest.raises(OSError):
        session.add_user("two")
    monkeypatch.undo()
    assert [e.content for e in session.entries] == ["one"]
    assert isinstance(session.store, FolderStore)
    assert [e.content for e in session.store.load().entries] == ["one"]


def test_appends_and_state_saves_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where durability is promised, fsync is called: the transcript after every append, the
    batch announcement, state files and their folder after every replace."""
    from unbounded import fileio
    from unbounded.session import SessionConfig

    synced: list[str] = []
    real = os.fsync

    def spy(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real(descriptor)

    monkeypatch.setattr(fileio.os, "fsync", spy)
    monkeypatch.setattr(storage.os, "fsync", spy)
    folder = (tmp_path / "s").resolve()
    session = Session.open(folder, SessionConfig(model="claude-sonnet-4-5"), policy=Policy())
    session.add_user("one")
    assert synced[0] == str(folder / "transcript.jsonl") and str(folder) in synced  # new file: folder too
    synced.clear()
    asyncio.run(session.prepare())
    session.record({"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 5, "output_tokens": 1}})
    assert str(folder / "transcript.jsonl") in synced
    assert any(path.startswith(str(folder / "state" / ".session.json.")) for path in synced)  # the temp file, before its rename
    assert str(folder / "state") in synced  # the rename itself
    synced.clear()
    boundary = create_compact_boundary("manual", 10)
    session.append([boundary, Entry.user("Summary", is_compact_summary=True, parent_uuid=boundary.uuid)])
    assert synced[-1] == str(folder / "transcript.jsonl")
    assert any(path.startswith(str(folder / f".{PENDING_NAME}.")) for path in synced)


def test_an_append_that_cannot_be_undone_stops_further_appends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "s"
    store = FolderStore(folder)
    store.append([Entry.user("one")])

    def half_written(target: Any, payload: bytes, *, fsync: bool = True) -> None:
        with open(target, "ab") as handle:
            handle.write(payload[:9])
        raise OSError(5, "Input/output error")

    def cannot_truncate(path: Path, size: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(storage, "append_private", half_written)
    monkeypatch.setattr(storage, "_truncate", cannot_truncate)
    with pytest.raises(OSError):
        store.append([Entry.user("two")])
    monkeypatch.undo()
    with pytest.raises(storage.StoreDamagedError, match="reopen the store"):
        store.append([Entry.user("three")])  # never glued onto the partial line
    store.close()
    with FolderStore(folder) as reopened:  # reopening sets the partial write aside
        loaded = reopened.load()
        assert [e.content for e in loaded.entries] == ["one"] and "torn last line" in loaded.warnings[0]
        reopened.append([Entry.user("four")])
        assert [e.content for e in reopened.load().entries] == ["one", "four"]
