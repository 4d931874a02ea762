"""Property tests: microcompaction over generated agent conversations.

The strategy writes valid Messages API conversations: a user prompt, then exchanges where the
assistant calls 1-3 tools (compactable, aliased and never-compactable names) and the user
answers every call, results first, sometimes followed by text; results are text of any size
(up to 40,000 tokens), text + images, errors, or already the cleared placeholder. Policies are
the defaults or small thresholds so that every rule is exercised.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.compaction import (
    CLEARED_TOOL_RESULT,
    CompactableTools,
    MicrocompactState,
    cached_microcompact,
    count_based_microcompact,
    microcompact,
    time_based_microcompact,
)
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
COLD = {"now": T0 + timedelta(hours=2), "last_assistant_at": T0}
TOOLS = CompactableTools.default()
NAMES = [
    "Read",
    "Bash",
    "Grep",
    "Glob",
    "WebFetch",
    "Edit",
    "Write",
    "open",
    "execute_bash",
    "str_replace_editor",
    "AskUserQuestion",
    "TodoWrite",
    "Task",
    "NotebookEdit",
    "submit",
]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}

sizes = st.one_of(st.integers(0, 50), st.integers(50, 3000), st.integers(3000, 40_000))


@st.composite
def result_content(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "text", "text", "blocks", "cleared", "empty"]))
    if kind == "cleared":
        return CLEARED_TOOL_RESULT
    if kind == "empty":
        return ""
    text = "y" * (4 * draw(sizes))
    if kind == "blocks":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text or "z"}]
        blocks += [IMAGE] * draw(st.integers(0, 3))
        return blocks
    return text


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """Messages and the prefix lengths that end on a user message (request points)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    points = [1]
    counter = 0
    for _ in range(draw(st.integers(0, 30))):
        if draw(st.integers(0, 9)) == 0:
            messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": "thinking aloud"}]}
            )
            messages.append({"role": "user", "content": "next"})
            points.append(len(messages))
            continue
        uses = []
        answers = []
        for _ in range(draw(st.integers(1, 3))):
            counter += 1
            tool_id = f"toolu_{counter:03d}"
            name = draw(st.sampled_from(NAMES))
            uses.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": name,
                    "input": {"file_path": f"/f{counter}"},
                }
            )
            answer: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": draw(result_content()),
            }
            if draw(st.booleans()) and draw(st.booleans()):
                answer["is_error"] = True
            answers.append(answer)
        text = [{"type": "text", "text": "let me look"}] if draw(st.booleans()) else []
        messages.append({"role": "assistant", "content": text + uses})
        tail = [{"type": "text", "text": "user note"}] if draw(st.integers(0, 4)) == 0 else []
        messages.append({"role": "user", "content": answers + tail})
        points.append(len(messages))
    return messages, points


policies = st.one_of(
    st.just(Policy()),
    st.builds(
        lambda keep, protect, minimum, time_keep, trigger, cached_keep: Policy(
            microcompact_keep_recent=keep,
            microcompact_protect_recent_tokens=protect,
            microcompact_min_savings=minimum,
            time_based_keep_recent=time_keep,
            cached_microcompact_trigger=trigger,
            cached_microcompact_keep_recent=min(cached_keep, trigger - 1),
        ),
        st.integers(0, 4),
        st.integers(0, 20_000),
        st.integers(0, 20_000),
        st.integers(0, 6),
        st.integers(1, 8),
        st.integers(0, 6),
    ),
)


def tool_results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        b["tool_use_id"]: b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        b["id"]: b["name"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    }


def cleared_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {i for i, b in tool_results(messages).items() if b.get("content") == CLEARED_TOOL_RESULT}


def run(tier: str, messages: list[dict[str, Any]], state: MicrocompactState, policy: Policy) -> Any:
    if tier == "count":
        return count_based_microcompact(messages, state, policy)
    if tier == "time":
        return time_based_microcompact(messages, state, policy=policy, **COLD)
    if tier == "cached":
        return cached_microcompact(messages, state, supported=True, policy=policy)
    return microcompact(messages, state, policy=policy)


TIERS = st.sampled_from(["count", "time", "cached", "auto"])


@SETTINGS
@given(conversations(), policies, TIERS)
def test_valid_in_valid_out_and_only_compactable_results_change(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy, tier: str
) -> None:
    messages, _ = conversation
    validate_request(messages)
    snapshot = copy.deepcopy(messages)
    result = run(tier, messages, MicrocompactState(), policy)
    validate_request(result.messages)
    assert messages == snapshot  # the input is never modified
    assert len(result.messages) == len(messages)
    names = tool_names(messages)
    before, after = tool_results(messages), tool_results(result.messages)
    for tool_id, block in before.items():
        if after[tool_id] != block:
            assert TOOLS.is_compactable(names[tool_id])
            assert after[tool_id] == {**block, "content": CLEARED_TOOL_RESULT}
    for old, new in zip(messages, result.messages, strict=True):
        if old["role"] == "assistant":
            assert old is new  # tool_use blocks are never touched
    if tier == "cached":
        assert result.messages == messages  # a warm cache: messages never change
        for edit in result.cache_edits:
            assert TOOLS.is_compactable(names[edit["cache_reference"]])


@SETTINGS
@given(conversations(), policies, TIERS)
def test_applying_twice_equals_applying_once(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy, tier: str
) -> None:
    messages, _ = conversation
    state = MicrocompactState()
    once = run(tier, messages, state, policy)
    # The same state on the same view: no new clears, the same messages.
    same_state = run(tier, messages, state, policy)
    assert same_state.messages == once.messages
    assert same_state.cleared_ids == ()
    # A fresh state on the output: already-cleared results count as cleared.
    if tier != "cached":
        twice = run(tier, once.messages, MicrocompactState(), policy)
        assert twice.messages == once.messages


@SETTINGS
@given(
    conversations(),
    policies,
    st.lists(st.sampled_from(["count", "time", "cached", "auto"]), min_size=1, max_size=4),
)
def test_cleared_set_only_grows_over_a_session(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy, tiers: list[str]
) -> None:
    messages, points = conversation
    state = MicrocompactState()
    previous_state: set[str] = set()
    previous_view: set[str] = set()
    breaks = 0
    for turn, point in enumerate(points):
        view = messages[:point]
        result = run(tiers[turn % len(tiers)], view, state, policy)
        validate_request(result.messages)
        now = set(state.cleared)
        assert previous_state <= now
        assert now - previous_state == set(result.cleared_ids)
        in_view = cleared_ids(result.messages)
        assert previous_view <= in_view
        previous_state, previous_view = now, in_view
        breaks += result.breaks_cache
    assert state.stats.cache_breaking_changes == breaks


@SETTINGS
@given(conversations(), policies)
def test_count_tier_rules(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy
) -> None:
    messages, _ = conversation
    result = count_based_microcompact(messages, MicrocompactState(), policy)
    names = tool_names(messages)
    original = tool_results(messages)
    eligible = [
        i
        for i, b in original.items()
        if TOOLS.is_compactable(names[i]) and b.get("content") != CLEARED_TOOL_RESULT
    ]
    if result.cleared_ids:
        assert result.tokens_saved >= policy.microcompact_min_savings
        kept = (
            eligible[-policy.microcompact_keep_recent :] if policy.microcompact_keep_recent else []
        )
        assert not set(kept) & set(result.cleared_ids)
    else:
        assert result.messages == messages


@SETTINGS
@given(conversations(), policies)
def test_time_tier_keeps_at_most_n_intact(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy
) -> None:
    messages, _ = conversation
    result = time_based_microcompact(messages, MicrocompactState(), policy=policy, **COLD)
    names = tool_names(messages)
    intact = [
        i
        for i, b in tool_results(result.messages).items()
        if TOOLS.is_compactable(names[i]) and b.get("content") != CLEARED_TOOL_RESULT
    ]
    assert len(intact) <= policy.time_based_keep_recent


@SETTINGS
@given(conversations(), policies)
def test_cached_tier_never_deletes_the_most_recent(
    conversation: tuple[list[dict[str, Any]], list[int]], policy: Policy
) -> None:
    messages, points = conversation
    state = MicrocompactState()
    for point in points:
        result = cached_microcompact(messages[:point], state, supported=True, policy=policy)
        precleared = {r.tool_use_id for r in state.ledger if r.precleared}
        active = state.cached.active(set(state.cleared) | precleared)
        if result.new_cache_edits:
            assert len(active) == policy.cached_microcompact_keep_recent
        else:
            assert len(active) < policy.cached_microcompact_trigger
        refs = [e["cache_reference"] for e in state.cached.edits_for_request()]
        assert len(refs) == len(set(refs))  # never deleted twice
