"""Tool outputs too large to send whole: the model sees the head, the tail and where the rest is.

A single 5 MB `cat` would otherwise fill the window by itself: the next request compacts the
whole conversation to make room for it, the line the agent needed is lost in the summary,
and the agent reads the file again, and again. Instead, a text over the cap is cut to its
first and last lines within the budget (the start says what the output is, the end is where
errors and totals are), with a marker in the middle that says how much was left out and
where the complete text is kept, so the agent can read exactly the part it needs.

The cap applies to each tool result and to each user text block as it enters a session
(`Policy.tool_result_max_tokens`, 25,000 tokens by default, the size Claude Code allows a
single tool output; scaled down with small windows). The whole shortened text, marker
included, is within the cap as `tokens.budget` counts it (CJK text included). Images and
documents are never cut. The complete text goes to the store under a name made from the tool
call's id and the block's position (`side_outputs.side_output_name`); `is_kept_copy_of`
tells whether a text read back is the one a shortened copy was cut from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from unbounded.side_outputs import side_output_name
from unbounded.tokens.budget import cap_token_count, fits
from unbounded.tokens.estimate import rough_token_count

CHARS_PER_TOKEN = 4
"""Characters per token when the cap in tokens becomes a first cut in characters."""
HEAD_SHARE = 0.5
"""Share of the kept characters taken from the start; the rest comes from the end."""
MIN_CAP_TOKENS = 500
"""Below this a cut would keep too little to be useful; smaller caps are raised to it."""

SaveOutput = Callable[[str, str], str | None]
"""Keeps a full text under a name (`side_output_name`); returns where it can be read (a
path), or None."""

_MARKER = re.compile(
    r"\n\[\.\.\. ([0-9,]+) characters \([0-9,]+ lines\) of this output were left out here "
    r"to fit the context window\. [^\n]*? \.\.\.\]\n"
)


@dataclass(frozen=True, slots=True)
class CappedText:
    """A text cut to its head and tail."""

    text: str
    original_chars: int
    original_lines: int
    saved_to: str | None


def _cut_at_line(text: str, limit: int, *, from_end: bool) -> str:
    """At most `limit` characters from one end, ending (or starting) on a line boundary when
    one is close enough (within a quarter of the budget)."""
    if limit <= 0:
        return ""
    if from_end:
        piece = text[-limit:]
        newline = piece.find("\n")
        if 0 <= newline < limit // 4:
            piece = piece[newline + 1 :]
        return piece
    piece = text[:limit]
    newline = piece.rfind("\n")
    if newline >= limit - limit // 4:
        piece = piece[: newline + 1]
    return piece


def _marker(omitted: str, saved_to: str | None, *, show_path: bool = True) -> str:
    if saved_to and show_path:
        where = (
            f"The complete output is saved in {saved_to}: read the part you need from that "
            "file (by line range or with a search) instead of producing the whole output again."
        )
    elif saved_to:
        where = "The complete output is kept, under a path too long to show here."
    else:
        where = "The complete output was not kept."
    return (
        f"\n[... {len(omitted):,} characters ({omitted.count(chr(10)):,} lines) of this output "
        f"were left out here to fit the context window. {where} ...]\n"
    )


def _head_and_tail(text: str, chars: int, saved_to: str | None, *, show_path: bool) -> str:
    head = _cut_at_line(text, int(chars * HEAD_SHARE), from_end=False)
    tail = _cut_at_line(text, chars - len(head), from_end=True)
    omitted = text[len(head) : len(text) - len(tail)]
    return head + _marker(omitted, saved_to, show_path=show_path) + tail


def cap_text(text: str, max_tokens: int, saved_to: str | None) -> CappedText | None:
    """`text` cut to its head, a marker and its tail within `max_tokens` (at least
    `MIN_CAP_TOKENS`), or None when it fits."""
    limit = max(max_tokens, MIN_CAP_TOKENS)
    if fits(text, limit):
        return None
    # The marker omitting the whole text is the longest one: when it is over the cap by itself
    # (a very long path), the path is left out so that the marker alone always fits.
    show_path = cap_token_count(_marker(text, saved_to)) <= limit
    room = limit - rough_token_count(_marker(text, saved_to, show_path=show_path))
    chars = min(len(text) - 1, max(0, room) * CHARS_PER_TOKEN)
    while True:
        shortened = _head_and_tail(text, chars, saved_to, show_path=show_path)
        count = cap_token_count(shortened)
        if count <= limit or chars == 0:
            break
        # Dense text (CJK, base64) has more tokens per character: shrink in proportion (a
        # little more, so it converges in a few rounds; always below `chars`).
        chars = chars * limit * 95 // (count * 100)
    return CappedText(
        text=shortened,
        original_chars=len(text),
        original_lines=text.count("\n") + 1,
        saved_to=saved_to,
    )


def is_kept_copy_of(kept: str, shortened: str) -> bool:
    """Whether `kept` is the complete text `shortened` (a `cap_text` result) was cut from:
    it starts with the head, ends with the tail and is as long as the marker says."""
    for match in _MARKER.finditer(shortened):
        head, tail = shortened[: match.start()], shortened[match.end() :]
        omitted = int(match.group(1).replace(",", ""))
        if (
            len(kept) == len(head) + omitted + len(tail)
            and kept.startswith(head)
            and kept.endswith(tail)
        ):
            return True
    return False


def is_shortened(text: str) -> bool:
    """Whether `text` carries a `cap_text` marker (its complete text was kept aside or lost)."""
    return _MARKER.search(text) is not None


def cap_block_texts(
    block: dict[str, Any],
    max_tokens: int,
    key: str,
    save: SaveOutput,
    *,
    redact: Callable[[str], str] | None = None,
) -> tuple[dict[str, Any], list[CappedText]]:
    """A tool_result or text block with every oversized text cut, its complete text saved
    under `side_output_name(key, position)`; the block is copied only when something
    changed. With `redact`, an oversized text is redacted before it is saved and cut (the
    shortened copy and the kept one stay the same text)."""
    limit = max(max_tokens, MIN_CAP_TOKENS)

    def cut(text: str, position: int) -> CappedText | None:
        if fits(text, limit):
            return None
        if redact is not None:
            text = redact(text)
        return cap_text(text, limit, save(side_output_name(key, position), text))

    kind = block.get("type")
    if kind == "text":
        capped = cut(str(block.get("text", "")), 0)
        return (block, []) if capped is None else ({**block, "text": capped.text}, [capped])
    if kind != "tool_result":
        return block, []
    content = block.get("content")
    if isinstance(content, str):
        capped = cut(content, 0)
        return (block, []) if capped is None else ({**block, "content": capped.text}, [capped])
    if not isinstance(content, list):
        return block, []
    done: list[CappedText] = []
    items: list[Any] = []
    for position, item in enumerate(content):
        if isinstance(item, dict) and item.get("type") == "text":
            capped = cut(str(item.get("text", "")), position)
            if capped is not None:
                done.append(capped)
                items.append({**item, "text": capped.text})
                continue
        items.append(item)
    if not done:
        return block, []
    return {**block, "content": items}, done
