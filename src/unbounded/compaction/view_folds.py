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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        self.first: dict[str, int] = {}
        """uuid (a string) -> the position of the first record carrying it."""
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
        if type(uuid) is str and uuid not in self.first:
            self.first[uuid] = index


__all__ = [
    "REWRITTEN_BLOCKS",
    "REWRITTEN_INSIDE",
    "ViewFacts",
    "ViewFolds",
    "holds_rewritten_block",
    "may_be_rewritten",
]
