"""A request as the flat sequence of blocks the prompt cache sees, and their prefix hashes.

Anthropic renders a request in the order tools -> system -> messages, and its prompt cache
works on that sequence block by block: each tool schema is one block, each system block is
one (a string system prompt is one text block), and each content block of each message is one
(string content is one text block). Placement (which must count blocks for the 20-block
lookback), the simulator (which hashes prefixes) and the break detector (which fingerprints
what keys the cache) all read a request through `flatten_request`, so they agree on which
block is where.

Hashing rules (the simulator's cache key, see simulator.py):

- a block's digest is the SHA-256 of its canonical JSON (keys sorted, no whitespace) with
  `cache_control` removed: a breakpoint moving from one message to the next must not change
  the prefix it closes, or no conversation would ever read its own cache;
- the first block of each message also hashes the message's role, so two messages never
  collapse into one;
- the prefix hash of block i chains the prefix hash of block i-1 with block i's digest; the
  chain starts from a root that hashes the model and the beta headers (a different model
  never shares a cache);
- the thinking configuration and tool_choice are mixed in at the first message block: they
  invalidate the message part of the cache and leave tools and system cached, as Anthropic
  documents for both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import orjson

from unbounded.model.request import ProviderRequest

CACHE_LOOKBACK_BLOCKS = 20
"""How far back (in blocks) the API looks from a breakpoint for an earlier cached prefix."""
MAX_CACHE_BREAKPOINTS = 4
"""The most cache_control markers one request may carry (tools, system and messages)."""
UNMARKABLE_BLOCK_TYPES = frozenset({"thinking", "redacted_thinking"})
"""Block types the API refuses a cache_control on."""

BlockSection = Literal["tools", "system", "messages"]


@dataclass(frozen=True, slots=True)
class FlatBlock:
    """One block of a request in API order, with where it sits in the request."""

    section: BlockSection
    index: int
    """Tool index, system block index, or message index."""
    block_index: int
    """Block index inside its message (0 for tools and system blocks)."""
    block: Mapping[str, Any]
    """The block as sent (string content shown as one text block)."""
    role: str | None = None
    """The message role, for message blocks."""

    @property
    def cache_control(self) -> Mapping[str, Any] | None:
        """The block's cache_control marker, if it carries one."""
        value = self.block.get("cache_control")
        return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else None

    @property
    def markable(self) -> bool:
        """Whether the API accepts a cache_control marker on this block."""
        return is_markable(self.block)


def is_markable(block: Mapping[str, Any]) -> bool:
    """Whether the API accepts a cache_control marker on a block (not thinking, not empty
    text)."""
    kind = block.get("type")
    if kind in UNMARKABLE_BLOCK_TYPES:
        return False
    return not (kind == "text" and not str(block.get("text", "")))


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: keys sorted, no whitespace, non-JSON values as strings."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)


def without_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of a block without its cache_control marker."""
    return {key: value for key, value in block.items() if key != "cache_control"}


def text_block(text: str) -> dict[str, Any]:
    """A plain text block."""
    return {"type": "text", "text": text}


def system_blocks(system: str | Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The system prompt as blocks (a non-empty string is one text block)."""
    if system is None:
        return []
    if isinstance(system, str):
        return [text_block(system)] if system else []
    return [block for block in system if isinstance(block, Mapping)]


def content_blocks_of(content: Any) -> list[Mapping[str, Any]]:
    """Message content as blocks (a non-empty string is one text block)."""
    if isinstance(content, str):
        return [text_block(content)] if content else []
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def flatten_request(request: ProviderRequest | Mapping[str, Any]) -> list[FlatBlock]:
    """Every block of a request in API order: tools, then system, then messages."""
    body = cast(Mapping[str, Any], request)
    flat: list[FlatBlock] = []
    for index, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, Mapping):
            flat.append(FlatBlock("tools", index, 0, tool))
    for index, block in enumerate(system_blocks(body.get("system"))):
        flat.append(FlatBlock("system", index, 0, block))
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role", ""))
        for position, block in enumerate(content_blocks_of(message.get("content"))):
            flat.append(FlatBlock("messages", index, position, block, role))
    return flat


_THINKING = frozenset({"thinking", "redacted_thinking"})


def without_earlier_thinking(flat: list[FlatBlock]) -> list[FlatBlock]:
    """The blocks the API keeps for a model that drops earlier turns' thinking.

    Such models (Claude before Opus 4.5) ignore the thinking blocks of assistant messages
    before the last user message that is not only tool results: a new user turn closes the
    previous turn, whose thinking then no longer counts, so the cached prefix ends before the
    first of them.
    """
    turn_start = -1
    current: int | None = None
    current_role: str | None = None
    only_results = True
    for block in flat:
        if block.section != "messages":
            continue
        if block.index != current:
            if current is not None and current_role == "user" and not only_results:
                turn_start = current
            current, current_role, only_results = block.index, block.role, True
        if block.block.get("type") != "tool_result":
            only_results = False
    if current is not None and current_role == "user" and not only_results:
        turn_start = current
    if turn_start < 0:
        return flat
    return [
        block
        for block in flat
        if not (
            block.section == "messages"
            and block.role == "assistant"
            and block.index < turn_start
            and block.block.get("type") in _THINKING
        )
    ]


def block_digest(flat: FlatBlock) -> bytes:
    """SHA-256 of a block's canonical JSON without cache_control (role-tagged at a message's
    first block)."""
    if flat.section == "messages":
        return message_block_digest(flat.block, flat.role or "", first=flat.block_index == 0)
    return hashlib.sha256(flat.section.encode() + b"\n" + _content_json(flat.block)).digest()


def message_block_digest(block: Mapping[str, Any], role: str, *, first: bool) -> bytes:
    """`block_digest` of a message block, without building its FlatBlock: `first` is whether
    it is the message's first block (flat `block_index == 0`), `role` the message's role."""
    tag = b"message:" + role.encode() + b"\n" if first else b"messages\n"
    return hashlib.sha256(tag + _content_json(block)).digest()


def _content_json(block: Mapping[str, Any]) -> bytes:
    """Canonical JSON of a block without its cache_control (no copy when it has none)."""
    if type(block) is dict and "cache_control" not in block:
        return canonical_json(block)  # the same bytes as the copy would give
    return canonical_json(without_cache_control(block))


def root_hash(request: ProviderRequest | Mapping[str, Any]) -> bytes:
    """The hash every prefix chain of this request starts from: model and beta headers."""
    body = cast(Mapping[str, Any], request)
    betas = sorted(str(b) for b in body.get("betas") or [])
    return hashlib.sha256(canonical_json({"model": body.get("model"), "betas": betas})).digest()


def message_key_params(request: ProviderRequest | Mapping[str, Any]) -> bytes:
    """Digest of the parameters that key the message part of the cache (thinking,
    tool_choice)."""
    body = cast(Mapping[str, Any], request)
    params = {"thinking": body.get("thinking"), "tool_choice": body.get("tool_choice")}
    return hashlib.sha256(canonical_json(params)).digest()


def prefix_hashes(
    request: ProviderRequest | Mapping[str, Any],
    flat: Sequence[FlatBlock] | None = None,
    digests: Sequence[bytes] | None = None,
) -> list[str]:
    """The prefix hash ending at each block of the request (hex), in API order."""
    blocks = flatten_request(request) if flat is None else flat
    own = [block_digest(b) for b in blocks] if digests is None else digests
    current = root_hash(request)
    message_params: bytes | None = None
    hashes: list[str] = []
    for block, digest in zip(blocks, own, strict=True):
        if block.section == "messages" and message_params is None:
            message_params = message_key_params(request)
            digest = hashlib.sha256(message_params + digest).digest()
        current = hashlib.sha256(current + digest).digest()
        hashes.append(current.hex())
    return hashes


def cache_breakpoint_indices(flat: Sequence[FlatBlock]) -> list[int]:
    """Flat indices of the blocks that carry a cache_control marker."""
    return [i for i, block in enumerate(flat) if block.cache_control is not None]
