"""The cache simulator: writes and reads, TTLs, minimum sizes, the 20-block lookback, prices,
OpenAI's automatic caching."""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.caching.blocks import FlatBlock, flatten_request, prefix_hashes
from unbounded.caching.simulator import (
    OPENAI_CACHE_STEP_TOKENS,
    OPENAI_RETENTION_SECONDS,
    CacheSimulator,
    EstimateBlockCounter,
    SimulatedRequest,
    TextBlockCounter,
    simulate_cache,
    usage_cost_usd,
)
from unbounded.catalog import ModelInfo, load_model_table
from unbounded.errors import ConfigError, InvalidRequestError
from unbounded.model.request import ProviderRequest
from unbounded.tokens.exact import TiktokenCounter

TABLE = load_model_table()
SONNET = TABLE.get("claude-sonnet-4-5")  # min cacheable 1,024
OPUS = TABLE.get("claude-opus-4-6")  # min cacheable 4,096
GPT4O = TABLE.get("gpt-4o")


class CharCounter:
    """One token per character of text or tool-result content; 100 per tool, 10 per call."""

    name = "chars"

    def count_block(self, block: FlatBlock) -> int:
        if block.section == "tools":
            return 100
        if block.block.get("type") == "tool_use":
            return 10
        if block.block.get("type") == "tool_result":
            return len(str(block.block.get("content", "")))
        return len(str(block.block.get("text", "")))


EPHEMERAL = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


def text(n: int, mark: dict[str, Any] | None = None, fill: str = "x") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": fill * n}
    if mark is not None:
        block["cache_control"] = dict(mark)
    return block


def request(
    system: int,
    messages: list[list[dict[str, Any]]],
    *,
    model: str = "claude-sonnet-4-5",
    system_mark: dict[str, Any] | None = EPHEMERAL,
    **extra: Any,
) -> ProviderRequest:
    body: dict[str, Any] = {
        "model": model,
        "system": [text(system, system_mark, "s")],
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": content}
            for i, content in enumerate(messages)
        ],
    }
    body.update(extra)
    return body  # type: ignore[return-value]


def simulator(model: ModelInfo = SONNET, **kwargs: Any) -> CacheSimulator:
    return CacheSimulator(model, counter=CharCounter(), **kwargs)


def test_write_then_read() -> None:
    sim = simulator()
    first = sim.step(0, request(2000, [[text(500, EPHEMERAL)]]))
    assert (first.cache_read_input_tokens, first.cache_creation_input_tokens) == (0, 2500)
    assert first.input_tokens == 0
    assert first.cache_creation_5m_input_tokens == 2500
    second = sim.step(
        10, request(2000, [[text(500)], [text(40, fill="a")], [text(300, EPHEMERAL, "u")]])
    )
    assert second.cache_read_input_tokens == 2500
    assert second.cache_creation_input_tokens == 340
    assert second.input_tokens == 0
    usage = second.usage()
    assert usage["cache_creation"] == {
        "ephemeral_5m_input_tokens": 340,
        "ephemeral_1h_input_tokens": 0,
    }


def test_tokens_after_the_last_breakpoint_are_input() -> None:
    sim = simulator()
    call = sim.step(0, request(2000, [[text(500)]]))
    assert (call.cache_creation_input_tokens, call.input_tokens) == (2000, 500)


@pytest.mark.parametrize(
    ("mark", "gap", "hit"),
    [
        (EPHEMERAL, 299, True),
        (EPHEMERAL, 300, True),
        (EPHEMERAL, 301, False),
        (ONE_HOUR, 301, True),
        (ONE_HOUR, 3599, True),
        (ONE_HOUR, 3601, False),
    ],
)
def test_ttl_expiry_5m_vs_1h(mark: dict[str, Any], gap: float, hit: bool) -> None:
    sim = simulator()
    sim.step(1_000, request(2000, [[text(10, mark)]], system_mark=mark))
    again = sim.step(1_000 + gap, request(2000, [[text(10, mark)]], system_mark=mark))
    assert (again.cache_read_input_tokens == 2010) is hit
    assert (again.cache_read_input_tokens == 0) is not hit


def test_one_hour_writes_are_reported_and_priced_as_such() -> None:
    sim = simulator()
    call = sim.step(0, request(2000, [[text(10, ONE_HOUR)]], system_mark=ONE_HOUR))
    assert call.cache_creation_1h_input_tokens == 2010
    assert call.cache_creation_5m_input_tokens == 0
    assert call.cost_usd == pytest.approx(2010 * 3.0 / 1e6 * 2.0)


def test_mixed_ttls_split_the_creation() -> None:
    sim = simulator()
    call = sim.step(0, request(2000, [[text(700, EPHEMERAL)]], system_mark=ONE_HOUR))
    assert call.cache_creation_1h_input_tokens == 2000
    assert call.cache_creation_5m_input_tokens == 700


def test_reads_refresh_the_entry() -> None:
    sim = simulator()
    for step in range(5):
        call = sim.step(step * 200, request(2000, [[text(10, EPHEMERAL)]]))
        if step:
            assert call.cache_read_input_tokens == 2010


def test_ttl_is_part_of_the_cache_key() -> None:
    sim = simulator()
    sim.step(0, request(2000, [[text(10, EPHEMERAL)]]))
    flipped = sim.step(5, request(2000, [[text(10, ONE_HOUR)]], system_mark=ONE_HOUR))
    assert flipped.cache_read_input_tokens == 0


def test_prefix_below_min_cacheable_tokens_is_not_cached() -> None:
    sim = simulator()
    first = sim.step(0, request(1000, [[text(23, EPHEMERAL)]]))
    assert first.cache_creation_input_tokens == 0
    assert first.input_tokens == 1023
    again = sim.step(1, request(1000, [[text(23, EPHEMERAL)]]))
    assert again.cache_read_input_tokens == 0
    exactly = sim.step(2, request(1000, [[text(24, EPHEMERAL)]]))
    assert exactly.cache_creation_input_tokens == 1024
    assert sim.step(3, request(1000, [[text(24, EPHEMERAL)]])).cache_read_input_tokens == 1024


def test_min_cacheable_tokens_comes_from_the_model() -> None:
    sonnet = simulator(SONNET).step(0, request(3000, [[text(10, EPHEMERAL)]], model="m"))
    opus = simulator(OPUS).step(0, request(3000, [[text(10, EPHEMERAL)]], model="m"))
    assert sonnet.cache_creation_input_tokens == 3010
    assert opus.cache_creation_input_tokens == 0
    assert opus.input_tokens == 3010


def test_small_first_breakpoint_is_covered_by_a_later_one() -> None:
    sim = simulator()
    call = sim.step(0, request(500, [[text(700, EPHEMERAL)]]))
    assert call.cache_creation_input_tokens == 1200
    again = sim.step(1, request(500, [[text(700)], [text(1, fill="a")], [text(5, EPHEMERAL)]]))
    assert again.cache_read_input_tokens == 1200


def _wide(blocks: int) -> ProviderRequest:
    content = [text(10, fill=chr(ord("a") + i % 26)) for i in range(blocks)]
    content[-1]["cache_control"] = dict(EPHEMERAL)
    return request(2000, [content])


@pytest.mark.parametrize(("added", "expected"), [(19, 2100), (20, 2100), (21, 2000)])
def test_lookback_reaches_20_blocks_back_not_21(added: int, expected: int) -> None:
    sim = simulator()
    first = sim.step(0, _wide(10))  # system is block 0, the marker on flat block 10
    assert first.breakpoints == (0, 10)
    later = sim.step(1, _wide(10 + added))
    assert later.breakpoints[-1] - 10 == added
    assert later.cache_read_input_tokens == expected


def test_lookback_is_configurable() -> None:
    sim = simulator(lookback_blocks=5)
    sim.step(0, _wide(10))
    assert sim.step(1, _wide(15)).cache_read_input_tokens == 2100
    assert sim.step(2, _wide(20)).cache_read_input_tokens == 2150  # finds the entry at 15
    assert sim.step(3, _wide(26)).cache_read_input_tokens == 2000  # 6 back: too far


def test_model_change_misses_everything() -> None:
    sim = CacheSimulator(TABLE, counter=CharCounter())
    sim.step(0, request(2000, [[text(10, EPHEMERAL)]]))
    other = sim.step(1, request(2000, [[text(10, EPHEMERAL)]], model="claude-opus-4-6"))
    assert other.cache_read_input_tokens == 0
    assert other.model == "claude-opus-4-6"


def test_thinking_change_keeps_the_system_cached() -> None:
    sim = simulator()
    sim.step(0, request(2000, [[text(10, EPHEMERAL)]]))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    call = sim.step(1, request(2000, [[text(10, EPHEMERAL)]], thinking=thinking))
    assert call.cache_read_input_tokens == 2000
    assert call.cache_creation_input_tokens == 10


def test_cache_control_position_is_not_part_of_the_prefix() -> None:
    sim = simulator()
    sim.step(0, request(2000, [[text(10, EPHEMERAL)]]))
    moved = sim.step(1, request(2000, [[text(10)], [text(5, fill="a")], [text(5, EPHEMERAL)]]))
    assert moved.cache_read_input_tokens == 2010


def test_api_limits_are_enforced() -> None:
    sim = simulator()
    five = request(2000, [[text(10, EPHEMERAL) for _ in range(4)]])
    with pytest.raises(InvalidRequestError, match="cache-breakpoints"):
        sim.step(0, five)
    wrong_order = request(2000, [[text(10, ONE_HOUR)]], system_mark=EPHEMERAL)
    with pytest.raises(InvalidRequestError, match="cache-ttl-order"):
        sim.step(0, wrong_order)


def test_cache_edits_delete_from_the_read_prefix() -> None:
    sim = simulator()
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r" * 400}
    use = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    messages = [[text(5, fill="q")], [use], [result, text(5, EPHEMERAL, "u")]]
    sim.step(0, request(2000, messages))
    edited = request(2000, [*messages, [text(3, fill="a")], [text(4, EPHEMERAL, "v")]])
    edited["cache_edits"] = [{"type": "delete", "cache_reference": "toolu_1"}]
    call = sim.step(1, edited)
    deleted = call.cache_deleted_input_tokens
    assert deleted == 400
    assert call.usage()["cache_deleted_input_tokens"] == deleted
    plain = simulator()
    plain.step(0, request(2000, messages))
    unedited = plain.step(1, request(2000, [*messages, [text(3, fill="a")], [text(4, EPHEMERAL)]]))
    assert call.cache_read_input_tokens == unedited.cache_read_input_tokens - deleted


def test_usage_cost_from_the_model_table() -> None:
    cost = usage_cost_usd(
        SONNET,
        input_tokens=1_000,
        cache_creation_5m_input_tokens=2_000,
        cache_creation_1h_input_tokens=4_000,
        cache_read_input_tokens=10_000,
        output_tokens=500,
    )
    expected = (1_000 * 3 + 2_000 * 3 * 1.25 + 4_000 * 3 * 2.0 + 10_000 * 3 * 0.1 + 500 * 15) / 1e6
    assert cost == pytest.approx(expected)
    assert cost == pytest.approx(0.045)


def test_simulated_call_price_matches_its_usage() -> None:
    sim = simulator(OPUS)
    sim.step(0, request(5000, [[text(10, EPHEMERAL)]], model="x"))
    later = request(5000, [[text(10)], [text(90)], [text(100)], [text(9, EPHEMERAL)]], model="x")
    call = sim.step(1, later, output_tokens=7)
    assert call.cache_read_input_tokens == 5010
    expected = (
        call.cache_read_input_tokens * 5.0 * 0.1
        + call.cache_creation_5m_input_tokens * 5.0 * 1.25
        + call.input_tokens * 5.0
        + 7 * 25.0
    ) / 1e6
    assert call.cost_usd == pytest.approx(expected)


def test_no_1h_price_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        usage_cost_usd(GPT4O, cache_creation_1h_input_tokens=10)


@pytest.mark.parametrize(
    ("shared", "cached"),
    [(1000, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1500, 1408), (5000, 4992)],
)
def test_openai_1024_then_128_token_steps(shared: int, cached: int) -> None:
    sim = simulator(GPT4O)
    first = [[text(1, fill="q")]]
    sim.step(0, request(shared - 1, first, model="gpt-4o", system_mark=None))
    longer = request(shared - 1, [*first, [text(50, fill="a")]], model="gpt-4o", system_mark=None)
    call = sim.step(10, longer)
    assert call.cache_read_input_tokens == cached
    assert call.cache_creation_input_tokens == 0
    assert call.input_tokens == shared + 50 - cached


def test_openai_retention_and_price() -> None:
    sim = simulator(GPT4O)
    body = request(3000, [[text(10)]], model="gpt-4o", system_mark=None)
    sim.step(0, body)
    hit = sim.step(300, body)
    assert hit.cache_read_input_tokens == 1024 + (3010 - 1024) // 128 * 128
    assert hit.cost_usd == pytest.approx(
        (hit.input_tokens * 2.5 + hit.cache_read_input_tokens * 2.5 * 0.5) / 1e6
    )
    assert sim.step(601, body).cache_read_input_tokens == 0
    longer = simulator(GPT4O, openai_retention_seconds=600)
    longer.step(0, body)
    assert longer.step(600, body).cache_read_input_tokens > 0


def test_run_totals_share_and_sources() -> None:
    requests = [
        SimulatedRequest(0, request(2000, [[text(10, EPHEMERAL)]]), "repl_main_thread", 5),
        (10, request(2000, [[text(10)], [text(10)], [text(10, EPHEMERAL)]]), "sdk"),
        (20, request(2000, [[text(10, EPHEMERAL)]])),
    ]
    result = simulate_cache(requests, SONNET, counter=CharCounter())
    totals = result.totals
    assert totals.calls == 3
    assert totals.cache_read_input_tokens == 2010 + 2010
    assert totals.prompt_tokens == 2010 + 2030 + 2010
    assert result.cache_read_share == pytest.approx(4020 / 6050)
    assert set(result.by_query_source()) == {"repl_main_thread", "sdk"}
    assert result.cost_usd == pytest.approx(sum(c.cost_usd for c in result.calls))
    assert [c.index for c in result.calls] == [0, 1, 2]


def test_prime_warms_the_cache_without_a_call() -> None:
    sim = simulator()
    sim.prime(0, request(2000, []))
    call = sim.step(10, request(2000, [[text(10, EPHEMERAL)]]))
    assert call.cache_read_input_tokens == 2000
    assert call.index == 0
    assert sim.live_entries(10) >= 2
    assert sim.live_entries(10_000) == 0


def test_default_and_tiktoken_counters() -> None:
    body = request(100, [[text(10, EPHEMERAL)]])
    body["tools"] = [{"name": "Read", "input_schema": {"type": "object"}}]
    assert CacheSimulator(SONNET).counter.name == "estimate"
    rough = CacheSimulator(SONNET).step(0, body)
    exact = CacheSimulator(SONNET, counter=TiktokenCounter("o200k_base")).step(0, body)
    assert rough.prompt_tokens > 0
    assert exact.prompt_tokens > 0
    assert isinstance(
        CacheSimulator(SONNET, counter=EstimateBlockCounter()).counter, EstimateBlockCounter
    )
    counter = TextBlockCounter(TiktokenCounter("o200k_base"))
    assert counter.name == "text:o200k_base"


def test_time_may_be_a_datetime() -> None:
    from datetime import datetime, timedelta, timezone

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sim = simulator()
    sim.step(start, request(2000, [[text(10, EPHEMERAL)]]))
    late = sim.step(start + timedelta(minutes=6), request(2000, [[text(10, EPHEMERAL)]]))
    assert late.cache_read_input_tokens == 0
    with pytest.raises(ConfigError):
        sim.step(datetime(2026, 1, 1), request(2000, [[text(10, EPHEMERAL)]]))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "bogus"},
        {"lookback_blocks": -1},
        {"max_breakpoints": 0},
        {"openai_retention_seconds": 0},
        {"openai_step_tokens": 0},
    ],
)
def test_wrong_parameters_fail_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        CacheSimulator(SONNET, **kwargs)


def test_wrong_inputs_fail() -> None:
    with pytest.raises(ConfigError):
        CacheSimulator("claude")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        simulator().step(0, request(10, []), output_tokens=-1)
    with pytest.raises(ConfigError):
        simulator().run([(0,)])  # type: ignore[list-item]
    with pytest.raises(ConfigError):
        SimulatedRequest(0, request(10, []), "", 0)
    with pytest.raises(ConfigError):
        SimulatedRequest(0, request(10, []), "sdk", -5)
    with pytest.raises(ConfigError):
        CacheSimulator(TABLE).step(0, {"messages": []})
    with pytest.raises(ConfigError):
        CacheSimulator(SONNET, counter=object())  # type: ignore[arg-type]


def test_mode_none_caches_nothing() -> None:
    sim = simulator(mode="none")
    sim.step(0, request(2000, [[text(10, EPHEMERAL)]]))
    call = sim.step(1, request(2000, [[text(10, EPHEMERAL)]]))
    assert (call.cache_read_input_tokens, call.input_tokens) == (0, 2010)


def test_a_fork_goes_on_from_the_same_cache_state_independently() -> None:
    """A forked simulator prices what a fresh one fed the same history would, and what it
    caches from then on is its own: the simulator it came from still writes that prefix."""
    base = [[text(1500, EPHEMERAL)]]
    other = [[text(1500)], [text(20, fill="a")], [text(900, EPHEMERAL, "o")]]
    original = simulator()
    original.step(0, request(2000, base))
    forked = original.fork()
    fresh = simulator()
    fresh.step(0, request(2000, base))
    assert forked.step(10, request(2000, other)) == fresh.step(10, request(2000, other))
    later = original.step(20, request(2000, other))
    assert later.cache_read_input_tokens == 3500
    assert later.cache_creation_input_tokens == 920


class _OpenAiReference:
    """OpenAI caching as the module docstring defines it, from scratch: every request writes
    the last-use time of each of its prefixes at least `min_cacheable_tokens` long."""

    def __init__(self, model: ModelInfo) -> None:
        self.model = model
        self.used: dict[str, float] = {}

    def cached(self, now: float, body: ProviderRequest) -> int:
        flat = flatten_request(body)
        cumulative = list(accumulate(CharCounter().count_block(block) for block in flat))
        hashes = prefix_hashes(body, flat)
        minimum, matched = self.model.min_cacheable_tokens, 0
        for position in range(len(hashes) - 1, -1, -1):
            if cumulative[position] < minimum:
                break
            used = self.used.get(hashes[position])
            if used is not None and now - used <= OPENAI_RETENTION_SECONDS:
                matched = cumulative[position]
                break
        for position, prefix in enumerate(hashes):
            if cumulative[position] >= minimum:
                self.used[prefix] = now
        if matched < minimum:
            return 0
        return minimum + (matched - minimum) // OPENAI_CACHE_STEP_TOKENS * OPENAI_CACHE_STEP_TOKENS


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), steps=st.integers(1, 14))
def test_openai_reads_equal_their_from_scratch_definition(data: st.DataObject, steps: int) -> None:
    """Each prefix's last use is written only when it leaves the request: the reads, the live
    entries and a fork's reads equal those of writing every prefix at every call."""
    sim, reference = simulator(GPT4O), _OpenAiReference(GPT4O)
    history: list[list[dict[str, Any]]] = []
    system, now = 900, 0.0
    for _ in range(steps):
        how = data.draw(st.sampled_from(["append", "append", "shorter", "system", "fork", "same"]))
        if how == "append":
            history = [*history, [text(data.draw(st.sampled_from([30, 200, 700])), fill="ab"[len(history) % 2])]]
        elif how == "shorter":
            history = history[: data.draw(st.integers(0, len(history)))]
        elif how == "system":
            system = data.draw(st.sampled_from([900, 1300]))
        elif how == "fork":
            sim = sim.fork()
        now += data.draw(st.sampled_from([0, 100, 250, 300, 301]))
        body = request(system, history, model="gpt-4o", system_mark=None)
        assert sim.step(now, body).cache_read_input_tokens == reference.cached(now, body)
        alive = sum(1 for used in reference.used.values() if now - used <= OPENAI_RETENTION_SECONDS)
        assert sim.live_entries(now) == alive
