"""Prompt-cache TTL policy: 5 minutes or 1 hour by query source, latched for the session.

Rules (seed 001, "WHO GETS 1-HOUR CACHE TTL?"):

- Two TTLs exist: 5 minutes (`{"type": "ephemeral"}`, the default) and 1 hour
  (`{"type": "ephemeral", "ttl": "1h"}`). An entry lives that long from its last use.
- A request gets the 1-hour TTL only when the user is *eligible* and its query source matches
  the *allowlist* (fnmatch patterns; by default `repl_main_thread*`, `sdk`, `agent:*`, from
  `Policy.cache_ttl_1h_query_sources`). Short-lived forks (`session_memory`, `speculation`,
  `prompt_suggestion`) match nothing and keep 5 minutes: their cache would never be read again.
- The compaction fork is tracked under the main thread's key (`compact` -> `repl_main_thread`),
  so it sends the same cache_control bytes as the parent whose cache it shares.
- Eligibility and allowlist are *latched*: decided on the session's first call and never
  re-evaluated. Otherwise a mid-session change (a subscriber entering overage) would flip the
  TTL bytes of every cache_control marker, change the cache key and re-create the whole
  prefix. `latch_cache_ttl` returns the existing latch unchanged once there is one; the latch
  is plain data (`to_dict`/`from_dict`) so a session can persist it across restarts.

Who is eligible (Anthropic employees, subscribers within quota, Bedrock opt-in) is the
caller's business: unbounded receives it as a boolean (`Policy.cache_ttl_1h`). A model whose
table row has no 1-hour write price (OpenAI rows) is never eligible.

The tools and the system prompt may live longer than the messages (`prefix_cache_ttl`): they
are the same in every request and after every compaction, so a 1-hour entry for them survives
the pauses that expire the messages' 5-minute ones. The API requires 1-hour markers to come
before 5-minute ones, which a longer prefix TTL always satisfies (tools and system come first).

Time helpers live here too: algorithms take the time as an argument (seconds as a float, or
an aware datetime) and never read a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from unbounded.catalog import ModelInfo
from unbounded.errors import ConfigError
from unbounded.policy import Policy

CacheTtl = Literal["5m", "1h"]
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
"""Lifetime of a cache entry from its last use, per TTL."""
DEFAULT_QUERY_SOURCE = "repl_main_thread"
QUERY_SOURCE_TRACKING_KEYS: Mapping[str, str] = {"compact": DEFAULT_QUERY_SOURCE}
"""Query sources tracked under another source's key (the compaction fork is the main thread)."""

TimeLike = float | int | datetime
"""A point in time: seconds (any fixed origin) or a timezone-aware datetime."""


def as_seconds(value: TimeLike) -> float:
    """A time as float seconds (datetimes as POSIX timestamps)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError("a datetime passed as a time must be timezone-aware")
        return value.timestamp()
    if isinstance(value, bool):
        raise ConfigError("a time must be a number of seconds or a datetime, not a bool")
    return float(value)


def check_ttl(ttl: str) -> CacheTtl:
    """The TTL if it is "5m" or "1h"; ConfigError otherwise."""
    if ttl == "5m":
        return "5m"
    if ttl == "1h":
        return "1h"
    raise ConfigError(f"cache TTL must be '5m' or '1h', not {ttl!r}")


def ttl_seconds(ttl: str) -> float:
    """Seconds an entry with this TTL lives after its last use."""
    return TTL_SECONDS[check_ttl(ttl)]


def ttl_of_cache_control(cache_control: Mapping[str, Any]) -> CacheTtl:
    """The TTL a cache_control marker asks for (no `ttl` field means 5 minutes)."""
    return check_ttl(str(cache_control.get("ttl", "5m")))


def tracking_key(query_source: str) -> str:
    """The key a query source is tracked under (`compact` shares the main thread's)."""
    return QUERY_SOURCE_TRACKING_KEYS.get(query_source, query_source)


def _check_allowlist(patterns: Iterable[str]) -> tuple[str, ...]:
    checked = tuple(patterns)
    for pattern in checked:
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"a 1h TTL allowlist pattern must be a non-empty string: {pattern!r}")
    return checked


def query_source_allows_1h(query_source: str, allowlist: Iterable[str]) -> bool:
    """Whether the query source (by its tracking key) matches an allowlist pattern."""
    key = tracking_key(query_source)
    return any(fnmatchcase(key, pattern) for pattern in _check_allowlist(allowlist))


def should_1h_cache_ttl(query_source: str, *, eligible: bool, allowlist: Iterable[str]) -> bool:
    """Seed 001 `should1hCacheTTL`: eligible user and an allowlisted query source."""
    return eligible and query_source_allows_1h(query_source, allowlist)


@dataclass(frozen=True, slots=True)
class CacheTtlLatch:
    """The session's latched 1-hour eligibility and allowlist."""

    eligible: bool
    allowlist: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.eligible, bool):
            raise ConfigError("CacheTtlLatch.eligible must be a bool")
        object.__setattr__(self, "allowlist", _check_allowlist(self.allowlist))

    def ttl_for(self, query_source: str) -> CacheTtl:
        """The TTL this query source gets for the rest of the session."""
        if should_1h_cache_ttl(query_source, eligible=self.eligible, allowlist=self.allowlist):
            return "1h"
        return "5m"

    def to_dict(self) -> dict[str, Any]:
        """Plain data to persist in the session's folder."""
        return {"eligible": self.eligible, "allowlist": list(self.allowlist)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CacheTtlLatch:
        """Read back what `to_dict` wrote."""
        eligible = data.get("eligible")
        allowlist = data.get("allowlist")
        if not isinstance(eligible, bool) or not isinstance(allowlist, list):
            raise ConfigError("a cache TTL latch needs a bool 'eligible' and a list 'allowlist'")
        return cls(eligible, tuple(str(p) for p in allowlist))


def latch_cache_ttl(
    existing: CacheTtlLatch | None,
    *,
    policy: Policy | None = None,
    model: ModelInfo | None = None,
    eligible: bool | None = None,
) -> CacheTtlLatch:
    """The session's latch: `existing` unchanged when there is one, else decided now.

    The new latch takes eligibility from `eligible` when given, else from
    `policy.cache_ttl_1h`; a model without a 1-hour write price is never eligible.
    """
    if existing is not None:
        return existing
    active = policy or Policy()
    decided = active.cache_ttl_1h if eligible is None else eligible
    if model is not None and model.cache_write_1h_multiplier is None:
        decided = False
    return CacheTtlLatch(bool(decided), tuple(active.cache_ttl_1h_query_sources))


def prefix_cache_ttl(
    message_ttl: CacheTtl, *, idle_expiries: int, policy: Policy, model: ModelInfo
) -> CacheTtl:
    """The TTL of the tools and system markers: 1 hour when `Policy.prefix_ttl_1h` asks, the
    model has a 1-hour price and `idle_expiries` pauses reached
    `Policy.prefix_ttl_1h_after_pauses`; else the messages' TTL (never shorter than it)."""
    if message_ttl == "1h" or (
        policy.prefix_ttl_1h
        and idle_expiries >= policy.prefix_ttl_1h_after_pauses
        and model.cache_write_1h_multiplier is not None
    ):
        return "1h"
    return "5m"
