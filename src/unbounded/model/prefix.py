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



# How far back from the end the comparison without copies looks for the first change; a
# change earlier than this is found by `shared_prefix_length`'s bisection.
_NEAR_END = 64


def shared_prefix_length_own(new: Sequence[Any], own: list[Any]) -> int:
    """`shared_prefix_length(new, own)` where `own` is the caller's private list (its copy of
    the last input), found without copying either list when the change is near the end.

    A slice copies, and a copy touches every element's reference count: at thousands of
    messages that is most of a turn's cost. Here `own` is made as long as `new` with
    `new`'s elements past a probe, so one comparison of equal-length lists (pointer checks)
    says whether the two agree up to the probe; `own` is put back after each probe. The
    probes are the end, then 1, 2, 4 ... elements before it, then a bisection between the
    last two. Each probe still walks the whole list, but only as identity checks of
    references (no copy, no reference-count writes), so a few probes cost less than one slice.
    """
    size = len(own)
    if type(new) is not list or len(new) < size:
        return shared_prefix_length(new, own)

    def agree_up_to(probe: int) -> bool:
        kept = own[probe:]
        own[probe:] = new[probe:]
        try:
            return own == new
        finally:
            own[probe:] = kept

    if agree_up_to(size):
        return size
    high = size  # new[:high] != own[:high]
    distance = 1
    while True:
        if distance > min(size, _NEAR_END):
            return shared_prefix_length(new, own)
        probe = size - distance
        if agree_up_to(probe):
            low = probe
            break
        high = probe
        distance *= 2
    while high - low > 1:
        middle = (low + high) // 2
        if agree_up_to(middle):
            low = middle
        else:
            high = middle
    return low
