"""A prompt the previous process left unanswered, given again: kept once.

A program that adds the user's prompt and then fails to send it (a missing API key, a network
error, a crash) has written the prompt to its session; run again, it reopens the session and
adds the same prompt, and the request would carry it twice. When a reopened session ends with
a user prompt nothing answered, and the first message added is that same prompt, nothing is
appended: the failed run left nothing for the next one to repeat. Within one process, and
after a reply, the same words twice are two messages, as always (users do say "yes" twice).
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


def trailing_prompt(entries: Sequence[Entry]) -> Entry | None:
    """The last message of `entries` when it is a user prompt nothing answered yet (not the
    application's own meta message)."""
    last = next((entry for entry in reversed(entries) if entry.is_conversation), None)
    if last is None or last.type != "user" or last.is_meta:
        return None
    return last


def repeated_prompt(
    entries: Sequence[Entry], left_unanswered: Entry | None, content: str | Sequence[Any]
) -> Entry | None:
    """`left_unanswered` (the prompt a reopened session ended with) when it is still the last
    message and `content` repeats it; None otherwise (append as usual)."""
    if left_unanswered is None or trailing_prompt(entries) is not left_unanswered:
        return None
    if _as_blocks(left_unanswered.content) != _as_blocks(content):
        return None
    logger.info(
        "the prompt the previous run left unanswered (its call failed?) was given again: "
        "kept once (%s)",
        left_unanswered.uuid,
    )
    return left_unanswered
