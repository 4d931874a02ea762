"""System prompt sections, the dynamic boundary, cache scopes, and the TTL policy and latch."""

from __future__ import annotations

import pytest

from unbounded.caching.system_prompt import (
    SYSTEM_PROMPT_DYNAMIC_BOUNDARY,
    ScopedSystemBlock,
    SystemPromptBuilder,
    SystemPromptSection,
    cache_scope_of,
    custom_system_prompt,
    dangerous_uncached_system_prompt_section,
    get_cache_control,
    split_sys_prompt_prefix,
    system_prompt_section,
)
from unbounded.caching.ttl import (
    CacheTtlLatch,
    as_seconds,
    check_ttl,
    latch_cache_ttl,
    query_source_allows_1h,
    should_1h_cache_ttl,
    tracking_key,
    ttl_seconds,
)
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.policy import Policy


class Counter:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"{self.prefix} {self.calls}"


def test_cached_sections_compute_once_until_cleared() -> None:
    memory = Counter("memory")
    mcp = Counter("mcp")
    builder = SystemPromptBuilder(
        [system_prompt_section("intro", lambda: "You are an agent.")],
        [
            system_prompt_section("memory", memory),
            dangerous_uncached_system_prompt_section(
                "mcp_instructions", mcp, "MCP servers connect/disconnect between turns"
            ),
        ],
    )
    first = builder.build()
    second = builder.build()
    assert memory.calls == 1
    assert mcp.calls == 2
    assert "memory 1" in first.text and "memory 1" in second.text
    assert "mcp 1" in first.text and "mcp 2" in second.text
    builder.clear_cache()  # /clear or /compact
    assert "memory 2" in builder.build().text
    assert builder.uncached_sections == {
        "mcp_instructions": "MCP servers connect/disconnect between turns"
    }


def test_uncached_section_requires_a_reason() -> None:
    with pytest.raises(ConfigError):
        dangerous_uncached_system_prompt_section("x", lambda: "x", "  ")
    with pytest.raises(ConfigError):
        SystemPromptSection("x", lambda: "x", uncached_reason="")
    with pytest.raises(ConfigError):
        system_prompt_section("", lambda: "x")
    with pytest.raises(ConfigError):
        SystemPromptSection("x", "not callable")  # type: ignore[arg-type]


def test_duplicate_section_names_fail_at_construction() -> None:
    section = system_prompt_section("a", lambda: "a")
    with pytest.raises(ConfigError):
        SystemPromptBuilder([section], [section])
    with pytest.raises(ConfigError):
        SystemPromptBuilder(["text"])  # type: ignore[list-item]


def test_empty_sections_are_left_out() -> None:
    builder = SystemPromptBuilder(
        [system_prompt_section("a", lambda: "static")],
        [system_prompt_section("b", lambda: None), system_prompt_section("c", lambda: "")],
    )
    prompt = builder.build()
    assert [b.cache_scope for b in prompt.blocks] == ["global"]


def test_split_with_global_cache() -> None:
    prompt = split_sys_prompt_prefix(
        ["# System", "# Doing tasks", SYSTEM_PROMPT_DYNAMIC_BOUNDARY, "# Environment", "# Memory"],
        attribution_header="x-anthropic-billing-header: cc",
        cli_prefix="You are Claude Code.",
    )
    assert prompt.blocks == (
        ScopedSystemBlock("x-anthropic-billing-header: cc", None),
        ScopedSystemBlock("You are Claude Code.", None),
        ScopedSystemBlock("# System\n\n# Doing tasks", "global"),
        ScopedSystemBlock("# Environment\n\n# Memory", "org"),
    )
    assert prompt.uses_global_cache
    api = prompt.to_api()
    assert [b.get("cache_control") for b in api] == [
        None,
        None,
        {"type": "ephemeral", "scope": "global"},
        {"type": "ephemeral"},
    ]
    assert SYSTEM_PROMPT_DYNAMIC_BOUNDARY not in prompt.text
    assert [cache_scope_of(b) for b in api] == [None, None, "global", "org"]


def test_split_without_global_cache_is_one_org_block() -> None:
    prompt = split_sys_prompt_prefix(
        ["static", SYSTEM_PROMPT_DYNAMIC_BOUNDARY, "dynamic"], use_global_cache=False
    )
    assert prompt.blocks == (ScopedSystemBlock("static\n\ndynamic", "org"),)
    assert not prompt.uses_global_cache


def test_split_without_boundary_is_session_content() -> None:
    prompt = split_sys_prompt_prefix(["a", "b"])
    assert prompt.blocks == (ScopedSystemBlock("a\n\nb", "org"),)
    with pytest.raises(ConfigError):
        split_sys_prompt_prefix(
            ["a", SYSTEM_PROMPT_DYNAMIC_BOUNDARY, SYSTEM_PROMPT_DYNAMIC_BOUNDARY]
        )
    with pytest.raises(ConfigError):
        split_sys_prompt_prefix(["a", 3])  # type: ignore[list-item]


def test_custom_prompt_skips_the_split() -> None:
    prompt = custom_system_prompt(["Be a pirate.", SYSTEM_PROMPT_DYNAMIC_BOUNDARY, "Arr."])
    assert len(prompt.blocks) == 1
    assert prompt.blocks[0].cache_scope == "org"
    assert SYSTEM_PROMPT_DYNAMIC_BOUNDARY not in prompt.text
    assert custom_system_prompt("").blocks == ()


def test_to_api_ttl_and_disabled_caching() -> None:
    prompt = split_sys_prompt_prefix(["s", SYSTEM_PROMPT_DYNAMIC_BOUNDARY, "d"])
    assert prompt.to_api(ttl="1h")[0]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
        "scope": "global",
    }
    assert all("cache_control" not in b for b in prompt.to_api(enable_prompt_caching=False))
    with pytest.raises(ConfigError):
        prompt.to_api(ttl="2h")  # type: ignore[arg-type]


def test_get_cache_control() -> None:
    assert get_cache_control() == {"type": "ephemeral"}
    assert get_cache_control("org", "1h") == {"type": "ephemeral", "ttl": "1h"}
    with pytest.raises(ConfigError):
        get_cache_control("team")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ScopedSystemBlock("x", "team")  # type: ignore[arg-type]


# -- TTL ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "ttl"),
    [
        ("repl_main_thread", "1h"),
        ("repl_main_thread:outputStyle", "1h"),
        ("sdk", "1h"),
        ("agent:general-purpose", "1h"),
        ("compact", "1h"),
        ("session_memory", "5m"),
        ("speculation", "5m"),
        ("prompt_suggestion", "5m"),
    ],
)
def test_ttl_by_query_source(source: str, ttl: str) -> None:
    latch = latch_cache_ttl(None, policy=Policy(cache_ttl_1h=True))
    assert latch.ttl_for(source) == ttl


def test_not_eligible_means_5m_everywhere() -> None:
    latch = latch_cache_ttl(None, policy=Policy())
    assert latch.ttl_for("repl_main_thread") == "5m"
    assert not should_1h_cache_ttl("sdk", eligible=False, allowlist=["*"])


def test_latch_never_flips_mid_session() -> None:
    first = latch_cache_ttl(None, policy=Policy(cache_ttl_1h=True))
    # The user enters overage: eligibility is False now, but the latch holds.
    later = latch_cache_ttl(first, policy=Policy(cache_ttl_1h=False), eligible=False)
    assert later is first
    assert later.ttl_for("repl_main_thread") == "1h"
    assert CacheTtlLatch.from_dict(first.to_dict()) == first


def test_models_without_a_1h_price_are_never_eligible() -> None:
    gpt = load_model_table().get("gpt-4o")
    latch = latch_cache_ttl(None, policy=Policy(cache_ttl_1h=True), model=gpt)
    assert latch.ttl_for("repl_main_thread") == "5m"


def test_ttl_helpers_and_errors() -> None:
    assert tracking_key("compact") == "repl_main_thread"
    assert query_source_allows_1h("agent:x", ["agent:*"])
    assert ttl_seconds("5m") == 300 and ttl_seconds("1h") == 3600
    assert check_ttl("1h") == "1h"
    with pytest.raises(ConfigError):
        check_ttl("24h")
    with pytest.raises(ConfigError):
        query_source_allows_1h("sdk", [""])
    with pytest.raises(ConfigError):
        CacheTtlLatch("yes", ())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CacheTtlLatch.from_dict({"eligible": True})
    with pytest.raises(ConfigError):
        as_seconds(True)
    assert as_seconds(5) == 5.0
