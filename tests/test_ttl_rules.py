"""The rules of `unbounded.caching.ttl`, each held by a test that fails when the rule is
flipped, dropped or off by one (the mutation check runs these)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from unbounded.caching.ttl import (
    CacheTtlLatch,
    as_seconds,
    check_ttl,
    latch_cache_ttl,
    prefix_cache_ttl,
    query_source_allows_1h,
    should_1h_cache_ttl,
    tracking_key,
    ttl_of_cache_control,
    ttl_seconds,
)
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.policy import Policy

MODEL = load_model_table().get("claude-sonnet-4-5")
NO_1H = dataclasses.replace(MODEL, cache_write_1h_multiplier=None)


def test_times_as_seconds() -> None:
    moment = datetime(2025, 6, 1, tzinfo=timezone.utc)
    assert as_seconds(moment) == moment.timestamp() and as_seconds(3) == 3.0 and as_seconds(2.5) == 2.5
    with pytest.raises(ConfigError, match="timezone-aware"):
        as_seconds(datetime(2025, 6, 1))
    with pytest.raises(ConfigError, match="not a bool"):
        as_seconds(True)


def test_ttls() -> None:
    assert (check_ttl("5m"), check_ttl("1h")) == ("5m", "1h")
    with pytest.raises(ConfigError, match="cache TTL must be '5m' or '1h', not '10m'"):
        check_ttl("10m")
    assert (ttl_seconds("5m"), ttl_seconds("1h")) == (300.0, 3600.0)
    assert ttl_of_cache_control({"type": "ephemeral"}) == "5m" and ttl_of_cache_control({"ttl": "1h"}) == "1h"
    assert tracking_key("compact") == "repl_main_thread" and tracking_key("agent:x") == "agent:x"


def test_the_allowlist_decides_with_patterns() -> None:
    assert query_source_allows_1h("repl_main_thread", ["repl_main_thread"])
    assert query_source_allows_1h("compact", ["repl_main_thread"])  # tracked as the main thread
    assert query_source_allows_1h("agent:builtin:Explore", ["agent:*"])
    assert not query_source_allows_1h("sdk", ["agent:*"]) and not query_source_allows_1h("sdk", [])
    for bad in ([""], [3]):
        with pytest.raises(ConfigError, match="allowlist pattern must be a non-empty string"):
            query_source_allows_1h("sdk", bad)  # type: ignore[list-item]
    assert should_1h_cache_ttl("sdk", eligible=True, allowlist=["sdk"])
    assert not should_1h_cache_ttl("sdk", eligible=False, allowlist=["sdk"])
    assert not should_1h_cache_ttl("sdk", eligible=True, allowlist=["other"])


def test_the_latch() -> None:
    latch = CacheTtlLatch(True, ("repl_main_thread",))
    assert latch.ttl_for("repl_main_thread") == "1h" and latch.ttl_for("sdk") == "5m"
    assert CacheTtlLatch(False, ("repl_main_thread",)).ttl_for("repl_main_thread") == "5m"
    with pytest.raises(ConfigError, match="eligible must be a bool"):
        CacheTtlLatch(1, ())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-empty string"):
        CacheTtlLatch(True, ("",))
    assert CacheTtlLatch.from_dict(latch.to_dict()) == latch and latch.to_dict() == {"eligible": True, "allowlist": ["repl_main_thread"]}
    for bad in ({"eligible": 1, "allowlist": []}, {"eligible": True, "allowlist": "x"}, {}):
        with pytest.raises(ConfigError, match="needs a bool 'eligible' and a list 'allowlist'"):
            CacheTtlLatch.from_dict(bad)


def test_latching_decides_once() -> None:
    existing = CacheTtlLatch(False, ())
    assert latch_cache_ttl(existing, policy=Policy(cache_ttl_1h=True), eligible=True) is existing
    policy = Policy(cache_ttl_1h=True)
    decided = latch_cache_ttl(None, policy=policy, model=MODEL)
    assert decided.eligible is True and decided.allowlist == tuple(policy.cache_ttl_1h_query_sources)
    assert latch_cache_ttl(None, policy=policy, model=MODEL, eligible=False).eligible is False
    assert latch_cache_ttl(None, policy=Policy(cache_ttl_1h=False), model=MODEL, eligible=True).eligible is True
    assert latch_cache_ttl(None, policy=policy, model=NO_1H).eligible is False  # no 1-hour price
    assert latch_cache_ttl(None, policy=policy).eligible is True  # no model given: the policy decides
    assert latch_cache_ttl(None).eligible is Policy().cache_ttl_1h


def test_the_prefix_ttl() -> None:
    policy = Policy(prefix_ttl_1h=True, prefix_ttl_1h_after_pauses=2)
    assert prefix_cache_ttl("1h", idle_expiries=0, policy=Policy(prefix_ttl_1h=False), model=NO_1H) == "1h"
    assert prefix_cache_ttl("5m", idle_expiries=2, policy=policy, model=MODEL) == "1h"
    assert prefix_cache_ttl("5m", idle_expiries=1, policy=policy, model=MODEL) == "5m"
    assert prefix_cache_ttl("5m", idle_expiries=5, policy=policy, model=NO_1H) == "5m"
    assert prefix_cache_ttl("5m", idle_expiries=5, policy=Policy(prefix_ttl_1h=False), model=MODEL) == "5m"
