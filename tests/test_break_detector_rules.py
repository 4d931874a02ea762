"""The cache-break detector's rules at their edges (`caching/break_detector.py`): which drop
between two calls of a source is a break, which one an announced deletion excuses, and what
a break names as its cause."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.caching.break_detector import PromptCacheBreakDetector
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
