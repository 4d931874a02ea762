"""Where cache_control markers go on a request (seed 001 `addCacheBreakpoints`).

Rules:

- Tools: one marker, on the LAST tool schema. A marker caches the whole prefix before it, so
  the last tool caches every schema; marking each tool (as seed 001's diagram shows) would
  exceed the API's limit as soon as there are more than a couple of tools.
- System: blocks keep the scope they declare (`{"scope": "global"}` -> global, a marker without
  scope -> org, no marker -> never cached). A string system prompt, or blocks of which none is
  marked, get one org marker on the last non-empty block.
- Messages: every marker already present is removed and exactly ONE is placed, on the last
  markable block of the last message; for a one-shot fork that must not write to the cache
  (`skip_cache_write`, e.g. the compaction summarizer) on the second-to-last message instead,
  so its own tail creates no entry. Thinking blocks and empty text blocks cannot carry a
  marker: the last block that can is used.
- TTL: every marker gets the session's latched TTL (ttl.py); one TTL per request also keeps
  the API's rule that 1-hour markers precede 5-minute ones.
- Lookback: the API looks for an earlier cached prefix at most 20 blocks back from each
  marker (blocks counted in API order, tools -> system -> messages). When one turn appends
  more than that since the previous request's message marker (`previous_message_breakpoint`,
  the flat index `BreakpointPlan.message_breakpoint` gave last time), the new marker cannot
  reach the old entry and the whole conversation would be re-written at the cache-write
  price. An intermediate marker is then added on a message block within reach of the old
  entry (about half the lookback after it, so an API that looks back a little less still
  finds it). The simulator measures the effect (docs/caching.md): on turns that append more
  than 20 blocks it turns a full miss into a read of everything before the turn.
- Budget: never more than 4 markers in all. When more are wanted, they are dropped in this
  order: the tools marker first (every system marker's prefix already holds all tools), then
  system markers from the first to the last; the message marker and the intermediate one are
  kept. Dropping a marker does not invalidate other entries (a cache entry is keyed by its
  prefix, not by where other markers sit).

Pure: the input request is not modified; a new one is returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from unbounded.caching.blocks import (
    CACHE_LOOKBACK_BLOCKS,
    MAX_CACHE_BREAKPOINTS,
    FlatBlock,
    cache_breakpoint_indices,
    flatten_request,
    is_markable,
    system_blocks,
    without_cache_control,
)
from unbounded.caching.system_prompt import CacheScope, get_cache_control
from unbounded.caching.ttl import CacheTtl, check_ttl
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest


@dataclass(frozen=True, slots=True)
class BreakpointPlan:
    """A request with its cache markers placed, and where they are."""

    request: ProviderRequest
    breakpoints: tuple[int, ...]
    """Flat block indices (API order) that carry a marker, ascending."""
    message_breakpoint: int | None
    """Flat index of the message-level marker: pass it as the next call's
    `previous_message_breakpoint`."""
    intermediate_breakpoint: int | None
    """Flat index of the lookback bridge marker, when one was added."""
    dropped: tuple[str, ...] = ()
    """Markers left out to stay within the API's limit, described."""


def _copy_messages(messages: Any) -> list[dict[str, Any]]:
    copied: list[dict[str, Any]] = []
    for message in messages or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        new = dict(message)
        if isinstance(content, list):
            new["content"] = [
                without_cache_control(b) if isinstance(b, Mapping) else b for b in content
            ]
        copied.append(new)
    return copied


def _mark_message(message: dict[str, Any], marker: dict[str, Any]) -> bool:
    """Put the marker on the message's last markable block; False when none can carry it."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
        return True
    if not isinstance(content, list):
        return False
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if isinstance(block, Mapping) and is_markable(block):
            content[position] = {**block, "cache_control": dict(marker)}
            return True
    return False


def _system_markers(system: Any, ttl: CacheTtl) -> tuple[list[dict[str, Any]], list[int]]:
    """System blocks with markers by scope, and the indices of the marked blocks."""
    blocks = [dict(b) for b in system_blocks(system)]
    scopes: list[CacheScope | None] = []
    for block in blocks:
        marker = block.get("cache_control")
        if isinstance(marker, Mapping):
            scopes.append("global" if marker.get("scope") == "global" else "org")
        else:
            scopes.append(None)
    if not any(
        scope is not None and is_markable(b) for scope, b in zip(scopes, blocks, strict=True)
    ):
        for index in range(len(blocks) - 1, -1, -1):
            if is_markable(blocks[index]):
                scopes[index] = "org"
                break
    marked: list[int] = []
    for index, (block, scope) in enumerate(zip(blocks, scopes, strict=True)):
        block.pop("cache_control", None)
        if scope is not None and is_markable(block):
            block["cache_control"] = get_cache_control(scope, ttl)
            marked.append(index)
    return blocks, marked


def _message_marker_position(flat: list[FlatBlock]) -> int | None:
    for position in range(len(flat) - 1, -1, -1):
        if flat[position].section == "messages" and flat[position].cache_control is not None:
            return position
    return None


def _choose_intermediate(
    flat: list[FlatBlock], previous: int, last: int, lookback: int
) -> int | None:
    """A markable message block after `previous`, within `lookback` of it, before `last`."""
    high = min(previous + lookback, last - 1)
    target = min(previous + max(1, lookback // 2), high)
    order: list[int] = [*range(target, previous, -1), *range(target + 1, high + 1)]
    for position in order:
        block = flat[position]
        if block.section == "messages" and block.markable:
            return position
    return None


def plan_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
    lookback_blocks: int = CACHE_LOOKBACK_BLOCKS,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
    enable_prompt_caching: bool = True,
) -> BreakpointPlan:
    """Place the cache markers on a copy of `request` (see the module docstring for the rules)."""
    check_ttl(ttl)
    if not 1 <= max_breakpoints <= MAX_CACHE_BREAKPOINTS:
        raise ConfigError(
            f"max_breakpoints must be between 1 and {MAX_CACHE_BREAKPOINTS}, not {max_breakpoints}"
        )
    if lookback_blocks < 1:
        raise ConfigError(f"lookback_blocks must be >= 1, not {lookback_blocks}")
    if previous_message_breakpoint is not None and previous_message_breakpoint < 0:
        raise ConfigError("previous_message_breakpoint must be >= 0")
    body: dict[str, Any] = dict(cast(Mapping[str, Any], request))
    tools = [without_cache_control(t) for t in body.get("tools") or [] if isinstance(t, Mapping)]
    if "tools" in body:
        body["tools"] = tools
    messages = _copy_messages(body.get("messages"))
    if "messages" in body:
        body["messages"] = messages
    if not enable_prompt_caching:
        if "system" in body and not isinstance(body["system"], str):
            body["system"] = [without_cache_control(b) for b in system_blocks(body["system"])]
        plain = cast(ProviderRequest, body)
        return BreakpointPlan(plain, (), None, None)

    marker = get_cache_control(None, ttl)
    if body.get("system"):
        blocks, _ = _system_markers(body["system"], ttl)
        body["system"] = blocks
    if tools:
        tools[-1]["cache_control"] = dict(marker)
    target = len(messages) - (2 if skip_cache_write else 1)
    while target >= 0 and not _mark_message(messages[target], marker):
        target -= 1

    flat = flatten_request(body)
    message_position = _message_marker_position(flat)
    intermediate: int | None = None
    if (
        previous_message_breakpoint is not None
        and message_position is not None
        and message_position - previous_message_breakpoint > lookback_blocks
    ):
        intermediate = _choose_intermediate(
            flat, previous_message_breakpoint, message_position, lookback_blocks
        )
        if intermediate is not None:
            chosen = flat[intermediate]
            message = messages[chosen.index]
            if isinstance(message["content"], str):
                message["content"] = [{"type": "text", "text": message["content"]}]
            content = message["content"]
            content[chosen.block_index] = {
                **content[chosen.block_index],
                "cache_control": dict(marker),
            }

    dropped = _fit_budget(body, flat, message_position, intermediate, max_breakpoints)
    final = flatten_request(body)
    placed = tuple(cache_breakpoint_indices(final))
    return BreakpointPlan(
        request=cast(ProviderRequest, body),
        breakpoints=placed,
        message_breakpoint=_message_marker_position(final),
        intermediate_breakpoint=intermediate if intermediate in placed else None,
        dropped=tuple(dropped),
    )


def _fit_budget(
    body: dict[str, Any],
    flat: list[FlatBlock],
    message_position: int | None,
    intermediate: int | None,
    max_breakpoints: int,
) -> list[str]:
    """Remove markers, lowest priority first, until at most `max_breakpoints` remain."""
    kept = {p for p in (message_position, intermediate) if p is not None}
    system_marked = [
        p for p, b in enumerate(flat) if b.section == "system" and b.cache_control is not None
    ]
    tool_marked = [
        p for p, b in enumerate(flat) if b.section == "tools" and b.cache_control is not None
    ]
    # Lowest priority first: tools, then system markers from the first to the last.
    droppable = tool_marked + system_marked
    total = len(kept) + len(droppable)
    dropped: list[str] = []
    while total > max_breakpoints and droppable:
        position = droppable.pop(0)
        block = flat[position]
        if block.section == "tools":
            body["tools"][block.index].pop("cache_control", None)
            dropped.append(f"tools[{block.index}]")
        else:
            body["system"][block.index].pop("cache_control", None)
            dropped.append(f"system[{block.index}]")
        total -= 1
    if total > max_breakpoints and intermediate is not None:
        block = flat[intermediate]
        body["messages"][block.index]["content"][block.block_index].pop("cache_control", None)
        dropped.append(f"messages[{block.index}][{block.block_index}] (lookback bridge)")
    return dropped


def add_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
) -> ProviderRequest:
    """The request with its cache markers placed (see `plan_cache_breakpoints`)."""
    return plan_cache_breakpoints(
        request,
        ttl=ttl,
        skip_cache_write=skip_cache_write,
        previous_message_breakpoint=previous_message_breakpoint,
    ).request


def place_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
) -> ProviderRequest:
    """Same as `add_cache_breakpoints` (the name the compaction fork uses)."""
    return add_cache_breakpoints(
        request,
        ttl=ttl,
        skip_cache_write=skip_cache_write,
        previous_message_breakpoint=previous_message_breakpoint,
    )


def count_cache_breakpoints(request: ProviderRequest | Mapping[str, Any]) -> int:
    """How many cache_control markers a request carries (tools, system and messages)."""
    return len(cache_breakpoint_indices(flatten_request(request)))
