"""Each file's text as the conversation last showed it: reads, writes and edits replayed.

After a compaction the rehydrator re-reads the files the agent was working on. Usually it
reads the disk, but a worker that runs a session from a shared store, or a replay of a session
recorded on another machine, has no such disk: the transcript itself is the record. This
module rebuilds what each file held from the tool calls in order:

- a read result is the file's text, with the `     1→` / `     1<TAB>` line-number prefixes
  that agents' read tools add taken off and `<system-reminder>` blocks dropped; a read of a
  line range (offset or limit given) is marked partial, unless the file's whole text is
  known and holds those lines where the read shows them (then the whole text stands);
- a write (`Write`, an editor's `create`) replaces the text with what it wrote;
- an edit (`Edit`, `MultiEdit`, an editor's `str_replace`) is applied to the text when its old
  string is found; otherwise, and for edits the transcript cannot replay (`insert`,
  `undo_edit`, notebook edits), the text is marked unknown, so a stale copy is never
  restored as if it were current;
- an apply_patch (the tool, or a shell command running it) adds a file with its text, applies
  an update's hunks to the text when each hunk's old lines are found (unknown otherwise),
  moves and deletes files; a shell here-document (`cat > f << EOF`) writes its body; a
  command that exits non-zero applies no patch and leaves the files its other writes name
  unknown;
- a shell read of one file (`cat f`, whole; `sed -n 'a,bp' f`, `head`, `tail`, partial) is
  that file's text, read through Codex's output envelope (`unwrap_output`), partial when
  Codex cut lines out of it (`[... omitted N of M lines ...]`); a command that
  shows several files, pipes one, or exits non-zero says nothing of their text;
- a call whose result is an error changes nothing.

A read's or a write's text stays in the transcript: what is held for it is where it is (the
entry's position and the block's place), and the text is made again when a compaction asks
for it, so a long session does not keep every file it ever read twice. Only an edit's
result, which the transcript does not hold as such, is kept as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.compaction.facts import text_of
from unbounded.model.entries import Entry
from unbounded.model.shell_files import ShellRead, WrittenFile, output_cut, unwrap_output
from unbounded.model.spilled_entries import entry_in_place
from unbounded.model.tools import (
    file_read_path,
    file_shell_reads,
    file_write_path,
    file_writes,
    shell_command,
)

UNCHANGED_STUB_PREFIX = "File unchanged since last read"
"""How Claude Code's FILE_UNCHANGED stub result begins (a read that returned no content)."""
_LINE_NUMBER = re.compile(r"^ *\d+(?:→|\t)", re.MULTILINE)
_REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
_RANGE_KEYS = ("offset", "limit", "view_range", "line_range")
_PATCH_ACTIONS = frozenset({"add", "update", "delete"})
_SED_RANGE = re.compile(r"\bsed\s+-n\s+['\"]?(\d+)(?:,\d+)?p['\"]?\s")
_HEAD = re.compile(r"(?:^|[;&|]\s*)head\b")


class AppendedSince:
    """Which entries of a list are new since the last call: the list must be the same object,
    grown only at its end (its last seen entry still in place); anything else starts over."""

    def __init__(self) -> None:
        self._seen: Sequence[Entry] | None = None
        self._count = 0
        self._last: Entry | None = None

    def start(self, entries: Sequence[Entry]) -> int | None:
        """The index the new entries start at, or None when the caller must start over."""
        count = self._count
        grown = (
            entries is self._seen
            and len(entries) >= count
            and (count == 0 or entry_in_place(entries, count - 1, self._last))
        )
        self._seen, self._count = entries, len(entries)
        self._last = entries[-1] if entries else None
        return count if grown else None


class RecordedFile:
    """What the transcript last showed of one file: its text (None when a later change
    cannot be replayed from the transcript) and whether that is a line range of the file
    (`partial`). Equal by both."""

    __slots__ = ("_place", "_source", "_text", "partial")

    def __init__(self, text: str | None, partial: bool = False) -> None:
        """A file whose text is given."""
        self._text = text
        self.partial = partial
        self._source: Sequence[Entry] | None = None
        self._place = (0, 0, False)

    @classmethod
    def shown_at(
        cls,
        source: Sequence[Entry],
        position: int,
        place: int,
        partial: bool = False,
        *,
        shell: bool = False,
    ) -> RecordedFile:
        """The file as block `place` of entry `position` of `source` shows it (a read's
        result or a write's call; `shell`: a shell read's output, in its envelope): its text
        is made from there when it is read."""
        shown = cls(None, partial)
        shown._source = source
        shown._place = (position, place, shell)
        return shown

    @property
    def text(self) -> str | None:
        """The file's text; None when a later change cannot be replayed from the transcript."""
        if self._source is None:
            return self._text
        position, place, shell = self._place
        block = _block_at(self._source, position, place)
        if block.get("type") == "tool_result":
            if shell:
                return unwrap_output(text_of(block.get("content")))[0]
            return strip_line_numbers(text_of(block.get("content")))
        return _written_text(block)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordedFile):
            return NotImplemented
        return (self.text, self.partial) == (other.text, other.partial)

    def __hash__(self) -> int:
        return hash((self.text, self.partial))

    def __repr__(self) -> str:
        return f"RecordedFile(text={self.text!r}, partial={self.partial!r})"


def strip_line_numbers(text: str) -> str:
    """A read result's text without its reminders and, when every line has one, without the
    line-number prefixes read tools add."""
    without = _REMINDER.sub("\n", text)
    if without != text:  # the reminders' own line breaks go with them
        text = without.strip("\n")
    lines = text.split("\n")
    if lines and all(_LINE_NUMBER.match(line) for line in lines if line):
        return _LINE_NUMBER.sub("", text)
    return text


def _known_lines_agree(before: RecordedFile | None, shown: str, first_line: int | None) -> bool:
    """Whether a read of part of a file shows whole lines its known whole text holds where the
    read puts them (the line numbers it prints, else `first_line`, the line the call asked to
    start at): then the whole text still stands, and a later edit can be replayed on it. A read
    that says neither where it starts agrees with nothing."""
    known = before.text if before is not None and not before.partial else None
    if not known:
        return False
    numbered = _LINE_NUMBER.match(shown.lstrip("\n"))
    if numbered is not None:
        first_line = int(numbered.group(0).strip(" →\t"))
    if first_line is None or first_line < 1:
        return False
    lines = strip_line_numbers(shown).split("\n")
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        return False
    start = first_line - 1
    return known.split("\n")[start : start + len(lines)] == lines


def _first_line_asked(tool_input: Mapping[str, Any]) -> int | None:
    """The line a file tool's ranged read starts at (`offset`, 1-based; `view_range`'s
    first), when the call gives it as a number."""
    offset = tool_input.get("offset")
    if isinstance(offset, int) and not isinstance(offset, bool):
        return offset
    view = tool_input.get("view_range")
    if isinstance(view, list) and view and isinstance(view[0], int):
        return int(view[0])
    return None


def _first_line_shown(command: str | None) -> int | None:
    """The line a shell range read starts at: `sed -n 'A,Bp'` (or `Ap`) gives A, `head` 1."""
    if command is None:
        return None
    found = _SED_RANGE.search(command)
    if found is not None:
        return int(found.group(1))
    return 1 if _HEAD.search(command) else None


def _block_at(entries: Sequence[Entry], position: int, place: int) -> Mapping[str, Any]:
    """Block `place` of entry `position` (empty when there is no such dict block: only
    when the entries were changed in place since they were read, which they are not)."""
    content = entries[position].content
    block = content[place] if isinstance(content, list) and place < len(content) else None
    return block if isinstance(block, dict) else {}


def _input(block: Mapping[str, Any]) -> Mapping[str, Any]:
    value = block.get("input")
    return value if isinstance(value, Mapping) else {}


def _replace(text: str, old: object, new: object, replace_all: object = False) -> str | None:
    if not isinstance(old, str) or not isinstance(new, str) or not old or old not in text:
        return None
    return text.replace(old, new) if replace_all is True else text.replace(old, new, 1)


def _written_text(block: Mapping[str, Any]) -> str | None:
    """The whole text a write call wrote (None for a call that is not such a write)."""
    tool_input = _input(block)
    name = block.get("name")
    command = tool_input.get("command")
    for key in ("content", "file_text"):
        written = tool_input.get(key)
        if isinstance(written, str) and (
            name in ("Write", "write_file", "write") or command in ("create", "write")
        ):
            return written
    return None


def _after_write(block: Mapping[str, Any], before: RecordedFile | None) -> RecordedFile:
    """The file after a successful call that edits it (not a whole write: `_written_text`)."""
    tool_input = _input(block)
    text = before.text if before is not None and not before.partial else None
    if text is None:
        return RecordedFile(None)
    if isinstance(tool_input.get("edits"), list):  # MultiEdit: applied in order
        for edit in tool_input["edits"]:
            if not isinstance(edit, Mapping):
                return RecordedFile(None)
            changed = _replace(
                text, edit.get("old_string"), edit.get("new_string"), edit.get("replace_all")
            )
            if changed is None:
                return RecordedFile(None)
            text = changed
        return RecordedFile(text)
    old = tool_input.get("old_string", tool_input.get("old_str"))
    new = tool_input.get("new_string", tool_input.get("new_str"))
    changed = _replace(text, old, new, tool_input.get("replace_all"))
    return RecordedFile(changed)


def recorded_files(entries: Sequence[Entry]) -> dict[str, RecordedFile]:
    """path -> what the transcript last showed of it, over `entries` in order."""
    return RecordedFilesReader().read(entries)


class RecordedFilesReader:
    """`recorded_files` over a transcript that only grows: each call reads the entries added
    since the last one; a list that is not the last one grown is read from the start."""

    def __init__(self) -> None:
        # Kept across resets: it has just seen the list a reset starts reading.
        self._since = AppendedSince()
        self._reset()

    def _reset(self) -> None:
        self.files: dict[str, RecordedFile] = {}
        # A file call waiting for its result: path, where the call is (entry position and
        # block place, read back when the result comes), and whether it reads.
        self._pending: dict[str, tuple[str, int, int, bool]] = {}
        # A shell or patch call waiting for its result: the files it writes, or the one file
        # it shows (with whether that is all of it).
        self._shell: dict[str, tuple[WrittenFile, ...] | ShellRead] = {}
        # Where a shell read of part of a file starts, when its command says (sed -n, head).
        self._shell_first_line: dict[str, int | None] = {}
        self._entries: Sequence[Entry] = ()

    def read(self, entries: Sequence[Entry]) -> dict[str, RecordedFile]:
        """path -> what these entries last showed of it (a new dict)."""
        start = self._since.start(entries)
        if start is None:
            self._reset()
            start = 0
        self._entries = entries
        for index in range(start, len(entries)):
            self._feed(index, entries[index])
        return dict(self.files)

    def _feed(self, position: int, entry: Entry) -> None:
        content = entry.content
        if not isinstance(content, list):
            return
        for place, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use" and entry.type == "assistant":
                read = file_read_path(block)
                written = None if read else file_write_path(block)
                path = read or written
                call_id = str(block.get("id", ""))
                changes = file_writes(block)
                if changes:
                    self._shell[call_id] = changes
                elif path:
                    self._pending[call_id] = (path, position, place, read is not None)
                else:
                    reads = file_shell_reads(block)
                    if len(reads) == 1:
                        self._shell[call_id] = reads[0]
                        self._shell_first_line[call_id] = _first_line_shown(shell_command(block))
            elif kind == "tool_result":
                call_id = str(block.get("tool_use_id", ""))
                if self._shell and call_id in self._shell:
                    first_line = self._shell_first_line.pop(call_id, None)
                    self._shell_result(self._shell.pop(call_id), block, position, place, first_line)
                    continue
                call = self._pending.pop(call_id, None)
                if call is None or block.get("is_error") is True:
                    continue
                path, use_position, use_place, is_read = call
                use = _block_at(self._entries, use_position, use_place)
                shown = self._entries
                if is_read:
                    text = strip_line_numbers(text_of(block.get("content")))
                    if text.lstrip().startswith(UNCHANGED_STUB_PREFIX):
                        continue  # the stub says the earlier text still holds
                    ranged = any(_input(use).get(key) is not None for key in _RANGE_KEYS)
                    if ranged and _known_lines_agree(
                        self.files.get(path),
                        text_of(block.get("content")),
                        _first_line_asked(_input(use)),
                    ):
                        continue  # a look at lines the known whole text already holds
                    self.files[path] = RecordedFile.shown_at(shown, position, place, ranged)
                elif _written_text(use) is not None:
                    self.files[path] = RecordedFile.shown_at(shown, use_position, use_place)
                else:
                    self.files[path] = _after_write(use, self.files.get(path))

    def _shell_result(
        self,
        call: tuple[WrittenFile, ...] | ShellRead,
        block: Mapping[str, Any],
        position: int,
        place: int,
        first_line: int | None = None,
    ) -> None:
        """A shell or patch call's result: its writes done, or the file it showed (from
        `first_line`, when its command says)."""
        if block.get("is_error") is True:
            return
        if isinstance(call, ShellRead):
            output, exit_code = unwrap_output(text_of(block.get("content")))
            if exit_code and exit_code != 0:
                return
            partial = not call.whole or output_cut(output)
            if partial and _known_lines_agree(self.files.get(call.path), output, first_line):
                return  # a look at lines the known whole text already holds
            self.files[call.path] = RecordedFile.shown_at(
                self._entries, position, place, partial, shell=True
            )
            return
        failed = bool(unwrap_output(text_of(block.get("content")))[1])
        for change in call:
            if failed:
                # apply_patch writes nothing when a hunk fails; a here-document or a `sed -i`
                # may have run before what failed: not known.
                if change.action not in _PATCH_ACTIONS:
                    self.files[change.path] = RecordedFile(None)
                continue
            if change.action == "delete":
                self.files.pop(change.path, None)
                continue
            before = self.files.get(change.path)
            known = before.text if before is not None and not before.partial else None
            after = RecordedFile(change.applied_to(known))
            if change.moved_to:
                self.files.pop(change.path, None)
                self.files[change.moved_to] = after
            else:
                self.files[change.path] = after
