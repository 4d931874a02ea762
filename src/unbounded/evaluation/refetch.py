"""Re-fetches in a replay: what `recall` would have saved.

When a tool result leaves the context (cleared by microcompaction, or summarized away by a
compaction), an agent that needs it again can only run the command again or read the file
again. For each recorded call, `RefetchCounter.observe` looks at the tool calls of the
recorded response and counts as a **re-fetch** one that

- reads a file (with the same other arguments: offset, limit, range), or runs a shell
  command (whitespace collapsed), that an earlier call of the session read or ran without
  an error,
- with no write to that file (for a read) or no write to any file (for a command) between
  the two, so the earlier output still held, and
- whose earlier result is not in the request our pipeline prepared for this call (cleared
  to a placeholder, or no longer in the messages at all).

For each, `refetch_tokens` adds what the re-fetch put into the context (the call's input
and, once it arrives, its result; length / 4) and `recall_tokens` what a `recall` of the
earlier result by its id would have put there instead (the call and the answer
`answer_recall` gives under the policy's `recall_max_tokens`). The recorded agent did not
have recall: these are the tokens it would have moved, not a prediction of what it would
have done.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from unbounded.compaction.tools_registry import is_cleared_text
from unbounded.model.request import ProviderRequest
from unbounded.model.tool_ids import PackedNames
from unbounded.recall.index import (
    ToolCall,
    TranscriptIndex,
    command_of,
    normalize_command,
    read_path_of,
    same_path,
)
from unbounded.recall.lookup import RecallContext, answer_recall
from unbounded.recall.schema import RECALL_TOOL_NAME, RecallRequest
from unbounded.session import Session
from unbounded.tokens.estimate import rough_token_count


@dataclass(slots=True)
class RecallTally:
    """Re-fetches of results our policy had taken out, and what recalls would have cost."""

    refetches: int = 0
    refetch_tokens: int = 0
    recall_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        """The `recall` object of `replay --json`."""
        return {
            "refetches": self.refetches,
            "refetch_tokens": self.refetch_tokens,
            "recall_tokens": self.recall_tokens,
        }


def _visible_results(request: ProviderRequest) -> set[str]:
    """Tool calls whose result the request carries (not cleared)."""
    visible: set[str] = set()
    for message in request["messages"]:
        content = message["content"]
        if isinstance(content, str):
            continue
        for block in content:
            if block.get("type") != "tool_result":
                continue
            value = block.get("content")
            text = value if isinstance(value, str) else None
            if isinstance(value, list) and len(value) == 1 and isinstance(value[0], Mapping):
                text = value[0].get("text")
            if not is_cleared_text(text):
                visible.add(str(block.get("tool_use_id")))
    return visible


_PATH_KEYS = frozenset({"file_path", "path", "notebook_path", "filename", "command"})


def _other_arguments(tool_input: object) -> dict[str, Any]:
    """A read's arguments besides the path (offset, limit, view range…)."""
    if not isinstance(tool_input, Mapping):
        return {}
    return {k: v for k, v in tool_input.items() if k not in _PATH_KEYS}


def _input_tokens(block: Mapping[str, Any]) -> int:
    try:
        text = orjson.dumps(block.get("input")).decode()
    except TypeError:
        text = str(block.get("input"))
    return rough_token_count(str(block.get("name", "")) + text)


class _CallLookup:
    """The index's tool calls grouped by what a re-fetch search compares: the last part of
    each path read or written, the command run, and the latest write, so a search walks
    only the calls that can answer it (walking every call made a long replay quadratic).

    It holds the calls' rows (their `number`), packed: a long replay's index keeps every
    call ever made as a row of columns, and an object per call held here would undo that."""

    def __init__(self) -> None:
        self.index: TranscriptIndex | None = None
        self.rows: PackedNames | None = None
        """The index's ids these groups were made from (a new one: start again)."""
        self.seen = 0
        self.by_name: dict[str, array[int]] = {}
        self.by_command: dict[str, array[int]] = {}
        self.last_write = -1
        """The `number` of the latest call that wrote a file (-1: none yet)."""
        self.read_arguments: dict[int, dict[str, Any]] = {}
        """A read's other arguments (offset, limit…) by its `number`, for reads that have any:
        taken once here, so a search does not read every earlier call's input back."""
        self._argument_sets: dict[str, dict[str, Any]] = {}

    def sync(self, index: TranscriptIndex) -> None:
        """Take in the calls added to the index since the last sync."""
        rows = index.rows
        if rows is not self.rows or len(rows) < self.seen:
            self.rows, self.seen = rows, 0
            self.by_name, self.by_command, self.last_write = {}, {}, -1
            self.read_arguments, self._argument_sets = {}, {}
        self.index = index
        for row in range(self.seen, len(rows)):
            call = index.call_at(row)
            names = {_last_part(p) for p in (call.read_path, call.write_path) if p is not None}
            for name in sorted(names):
                self.by_name.setdefault(name, array("q")).append(row)
            if call.command:
                self.by_command.setdefault(normalize_command(call.command), array("q")).append(row)
            if call.write_path is not None:
                self.last_write = row
            if call.read_path is not None and (arguments := _other_arguments(call.input)):
                # Reads repeat their arguments (`limit`, `pattern`): one dict for each spelling.
                shared = self._argument_sets.setdefault(repr(sorted(arguments.items())), arguments)
                self.read_arguments[row] = shared
        self.seen = len(rows)

    def earlier_fetch(self, use: Mapping[str, Any]) -> ToolCall | None:
        """The latest earlier call with the same read or command whose output still holds."""
        index = self.index
        if index is None:
            return None
        path = read_path_of(use)
        if path is not None:
            # Every call touching a file of this name, newest first: the first write to the
            # file ends the search, the first good read with the same arguments answers it.
            arguments = _other_arguments(use.get("input"))
            for row in reversed(self.by_name.get(_last_part(path), ())):
                call = index.call_at(row)
                if call.write_path is not None and same_path(call.write_path, path):
                    return None
                if call.result_position is None or call.is_error:
                    continue
                if (
                    call.read_path is not None
                    and same_path(call.read_path, path)
                    and self.read_arguments.get(row, {}) == arguments
                ):
                    return call
            return None
        command = command_of(use)
        if command is None:
            return None
        # The newest good run of the command after the last write to any file.
        for row in reversed(self.by_command.get(normalize_command(command), ())):
            if row <= self.last_write:
                return None
            call = index.call_at(row)
            if call.result_position is None or call.is_error:
                continue
            return call
        return None


def _last_part(path: str) -> str:
    """What follows a path's last separator (two paths `same_path` matches share it)."""
    return _SEPARATOR.split(path)[-1]


_SEPARATOR = re.compile(r"[/\\]")


class RefetchCounter:
    """Counts re-fetches over a replay (see the module docstring)."""

    def __init__(self) -> None:
        self.tally = RecallTally()
        self._waiting: list[str] = []
        """Re-fetches whose result has not arrived yet."""
        self._lookup = _CallLookup()

    def observe(
        self,
        session: Session,
        request: ProviderRequest,
        content: Sequence[Mapping[str, Any]],
    ) -> None:
        """Count the re-fetches among the tool calls of a recorded response, given the request
        our pipeline prepared for it."""
        uses = [b for b in content if b.get("type") == "tool_use"]
        if not uses and not self._waiting:
            return
        index = session.recall_index.update(session.entries)
        self._count_results(session)
        self._lookup.sync(index)
        visible: set[str] | None = None
        for use in uses:
            earlier = self._lookup.earlier_fetch(use)
            if earlier is None:
                continue
            if visible is None:
                visible = _visible_results(request)
            if earlier.id in visible:
                continue
            self.tally.refetches += 1
            self.tally.refetch_tokens += _input_tokens(use)
            self.tally.recall_tokens += _recall_cost(session, earlier)
            self._waiting.append(str(use.get("id")))

    def finish(self, session: Session) -> RecallTally:
        """Count the results that arrived after the last call; returns the tally."""
        session.recall_index.update(session.entries)
        self._count_results(session)
        return self.tally

    def _count_results(self, session: Session) -> None:
        index = session.recall_index
        waiting: list[str] = []
        for tool_id in self._waiting:
            call = index.get(tool_id)
            if call is None or call.result_position is None:
                waiting.append(tool_id)
            else:
                self.tally.refetch_tokens += call.result_tokens
        self._waiting = waiting


def _recall_cost(session: Session, earlier: ToolCall) -> int:
    """Tokens a recall of the earlier result would add: the call and its answer."""
    context = RecallContext(
        entries=session.entries,
        view=session.view,
        cleared_ids=session.micro.cleared_ids,
        index=session.recall_index,
        budget_tokens=session.policy.recall_max_tokens,
        load_output=session.store.load_tool_output,
    )
    answer = answer_recall(RecallRequest("id", earlier.id), context)
    call = {"name": RECALL_TOOL_NAME, "input": {"id": earlier.id}}
    return _input_tokens(call) + rough_token_count(answer.text)
