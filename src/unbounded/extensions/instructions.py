"""Instruction files along the path of a file the agent reads (seed 003 section 6).

Projects keep instructions for agents next to the code they govern: `CLAUDE.md`,
`AGENTS.md`, in the repository root and in sub-folders. When the agent reads a file (a Read
tool call, an editor's `view`, any tool `model.tools.file_read_path` recognises), the
instruction files in that file's folder and in each parent folder up to the working
directory are attached to the conversation as `nested_memory` attachments (rendered by
`model.attachments`), outermost first, so general rules come before specific ones.

Each instruction file is attached once: a read-file state remembers it (and every file the
agent read itself; an instruction file the agent read directly is not attached again).
After a compaction the attachments that were summarized away are gone from the view, so the
state is reset to the instruction files still in the new view (post-compact cleanup, seed
004). Claude Code attaches such a file again only when a file under it is read; here every
instruction file that was attached before the compaction is attached again right after it,
as it is on disk now, so the request that follows the compaction already holds it and the
rules survive any number of compactions verbatim, even when the agent reads nothing under
them afterwards (a file that is gone is skipped).

Safety and I/O. Paths are resolved (`resolve`, default `os.path.realpath`, so symlinks are
followed) and only files inside the working directory are considered; a read outside it
attaches nothing. Reading is injected (`read_file(path) -> text | None`, None when there is
no such file), as is the clock; the default reader refuses anything but a regular UTF-8
file and cuts text at `max_chars`.

Use: `Session(..., extensions=[NestedMemory(cwd)])`, a session extension, appends the
attachments at the start of each `prepare()`, after the tool results of the
response that read the file; or call `attachments_for_entries(entries)` yourself.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.conversation import CompactionResult
from unbounded.errors import ConfigError
from unbounded.extension import Extension, ExtensionHost
from unbounded.model.entries import Entry
from unbounded.model.tools import file_read_path

DEFAULT_INSTRUCTION_FILE_NAMES: tuple[str, ...] = ("CLAUDE.md", "AGENTS.md")
"""Instruction file names looked for in each folder, in this order."""
DEFAULT_MAX_CHARS = 40_000
"""An instruction file is cut at this many characters (about 10,000 tokens)."""
ATTACHMENT_TYPE = "nested_memory"
TRUNCATION_MARKER = "\n[… instruction file cut at {chars:,} characters; read {path} for the rest]"

ReadFile = Callable[[str], "str | None"]
"""Reads a file as text; None when there is no such regular file."""


def default_read_file(path: str) -> str | None:
    """The UTF-8 text of a regular file, None when it is missing, not a file or not text."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(DEFAULT_MAX_CHARS + 1)
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(slots=True)
class ReadFileRecord:
    """A file the session has seen: when, and whether it was attached as instructions."""

    read_at: float
    instructions: bool = False


@dataclass(slots=True)
class ReadFileState:
    """Files read or attached in the current view, by resolved path."""

    files: dict[str, ReadFileRecord] = field(default_factory=dict)

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def __len__(self) -> int:
        return len(self.files)

    def record(self, path: str, read_at: float, *, instructions: bool = False) -> None:
        """Remember a file as read (or attached)."""
        self.files[path] = ReadFileRecord(read_at, instructions)

    def clear(self) -> None:
        """Forget everything (after a compaction)."""
        self.files.clear()


def is_inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (both already resolved)."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives, or a mix of absolute and relative
        return False


def instruction_dirs(file_path: str, cwd: str, *, include_cwd: bool = True) -> list[str]:
    """Folders from `cwd` down to the folder holding `file_path` (both resolved), outermost
    first; empty when the file is outside `cwd`."""
    if not is_inside(file_path, cwd) or file_path == cwd:
        return []
    folders: list[str] = []
    folder = os.path.dirname(file_path)
    while True:
        folders.append(folder)
        if folder == cwd or not is_inside(folder, cwd):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    folders.reverse()
    if not include_cwd and folders and folders[0] == cwd:
        folders = folders[1:]
    return folders


def read_paths_of(entries: Iterable[Entry]) -> list[str]:
    """Paths the assistant read in these entries, in order (as written in the tool calls)."""
    paths: list[str] = []
    for entry in entries:
        content = entry.content
        if entry.type != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                path = file_read_path(block)
                if path:
                    paths.append(path)
    return paths


class NestedMemory(Extension):
    """A session extension attaching instruction files along the paths the agent reads,
    once each."""

    def __init__(
        self,
        cwd: str | os.PathLike[str],
        *,
        names: Sequence[str] = DEFAULT_INSTRUCTION_FILE_NAMES,
        read_file: ReadFile = default_read_file,
        resolve: Callable[[str], str] = os.path.realpath,
        include_cwd: bool = True,
        max_chars: int = DEFAULT_MAX_CHARS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        names = tuple(names)
        if not names or any(not n or "/" in n or "\\" in n or n in (".", "..") for n in names):
            raise ConfigError(f"instruction file names must be plain file names, not {names!r}")
        if max_chars <= 0:
            raise ConfigError("NestedMemory.max_chars must be > 0")
        self.resolve = resolve
        self.cwd = resolve(os.fspath(cwd))
        if not os.path.isabs(self.cwd):
            raise ConfigError(f"the working directory must resolve to an absolute path: {cwd}")
        self.names = names
        self.read_file = read_file
        self.include_cwd = include_cwd
        self.max_chars = max_chars
        self.clock = clock
        self.state = ReadFileState()
        self._scanned = 0
        self._session: ExtensionHost | None = None

    def _absolute(self, path: str) -> str:
        joined = path if os.path.isabs(path) else os.path.join(self.cwd, path)
        return self.resolve(os.path.normpath(joined))

    def _payload(self, path: str, text: str) -> dict[str, Any]:
        truncated = len(text) > self.max_chars
        if truncated:
            marker = TRUNCATION_MARKER.format(chars=self.max_chars, path=path)
            text = text[: self.max_chars] + marker
        return {
            "type": ATTACHMENT_TYPE,
            "path": path,
            "content": {"path": path, "type": "Project", "content": text},
            "truncated": truncated,
        }

    def attachments_for(self, file_path: str) -> list[dict[str, Any]]:
        """The instruction files not attached yet along `file_path`'s folders; each one
        attached is recorded in the read-file state, and so is the file itself."""
        target = self._absolute(file_path)
        now = self.clock()
        if not is_inside(target, self.cwd):
            return []
        attachments: list[dict[str, Any]] = []
        for folder in instruction_dirs(target, self.cwd, include_cwd=self.include_cwd):
            for name in self.names:
                candidate = self.resolve(os.path.join(folder, name))
                if candidate in self.state or candidate == target:
                    continue
                if not is_inside(candidate, self.cwd):  # a symlink out of the tree
                    continue
                text = self.read_file(candidate)
                if text is None:
                    continue
                self.state.record(candidate, now, instructions=True)
                attachments.append(self._payload(candidate, text))
        if target not in self.state:
            self.state.record(target, now)
        return attachments

    def reattachments(self, paths: Iterable[str]) -> list[dict[str, Any]]:
        """Instruction files (resolved paths) read again and recorded as attached, those not
        attached already; a file that is no longer there is skipped."""
        attachments: list[dict[str, Any]] = []
        now = self.clock()
        for path in paths:
            if path in self.state:
                continue
            text = self.read_file(path)
            if text is not None:
                self.state.record(path, now, instructions=True)
                attachments.append(self._payload(path, text))
        return attachments

    def attachments_for_entries(self, entries: Iterable[Entry]) -> list[dict[str, Any]]:
        """`attachments_for` every file read in these entries, in order."""
        attachments: list[dict[str, Any]] = []
        for path in read_paths_of(entries):
            attachments.extend(self.attachments_for(path))
        return attachments

    def remember_view(self, view: Iterable[Entry]) -> None:
        """Reset the state to the instruction files attached in `view` (resume, compaction)."""
        self.state.clear()
        now = self.clock()
        for entry in view:
            attachment = entry.attachment or {}
            if entry.type == "attachment" and attachment.get("type") == ATTACHMENT_TYPE:
                path = attachment.get("path")
                if isinstance(path, str):
                    self.state.record(path, now, instructions=True)

    # -- hooks ----------------------------------------------------------------------------
    def attached(self, session: ExtensionHost) -> None:
        """Remember the instruction files the session's view already holds."""
        if self._session is not None and self._session is not session:
            raise ConfigError("a NestedMemory belongs to one session; create one per session")
        self._session = session
        self.remember_view(session.view)
        self._scanned = len(session.entries)

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Attach the instruction files over the files read since the last turn."""
        new = session.entries[self._scanned :]
        self._scanned = len(session.entries)
        payloads = self.attachments_for_entries(new)
        if payloads:
            session.append([Entry.attachment_record(payload) for payload in payloads])
            self._scanned = len(session.entries)

    def after_compact(self, session: ExtensionHost, result: CompactionResult) -> None:
        """Reset to the new view and attach again what the compaction summarized away."""
        attached = [path for path, record in self.state.files.items() if record.instructions]
        self.remember_view(session.view)
        payloads = self.reattachments(attached)
        if payloads:
            session.append([Entry.attachment_record(payload) for payload in payloads])
        self._scanned = len(session.entries)


__all__ = [
    "ATTACHMENT_TYPE",
    "DEFAULT_INSTRUCTION_FILE_NAMES",
    "NestedMemory",
    "ReadFileRecord",
    "ReadFileState",
    "default_read_file",
    "instruction_dirs",
    "is_inside",
    "read_paths_of",
]
