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
from array import array
from collections.abc import Container, Iterator, Sequence
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


def _utf8(name: str) -> bytes:
    """A name's bytes; a lone surrogate (which no JSON file parses to, a caller may pass)
    is kept as it is, so every str has its own bytes and comes back the same."""
    return name.encode(errors="surrogatepass")


class PackedNames:
    """A set of names (`add`, `in`, `len`), each numbered in the order it was added (`number`,
    `name`, iteration), held as UTF-8 in one buffer and found through an open-addressed table
    of their numbers: no str object and no set or dict slot per name. A long conversation
    keeps every tool call's name for its whole length, after the messages that carried the
    names were let go (about 50 bytes a name here, some 120 in a set of strs)."""

    __slots__ = ("_data", "_ends", "_table")

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")
        """Name k is `_data[_ends[k - 1]:_ends[k]]` (from 0 for the first)."""
        self._table = array("i", [-1]) * 8
        """Open addressing by the name's hash: a name's number, or -1 for a free slot; kept
        at most half full, so a probe ends soon at the name or at a free slot."""

    def __len__(self) -> int:
        return len(self._ends)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(_utf8(name))[1] >= 0

    def __iter__(self) -> Iterator[str]:
        """The names in the order they were added."""
        return (self.name(number) for number in range(len(self._ends)))

    def add(self, name: str) -> int:
        """Hold `name`; its number (the one it had when it is held already)."""
        raw = _utf8(name)
        slot, number = self._find(raw)
        if number >= 0:
            return number
        self._data += raw
        self._ends.append(len(self._data))
        number = len(self._ends) - 1
        self._table[slot] = number
        if 2 * len(self._ends) > len(self._table):
            self._grow()
        return number

    def number(self, name: str) -> int:
        """The name's number (its place in the order of adding), or -1 when not held."""
        return self._find(_utf8(name))[1]

    def name(self, number: int) -> str:
        """The name with this number."""
        if not 0 <= number < len(self._ends):
            raise IndexError(f"no name number {number} among {len(self._ends)}")
        return self._name(number).decode(errors="surrogatepass")

    def nbytes(self) -> int:
        """Bytes the three buffers hold (what the names cost, apart from this object)."""
        return (
            len(self._data)
            + self._ends.itemsize * len(self._ends)
            + self._table.itemsize * len(self._table)
        )

    def _name(self, number: int) -> bytes:
        start = self._ends[number - 1] if number else 0
        return bytes(self._data[start : self._ends[number]])

    def _find(self, raw: bytes) -> tuple[int, int]:
        """(slot, number) of the name: its slot and number when held, else the free slot
        where it would go and -1. The hash only places names; equality decides."""
        table = self._table
        mask = len(table) - 1
        slot = hash(raw) & mask
        while True:
            number = table[slot]
            if number < 0 or self._name(number) == raw:
                return slot, number
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        table = array("i", [-1]) * (2 * len(self._table))
        mask = len(table) - 1
        for number in range(len(self._ends)):
            slot = hash(self._name(number)) & mask
            while table[slot] >= 0:
                slot = (slot + 1) & mask
            table[slot] = number
        self._table = table


class ToolCallNames:
    """Names the tool calls of a conversation read in order (see the module docstring)."""

    __slots__ = ("_open", "_own", "_taken")

    def __init__(self, taken: Container[str] | None = None) -> None:
        """`taken`: the names given so far, when the caller keeps them itself (it must add
        each name `call` returns before the next call); by default they are kept here,
        packed (`PackedNames`)."""
        self._own: PackedNames | None = None
        if taken is None:
            taken = self._own = PackedNames()
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
