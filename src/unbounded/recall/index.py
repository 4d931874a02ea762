"""An index of the tool calls in one session's transcript, kept up to date as it grows.

Recall, receipts and the replay's re-fetch count all ask the same questions of a transcript:
which tool call has this id, what did it read or run, what did it return, which calls read
this file or ran this command. `TranscriptIndex.update(entries)` scans only the entries added
since the last call (the transcript is append-only; a shorter list, or one whose last scanned
entry moved, is scanned again from the start).

The index keeps where each result is, not the result: `ToolCall.result` reads it back from
the entries, so a transcript that keeps its older entries on disk
(`unbounded.model.spilled_entries`) is not held in memory through its index.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson

from unbounded.compaction.tools_registry import CompactableTools
from unbounded.model.entries import Entry
from unbounded.model.spilled_entries import entry_in_place
from unbounded.model.tool_ids import ToolCallNames
from unbounded.model.tools import file_write_path, shell_command
from unbounded.tokens.estimate import tool_result_tokens

_REGISTRY = CompactableTools.default()
_DESCRIBE_CHARS = 160
"""A tool call's input is cut to this many characters where it is described."""


def read_path_of(block: Mapping[str, Any]) -> str | None:
    """The file a tool_use read, across agents' vocabularies (None when it read none)."""
    return _REGISTRY.read_path(block)  # file_read_path's tools, then SWE-agent's `open`


def command_of(block: Mapping[str, Any]) -> str | None:
    """The shell command a tool_use ran, across agents' vocabularies (None otherwise)."""
    command = shell_command(block)
    if command is None and _REGISTRY.canonical(str(block.get("name"))) == "Bash":
        value = block.get("input")
        if isinstance(value, Mapping):
            found = value.get("command") or value.get("cmd")
            command = found if isinstance(found, str) and found else None
    return command


def normalize_command(command: str) -> str:
    """A command with its whitespace collapsed (how two runs of one command are matched)."""
    return " ".join(command.split())


def same_path(a: str, b: str) -> bool:
    """The same file: equal, or one ends with the other at a path separator."""
    if a == b:
        return True
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer.endswith(shorter) and longer[-len(shorter) - 1] in "/\\"


def clip(text: str, limit: int = _DESCRIBE_CHARS) -> str:
    """One line of at most `limit` characters (an ellipsis marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(slots=True)
class ToolCall:
    """One tool call of the transcript and where its result is.

    The call's input and time are read back from its entry when asked for (`input`, `time`),
    not held: over a long run the index would otherwise keep every call's input dict and
    timestamp string after the entries themselves went to disk."""

    id: str
    name: str
    use_position: int
    """Index of the entry holding the tool_use."""
    read_path: str | None
    write_path: str | None
    command: str | None
    use_block: int = 0
    """The tool_use's place among that entry's content blocks."""
    number: int = 0
    """The call's place in call order (0 for the transcript's first call)."""
    result_position: int | None = None
    """Index of the entry holding the tool_result (None until the result arrives)."""
    result_block: int = 0
    """The tool_result's place among that entry's content blocks."""
    result_tokens: int = 0
    is_error: bool = False
    transcript_id: str = ""
    """The id the transcript gives the call, when it is not `id` (a repeat renamed here)."""
    source: Sequence[Entry] = field(default=(), repr=False, compare=False)
    """The entries the call and its result are read back from."""

    @property
    def input(self) -> Any:
        """The tool_use block's input (read back from its entry)."""
        block = _block_at(self.source, self.use_position, self.use_block)
        return block.get("input") if block is not None else None

    @property
    def time(self) -> str | None:
        """The timestamp of the entry holding the tool_use."""
        return self.source[self.use_position].timestamp

    @property
    def result(self) -> Any:
        """The tool_result block's content (None until the result arrives)."""
        if self.result_position is None:
            return None
        block = _block_at(self.source, self.result_position, self.result_block)
        return block.get("content") if block is not None else None

    def describe(self) -> str:
        """`Bash: pytest -q`, `Read: src/app.py`, or the name and its input as JSON."""
        if self.command is not None:
            return f"{self.name}: {clip(self.command)}"
        path = self.read_path or self.write_path
        if path is not None:
            return f"{self.name}: {clip(path)}"
        try:
            shown = orjson.dumps(self.input).decode()
        except TypeError:
            shown = str(self.input)
        return f"{self.name} {clip(shown)}"


def _block_at(source: Sequence[Entry], position: int, place: int) -> Mapping[str, Any] | None:
    """The content block at `place` of the entry at `position` (None when there is none)."""
    content = source[position].content
    block = content[place] if isinstance(content, list) and place < len(content) else None
    return cast("Mapping[str, Any]", block) if isinstance(block, dict) else None


def _shared(text: str | None) -> str | None:
    """One string for every call naming the same file or command (a long run reads the same
    files again and again, and the index outlives the entries each copy came from)."""
    return sys.intern(text) if text is not None else None


class TranscriptIndex:
    """Tool calls by id, in call order (see the module docstring)."""

    __slots__ = ("_entries", "_last", "_names", "_reply", "_scanned", "calls")

    def __init__(self) -> None:
        self.calls: dict[str, ToolCall] = {}
        self._entries: Sequence[Entry] = ()
        self._scanned = 0
        self._last: Entry | None = None
        # A provider may repeat a tool_use id: the repeat is named as the normalizer names it
        # (model/tool_ids.py), so recall finds both calls, each with its own result.
        self._names = ToolCallNames()
        self._reply: object = None

    def update(self, entries: Sequence[Entry]) -> TranscriptIndex:
        """Register what was appended since the last call; returns the index."""
        start = self._scanned
        if start > len(entries) or (start and not entry_in_place(entries, start - 1, self._last)):
            self.calls = {}
            self._names = ToolCallNames()
            self._reply = None
            start = 0
        self._entries = entries
        for position in range(start, len(entries)):
            self._scan(entries[position], position)
        self._scanned = len(entries)
        self._last = entries[-1] if entries else None
        return self

    def _scan(self, entry: Entry, position: int) -> None:
        if entry.type not in ("user", "assistant") or entry.is_sidechain:
            return
        content = entry.content
        if isinstance(content, str):
            return
        if entry.type == "assistant":
            # The lines of one response share its id; anything else starts a new reply.
            reply: object = entry.message_id or ("record", position)
            if reply != self._reply:
                self._reply = reply
                self._names.new_reply()
        for place, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use" and entry.type == "assistant":
                tool_id = block.get("id")
                if isinstance(tool_id, str):
                    name = self._names.call(tool_id)
                    self.calls[name] = ToolCall(
                        id=name,
                        transcript_id=tool_id if tool_id != name else "",
                        # One string per tool name, not one per call.
                        name=sys.intern(str(block.get("name", ""))),
                        use_position=position,
                        use_block=place,
                        number=len(self.calls),
                        read_path=_shared(read_path_of(block)),
                        write_path=_shared(file_write_path(block)),
                        command=_shared(command_of(block)),
                        source=self._entries,
                    )
            elif kind == "tool_result" and entry.type == "user":
                call = self.calls.get(self._names.result(str(block.get("tool_use_id"))))
                if call is not None and call.result_position is None:
                    call.source = self._entries  # the sequence that holds both positions
                    call.result_position = position
                    call.result_block = place
                    call.result_tokens = tool_result_tokens(block)
                    call.is_error = bool(block.get("is_error"))

    def get(self, tool_use_id: str) -> ToolCall | None:
        """The call with this id, or None."""
        return self.calls.get(tool_use_id)

    def reads_of(self, path: str) -> list[ToolCall]:
        """Calls that read this file, oldest first."""
        return [c for c in self.calls.values() if c.read_path and same_path(c.read_path, path)]

    def touching(self, path: str) -> list[ToolCall]:
        """Calls that read or wrote this file, oldest first."""
        return [
            c
            for c in self.calls.values()
            if any(p and same_path(p, path) for p in (c.read_path, c.write_path))
        ]

    def runs_of(self, command: str) -> list[ToolCall]:
        """Calls that ran this command (whitespace collapsed), oldest first; when none ran it
        exactly, those whose command contains it."""
        wanted = normalize_command(command)
        exact = [
            c for c in self.calls.values() if c.command and normalize_command(c.command) == wanted
        ]
        if exact:
            return exact
        return [c for c in self.calls.values() if c.command and wanted in c.command]
