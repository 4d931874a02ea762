"""Microcompaction tiers, the compactable-tools registry, the ledger and cache edits."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from unbounded.compaction import (
    CLEARED_TOOL_RESULT,
    CachedMicrocompactState,
    CompactableTools,
    MicrocompactState,
    ToolLedger,
    cache_expired,
    cache_is_cold,
    cached_microcompact,
    clear_tool_results,
    count_based_microcompact,
    last_assistant_time,
    microcompact,
    select_cache_deletions,
    select_count_based,
    time_based_microcompact,
    with_cache_edits,
)
from unbounded.errors import ConfigError
from unbounded.model.entries import Entry
from unbounded.model.normalize import validate_request
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}


def text_of(tokens: int) -> str:
    """A result text estimated at exactly `tokens` tokens (length / 4)."""
    return "x" * (tokens * 4)


def conversation(calls: list[tuple[str, str, Any]], *, prompt: str = "go") -> list[dict[str, Any]]:
    """user prompt, then one assistant tool_use + user tool_result pair per call.

    Each call is (id, tool name, result content: int tokens, a string or a block list).
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for tool_id, name, content in calls:
        tool_input: dict[str, Any] = {"command": "ls"}
        if name == "Read":
            tool_input = {"file_path": f"/src/{tool_id}.py"}
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"calling {name}"},
                    {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
                ],
            }
        )
        body = text_of(content) if isinstance(content, int) else content
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": body}],
            }
        )
    return messages


def results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """tool_use_id -> the tool_result block."""
    found = {}
    for message in messages:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    found[block["tool_use_id"]] = block
    return found


def cleared(messages: list[dict[str, Any]]) -> set[str]:
    return {i for i, b in results(messages).items() if b.get("content") == CLEARED_TOOL_RESULT}


# -- registry -------------------------------------------------------------------------------


def test_default_registry_names_and_aliases() -> None:
    tools = CompactableTools.default()
    for name in ("Read", "Bash", "Grep", "Glob", "WebFetch", "WebSearch", "Edit", "Write"):
        assert tools.canonical(name) == name
    for alias, target in {
        "open": "Read",
        "goto": "Read",
        "scroll_down": "Read",
        "search_file": "Grep",
        "search_dir": "Grep",
        "find_file": "Glob",
        "create": "Write",
        "edit": "Edit",
        "bash": "Bash",
        "execute_bash": "Bash",
        "str_replace_editor": "Edit",
        "execute_ipython_cell": "Bash",
        "browser": "WebFetch",
        "web_read": "WebFetch",
        "edit_file": "Edit",
    }.items():
        assert tools.canonical(alias) == target, alias
    for never in (
        "AskUserQuestion",
        "TodoWrite",
        "Task",
        "TaskOutput",
        "NotebookEdit",
        "ExitPlanMode",
        "Skill",
        "submit",
        "think",
        "finish",
        "task_tracking",
    ):
        assert not tools.is_compactable(never), never


def test_registry_extension_and_errors() -> None:
    tools = CompactableTools.default().with_tools("fetch_docs").with_aliases({"cat": "Read"})
    assert tools.canonical("fetch_docs") == "fetch_docs"
    assert tools.canonical("cat") == "Read"
    smaller = tools.without("Read")
    assert not smaller.is_compactable("Read")
    assert not smaller.is_compactable("cat")  # an alias goes with its tool
    assert not smaller.is_compactable("open")
    assert smaller.is_compactable("Bash")
    assert CompactableTools.claude_code_only().canonical("bash") is None
    with pytest.raises(ConfigError, match="not a registered"):
        CompactableTools(["Read"], {"cat": "Cat"})
    with pytest.raises(ConfigError):
        CompactableTools(["Read", ""])
    with pytest.raises(ConfigError):
        CompactableTools("Read")
    with pytest.raises(ConfigError, match="cannot be an alias"):
        CompactableTools(["Read", "Bash"], {"Bash": "Read"})
    with pytest.raises(AttributeError):
        tools._lookup = {}  # type: ignore[misc]
    assert tools == CompactableTools(tools.canonical_tools, dict(tools.aliases))


def test_read_paths() -> None:
    tools = CompactableTools.default()
    assert tools.read_path({"name": "Read", "input": {"file_path": "/a.py"}}) == "/a.py"
    assert (
        tools.read_path({"name": "str_replace_editor", "input": {"command": "view", "path": "/b"}})
        == "/b"
    )
    assert tools.read_path({"name": "open", "input": {"command": "open src/x.py 30"}}) == "src/x.py"
    assert tools.read_path({"name": "Bash", "input": {"command": "cat x"}}) is None


# -- count-based ----------------------------------------------------------------------------


def test_seed_002_visualization() -> None:
    """Seed 002's picture: 17,000 tokens, keep 3, clear the three oldest (10,000 saved)."""
    messages = conversation(
        [
            ("r1", "Read", 5000),
            ("r2", "Read", 3000),
            ("g1", "Grep", 2000),
            ("r3", "Read", 4000),
            ("e1", "Edit", 1000),
            ("b1", "Bash", 2000),
        ]
    )
    policy = Policy(microcompact_protect_recent_tokens=7000, microcompact_min_savings=5000)
    result = count_based_microcompact(messages, MicrocompactState(), policy)
    assert result.tier == "count"
    assert result.cleared_ids == ("r1", "r2", "g1")
    assert result.tokens_saved == 10_000
    assert cleared(result.messages) == {"r1", "r2", "g1"}
    assert result.cleared_read_paths == ("/src/r1.py", "/src/r2.py")
    validate_request(result.messages)


def test_default_policy_thresholds() -> None:
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]  # 80,000 tokens of results
    result = count_based_microcompact(conversation(calls), MicrocompactState())
    # Clear oldest while the uncleared total is above 40,000: t0..t3 (40,000 saved).
    assert result.cleared_ids == ("t0", "t1", "t2", "t3")
    assert result.tokens_saved == 40_000
    assert result.breaks_cache and result.prefix_changed


def test_below_min_savings_nothing_changes() -> None:
    calls = [(f"t{i}", "Bash", 10_000) for i in range(5)]  # 50,000: would save 10,000 < 20,000
    messages = conversation(calls)
    state = MicrocompactState()
    result = count_based_microcompact(messages, state)
    assert result.tier == "none" and result.cleared_ids == ()
    assert result.messages == messages
    assert all(a is b for a, b in zip(result.messages, messages, strict=True))
    assert state.stats.cache_breaking_changes == 0


def test_keeps_last_three_even_when_huge() -> None:
    calls = [
        ("a", "Bash", 100),
        ("b", "Bash", 90_000),
        ("c", "Bash", 90_000),
        ("d", "Bash", 90_000),
    ]
    result = count_based_microcompact(conversation(calls), MicrocompactState())
    assert result.cleared_ids == ()  # only "a" is eligible and it saves 100 tokens


def test_non_compactable_results_are_never_cleared() -> None:
    calls = [
        ("q", "AskUserQuestion", 50_000),
        ("todo", "TodoWrite", 50_000),
        *[(f"t{i}", "Bash", 10_000) for i in range(8)],
    ]
    messages = conversation(calls)
    result = count_based_microcompact(messages, MicrocompactState())
    assert result.cleared_ids
    assert results(result.messages)["q"] == results(messages)["q"]
    assert results(result.messages)["todo"] == results(messages)["todo"]
    # Non-compactable tokens are not even counted: only Bash totals decide.
    assert result.cleared_ids == ("t0", "t1", "t2", "t3")


def test_images_count_2000() -> None:
    content = [{"type": "text", "text": text_of(1000)}, IMAGE, IMAGE]  # 5,000 tokens
    calls = [(f"s{i}", "WebFetch", content) for i in range(20)]  # 100,000 tokens
    result = count_based_microcompact(conversation(calls), MicrocompactState())
    assert result.tokens_saved == 60_000
    assert len(result.cleared_ids) == 12
    assert results(result.messages)["s0"]["content"] == CLEARED_TOOL_RESULT


def test_input_is_never_modified_and_unchanged_messages_are_shared() -> None:
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(8)])
    snapshot = copy.deepcopy(messages)
    result = microcompact(messages, MicrocompactState())
    assert messages == snapshot
    assert result.messages is not messages
    changed = [
        i for i, (a, b) in enumerate(zip(result.messages, messages, strict=True)) if a is not b
    ]
    assert changed == [2, 4, 6, 8]  # exactly the user messages holding cleared results
    kept = results(result.messages)["t7"]
    assert kept is results(messages)["t7"]


def test_cleared_ids_are_remembered_and_not_counted_again() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]
    first = count_based_microcompact(conversation(calls), state)
    assert first.cleared_ids == ("t0", "t1", "t2", "t3")
    # Two more results arrive: 60,000 uncleared; clearing t4 and t5 saves only 20,000 -> ok.
    grown = conversation([*calls, ("t8", "Bash", 10_000), ("t9", "Bash", 10_000)])
    second = count_based_microcompact(grown, state)
    assert second.cleared_ids == ("t4", "t5")
    assert cleared(second.messages) == {"t0", "t1", "t2", "t3", "t4", "t5"}
    third = count_based_microcompact(grown, state)  # same view again: nothing new
    assert third.tier == "none" and third.messages == second.messages
    assert state.stats.cache_breaking_changes == 2
    assert state.stats.count_clear_events == 2


def test_precleared_results_count_as_cleared() -> None:
    messages = conversation([(f"t{i}", "Bash", 10_000) for i in range(8)])
    once = count_based_microcompact(messages, MicrocompactState())
    again = count_based_microcompact(once.messages, MicrocompactState())  # a fresh state
    assert again.tier == "none"
    assert again.messages == once.messages


# -- time-based ------------------------------------------------------------------------------


def test_time_based_fires_after_the_gap() -> None:
    messages = conversation([(f"t{i}", "Read", 100) for i in range(9)])
    state = MicrocompactState()
    quiet = time_based_microcompact(
        messages, state, now=T0 + timedelta(minutes=60), last_assistant_at=T0
    )
    assert quiet.tier == "none"
    result = time_based_microcompact(
        messages, state, now=T0 + timedelta(minutes=61), last_assistant_at=T0
    )
    assert result.tier == "time"
    assert result.cleared_ids == ("t0", "t1", "t2", "t3")  # no minimum saving; 5 kept
    assert len(result.cleared_read_paths) == 4
    assert not result.breaks_cache
    validate_request(result.messages)
    again = time_based_microcompact(
        result.messages, MicrocompactState(), now=T0 + timedelta(hours=5), last_assistant_at=T0
    )
    assert again.messages == result.messages


def test_time_based_needs_both_times_and_accepts_naive() -> None:
    assert not cache_is_cold(None, T0)
    assert not cache_is_cold(T0, None)
    naive = datetime(2026, 1, 1, 12, 0)
    assert cache_is_cold(naive + timedelta(hours=2), T0)
    assert not cache_is_cold(T0, naive)
    assert cache_is_cold(T0 + timedelta(minutes=31), T0, Policy(time_based_gap_minutes=30))


def test_last_assistant_time() -> None:
    entries = [
        Entry.user("hi", timestamp="2026-01-01T10:00:00.000Z"),
        Entry.assistant([{"type": "text", "text": "a"}], timestamp="2026-01-01T10:01:00.000Z"),
        Entry.user("again", timestamp="2026-01-01T12:00:00.000Z"),
    ]
    assert last_assistant_time(entries) == datetime(2026, 1, 1, 10, 1, tzinfo=timezone.utc)
    assert last_assistant_time(entries[:1]) is None


# -- cached ------------------------------------------------------------------------------


def test_select_cache_deletions() -> None:
    ids = [f"t{i}" for i in range(12)]
    assert select_cache_deletions(ids[:11], trigger=12, keep_recent=5) == []
    assert select_cache_deletions(ids, trigger=12, keep_recent=5) == ids[:7]
    with pytest.raises(ConfigError):
        select_cache_deletions(ids, trigger=0, keep_recent=5)


def test_cached_tier_queues_pins_and_resends() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Grep", 1000) for i in range(11)]
    messages = conversation(calls)
    first = cached_microcompact(messages, state, supported=True)
    assert first.tier == "none" and first.cache_edits == ()
    assert first.messages == messages  # the cache is warm: messages never change
    calls.append(("t11", "Grep", 1000))
    second = cached_microcompact(conversation(calls), state, supported=True)
    assert second.tier == "cached"
    assert second.deleted_ids == tuple(f"t{i}" for i in range(7))
    assert second.new_cache_edits == tuple(
        {"type": "delete", "cache_reference": f"t{i}"} for i in range(7)
    )
    assert second.tokens_saved == 7000
    assert second.messages == conversation(calls)
    assert state.pending_cache_edits == list(second.new_cache_edits)
    assert not state.observe_response({"cache_read_input_tokens": 50_000})
    assert state.pending_cache_edits == []
    assert state.cached.pinned_edits == list(second.new_cache_edits)
    # The next request re-sends the pinned edits, with nothing new queued.
    calls.append(("t12", "Grep", 1000))
    third = cached_microcompact(conversation(calls), state, supported=True)
    assert third.tier == "none"
    assert third.cache_edits == second.new_cache_edits
    # The usage baseline is kept for the cache-break detector.
    state.observe_response({"cache_read_input_tokens": 45_000, "cache_deleted_input_tokens": 7000})
    assert state.cache_deleted_input_tokens == 7000
    assert state.stats.cache_edit_batches == 1


def test_cached_tier_drops_edits_when_the_cache_expires() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Bash", 1000) for i in range(12)]
    cached_microcompact(conversation(calls), state, supported=True)
    state.observe_response({"cache_read_input_tokens": 80_000})
    assert state.cached.pinned_edits
    assert state.observe_response(
        {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 90_000}
    )
    assert state.cached.edits_for_request() == []
    assert state.cached.deleted_refs == []
    assert state.stats.cache_expiries == 1
    # Without a cache the results are back in full: they may be deleted again later.
    again = cached_microcompact(conversation(calls), state, supported=True)
    assert again.deleted_ids == tuple(f"t{i}" for i in range(7))


def test_cache_expiry_detection_accounts_for_deletions() -> None:
    assert not cache_expired(None, None, {"cache_read_input_tokens": 0})
    # Reads fell by 7,000 but 7,000 were deleted: not an expiry.
    assert not cache_expired(
        80_000, 0, {"cache_read_input_tokens": 73_000, "cache_deleted_input_tokens": 7000}
    )
    assert cache_expired(80_000, 0, {"cache_read_input_tokens": 10_000})
    assert not cache_expired(80_000, 0, {"cache_read_input_tokens": 78_500})  # < 2,000


def test_cached_tier_only_when_supported_and_after_compaction_reset() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Bash", 1000) for i in range(14)]
    unsupported = cached_microcompact(conversation(calls), state, supported=False)
    assert unsupported.cache_edits == () and unsupported.tier == "none"
    assert state.cached.tool_order == []
    result = microcompact(conversation(calls), state, cache_edits_supported=True)
    assert result.tier == "cached"
    state.reset_after_compaction()
    assert state.cached.edits_for_request() == [] and state.cached.tool_order == []
    assert state.cleared == {} and state.stats.compactions == 1


def test_cached_tier_skips_locally_cleared_results() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Read", 100) for i in range(14)]
    time_based_microcompact(
        conversation(calls), state, now=T0 + timedelta(hours=2), last_assistant_at=T0
    )
    assert len(state.cleared) == 9
    result = cached_microcompact(conversation(calls), state, supported=True)
    assert result.deleted_ids == ()  # only 5 active: the 9 cleared ones free nothing


def test_time_based_drops_pinned_edits() -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Bash", 1000) for i in range(12)]
    microcompact(conversation(calls), state, cache_edits_supported=True)
    assert state.cached.edits_for_request()
    result = microcompact(
        conversation(calls),
        state,
        now=T0 + timedelta(hours=3),
        last_assistant_at=T0,
        cache_edits_supported=True,
    )
    assert result.tier == "time" and result.cache_edits == ()
    assert state.cached.edits_for_request() == []


def test_with_cache_edits_is_plain_data() -> None:
    request: ProviderRequest = {"model": "m", "max_tokens": 10, "messages": []}
    edits = [{"type": "delete", "cache_reference": "t1"}]
    updated = with_cache_edits(request, edits)  # type: ignore[arg-type]
    assert updated["cache_edits"] == edits and "cache_edits" not in request
    assert "cache_edits" not in with_cache_edits(updated, [])


def test_cached_state_round_trip() -> None:
    cached = CachedMicrocompactState()
    cached.register(["a", "b", "a", "c"])
    assert cached.tool_order == ["a", "b", "c"]
    cached.queue_deletions(trigger=3, keep_recent=1, tokens={"a": 5, "b": 6})
    assert cached.pending_deleted_tokens == 11
    again = CachedMicrocompactState.from_dict(cached.to_dict())
    assert again.to_dict() == cached.to_dict()
    assert again.is_deleted("a") and again.registered_tools == {"a", "b", "c"}
    with pytest.raises(ConfigError):
        CachedMicrocompactState.from_dict({"pinned_edits": [{"type": "insert"}]})


# -- orchestration ---------------------------------------------------------------------------


def test_microcompact_chooses_the_tier() -> None:
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]
    assert microcompact(conversation(calls), MicrocompactState()).tier == "count"
    assert (
        microcompact(
            conversation(calls),
            MicrocompactState(),
            now=T0 + timedelta(hours=2),
            last_assistant_at=T0,
        ).tier
        == "time"
    )
    assert (
        microcompact(conversation(calls), MicrocompactState(), cache_edits_supported=True).tier
        == "none"  # 8 active < 12
    )
    disabled = Policy(microcompact_enabled=False)
    state = MicrocompactState()
    first = microcompact(conversation(calls), state)
    off = microcompact(conversation(calls), state, policy=disabled)
    assert off.tier == "none" and off.messages == first.messages  # earlier clears stay


def test_clear_tool_results_is_pure() -> None:
    messages = conversation([("a", "Bash", 10), ("b", "Bash", 10)])
    snapshot = copy.deepcopy(messages)
    out, found = clear_tool_results(messages, {"a", "zzz"})
    assert found == {"a"} and messages == snapshot
    assert cleared(out) == {"a"}
    out2, _ = clear_tool_results(out, {"a"})
    assert out2 == out and out2[2] is out[2]
    assert select_count_based([], keep_recent=3, protect_tokens=0, min_savings=0) == ([], 0)


# -- ledger ------------------------------------------------------------------------------


def test_ledger_is_incremental_and_rebuilds_on_a_new_conversation() -> None:
    calls = [(f"t{i}", "Bash", 10) for i in range(6)]
    ledger = ToolLedger()
    ledger.observe(conversation(calls[:2]))
    assert [r.tool_use_id for r in ledger.compactable_results()] == ["t0", "t1"]
    ledger.observe(conversation(calls))
    assert [r.order for r in ledger] == list(range(6))
    assert ledger.get("t5") is not None and ledger.get("t5").result_index == 12  # type: ignore[union-attr]
    other = conversation([("x0", "Bash", 10), ("x1", "Read", 20), ("x2", "Task", 5)])
    other += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}] * 4
    ledger.observe(other)
    assert [r.tool_use_id for r in ledger] == ["x0", "x1", "x2"]
    assert [r.tool_use_id for r in ledger.compactable_results()] == ["x0", "x1"]
    assert ledger.get("x1").read_path == "/src/x1.py"  # type: ignore[union-attr]


def test_cached_tier_ignores_ids_that_left_the_view() -> None:
    """A compaction the caller forgot to announce: old ids are not in the cached prefix."""
    state = MicrocompactState()
    old = [(f"old{i}", "Bash", 1000) for i in range(10)]
    cached_microcompact(conversation(old), state, supported=True)
    assert len(state.cached.tool_order) == 10
    new = [(f"new{i}", "Bash", 1000) for i in range(6)]
    result = cached_microcompact(conversation(new, prompt="summary"), state, supported=True)
    assert result.deleted_ids == ()  # 6 active in the view, not 16
    new += [(f"new{i}", "Bash", 1000) for i in range(6, 12)]
    result = cached_microcompact(conversation(new, prompt="summary"), state, supported=True)
    assert result.deleted_ids == tuple(f"new{i}" for i in range(7))


def test_registry_copies_and_pickles() -> None:
    import pickle

    tools = CompactableTools.default().with_tools("fetch_docs")
    assert copy.deepcopy(tools) == tools
    assert pickle.loads(pickle.dumps(tools)) == tools
    assert copy.deepcopy(MicrocompactState(tools)).tools == tools


def test_a_registered_tool_is_cleared_like_the_built_in_ones() -> None:
    """`MicrocompactState.register_compactable`: a host tool added later has its old results
    cleared too (the ledger reads the calls again); registering it twice changes nothing."""
    calls = [(f"m{i}", "Fetch", 10_000) for i in range(8)]
    messages = conversation(calls)
    state = MicrocompactState()
    assert count_based_microcompact(messages, state).cleared_ids == ()  # not compactable yet
    assert state.register_compactable("Fetch", "Fetch") is True
    assert state.tools.is_compactable("Fetch")
    result = count_based_microcompact(messages, state)
    assert result.cleared_ids == ("m0", "m1", "m2", "m3")
    scanned = state.ledger.scanned
    assert state.register_compactable("Fetch") is False
    assert state.ledger.scanned == scanned  # nothing new: the ledger is kept
