"""Words and widths for the command's output: plurals, and paths cut in the middle."""

from __future__ import annotations

ELLIPSIS = "…"


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 compaction`, `2 compactions` (`many` when the plural is not word + s)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def times(count: int) -> str:
    """`once`, `twice`, `3 times`."""
    return {1: "once", 2: "twice"}.get(count, f"{count:,} times")


def shorten_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle so that its end (a path's file
    name) stays whole when it fits: `/home/me/…/src/app/main.py`."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    cut = max(text.rfind("/"), text.rfind("\\")) + 1
    name = text[cut:]
    room = width - 1  # what is left beside the ellipsis
    tail = max(min(len(name), room), room * 2 // 3)
    return text[: room - tail] + ELLIPSIS + text[len(text) - tail :]
