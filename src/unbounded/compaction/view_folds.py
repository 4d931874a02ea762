"""What a compaction reads of the whole view, kept up to date as the view grows.

A compaction at 10,000 records would otherwise walk the whole view several times on the one
call that compacts: for the tools it called (the boundary's `preCompactDiscoveredTools`),
for its messages (`messagesSummarized`) and for where the kept tail starts. `ViewFolds`
reads each record once, when a session shows it the view on each turn, so the compacting
call reads only the records of that turn.

Shape: a fold over a list that only grows (`read_mark.ReadMark`, as the working-state reader
does). A list that is not the last one grown (a compaction's new view, a discarded reply, a
rewound or reloaded session) is read again from its start: the folds are then what reading
it from scratch gives, by construction. A record of an odd shape that the from-scratch path
would fail on makes the folds unusable (`usable` False), so that path runs and fails as it
did.

`PrefixFolds` keeps the same folds for every prefix of a list that grows (a LangChain
middleware's view, whose compaction summarizes all but a kept tail): each fact is kept with
the first position that gave it, so the folds of a prefix are read off without reading its
records, and handed to the summary as a `ViewFolds` that has read exactly that prefix.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import compress
from operator import is_not
from typing import NamedTuple

from unbounded.compaction.read_mark import ReadMark
from unbounded.model.entries import Entry
from unbounded.wire.context_edits import COMPACTION_BLOCK

_MESSAGE_TYPES = ("user", "assistant")
REWRITTEN_BLOCKS = frozenset({"image", "document", COMPACTION_BLOCK})
"""Blocks a summary request rewrites (media as text, server compactions as their summary)."""
REWRITTEN_INSIDE = REWRITTEN_BLOCKS | {"tool_result"}
"""The same inside a tool result (a nested result is looked into)."""


def may_be_rewritten(kind: object, kinds: frozenset[str]) -> bool:
    """Whether a block of type `kind` is one the rewrites change. A type that is not a string
    (malformed input) never is: the rewrites compare types with `==` and send it as it is."""
    return isinstance(kind, str) and kind in kinds


def holds_rewritten_block(content: object) -> bool:
    """Whether a message's content holds a block a summary request rewrites (at the top, or
    inside a tool result's list content)."""
    if not isinstance(content, list):
        return False
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if may_be_rewritten(kind, REWRITTEN_BLOCKS):
            return True
        if kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list) and any(
                isinstance(part, Mapping) and may_be_rewritten(part.get("type"), REWRITTEN_INSIDE)
                for part in inner
            ):
                return True
    return False


class ViewFacts(NamedTuple):
    """What a summary reads of its whole view, taken from `ViewFolds` when it starts."""

    tools: list[str]
    """The tools the view called, sorted (`cut.discovered_tools`)."""
    messages: int
    """Its user and assistant records."""
    rewritten: bool
    """Whether a record may hold a block a summary request rewrites."""


class ViewFolds:
    """The tools a view called, its user and assistant records, and each uuid's first
    position, over a view that only grows (read from the start when it is another list)."""

    def __init__(self) -> None:
        self._mark = ReadMark()
        self._reset()

    def _reset(self) -> None:
        self.tools: set[str] = set()
        """Names of the tools the view's assistant records called (`cut.discovered_tools`)."""
        self.messages = 0
        """User and assistant records in the view."""
        self._first: dict[str, int] | None = {}
        """uuid (a string) -> the position of the first record carrying it (None: not read
        yet, read from the list when asked: `read_as`)."""
        self._read: Sequence[Entry] = ()
        """The list `read_as` stands for."""
        self.usable = True
        """False once a record the from-scratch folds would fail on was read."""
        self.rewritten = False
        """A record holds a block a summary request rewrites (`holds_rewritten_block`): the
        messages normalized from the view (clears applied or not) can hold one only then,
        since normalizing and clearing add text, never media or server compactions."""

    def advance(self, view: Sequence[Entry], limit: int | None = None) -> bool:
        """Read the records `view` added since the last call (from its start for another
        list), at most `limit` of them (None: all). True when all of them are read."""
        restart, start, end = self._mark.span(view, limit)
        if restart:
            self._reset()
        for index in range(start, end):
            self._feed(index, view[index])
        return end == len(view)

    @classmethod
    def read_as(
        cls, view: Sequence[Entry], *, tools: set[str], messages: int, rewritten: bool
    ) -> ViewFolds:
        """The folds of `view` as a reader of it would have them, given by a caller that knows
        them (`PrefixFolds.folds_of`): marked as read to its end, nothing of it read here (the
        uuids' first positions are read only if asked for, `first`)."""
        folds = cls()
        folds._mark.span(view)
        folds.tools = tools
        folds.messages = messages
        folds.rewritten = rewritten
        folds._first = None
        folds._read = view
        return folds

    @property
    def first(self) -> dict[str, int]:
        """uuid (a string) -> the position of the first record carrying it."""
        return self._first_positions()

    def _first_positions(self) -> dict[str, int]:
        first = self._first
        if first is None:
            first = self._first = {}
            for index, entry in enumerate(self._read):
                uuid = entry.uuid
                if type(uuid) is str and uuid not in first:
                    first[uuid] = index
            self._read = ()
        return first

    def facts(self) -> ViewFacts | None:
        """The folds as they are now (None when a record made them unusable)."""
        if not self.usable:
            return None
        return ViewFacts(sorted(self.tools), self.messages, self.rewritten)

    def _feed(self, index: int, entry: Entry) -> None:
        kind = entry.type
        if not self.rewritten and holds_rewritten_block(entry.content):
            self.rewritten = True
        if kind in _MESSAGE_TYPES:
            self.messages += 1
            if kind == "assistant":
                content = entry.content
                if isinstance(content, list):
                    for block in content:
                        if not isinstance(block, dict):
                            # `discovered_tools` would fail on it: leave the answer to it.
                            self.usable = False
                        elif block.get("type") == "tool_use":
                            self.tools.add(str(block.get("name")))
        uuid = entry.uuid
        first = self._first_positions()
        if type(uuid) is str and uuid not in first:
            first[uuid] = index


class PrefixFolds:
    """The `ViewFolds` facts of every prefix of a list of records that grows (`None` for a
    message never sent), folded as it grows: the first position of each tool called, of a
    block a summary request rewrites and of a record the tools walk would fail on, and the
    positions holding no user or assistant record. A record replaced after it was folded (a
    result cleared: its placeholder) changes nothing when both are user records (a
    placeholder's media can only be fewer: `rewritten` stays as the first record gave it);
    otherwise the folds stop at it until `reset`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Another list: fold it from its first record."""
        self.count = 0
        """How many records of the list are folded."""
        self._tools: dict[str, int] = {}
        """Name -> the first position whose assistant record calls it."""
        self._others: list[int] = []
        """Positions of records that are not user or assistant ones (None included)."""
        self._rewritten_at: int | None = None
        self._unusable_at: int | None = None
        self._stopped: int | None = None

    def advance(self, records: Sequence[Entry | None], limit: int) -> None:
        """Fold the next records of the list, at most `limit` of them."""
        end = min(len(records), self.count + limit)
        for position in range(self.count, end):
            self._feed(position, records[position])
        self.count = max(self.count, end)

    def _feed(self, position: int, entry: Entry | None) -> None:
        if entry is None:
            self._others.append(position)
            return
        if self._rewritten_at is None and holds_rewritten_block(entry.content):
            self._rewritten_at = position
        kind = entry.type
        if kind not in _MESSAGE_TYPES:
            self._others.append(position)
            return
        if kind != "assistant":
            return
        content = entry.content
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                if self._unusable_at is None:
                    self._unusable_at = position
            elif block.get("type") == "tool_use":
                self._tools.setdefault(str(block.get("name")), position)

    def replaced(self, position: int, old: Entry | None, new: Entry | None) -> None:
        """The record at `position`, folded as `old` when it was folded, is now `new`."""
        if position >= self.count:
            return
        if not _same_folds(old, new) and (self._stopped is None or position < self._stopped):
            self._stopped = position
        if new is not None and holds_rewritten_block(new.content):
            at = self._rewritten_at
            self._rewritten_at = position if at is None else min(at, position)

    def folds_of(
        self,
        head: Sequence[Entry | None],
        records: Sequence[Entry | None],
        view: Sequence[Entry],
    ) -> ViewFolds | None:
        """The folds of `view`, `[e for e in head if e is not None]`, where `head` is the first
        records of the list as a compaction holds them (`records`: the list as it is now, from
        which `head` may differ by user records only: results cleared since); None when they
        are not known (not folded that far, stopped before, a record the tools walk fails on,
        or a differing record of another kind)."""
        length = len(head)
        if self.count < length or len(records) < length:
            return None
        if self._stopped is not None and self._stopped < length:
            return None
        if self._unusable_at is not None and self._unusable_at < length:
            return None
        rewritten = self._rewritten_at is not None and self._rewritten_at < length
        for position in compress(range(length), map(is_not, head, records[:length])):
            record = head[position]
            if not _same_folds(records[position], record):
                return None
            if record is not None and holds_rewritten_block(record.content):
                rewritten = True
        tools = {name for name, at in self._tools.items() if at < length}
        messages = length - bisect_left(self._others, length)
        return ViewFolds.read_as(view, tools=tools, messages=messages, rewritten=rewritten)


def _same_folds(old: Entry | None, new: Entry | None) -> bool:
    """Two records that give the same folds but for media: both user records."""
    return old is not None and new is not None and old.type == "user" == new.type


__all__ = [
    "REWRITTEN_BLOCKS",
    "REWRITTEN_INSIDE",
    "PrefixFolds",
    "ViewFacts",
    "ViewFolds",
    "holds_rewritten_block",
    "may_be_rewritten",
]
