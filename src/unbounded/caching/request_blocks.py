"""The blocks of successive requests, each request reusing what the previous one computed.

The cache simulator needs, for every block of a request in API order (`blocks.flatten_request`,
less `blocks.without_earlier_thinking` for the models that drop earlier thinking): its digest,
its tokens, the running total, the prefix hash ending at it (`blocks.prefix_hashes`, as raw
bytes) and where the cache_control markers are. A conversation's next request repeats the
previous one's messages and adds a few, so `RequestBlocks.update` keeps those figures per
message and recomputes them only from the first message that is not the very object the
previous request had at that position (or whose earlier thinking is dropped now and was not
then); the prefix hashes continue from the last reused message. A request costs what it adds,
not its length. The tools, system prompt and keying parameters are compared by value; when
they change, everything is recomputed. The figures equal their from-scratch definitions
(tested on generated request sequences).

Message dicts must not be edited in place once sent, as everywhere in the pipeline (a changed
message is a new dict).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from unbounded.caching.blocks import (
    FlatBlock,
    block_digest,
    content_blocks_of,
    message_block_digest,
    message_key_params,
    root_hash,
    system_blocks,
)
from unbounded.model.prefix import shared_prefix_length

DIGEST_MEMO_SIZE = 20_000
"""Blocks whose digest is remembered by identity (then forgotten all at once)."""
BlockCount = Callable[[FlatBlock, bytes], int]
"""A block and its digest -> its tokens."""
_THINKING = frozenset({"thinking", "redacted_thinking"})


@dataclass(slots=True)
class _MessagePart:
    """One message's share of the flat lists."""

    message: Any
    """The message object (held, so an identity check against it is sound)."""
    start: int
    """Flat position of its first block."""
    dropped: bool
    """Its earlier thinking was left out."""
    turn: bool
    """A user message that is not only tool results (it closes the turns before it)."""
    chain: bytes
    """The prefix hash after its last block."""
    messages_started: bool
    """A message block came at or before it (the keying parameters are mixed in once)."""


@dataclass(slots=True)
class RequestBlocks:
    """Flat blocks, digests, tokens, totals, prefix hashes and markers of the last request."""

    count: BlockCount
    flat: list[FlatBlock] = field(default_factory=list)
    digests: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cumulative: list[int] = field(default_factory=list)
    """Tokens up to and including each block."""
    hashes: list[bytes] = field(default_factory=list)
    """The prefix hash ending at each block."""
    markers: list[int] = field(default_factory=list)
    """Flat positions of the blocks that carry a cache_control marker, in order."""
    _head: tuple[Any, ...] | None = None
    _parts: list[_MessagePart] = field(default_factory=list)
    _messages: list[Any] = field(default_factory=list)
    """The messages of `_parts` (compared with the next request's at C speed)."""
    _turns: list[int] = field(default_factory=list)
    """Indices of the turn-starting messages among them, in order."""
    _params: bytes = b""
    _root: bytes = b""
    _digests: dict[int, tuple[Any, bool, str, bytes]] = field(default_factory=dict)
    """id(block) -> (block, first, role, digest): a block seen at another position (the
    history shifted under a moving cut) is not serialised and hashed again."""

    def __deepcopy__(self, memo: dict[int, Any]) -> RequestBlocks:
        # A copy starts empty: its first request is computed in full (no message is shared).
        return RequestBlocks(self.count)

    def update(self, request: Mapping[str, Any], *, drop_earlier_thinking: bool) -> None:
        """Make the lists those of `request` (see the module docstring)."""
        messages = request.get("messages") or []
        head = (
            request.get("model"),
            tuple(sorted(str(b) for b in request.get("betas") or [])),
            request.get("thinking"),
            request.get("tool_choice"),
            request.get("tools"),
            request.get("system"),
            drop_earlier_thinking,
        )
        if head != self._head:
            self._head = head
            self._set_head(request)
            self._parts.clear()
            self._messages.clear()
            self._turns.clear()
        reused = shared_prefix_length(messages, self._messages)
        turns = self._turns
        turns_before = turns[-1] if turns else -1
        kept = bisect_left(turns, reused)
        turn_start = turns[kept - 1] if kept else -1
        if drop_earlier_thinking:
            # A new turn drops the earlier thinking of the turns it closes: those messages
            # change from where the previous last turn started.
            for index in range(reused, len(messages)):
                message = messages[index]
                if isinstance(message, Mapping) and _is_turn(message):
                    turn_start = index
            if turn_start != turns_before:
                # Assistant messages between the two turn starts change: from the earlier one.
                reused = min(reused, max(0, min(turn_start, turns_before)))
        self._cut(reused)
        for index in range(reused, len(messages)):
            self._add_message(index, messages[index], turn_start if drop_earlier_thinking else -1)

    def _set_head(self, request: Mapping[str, Any]) -> None:
        """The tools and system blocks, and the hashes they start the chain with."""
        self.flat.clear()
        self.digests.clear()
        self.tokens.clear()
        self.cumulative.clear()
        self.hashes.clear()
        self.markers.clear()
        current = root_hash(request)
        self._params = message_key_params(request)
        head: list[FlatBlock] = [
            FlatBlock("tools", index, 0, tool)
            for index, tool in enumerate(request.get("tools") or [])
            if isinstance(tool, Mapping)
        ]
        head += [
            FlatBlock("system", index, 0, block)
            for index, block in enumerate(system_blocks(request.get("system")))
        ]
        for block in head:
            digest = block_digest(block)
            current = hashlib.sha256(current + digest).digest()
            self._append(block, digest, current)
        self._root = current

    def _cut(self, keep: int) -> None:
        """Keep the first `keep` messages' figures, drop the rest."""
        parts = self._parts
        position = parts[keep].start if keep < len(parts) else len(self.flat)
        del parts[keep:], self._messages[keep:]
        del self._turns[bisect_left(self._turns, keep) :]
        del self.flat[position:], self.digests[position:], self.tokens[position:]
        del self.cumulative[position:], self.hashes[position:]
        while self.markers and self.markers[-1] >= position:
            self.markers.pop()

    def _add_message(self, index: int, message: Any, turn_start: int) -> None:
        parts = self._parts
        previous = parts[-1] if parts else None
        chain = previous.chain if previous is not None else self._root
        started = previous.messages_started if previous is not None else False
        start = len(self.flat)
        self._messages.append(message)
        if not isinstance(message, Mapping):
            parts.append(_MessagePart(message, start, False, False, chain, started))
            return
        role = str(message.get("role", ""))
        dropped = role == "assistant" and index < turn_start
        for position, block in enumerate(content_blocks_of(message.get("content"))):
            if dropped and block.get("type") in _THINKING:
                continue
            flat = FlatBlock("messages", index, position, block, role)
            digest = self._digest(block, role, position == 0)
            keyed = digest
            if not started:
                keyed = hashlib.sha256(self._params + digest).digest()
                started = True
            chain = hashlib.sha256(chain + keyed).digest()
            self._append(flat, digest, chain)
        turn = _is_turn(message)
        if turn:
            self._turns.append(index)
        parts.append(_MessagePart(message, start, dropped, turn, chain, started))

    def _digest(self, block: Mapping[str, Any], role: str, first: bool) -> bytes:
        known = self._digests.get(id(block))
        if known is not None and known[0] is block and known[1] == first and known[2] == role:
            return known[3]
        if len(self._digests) >= DIGEST_MEMO_SIZE:
            self._digests.clear()
        digest = message_block_digest(block, role, first=first)
        self._digests[id(block)] = (block, first, role, digest)
        return digest

    def _append(self, block: FlatBlock, digest: bytes, chain: bytes) -> None:
        tokens = self.count(block, digest)
        self.flat.append(block)
        self.digests.append(digest)
        self.tokens.append(tokens)
        self.cumulative.append((self.cumulative[-1] if self.cumulative else 0) + tokens)
        self.hashes.append(chain)
        if isinstance(block.block.get("cache_control"), Mapping):
            self.markers.append(len(self.flat) - 1)


def _is_turn(message: Mapping[str, Any]) -> bool:
    """A user message with blocks that are not all tool results."""
    if message.get("role") != "user":
        return False
    blocks = content_blocks_of(message.get("content"))
    return bool(blocks) and any(block.get("type") != "tool_result" for block in blocks)
