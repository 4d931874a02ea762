"""Message blocks whose text no one reads again, kept as what pricing needs of them.

A long replay holds the recorded history for the strategies that send it; most of its bytes
are tool results and the assistant's text and tool calls. Once every reader of a message is
past it (see `History.husk` in evaluation/baselines.py for who reads what), its blocks can
give their text up: a block's content becomes a `HuskedContent` carrying the block's digest
and token count as its message's block, which `RequestBlocks` takes instead of serialising
and counting the block.

- A tool_result keeps its other fields (type, tool_use_id, is_error), which the clearing and
  the normalizer read.
- An assistant message's blocks (text, thinking, tool_use, ...) keep their type (the
  simulator leaves out earlier thinking by type) and a tool_use its id (the string the
  normalizer's set of call names holds anyway); nothing else reads a settled assistant
  message.
- A user message's other blocks stay whole: the truncate baseline moves them behind its note
  (another position, another digest).

The message dict is changed in place (a new content list; the blocks themselves are new dicts,
so an entry's own content is never touched): every list and simulator that holds the message
keeps the same object, which is what lets them reuse their figures for it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, MutableMapping
from typing import Any

from unbounded.caching.blocks import FlatBlock, message_block_digest
from unbounded.caching.packed_digests import DIGEST_SIZE

BlockTokens = Callable[[FlatBlock, bytes], int]
"""A block and its digest -> its tokens (`CacheSimulator.block_tokens`)."""


_TOKENS = struct.Struct("<q")
_FIRST = 1
"""Flag bit: the block was its message's first."""


class HuskedContent(bytes):
    """A block's content once its text is let go: what the cache simulator needs, packed in
    one bytes object (digest, tokens, a flag byte, the role) instead of an object holding a
    digest, an int and a role (about 95 bytes a block instead of about 160)."""

    __slots__ = ()

    def __new__(cls, digest: bytes, tokens: int, role: str, first: bool) -> HuskedContent:
        """The husk of a block with this digest and token count, in a message of `role`, its
        message's first block or not."""
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"a digest is {DIGEST_SIZE} bytes, not {len(digest)}")
        flags = bytes((_FIRST if first else 0,))
        return super().__new__(cls, digest + _TOKENS.pack(tokens) + flags + role.encode())

    @property
    def digest(self) -> bytes:
        """`message_block_digest` of the block as it was."""
        return self[:DIGEST_SIZE]

    @property
    def tokens(self) -> int:
        """The block's tokens as the simulator counted them."""
        return int(_TOKENS.unpack_from(self, DIGEST_SIZE)[0])

    @property
    def first(self) -> bool:
        """Whether the block is its message's first (the digest depends on it)."""
        return bool(self[_FLAGS_AT] & _FIRST)

    @property
    def role(self) -> str:
        """The role of the message the block is in (the digest depends on it)."""
        return self[_FLAGS_AT + 1 :].decode()

    def __repr__(self) -> str:
        return (
            f"HuskedContent(digest={self.digest.hex()[:12]}..., tokens={self.tokens}, "
            f"role={self.role!r}, first={self.first})"
        )


_FLAGS_AT = DIGEST_SIZE + _TOKENS.size


def husk_blocks(message: MutableMapping[str, Any], index: int, tokens_of: BlockTokens) -> int:
    """Replace the text of the message's blocks by husks (module docstring), in place; the
    number of blocks husked (0 when there was none left to husk). `index` is the message's
    position, for the counter's FlatBlock."""
    content = message.get("content")
    role = str(message.get("role", ""))
    assistant = role == "assistant"
    if not isinstance(content, list) or not any(_huskable(b, assistant) for b in content):
        return 0
    blocks: list[Any] = []
    husked = 0
    for position, block in enumerate(content):
        if _huskable(block, assistant):
            first = position == 0
            digest = message_block_digest(block, role, first=first)
            tokens = tokens_of(FlatBlock("messages", index, position, block, role), digest)
            husk = HuskedContent(digest, tokens, role, first)
            if assistant:
                kind = block.get("type")
                block = (
                    {"type": kind, "id": block.get("id"), "content": husk}
                    if kind == "tool_use"
                    else {"type": kind, "content": husk}
                )
            else:
                block = {**block, "content": husk}
            husked += 1
        blocks.append(block)
    message["content"] = list(blocks)  # sized to fit: appends left room to grow
    return husked


def _huskable(block: Any, assistant: bool) -> bool:
    return (
        isinstance(block, MutableMapping)
        and (assistant or block.get("type") == "tool_result")
        and type(block.get("content")) is not HuskedContent
    )
