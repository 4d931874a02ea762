"""Letting go of a large structure a slice at a time, over the calls that follow.

A compaction replaces a history of ~10,000 messages: the per-message state kept for it
(digests, ledger records, the request's messages) is let go at once, and freeing ~10,000
objects in one call costs milliseconds of that call. `DeferredRelease` takes such a
structure instead and frees at most `per_step` of its items on each later `step` (a call
that does not compact), so each of those pays a fraction of a millisecond. Nothing is
observable but when the memory returns: the items are never read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RELEASE_PER_STEP = 1_000
"""Items freed per step (each a message's worth of state: ~0.1-0.5 ms in all)."""

BACKLOG_STEPS = 16
"""A step frees at least this fraction (1/16) of what waits: what arrives faster than
`per_step` a call (a caller that starts over every call) waits at most ~16 calls' worth."""


class DeferredRelease:
    """Containers whose items are freed `per_step` at a time, one step per later call."""

    __slots__ = ("_fresh", "_held", "_waiting", "per_step", "steps")

    def __init__(self, per_step: int = RELEASE_PER_STEP) -> None:
        self._held: list[list[Any]] = []
        """Dropped before the last step: the next steps free these."""
        self._waiting = 0
        """How many items `_held` holds."""
        self._fresh: list[list[Any]] = []
        """Dropped since the last step: the call that dropped may step too (it is the one
        that should not pay), so these wait for the step after."""
        self.per_step = per_step
        self.steps = 0
        """How many steps freed something (a count tests read)."""

    @property
    def pending(self) -> int:
        """How many items wait to be freed."""
        return self._waiting + sum(map(len, self._fresh))

    def drop(self, container: list[Any] | Mapping[Any, Any]) -> None:
        """Take over the last reference the caller held to `container` (a list, whose items
        are taken, or a mapping, whose values are): they are freed by later steps."""
        items = list(container.values()) if isinstance(container, Mapping) else container
        if items:
            self._fresh.append(items)

    def step(self) -> None:
        """Free what was dropped before the last step, `per_step` items or a sixteenth of
        them if more (the last taken first); what was dropped since waits for the next."""
        held = self._held
        if held:
            self.steps += 1
            budget = max(self.per_step, self._waiting // BACKLOG_STEPS)
            self._waiting -= min(budget, self._waiting)
            while held and budget > 0:
                items = held[-1]
                if len(items) > budget:
                    del items[-budget:]
                    break
                budget -= len(items)
                held.pop()
        if self._fresh:
            self._waiting += sum(map(len, self._fresh))
            held[:0] = self._fresh  # behind what waited already: the oldest go first
            self._fresh = []
