"""A prompt given again before anything answered it: kept once.

A program that adds the user's prompt and then fails to send it (a missing API key, a network
error, a crash) has written the prompt to its session; run again, it adds the same prompt,
and the request would carry it twice. When the conversation's last message is this very
prompt, with no reply after it, adding it again appends nothing: the call that failed left
nothing half-done for the next run to repeat. A prompt repeated after a reply (a user who
says "yes" twice) is a new message, as always.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.model.entries import Entry

logger = logging.getLogger(__name__)


def _as_blocks(content: str | Sequence[Any]) -> list[dict[str, Any]]:
    """Message content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(block) for block in content if isinstance(block, Mapping)]


def unanswered_repeat(entries: Sequence[Entry], content: str | Sequence[Any]) -> Entry | None:
    """The last message of `entries` when it is a user prompt equal to `content` that nothing
    answered yet (None otherwise: append as usual)."""
    blocks = _as_blocks(content)
    last = next((entry for entry in reversed(entries) if entry.is_conversation), None)
    if (
        not blocks
        or last is None
        or last.type != "user"
        or last.is_meta  # the application's own message, not a prompt
        or _as_blocks(last.content) != blocks
    ):
        return None
    logger.info(
        "the same prompt again with no reply after the first (its call failed?): kept once (%s)",
        last.uuid,
    )
    return last
