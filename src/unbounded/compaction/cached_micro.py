"""Cached microcompact: delete old tool results from the provider's cached prefix (seed 004).

While the prompt cache is warm, changing a message would invalidate the cached prefix from
that message on. Instead, the messages are left exactly as they are and the request carries
`cache_edits`: `{"type": "delete", "cache_reference": <tool_use_id>}` entries that tell the
server to drop those tool results from the cached prefix (seed 001: tool results before the
last cache_control marker carry a `cache_reference` naming their tool_use id).

The state machine, as seed 004 describes it:

- `tool_order` lists compactable tool ids in the order they were first seen (FIFO deletion
  priority; registering twice is a no-op, so `registeredTools` is `set(tool_order)`);
- `deleted_refs` holds ids already deleted (never deleted twice);
- active = `tool_order` minus `deleted_refs`; when at least `trigger` (Policy
  `cached_microcompact_trigger`, 12) are active, all but the most recent `keep_recent`
  (`cached_microcompact_keep_recent`, 5) are queued as deletions.

Edits are *pinned*: once queued they are re-sent with every later request while the cache
holds, because they are relative to the cached prefix, not absolute. `pending_edits` are those
queued since the last response was observed (their effect shows in the next response's usage);
`pinned_edits` are the older ones. `edits_for_request()` is both, in queue order.

Edits are dropped when the cache is gone: when a response's cache reads fall (see
`cache_expired`), when an idle gap makes the time-based tier fire (the caller calls
`drop_edits`), and after a full compaction (`reset`, the post-compact cleanup). Where seed 004
only says the pinned edits "become stale", this module also forgets `deleted_refs` on expiry:
without a cache the server re-reads those results in full, so they are active again and may be
deleted again from the new cache.

The baseline `cache_deleted_input_tokens` of the last response is kept for the cache-break
detector (without it, the drop in cache reads that a deletion causes would be flagged as a
break), with the estimated tokens of the pending deletions.

Where the seeds say nothing, this module chose: only compactable tools are registered (the
same allowlist as the other tiers); a tool call is registered once its result is in the
messages (a result that is not there cannot be deleted); results already cleared locally are
not active (deleting them would free nothing), nor are ids that left the view (a compaction
the caller did not announce with `reset`: they are not in the cached prefix).

Emitting edits is the caller's decision: `cache_edits` go out only when the provider declares
support. The request stays plain data: `with_cache_edits(request, edits)` returns a
`ProviderRequest` whose `cache_edits` field the cache simulator and break detector read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.errors import ConfigError
from unbounded.model.request import CacheEdit, ProviderRequest
from unbounded.policy import Policy


def delete_edit(tool_use_id: str) -> CacheEdit:
    """One cache edit deleting the tool result cached under this tool_use id."""
    return {"type": "delete", "cache_reference": tool_use_id}


def select_cache_deletions(
    active_ids: Sequence[str], *, trigger: int, keep_recent: int
) -> list[str]:
    """Ids to delete: all but the last `keep_recent` once at least `trigger` are active."""
    if trigger <= 0 or keep_recent < 0:
        raise ConfigError("trigger must be > 0 and keep_recent >= 0")
    if len(active_ids) < trigger:
        return []
    return list(active_ids[: len(active_ids) - keep_recent]) if keep_recent else list(active_ids)


def cache_expired(
    previous_read: int | None,
    previous_deleted: int | None,
    usage: Mapping[str, Any],
    policy: Policy | None = None,
) -> bool:
    """Whether a response shows the cache expired: its cached prefix shrank.

    The cached prefix is measured as cache reads plus cache-deleted tokens, so a drop in reads
    that a deletion explains is not mistaken for expiry. It counts as expired when the drop is
    above both of the policy's cache-break limits (seed 001: > 5% and > 2,000 tokens).
    """
    if previous_read is None:
        return False
    active = policy or Policy()
    before = previous_read + (previous_deleted or 0)
    now = int(usage.get("cache_read_input_tokens") or 0) + int(
        usage.get("cache_deleted_input_tokens") or 0
    )
    drop = before - now
    return (
        drop > active.cache_break_min_drop_tokens
        and drop > active.cache_break_min_drop_fraction * before
    )


@dataclass(slots=True)
class CachedMicrocompactState:
    """Registered tool order, deleted refs and queued cache edits (see the module docstring)."""

    tool_order: list[str] = field(default_factory=list)
    deleted_refs: list[str] = field(default_factory=list)
    """Ids already deleted, in deletion order."""
    pinned_edits: list[CacheEdit] = field(default_factory=list)
    pending_edits: list[CacheEdit] = field(default_factory=list)
    deleted_tokens: dict[str, int] = field(default_factory=dict)
    """Estimated tokens of each deleted result."""
    cache_deleted_input_tokens: int | None = None
    """Baseline: `cache_deleted_input_tokens` of the last response (for the break detector)."""
    last_cache_read_input_tokens: int | None = None
    """`cache_read_input_tokens` of the last response (for expiry detection)."""
    _registered: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    _deleted: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._registered = set(self.tool_order)
        self._deleted = set(self.deleted_refs)

    # -- registration -----------------------------------------------------------------------
    def register(self, tool_use_ids: Iterable[str]) -> None:
        """Add tool ids in encounter order (ids seen before are ignored)."""
        for tool_id in tool_use_ids:
            if tool_id not in self._registered:
                self._registered.add(tool_id)
                self.tool_order.append(tool_id)

    @property
    def registered_tools(self) -> frozenset[str]:
        """Every id registered (seed 004 `registeredTools`)."""
        return frozenset(self._registered)

    def is_deleted(self, tool_use_id: str) -> bool:
        """Whether a deletion of this id was queued and is still pinned."""
        return tool_use_id in self._deleted

    def active(self, exclude: Iterable[str] = ()) -> list[str]:
        """Registered ids not deleted (nor in `exclude`), oldest first."""
        skip = self._deleted | set(exclude)
        return [tool_id for tool_id in self.tool_order if tool_id not in skip]

    # -- queueing ---------------------------------------------------------------------------
    def queue_deletions(
        self,
        *,
        trigger: int,
        keep_recent: int,
        exclude: Iterable[str] = (),
        tokens: Mapping[str, int] | None = None,
    ) -> list[CacheEdit]:
        """Queue deletions when enough tools are active; returns the new edits."""
        chosen = select_cache_deletions(
            self.active(exclude), trigger=trigger, keep_recent=keep_recent
        )
        edits = [delete_edit(tool_id) for tool_id in chosen]
        for tool_id in chosen:
            self._deleted.add(tool_id)
            self.deleted_refs.append(tool_id)
            self.deleted_tokens[tool_id] = int((tokens or {}).get(tool_id, 0))
        self.pending_edits.extend(edits)
        return edits

    def edits_for_request(self) -> list[CacheEdit]:
        """Every edit to send with the next request: pinned, then pending."""
        return [*self.pinned_edits, *self.pending_edits]

    @property
    def pending_deleted_tokens(self) -> int:
        """Estimated tokens the pending deletions remove (the break detector's expected drop)."""
        return sum(self.deleted_tokens.get(e["cache_reference"], 0) for e in self.pending_edits)

    # -- responses --------------------------------------------------------------------------
    def observe_response(self, usage: Mapping[str, Any], policy: Policy | None = None) -> bool:
        """Record a response's usage; drops the edits and returns True when the cache expired.

        Otherwise the pending edits become pinned, and the `cache_deleted_input_tokens` and
        `cache_read_input_tokens` baselines move to this response's values.
        """
        expired = cache_expired(
            self.last_cache_read_input_tokens, self.cache_deleted_input_tokens, usage, policy
        )
        if expired:
            self.drop_edits()
        else:
            self.pinned_edits.extend(self.pending_edits)
            self.pending_edits = []
        self.cache_deleted_input_tokens = int(usage.get("cache_deleted_input_tokens") or 0)
        self.last_cache_read_input_tokens = int(usage.get("cache_read_input_tokens") or 0)
        return expired

    def drop_edits(self) -> None:
        """The cache is gone: forget pinned and pending edits and which refs were deleted."""
        self.pinned_edits = []
        self.pending_edits = []
        self.deleted_refs = []
        self.deleted_tokens = {}
        self._deleted = set()

    def reset(self) -> None:
        """Forget everything (post-compact cleanup: the tool ids are no longer valid)."""
        self.drop_edits()
        self.tool_order = []
        self._registered = set()
        self.cache_deleted_input_tokens = None
        self.last_cache_read_input_tokens = None

    # -- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {
            "tool_order": list(self.tool_order),
            "deleted_refs": list(self.deleted_refs),
            "pinned_edits": [dict(e) for e in self.pinned_edits],
            "pending_edits": [dict(e) for e in self.pending_edits],
            "deleted_tokens": dict(self.deleted_tokens),
            "cache_deleted_input_tokens": self.cache_deleted_input_tokens,
            "last_cache_read_input_tokens": self.last_cache_read_input_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CachedMicrocompactState:
        """Rebuild from `to_dict` output; raises ConfigError naming the bad field."""
        return cls(
            tool_order=_str_list(data.get("tool_order", []), "cached.tool_order"),
            deleted_refs=_str_list(data.get("deleted_refs", []), "cached.deleted_refs"),
            pinned_edits=_edits(data.get("pinned_edits", []), "cached.pinned_edits"),
            pending_edits=_edits(data.get("pending_edits", []), "cached.pending_edits"),
            deleted_tokens=_int_map(data.get("deleted_tokens", {}), "cached.deleted_tokens"),
            cache_deleted_input_tokens=_opt_int(
                data.get("cache_deleted_input_tokens"), "cached.cache_deleted_input_tokens"
            ),
            last_cache_read_input_tokens=_opt_int(
                data.get("last_cache_read_input_tokens"), "cached.last_cache_read_input_tokens"
            ),
        )


def with_cache_edits(request: ProviderRequest, edits: Sequence[CacheEdit]) -> ProviderRequest:
    """A copy of the request carrying these cache edits (the field is removed when empty)."""
    updated: ProviderRequest = {**request}
    if edits:
        updated["cache_edits"] = [delete_edit(e["cache_reference"]) for e in edits]
    else:
        updated.pop("cache_edits", None)
    return updated


# -- validation helpers (shared with the state store) ---------------------------------------
def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return list(value)


def _opt_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where} must be a whole number >= 0 or null, not {value!r}")
    return value


def _int_map(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of id -> tokens")
    result: dict[str, int] = {}
    for key, number in value.items():
        checked = _opt_int(number, f"{where}[{key!r}]")
        result[str(key)] = checked or 0
    return result


def _edits(value: Any, where: str) -> list[CacheEdit]:
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of cache edits")
    edits: list[CacheEdit] = []
    for position, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or item.get("type") != "delete"
            or not isinstance(item.get("cache_reference"), str)
        ):
            raise ConfigError(
                f"{where}[{position}] must be {{'type': 'delete', 'cache_reference': <id>}}"
            )
        edits.append(delete_edit(item["cache_reference"]))
    return edits
