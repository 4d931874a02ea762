"""Breakpoint placement: the last tool, system blocks by scope, one marker on the last message,
never more than 4, the lookback bridge measured with the simulator."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.caching.blocks import flatten_request, system_blocks
from unbounded.caching.breakpoints import (
    add_cache_breakpoints,
    count_cache_breakpoints,
    place_cache_breakpoints,
    plan_cache_breakpoints,
)
from unbounded.caching.simulator import CacheSimulator
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest

SONNET = load_model_table().get("claude-sonnet-4-5")


def markers(body: Any) -> list[tuple[str, int, int]]:
    return [
        (b.section, b.index, b.block_index)
        for b in flatten_request(body)
        if b.cache_control is not None
    ]


def message_markers(body: Any) -> list[tuple[int, int]]:
    return [(i, j) for section, i, j in markers(body) if section == "messages"]


def strip(value: Any) -> Any:
    """The request with every cache_control removed and string content as a text block."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def normal_form(body: Any) -> Any:
    body = copy.deepcopy(body)
    if isinstance(body.get("system"), str):
        body["system"] = [{"type": "text", "text": body["system"]}] if body["system"] else []
    for message in body.get("messages", []):
        if isinstance(message["content"], str):
            message["content"] = [{"type": "text", "text": message["content"]}]
    return strip(body)


TOOL = {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}


def test_tools_marker_on_the_last_tool_only() -> None:
    tools = [dict(TOOL, name=f"t{i}", cache_control={"type": "ephemeral"}) for i in range(30)]
    body: ProviderRequest = {
        "model": "m",
        "tools": tools,
        "messages": [{"role": "user", "content": "hi"}],
    }
    placed = add_cache_breakpoints(body)
    assert markers(placed) == [("tools", 29, 0), ("messages", 0, 0)]
    assert count_cache_breakpoints(placed) == 2
    assert all("cache_control" in t for t in body["tools"])  # input untouched


def test_string_system_and_message_get_markers() -> None:
    body: ProviderRequest = {
        "model": "m",
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
    }
    placed = add_cache_breakpoints(body, ttl="1h")
    assert placed["system"] == [
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert placed["messages"][0]["content"] == [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    assert body["messages"][0]["content"] == "hi"


def test_the_prefix_may_live_longer_than_the_messages() -> None:
    body: ProviderRequest = {
        "model": "m",
        "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "static", "cache_control": {"type": "ephemeral", "scope": "global"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    placed = add_cache_breakpoints(body, ttl="5m", prefix_ttl="1h")
    assert placed["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert placed["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h", "scope": "global"}
    assert placed["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    # The same TTL everywhere when the prefix's is not given.
    assert add_cache_breakpoints(body, ttl="1h") == add_cache_breakpoints(body, ttl="1h", prefix_ttl="1h")
    assert add_cache_breakpoints(body) == add_cache_breakpoints(body, prefix_ttl="5m")
    # 1-hour markers must come first: a shorter prefix is refused, naming the fix.
    with pytest.raises(ConfigError, match="1-hour markers before 5-minute"):
        add_cache_breakpoints(body, ttl="1h", prefix_ttl="5m")
    with pytest.raises(ConfigError, match="cache TTL"):
        add_cache_breakpoints(body, prefix_ttl="2h")  # type: ignore[arg-type]


def test_system_scopes_are_kept_and_ttl_applied() -> None:
    body: ProviderRequest = {
        "model": "m",
        "system": [
            {"type": "text", "text": "billing"},
            {
                "type": "text",
                "text": "static",
                "cache_control": {"type": "ephemeral", "scope": "global"},
            },
            {"type": "text", "text": "dynamic", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": "hi"}],
    }
    placed = add_cache_breakpoints(body, ttl="1h")
    system = placed["system"]
    assert "cache_control" not in system[0]
    assert system[1]["cache_control"] == {"type": "ephemeral", "ttl": "1h", "scope": "global"}
    assert system[2]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_unmarked_system_blocks_get_one_org_marker_on_the_last() -> None:
    body: ProviderRequest = {
        "model": "m",
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert markers(add_cache_breakpoints(body)) == [("system", 1, 0), ("messages", 0, 0)]


def test_exactly_one_message_marker_on_the_last_message() -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "user", "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}]},
    ]
    placed = add_cache_breakpoints({"model": "m", "messages": messages})
    assert message_markers(placed) == [(2, 1)]


def test_fork_marks_the_second_to_last_message() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "summarize"},
    ]
    placed = place_cache_breakpoints({"model": "m", "messages": messages}, skip_cache_write=True)
    assert message_markers(placed) == [(1, 0)]
    single = add_cache_breakpoints(
        {"model": "m", "messages": [{"role": "user", "content": "x"}]}, skip_cache_write=True
    )
    assert message_markers(single) == []


def test_fork_reads_the_parent_prefix_and_does_not_cache_its_prompt() -> None:
    parent_messages = _conversation(3, 2)
    simulator = CacheSimulator(SONNET)
    system = "You are a careful agent. " * 100
    parent: ProviderRequest = {
        "model": "claude-sonnet-4-5",
        "system": system,
        "messages": parent_messages,
    }  # type: ignore[typeddict-item]
    parent_call = simulator.step(0, add_cache_breakpoints(parent))
    # The fork sends the parent's messages, the parent's reply, then its own prompt.
    fork: ProviderRequest = {
        "model": "claude-sonnet-4-5",
        "system": system,
        "messages": [
            *parent_messages,
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Summarize it all."},
        ],  # type: ignore[list-item]
    }
    call = simulator.step(5, add_cache_breakpoints(fork, skip_cache_write=True))
    assert call.cache_read_input_tokens == parent_call.prompt_tokens
    assert call.cache_creation_input_tokens == 1  # only the parent's reply ("Done.")
    assert call.input_tokens == 4  # the fork's own prompt is never written


def test_thinking_blocks_are_skipped() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "t"},
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
            ],
        },
    ]
    placed = add_cache_breakpoints({"model": "m", "messages": messages})
    assert message_markers(placed) == [(1, 0)]


def test_disabled_caching_strips_every_marker() -> None:
    body: ProviderRequest = {
        "model": "m",
        "tools": [dict(TOOL, cache_control={"type": "ephemeral"})],
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    plan = plan_cache_breakpoints(body, enable_prompt_caching=False)
    assert markers(plan.request) == []
    assert plan.breakpoints == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttl": "10m"},
        {"max_breakpoints": 5},
        {"max_breakpoints": 0},
        {"lookback_blocks": 0},
        {"previous_message_breakpoint": -1},
    ],
)
def test_wrong_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        plan_cache_breakpoints(
            {"model": "m", "messages": [{"role": "user", "content": "x"}]}, **kwargs
        )


# -- the lookback bridge ------------------------------------------------------------------


def _conversation(turns: int, width: int) -> list[dict[str, Any]]:
    """A user prompt, then `turns` rounds of `width` parallel tool calls and their results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start " * 300}]
    for turn in range(turns):
        ids = [f"toolu_{turn}_{k}" for k in range(width)]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/f/{i}"}}
                    for i in ids
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": f"{i} " + "data " * 200}
                    for i in ids
                ],
            }
        )
    return messages


def _simulate(width: int, turns: int, bridge: bool) -> tuple[float, list[int]]:
    tools = [dict(TOOL, name=f"tool{i}") for i in range(12)]
    simulator = CacheSimulator(SONNET)
    previous: int | None = None
    reads = []
    for turn in range(1, turns + 1):
        body: ProviderRequest = {
            "model": "claude-sonnet-4-5",
            "tools": tools,
            "system": "You are a careful agent. " * 100,
            "messages": _conversation(turn, width),  # type: ignore[typeddict-item]
        }
        plan = plan_cache_breakpoints(
            body, previous_message_breakpoint=previous if bridge else None
        )
        assert len(plan.breakpoints) <= 4
        reads.append(simulator.step(turn * 30, plan.request).cache_read_input_tokens)
        previous = plan.message_breakpoint
    total = simulator  # keep mypy quiet about unused names
    del total
    return sum(reads), reads


def test_bridge_rescues_turns_wider_than_the_lookback() -> None:
    """Measured: 12 parallel calls add 24 blocks a turn, more than the 20-block lookback."""
    without, reads_without = _simulate(width=12, turns=5, bridge=False)
    with_bridge, reads_with = _simulate(width=12, turns=5, bridge=True)
    assert with_bridge > without
    # Without the bridge each later turn reads only tools + system; with it, all before the turn.
    assert len(set(reads_without[1:])) == 1
    assert reads_with == sorted(reads_with) and len(set(reads_with[1:])) == len(reads_with) - 1


def test_bridge_not_added_for_narrow_turns() -> None:
    without, _ = _simulate(width=4, turns=5, bridge=False)
    with_bridge, _ = _simulate(width=4, turns=5, bridge=True)
    assert without == with_bridge
    body: ProviderRequest = {"model": "m", "messages": _conversation(2, 4)}  # type: ignore[typeddict-item]
    plan = plan_cache_breakpoints(body, previous_message_breakpoint=8)
    assert plan.intermediate_breakpoint is None


def test_bridge_displaces_the_tools_marker_when_the_budget_is_full() -> None:
    body: ProviderRequest = {
        "model": "m",
        "tools": [dict(TOOL)],
        "system": [
            {
                "type": "text",
                "text": "static",
                "cache_control": {"type": "ephemeral", "scope": "global"},
            },
            {"type": "text", "text": "dynamic", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": _conversation(2, 12),  # type: ignore[typeddict-item]
    }
    previous = 3 + 1 + 24  # tools, system, first prompt, then the first turn's 24 blocks
    plan = plan_cache_breakpoints(body, previous_message_breakpoint=previous)
    assert plan.intermediate_breakpoint is not None
    assert previous < plan.intermediate_breakpoint <= previous + 20
    assert len(plan.breakpoints) == 4
    assert plan.dropped == ("tools[0]",)
    assert [s for s, _, _ in markers(plan.request)] == ["system", "system", "messages", "messages"]


# -- properties ---------------------------------------------------------------------------

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
words = st.text(alphabet="abc xyz\n", min_size=1, max_size=12).filter(lambda s: s.strip())
maybe_marker = st.sampled_from(
    [
        None,
        {"type": "ephemeral"},
        {"type": "ephemeral", "scope": "global"},
        {"type": "ephemeral", "ttl": "1h"},
    ]
)


@st.composite
def system_prompts(draw: st.DrawFn) -> Any:
    if draw(st.booleans()):
        return draw(st.one_of(st.just(""), words))
    blocks = []
    for _ in range(draw(st.integers(0, 6))):
        block: dict[str, Any] = {"type": "text", "text": draw(st.one_of(st.just(""), words))}
        marker = draw(maybe_marker)
        if marker is not None:
            block["cache_control"] = marker
        blocks.append(block)
    return blocks


@st.composite
def content_blocks(draw: st.DrawFn, role: str) -> Any:
    if draw(st.booleans()):
        return draw(words)
    blocks: list[dict[str, Any]] = []
    for index in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["text", "image", "tool", "thinking"]))
        if kind == "text" or (kind == "thinking" and role == "user"):
            block: dict[str, Any] = {"type": "text", "text": draw(words)}
        elif kind == "image":
            block = {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="},
            }
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": draw(words), "signature": "sig"}
        elif role == "assistant":
            block = {
                "type": "tool_use",
                "id": f"t{index}",
                "name": "Read",
                "input": {"p": draw(words)},
            }
        else:
            block = {"type": "tool_result", "tool_use_id": f"t{index}", "content": draw(words)}
        if draw(st.booleans()):
            block["cache_control"] = {"type": "ephemeral"}
        blocks.append(block)
    if all(b["type"] == "thinking" for b in blocks):
        blocks.append({"type": "text", "text": "answer"})
    return blocks


@st.composite
def requests(draw: st.DrawFn) -> ProviderRequest:
    tools = [
        dict(
            TOOL,
            name=f"tool{i}",
            **({"cache_control": {"type": "ephemeral"}} if draw(st.booleans()) else {}),
        )
        for i in range(draw(st.integers(0, 60)))
    ]
    messages = []
    for index in range(draw(st.integers(1, 12))):
        role = "user" if index % 2 == 0 else "assistant"
        messages.append({"role": role, "content": draw(content_blocks(role))})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": messages}
    if tools:
        body["tools"] = tools
    if draw(st.booleans()):
        body["system"] = draw(system_prompts())
    return body  # type: ignore[return-value]


@SETTINGS
@given(
    body=requests(),
    fork=st.booleans(),
    ttls=st.sampled_from([("5m", None), ("1h", None), ("5m", "1h"), ("1h", "1h"), ("5m", "5m")]),
    previous=st.one_of(st.none(), st.integers(0, 80)),
)
def test_placement_properties(
    body: ProviderRequest, fork: bool, ttls: Any, previous: int | None
) -> None:
    ttl, prefix_ttl = ttls
    original = copy.deepcopy(body)
    plan = plan_cache_breakpoints(
        body,
        ttl=ttl,
        prefix_ttl=prefix_ttl,
        skip_cache_write=fork,
        previous_message_breakpoint=previous,
    )
    placed = plan.request
    assert body == original, "the input request must not be modified"
    found = markers(placed)
    assert len(found) <= 4
    assert plan.breakpoints == tuple(
        i for i, b in enumerate(flatten_request(placed)) if b.cache_control
    )

    messages = message_markers(placed)
    count = len(body["messages"])
    target = count - 2 if fork else count - 1
    if target >= 0:
        assert messages, "a message-level marker is always placed"
        assert messages[-1][0] == target
        last = placed["messages"][target]["content"]
        assert isinstance(last, list)
        assert "cache_control" in last[messages[-1][1]]
    else:
        assert messages == []
    assert len(messages) <= (1 if previous is None else 2)
    assert sum(1 for section, _, _ in found if section == "tools") <= 1
    if body.get("tools"):
        last_tool = ("tools", len(body["tools"]) - 1, 0)
        # The tools marker is the first to go when the budget is full, and only then.
        assert last_tool in found or (
            len(found) == 4 and plan.dropped[0] == f"tools[{last_tool[1]}]"
        )
    first_message = len(body.get("tools") or []) + len(system_blocks(body.get("system")))
    for position, block in enumerate(flatten_request(placed)):
        if block.cache_control is not None:
            assert block.block.get("type") != "thinking"
            expected = ttl if position >= first_message else prefix_ttl or ttl
            assert block.cache_control.get("ttl", "5m") == expected
    assert normal_form(placed) == normal_form(original)
    # The simulator accepts every placed request (<= 4 markers, 1-hour ones first).
    CacheSimulator(SONNET).step(0, placed)
