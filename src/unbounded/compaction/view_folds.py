"""What a compaction reads of the whole view, kept up to date as the view grows.

A compaction at 10,000 records would otherwise walk the whole view several times on the one
call that compacts: for the tools it called (the boundary's `preCompactDiscoveredTools`),
for its messages (`messagesSummarized`) and for where the kept tail starts. `ViewFolds`
reads each record once, when a session shows it the view on each turn, so the compacting
call reads only the records of that turn.

Shape: a fold over a list that only grows (`AppendedSince`, as the working-state reader
does). A list that is not the last one grown (a compaction's new view, a discarded reply, a
rewound or reloaded session) is read again from its start: the folds are then what reading
it from scratch gives, by construction. A record of an odd shape that the from-scratch path
would fail on makes the folds unusable (`usable` False), so that path runs and fails as it
did.
"""

from __future__ import annotations

from collections.abc import Sequence

from unbounded.compaction.recorded_files import AppendedSince
from unbounded.model.entries import Entry

_MESSAGE_TYPES = ("user", "assistant")


class ViewFolds:
    """The tools a view called, its user and assistant records, and each uuid's first
    position, over a view that only grows (read from the start when it is another list)."""

    def __init__(self) -> None:
        self._since = AppendedSince()
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

    def advance(self, view: Sequence[Entry]) -> None:
        """Read the records `view` added since the last call (all of them for another list)."""
        start = self._since.start(view)
        if start is None:
            self._reset()
            start = 0
        for index in range(start, len(view)):
            self._feed(index, view[index])

    def _feed(self, index: int, entry: Entry) -> None:
        kind = entry.type
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


__all__ = ["ViewFolds"]
