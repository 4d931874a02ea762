"""Where a session lives: its transcript, its pipeline state and its session memory.

`SessionStore` is the small interface the pipeline uses, so a shared store can come later
without touching it. `FolderStore` keeps one folder per session:

    <folder>/transcript.jsonl              the append-only Claude Code-format transcript
    <folder>/state/<name>.json             pipeline state (microcompaction, breaker, TTL latch…)
    <folder>/session-memory/summary.md     the session notes

Folders are created 0700 and files 0600. Appends are one flushed, fsynced write per batch of
entries; state files are replaced atomically. `MemoryStore` keeps everything in memory, for
tests and throwaway sessions.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from unbounded.errors import ConfigError, UnboundedError
from unbounded.fileio import atomic_write_chunks, atomic_write_json, private_folder
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.transcripts.claude_code import append_claude_code, read_claude_code

TRANSCRIPT_NAME = "transcript.jsonl"
STATE_FOLDER = "state"
MEMORY_RELATIVE_PATH = Path("session-memory") / "summary.md"


class SessionLockedError(UnboundedError):
    """Another process holds this session's folder."""


@runtime_checkable
class SessionStore(Protocol):
    """Persistence the session pipeline needs."""

    def load(self) -> Transcript:
        """The transcript as stored (empty when new)."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries durably, in order."""
        ...

    def load_state(self, name: str) -> dict[str, Any] | None:
        """A named state document, or None when never saved."""
        ...

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        """Replace a named state document atomically."""
        ...

    def read_memory(self) -> str | None:
        """The session notes, or None when there are none."""
        ...

    def write_memory(self, text: str) -> None:
        """Replace the session notes atomically."""
        ...

    @property
    def transcript_path(self) -> str | None:
        """A path a model can read the full transcript from, when there is one."""
        ...

    @property
    def memory_path(self) -> str | None:
        """The path of the notes file, when there is one."""
        ...


class FolderStore:
    """A session kept in one folder (see the module docstring).

    `lock=True` takes an exclusive advisory lock on the folder for this object's life, so a
    second process using the same session gets a clear error instead of interleaved writes.
    """

    def __init__(self, folder: str | Path, *, lock: bool = True) -> None:
        self.folder = private_folder(folder)
        if not self.folder.is_dir():
            raise ConfigError(f"{self.folder} is not a folder")
        self._lock_handle: int | None = None
        if lock:
            self._acquire_lock()

    def _acquire_lock(self) -> None:
        handle = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            raise SessionLockedError(
                f"{self.folder} is in use by another process; close it there first "
                "(or open this store with lock=False to read it)"
            ) from None
        self._lock_handle = handle

    def close(self) -> None:
        """Release the folder lock."""
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            os.close(self._lock_handle)
            self._lock_handle = None

    def __enter__(self) -> FolderStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def transcript_file(self) -> Path:
        """The transcript's path."""
        return self.folder / TRANSCRIPT_NAME

    @property
    def transcript_path(self) -> str | None:
        """The transcript's path as a string."""
        return str(self.transcript_file)

    @property
    def memory_path(self) -> str | None:
        """The notes file's path as a string."""
        return str(self.folder / MEMORY_RELATIVE_PATH)

    def load(self) -> Transcript:
        """The transcript (a torn last line is reported in its warnings and left out)."""
        if not self.transcript_file.exists() or self.transcript_file.stat().st_size == 0:
            return Transcript(entries=[], format="claude-code", path=self.transcript_file)
        return read_claude_code(self.transcript_file)

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries in one fsynced write."""
        append_claude_code(entries, self.transcript_file)

    def _state_file(self, name: str) -> Path:
        if not name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"state name {name!r} must be letters, digits, - or _")
        return self.folder / STATE_FOLDER / f"{name}.json"

    def load_state(self, name: str) -> dict[str, Any] | None:
        """A state document, or None."""
        path = self._state_file(name)
        if not path.exists():
            return None
        try:
            data = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}: not valid JSON ({exc}); delete it to start that state afresh"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a JSON object")
        return data

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        """Replace a state document atomically (0600)."""
        atomic_write_json(self._state_file(name), data)

    def read_memory(self) -> str | None:
        """The notes, or None."""
        path = self.folder / MEMORY_RELATIVE_PATH
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write_memory(self, text: str) -> None:
        """Replace the notes atomically (0600)."""
        atomic_write_chunks(self.folder / MEMORY_RELATIVE_PATH, [text.encode("utf-8")])


class MemoryStore:
    """A session kept in memory only."""

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)
        self.states: dict[str, dict[str, Any]] = {}
        self.memory: str | None = None

    @property
    def transcript_path(self) -> str | None:
        """None: nothing is on disk."""
        return None

    @property
    def memory_path(self) -> str | None:
        """None: nothing is on disk."""
        return None

    def load(self) -> Transcript:
        """The entries so far."""
        return Transcript(entries=list(self.entries), format="claude-code")

    def append(self, entries: Sequence[Entry]) -> None:
        """Keep the entries."""
        self.entries.extend(entries)

    def load_state(self, name: str) -> dict[str, Any] | None:
        """A copy of a state document, or None."""
        data = self.states.get(name)
        return orjson.loads(orjson.dumps(data)) if data is not None else None

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        """Keep a copy of a state document."""
        self.states[name] = orjson.loads(orjson.dumps(data))

    def read_memory(self) -> str | None:
        """The notes, or None."""
        return self.memory

    def write_memory(self, text: str) -> None:
        """Keep the notes."""
        self.memory = text
