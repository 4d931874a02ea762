"""How far a reader has read a list that only grows, when it may stop before its end.

`recorded_files.AppendedSince` marks a list as read to its end. A reader brought up to date on
every turn may read only so much per turn (a session resumed with a long history catches up
over a few turns instead of paying for all of it on one), so its mark is where it stopped:
the same list object, with the last record it read still in place. Anything else (another
list, a list cut shorter, a record replaced before the mark) has the reader start over.
"""

from __future__ import annotations

from collections.abc import Sequence

from unbounded.model.entries import Entry
from unbounded.model.spilled_entries import entry_in_place


class ReadMark:
    """Where a reader stopped in a list that only grows."""

    def __init__(self) -> None:
        self._seen: Sequence[Entry] | None = None
        self._count = 0
        self._last: Entry | None = None

    def span(self, entries: Sequence[Entry], limit: int | None = None) -> tuple[bool, int, int]:
        """What to read of `entries` now: (start over?, from, to), at most `limit` entries
        (None: to the end). The mark moves to `to`: the caller reads them."""
        count = self._count
        going_on = (
            entries is self._seen
            and len(entries) >= count
            and (count == 0 or entry_in_place(entries, count - 1, self._last))
        )
        start = count if going_on else 0
        end = len(entries) if limit is None else min(len(entries), start + limit)
        self._seen, self._count = entries, end
        self._last = entries[end - 1] if end else None
        return not going_on, start, end


__all__ = ["ReadMark"]
