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


class DeferredRelease:
    """Containers whose items are freed `per_step` at a time, one step per later call."""

    __slots__ = ("_held", "_wait", "per_step", "steps")

    def __init__(self, per_step: int = RELEASE_PER_STEP) -> None:
        self._held: list[list[Any]] = []
        self._wait = False
        """A drop since the last step: the call that dropped may step too (it is the one
        that should not pay), so the first step after a drop frees nothing."""
        self.per_step = per_step
        self.steps = 0
        """How many steps freed something (a count tests read)."""

    @property
    def pending(self) -> int:
        """How many items wait to be freed."""
        return sum(map(len, self._held))

    def drop(self, container: list[Any] | Mapping[Any, Any]) -> None:
        """Take over the last reference the caller held to `container` (a list, whose items
        are taken, or a mapping, whose values are): they are freed by later steps."""
        items = list(container.values()) if isinstance(container, Mapping) else container
        if items:
            self._held.append(items)
            self._wait = True

    def step(self) -> None:
        """Free at most `per_step` of the items held, the last taken first (none on the
        first step after a drop)."""
        budget = self.per_step
        held = self._held
        if self._wait or not held:
            self._wait = False
            return
        self.steps += 1
        while held and budget > 0:
            items = held[-1]
            if len(items) > budget:
                del items[-budget:]
                return
            budget -= len(items)
            held.pop()
