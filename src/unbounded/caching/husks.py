"""Tool results whose text no one reads again, kept as what pricing needs of them.

A long replay holds the recorded history for the strategies that send it; most of its bytes
are tool results. Once every reader of a message is past it (see `History.husk` in
evaluation/baselines.py for who reads what), each tool_result block of the message can give
its text up: the block's content becomes a `HuskedContent` carrying the block's digest and
token count as its message's block, which `RequestBlocks` takes instead of serialising and
counting the block. The block keeps its other fields (type, tool_use_id, is_error), which
the clearing and the normalizer read.

The message dict is changed in place (a new content list; the blocks themselves are new dicts,
so an entry's own content is never touched): every list and simulator that holds the message
keeps the same object, which is what lets them reuse their figures for it.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from unbounded.caching.blocks import FlatBlock, message_block_digest

BlockTokens = Callable[[FlatBlock, bytes], int]
"""A block and its digest -> its tokens (`CacheSimulator.block_tokens`)."""


@dataclass(frozen=True, slots=True)
class HuskedContent:
    """A tool result's content once its text is let go: what the cache simulator needs."""

    digest: bytes
    """`message_block_digest` of the block as it was."""
    tokens: int
    """The block's tokens as the simulator counted them."""
    role: str
    """The role of the message the block is in (the digest depends on it)."""
    first: bool
    """Whether the block is its message's first (the digest depends on it)."""


def husk_tool_results(
    message: MutableMapping[str, Any], index: int, tokens_of: BlockTokens
) -> int:
    """Replace the text of the message's tool results by husks, in place; the number of
    blocks husked (0 when there was none left to husk). `index` is the message's position,
    for the counter's FlatBlock."""
    content = message.get("content")
    if not isinstance(content, list) or not any(_huskable(block) for block in content):
        return 0
    role = str(message.get("role", ""))
    blocks: list[Any] = []
    husked = 0
    for position, block in enumerate(content):
        if _huskable(block):
            first = position == 0
            digest = message_block_digest(block, role, first=first)
            tokens = tokens_of(FlatBlock("messages", index, position, block, role), digest)
            block = {**block, "content": HuskedContent(digest, tokens, role, first)}
            husked += 1
        blocks.append(block)
    message["content"] = blocks
    return husked


def _huskable(block: Any) -> bool:
    return (
        isinstance(block, MutableMapping)
        and block.get("type") == "tool_result"
        and type(block.get("content")) is not HuskedContent
    )
