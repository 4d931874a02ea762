"""Dropping the oldest API rounds when the summary request is itself too long (seed 004).

`truncate_head_for_ptl_retry` groups the messages by API round (one model response with the
tool results that answer it; the opening user messages form the first group), then drops
the oldest groups until the dropped estimate covers the token gap the error reported, or 20%
of the groups when the error gave no gap. Before grouping it removes its own marker left by an
earlier retry: otherwise the marker becomes group 0, the 20% fallback drops only the marker,
the marker is added back, and the loop never progresses (the bug seed 004 describes). What is
left starts with an assistant message, so the marker is put in front as a user message.

A history of user messages only (a LangChain state of human messages is one API message) is
one group: its oldest messages, or the oldest blocks of its one message, are dropped the same
way instead. When everything would have to go, it returns None and the caller gives up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from unbounded.model.content import MessageParam
from unbounded.tokens.estimate import content_tokens

PTL_RETRY_MARKER = "[earlier conversation truncated for compaction retry]"


def is_ptl_marker(message: MessageParam) -> bool:
    """Whether a message is the marker an earlier retry put in front."""
    content = message.get("content")
    if message.get("role") != "user":
        return False
    if isinstance(content, str):
        return content == PTL_RETRY_MARKER
    return (
        len(content) == 1
        and content[0].get("type") == "text"
        and content[0].get("text") == PTL_RETRY_MARKER
    )


def group_by_api_round(messages: Sequence[MessageParam]) -> list[list[MessageParam]]:
    """Split messages into groups, each starting at an assistant message (see module doc)."""
    groups: list[list[MessageParam]] = []
    for message in messages:
        if message["role"] == "assistant" or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
    return groups


def truncate_head_for_ptl_retry(
    messages: Sequence[MessageParam],
    token_gap: int | None,
    *,
    fallback_drop_fraction: float = 0.2,
) -> list[MessageParam] | None:
    """The messages with their oldest API rounds dropped, or None when nothing would be left."""
    remaining = list(messages)
    if remaining and is_ptl_marker(remaining[0]):
        remaining = remaining[1:]
    groups = group_by_api_round(remaining)
    if len(groups) == 1:
        return _truncate_one_group(groups[0], token_gap, fallback_drop_fraction)
    if not groups:
        return None
    if token_gap is not None and token_gap > 0:
        dropped_tokens = 0
        drop = 0
        while drop < len(groups) and dropped_tokens < token_gap:
            dropped_tokens += sum(content_tokens(m["content"]) for m in groups[drop])
            drop += 1
    else:
        drop = max(1, math.floor(len(groups) * fallback_drop_fraction))
    if drop >= len(groups):
        return None
    kept = [message for group in groups[drop:] for message in group]
    if kept[0]["role"] == "assistant":
        kept.insert(0, {"role": "user", "content": PTL_RETRY_MARKER})
    return kept


def _drop_count(sizes: Sequence[int], token_gap: int | None, fraction: float) -> int:
    """How many of the oldest parts (of these token sizes) to drop."""
    if token_gap is not None and token_gap > 0:
        dropped = drop = 0
        while drop < len(sizes) and dropped < token_gap:
            dropped += sizes[drop]
            drop += 1
        return drop
    return max(1, math.floor(len(sizes) * fraction))


def _truncate_one_group(
    group: Sequence[MessageParam], token_gap: int | None, fraction: float
) -> list[MessageParam] | None:
    """One API round of user messages: drop its oldest messages, or its one message's oldest
    blocks; None when nothing would be left."""
    marker: MessageParam = {"role": "user", "content": PTL_RETRY_MARKER}
    if len(group) > 1:
        drop = _drop_count([content_tokens(m["content"]) for m in group], token_gap, fraction)
        return None if drop >= len(group) else [marker, *group[drop:]]
    content = group[0]["content"] if group else ""
    if isinstance(content, str) or len(content) <= 1:
        return None
    blocks = list(content)
    if blocks[0].get("type") == "text" and blocks[0].get("text") == PTL_RETRY_MARKER:
        blocks = blocks[1:]  # an earlier retry's marker: not something to drop again
    drop = _drop_count([content_tokens([b]) for b in blocks], token_gap, fraction)
    if drop >= len(blocks) or any(b.get("type") == "tool_result" for b in blocks[:drop]):
        return None  # tool results answer a call outside this group: never drop them alone
    kept: MessageParam = {
        "role": group[0]["role"],
        "content": [{"type": "text", "text": PTL_RETRY_MARKER}, *blocks[drop:]],
    }
    return [kept]
