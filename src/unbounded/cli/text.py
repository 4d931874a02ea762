"""Words and widths for the command's output: plurals, and paths cut in the middle."""

from __future__ import annotations

import re

ELLIPSIS = "…"


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 compaction`, `2 compactions` (`many` when the plural is not word + s)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def times(count: int) -> str:
    """`once`, `twice`, `3 times`."""
    return {1: "once", 2: "twice"}.get(count, f"{count:,} times")


def printable(text: str) -> str:
    """`text` as any UTF-8 output can print it: the bytes of a file name that are not UTF-8
    (held by Python as lone surrogates, which a strict UTF-8 stream refuses) as `\\xNN`."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def shorten_middle(text: str, width: int) -> str:
    """`text` (made `printable`) in at most `width` characters, cut in the middle so that its
    end (a path's file name) stays whole when it fits: `/home/me/…/src/app/main.py`. Its
    brackets are escaped for rich, which reads `[x]` in a cell or a line as markup."""
    text = printable(text)
    if len(text) <= width:
        return markup_safe(text)
    if width <= 1:
        return ELLIPSIS[:width]
    cut = max(text.rfind("/"), text.rfind("\\")) + 1
    name = text[cut:]
    room = width - 1  # what is left beside the ellipsis
    tail = max(min(len(name), room), room * 2 // 3)
    return markup_safe(text[: room - tail] + ELLIPSIS + text[len(text) - tail :])


_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")
"""What rich reads as a tag: `[` then a letter, `#`, `/` or `@`, up to the next `]`, with the
backslashes before it (an odd count escapes it)."""


def markup_safe(text: str) -> str:
    """`text` to put in rich markup (a table cell, an error line), shown as it is: whatever
    rich would read as a tag escaped (the backslashes before it doubled), and every other `[`
    too (rich turns `\\[` outside a tag into `[`). Unlike `rich.markup.escape` a trailing
    backslash is left single (rich would print both), so nothing but plain text may follow."""
    parts: list[str] = []
    done = 0
    for match in _TAG.finditer(text):
        parts.append(text[done : match.start()].replace("[", "\\["))
        parts.append(match[1] * 2 + "\\" + match[2])
        done = match.end()
    parts.append(text[done:].replace("[", "\\["))
    return "".join(parts)
