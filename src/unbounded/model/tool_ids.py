"""Distinct, valid ids for the tool calls of one conversation, whatever the provider sent.

The Messages API refuses two tool_use blocks with one id, and an id with a character outside
letters, digits, `_` and `-` (`TOOL_USE_ID`), yet some providers number calls per reply
(`functions.Bash:0` in every reply) or a proxy reuses ids. Dropping such a call would lose it
and its result, so it is renamed instead, the same way everywhere: other characters become
`_`, and an id already taken in the conversation gets `_2` (or `_3`, ... the first name not
taken yet). Its result, which still names the id the provider gave, gets the new name too: a
result names the earliest call of the same reply with that original id that has no result yet
(two calls with one id in one reply are answered in order).

`Session.record` renames as a reply arrives (the transcript then holds distinct ids, and the
original id in the record's `toolUseIdsRenamed`); the normalizer and the recall index apply
the same rule to transcripts written elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from typing import Any

TOOL_USE_ID = re.compile(r"[A-Za-z0-9_-]+")
"""What the Messages API accepts as a tool_use id (the whole id)."""
_OTHER = re.compile(r"[^A-Za-z0-9_-]")

RENAMED_FIELD = "toolUseIdsRenamed"
"""A record's field mapping the new name of each renamed call to the id the provider gave."""


def renamed_tool_id(tool_id: str, taken: Container[str]) -> str:
    """The name a tool call with this id gets when `taken` holds the names already given:
    the id with other characters as `_` (`tool` when empty), then `_2`, `_3`, ... until free."""
    valid = _OTHER.sub("_", tool_id) or "tool"
    if valid not in taken:
        return valid
    number = 2
    while f"{valid}_{number}" in taken:
        number += 1
    return f"{valid}_{number}"


class ToolCallNames:
    """Names the tool calls of a conversation read in order (see the module docstring)."""

    __slots__ = ("_open", "_own", "_taken")

    def __init__(self, taken: Container[str] | None = None) -> None:
        """`taken`: the names given so far, when the caller keeps them itself (it must add
        each name `call` returns before the next call); by default they are kept here."""
        self._own: set[str] | None = None
        if taken is None:
            taken = self._own = set()
        self._taken = taken
        # Original id -> names of this reply's calls with that id still waiting for a result.
        self._open: dict[str, list[str]] = {}

    def new_reply(self) -> None:
        """A new reply begins: results from now on answer its calls only."""
        self._open.clear()

    def call(self, tool_id: str) -> str:
        """The name of a tool call with this id (the id itself when valid and not taken)."""
        name = renamed_tool_id(tool_id, self._taken)
        if self._own is not None:
            self._own.add(name)
        self._open.setdefault(tool_id, []).append(name)
        return name

    def result(self, tool_use_id: str) -> str:
        """The name of the call a result with this tool_use_id answers (the id itself when
        no call of the reply waits for it: an orphan or a repeated result)."""
        return _claim(self._open, tool_use_id)

    def __contains__(self, name: object) -> bool:
        return name in self._taken


def name_results(
    blocks: Sequence[dict[str, Any]], calls: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """`blocks` with each tool_result named for the call it answers (`calls`: the original id
    and the name of each call of the reply, in order), by the rule of `ToolCallNames.result`;
    a block is copied only when its name changes."""
    waiting: dict[str, list[str]] = {}
    for tool_id, name in calls:
        waiting.setdefault(tool_id, []).append(name)
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "tool_result":
            tool_id = str(block.get("tool_use_id"))
            name = _claim(waiting, tool_id)
            if name != tool_id:
                block = {**block, "tool_use_id": name}
        out.append(block)
    return out


def _claim(waiting: dict[str, list[str]], tool_use_id: str) -> str:
    """The call a result answers, taken off `waiting` (original id -> names still waiting):
    the call named so itself, else the earliest waiting call with that original id, else
    none (the id is returned as it is)."""
    for names in waiting.values():
        if tool_use_id in names:
            names.remove(tool_use_id)
            return tool_use_id
    same_id = waiting.get(tool_use_id)
    return same_id.pop(0) if same_id else tool_use_id
