"""Tool outputs too large to send whole: the model sees the head, the tail and where the rest is.

A single 5 MB `cat` would otherwise fill the window by itself: the next request compacts the
whole conversation to make room for it, the line the agent needed is lost in the summary,
and the agent reads the file again, and again. Instead, a text over the cap is cut to its
first and last lines within the budget (the start says what the output is, the end is where
errors and totals are), with a marker in the middle that says how much was left out and
where the complete text is kept, so the agent can read exactly the part it needs.

The cap applies to each tool result and to each user text block as it enters a session
(`Policy.tool_result_max_tokens`, 25,000 tokens by default, the size Claude Code allows a
single tool output; scaled down with small windows). Tokens are turned into characters at 4
per token, the same rough rate the estimates use. Images and documents are never cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
"""Characters per token when the cap in tokens becomes a cap in characters."""
HEAD_SHARE = 0.5
"""Share of the kept characters taken from the start; the rest comes from the end."""
MIN_CAP_CHARS = 2_000
"""Below this a cut would keep too little to be useful; smaller caps are raised to it."""

SaveOutput = Callable[[str, str], str | None]
"""Keeps a full text under a key; returns where it can be read (a path), or None."""


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
    if from_end:
        piece = text[-limit:] if limit else ""
        newline = piece.find("\n")
        if 0 <= newline < limit // 4:
            piece = piece[newline + 1 :]
        return piece
    piece = text[:limit]
    newline = piece.rfind("\n")
    if newline >= limit - limit // 4:
        piece = piece[: newline + 1]
    return piece


def cap_text(text: str, max_chars: int, saved_to: str | None) -> CappedText | None:
    """`text` cut to about `max_chars` characters (head + marker + tail), or None when it fits."""
    limit = max(max_chars, MIN_CAP_CHARS)
    if len(text) <= limit:
        return None
    head = _cut_at_line(text, int(limit * HEAD_SHARE), from_end=False)
    tail = _cut_at_line(text, limit - len(head), from_end=True)
    omitted = text[len(head) : len(text) - len(tail)]
    lines = omitted.count("\n")
    where = (
        f"The complete output is saved in {saved_to}: read the part you need from that file "
        "(by line range or with a search) instead of producing the whole output again."
        if saved_to
        else "The complete output was not kept."
    )
    marker = (
        f"\n[... {len(omitted):,} characters ({lines:,} lines) of this output were left out "
        f"here to fit the context window. {where} ...]\n"
    )
    return CappedText(
        text=head + marker + tail,
        original_chars=len(text),
        original_lines=text.count("\n") + 1,
        saved_to=saved_to,
    )


def cap_block_texts(
    block: dict[str, Any], max_chars: int, key: str, save: SaveOutput
) -> tuple[dict[str, Any], list[CappedText]]:
    """A tool_result or text block with every oversized text cut; the block is copied only
    when something changed."""
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text", ""))
        if len(text) <= max(max_chars, MIN_CAP_CHARS):
            return block, []
        capped = cap_text(text, max_chars, save(key, text))
        if capped is None:
            return block, []
        return {**block, "text": capped.text}, [capped]
    if kind != "tool_result":
        return block, []
    content = block.get("content")
    if isinstance(content, str):
        if len(content) <= max(max_chars, MIN_CAP_CHARS):
            return block, []
        capped = cap_text(content, max_chars, save(key, content))
        if capped is None:
            return block, []
        return {**block, "content": capped.text}, [capped]
    if not isinstance(content, list):
        return block, []
    done: list[CappedText] = []
    items: list[Any] = []
    for position, item in enumerate(content):
        if isinstance(item, dict) and item.get("type") == "text":
            text = str(item.get("text", ""))
            if len(text) > max(max_chars, MIN_CAP_CHARS):
                part_key = key if position == 0 else f"{key}-{position}"
                capped = cap_text(text, max_chars, save(part_key, text))
                if capped is not None:
                    done.append(capped)
                    items.append({**item, "text": capped.text})
                    continue
        items.append(item)
    if not done:
        return block, []
    return {**block, "content": items}, done
