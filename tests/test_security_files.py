"""Every file unbounded writes is owner-only (0600) and every folder it creates is 0700, even
under a permissive umask: transcripts, state, session notes, the lock, crash side files,
cache-break diffs, written transcripts."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from unbounded.events import CacheBreak, Event
from unbounded.fileio import atomic_write_json, private_folder
from unbounded.hooks import HookRunner
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore
from unbounded.tokens.estimate import estimate_messages_tokens
from unbounded.transcripts.claude_code import write_claude_code

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")

CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are careful.",
    tools=[{"name": "Read", "description": "read", "input_schema": {"type": "object"}}],
    context_window=60_000,
)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Run with umask 000: modes must come from the code, not from the environment."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def modes_under(root: Path) -> dict[str, int]:
    """Mode of every folder and file below `root` (root included), by relative path."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(root: Path, modes: dict[str, int]) -> None:
    for name, mode in modes.items():
        path = root / name
        expected = 0o700 if path.is_dir() else 0o600
        assert mode == expected, f"{path}: mode {mode:04o}, expected {expected:04o}"


def drive(session: Session, turns: int, project: Path) -> None:
    """Turns that read a file, a cache read that collapses on the last one, a compaction."""

    async def run() -> None:
        for turn in range(turns):
            request = await session.prepare()
            size = estimate_messages_tokens(request["messages"])
            read = 12_000 if turn < turns - 1 else 0  # the last call's cache read collapses
            session.record(
                ModelResponse(
                    [{"type": "tool_use", "id": f"t{turn}", "name": "Read", "input": {"file_path": str(project / "notes.md")}}],
                    "tool_use",
                    {"input_tokens": size, "cache_read_input_tokens": read, "output_tokens": 10},
                    "claude-sonnet-4-5",
                    id=f"msg_{turn}",
                )
            )
            session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "notes\n" * 300}])
        await session.compact()
        await session.prepare()

    asyncio.run(run())


def test_everything_a_session_writes_is_private(tmp_path: Path, open_umask: None) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.md").write_text("the notes\n")
    folder = tmp_path / "sessions" / "one"
    diffs = tmp_path / "diffs" / "one"
    events: list[Event] = []
    hook = f"{sys.executable} -c \"print('remember the notes')\""
    hooks = HookRunner({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": hook}]}]}}, session_id="s", cwd=project)
    extensions: list[Any] = []
    try:
        from unbounded.compaction.memory_updaters import OfflineNotesUpdater
        from unbounded.extensions.session_memory import SessionMemory

        extensions.append(SessionMemory(OfflineNotesUpdater(), background=False))
    except ImportError:  # session memory not built: the notes file is written below instead
        pass
    session = Session.open(
        folder,
        CONFIG,
        policy=Policy(session_memory_init_tokens=500, session_memory_min_tokens_between_updates=500),
        events=events.append,
        hooks=hooks,
        allowed_roots=[str(project)],
        diff_dir=diffs,
        extensions=extensions,
    )
    session.add_user("Read the notes, then change the system prompt.")
    drive(session, 6, project)
    session.reconfigure(dataclasses.replace(session.config, system="You are careful. And brief."))
    drive(session, 3, project)
    assert isinstance(session.store, FolderStore)
    if not extensions:
        session.store.write_memory("# Notes\n")
    # a torn tail set aside by the next open writes a side file
    with (folder / "transcript.jsonl").open("ab") as handle:
        handle.write(b'{"type":"user","uu')
    session.store.close()
    reopened = Session.open(folder, CONFIG, policy=Policy())
    assert isinstance(reopened.store, FolderStore)
    reopened.store.close()

    breaks = [e for e in events if isinstance(e, CacheBreak)]
    assert breaks and all(e.diff_path is not None and e.diff_path.exists() for e in breaks)
    session_files = modes_under(folder)
    for expected in ("transcript.jsonl", "state/session.json", "session-memory/summary.md", ".lock"):
        assert expected in session_files, sorted(session_files)
    assert any(name.startswith("transcript.jsonl.torn-") for name in session_files)
    assert_private(folder, session_files)
    assert_private(diffs, modes_under(diffs))


def test_written_transcripts_and_state_files_are_private(tmp_path: Path, open_umask: None) -> None:
    write_claude_code([Entry.user("hello")], tmp_path / "out" / "compacted.jsonl")
    atomic_write_json(tmp_path / "state" / "x.json", {"a": 1})
    private_folder(tmp_path / "fresh")
    for path, mode in (
        (tmp_path / "out", 0o700),
        (tmp_path / "out" / "compacted.jsonl", 0o600),
        (tmp_path / "state" / "x.json", 0o600),
        (tmp_path / "fresh", 0o700),
    ):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_an_existing_transcript_with_loose_modes_is_not_loosened_further(tmp_path: Path) -> None:
    """Appends never widen a file's mode (they open it, they do not recreate it)."""
    folder = tmp_path / "s"
    with FolderStore(folder) as store:
        store.append([Entry.user("one")])
        path = store.transcript_file
        path.chmod(0o600)
        store.append([Entry.user("two"), Entry.user("three")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
