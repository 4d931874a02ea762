"""Prompt-cache break detection (seed 001 `promptCacheBreakDetection`, seed 004).

Two phases per API call, each query source (main thread, each sub-agent type…) tracked
separately:

1. Before the call, `record_prompt_state(request, query_source=, now=)` takes a snapshot of
   everything that keys the cache: system prompt hash and length, tools aggregate hash and
   per-tool hashes, model, beta headers, the cache_control layout of tools and system (TTL
   and scope of each marker), global cache strategy, thinking config, effort, the other body
   fields, and the message prefix (per-block digests, cache_control excluded); plus a
   diffable text. Differences from the previous snapshot of the same source become the
   pending changes.
2. After it, `check_response_for_cache_break(usage, query_source=, now=)` compares
   `cache_read_input_tokens` with the previous call of the same source. A drop is a break
   when it is more than `Policy.cache_break_min_drop_fraction` (5%) of the previous read AND
   more than `Policy.cache_break_min_drop_tokens` (2,000). A break is explained from the
   pending changes ("model changed (a -> b)", "system prompt changed (+142 chars)", "tools
   changed (+1/-0 tools)", "cache_control changed (scope or TTL)", …); when more time than
   the TTL passed since the previous call, "possible 5min TTL expiry" (or 1h) is added; with
   no change and no TTL gap the reason is "likely server-side". The diff of the two snapshots
   is written to a file in the directory the caller gave (never printed), and a `CacheBreak`
   event is returned (and sent to the event sink).

Expected drops are not breaks:

- `notify_compaction(query_source)` resets the baseline: the next call establishes a new one
  (an `ExpectedCacheDrop` reports what the old baseline was).
- `notify_cache_deletion(query_source, deleted_tokens)` (the cached-microcompact tier)
  announces cache_edits deletions: the next call's drop is excused up to `deleted_tokens`
  (entirely when the count is unknown, as in seed 001). The API's own
  `cache_deleted_input_tokens` is read from each usage and kept as a baseline per source
  (seed 004); its increase since the previous call excuses that much drop instead of the
  notice's count (both describe one deletion: never added). The tier can pass the baseline it
  captured with `cache_deleted_baseline=`.

Models whose caching differs (Haiku, seed 001) are excluded: their drops are never flagged.
Pure core: the time is passed in, the file write goes through `write_diff` (default: write
the file), nothing reads a clock. Where seed 001 and seed 004 overlap they agree; seed 004's
cache_deleted_input_tokens baseline is the refinement used for deletions with a known size.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, cast

import orjson

from unbounded.caching.blocks import (
    canonical_json,
    content_blocks_of,
    message_block_digest,
    system_blocks,
    text_block,
    without_cache_control,
)
from unbounded.caching.digest_run import DigestRun
from unbounded.caching.ttl import (
    DEFAULT_QUERY_SOURCE,
    CacheTtl,
    TimeLike,
    as_seconds,
    ttl_of_cache_control,
    ttl_seconds,
)
from unbounded.deferred_release import DeferredRelease
from unbounded.errors import ConfigError
from unbounded.events import BreakCause, CacheBreak, EventSink, ExpectedCacheDrop, emit
from unbounded.model.content import Usage
from unbounded.model.prefix import shared_prefix_length_own
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy

logger = logging.getLogger(__name__)
DEFAULT_EXCLUDED_MODELS: tuple[str, ...] = ("*haiku*",)
"""Model patterns whose cache reads are not tracked (seed 001: Haiku caches differently)."""
NOT_CACHE_KEYS = frozenset(
    {
        "model",
        "system",
        "tools",
        "messages",
        "betas",
        "thinking",
        "max_tokens",
        "metadata",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "cache_edits",
        "output_config",
        "effort",
    }
)
"""Body fields that are either snapshotted on their own or do not key the cache."""


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PromptStateSnapshot:
    """Everything about a request that keys the prompt cache (seed 001 `recordPromptState`)."""

    model: str
    system_hash: str
    system_chars: int
    tools_hash: str
    tool_hashes: tuple[tuple[str, str], ...]
    """(tool name, schema hash), in request order."""
    betas: tuple[str, ...]
    cache_control_layout: tuple[tuple[str, int, str, str], ...]
    """(section, index from the end, ttl, scope) of each tools/system marker."""
    global_cache_strategy: str
    thinking_hash: str
    effort: str | None
    extra_body: tuple[tuple[str, str], ...]
    """(field, value hash) of other body fields that key the cache."""
    message_digests: Sequence[tuple[str, ...]]
    """Per message, its block digests (cache_control excluded): a `DigestRun`, equal to the
    tuple of the same digests, sharing its unchanged part with the previous snapshot's."""
    ttl: CacheTtl
    """The TTL that caches the conversation: the shortest one on the message markers (the
    tools and system markers' when no message carries one). A pause longer than it loses the
    messages' cache even when a 1-hour prefix survives."""
    diffable: str

    @property
    def tools_names(self) -> tuple[str, ...]:
        """Tool names in order."""
        return tuple(name for name, _ in self.tool_hashes)


def _tool_name(tool: Mapping[str, Any], index: int) -> str:
    name = tool.get("name")
    return str(name) if name else f"#{index}"


def _effort(body: Mapping[str, Any]) -> str | None:
    config = body.get("output_config")
    nested = config.get("effort") if isinstance(config, Mapping) else None
    top = body.get("effort")
    if nested is None:
        return str(top) if top is not None else None
    if top is None or str(top) == str(nested):
        return str(nested)
    # Both given and different: each is kept, so a change to either one is seen.
    return f"{nested}, top-level {top}"


def _diffable_text(
    body: Mapping[str, Any],
    system: list[Mapping[str, Any]],
    tools: list[Mapping[str, Any]],
    extra: Mapping[str, Any],
) -> str:
    lines = [
        f"model: {body.get('model')}",
        f"betas: {', '.join(sorted(str(b) for b in body.get('betas') or [])) or '-'}",
        f"thinking: {orjson.dumps(body.get('thinking'), option=orjson.OPT_SORT_KEYS).decode()}",
        f"effort: {_effort(body) or '-'}",
        f"extra body: {canonical_json(dict(extra)).decode()}",
        f"== system ({len(system)} blocks) ==",
    ]
    for index, block in enumerate(system):
        marker = block.get("cache_control")
        lines.append(f"-- system[{index}] cache_control={canonical_json(marker).decode()}")
        lines.extend(str(block.get("text", canonical_json(block).decode())).splitlines())
    lines.append(f"== tools ({len(tools)}) ==")
    for index, tool in enumerate(tools):
        marker = tool.get("cache_control")
        lines.append(
            f"-- tools[{index}] {_tool_name(tool, index)} "
            f"cache_control={canonical_json(marker).decode()}"
        )
        schema = orjson.dumps(
            without_cache_control(tool), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
        ).decode()
        lines.extend(schema.splitlines())
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class _MessageDigests:
    """One message's block digests and marker TTLs, with what they were computed from.

    Holding the content and its blocks (strong references) is what makes the identity checks
    of `_message_digests` sound: an object compared by `is` is alive, so no new object can
    have its id.
    """

    role: str
    content: Any
    """The message content (a str, a list, or anything else, which has no blocks)."""
    items: tuple[Any, ...]
    """The content list's items, by position (empty unless the content is a list)."""
    item_digests: tuple[str | None, ...]
    """Each item's digest (None for an item that is not a block)."""
    first: int
    """Position of the message's first block (-1 when it has none)."""
    digests: tuple[str, ...]
    """The message's block digests, in order (`PromptStateSnapshot.message_digests`)."""
    ttls: tuple[CacheTtl, ...]
    """The TTLs the message's block markers ask for."""


def _short(digest: bytes) -> str:
    return digest.hex()[:16]


def _marker_ttls(content: Any) -> tuple[CacheTtl, ...]:
    if not isinstance(content, list):
        return ()
    ttls: list[CacheTtl] = []
    for block in content_blocks_of(content):
        marker = block.get("cache_control")
        if isinstance(marker, Mapping):
            ttls.append(ttl_of_cache_control(marker))
    return tuple(ttls)


def _message_digests(
    message: Mapping[str, Any], ttls: tuple[CacheTtl, ...], prior: _MessageDigests | None
) -> _MessageDigests:
    """The digests of a message's blocks; blocks that are the very objects `prior` digested
    at the same position (and equally first or not) reuse its digests."""
    role = str(message.get("role", ""))
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return _MessageDigests(role, content, (), (), -1, (), ttls)
        text = _short(message_block_digest(text_block(content), role, first=True))
        return _MessageDigests(role, content, (), (), 0, (text,), ttls)
    if not isinstance(content, list):
        return _MessageDigests(role, content, (), (), -1, (), ttls)
    old_items: tuple[Any, ...] = ()
    old_digests: tuple[str | None, ...] = ()
    old_first = -1
    if prior is not None and prior.role == role and isinstance(prior.content, list):
        old_items, old_digests, old_first = prior.items, prior.item_digests, prior.first
    item_digests: list[str | None] = []
    first = -1
    for position, item in enumerate(content):
        if not isinstance(item, Mapping):
            item_digests.append(None)
            continue
        if first < 0:
            first = position
        if (
            position < len(old_items)
            and old_items[position] is item
            and (position == first) == (position == old_first)
        ):
            item_digests.append(old_digests[position])
        else:
            item_digests.append(_short(message_block_digest(item, role, first=position == first)))
    digests = tuple(d for d in item_digests if d is not None)
    return _MessageDigests(role, content, tuple(content), tuple(item_digests), first, digests, ttls)


def _messages_digests(
    messages: list[Mapping[str, Any]], previous: Sequence[_MessageDigests]
) -> list[_MessageDigests]:
    """Every message's digests, reusing `previous` (the last request's, by position) where
    they apply (see `PromptCacheBreakDetector`).

    The message at a position is reused whole when it has the same role and the same
    string content, or a content list holding the very block objects `previous` digested, in
    order (checked by identity, so a list edited in place is caught). Otherwise its blocks
    are digested, each one that is the same object at the same position reusing its digest.
    (The messages a caller knows unchanged are cut off before: `_snapshot`.)
    """
    known = len(previous)
    reused: list[_MessageDigests | None] = []
    for index, message in enumerate(messages):
        prior = previous[index] if index < known else None
        if prior is not None:
            content = message.get("content")
            before = prior.content
            if isinstance(content, list):
                items = prior.items
                same = (
                    isinstance(before, list)
                    and len(content) == len(items)
                    and all(map(operator.is_, content, items))
                )
            else:
                same = isinstance(content, str) and isinstance(before, str) and content == before
            if not (same and prior.role == str(message.get("role", ""))):
                prior = None
        reused.append(prior)
    # Marker TTLs first, for every message (the order a from-scratch snapshot reads them in).
    ttls = [
        prior.ttls if prior is not None else _marker_ttls(message.get("content"))
        for message, prior in zip(messages, reused, strict=True)
    ]
    return [
        prior
        if prior is not None
        else _message_digests(message, ttl, previous[index] if index < known else None)
        for index, (message, prior, ttl) in enumerate(zip(messages, reused, ttls, strict=True))
    ]


_PREFIX_FIELDS = (
    "model",
    "system_hash",
    "system_chars",
    "tools_hash",
    "tool_hashes",
    "betas",
    "cache_control_layout",
    "global_cache_strategy",
    "thinking_hash",
    "effort",
    "extra_body",
    "diffable",
)


def _prefix_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot's fields that depend on everything but the messages (system, tools,
    model, settings): the costly part of a snapshot, the same on most turns."""
    system = system_blocks(body.get("system"))
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    system_text = "".join(str(b.get("text", "")) for b in system)
    system_content = [without_cache_control(b) for b in system]
    tool_hashes = tuple(
        (_tool_name(tool, i), _digest(without_cache_control(tool))) for i, tool in enumerate(tools)
    )
    layout: list[tuple[str, int, str, str]] = []
    for section, blocks in (("tools", tools), ("system", system)):
        for index, block in enumerate(blocks):
            marker = block.get("cache_control")
            if isinstance(marker, Mapping):
                scope = "global" if marker.get("scope") == "global" else "org"
                # Counted from the end: a tool appended keeps "the last tool is marked".
                layout.append((section, index - len(blocks), ttl_of_cache_control(marker), scope))
    extra = {k: v for k, v in body.items() if k not in NOT_CACHE_KEYS}
    scopes = {scope for section, _, _, scope in layout if section == "system"}
    return {
        "model": str(body.get("model") or ""),
        "system_hash": _digest(system_content),
        "system_chars": len(system_text),
        "tools_hash": _digest([without_cache_control(t) for t in tools]),
        "tool_hashes": tool_hashes,
        "betas": tuple(sorted(str(b) for b in body.get("betas") or [])),
        "cache_control_layout": tuple(layout),
        "global_cache_strategy": "global" if "global" in scopes else ("org" if scopes else "none"),
        "thinking_hash": _digest(body.get("thinking")),
        "effort": _effort(body),
        "extra_body": tuple(sorted((k, _digest(v)) for k, v in extra.items())),
        "diffable": _diffable_text(body, system, tools, extra),
    }


def _without_messages(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "messages"}


def snapshot_request(request: ProviderRequest | Mapping[str, Any]) -> PromptStateSnapshot:
    """The cache-keying state of a request (pure)."""
    return _snapshot(request, ())[0]


def _snapshot(
    request: ProviderRequest | Mapping[str, Any],
    previous: Sequence[_MessageDigests],
    unchanged: int = 0,
    previous_digests: Sequence[tuple[str, ...]] = (),
    ttls_in_unchanged: frozenset[str] = frozenset(),
    prefix: Mapping[str, Any] | None = None,
    reuse: bool = False,
) -> tuple[PromptStateSnapshot, list[_MessageDigests]]:
    """`snapshot_request`, reusing the message digests of `previous` where they apply; also
    returns this request's message digests (the `previous` of the next call). The first
    `unchanged` messages are the previous request's, unmodified (`previous_digests` is that
    request's `message_digests`; `ttls_in_unchanged`: the TTLs their markers ask for).
    `prefix`: the `_prefix_fields` of a request equal to this one but for its messages.
    `reuse`: `previous` is the caller's to change (it becomes the returned list)."""
    body = cast(Mapping[str, Any], request)
    if prefix is None:
        prefix = _prefix_fields(body)
    prefix_ttls = {ttl for _, _, ttl, _ in prefix["cache_control_layout"]}
    raw = body.get("messages") or []
    # Reused messages were dicts already; only what follows them is filtered and digested.
    unchanged = min(unchanged, len(previous), len(previous_digests), len(raw))
    tail = [m for m in raw[unchanged:] if type(m) is dict or isinstance(m, Mapping)]
    added = _messages_digests(tail, previous[unchanged:])
    if reuse and isinstance(previous, list):
        digested = previous  # the caller's own list, brought up to date in place: O(added)
        del digested[unchanged:]
    else:
        digested = list(previous[:unchanged])
    digested.extend(added)
    message_ttls = set(ttls_in_unchanged)
    for entry in digested[unchanged:]:
        message_ttls.update(entry.ttls)
    base = (
        previous_digests
        if isinstance(previous_digests, DigestRun)
        else DigestRun(previous_digests[:unchanged])
    )
    # The unchanged messages' chunks are shared, not copied: a turn costs what it changed.
    message_digests = base.extended(unchanged, (entry.digests for entry in digested[unchanged:]))
    snapshot = PromptStateSnapshot(
        **prefix,
        message_digests=message_digests,
        ttl=_conversation_ttl(message_ttls or prefix_ttls),
    )
    return snapshot, digested


def _conversation_ttl(ttls: set[str]) -> CacheTtl:
    """The shortest of the TTLs that cache the conversation ("5m" when none is asked for)."""
    return "1h" if ttls == {"1h"} else "5m"


@dataclass(frozen=True, slots=True)
class PromptChange:
    """One difference between two snapshots, explained."""

    cause: BreakCause
    description: str


def _signed(value: int) -> str:
    return f"+{value}" if value >= 0 else str(value)


def _messages_change(
    previous: Sequence[tuple[str, ...]],
    current: Sequence[tuple[str, ...]],
    shared: int = 0,
) -> PromptChange | None:
    """The first message where the previous request's messages stop being a prefix (the
    first `shared` digests are known to be the previous ones)."""
    last = len(previous) - 1
    if last < 0 or (
        # The usual turn, compared at C speed (reused digest tuples are the same objects).
        len(current) > last
        and (shared >= last or current[:last] == previous[:last])
        and current[last][: len(previous[last])] == previous[last]
    ):
        return None
    for index, old in enumerate(previous):
        if index >= len(current):
            return PromptChange(
                "messages", f"messages changed (request has fewer than {index + 1})"
            )
        new = current[index]
        last = index == len(previous) - 1
        matches = new[: len(old)] == old if last else new == old
        if not matches:
            return PromptChange(
                "messages",
                f"messages changed from message #{index} "
                "(no longer a prefix of the previous request)",
            )
    return None


def compare_prompt_states(
    previous: PromptStateSnapshot, current: PromptStateSnapshot, *, shared_messages: int = 0
) -> list[PromptChange]:
    """What changed between two snapshots, each change explained (seed 001 wording).

    `shared_messages`: how many leading message digests `current` took from `previous`
    unchanged (a caller that knows saves comparing them)."""
    changes: list[PromptChange] = []
    if previous.model != current.model:
        changes.append(PromptChange("model", f"model changed ({previous.model} → {current.model})"))
    if previous.system_hash != current.system_hash:
        delta = current.system_chars - previous.system_chars
        changes.append(PromptChange("system", f"system prompt changed ({_signed(delta)} chars)"))
    if previous.tools_hash != current.tools_hash:
        old = dict(previous.tool_hashes)
        new = dict(current.tool_hashes)
        added = [name for name in new if name not in old]
        removed = [name for name in old if name not in new]
        edited = [name for name in new if name in old and old[name] != new[name]]
        detail = f"+{len(added)}/-{len(removed)} tools"
        if added:
            detail += f"; added {', '.join(added)}"
        if removed:
            detail += f"; removed {', '.join(removed)}"
        if edited:
            detail += f"; schema changed: {', '.join(edited)}"
        if not (added or removed or edited):
            detail += "; order changed"
        changes.append(PromptChange("tools", f"tools changed ({detail})"))
    if previous.cache_control_layout != current.cache_control_layout:
        changes.append(PromptChange("cache_control", "cache_control changed (scope or TTL)"))
    if previous.betas != current.betas:
        added_betas = sorted(set(current.betas) - set(previous.betas))
        removed_betas = sorted(set(previous.betas) - set(current.betas))
        detail = f"+{len(added_betas)}/-{len(removed_betas)}"
        names = [f"+{b}" for b in added_betas] + [f"-{b}" for b in removed_betas]
        changes.append(PromptChange("betas", f"betas changed ({detail}: {', '.join(names)})"))
    if previous.thinking_hash != current.thinking_hash:
        changes.append(PromptChange("thinking", "thinking config changed"))
    if previous.effort != current.effort:
        changes.append(
            PromptChange("effort", f"effort changed ({previous.effort} → {current.effort})")
        )
    if previous.extra_body != current.extra_body:
        old_extra = dict(previous.extra_body)
        new_extra = dict(current.extra_body)
        keys = sorted(k for k in {*old_extra, *new_extra} if old_extra.get(k) != new_extra.get(k))
        changes.append(PromptChange("extra_body", f"extra body params changed ({', '.join(keys)})"))
    message_change = _messages_change(
        previous.message_digests, current.message_digests, shared_messages
    )
    if message_change is not None:
        changes.append(message_change)
    return changes


CacheCheck = CacheBreak | ExpectedCacheDrop


@dataclass(slots=True)
class _SourceState:
    snapshot: PromptStateSnapshot | None = None
    pending_changes: list[PromptChange] = field(default_factory=list)
    pending_diff: str = ""
    request_time: float | None = None
    previous_read: int | None = None
    last_call_time: float | None = None
    read_before_compaction: int | None = None
    deletion_pending: bool = False
    deletion_tokens: int | None = None
    cache_deleted_baseline: int = 0
    digested: list[_MessageDigests] = field(default_factory=list)
    """The previous request's message digests, reused for its unchanged messages."""
    first_marked: dict[str, int] = field(default_factory=dict)
    """TTL -> index of the previous request's first message with a marker of that TTL."""
    inputs: list[Any] = field(default_factory=list)
    """The previous request's messages (kept with `messages_immutable`)."""
    rest: dict[str, Any] | None = None
    """The previous request but its messages: when equal, its snapshot's prefix is reused."""


def _safe_name(query_source: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", query_source) or "source"


def write_diff_file(path: Path, text: str) -> None:
    """Write a diff file (the default `write_diff`); creates the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def is_cache_break(previous_read: int, current_read: int, policy: Policy) -> bool:
    """A drop of more than the policy's fraction AND more than its token minimum."""
    drop = previous_read - current_read
    return (
        drop > policy.cache_break_min_drop_fraction * previous_read
        and drop > policy.cache_break_min_drop_tokens
    )


class PromptCacheBreakDetector:
    """Tracks each query source's cache reads and explains the breaks (see module doc).

    Snapshots are incremental: each source keeps the previous request's message digests,
    with references to the objects they were computed from, and a message (or block) at the
    same position that is the very same object reuses its digests, so a turn costs what it
    appended (the session rebuilds each request from the same message objects). The snapshot
    is the one `snapshot_request` gives. Like the rest of the pipeline, this relies on a
    message's blocks not being modified in place once sent: replace a block (or the message)
    to change it, never edit the dict.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        diff_dir: str | Path | None = None,
        excluded_models: Iterable[str] = DEFAULT_EXCLUDED_MODELS,
        sink: EventSink | None = None,
        write_diff: Callable[[Path, str], None] = write_diff_file,
        messages_immutable: bool = False,
    ) -> None:
        self.messages_immutable = messages_immutable
        """The caller never edits a message, system block or tool dict in place (a changed
        one is a new dict): the messages a request shares with the previous one of its source
        (the same objects, or equal ones) are then not looked at again, and an unchanged
        system prompt and tool list are not hashed again, so a turn costs what it appended."""
        if policy is not None and not isinstance(policy, Policy):
            raise ConfigError("policy must be a Policy")
        self.policy = policy or Policy()
        self.diff_dir = Path(diff_dir) if diff_dir is not None else None
        self.excluded_models = tuple(excluded_models)
        for pattern in self.excluded_models:
            if not isinstance(pattern, str) or not pattern:
                raise ConfigError("excluded model patterns must be non-empty strings")
        self._sink = sink
        self._write_diff = write_diff
        self._sources: dict[str, _SourceState] = {}
        self._breaks = 0
        self._release = DeferredRelease()
        """The per-message state a compaction let go of, freed over the calls after it."""

    def _state(self, query_source: str) -> _SourceState:
        if not isinstance(query_source, str) or not query_source:
            raise ConfigError("query_source must be a non-empty string")
        return self._sources.setdefault(query_source, _SourceState())

    def snapshot(self, query_source: str = DEFAULT_QUERY_SOURCE) -> PromptStateSnapshot | None:
        """The last recorded snapshot of a query source."""
        state = self._sources.get(query_source)
        return state.snapshot if state else None

    def record_prompt_state(
        self,
        request: ProviderRequest | Mapping[str, Any],
        *,
        query_source: str = DEFAULT_QUERY_SOURCE,
        now: TimeLike,
    ) -> PromptStateSnapshot:
        """Phase 1, before the call: snapshot the request and note what changed."""
        state = self._state(query_source)
        self._release.step()
        previous = state.snapshot
        raw = cast(Mapping[str, Any], request).get("messages") or []
        unchanged = 0
        if self.messages_immutable:
            same = shared_prefix_length_own(raw, state.inputs) if previous is not None else 0
            unchanged = (
                min(same, len(state.digested), len(previous.message_digests)) if previous else 0
            )
            # Kept up to date in place (not copied): a turn costs the messages it added.
            del state.inputs[same:]
            state.inputs.extend(raw[same:])
        else:
            state.inputs = []
        first_marked = state.first_marked
        rest = _without_messages(cast(Mapping[str, Any], request))
        # Compared by value (C speed): system and tools hashed again only when they changed.
        same_prefix = self.messages_immutable and previous is not None and rest == state.rest
        state.rest = rest if self.messages_immutable else None
        current, state.digested = _snapshot(
            request,
            state.digested,
            unchanged,
            previous.message_digests if previous is not None else (),
            ttls_in_unchanged=frozenset(t for t, at in first_marked.items() if at < unchanged),
            prefix=(
                {name: getattr(previous, name) for name in _PREFIX_FIELDS}
                if same_prefix and previous is not None
                else None
            ),
            reuse=True,
        )
        # Only the messages after the unchanged ones are looked at: O(what changed).
        kept = {ttl: at for ttl, at in first_marked.items() if at < unchanged}
        for index in range(unchanged, len(state.digested)):
            for ttl in state.digested[index].ttls:
                kept.setdefault(ttl, index)
        state.first_marked = kept
        if previous is not None:
            state.pending_changes = compare_prompt_states(
                previous, current, shared_messages=unchanged
            )
            state.pending_diff = (
                ""  # what unified_diff gives for equal texts, without the work
                if previous.diffable == current.diffable
                else "".join(
                    difflib.unified_diff(
                        previous.diffable.splitlines(keepends=True),
                        current.diffable.splitlines(keepends=True),
                        fromfile="previous request",
                        tofile="this request",
                    )
                )
            )
        else:
            state.pending_changes = []
            state.pending_diff = ""
        state.snapshot = current
        state.request_time = as_seconds(now)
        return current

    def notify_compaction(self, query_source: str = DEFAULT_QUERY_SOURCE) -> None:
        """A compaction replaced the history: the next call sets a new baseline."""
        state = self._state(query_source)
        if state.previous_read is not None:
            state.read_before_compaction = state.previous_read
        state.previous_read = None
        state.deletion_pending = False
        state.deletion_tokens = None
        state.snapshot = None
        state.pending_changes = []
        # The old messages are gone: let them go, over the next calls (freeing ~10,000
        # messages' digests and blocks at once would cost this call milliseconds).
        self._release.drop(state.digested)
        self._release.drop(state.inputs)
        state.digested = []
        state.inputs = []
        state.rest = None

    def notify_cache_deletion(
        self,
        query_source: str = DEFAULT_QUERY_SOURCE,
        deleted_tokens: int | None = None,
        *,
        cache_deleted_baseline: int | None = None,
    ) -> None:
        """cache_edits deletions were sent: the next call's drop (up to `deleted_tokens`) is
        expected."""
        if deleted_tokens is not None and deleted_tokens < 0:
            raise ConfigError("deleted_tokens must be >= 0")
        if cache_deleted_baseline is not None and cache_deleted_baseline < 0:
            raise ConfigError("cache_deleted_baseline must be >= 0")
        state = self._state(query_source)
        if state.deletion_pending and state.deletion_tokens is not None and deleted_tokens:
            state.deletion_tokens += deleted_tokens
        else:
            state.deletion_tokens = deleted_tokens
        state.deletion_pending = True
        if cache_deleted_baseline is not None:
            state.cache_deleted_baseline = cache_deleted_baseline

    def _excluded(self, state: _SourceState) -> bool:
        model = state.snapshot.model if state.snapshot else ""
        return any(fnmatchcase(model.lower(), p.lower()) for p in self.excluded_models)

    def check_response_for_cache_break(
        self,
        usage: Usage | Mapping[str, Any],
        *,
        query_source: str = DEFAULT_QUERY_SOURCE,
        now: TimeLike,
    ) -> CacheCheck | None:
        """Phase 2, after the call: a CacheBreak, an ExpectedCacheDrop, or None."""
        state = self._state(query_source)
        current_time = as_seconds(now)
        current = int(usage.get("cache_read_input_tokens") or 0)
        deleted_total = int(usage.get("cache_deleted_input_tokens") or 0)
        deleted_now = max(0, deleted_total - state.cache_deleted_baseline)
        announced = state.deletion_tokens if state.deletion_pending else 0
        previous = state.previous_read
        gap: float | None = None
        if state.last_call_time is not None:
            started = state.request_time if state.request_time is not None else current_time
            gap = started - state.last_call_time
        result: CacheCheck | None = None
        if previous is None:
            before = state.read_before_compaction
            if before is not None and is_cache_break(before, current, self.policy):
                result = ExpectedCacheDrop("compaction", before, current, query_source)
        elif not self._excluded(state) and is_cache_break(previous, current, self.policy):
            result = self._explain(
                state, query_source, previous, current, deleted_now, announced, gap
            )
        state.previous_read = current
        state.read_before_compaction = None
        state.last_call_time = current_time
        state.request_time = None
        state.cache_deleted_baseline = deleted_total
        state.deletion_pending = False
        state.deletion_tokens = None
        state.pending_changes = []
        state.pending_diff = ""
        if isinstance(result, CacheBreak):
            logger.info(
                "prompt cache break (%s): %d -> %d tokens read, %s",
                query_source,
                result.previous_read,
                result.current_read,
                result.reason,
            )
        if result is not None:
            emit(self._sink, result)
        return result

    def _explain(
        self,
        state: _SourceState,
        query_source: str,
        previous: int,
        current: int,
        deleted_now: int,
        announced: int | None,
        gap: float | None,
    ) -> CacheCheck:
        """Excuse an announced deletion, or explain the break and write its diff."""
        if announced is None:
            return ExpectedCacheDrop("cache_deletion", previous, current, query_source, None)
        # The usage's count and the tier's notice describe the same deletion: the usage's,
        # exact, when it has one (adding the two would excuse the deletion twice).
        excused = deleted_now or announced
        if excused and not is_cache_break(previous - excused, current, self.policy):
            return ExpectedCacheDrop("cache_deletion", previous, current, query_source, excused)
        changes = list(state.pending_changes)
        ttl: CacheTtl = state.snapshot.ttl if state.snapshot else "5m"
        lifetime = ttl_seconds(ttl)
        label = "5min" if ttl == "5m" else "1h"
        if gap is not None and gap > lifetime:
            changes.append(
                PromptChange(
                    "ttl_expiry",
                    f"possible {label} TTL expiry ({gap / 60:.1f} min since the last call)",
                )
            )
        if not changes:
            changes.append(
                PromptChange("server_side", f"likely server-side (prompt unchanged, <{label} gap)")
            )
        reason = "; ".join(change.description for change in changes)
        diff_path = self._write(state, query_source, previous, current, reason)
        return CacheBreak(
            reason=reason,
            previous_read=previous,
            current_read=current,
            changes=tuple(change.description for change in changes),
            diff_path=diff_path,
            query_source=query_source,
            causes=tuple(change.cause for change in changes),
            gap_seconds=gap,
        )

    def _write(
        self, state: _SourceState, query_source: str, previous: int, current: int, reason: str
    ) -> Path | None:
        self._breaks += 1
        if self.diff_dir is None:
            return None
        path = self.diff_dir / f"cache-break-{self._breaks:04d}-{_safe_name(query_source)}.diff"
        header = (
            f"# prompt cache break ({query_source}): cache read {previous} -> {current}\n"
            f"# {reason}\n"
        )
        body = state.pending_diff or "# no difference in system prompt, tools or settings\n"
        self._write_diff(path, header + body)
        return path
