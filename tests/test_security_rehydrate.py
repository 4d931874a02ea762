"""Rehydration after a compaction, end to end through a Session: it re-reads only files the
agent read before, only inside the allowed roots (links resolved), never a special file, and
within its size caps."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from unbounded.compaction import rehydrate as rehydrate_module
from unbounded.compaction.rehydrate import WorkingState, rehydrate
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")

CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    tools=[{"name": "Read", "description": "read", "input_schema": {"type": "object"}}],
    context_window=60_000,
)


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail instead of hanging if something opens a FIFO for reading."""
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("rehydration blocked"))
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path rehydration opens."""
    opened: list[str] = []
    real = rehydrate_module.read_utf8

    def spy(path: str, max_bytes: int | None = None) -> str:
        opened.append(path)
        return real(path, max_bytes)

    monkeypatch.setattr(rehydrate_module, "read_utf8", spy)
    return opened


def _agent_reads(session: Session, paths: list[str]) -> None:
    for index, path in enumerate(paths):
        session.record(ModelResponse([{"type": "tool_use", "id": f"r{index}", "name": "Read", "input": {"file_path": path}}], "tool_use", {"input_tokens": 100, "output_tokens": 5}, "m", id=f"msg_{index}"))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"r{index}", "content": "(contents)"}])


def test_only_files_read_before_inside_the_roots(tmp_path: Path, deadline: None, reads: list[str]) -> None:
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "app.py").write_text("print('inside')\n")
    (project / "never_read.py").write_text("NEVER-READ-CONTENT\n")
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (project / "escape.txt").symlink_to(outside / "secret.txt")
    (project / "dir_link").symlink_to(outside, target_is_directory=True)
    os.mkfifo(project / "pipe")
    with open(project / "huge.bin", "wb") as handle:
        handle.truncate(3 * 1024 * 1024)
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(rehydrate_max_files=10), allowed_roots=[str(project)])
    session.add_user("Look around.")
    _agent_reads(
        session,
        [
            str(project / "app.py"),
            str(project / "escape.txt"),
            str(project / "dir_link" / "secret.txt"),
            str(project / ".." / "outside" / "secret.txt"),
            str(outside / "secret.txt"),
            str(project / "pipe"),
            str(project / "huge.bin"),
            "/etc/passwd",
        ],
    )
    result = asyncio.run(session.compact())
    files = [a.attachment for a in result.attachments if a.attachment and a.attachment.get("type") == "file"]
    assert [f["filename"] for f in files] == [str(project / "app.py")]
    assert reads == [str(project / "app.py")]  # nothing else was even opened
    transcript = session.store.transcript_path
    assert transcript is not None
    text = Path(transcript).read_text()
    assert "OUTSIDE-SECRET" not in text and "NEVER-READ-CONTENT" not in text and "root:" not in text
    skipped = "\n".join(result.skipped_attachments)
    assert skipped.count("resolves outside the allowed roots") == 5
    assert "pipe: no longer exists" in skipped  # not a regular file: never opened
    assert "too large to re-read (3,145,728 bytes)" in skipped


def test_without_roots_nothing_is_read(tmp_path: Path, reads: list[str]) -> None:
    """A session that names no roots and whose records carry no cwd re-reads nothing."""
    (tmp_path / "a.py").write_text("x\n")
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy())
    session.add_user("Read a.py.")
    _agent_reads(session, [str(tmp_path / "a.py")])
    result = asyncio.run(session.compact())
    assert not [a for a in result.attachments if (a.attachment or {}).get("type") == "file"]
    assert reads == []


def test_a_file_that_grows_after_the_size_check_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    big = tmp_path / "grows.log"
    big.write_bytes(b"a" * (4 * 1024 * 1024))
    state = WorkingState()
    state.record_read(str(big), 1.0)
    result = rehydrate(state, allowed_roots=[tmp_path], file_size=lambda path: 10, max_file_bytes=1024, policy=Policy())
    (attachment,) = result.attachments
    assert attachment["content"] == "a" * 1025  # the cap plus one byte, never the 4 MiB


def test_per_file_and_total_token_caps(tmp_path: Path) -> None:
    state = WorkingState()
    for index in range(5):
        path = tmp_path / f"f{index}.txt"
        path.write_text("word " * 40_000)
        state.record_read(str(path), float(index))
    policy = Policy(rehydrate_tokens_per_file=2_000, rehydrate_total_file_tokens=5_000)
    result = rehydrate(state, allowed_roots=[tmp_path], policy=policy)
    assert result.file_tokens <= 5_000 and len(result.attachments) == 2
    assert all(a["truncated"] for a in result.attachments)
    assert sum(1 for reason in result.skipped_reasons().values() if reason == "over the total file budget") == 3
