"""The cache-break detector's rules at their edges (`caching/break_detector.py`): which drop
between two calls of a source is a break, which one an announced deletion excuses, and what
a break names as its cause."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unbounded.caching.break_detector import (
    PromptCacheBreakDetector,
    compare_prompt_states,
    snapshot_request,
)
from unbounded.errors import ConfigError
from unbounded.events import CacheBreak, ExpectedCacheDrop

REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": "You are a careful coding agent.",
    "messages": [{"role": "user", "content": "Fix the login bug."}],
}


def calls(detector: PromptCacheBreakDetector, *usages: dict[str, int]) -> list[Any]:
    """One call of the same request per usage, a second apart: what each check returned."""
    found = []
    for second, usage in enumerate(usages):
        detector.record_prompt_state(REQUEST, now=second)
        found.append(detector.check_response_for_cache_break(usage, now=second))
    return found


def test_two_notices_before_one_call_excuse_their_sum() -> None:
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=3_000)
    detector.notify_cache_deletion(deleted_tokens=5_000)
    [event] = calls(detector, {"cache_read_input_tokens": 42_000})
    assert isinstance(event, ExpectedCacheDrop) and event.deleted_tokens == 8_000
    # The later notice alone (5,000) would leave a drop of 3,000 past the thresholds.
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=5_000)
    assert isinstance(calls(detector, {"cache_read_input_tokens": 42_000})[0], CacheBreak)


def test_a_notice_of_no_tokens_excuses_nothing() -> None:
    """A deletion of 0 tokens is a valid notice; with no deletion in the usage either (the
    field absent), a drop one token past the 2,000-token minimum is still a break."""
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 30_000})
    detector.notify_cache_deletion(deleted_tokens=0, cache_deleted_baseline=0)
    [event] = calls(detector, {"cache_read_input_tokens": 27_999})
    assert isinstance(event, CacheBreak) and event.causes == ("server_side",)


def test_the_tiers_baseline_replaces_the_detectors() -> None:
    """Deletions the usage counted up to the baseline the tier captured are not this call's:
    only what the usage counts past it excuses a drop."""
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=0, cache_deleted_baseline=20_000)
    usage = {"cache_read_input_tokens": 30_000, "cache_deleted_input_tokens": 25_000}
    [event] = calls(detector, usage)
    assert isinstance(event, CacheBreak)  # 5,000 excused of a 20,000 drop
    # Without the tier's baseline, the detector's own (0) excuses all 25,000.
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=0)
    [event] = calls(detector, usage)
    assert isinstance(event, ExpectedCacheDrop) and event.deleted_tokens == 25_000
    with pytest.raises(ConfigError, match="cache_deleted_baseline must be >= 0"):
        detector.notify_cache_deletion(cache_deleted_baseline=-1)


def with_messages(*contents: Any, **changes: Any) -> dict[str, Any]:
    """REQUEST with these messages (user and assistant in turn) and these fields changed."""
    roles = ("user", "assistant")
    messages = [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]
    return {**REQUEST, "messages": messages, **changes}


def broken_by(previous: dict[str, Any], current: dict[str, Any]) -> CacheBreak:
    """The break the detector reports when `current` follows `previous` and reads nothing."""
    detector = PromptCacheBreakDetector()
    detector.record_prompt_state(previous, now=0)
    assert detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=0) is None
    detector.record_prompt_state(current, now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": 0}, now=1)
    assert isinstance(event, CacheBreak)
    return event


NOT_A_PREFIX = "(no longer a prefix of the previous request)"


def test_the_last_message_of_the_previous_request_edited_is_named() -> None:
    one = broken_by(with_messages("Fix the login bug."), with_messages("Fix the logout bug."))
    assert one.reason == f"messages changed from message #0 {NOT_A_PREFIX}"
    three = broken_by(
        with_messages("Fix the login bug.", "Reading login.py.", "It is in auth."),
        with_messages("Fix the login bug.", "Reading login.py.", "It is in session.", "Go on."),
    )
    assert three.reason == f"messages changed from message #2 {NOT_A_PREFIX}"


def test_a_block_added_to_an_earlier_message_is_named() -> None:
    """Only the previous request's last message may grow (the model's reply goes on); a block
    added to an earlier one changes what the cache holds from there."""
    first = [{"type": "text", "text": "Fix the login bug."}]
    grown = [*first, {"type": "text", "text": "And the logout one."}]
    event = broken_by(with_messages(first, "Reading login.py."), with_messages(grown, "Reading login.py."))
    assert event.causes == ("messages",)
    assert event.reason == f"messages changed from message #0 {NOT_A_PREFIX}"


def test_a_request_shorter_than_the_previous_says_so() -> None:
    event = broken_by(with_messages("a", "b", "c", "d", "e"), with_messages("a", "b", "c"))
    assert event.reason == "messages changed (request has fewer than 4)"


def test_a_system_prompt_edited_to_the_same_length_is_plus_zero_chars() -> None:
    event = broken_by(with_messages("a"), with_messages("a", system="You are a cautious coding agent"))
    assert len("You are a cautious coding agent") == len(REQUEST["system"])
    assert event.reason == "system prompt changed (+0 chars)"


def test_a_tool_removed_is_named() -> None:
    read = {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}
    grep = {"name": "Grep", "description": "Search files.", "input_schema": {"type": "object"}}
    event = broken_by(with_messages("a", tools=[read, grep]), with_messages("a", tools=[read]))
    assert event.reason == "tools changed (+0/-1 tools; removed Grep)"


def test_comparing_two_snapshots_looks_at_every_message() -> None:
    """`compare_prompt_states` called without `shared_messages` takes no message as known."""
    previous = snapshot_request(with_messages("Fix the login bug.", "Reading login.py."))
    current = snapshot_request(with_messages("Fix the logout bug.", "Reading login.py.", "More."))
    [change] = compare_prompt_states(previous, current)
    assert change.description == f"messages changed from message #0 {NOT_A_PREFIX}"


HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE_MINUTES = {"type": "ephemeral"}
HOUR_SYSTEM = [{"type": "text", "text": "You are a careful coding agent.", "cache_control": HOUR}]


def said(role: str, text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        block["cache_control"] = marker
    return {"role": role, "content": [block]}


class Immutable:
    """A detector told the caller never edits a message in place, fed requests that share
    their message objects, each checked as if it read `read` tokens."""

    def __init__(self) -> None:
        self.detector = PromptCacheBreakDetector(messages_immutable=True)

    def call(self, at: float, messages: list[dict[str, Any]], read: int, **changes: Any) -> Any:
        request = {**REQUEST, "system": HOUR_SYSTEM, "messages": list(messages), **changes}
        snapshot = self.detector.record_prompt_state(request, now=at)
        assert snapshot == snapshot_request(request)  # what it would be from scratch
        return self.detector.check_response_for_cache_break({"cache_read_input_tokens": read}, now=at)


def test_a_five_minute_marker_on_an_early_message_keeps_the_conversation_on_five_minutes() -> None:
    """The shortest TTL on the message markers caches the conversation, however many turns
    since the message that carries it: a 10-minute pause then is a 5-minute expiry."""
    calls = Immutable()
    messages = [said("user", "Fix the login bug.", FIVE_MINUTES)]
    for turn in range(4):
        assert calls.call(turn * 20, messages, 50_000) is None
        messages += [said("assistant", f"Step {turn}."), said("user", "Go on.")]
    event = calls.call(60 + 600, messages, 0)
    assert isinstance(event, CacheBreak)
    assert event.reason == "possible 5min TTL expiry (10.0 min since the last call)"
    assert calls.detector.snapshot() is not None and calls.detector.snapshot().ttl == "5m"  # type: ignore[union-attr]


def test_after_a_compaction_the_ttl_is_the_new_requests() -> None:
    """A compaction's new history marked for an hour is cached for an hour, whatever the
    markers of the history it replaced: the snapshot right after it is the new request's
    (`Immutable.call` checks each one), and a 10-minute pause later is no expiry."""
    calls = Immutable()
    assert calls.call(0, [said("user", "Fix the login bug.", FIVE_MINUTES)], 50_000) is None
    calls.detector.notify_compaction()
    summary = [said("user", "Summary: the login bug is in auth.py.", HOUR)]
    assert isinstance(calls.call(20, summary, 0), ExpectedCacheDrop)
    assert calls.call(40, [*summary, said("assistant", "Reading auth.py.")], 10_000) is None
    event = calls.call(40 + 600, [*summary, said("assistant", "Reading auth.py."), said("user", "Go on.")], 0)
    assert isinstance(event, CacheBreak)
    assert event.reason == "likely server-side (prompt unchanged, <1h gap)"


def test_a_system_prompt_change_is_named_when_messages_are_shared() -> None:
    calls = Immutable()
    messages = [said("user", "Fix the login bug.")]
    assert calls.call(0, messages, 50_000) is None
    assert calls.call(20, messages, 50_000) is None
    longer = [{**HOUR_SYSTEM[0], "text": HOUR_SYSTEM[0]["text"] + " Be brief."}]
    event = calls.call(40, messages, 0, system=longer)
    assert event.reason == "system prompt changed (+10 chars)"


def test_the_global_cache_strategy_is_the_system_markers_scope() -> None:
    """`global` when a system marker is global, `org` for other system markers, `none`
    without one: the tools' markers do not count."""
    tool = {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}

    def strategy(system_marker: dict[str, str] | None, tool_marker: dict[str, str] | None) -> str:
        system: dict[str, Any] = {"type": "text", "text": "You are a careful coding agent."}
        if system_marker is not None:
            system["cache_control"] = system_marker
        marked_tool = {**tool, "cache_control": tool_marker} if tool_marker else tool
        return snapshot_request(with_messages("a", system=[system], tools=[marked_tool])).global_cache_strategy

    global_scope = {"type": "ephemeral", "scope": "global"}
    assert strategy(global_scope, FIVE_MINUTES) == "global"
    assert strategy(FIVE_MINUTES, global_scope) == "org"
    assert strategy(None, global_scope) == "none"
    assert strategy(FIVE_MINUTES, None) == "org"


def diff_of_break(previous: dict[str, Any], current: dict[str, Any]) -> tuple[CacheBreak, str]:
    """The break `current` after `previous` causes, and the diff file written for it."""
    written: dict[Path, str] = {}
    detector = PromptCacheBreakDetector(diff_dir=Path("breaks"), write_diff=written.__setitem__)
    detector.record_prompt_state(previous, now=0)
    detector.check_response_for_cache_break({"cache_read_input_tokens": 50_000}, now=0)
    detector.record_prompt_state(current, now=1)
    event = detector.check_response_for_cache_break({"cache_read_input_tokens": 0}, now=1)
    assert isinstance(event, CacheBreak) and event.diff_path is not None
    return event, written[event.diff_path]


def test_an_effort_set_in_the_body_is_named_and_shown() -> None:
    event, diff = diff_of_break(with_messages("a"), with_messages("a", effort="high"))
    assert "effort changed (None → high)" in event.changes
    assert "\n-effort: -\n" in diff and "\n+effort: high\n" in diff
    assert broken_by(with_messages("a", effort="high"), with_messages("a", effort="low")).changes[0] == (
        "effort changed (high → low)"
    )


def test_a_beta_header_added_is_named_and_shown() -> None:
    event, diff = diff_of_break(with_messages("a", betas=["b1"]), with_messages("a", betas=["b1", "b2"]))
    assert event.reason == "betas changed (+1/-0: +b2)"
    assert "-betas: b1\n+betas: b1, b2\n" in diff
    _, diff = diff_of_break(with_messages("a"), with_messages("a", betas=["b1"]))
    assert "-betas: -\n+betas: b1\n" in diff


def test_a_deletion_the_usage_reports_and_the_tier_announced_is_excused_once() -> None:
    """The tier's notice and the usage's cache_deleted_input_tokens describe one deletion:
    8,000 tokens excuse a drop of 8,000, not of 16,000."""
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=8_000, cache_deleted_baseline=0)
    usage = {"cache_read_input_tokens": 34_000, "cache_deleted_input_tokens": 8_000}
    [event] = calls(detector, usage)
    assert isinstance(event, CacheBreak)
    # The deletion alone is excused, by the usage's figure.
    detector = PromptCacheBreakDetector()
    calls(detector, {"cache_read_input_tokens": 50_000})
    detector.notify_cache_deletion(deleted_tokens=8_000, cache_deleted_baseline=0)
    usage = {"cache_read_input_tokens": 42_000, "cache_deleted_input_tokens": 8_000}
    [event] = calls(detector, usage)
    assert isinstance(event, ExpectedCacheDrop) and event.deleted_tokens == 8_000


def test_a_top_level_effort_change_is_named_once() -> None:
    event = broken_by({**REQUEST, "effort": "low"}, {**REQUEST, "effort": "high"})
    assert event.causes == ("effort",)
    assert event.reason == "effort changed (low → high)"
    config = broken_by(
        {**REQUEST, "output_config": {"effort": "low"}},
        {**REQUEST, "output_config": {"effort": "high"}},
    )
    assert config.causes == ("effort",)
