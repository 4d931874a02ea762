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
- TTL: the message markers get the session's latched TTL (ttl.py); the tools and system
  markers get `prefix_ttl` (by default the same). The prefix may live longer than the
  messages, never shorter: the API requires 1-hour markers to precede 5-minute ones, and the
  tools and system come first.
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

Pure: the input request is not modified; a new one is returned. Messages the placement does
not change are shared with the input rather than copied (only marked messages are copied).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress
from operator import is_not
from typing import Any, Protocol, cast

from unbounded.caching.blocks import (
    CACHE_LOOKBACK_BLOCKS,
    MAX_CACHE_BREAKPOINTS,
    cache_breakpoint_indices,
    content_blocks_of,
    flatten_request,
    is_markable,
    system_blocks,
    without_cache_control,
)
from unbounded.caching.system_prompt import CacheScope, get_cache_control
from unbounded.caching.ttl import CacheTtl, check_ttl
from unbounded.errors import ConfigError
from unbounded.model.prefix import shared_prefix_length_own
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
    marked_messages: tuple[int, ...] = field(default=(), compare=False)
    """Indices of the messages that carry a marker (every other one carries none)."""


def _unmarked_messages(messages: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """The messages with every marker removed, and how many blocks each has.

    A message that carries no marker (a plain dict whose blocks are plain dicts without
    `cache_control`) is shared with the input: there is nothing to remove. The others are
    copied with their blocks copied without the marker. Either way the input is untouched.
    """
    out: list[dict[str, Any]] = []
    counts: list[int] = []
    for message in messages or []:
        if type(message) is not dict:
            if not isinstance(message, Mapping):
                continue
            message = dict(message)  # not shared: copied as a plain dict
            copied = True
        else:
            copied = False
        content = message.get("content")
        if isinstance(content, list):
            clean = type(content) is list  # a list subclass is copied as a plain list
            count = 0
            for block in content:
                if type(block) is dict:
                    count += 1
                    if "cache_control" in block:
                        clean = False
                elif isinstance(block, Mapping):
                    count += 1
                    clean = False
            if not clean:
                if not copied:
                    message = dict(message)
                message["content"] = [
                    without_cache_control(b) if isinstance(b, Mapping) else b for b in content
                ]
        else:
            count = 1 if isinstance(content, str) and content else 0
        out.append(message)
        counts.append(count)
    return out, counts


def _mark_message(messages: list[dict[str, Any]], index: int, marker: dict[str, Any]) -> int | None:
    """Put the marker on the last markable block of `messages[index]`, which is replaced by
    a marked copy; the marked block's index among the message's blocks, or None when no
    block can carry it."""
    message = messages[index]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        marked = [{"type": "text", "text": content, "cache_control": dict(marker)}]
        messages[index] = {**message, "content": marked}
        return 0
    if not isinstance(content, list):
        return None
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if isinstance(block, Mapping) and is_markable(block):
            copied = list(content)
            copied[position] = {**block, "cache_control": dict(marker)}
            messages[index] = {**message, "content": copied}
            return sum(1 for b in content[:position] if isinstance(b, Mapping))
    return None


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


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each message's blocks sit in the flat (API order) block sequence, computed from
    block counts instead of flattening the request."""

    offset: int
    """Flat index of the first message block (the tools and system blocks come before)."""
    relative: list[int]
    """Each message's first block counted from `offset`, then the messages' block total."""

    @property
    def first_message_block(self) -> int:
        return self.offset

    def start(self, index: int) -> int:
        """Flat index of message `index`'s first block."""
        return self.offset + self.relative[index]

    def locate(self, position: int) -> tuple[int, int]:
        """(message index, block index in the message) of a flat position in the messages."""
        relative = position - self.offset
        index = bisect_right(self.relative, relative, 0, len(self.relative) - 1) - 1
        return index, relative - self.relative[index]


def _choose_intermediate(
    messages: list[dict[str, Any]], layout: _Layout, previous: int, last: int, lookback: int
) -> int | None:
    """A markable message block after `previous`, within `lookback` of it, before `last`."""
    high = min(previous + lookback, last - 1)
    target = min(previous + max(1, lookback // 2), high)
    order: list[int] = [*range(target, previous, -1), *range(target + 1, high + 1)]
    for position in order:
        if position < layout.first_message_block:
            continue  # a tools or system block
        index, block_index = layout.locate(position)
        if is_markable(content_blocks_of(messages[index].get("content"))[block_index]):
            return position
    return None


def plan_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    prefix_ttl: CacheTtl | None = None,
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
    lookback_blocks: int = CACHE_LOOKBACK_BLOCKS,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
    enable_prompt_caching: bool = True,
) -> BreakpointPlan:
    """Place the cache markers on a copy of `request` (see the module docstring for the rules).

    The cost is one pass over the messages' blocks: messages that need no change are shared
    with the input (treat the plan's request as read-only, like the input), only the marked
    ones are copied, and flat positions are counted rather than flattened.
    """
    return _plan(
        request,
        None,
        ttl=ttl,
        prefix_ttl=prefix_ttl,
        skip_cache_write=skip_cache_write,
        previous_message_breakpoint=previous_message_breakpoint,
        lookback_blocks=lookback_blocks,
        max_breakpoints=max_breakpoints,
        enable_prompt_caching=enable_prompt_caching,
    )


_Unmarked = tuple[list[dict[str, Any]], list[int], list[int]]
"""Messages without markers, their block counts, and each one's first block (relative)."""


class KnownUnmarked(Protocol):
    """A message a caller unmarked already (`CacheBreakpointPlanner.forked`)."""

    @property
    def message(self) -> Any:
        """The message."""
        ...

    @property
    def unmarked(self) -> dict[str, Any]:
        """`message` without its markers (the message itself when it carries none)."""
        ...

    @property
    def count(self) -> int:
        """How many blocks it has."""
        ...


def unmarked_message(message: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """One message without its markers (itself when it carries none) and its block count."""
    out, counts = _unmarked_messages([message])
    return out[0], counts[0]


def _unmarked(messages: Any) -> _Unmarked:
    out, counts = _unmarked_messages(messages)
    return out, counts, list(accumulate(counts, initial=0))


def _plan(
    request: ProviderRequest,
    unmarked: _Unmarked | None,
    *,
    ttl: CacheTtl,
    prefix_ttl: CacheTtl | None,
    skip_cache_write: bool,
    previous_message_breakpoint: int | None,
    lookback_blocks: int,
    max_breakpoints: int,
    enable_prompt_caching: bool,
) -> BreakpointPlan:
    """`plan_cache_breakpoints`, given the request's messages already unmarked (or None)."""
    check_ttl(ttl)
    prefix = ttl if prefix_ttl is None else check_ttl(prefix_ttl)
    if prefix == "5m" and ttl == "1h":
        raise ConfigError(
            "prefix_ttl '5m' with 1-hour message markers: the API requires 1-hour markers "
            "before 5-minute ones; give the prefix '1h' too (or leave prefix_ttl unset)"
        )
    if not 1 <= max_breakpoints <= MAX_CACHE_BREAKPOINTS:
        raise ConfigError(
            f"max_breakpoints must be between 1 and {MAX_CACHE_BREAKPOINTS}, not {max_breakpoints}"
        )
    if lookback_blocks < 1:
        raise ConfigError(f"lookback_blocks must be >= 1, not {lookback_blocks}")
    if previous_message_breakpoint is not None and previous_message_breakpoint < 0:
        raise ConfigError("previous_message_breakpoint must be >= 0")
    body: dict[str, Any] = dict(cast(Mapping[str, Any], request))
    # A plain tool without a marker is shared as it is; only the marked last one is copied.
    tools = [
        t if type(t) is dict and "cache_control" not in t else without_cache_control(t)
        for t in body.get("tools") or []
        if isinstance(t, Mapping)
    ]
    if "tools" in body:
        body["tools"] = tools
    messages, _, relative = unmarked or _unmarked(body.get("messages"))
    messages = list(messages)  # marking replaces items: the planner's copy stays clean
    if "messages" in body:
        body["messages"] = messages
    if not enable_prompt_caching:
        if "system" in body and not isinstance(body["system"], str):
            body["system"] = [without_cache_control(b) for b in system_blocks(body["system"])]
        plain = cast(ProviderRequest, body)
        return BreakpointPlan(plain, (), None, None)

    marker = get_cache_control(None, ttl)
    system_marked: list[int] = []
    if body.get("system"):
        blocks, system_marked = _system_markers(body["system"], prefix)
        body["system"] = blocks
    if tools:
        tools[-1] = {**tools[-1], "cache_control": get_cache_control(None, prefix)}
    target = len(messages) - (2 if skip_cache_write else 1)
    marked_block: int | None = None
    while target >= 0:
        marked_block = _mark_message(messages, target, marker)
        if marked_block is not None:
            break
        target -= 1

    first_system = len(tools)
    layout = _Layout(first_system + len(system_blocks(body.get("system"))), relative)
    message_position = layout.start(target) + marked_block if marked_block is not None else None
    marked_messages = [target] if marked_block is not None else []
    intermediate: int | None = None
    if (
        previous_message_breakpoint is not None
        and message_position is not None
        and message_position - previous_message_breakpoint > lookback_blocks
    ):
        intermediate = _choose_intermediate(
            messages, layout, previous_message_breakpoint, message_position, lookback_blocks
        )
        if intermediate is not None:
            index, block_index = layout.locate(intermediate)
            message = messages[index]
            content = message["content"]
            bridged = (
                [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            )
            bridged[block_index] = {**bridged[block_index], "cache_control": dict(marker)}
            messages[index] = {**message, "content": bridged}
            marked_messages.append(index)

    droppable: list[tuple[int, str, int]] = (
        [(len(tools) - 1, "tools", len(tools) - 1)] if tools else []
    )
    droppable += [(first_system + i, "system", i) for i in system_marked]
    kept, dropped = _fit_budget(
        body, layout, droppable, message_position, intermediate, max_breakpoints
    )
    # Only the messages marked here can carry a marker (the others were shared without one,
    # or copied without it): read the markers there, as flattening the request would.
    in_messages = [
        layout.start(index) + position
        for index in sorted(set(marked_messages))
        for position, block in enumerate(content_blocks_of(messages[index].get("content")))
        if isinstance(block.get("cache_control"), Mapping)
    ]
    placed = (*kept, *in_messages)
    return BreakpointPlan(
        request=cast(ProviderRequest, body),
        breakpoints=placed,
        message_breakpoint=in_messages[-1] if in_messages else None,
        intermediate_breakpoint=intermediate if intermediate in placed else None,
        dropped=tuple(dropped),
        marked_messages=tuple(sorted(set(marked_messages))),
    )


class CacheBreakpointPlanner:
    """`plan_cache_breakpoints` for one conversation's successive requests, incremental.

    Removing old markers is the only step that reads every message; the planner keeps its
    result for the previous request's messages and redoes it only from the first message
    that is not the same object (or an equal one) as before, so a turn costs what it
    appended. The plans are those `plan_cache_breakpoints` makes from scratch (tested on
    every turn of recorded sessions); message dicts must not be edited in place after a
    call, as everywhere in the pipeline (a changed message is a new dict).
    """

    def __init__(self) -> None:
        self._inputs: list[Any] = []
        self._unmarked: _Unmarked = ([], [], [0])

    def reusable_prefix(self, messages: Sequence[Any]) -> int:
        """How many leading messages are those of the previous call's request (the same
        objects, or equal ones): the work `plan` keeps for them."""
        # Reuse is by position: only while every earlier input gave one output.
        if len(self._unmarked[0]) != len(self._inputs):
            return 0
        return shared_prefix_length_own(messages, self._inputs)

    def plan(
        self,
        request: ProviderRequest,
        *,
        ttl: CacheTtl = "5m",
        prefix_ttl: CacheTtl | None = None,
        skip_cache_write: bool = False,
        previous_message_breakpoint: int | None = None,
        unchanged_prefix: int | None = None,
    ) -> BreakpointPlan:
        """The plan `plan_cache_breakpoints` gives this request (same keywords).

        `unchanged_prefix`: `reusable_prefix` of these messages when the caller has it
        already (the planner compares them otherwise)."""
        given = cast(Mapping[str, Any], request).get("messages") or []
        self.follow(given, unchanged_prefix=unchanged_prefix)
        return _plan(
            request,
            self._unmarked,
            ttl=ttl,
            prefix_ttl=prefix_ttl,
            skip_cache_write=skip_cache_write,
            previous_message_breakpoint=previous_message_breakpoint,
            lookback_blocks=CACHE_LOOKBACK_BLOCKS,
            max_breakpoints=MAX_CACHE_BREAKPOINTS,
            enable_prompt_caching=True,
        )

    def follow(self, messages: Sequence[Any], *, unchanged_prefix: int | None = None) -> None:
        """Keep the unmarked form of these messages, as `plan` does for a request's (the work
        is what changed since the last call); `unchanged_prefix` as `plan`'s."""
        inputs = messages if type(messages) is list else list(messages)
        done, counts, relative = self._unmarked
        if unchanged_prefix is None:
            same = self.reusable_prefix(inputs)
        elif len(done) != len(self._inputs):
            same = 0
        else:
            same = min(unchanged_prefix, len(inputs), len(self._inputs))
        tail, tail_counts = _unmarked_messages(inputs[same:])
        # The kept lists are cut and extended in place: the work is what changed.
        del done[same:], counts[same:], relative[same + 1 :]
        done.extend(tail)
        counts.extend(tail_counts)
        relative.extend(accumulate(tail_counts, initial=relative[-1]))
        del relative[same + 1]  # accumulate repeats its initial value
        # The planner's own copy of the inputs, brought up to date in place (not copied).
        del self._inputs[same:]
        self._inputs.extend(inputs[same:])

    def forked(
        self, messages: Sequence[Any], known: Mapping[int, KnownUnmarked]
    ) -> CacheBreakpointPlanner:
        """A planner whose last request's messages were `messages` (a list the caller built
        from the messages this planner follows, some replaced), for `plan_fork`: a message
        that is the one this planner holds at its position takes its unmarked form from it,
        one that is `known[position].message` the unmarked form given there, the others are
        unmarked here. Nothing of this planner changes."""
        inputs = list(messages)
        done, counts, _ = self._unmarked
        held = self._inputs
        fork = CacheBreakpointPlanner()
        size = len(inputs)
        if len(done) != len(held) or len(held) < size:
            return fork  # (positions are not the inputs' once one was left out)
        out, out_counts = done[:size], counts[:size]
        for position in compress(range(size), map(is_not, inputs, held[:size])):
            message = inputs[position]
            given = known.get(position)
            if given is not None and given.message is message:
                out[position], out_counts[position] = given.unmarked, given.count
                continue
            one, one_count = _unmarked_messages([message])
            if len(one) != 1:
                return CacheBreakpointPlanner()  # not a message: the positions shift
            out[position], out_counts[position] = one[0], one_count[0]
        fork._inputs = inputs
        fork._unmarked = (out, out_counts, list(accumulate(out_counts, initial=0)))
        return fork

    def plan_fork(
        self,
        request: ProviderRequest,
        *,
        ttl: CacheTtl = "5m",
        prefix_ttl: CacheTtl | None = None,
        skip_cache_write: bool = False,
    ) -> BreakpointPlan:
        """The plan `plan_cache_breakpoints` gives a one-off request that repeats the last
        request's messages and adds its own (a compaction's summary request, which forks
        the conversation's cache): the unmarked messages this planner kept are reused for
        the shared prefix, and what it keeps for the conversation's next request is left
        as it is."""
        given = cast(Mapping[str, Any], request).get("messages") or []
        inputs = given if type(given) is list else list(given)
        done, counts, relative = self._unmarked
        same = self.reusable_prefix(inputs)
        tail, tail_counts = _unmarked_messages(inputs[same:])
        unmarked: _Unmarked = (
            [*done[:same], *tail],
            [*counts[:same], *tail_counts],
            [*relative[:same], *accumulate(tail_counts, initial=relative[same])],
        )
        return _plan(
            request,
            unmarked,
            ttl=ttl,
            prefix_ttl=prefix_ttl,
            skip_cache_write=skip_cache_write,
            previous_message_breakpoint=None,
            lookback_blocks=CACHE_LOOKBACK_BLOCKS,
            max_breakpoints=MAX_CACHE_BREAKPOINTS,
            enable_prompt_caching=True,
        )


def _fit_budget(
    body: dict[str, Any],
    layout: _Layout,
    droppable: list[tuple[int, str, int]],
    message_position: int | None,
    intermediate: int | None,
    max_breakpoints: int,
) -> tuple[list[int], list[str]]:
    """Remove markers, lowest priority first, until at most `max_breakpoints` remain.

    `droppable` holds the tools and system markers as (flat position, section, index), tools
    first (the lowest priority), then system markers from the first to the last; the message
    marker and the lookback bridge are kept unless the budget has no room for the bridge.
    Returns the flat positions of the tools and system markers left, and the dropped markers
    described."""
    remaining = list(droppable)
    total = sum(1 for p in (message_position, intermediate) if p is not None) + len(remaining)
    dropped: list[str] = []
    while total > max_breakpoints and remaining:
        _, section, index = remaining.pop(0)
        body[section][index].pop("cache_control", None)
        dropped.append(f"{section}[{index}]")
        total -= 1
    if total > max_breakpoints and intermediate is not None:
        message_index, block_index = layout.locate(intermediate)
        body["messages"][message_index]["content"][block_index].pop("cache_control", None)
        dropped.append(f"messages[{message_index}][{block_index}] (lookback bridge)")
    return [position for position, _, _ in remaining], dropped


def add_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    prefix_ttl: CacheTtl | None = None,
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
) -> ProviderRequest:
    """The request with its cache markers placed (see `plan_cache_breakpoints`)."""
    return plan_cache_breakpoints(
        request,
        ttl=ttl,
        prefix_ttl=prefix_ttl,
        skip_cache_write=skip_cache_write,
        previous_message_breakpoint=previous_message_breakpoint,
    ).request


def place_cache_breakpoints(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    prefix_ttl: CacheTtl | None = None,
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
) -> ProviderRequest:
    """Same as `add_cache_breakpoints` (the name the compaction fork uses)."""
    return add_cache_breakpoints(
        request,
        ttl=ttl,
        prefix_ttl=prefix_ttl,
        skip_cache_write=skip_cache_write,
        previous_message_breakpoint=previous_message_breakpoint,
    )


def count_cache_breakpoints(request: ProviderRequest | Mapping[str, Any]) -> int:
    """How many cache_control markers a request carries (tools, system and messages)."""
    return len(cache_breakpoint_indices(flatten_request(request)))
