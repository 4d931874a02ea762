"""Compaction's per-turn decisions (`compaction/decisions.py`), at their boundaries."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

from unbounded.caching.ttl import CacheTtlLatch
from unbounded.catalog import load_model_table
from unbounded.compaction.decisions import (
    ClearingPolicies,
    auto_compaction_allowed,
    background_summary_due,
    cache_expired,
    decide_ttl_upgrade,
    early_compaction_reason,
    microcompact_policy,
    should_auto_compact,
    summary_must_wait,
)
from unbounded.policy import Policy, Thresholds, compute_thresholds

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
MODEL = load_model_table().get("claude-sonnet-4-6")
POLICY = Policy()
THRESHOLDS: Thresholds = compute_thresholds(MODEL, POLICY)


def ago(**delta: float) -> datetime:
    return NOW - timedelta(**delta)


def test_the_cache_expires_after_its_ttl_not_at_it() -> None:
    assert not cache_expired(NOW, ago(seconds=300), "5m")
    assert cache_expired(NOW, ago(seconds=301), "5m")
    assert not cache_expired(NOW, ago(seconds=301), "1h")
    assert not cache_expired(NOW, None, "5m")


def test_the_trigger_fires_at_the_threshold_and_never_for_guarded_sources() -> None:
    at = THRESHOLDS.autocompact
    assert should_auto_compact(POLICY, THRESHOLDS, at)
    assert not should_auto_compact(POLICY, THRESHOLDS, at - 1)
    assert not should_auto_compact(POLICY, THRESHOLDS, at, query_source="compact")
    assert should_auto_compact(POLICY, THRESHOLDS, at, query_source="repl_main_thread")
    assert not should_auto_compact(POLICY.with_changes(compact_enabled=False), THRESHOLDS, at)
    assert not auto_compaction_allowed(POLICY.with_changes(auto_compact_enabled=False))


def choose(last: datetime | None, tokens: int, *, edits: bool = False) -> str:
    policies = ClearingPolicies.of(POLICY)
    chosen = microcompact_policy(
        policies, now=NOW, last_reply_at=last, ttl="5m", tokens=tokens,
        warning_threshold=THRESHOLDS.warning, cache_edits_supported=edits,
    )
    return {id(policies.normal): "normal", id(policies.hold): "hold", id(policies.cold): "cold"}[id(chosen)]


def test_count_clears_are_held_while_a_cache_is_warm_below_the_warning_level() -> None:
    warning = THRESHOLDS.warning
    assert choose(ago(minutes=1), warning - 1) == "hold"
    assert choose(ago(minutes=1), warning) == "normal"
    assert choose(ago(minutes=1), warning - 1, edits=True) == "normal"  # cache edits break nothing
    assert choose(None, warning - 1) == "hold"
    assert choose(ago(minutes=6), warning - 1) == "cold"  # expired: no minimum saving either
    policies = ClearingPolicies.of(POLICY)
    assert not policies.hold.microcompact_enabled and policies.cold.microcompact_min_savings == 0


def early(tokens: int, *, expired: bool = False, refused_at: int | None = None, free: bool = True, policy: Policy = POLICY, edits: bool = False) -> str | None:
    return early_compaction_reason(
        policy, THRESHOLDS, tokens=tokens, overhead=10_000, cache_expired=expired,
        cache_edits_supported=edits, refused_at=refused_at, free_compaction_available=lambda: free,
    )


def test_early_compaction_reasons_at_their_shares_of_the_room() -> None:
    room = THRESHOLDS.autocompact - 10_000
    cold_at = 10_000 + int(POLICY.cold_cache_compact_fraction * room) + 1
    early_at = 10_000 + int(POLICY.early_compact_fraction * room) + 1
    assert early(cold_at, expired=True) == "cold_cache"
    assert early(cold_at - 2, expired=True) is None
    assert early(cold_at) is None  # a warm cache
    assert early(early_at) == "early"
    assert early(early_at - 2) is None
    assert early(early_at, free=False) is None  # only without a summary call
    no_early = POLICY.with_changes(early_compact_fraction=1.0)
    assert early(THRESHOLDS.warning, policy=no_early) == "instead_of_clear"
    assert early(THRESHOLDS.warning - 1, policy=no_early) is None
    assert early(THRESHOLDS.warning, policy=no_early, edits=True) is None


def test_a_refused_early_compaction_waits_for_the_context_to_grow() -> None:
    early_at = 10_000 + int(POLICY.early_compact_fraction * (THRESHOLDS.autocompact - 10_000)) + 1
    retry = POLICY.early_compact_retry_tokens
    assert early(early_at + retry - 1, refused_at=early_at) is None
    assert early(early_at + retry, refused_at=early_at) == "early"


def upgrade(pauses: int, last: datetime | None, *, policy: Policy = POLICY, allowlist: tuple[str, ...] = ("repl_main_thread*",)):  # type: ignore[no-untyped-def]
    return decide_ttl_upgrade(
        CacheTtlLatch(False, allowlist), query_source="repl_main_thread", model=MODEL,
        policy=policy, now=NOW, last_reply_at=last, idle_expiries=pauses,
    )


def test_a_pause_between_five_minutes_and_an_hour_counts_towards_the_hour_ttl() -> None:
    assert upgrade(0, ago(minutes=4)) is None  # the 5-minute cache still holds
    assert upgrade(0, ago(minutes=61)) is None  # a 1-hour cache would not have survived it
    assert upgrade(0, None) is None
    first = upgrade(0, ago(minutes=10))
    assert first is not None and first.idle_expiries == 1 and not first.prefix_upgraded
    second = upgrade(1, ago(minutes=10))
    assert second is not None and second.prefix_upgraded  # prefix_ttl_1h_after_pauses = 2
    third = upgrade(2, ago(minutes=10))
    assert third is not None and not third.prefix_upgraded and third.latch is None  # latch off by default


def test_the_latch_switches_after_its_pauses_for_allowed_sources_only() -> None:
    after = POLICY.with_changes(cache_ttl_upgrade_after_idle=3)
    assert upgrade(1, ago(minutes=10), policy=after).latch is None  # type: ignore[union-attr]
    switched = upgrade(2, ago(minutes=10), policy=after)
    assert switched is not None and switched.latch == CacheTtlLatch(True, ("repl_main_thread*",))
    off_list = upgrade(2, ago(minutes=10), policy=after, allowlist=("sdk",))
    assert off_list is not None and off_list.latch is None
    no_1h = dataclasses.replace(MODEL, cache_write_1h_multiplier=None)
    assert decide_ttl_upgrade(CacheTtlLatch(False, ()), query_source="repl_main_thread", model=no_1h, policy=after, now=NOW, last_reply_at=ago(minutes=10), idle_expiries=2) is None


def test_the_cold_resume_guard_compacts_with_a_summary_only_when_it_pays() -> None:
    room = THRESHOLDS.autocompact - 10_000
    cold_at = 10_000 + int(POLICY.cold_cache_compact_fraction * room) + 1

    def guard(tokens: int, *, expired: bool = True, free: bool = False, pays: bool = True) -> str | None:
        return early_compaction_reason(
            POLICY, THRESHOLDS, tokens=tokens, overhead=10_000, cache_expired=expired,
            cache_edits_supported=False, refused_at=None, free_compaction_available=lambda: free,
            summary_pays_on_cold_cache=lambda: pays,
        )

    assert guard(cold_at) == "cold_resume"
    assert guard(cold_at, pays=False) is None
    assert guard(cold_at, free=True) == "cold_cache"  # the notes cost no call: preferred
    assert guard(cold_at, expired=False) is None
    assert guard(cold_at - 2) is None  # under the cold share of the room
    early_at = 10_000 + int(POLICY.early_compact_fraction * room) + 1
    assert guard(early_at, expired=False) is None  # only a cold cache warrants a summary call


def test_the_background_summary_starts_at_its_mark_and_once() -> None:
    policy = POLICY.with_changes(background_summary=True)
    overhead = 10_000 + (THRESHOLDS.autocompact - 10_000) % 10  # a room that 0.9 divides
    room = THRESHOLDS.autocompact - overhead
    at = overhead + room * 9 // 10
    assert policy.background_summary_fraction == 0.9

    def due(tokens: int, *, running: bool = False, with_policy: Policy = policy) -> bool:
        return background_summary_due(with_policy, THRESHOLDS, tokens=tokens, overhead=overhead, running=running)

    assert due(at) and not due(at - 1)
    assert not due(at, running=True)
    assert not due(at, with_policy=POLICY)  # off by default
    assert not due(at, with_policy=policy.with_changes(auto_compact_enabled=False))


def test_a_turn_waits_for_the_summary_only_at_the_effective_window() -> None:
    assert summary_must_wait(THRESHOLDS, THRESHOLDS.effective_window)
    assert not summary_must_wait(THRESHOLDS, THRESHOLDS.effective_window - 1)
    assert THRESHOLDS.autocompact < THRESHOLDS.effective_window


def test_an_early_fraction_of_one_is_off_even_past_the_threshold() -> None:
    """`early_compact_fraction = 1.0` turns the early share off: the whole room filled is the
    threshold's business, never an `early` reason."""
    off = POLICY.with_changes(early_compact_fraction=1.0, cold_cache_compact_fraction=0.0)
    assert early(THRESHOLDS.autocompact, policy=off, edits=True) is None
    assert early(THRESHOLDS.autocompact + 50_000, policy=off, edits=True) is None
    assert early(THRESHOLDS.autocompact, policy=off.with_changes(early_compact_fraction=0.99), edits=True) == "early"


def test_a_fixed_part_past_the_threshold_leaves_a_room_of_one_token() -> None:
    """System prompt and tools alone past the threshold: the room below it counts as one
    token, so one token of conversation fills every share of it, and none fills none."""
    overhead = THRESHOLDS.autocompact + 5_000
    policy = POLICY.with_changes(
        early_compact_fraction=0.6, cold_cache_compact_fraction=0.6,
        background_summary=True, background_summary_fraction=0.6,
    )

    def reason(tokens: int, *, expired: bool) -> str | None:
        return early_compaction_reason(
            policy, THRESHOLDS, tokens=tokens, overhead=overhead, cache_expired=expired,
            cache_edits_supported=True, refused_at=None, free_compaction_available=lambda: True,
        )

    def due(tokens: int) -> bool:
        return background_summary_due(policy, THRESHOLDS, tokens=tokens, overhead=overhead, running=False)

    assert reason(overhead + 1, expired=False) == "early"
    assert reason(overhead + 1, expired=True) == "cold_cache"
    assert reason(overhead, expired=True) is None
    assert due(overhead + 1) and not due(overhead)
