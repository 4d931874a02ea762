"""Microcompaction: clear stale tool results without an LLM call (seeds 002, 003, 004).

Three tiers, chosen per turn by `microcompact` (seed 004 "The Full Round-Trip", step 2):

1. **Time-based** (seed 004) — when the last assistant message is older than
   `Policy.time_based_gap_minutes` (60), the provider's prompt cache has expired anyway, so
   changing messages costs nothing extra: every compactable result but the
   `time_based_keep_recent` (5) most recent is cleared in the view itself. The 5 kept are the
   most recent compactable results whether or not they were cleared before; no minimum saving
   applies. The cached tier's pinned edits are dropped (they referred to the expired cache).
   The time is passed in (`now`); nothing here reads a clock.
2. **Cached** (seed 004) — when the provider declares `cache_edits` support, messages are not
   changed while the cache is warm: old results are deleted from the cached prefix with cache
   edits instead (`unbounded.compaction.cached_micro`).
3. **Count-based** (seeds 002 `microCompactToolResults` / 003 `microCompact`) — otherwise.
   Compactable results not cleared before are taken in call order; the last
   `microcompact_keep_recent` (3) of them are kept; the others are cleared oldest first while
   the uncleared total is above `microcompact_protect_recent_tokens` (40,000), which protects
   the most recent 40,000 tokens of tool results; nothing is cleared unless at least
   `microcompact_min_savings` (20,000) tokens are saved. That minimum makes clearing happen in
   batches, which bounds how often the prompt cache is broken. Seed 003's threshold argument
   (`Q`, a manual override of the 40,000) is the policy field here.

Common rules. A cleared result keeps its block (`tool_use_id`, `is_error`…) and its content
becomes `[Old tool result content cleared]` (with `MicrocompactState.name_handles`, set by a
session that offers the `recall` tool: `[Old tool result content cleared — recall
id=<tool_use_id>]`, the same bytes every turn); tool_use blocks are never touched, so the
request stays valid. Only results of compactable tools (`CompactableTools`) are ever cleared.
Token counts are seed 002's `countToolResultTokens` (text length / 4, 2,000 per image or
document). Cleared ids are remembered in `MicrocompactState` and never counted again (seed
002 `DQ0` ALREADY_COMPACTED); a result that already reads the placeholder counts as cleared.
The file paths of cleared reads are returned, so the caller drops them from its read-file state
(seed 003: "Also clear readFileState for compacted Read tool results").

The transcript is append-only, so the view is rebuilt from it every turn with the original
results; `MicrocompactState` holds what was cleared, and every call re-applies all of it. Each
call returns a NEW list: messages that change are copied, the others are shared, and nothing
of the input (or of the transcript entries its blocks come from) is modified. Applying a tier
twice gives the same messages as applying it once.

`MicrocompactState` also counts what happened (`MicrocompactStats`): how many turns changed
the sent prefix with new clears while the cache may have been warm (`cache_breaking_changes`),
cold-cache clears, cache-edit batches, expiries.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from itertools import islice
from typing import Any, Literal, cast

from unbounded.compaction.cached_micro import CachedMicrocompactState
from unbounded.compaction.ledger import ToolLedger, ToolRecord
from unbounded.compaction.tools_registry import CompactableTools, cleared_stub
from unbounded.deferred_release import DeferredRelease
from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.prefix import shared_prefix_length_own
from unbounded.model.request import CacheEdit
from unbounded.policy import Policy
from unbounded.tokens.estimate import rough_token_count

Tier = Literal["none", "count", "time", "cached"]

STATE_VERSION = 1


# -- results ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MicrocompactResult:
    """What one microcompaction call produced."""

    messages: list[MessageParam]
    """The view to send: every clear so far applied (a new list; unchanged messages shared)."""
    tier: Tier
    """The tier that acted this call ("none" when nothing new happened)."""
    cleared_ids: tuple[str, ...] = ()
    """Tool ids whose results were newly cleared in the messages by this call."""
    tokens_saved: int = 0
    """Estimated tokens newly removed (cleared locally or deleted from the cache)."""
    cleared_read_paths: tuple[str, ...] = ()
    """Files whose read results were newly cleared or deleted: drop them from read-file state."""
    deleted_ids: tuple[str, ...] = ()
    """Tool ids newly queued for deletion from the cached prefix (cached tier)."""
    new_cache_edits: tuple[CacheEdit, ...] = ()
    """The cache edits queued by this call."""
    cache_edits: tuple[CacheEdit, ...] = ()
    """Every cache edit to send with this request (pinned + pending)."""

    @property
    def prefix_changed(self) -> bool:
        """New local clears: the messages differ from what the previous turn sent."""
        return bool(self.cleared_ids)

    @property
    def breaks_cache(self) -> bool:
        """The prefix changed while the cache may be warm (count-based clears)."""
        return self.tier == "count" and bool(self.cleared_ids)


@dataclass(slots=True)
class MicrocompactStats:
    """Counters over a session (kept in the state, persisted with it)."""

    turns: int = 0
    count_clear_events: int = 0
    time_clear_events: int = 0
    results_cleared: int = 0
    tokens_cleared: int = 0
    cache_breaking_changes: int = 0
    """Turns whose sent prefix changed because of new clears while the cache may be warm."""
    cache_edit_batches: int = 0
    cache_refs_deleted: int = 0
    cache_tokens_deleted: int = 0
    cache_expiries: int = 0
    compactions: int = 0

    @property
    def microcompactions(self) -> int:
        """Microcompactions that did something (a count or time clear, a cache-edit batch)."""
        return self.count_clear_events + self.time_clear_events + self.cache_edit_batches

    def to_dict(self) -> dict[str, int]:
        """Plain JSON-ready data."""
        return {name: getattr(self, name) for name in _STAT_NAMES}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MicrocompactStats:
        """Rebuild from `to_dict` output (unknown keys ignored)."""
        values: dict[str, int] = {}
        for spec in fields(cls):
            value = data.get(spec.name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"stats.{spec.name} must be a whole number >= 0")
            values[spec.name] = value
        return cls(**values)


_STAT_NAMES = tuple(spec.name for spec in fields(MicrocompactStats))


# -- state --------------------------------------------------------------------------------
class MicrocompactState:
    """What microcompaction remembers across turns: cleared ids, the ledger, cache edits."""

    __slots__ = (
        "_applied",
        "_marked",
        "_pairs",
        "_release",
        "_savings",
        "cached",
        "cleared",
        "ledger",
        "name_handles",
        "stats",
    )

    def __init__(self, tools: CompactableTools | None = None) -> None:
        self.ledger = ToolLedger(tools)
        self.name_handles = False
        """Placeholders name the recall handle (the owner offers `recall`); not persisted:
        the session sets it from its policy."""
        self.cleared: dict[str, int] = {}
        """Tool ids cleared in the messages -> their estimated tokens, in clearing order."""
        self.cached = CachedMicrocompactState()
        self.stats = MicrocompactStats()
        self._marked: tuple[ToolLedger, int] | None = None
        """The ledger (and its generation) that knows every id of `cleared` as cleared."""
        self._applied: _AppliedView | None = None
        """The last view `_apply` made, reused while the messages only grow."""
        self._pairs: tuple[list[list[Any]], dict[str, int]] = ([], self.cleared)
        """`cleared` as saved ([id, tokens] pairs), extended as ids are added."""
        self._release = DeferredRelease()
        """The last view and pairs a compaction let go of, freed over the calls after it."""
        self._savings: tuple[dict[str, int], int, bool, int] = (self.cleared, 0, False, 0)
        """`cleared_savings` as last summed: over which dict, how many of its ids, with or
        without handles, and the sum (ids are only added until a compaction replaces it)."""

    @property
    def tools(self) -> CompactableTools:
        """The compactable-tools registry this state uses."""
        return self.ledger.tools

    def register_compactable(self, *names: str) -> bool:
        """Let these tools' results be cleared too (their output can be reproduced); the
        ledger then rescans, as whether a call is compactable is fixed when it is read. True
        when a name was new."""
        registry = self.ledger.tools
        missing = [name for name in dict.fromkeys(names) if not registry.is_compactable(name)]
        if not missing:
            return False
        self.ledger.tools = registry.with_tools(*missing)
        self.ledger.reset()
        return True

    def observe(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Bring the ledger up to date with the current view (and tell a ledger that started
        over, or a new one, which results are cleared)."""
        self._release.step()
        ledger = self.ledger
        ledger.observe(messages)
        marked = self._marked
        if marked is None or marked[0] is not ledger or marked[1] != ledger.generation:
            ledger.mark_cleared(self.cleared)
            self._marked = (ledger, ledger.generation)

    def apply_clears(self, messages: Sequence[Mapping[str, Any]]) -> list[MessageParam]:
        """The view with every clear made so far applied, and nothing new cleared.

        This is the message prefix the main requests have been sending, so a fork that sends
        it (the compaction summary request) shares their prompt cache.
        """
        self.observe(messages)
        return _apply(self, messages)

    @property
    def cleared_ids(self) -> frozenset[str]:
        """Every tool id cleared in the messages so far."""
        return frozenset(self.cleared)

    def cleared_savings(self) -> int:
        """Estimated tokens the clears take out of a request (each cleared result's tokens
        less its placeholder's): how far an estimate of the view before clearing overstates
        the request sent (the session's calibration is measured against the latter)."""
        source, summed, handles, total = self._savings
        if source is not self.cleared or summed > len(self.cleared) or handles != self.name_handles:
            summed, total = 0, 0
        for tool_id, tokens in islice(self.cleared.items(), summed, None):
            stub = cleared_stub(tool_id if self.name_handles else None)
            total += tokens - rough_token_count(stub)
        self._savings = (self.cleared, len(self.cleared), self.name_handles, total)
        return total

    def observe_response(self, usage: Mapping[str, Any], policy: Policy | None = None) -> bool:
        """Record a response's usage for the cached tier; True when it shows cache expiry."""
        expired = self.cached.observe_response(usage, policy)
        if expired:
            self.stats.cache_expiries += 1
        return expired

    @property
    def cache_deleted_input_tokens(self) -> int | None:
        """The baseline the cache-break detector needs (last response's deleted tokens)."""
        return self.cached.cache_deleted_input_tokens

    @property
    def pending_cache_edits(self) -> list[CacheEdit]:
        """Cache deletions queued since the last observed response."""
        return list(self.cached.pending_edits)

    def reset_after_compaction(self) -> None:
        """Post-compact cleanup: the old tool ids are gone, forget them (stats are kept)."""
        self.ledger.reset()
        # The last view (the ledger started over: never reused) and the saved pairs hold
        # ~10,000 messages and ids: freed over the next calls, not in this one. The view may
        # be the list a caller was handed ("shared"): a copy of it is let go of.
        applied = self._applied
        if applied is not None:
            self._release.drop(applied.source)
            self._release.drop(list(applied.view))
            self._applied = None
        self._release.drop(self._pairs[0])
        self.cleared = {}
        self._pairs = ([], self.cleared)
        self.cached.reset()
        self.stats.compactions += 1

    def to_dict(self, *, with_cleared: bool = True) -> dict[str, Any]:
        """Plain JSON-ready data (the ledger is derived from messages and not saved);
        `with_cleared=False` leaves out the cleared ids (their owner saves them apart, as
        they grow with the history and change only when results are cleared)."""
        data: dict[str, Any] = {"version": STATE_VERSION, "tools": self.tools.to_dict()}
        if with_cleared:
            data["cleared"] = self.cleared_pairs()
        data["cached"] = self.cached.to_dict()
        data["stats"] = self.stats.to_dict()
        return data

    def cleared_pairs(self) -> list[list[Any]]:
        """`cleared` as [id, tokens] pairs (a new list; the pairs made before are reused: ids
        are only ever added, until a compaction replaces the dict)."""
        pairs, source = self._pairs
        if source is not self.cleared or len(pairs) > len(self.cleared):
            pairs = []
        if len(pairs) < len(self.cleared):  # (a skip over the old ids costs their number)
            added = islice(self.cleared.items(), len(pairs), None)
            pairs.extend([tool_id, tokens] for tool_id, tokens in added)
        self._pairs = (pairs, self.cleared)
        return list(pairs)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], tools: CompactableTools | None = None
    ) -> MicrocompactState:
        """Rebuild from `to_dict` output; `tools` overrides the saved registry."""
        if data.get("version") != STATE_VERSION:
            raise ConfigError(f"unsupported microcompact state version {data.get('version')!r}")
        if tools is None:
            saved = data.get("tools")
            if not isinstance(saved, dict):
                raise ConfigError("tools must be an object with 'tools' and 'aliases'")
            names = saved.get("tools")
            aliases = saved.get("aliases")
            if not isinstance(names, list) or not isinstance(aliases, dict):
                raise ConfigError("tools must be an object with 'tools' and 'aliases'")
            tools = CompactableTools(names, aliases)
        state = cls(tools)
        cleared = data.get("cleared", [])
        if not isinstance(cleared, list):
            raise ConfigError("cleared must be a list of [tool_use_id, tokens] pairs")
        for item in cleared:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not isinstance(item[1], int)
                or isinstance(item[1], bool)
                or item[1] < 0
            ):
                raise ConfigError(f"cleared entry {item!r} is not a [tool_use_id, tokens] pair")
            state.cleared[item[0]] = item[1]
        cached = data.get("cached", {})
        if not isinstance(cached, dict):
            raise ConfigError("cached must be an object")
        state.cached = CachedMicrocompactState.from_dict(cached)
        stats = data.get("stats", {})
        if not isinstance(stats, dict):
            raise ConfigError("stats must be an object")
        state.stats = MicrocompactStats.from_dict(stats)
        return state


# -- pure building blocks ----------------------------------------------------------------
def clear_tool_results(
    messages: Sequence[MessageParam | Mapping[str, Any]],
    tool_use_ids: Collection[str],
    *,
    indices: Iterable[int] | None = None,
    name_handles: bool = False,
) -> tuple[list[MessageParam], frozenset[str]]:
    """Replace the content of these tool results with the cleared placeholder.

    Returns a new list (changed messages copied, others shared) and the ids found. `indices`
    limits the search to those message positions; `name_handles` puts the recall handle in
    the placeholder (`cleared_stub`). The input is never modified.
    """
    wanted = frozenset(tool_use_ids)
    out = cast(list[MessageParam], list(messages))
    if not wanted:
        return out, frozenset()
    positions: Iterable[int] = (
        range(len(messages))
        if indices is None
        else sorted({i for i in indices if 0 <= i < len(messages)})
    )
    found: set[str] = set()
    for index in positions:
        message = messages[index]
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        replaced: list[Any] | None = None
        for position, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tool_id = block.get("tool_use_id")
            if tool_id not in wanted:
                continue
            found.add(tool_id)
            stub = cleared_stub(tool_id if name_handles else None)
            if block.get("content") == stub:
                continue
            if replaced is None:
                replaced = list(content)
            replaced[position] = {**block, "content": stub}
        if replaced is not None:
            out[index] = cast(MessageParam, {**message, "content": replaced})
    return out, frozenset(found)


def select_count_based(
    candidates: Sequence[tuple[str, int]],
    *,
    keep_recent: int,
    protect_tokens: int,
    min_savings: int,
) -> tuple[list[str], int]:
    """Seed 002 steps 2-4 over (id, tokens) of uncleared compactable results, oldest first.

    Keeps the last `keep_recent`; clears the others oldest first while the uncleared total
    exceeds `protect_tokens`; returns ([], 0) when the saving is below `min_savings`.
    """
    keep = {tool_id for tool_id, _ in candidates[-keep_recent:]} if keep_recent > 0 else set()
    total = sum(tokens for _, tokens in candidates)
    saved = 0
    chosen: list[str] = []
    for tool_id, tokens in candidates:
        if tool_id in keep:
            continue
        if total - saved > protect_tokens:
            chosen.append(tool_id)
            saved += tokens
    if not chosen or saved < min_savings:
        return [], 0
    return chosen, saved


def superseded_reads(records: Sequence[ToolRecord]) -> list[str]:
    """Ids of file reads a later read or write of the same file made stale.

    The agent works from the newest content of a file; an older read of it is dead weight in
    the context (a later edit even makes it wrong). Records are in call order.
    """
    latest: dict[str, int] = {}
    for record in records:
        for path in (record.read_path, record.write_path):
            if path:
                latest[path] = record.order
    return [
        r.tool_use_id
        for r in records
        if r.read_path and r.result_index is not None and latest[r.read_path] > r.order
    ]


def select_time_based(
    compactable_ids: Sequence[str], *, keep_recent: int, already_cleared: Collection[str] = ()
) -> list[str]:
    """All compactable ids but the `keep_recent` most recent, minus those already cleared."""
    keep = set(compactable_ids[-keep_recent:]) if keep_recent > 0 else set()
    return [i for i in compactable_ids if i not in keep and i not in already_cleared]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def idle_minutes(now: datetime, last_assistant_at: datetime) -> float:
    """Minutes between the last assistant message and now (naive times are taken as UTC)."""
    return (_aware(now) - _aware(last_assistant_at)).total_seconds() / 60.0


def cache_is_cold(
    now: datetime | None, last_assistant_at: datetime | None, policy: Policy | None = None
) -> bool:
    """Seed 004's time-based trigger: the gap since the last assistant message is over the
    policy's `time_based_gap_minutes` (False when either time is unknown)."""
    if now is None or last_assistant_at is None:
        return False
    gap = (policy or Policy()).time_based_gap_minutes
    return idle_minutes(now, last_assistant_at) > gap


def last_assistant_time(entries: Sequence[Entry]) -> datetime | None:
    """Timestamp of the last real assistant message (synthetic API errors skipped)."""
    for entry in reversed(entries):
        if entry.type == "assistant" and not entry.is_synthetic_api_error:
            moment = entry.time
            if moment is not None:
                return moment
    return None


# -- tiers ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _AppliedView:
    """What one `_apply` call saw and made (its own copies: callers may keep theirs)."""

    source: list[Any]
    view: list[MessageParam]
    cleared: int
    """How many ids of `MicrocompactState.cleared` (in clearing order) the view applies."""
    top: int
    """The highest message index a clear changed."""
    handles: bool
    ledger: tuple[ToolLedger, int]


def _apply(
    state: MicrocompactState, messages: Sequence[Any], *, share: bool = False
) -> list[MessageParam]:
    """The view with every id in `state.cleared` cleared (located through the ledger).

    The last view is reused while the messages only grew and the ledger did not start over:
    the clears made since are applied to it, and the new messages appended, so a turn costs
    what changed. `_apply_all` is the from-scratch definition. `share`: return the state's own
    view (or the input when nothing is cleared) instead of a copy (`_ViewMode` "shared")."""
    if not state.cleared:
        state._applied = None
        return cast(list[MessageParam], messages if share else list(messages))
    reused = _apply_since(state, messages, state._applied, share=share)
    if reused is not None:
        return reused
    out = _apply_all(state, messages)
    indices = [
        record.result_index
        for record in (state.ledger.get(tool_id) for tool_id in state.cleared)
        if record is not None and record.result_index is not None
    ]
    state._applied = _AppliedView(
        list(messages),
        out if share else list(out),
        len(state.cleared),
        max(indices, default=-1),
        state.name_handles,
        (state.ledger, state.ledger.generation),
    )
    return out


def _apply_since(
    state: MicrocompactState,
    messages: Sequence[Any],
    last: _AppliedView | None,
    *,
    share: bool = False,
) -> list[MessageParam] | None:
    """`_apply` from the last view (None when it cannot be reused)."""
    ledger = state.ledger
    if (
        last is None
        or last.handles != state.name_handles
        or last.ledger[0] is not ledger
        or last.ledger[1] != ledger.generation
        or last.cleared > len(state.cleared)
    ):
        return None
    same = shared_prefix_length_own(messages, last.source)
    if last.top >= same:
        return None  # a message a clear changed is not the same any more
    # The last view's lists are this state's own: brought up to date in place, a turn costs
    # the messages it added (and one copy for the caller).
    source, view = last.source, last.view
    del source[same:]
    source.extend(messages[same:])
    del view[same:]
    view.extend(messages[same:])
    top = last.top
    # Clears come in batches, most turns add none: the ids are skipped to only when some
    # were added (walking past the old ones costs O(cleared)).
    new_ids = (
        list(islice(state.cleared, last.cleared, None))
        if len(state.cleared) != last.cleared
        else []
    )
    if new_ids:
        indices: list[int] = []
        for tool_id in new_ids:
            record = ledger.get(tool_id)
            if record is None or record.result_index is None:
                return None  # not where the ledger says: `_apply_all` searches everywhere
            indices.append(record.result_index)
        view, found = clear_tool_results(
            view, new_ids, indices=indices, name_handles=state.name_handles
        )
        if len(found) != len(new_ids):
            return None
        top = max(top, *indices)
    state._applied = _AppliedView(
        source, view, len(state.cleared), top, state.name_handles, last.ledger
    )
    return view if share else list(view)


def _apply_all(state: MicrocompactState, messages: Sequence[Any]) -> list[MessageParam]:
    """Every clear of `state.cleared` applied to these messages, from scratch."""
    ledger = state.ledger
    present = []
    indices = set()
    for tool_id in state.cleared:
        record = ledger.get(tool_id)
        if record is not None and record.result_index is not None:
            present.append(tool_id)
            indices.add(record.result_index)
    handles = state.name_handles
    out, found = clear_tool_results(messages, present, indices=indices, name_handles=handles)
    if len(found) != len(present):  # the ledger is stale: search everywhere
        out, _ = clear_tool_results(messages, state.cleared, name_handles=handles)
    return out


def _record_clears(state: MicrocompactState, records: Sequence[ToolRecord]) -> None:
    for record in records:
        state.cleared[record.tool_use_id] = record.tokens
    state.ledger.mark_cleared(record.tool_use_id for record in records)
    state.stats.results_cleared += len(records)
    state.stats.tokens_cleared += sum(r.tokens for r in records)


def _read_paths(records: Iterable[ToolRecord]) -> tuple[str, ...]:
    paths: dict[str, None] = {}
    for record in records:
        if record.read_path is not None:
            paths[record.read_path] = None
    return tuple(paths)


def _start(state: MicrocompactState, messages: Sequence[Any]) -> None:
    state.observe(messages)
    state.stats.turns += 1


def _settings(policy: Policy | None) -> Policy:
    return policy if policy is not None else Policy()


_ViewMode = Literal["copy", "shared", "as_given"]
"""What a tier returns as its messages: a new list with every clear applied ("copy"), the
state's own such list or the input itself when nothing is cleared ("shared": to be read
before the next call, never edited or kept), or the input as it is ("as_given")."""


def _view(state: MicrocompactState, messages: Sequence[Any], view: _ViewMode) -> list[MessageParam]:
    """The messages a tier returns (see `_ViewMode`)."""
    if view == "as_given":
        return cast(list[MessageParam], messages)
    return _apply(state, messages, share=view == "shared")


def _passthrough(
    state: MicrocompactState,
    messages: Sequence[Any],
    edits: Sequence[CacheEdit] = (),
    view: _ViewMode = "copy",
) -> MicrocompactResult:
    return MicrocompactResult(
        messages=_view(state, messages, view), tier="none", cache_edits=tuple(edits)
    )


def count_based_microcompact(
    messages: Sequence[MessageParam | Mapping[str, Any]],
    state: MicrocompactState,
    policy: Policy | None = None,
) -> MicrocompactResult:
    """The count-based tier (seeds 002/003); see the module docstring for the rules."""
    active = _settings(policy)
    _start(state, messages)
    return _count_based(messages, state, active)


def _count_based(
    messages: Sequence[Any], state: MicrocompactState, policy: Policy, view: _ViewMode = "copy"
) -> MicrocompactResult:
    # Kept by the ledger as calls arrive (`compactable_results` filtered, from scratch).
    candidates = [r for r in state.ledger.open_results() if r.tool_use_id not in state.cleared]
    chosen, saved = select_count_based(
        [(r.tool_use_id, r.tokens) for r in candidates],
        keep_recent=policy.microcompact_keep_recent,
        protect_tokens=policy.microcompact_protect_recent_tokens,
        min_savings=0,
    )
    if policy.clear_superseded_reads:
        # A stale read is cleared whatever its age: the newer copy is in the context.
        stale = state.ledger.superseded_reads() - set(chosen)
        extra = [r for r in candidates if r.tool_use_id in stale]
        chosen = [*chosen, *(r.tool_use_id for r in extra)]
        saved += sum(r.tokens for r in extra)
    if not chosen or saved < policy.microcompact_min_savings:
        return _passthrough(state, messages, view=view)
    chosen_set = set(chosen)
    records = [r for r in candidates if r.tool_use_id in chosen_set]
    _record_clears(state, records)
    state.stats.count_clear_events += 1
    state.stats.cache_breaking_changes += 1
    return MicrocompactResult(
        messages=_view(state, messages, view),
        tier="count",
        cleared_ids=tuple(chosen),
        tokens_saved=saved,
        cleared_read_paths=_read_paths(records),
    )


def time_based_microcompact(
    messages: Sequence[MessageParam | Mapping[str, Any]],
    state: MicrocompactState,
    *,
    now: datetime,
    last_assistant_at: datetime | None,
    policy: Policy | None = None,
) -> MicrocompactResult:
    """The time-based tier (seed 004): fires only when the idle gap is over the policy's."""
    active = _settings(policy)
    _start(state, messages)
    if not cache_is_cold(now, last_assistant_at, active):
        return _passthrough(state, messages)
    return _time_based(messages, state, active)


def _time_based(
    messages: Sequence[Any], state: MicrocompactState, policy: Policy, view: _ViewMode = "copy"
) -> MicrocompactResult:
    state.cached.drop_edits()  # the cache expired: pinned edits refer to nothing
    records = state.ledger.compactable_results()
    already = {r.tool_use_id for r in records if r.precleared} | set(state.cleared)
    chosen = select_time_based(
        [r.tool_use_id for r in records],
        keep_recent=policy.time_based_keep_recent,
        already_cleared=already,
    )
    if not chosen:
        return _passthrough(state, messages, view=view)
    chosen_set = set(chosen)
    cleared = [r for r in records if r.tool_use_id in chosen_set]
    _record_clears(state, cleared)
    state.stats.time_clear_events += 1
    return MicrocompactResult(
        messages=_view(state, messages, view),
        tier="time",
        cleared_ids=tuple(chosen),
        tokens_saved=sum(r.tokens for r in cleared),
        cleared_read_paths=_read_paths(cleared),
    )


def cached_microcompact(
    messages: Sequence[MessageParam | Mapping[str, Any]],
    state: MicrocompactState,
    *,
    supported: bool,
    policy: Policy | None = None,
) -> MicrocompactResult:
    """The cached tier (seed 004): messages unchanged, old results deleted by cache edits.

    Emits edits only when `supported` (the provider's capability flag); otherwise it only
    re-applies earlier local clears.
    """
    active = _settings(policy)
    _start(state, messages)
    if not supported:
        return _passthrough(state, messages)
    return _cached(messages, state, active)


def _cached(
    messages: Sequence[Any], state: MicrocompactState, policy: Policy, view: _ViewMode = "copy"
) -> MicrocompactResult:
    records = state.ledger.compactable_results()
    cached = state.cached
    cached.register(r.tool_use_id for r in records)
    by_id = {r.tool_use_id: r for r in records}
    # Not active: results already cleared locally (nothing to free) and ids no longer in the
    # view (a compaction the caller did not announce): they are not in the cached prefix.
    exclude = {r.tool_use_id for r in records if r.precleared} | set(state.cleared)
    exclude |= {tool_id for tool_id in cached.tool_order if tool_id not in by_id}
    new_edits = cached.queue_deletions(
        trigger=policy.cached_microcompact_trigger,
        keep_recent=policy.cached_microcompact_keep_recent,
        exclude=exclude,
        tokens={tool_id: record.tokens for tool_id, record in by_id.items()},
    )
    sent = _view(state, messages, view)
    all_edits = tuple(cached.edits_for_request())
    if not new_edits:
        return MicrocompactResult(messages=sent, tier="none", cache_edits=all_edits)
    deleted = [by_id[e["cache_reference"]] for e in new_edits if e["cache_reference"] in by_id]
    saved = sum(r.tokens for r in deleted)
    state.stats.cache_edit_batches += 1
    state.stats.cache_refs_deleted += len(new_edits)
    state.stats.cache_tokens_deleted += saved
    return MicrocompactResult(
        messages=sent,
        tier="cached",
        tokens_saved=saved,
        cleared_read_paths=_read_paths(deleted),
        deleted_ids=tuple(e["cache_reference"] for e in new_edits),
        new_cache_edits=tuple(new_edits),
        cache_edits=all_edits,
    )


def microcompact(
    messages: Sequence[MessageParam | Mapping[str, Any]],
    state: MicrocompactState,
    *,
    policy: Policy | None = None,
    now: datetime | None = None,
    last_assistant_at: datetime | None = None,
    cache_edits_supported: bool = False,
    apply: bool = True,
    share_view: bool = False,
) -> MicrocompactResult:
    """Run the tier that applies this turn: time-based when the cache is cold by the idle gap,
    else cached when the provider supports cache edits, else count-based.

    With `Policy.microcompact_enabled` false nothing new is cleared or deleted, but earlier
    clears and pinned edits stay (taking them back would change the cached prefix again).
    `apply=False`: decide and remember the clears, but return the messages as given (a caller
    that keeps its own view skips building the cleared one). `share_view`: the result's
    messages are this state's own list (or `messages` itself when nothing is cleared), not a
    copy: for a caller that reads them before the next call and neither edits nor keeps them
    (a copy touches every message: at thousands of messages, a large share of a turn).
    """
    active = _settings(policy)
    view: _ViewMode = "as_given" if not apply else ("shared" if share_view else "copy")
    _start(state, messages)
    if not active.microcompact_enabled:
        edits = state.cached.edits_for_request() if cache_edits_supported else []
        return _passthrough(state, messages, edits, view)
    if cache_is_cold(now, last_assistant_at, active):
        return _time_based(messages, state, active, view)
    if cache_edits_supported:
        return _cached(messages, state, active, view)
    return _count_based(messages, state, active, view)
