"""Where a session lives: its transcript, its pipeline state and its session memory.

`SessionStore` is the small interface the pipeline uses, so a shared store can come later
without touching it. `FolderStore` keeps one folder per session:

    <folder>/transcript.jsonl              the append-only Claude Code-format transcript
    <folder>/state/<name>.json             pipeline state (microcompaction, breaker, TTL latch…)
    <folder>/session-memory/summary.md     the session notes
    <folder>/tool-outputs/<name>.txt       tool outputs too large to send whole (kept on the side;
                                           names from `side_outputs.side_output_name`)

Folders are created 0700 and files 0600. Appends are one flushed, fsynced write per batch of
entries; state files are replaced atomically. `MemoryStore` keeps everything in memory, for
tests and throwaway sessions.

Crash recovery (`FolderStore.load`, only while holding the lock): a batch of several entries
(a compaction's boundary, summary and attachments) is announced first in `.append-pending`
(its start offset and line count, fsynced); if a crash cut the batch short, everything from
that offset is set aside, so a transcript never holds a boundary without its summary. A torn
last line (no newline, not JSON) is set aside too. Set-aside bytes go to
`transcript.jsonl.torn-<UTC time>` (0600) next to the transcript, which is truncated back to
its last complete line so later appends start on a fresh line; a warning names the file. An
append that fails in this process (disk full) is truncated away before the error is raised;
if even that fails, the store refuses appends (`StoreDamagedError`) until it is reopened.
Temporary files a killed state write left behind (`.<name>.*.tmp`) are removed on open.

A store is closed with `close()` (or `with`); a `FolderStore` opened with `lock=False` is
read-only: it never writes to disk, and what a session appends to it is kept in memory only.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import orjson

# The two errors are defined in unbounded.errors, importable from here, where they used to live.
from unbounded.errors import ConfigError, SessionLockedError, StoreDamagedError
from unbounded.fileio import (
    FILE_MODE,
    append_private,
    atomic_write_chunks,
    atomic_write_json,
    fsync_directory,
    private_folder,
    read_private_file,
)
from unbounded.model.entries import Entry
from unbounded.model.text import repair_surrogates
from unbounded.model.transcript import Transcript
from unbounded.side_outputs import check_side_output_name, legacy_side_output_name
from unbounded.transcripts.claude_code import read_claude_code
from unbounded.transcripts.jsonl import dumps_line, max_line_bytes_default

TRANSCRIPT_NAME = "transcript.jsonl"
STATE_FOLDER = "state"
MEMORY_RELATIVE_PATH = Path("session-memory") / "summary.md"
PENDING_NAME = ".append-pending"
"""Where a multi-entry append announces its start offset and line count before writing."""
TORN_SUFFIX = ".torn-"
"""Set-aside bytes go to `transcript.jsonl.torn-<UTC time>`."""
LOCK_POLL_SECONDS = 0.05
"""How often a store waiting for the folder lock tries again."""
_HELD_HERE: set[tuple[int, Path]] = set()
"""(pid, resolved folder) of the folders a `FolderStore` holds locked (one at most per folder:
the lock refuses a second), so a refusal can tell a holder in this process from another
process's; the pid, because a forked child inherits the set but not the holding."""
_CHUNK = 1 << 20
_WAIT_ADVICE = (
    "wait for it with FolderStore(folder, wait=SECONDS) (a session: "
    "Session(config, store=FolderStore(folder, wait=SECONDS)); Session.open does not wait)"
)


logger = logging.getLogger(__name__)

TOOL_OUTPUT_FOLDER = "tool-outputs"
"""Where a folder store keeps tool outputs too large to send whole."""


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

    def save_tool_output(self, key: str, text: str) -> str | None:
        """Keep a tool output too large to send whole; returns where it can be read, if anywhere."""
        ...

    def load_tool_output(self, key: str) -> str | None:
        """A tool output kept by `save_tool_output`, or None."""
        ...

    def close(self) -> None:
        """Release what the store holds (a lock, connections); safe to call twice."""
        ...

    @property
    def read_only(self) -> bool:
        """True when the store never writes (what is appended is kept in memory only)."""
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
    `wait` is how many seconds to wait for a lock another process holds (default: none,
    `math.inf`: until it is free) before raising `SessionLockedError`. With `lock=False` the
    store only reads: it never creates or changes a file, crash damage is reported in the
    warnings but not repaired, and appends, state, notes and tool outputs are kept in memory
    for this object's life. The lock is released by `close()`, `with`, or, as a last resort,
    when the store is garbage-collected.
    """

    def __init__(
        self, folder: str | Path, *, lock: bool = True, wait: float | None = None
    ) -> None:
        if wait is not None and (math.isnan(wait) or wait < 0):
            raise ConfigError("FolderStore wait must be a number of seconds >= 0")
        self._lock_handle: int | None = None
        self._damaged: str | None = None
        self._read_only = not lock
        # What a read-only store was given: kept in memory, never written.
        self._overlay = MemoryStore() if self._read_only else None
        if self._read_only:
            self.folder = Path(folder)
            if self.folder.exists() and not self.folder.is_dir():
                raise ConfigError(f"{self.folder} is not a folder")
            return
        self.folder = private_folder(folder)
        if not self.folder.is_dir():
            raise ConfigError(f"{self.folder} is not a folder")
        self._acquire_lock(wait or 0.0)
        self._remove_stale_temporaries()

    def _acquire_lock(self, wait: float) -> None:
        handle = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
        deadline = time.monotonic() + wait
        try:
            if math.isinf(wait):
                fcntl.flock(handle, fcntl.LOCK_EX)
            else:
                while True:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            waited = f" after waiting {wait:g} s" if wait else ""
                            if (os.getpid(), self.folder.resolve()) in _HELD_HERE:
                                raise SessionLockedError(
                                    f"{self.folder} is already open in this process{waited} "
                                    "(an earlier Session.open or FolderStore not closed, e.g. "
                                    "a notebook cell run twice): close that session first "
                                    "(session.close(), or open it in a `with` block), or, when "
                                    f"another thread will close it, {_WAIT_ADVICE}"
                                ) from None
                            raise SessionLockedError(
                                f"{self.folder} is in use by another process{waited}; close it "
                                f"there first, {_WAIT_ADVICE}, or open this store with "
                                "lock=False to read it"
                            ) from None
                        time.sleep(min(LOCK_POLL_SECONDS, left))
        except BaseException:
            os.close(handle)
            raise
        self._lock_handle = handle
        # Resolved now: a relative folder resolved again at close, after a chdir, is another.
        self._held = (os.getpid(), self.folder.resolve())
        _HELD_HERE.add(self._held)

    @property
    def locked(self) -> bool:
        """Whether this store holds the folder lock (and may repair and write)."""
        return self._lock_handle is not None

    @property
    def read_only(self) -> bool:
        """True when opened with `lock=False`: nothing is ever written."""
        return self._read_only

    def close(self) -> None:
        """Release the folder lock (safe to call twice)."""
        handle, self._lock_handle = self._lock_handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)
            os.close(handle)
            _HELD_HERE.discard(self._held)

    def __enter__(self) -> FolderStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Last resort for a store nobody closed (a re-run notebook cell): free the lock.
        with contextlib.suppress(Exception):
            self.close()

    def _remove_stale_temporaries(self) -> None:
        """Delete `.<name>.*.tmp` files a write killed before its rename left behind.

        Only called while holding the lock, so no write of this session is in progress.
        """
        for folder in (
            self.folder,
            self.folder / STATE_FOLDER,
            self.folder / MEMORY_RELATIVE_PATH.parent,
            self.folder / TOOL_OUTPUT_FOLDER,
        ):
            if not folder.is_dir():
                continue
            for stale in folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    stale.unlink()

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
        """The transcript, after repairing what a crash left at its end (see the module doc).

        Repairs are reported in the transcript's warnings; without the lock they are only
        reported, and a torn last line is left out of the entries.
        """
        notes = self.recover() if self.locked else self._damage_report()
        if not self.transcript_file.exists() or self.transcript_file.stat().st_size == 0:
            transcript = Transcript(
                entries=[], format="claude-code", path=self.transcript_file, warnings=notes
            )
        else:
            transcript = read_claude_code(self.transcript_file)
            transcript.warnings[:0] = notes
        if self._overlay is not None:
            transcript.entries.extend(self._overlay.entries)
        return transcript

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries in one flushed, fsynced write; it lands whole or not at all.

        A batch of several entries is announced in `.append-pending` first, so a crash in the
        middle of it is undone on the next load; a failure here truncates it away at once.
        """
        if self._overlay is not None:
            self._overlay.append(entries)
            return
        if not self.locked:
            raise StoreDamagedError(f"{self.folder}: the store was closed; reopen it to append")
        payload = b"".join(dumps_line(entry.data) for entry in entries)
        if not payload:
            return
        path = self.transcript_file
        created = not path.exists()
        size = 0 if created else path.stat().st_size
        batch = len(entries) > 1
        if batch:
            atomic_write_json(self._pending_file, {"offset": size, "lines": len(entries)})
        if self._damaged is not None:
            raise StoreDamagedError(self._damaged)
        try:
            append_private(path, payload)
        except BaseException:
            try:
                _truncate(path, size)
            except OSError as error:
                self._damaged = (
                    f"{path}: a failed append could not be undone ({error}); nothing more is "
                    "appended: reopen the store, which sets the partial write aside"
                )
            else:
                if batch:
                    self._pending_file.unlink(missing_ok=True)
            raise
        if created:
            fsync_directory(self.folder)  # the new file's name must survive a power cut too
        if batch:
            with contextlib.suppress(FileNotFoundError):
                self._pending_file.unlink()

    # -- crash recovery -------------------------------------------------------------------------
    @property
    def _pending_file(self) -> Path:
        return self.folder / PENDING_NAME

    def _read_pending(self) -> tuple[int, int] | None:
        try:
            data = orjson.loads(self._pending_file.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError):
            return (-1, 0)
        if not isinstance(data, dict):
            return (-1, 0)
        offset, lines = data.get("offset"), data.get("lines")
        if not isinstance(offset, int) or not isinstance(lines, int) or offset < 0 or lines < 1:
            return (-1, 0)
        return offset, lines

    def recover(self) -> list[str]:
        """Undo an unfinished batch append and set aside a torn last line; returns warnings.

        Needs the lock (the store opened with `lock=True`); `load()` calls it.
        """
        if not self.locked:
            raise SessionLockedError("recover() needs the folder lock (open with lock=True)")
        notes: list[str] = []
        path = self.transcript_file
        size = path.stat().st_size if path.exists() else 0
        pending = self._read_pending()
        if pending is not None:
            offset, lines = pending
            if offset < 0:
                notes.append(f"{self._pending_file}: unreadable, ignored")
            elif offset < size and _newlines_from(path, offset, lines) < lines:
                side = self._set_aside(offset, size)
                notes.append(
                    f"{path}: an append of {lines} entries was cut short by a crash; its "
                    f"{size - offset:,} bytes were set aside in {side}"
                )
                size = offset
            self._pending_file.unlink(missing_ok=True)
        end = _end_of_last_line(path, size)
        if end < size:
            tail_size = size - end
            if tail_size <= max_line_bytes_default() and _is_json_object(path, end, size):
                append_private(path, b"\n")
                notes.append(f"{path}: last line had no newline; completed")
            else:
                side = self._set_aside(end, size)
                notes.append(
                    f"{path}: torn last line ({tail_size:,} bytes with no newline, not JSON) "
                    f"set aside in {side}"
                )
        return notes

    def _damage_report(self) -> list[str]:
        pending = self._read_pending()
        if pending is None or pending[0] < 0:
            return []
        return [
            f"{self.transcript_file}: an append of {pending[1]} entries may be unfinished "
            "(a crash, or a write in progress); open the store with the lock to repair it"
        ]

    def _set_aside(self, start: int, end: int) -> Path:
        """Copy bytes [start, end) to a private side file, fsync it, then truncate there."""
        path = self.transcript_file
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        side = path.with_name(f"{path.name}{TORN_SUFFIX}{stamp}")
        counter = 1
        while side.exists():
            counter += 1
            side = path.with_name(f"{path.name}{TORN_SUFFIX}{stamp}-{counter}")
        atomic_write_chunks(side, _read_range(path, start, end))
        _truncate(path, start)
        return side

    def _state_file(self, name: str) -> Path:
        if not name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"state name {name!r} must be letters, digits, - or _")
        return self.folder / STATE_FOLDER / f"{name}.json"

    def load_state(self, name: str) -> dict[str, Any] | None:
        """A state document, or None."""
        path = self._state_file(name)
        if self._overlay is not None and name in self._overlay.states:
            return self._overlay.load_state(name)
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
        path = self._state_file(name)
        if self._overlay is not None:
            self._overlay.save_state(name, data)
            return
        atomic_write_json(path, data)

    def read_memory(self) -> str | None:
        """The notes, or None."""
        if self._overlay is not None and self._overlay.memory is not None:
            return self._overlay.memory
        path = self.folder / MEMORY_RELATIVE_PATH
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write_memory(self, text: str) -> None:
        """Replace the notes atomically (0600)."""
        if self._overlay is not None:
            self._overlay.write_memory(text)
            return
        atomic_write_chunks(self.folder / MEMORY_RELATIVE_PATH, [text.encode("utf-8")])

    def save_tool_output(self, key: str, text: str) -> str | None:
        """Write a large tool output to `tool-outputs/<key>.txt` (0600); returns its path.

        `key` comes from `side_outputs.side_output_name`. A read-only store keeps the output
        in memory and returns None (there is no file to point to); so does a store whose
        `tool-outputs` is not a folder of its own (a link placed there is never written
        through).
        """
        check_side_output_name(key)
        if self._overlay is not None:
            return self._overlay.save_tool_output(key, text)
        folder = self.folder / TOOL_OUTPUT_FOLDER
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            logger.warning("%s is not a folder of this session: output %s not kept", folder, key)
            return None
        path = folder / f"{key}.txt"
        atomic_write_chunks(path, [repair_surrogates(text).encode("utf-8")])
        return str(path)

    def load_tool_output(self, key: str) -> str | None:
        """A kept tool output, or None (also for anything but a regular file of this session's
        `tool-outputs`: a link, a folder or a FIFO placed there is never followed or read).

        An output kept by an earlier version under its old name is returned too; that name may
        belong to another call, so check it against the transcript's shortened copy
        (`large_output.is_kept_copy_of`), as recall does.
        """
        check_side_output_name(key)
        if self._overlay is not None:
            kept = self._overlay.load_tool_output(key)
            if kept is not None:
                return kept
        names = [key]
        legacy = legacy_side_output_name(key)
        if legacy is not None:
            names.append(legacy)
        for name in names:
            data = read_private_file(self.folder, TOOL_OUTPUT_FOLDER, f"{name}.txt")
            if data is not None:
                return data.decode("utf-8", errors="replace")
        return None


def _truncate(path: Path, size: int) -> None:
    """Cut a file back to `size` bytes, durably."""
    with path.open("r+b") as handle:
        handle.truncate(size)
        handle.flush()
        os.fsync(handle.fileno())


def _read_range(path: Path, start: int, end: int) -> Iterator[bytes]:
    with path.open("rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def _newlines_from(path: Path, start: int, enough: int) -> int:
    """Newlines from `start` on, counting stops once `enough` were seen."""
    seen = 0
    for chunk in _read_range(path, start, path.stat().st_size):
        seen += chunk.count(b"\n")
        if seen >= enough:
            break
    return seen


def _end_of_last_line(path: Path, size: int) -> int:
    """Offset just past the last newline in the first `size` bytes (0 when there is none)."""
    if size == 0:
        return 0
    with path.open("rb") as handle:
        position = size
        while position > 0:
            start = max(0, position - _CHUNK)
            handle.seek(start)
            chunk = handle.read(position - start)
            found = chunk.rfind(b"\n")
            if found >= 0:
                return start + found + 1
            position = start
    return 0


def _is_json_object(path: Path, start: int, end: int) -> bool:
    try:
        value = orjson.loads(b"".join(_read_range(path, start, end)))
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict)


class MemoryStore:
    """A session kept in memory only."""

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)
        self.states: dict[str, bytes] = {}
        """Name -> the document as JSON (kept encoded: a save is a copy, a load another)."""
        self.memory: str | None = None
        self.tool_outputs: dict[str, str] = {}

    @property
    def read_only(self) -> bool:
        """False: a memory store takes every write (and forgets it with the process)."""
        return False

    def close(self) -> None:
        """Nothing to release."""

    def save_tool_output(self, key: str, text: str) -> str | None:
        """Keep the output in memory; None, as there is no file a model could read."""
        self.tool_outputs[check_side_output_name(key)] = text
        return None

    def load_tool_output(self, key: str) -> str | None:
        """A kept tool output, or None."""
        return self.tool_outputs.get(check_side_output_name(key))

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
        return cast(dict[str, Any], orjson.loads(data)) if data is not None else None

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        """Keep a copy of a state document."""
        self.states[name] = orjson.dumps(data)

    def read_memory(self) -> str | None:
        """The notes, or None."""
        return self.memory

    def write_memory(self, text: str) -> None:
        """Keep the notes."""
        self.memory = text
