"""How long two message lists stay the same from the start, at C speed.

Every per-turn step (cache markers, the break detector's digests, the drop-in's message
prints) reuses what it computed for the previous turn's list up to the first message that
changed. The pipeline never edits a message dict in place (a changed message is a new dict),
so "the same object" means "unchanged" and the common prefix is found by list comparison,
which checks identity before equality for each element: no Python-level loop per message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def shared_prefix_length(new: Sequence[Any], old: Sequence[Any]) -> int:
    """The number of leading elements of `new` equal to those of `old` (identical or equal).

    One slice comparison when `old` is a prefix of `new` (the usual turn: messages appended),
    else a bisection of slice comparisons: O(len) pointer checks, O(log len) slices.
    """
    size = min(len(new), len(old))
    # A slice is a copy: the whole list is compared as it is (the usual case for one side).
    if (new if len(new) == size else new[:size]) == (old if len(old) == size else old[:size]):
        return size
    low, high = 0, size  # new[:low] == old[:low] and new[:high] != old[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if new[low:middle] == old[low:middle]:
            low = middle
        else:
            high = middle
    return low
