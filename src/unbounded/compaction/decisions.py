"""What compaction decides each turn, written once for `Session` and the LangChain middleware.

- `should_auto_compact`: the trigger (the context at the auto-compact threshold, with
  compaction on and the request not from a guarded query source: `auto_compaction_allowed`).
- `early_compaction_reason`: compacting before the threshold when it pays (a cold cache, an
  early share of the room, or instead of a cache-breaking clear), and only without a summary
  call.
- `microcompact_policy`: which microcompaction variant runs this turn; while a cache that
  cannot be edited is warm, count-based clearing is held back below the warning level.
- `decide_ttl_upgrade`: whether a pause counts towards the 1-hour cache TTL, and whether
  the prefix or every marker switches to it now.
- `background_summary_due` / `summary_must_wait`: when the summary starts in the
  background, and when a turn at the threshold must wait for it (`compaction.background`).

Every function is pure: the caller passes the clock reading and the time of the last reply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from unbounded.caching.ttl import CacheTtl, CacheTtlLatch, ttl_seconds
from unbounded.catalog import ModelInfo
from unbounded.compaction.micro import cache_is_cold
from unbounded.policy import GUARDED_QUERY_SOURCES, Policy, Thresholds

EarlyReason = Literal["cold_cache", "cold_resume", "early", "instead_of_clear"]


def cache_expired(now: datetime, last_reply_at: datetime | None, ttl: CacheTtl) -> bool:
    """The gap since the last reply is over the cache TTL (False before any reply)."""
    if last_reply_at is None:
        return False
    return (now - last_reply_at).total_seconds() > ttl_seconds(ttl)


def auto_compaction_allowed(policy: Policy, *, query_source: str | None = None) -> bool:
    """Whether automatic compaction may run at all: compaction on, automatic compaction on,
    and the request not from a guarded query source (a compaction's own fork)."""
    if not (policy.compact_enabled and policy.auto_compact_enabled):
        return False
    return query_source is None or query_source not in GUARDED_QUERY_SOURCES


def should_auto_compact(
    policy: Policy, thresholds: Thresholds, tokens: int, *, query_source: str | None = None
) -> bool:
    """The trigger: automatic compaction is allowed and the context is at its threshold."""
    allowed = auto_compaction_allowed(policy, query_source=query_source)
    return allowed and thresholds.should_autocompact(tokens)


@dataclass(frozen=True, slots=True)
class ClearingPolicies:
    """A policy with its two microcompaction variants, built once per configuration."""

    normal: Policy
    hold: Policy
    """Count-based clearing held back (a warm cache below the warning level)."""
    cold: Policy
    """Clearing without a batch's minimum saving (the cache has expired)."""

    @classmethod
    def of(cls, policy: Policy) -> ClearingPolicies:
        """The variants of `policy`."""
        return cls(
            normal=policy,
            hold=policy.with_changes(microcompact_enabled=False),
            cold=policy.with_changes(microcompact_min_savings=0),
        )


def microcompact_policy(
    policies: ClearingPolicies,
    *,
    now: datetime,
    last_reply_at: datetime | None,
    ttl: CacheTtl,
    tokens: int,
    warning_threshold: int,
    cache_edits_supported: bool,
) -> Policy:
    """The policy of this turn's microcompaction.

    While the cache is warm and the provider cannot delete from it, every count-based clear
    rewrites the cached prefix; the count tier therefore only clears once the context is at
    the warning level (seed 000: microcompaction fires when the warning threshold is hit).
    Time-based clearing (cold cache) and cache edits are not held back.
    """
    if cache_expired(now, last_reply_at, ttl):
        # Changing the prefix now costs nothing extra, so stale results are cleared without
        # waiting for a batch's minimum saving.
        return policies.cold
    if (
        cache_edits_supported
        or cache_is_cold(now, last_reply_at, policies.normal)
        or tokens >= warning_threshold
    ):
        return policies.normal
    return policies.hold


def early_compaction_reason(
    policy: Policy,
    thresholds: Thresholds,
    *,
    tokens: int,
    overhead: int,
    cache_expired: bool,
    cache_edits_supported: bool,
    refused_at: int | None,
    free_compaction_available: Callable[[], bool],
    summary_pays_on_cold_cache: Callable[[], bool] | None = None,
) -> EarlyReason | None:
    """Why compacting before the threshold pays now (docs/policy.md), or None.

    Only when the compaction costs no summary call (`free_compaction_available`: session
    notes to compact from; asked last, it may read a file). The shares are of the room the
    conversation has below the threshold (`overhead`, the system prompt and tools, is left
    out: no compaction makes it smaller): `cold_cache` when the cache has expired and the
    conversation fills `cold_cache_compact_fraction` of it, `early` when it fills
    `early_compact_fraction`, `instead_of_clear` at the warning level, where the count tier
    would break the cache. After a refused attempt at `refused_at` tokens, nothing until the
    context grew by `early_compact_retry_tokens`.

    The cold-resume guard: at a `cold_cache` moment without notes to compact from,
    `cold_resume` when a summary call costs less than sending the whole context again
    (`summary_pays_on_cold_cache`, the break-even of `compaction.idle.cold_resume_pays`;
    None: never).
    """
    if refused_at is not None and tokens < refused_at + policy.early_compact_retry_tokens:
        return None
    room = max(1, thresholds.autocompact - overhead)
    used = tokens - overhead
    cold = (
        policy.cold_cache_compact_fraction > 0
        and used >= policy.cold_cache_compact_fraction * room
        and cache_expired
    )
    early = policy.early_compact_fraction < 1 and used >= policy.early_compact_fraction * room
    # At the warning level the count tier clears results and breaks the warm cache; a
    # compaction without a summary call breaks it once and frees much more.
    instead_of_clear = (
        policy.compact_instead_of_clearing
        and policy.microcompact_enabled
        and not cache_edits_supported
        and tokens >= thresholds.warning
    )
    if not (cold or early or instead_of_clear):
        return None
    if not free_compaction_available():
        if cold and summary_pays_on_cold_cache is not None and summary_pays_on_cold_cache():
            return "cold_resume"
        return None
    return "cold_cache" if cold else "early" if early else "instead_of_clear"


def background_summary_due(
    policy: Policy, thresholds: Thresholds, *, tokens: int, overhead: int, running: bool
) -> bool:
    """Whether to start writing the summary in the background now: it is on, none is
    running, automatic compaction may run, and the conversation fills
    `background_summary_fraction` of its room below the threshold (`overhead`, the system
    prompt and tools, left out, as for the early shares)."""
    if running or not policy.background_summary:
        return False
    if not auto_compaction_allowed(policy):
        return False
    room = max(1, thresholds.autocompact - overhead)
    return tokens - overhead >= policy.background_summary_fraction * room


def summary_must_wait(thresholds: Thresholds, tokens: int) -> bool:
    """At the threshold, whether the turn must wait for a summary rather than go on: its
    request would leave less than the output reserve for the reply (the effective window)."""
    return tokens >= thresholds.effective_window


@dataclass(frozen=True, slots=True)
class TtlUpgrade:
    """A pause that expired the 5-minute cache but not a 1-hour one, and what it switches."""

    idle_expiries: int
    """Such pauses so far, this one included."""
    prefix_upgraded: bool
    """The tools and system prompt take the 1-hour TTL from this pause on."""
    latch: CacheTtlLatch | None
    """The latch every marker takes the 1-hour TTL under from now, or None (unchanged)."""


def decide_ttl_upgrade(
    latch: CacheTtlLatch,
    *,
    query_source: str,
    model: ModelInfo,
    policy: Policy,
    now: datetime,
    last_reply_at: datetime | None,
    idle_expiries: int,
) -> TtlUpgrade | None:
    """Whether this turn starts after a pause that counts towards the 1-hour TTL, or None.

    A pause that expired the 5-minute cache but was shorter than an hour (the 1-hour cache
    would have survived it) is counted. The tools and system prompt take the 1-hour TTL
    after `Policy.prefix_ttl_1h_after_pauses` such pauses, every marker after
    `Policy.cache_ttl_upgrade_after_idle` (the latch). Each 1-hour write costs 2x the input
    price instead of 1.25x, against a rewrite after every such pause; the switch happens
    now, when the cache has expired anyway, so it breaks nothing warm.
    """
    ttl = latch.ttl_for(query_source)
    if ttl == "1h" or model.cache_write_1h_multiplier is None:
        return None
    if last_reply_at is None or not cache_expired(now, last_reply_at, ttl):
        return None
    if (now - last_reply_at).total_seconds() > ttl_seconds("1h"):
        return None
    pauses = idle_expiries + 1
    prefix = policy.prefix_ttl_1h and pauses == policy.prefix_ttl_1h_after_pauses
    after = policy.cache_ttl_upgrade_after_idle
    upgraded: CacheTtlLatch | None = None
    if after > 0 and pauses >= after:
        candidate = CacheTtlLatch(True, latch.allowlist)
        # A query source off the 1-hour allowlist stays on 5 minutes.
        upgraded = candidate if candidate.ttl_for(query_source) == "1h" else None
    return TtlUpgrade(idle_expiries=pauses, prefix_upgraded=prefix, latch=upgraded)


__all__ = [
    "ClearingPolicies",
    "EarlyReason",
    "TtlUpgrade",
    "auto_compaction_allowed",
    "background_summary_due",
    "cache_expired",
    "decide_ttl_upgrade",
    "early_compaction_reason",
    "microcompact_policy",
    "should_auto_compact",
    "summary_must_wait",
]
