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

from array import array
from collections.abc import Iterator, Mapping, Sequence, ValuesView
from typing import Any, cast

import orjson

from unbounded.compaction.tools_registry import CompactableTools
from unbounded.model.entries import Entry
from unbounded.model.spilled_entries import entry_in_place
from unbounded.model.tool_ids import PackedNames, ToolCallNames
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


_NONE = -1
"""A result position or text column's value for "none"."""


class _CallColumns:
    """The fields of tool calls as columns, one row a call: numbers packed, each distinct
    name, path or command held once. Over a long run the index holds these rows for every
    call ever made, after the entries themselves went to disk: a row costs some 60 bytes,
    where an object with its own numbers and dict slot cost some 400."""

    __slots__ = (
        "_text_numbers",
        "blocks",
        "errors",
        "numbers",
        "positions",
        "result_blocks",
        "results",
        "source_of",
        "sources",
        "text_ids",
        "texts",
        "tokens",
        "transcript_ids",
    )

    def __init__(self) -> None:
        self.positions = array("q")
        self.blocks = array("I")  # a block's place in its message
        self.numbers = array("q")
        self.results = array("q")
        self.result_blocks = array("I")
        self.tokens = array("q")
        self.errors = bytearray()
        # name, read path, write path, command: an index into `texts` each (-1: none).
        self.text_ids = tuple(array("i") for _ in range(4))
        self.texts: list[str] = []
        self._text_numbers: dict[str, int] = {}
        self.sources: list[Sequence[Entry]] = []
        self.source_of = array("I")
        self.transcript_ids: dict[int, str] = {}
        """Rows whose transcript id is not their id (a repeat renamed): few."""

    def text_id(self, text: str | None) -> int:
        """The place of `text` in `texts` (added when new; -1 for None)."""
        if text is None:
            return _NONE
        number = self._text_numbers.get(text)
        if number is None:
            number = self._text_numbers[text] = len(self.texts)
            self.texts.append(text)
        return number

    def text(self, column: int, row: int) -> str | None:
        """A row's name (column 0), read path, write path or command (3)."""
        number = self.text_ids[column][row]
        return None if number == _NONE else self.texts[number]

    def source_id(self, source: Sequence[Entry]) -> int:
        """The place of `source` in `sources` (the latest one unless another is given)."""
        if not self.sources or self.sources[-1] is not source:
            self.sources.append(source)
        return len(self.sources) - 1

    def add(
        self,
        texts: tuple[str, str | None, str | None, str | None],
        use: tuple[int, int, int],
        result: tuple[int | None, int, int, bool],
        transcript_id: str,
        source: Sequence[Entry],
    ) -> int:
        """A new row: (name, read path, write path, command), (use position, block, number),
        (result position, block, tokens, is_error); returns its place. The row's id is kept
        by the caller (the index's `rows`: the id of row k is its k-th name)."""
        row = len(self.positions)
        for column, text in zip(self.text_ids, texts, strict=True):
            column.append(self.text_id(text))
        self.positions.append(use[0])
        self.blocks.append(use[1])
        self.numbers.append(use[2])
        position, block, tokens, is_error = result
        self.results.append(_NONE if position is None else position)
        self.result_blocks.append(block)
        self.tokens.append(tokens)
        self.errors.append(is_error)
        self.source_of.append(self.source_id(source))
        if transcript_id:
            self.transcript_ids[row] = transcript_id
        return row


_FIELDS = (
    "id",
    "name",
    "use_position",
    "read_path",
    "write_path",
    "command",
    "use_block",
    "number",
    "result_position",
    "result_block",
    "result_tokens",
    "is_error",
    "transcript_id",
)
"""A call's fields, in the order `ToolCall` takes them."""


class ToolCall:
    """One tool call of the transcript and where its result is.

    Its fields are a row of its index's columns (`_CallColumns`), read when asked for, so
    the call sees its result arrive; the call's input and time are read back from its entry
    (`input`, `time`), not held: over a long run the index would otherwise keep every call's
    input dict and timestamp string after the entries themselves went to disk."""

    __slots__ = ("_columns", "_row", "id")

    def __init__(
        self,
        id: str,
        name: str,
        use_position: int,
        read_path: str | None,
        write_path: str | None,
        command: str | None,
        use_block: int = 0,
        number: int = 0,
        result_position: int | None = None,
        result_block: int = 0,
        result_tokens: int = 0,
        is_error: bool = False,
        transcript_id: str = "",
        source: Sequence[Entry] = (),
    ) -> None:
        """A call standing alone (a row of columns of its own), built from its fields."""
        columns = _CallColumns()
        self._attach(
            id,
            columns,
            columns.add(
                (name, read_path, write_path, command),
                (use_position, use_block, number),
                (result_position, result_block, result_tokens, is_error),
                transcript_id,
                source,
            ),
        )

    def _attach(self, id: str, columns: _CallColumns, row: int) -> None:
        self.id = id
        self._columns = columns
        self._row = row

    @classmethod
    def _of_row(cls, id: str, columns: _CallColumns, row: int) -> ToolCall:
        call = cls.__new__(cls)
        call._attach(id, columns, row)
        return call

    @property
    def name(self) -> str:
        """The tool's name."""
        return self._columns.text(0, self._row) or ""

    @property
    def read_path(self) -> str | None:
        """The file the call read (None when it read none)."""
        return self._columns.text(1, self._row)

    @property
    def write_path(self) -> str | None:
        """The file the call wrote (None when it wrote none)."""
        return self._columns.text(2, self._row)

    @property
    def command(self) -> str | None:
        """The shell command the call ran (None when it ran none)."""
        return self._columns.text(3, self._row)

    @property
    def use_position(self) -> int:
        """Index of the entry holding the tool_use."""
        return self._columns.positions[self._row]

    @property
    def use_block(self) -> int:
        """The tool_use's place among that entry's content blocks."""
        return self._columns.blocks[self._row]

    @property
    def number(self) -> int:
        """The call's place in call order (0 for the transcript's first call)."""
        return self._columns.numbers[self._row]

    @property
    def result_position(self) -> int | None:
        """Index of the entry holding the tool_result (None until the result arrives)."""
        position = self._columns.results[self._row]
        return None if position == _NONE else position

    @property
    def result_block(self) -> int:
        """The tool_result's place among that entry's content blocks."""
        return self._columns.result_blocks[self._row]

    @property
    def result_tokens(self) -> int:
        """The result's estimated tokens (0 until it arrives)."""
        return self._columns.tokens[self._row]

    @property
    def is_error(self) -> bool:
        """Whether the result is an error."""
        return bool(self._columns.errors[self._row])

    @property
    def transcript_id(self) -> str:
        """The id the transcript gives the call, when it is not `id` (a repeat renamed here)."""
        return self._columns.transcript_ids.get(self._row, "")

    @property
    def source(self) -> Sequence[Entry]:
        """The entries the call and its result are read back from."""
        columns = self._columns
        return columns.sources[columns.source_of[self._row]]

    def _fields(self) -> tuple[object, ...]:
        return (
            self.id,
            self.name,
            self.use_position,
            self.read_path,
            self.write_path,
            self.command,
            self.use_block,
            self.number,
            self.result_position,
            self.result_block,
            self.result_tokens,
            self.is_error,
            self.transcript_id,
        )

    def __eq__(self, other: object) -> bool:
        # Equal when every field but the source is (as the dataclass it was compared).
        if not isinstance(other, ToolCall):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its result changes

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(_FIELDS, self._fields(), strict=True))
        return f"ToolCall({shown})"

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
        position = self.result_position
        if position is None:
            return None
        block = _block_at(self.source, position, self.result_block)
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


class _Calls(Mapping[str, ToolCall]):
    """The index's calls by id, in call order: each read from its row when asked for."""

    __slots__ = ("_columns", "_rows")

    def __init__(self, rows: PackedNames, columns: _CallColumns) -> None:
        self._rows = rows
        self._columns = columns

    def __getitem__(self, name: str) -> ToolCall:
        row = self._rows.number(name) if isinstance(name, str) else -1
        if row < 0:
            raise KeyError(name)
        return ToolCall._of_row(name, self._columns, row)

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def values(self) -> ValuesView[ToolCall]:
        """The calls in call order (each a new reading object of its row)."""
        return _CallValues(self)


class _CallValues(ValuesView[ToolCall]):
    """The calls of a `_Calls`, made from the rows directly (not one dict look-up each)."""

    def __init__(self, calls: _Calls) -> None:
        super().__init__(calls)
        self._calls = calls

    def __iter__(self) -> Iterator[ToolCall]:
        columns = self._calls._columns
        for row, name in enumerate(self._calls._rows):
            yield ToolCall._of_row(name, columns, row)


class TranscriptIndex:
    """Tool calls by id, in call order (see the module docstring).

    It keeps each call's id packed, numbered by its row (`rows`), not an object per call nor
    a str and a dict slot per id: a long replay's index holds every call ever made, and
    `calls` makes a call's object only when one is asked for."""

    __slots__ = ("_columns", "_entries", "_last", "_names", "_reply", "_scanned", "rows")

    def __init__(self) -> None:
        self.rows = PackedNames()
        """The calls' ids in call order: a call's row (its `number`) is its id's number; a
        new one when the index starts again from other entries."""
        self._columns = _CallColumns()
        self._entries: Sequence[Entry] = ()
        self._scanned = 0
        self._last: Entry | None = None
        # A provider may repeat a tool_use id: the repeat is named as the normalizer names it
        # (model/tool_ids.py), so recall finds both calls, each with its own result. The
        # names taken are `rows`, not a second set of them.
        self._names = ToolCallNames(taken=self.rows)
        self._reply: object = None

    @property
    def calls(self) -> Mapping[str, ToolCall]:
        """The calls by id, in call order."""
        return _Calls(self.rows, self._columns)

    def call_at(self, row: int) -> ToolCall:
        """The call of a row (its `number`)."""
        columns = self._columns
        return ToolCall._of_row(self.rows.name(row), columns, row)

    def update(self, entries: Sequence[Entry]) -> TranscriptIndex:
        """Register what was appended since the last call; returns the index."""
        start = self._scanned
        if start > len(entries) or (start and not entry_in_place(entries, start - 1, self._last)):
            self.rows = PackedNames()
            self._columns = _CallColumns()
            self._names = ToolCallNames(taken=self.rows)
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
                    row = self._columns.add(
                        (
                            str(block.get("name", "")),
                            read_path_of(block),
                            file_write_path(block),
                            command_of(block),
                        ),
                        (position, place, len(self.rows)),
                        (None, 0, 0, False),
                        tool_id if tool_id != name else "",
                        self._entries,
                    )
                    # A new name (`ToolCallNames` gives none twice): its number is the row.
                    self.rows.add(name)
            elif kind == "tool_result" and entry.type == "user":
                row = self.rows.number(self._names.result(str(block.get("tool_use_id"))))
                if row >= 0 and self._columns.results[row] == _NONE:
                    self._answer(row, position, place, block)

    def _answer(self, row: int, position: int, place: int, block: Mapping[str, Any]) -> None:
        """Write where a call's result is into its row."""
        columns = self._columns
        # The sequence that holds both positions.
        columns.source_of[row] = columns.source_id(self._entries)
        columns.results[row] = position
        columns.result_blocks[row] = place
        columns.tokens[row] = tool_result_tokens(block)
        columns.errors[row] = bool(block.get("is_error"))

    def get(self, tool_use_id: str) -> ToolCall | None:
        """The call with this id, or None."""
        row = self.rows.number(tool_use_id)
        return None if row < 0 else ToolCall._of_row(tool_use_id, self._columns, row)

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
