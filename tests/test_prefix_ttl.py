"""Two cache lifetimes in one request: the tools and system prompt for an hour, the messages
for five minutes, so a pause or a compaction on a cold cache re-writes only the messages."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from unbounded.caching.blocks import flatten_request
from unbounded.caching.simulator import CacheSimulator
from unbounded.caching.ttl import prefix_cache_ttl
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.events import CacheTtlUpgraded, Event
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

TABLE = load_model_table()
TOOLS = [
    {"name": f"tool_{n}", "description": "does a thing " * 200, "input_schema": {"type": "object"}}
    for n in range(6)
]
CONFIG = SessionConfig(
    model="claude-sonnet-4-5", system="You are a careful coding agent. " * 400, tools=TOOLS
)
START = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def marker_ttls(request: ProviderRequest) -> tuple[set[str], set[str]]:
    """(TTLs on the tools and system markers, TTLs on the message markers)."""
    prefix: set[str] = set()
    messages: set[str] = set()
    first_message = len(request.get("tools") or []) + len(request.get("system") or [])
    for position, block in enumerate(flatten_request(request)):
        if block.cache_control is not None:
            ttl = block.cache_control.get("ttl", "5m")
            (messages if position >= first_message else prefix).add(ttl)
    return prefix, messages


def converse(policy: Policy, pauses: list[timedelta]) -> tuple[list[Any], list[ProviderRequest], list[Event]]:
    """One turn per pause (the gap before it); each request priced by the cache simulator."""
    clock = Clock()
    events: list[Event] = []
    session = Session(CONFIG, policy=policy, clock=clock, events=events.append)
    api = CacheSimulator(TABLE.get("claude-sonnet-4-5"))
    calls: list[Any] = []
    requests: list[ProviderRequest] = []
    for turn, pause in enumerate(pauses):
        clock.now += pause
        session.add_user(f"turn {turn}: look at module_{turn}.py " + "and explain it " * 100)
        request = asyncio.run(session.prepare())
        requests.append(request)
        calls.append(api.step(clock.now.timestamp(), request))
        session.record(
            {"content": [{"type": "text", "text": f"module_{turn} does this " * 50}], "usage": {"input_tokens": 10, "output_tokens": 200}}
        )
    return calls, requests, events


PAUSES = [timedelta(seconds=20)] * 4 + [timedelta(minutes=14)] + [timedelta(seconds=20)] * 2


FROM_START = Policy(prefix_ttl_1h_after_pauses=0)


def test_a_pause_rewrites_the_messages_but_reads_the_prefix() -> None:
    calls, requests, events = converse(FROM_START, PAUSES)
    assert all(marker_ttls(r) == ({"1h"}, {"5m"}) for r in requests)
    first, after_pause = calls[0], calls[4]
    prefix_tokens = first.cache_creation_1h_input_tokens
    assert prefix_tokens > 5_000 and first.cache_creation_5m_input_tokens > 0
    # 14 minutes: the messages' 5-minute entry is gone, the 1-hour prefix is read.
    assert after_pause.cache_read_input_tokens == prefix_tokens
    assert after_pause.cache_creation_1h_input_tokens == 0
    assert not [e for e in events if isinstance(e, CacheTtlUpgraded)]

    one_ttl, one_requests, _ = converse(Policy(prefix_ttl_1h=False), PAUSES)
    assert all(marker_ttls(r) == ({"5m"}, {"5m"}) for r in one_requests)
    assert one_ttl[4].cache_read_input_tokens == 0  # everything written again
    # The pause costs less than the 1-hour premium paid once at the start.
    assert sum(c.cost_usd for c in calls) < sum(c.cost_usd for c in one_ttl)
    # Without the pause, the premium is not won back.
    steady = [timedelta(seconds=20)] * 7
    assert sum(c.cost_usd for c in converse(FROM_START, steady)[0]) > sum(
        c.cost_usd for c in converse(Policy(prefix_ttl_1h=False), steady)[0]
    )


def test_by_default_the_prefix_waits_for_two_pauses() -> None:
    """A session that never pauses never pays the 1-hour premium; one that paused twice takes
    it at the second pause (the prefix is written then anyway) and reads it at the third."""
    steady = [timedelta(seconds=20)] * 7
    assert sum(c.cost_usd for c in converse(Policy(), steady)[0]) == pytest.approx(
        sum(c.cost_usd for c in converse(Policy(prefix_ttl_1h=False), steady)[0])
    )
    pauses = PAUSES + PAUSES[4:] + PAUSES[4:]  # pauses before requests 4, 7 and 10
    calls, requests, events = converse(Policy(), pauses)
    assert [marker_ttls(r)[0] for r in requests] == [{"5m"}] * 7 + [{"1h"}] * 6
    assert [(e.idle_expiries, e.part) for e in events if isinstance(e, CacheTtlUpgraded)] == [(2, "prefix")]
    assert calls[7].cache_read_input_tokens == 0  # switched when everything was written anyway
    assert calls[10].cache_read_input_tokens == calls[7].cache_creation_1h_input_tokens > 0


def test_the_prefix_can_wait_for_the_first_pause() -> None:
    calls, requests, events = converse(Policy(prefix_ttl_1h_after_pauses=1), PAUSES + PAUSES[4:])
    assert [marker_ttls(r)[0] for r in requests[:4]] == [{"5m"}] * 4
    assert all(marker_ttls(r) == ({"1h"}, {"5m"}) for r in requests[4:])
    assert [(e.idle_expiries, e.part) for e in events if isinstance(e, CacheTtlUpgraded)] == [(1, "prefix")]
    # Switched when the cache had expired anyway; the second pause reads the prefix.
    assert calls[4].cache_read_input_tokens == 0
    assert calls[7].cache_read_input_tokens == calls[4].cache_creation_1h_input_tokens > 0


def test_forks_send_the_main_requests_prefix_markers() -> None:
    session = Session(CONFIG, policy=FROM_START, clock=Clock())
    session.add_user("hello")
    main = asyncio.run(session.prepare())
    context = session.compaction_context()
    fork = context.planner({**main, "messages": [*main["messages"], {"role": "user", "content": "summarize"}]}, True)
    assert fork["system"] == main["system"] and fork["tools"] == main["tools"]
    assert session.cache_ttls() == ("5m", "1h")


def test_which_models_and_settings_get_a_longer_prefix() -> None:
    sonnet, gpt = TABLE.get("claude-sonnet-4-5"), TABLE.get("gpt-4o")
    assert [prefix_cache_ttl("5m", idle_expiries=n, policy=Policy(), model=sonnet) for n in range(4)] == ["5m", "5m", "1h", "1h"]
    assert prefix_cache_ttl("5m", idle_expiries=0, policy=FROM_START, model=sonnet) == "1h"
    assert prefix_cache_ttl("5m", idle_expiries=2, policy=Policy(), model=gpt) == "5m"  # no 1-hour price
    assert prefix_cache_ttl("1h", idle_expiries=0, policy=Policy(prefix_ttl_1h=False), model=sonnet) == "1h"
    waiting = Policy(prefix_ttl_1h_after_pauses=2)
    assert [prefix_cache_ttl("5m", idle_expiries=n, policy=waiting, model=sonnet) for n in range(4)] == ["5m", "5m", "1h", "1h"]
    assert Policy.claude_code().prefix_ttl_1h is False
    with pytest.raises(ConfigError, match="prefix_ttl_1h_after_pauses must be >= 0"):
        Policy(prefix_ttl_1h_after_pauses=-1)


def test_every_marker_can_take_the_hour_at_the_first_pause() -> None:
    """`cache_ttl_upgrade_after_idle = 1`: the first pause that expired the 5-minute cache
    switches every marker, the messages' too, to the 1-hour TTL from that request on."""
    calls, requests, events = converse(Policy(prefix_ttl_1h=False, cache_ttl_upgrade_after_idle=1), PAUSES + PAUSES[4:])
    assert all(marker_ttls(r) == ({"5m"}, {"5m"}) for r in requests[:4])
    assert all(marker_ttls(r) == ({"1h"}, {"1h"}) for r in requests[4:])
    assert [(e.idle_expiries, e.part) for e in events if isinstance(e, CacheTtlUpgraded)] == [(1, "all")]
    # The second pause (14 minutes) reads what the first one wrote for an hour.
    assert calls[7].cache_read_input_tokens > calls[4].cache_creation_1h_input_tokens > 0
