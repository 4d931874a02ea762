"""Dropping the oldest API rounds when the summary request is itself too long (seed 004).

`truncate_head_for_ptl_retry` groups the messages by API round (one model response with the
tool results that answer it; the opening user messages form the first group), then drops
the oldest groups until the dropped estimate covers the token gap the error reported, or 20%
of the groups when the error gave no gap. Before grouping it removes its own marker left by an
earlier retry: otherwise the marker becomes group 0, the 20% fallback drops only the marker,
the marker is added back, and the loop never progresses (the bug seed 004 describes). What is
left starts with an assistant message, so the marker is put in front as a user message. When
every group would have to go, it returns None and the caller gives up.
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
    if len(groups) <= 1:
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
