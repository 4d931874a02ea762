"""Server compaction blocks in a conversation: where they are, and their text for a summary.

A reply of a server compaction (`compaction.native`) starts with a `compaction` block whose
`content` summarizes everything before it. Our own summary requests (any summarizer, the
offline one included) see that block as text (`compaction_blocks_as_text`), so the history
the server already closed reaches our summary as the server's summary of it, and the
request needs no beta.

**The unit rule.** The server drops everything before a compaction block: the block stands
for it. So the block and everything before it are one unit, which our own steps keep or
summarize whole, never in part:

- our cut (where a compaction's summary ends and the verbatim records start, or a partial
  compaction's pivot) falls only after the record holding the latest block
  (`check_cut_after_server_compaction`); an automatic compaction whose kept turn holds the
  block keeps nothing verbatim instead (`kept_holds_server_compaction`), and a background
  summary is stale when a block arrived after its snapshot;
- our summary request reads the unit as the server's summary alone: it starts at the latest
  block, as a user message holding that summary's text (`from_last_server_compaction`), so
  what the server already dropped is never sent again, nor summarized twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.wire.context_edits import COMPACTION_BLOCK, RESPONSES_COMPACTION
from unbounded.wire.openai_items import is_opaque_block

SERVER_SUMMARY_HEADER = "[Earlier conversation, as the server's compaction summarized it:]"
NO_SERVER_SUMMARY = "[A server compaction here produced no summary.]"


def compaction_blocks(content: object) -> list[Mapping[str, Any]]:
    """The compaction blocks of a message's content, in order."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == COMPACTION_BLOCK]


def responses_compaction_items(content: object) -> list[Mapping[str, Any]]:
    """The Responses compaction items (opaque blocks) of a message's content, in order."""
    if not isinstance(content, list):
        return []
    return [
        b
        for b in content
        if isinstance(b, Mapping)
        and is_opaque_block(b)
        and isinstance(b.get("item"), Mapping)
        and b["item"].get("type") == RESPONSES_COMPACTION
    ]


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


def server_compaction_record(view: Sequence[Entry]) -> int | None:
    """Index of the record holding the latest server compaction block (None: none)."""
    for index in range(len(view) - 1, -1, -1):
        entry = view[index]
        if entry.type == "assistant" and compaction_blocks(entry.content):
            return index
    return None


def kept_holds_server_compaction(kept: Sequence[Entry]) -> bool:
    """Whether records to keep verbatim after our summary hold a server compaction block: the
    server would then drop our summary, with everything before the block."""
    return server_compaction_record(kept) is not None


def check_cut_after_server_compaction(view: Sequence[Entry], cut: int, what: str) -> None:
    """Refuse a cut at view index `cut` (the first record on the later side) that falls at or
    before the latest server compaction, splitting the block from what it stands for;
    `what` names the cut in the error (e.g. "pivot <uuid>")."""
    block_at = server_compaction_record(view)
    if block_at is not None and cut <= block_at:
        raise ConfigError(
            f"{what} falls before the server compaction in record {view[block_at].uuid} "
            "(the block stands for everything before it and goes whole): choose a user "
            "message after that record"
        )


def from_last_server_compaction(messages: list[MessageParam]) -> list[MessageParam]:
    """The messages from the latest compaction block on, the block as a user message holding
    the server's summary (what preceded it is the server's to forget); unchanged (the same
    list) without a block."""
    position = last_compaction(messages)
    if position is None:
        return messages
    index, at = position
    content = cast(list[Any], messages[index]["content"])
    opening: list[Any] = [_summary_text(content[at])]
    rest = content[at + 1 :]
    tail = list(messages[index + 1 :])
    out: list[MessageParam] = []
    if rest:
        out.append(cast(MessageParam, {"role": "user", "content": opening}))
        out.append(cast(MessageParam, {"role": messages[index]["role"], "content": rest}))
    elif tail and tail[0]["role"] == "user":
        first = tail.pop(0)["content"]
        blocks = [{"type": "text", "text": first}] if isinstance(first, str) else list(first)
        out.append(cast(MessageParam, {"role": "user", "content": [*opening, *blocks]}))
    else:
        out.append(cast(MessageParam, {"role": "user", "content": opening}))
    out.extend(tail)
    return out


def _summary_text(block: Mapping[str, Any]) -> dict[str, Any]:
    """A compaction block as the text block our summary requests read."""
    summary = block.get("content")
    text = f"{SERVER_SUMMARY_HEADER}\n{summary}" if summary else NO_SERVER_SUMMARY
    return {"type": "text", "text": text}


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
                blocks.append(_summary_text(block))
            else:
                blocks.append(block)
        out.append(cast(MessageParam, {"role": message["role"], "content": blocks}))
    return out


__all__ = [
    "NO_SERVER_SUMMARY",
    "SERVER_SUMMARY_HEADER",
    "check_cut_after_server_compaction",
    "compaction_blocks",
    "compaction_blocks_as_text",
    "from_last_server_compaction",
    "kept_holds_server_compaction",
    "last_compaction",
    "responses_compaction_items",
    "server_compaction_record",
]
