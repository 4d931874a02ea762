"""Server compaction blocks in a conversation: where they are, and their text for a summary.

A reply of a server compaction (`compaction.native`) starts with a `compaction` block whose
`content` summarizes everything before it. Our own summary requests (any summarizer, the
offline one included) see that block as text (`compaction_blocks_as_text`), so the history
the server already closed reaches our summary as the server's summary of it, and the
request needs no beta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from unbounded.model.content import MessageParam
from unbounded.wire.context_edits import COMPACTION_BLOCK

SERVER_SUMMARY_HEADER = "[Earlier conversation, as the server's compaction summarized it:]"
NO_SERVER_SUMMARY = "[A server compaction here produced no summary.]"


def compaction_blocks(content: object) -> list[Mapping[str, Any]]:
    """The compaction blocks of a message's content, in order."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == COMPACTION_BLOCK]


def last_compaction(messages: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """(message index, block index) of the last compaction block, None when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content")
        if isinstance(content, list):
            for position in range(len(content) - 1, -1, -1):
                block = content[position]
                if isinstance(block, Mapping) and block.get("type") == COMPACTION_BLOCK:
                    return index, position
    return None


def compaction_blocks_as_text(messages: list[MessageParam]) -> list[MessageParam]:
    """The messages with each compaction block as a text block holding its summary (a block
    without one says so); messages without any are kept as they are (the same objects)."""
    out: list[MessageParam] = []
    for message in messages:
        content = message["content"]
        if not compaction_blocks(content):
            out.append(message)
            continue
        blocks: list[Any] = []
        for block in cast(list[Any], content):
            if isinstance(block, Mapping) and block.get("type") == COMPACTION_BLOCK:
                summary = block.get("content")
                text = f"{SERVER_SUMMARY_HEADER}\n{summary}" if summary else NO_SERVER_SUMMARY
                blocks.append({"type": "text", "text": text})
            else:
                blocks.append(block)
        out.append(cast(MessageParam, {"role": message["role"], "content": blocks}))
    return out


__all__ = [
    "NO_SERVER_SUMMARY",
    "SERVER_SUMMARY_HEADER",
    "compaction_blocks",
    "compaction_blocks_as_text",
    "last_compaction",
]
