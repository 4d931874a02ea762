"""The summary-request budget of a compaction, and a wrapped offline summary read as the bare one
(the profiles themselves: tests/test_provider_profile.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    DirectSummaryTier,
    TieredCompaction,
    TierSlot,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CacheSafeParams, compact_conversation
from unbounded.compaction.glue import default_facts_ledger
from unbounded.errors import ConfigError
from unbounded.evaluation.replay import RecordingProvider
from unbounded.events import CompactionFinished, Event, SummaryRequestsSpent
from unbounded.extensions.subagents import ContinuationSummarizer
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.request_budget import RequestBudget, take_retry
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, OverloadedError
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.providers.retry import RetryingProvider
from unbounded.telemetry import Telemetry


def no_wait(delay: float) -> Any:
    return asyncio.sleep(0)


class Flaky:
    """A model whose first `failures` requests fail (overloaded), then writes a summary."""

    name = "flaky"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.requests += 1
        if self.requests <= self.failures:
            raise OverloadedError("overloaded", status=529)
        return ModelResponse([{"type": "text", "text": nine_section_summary("the build")}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


# -- the budget ---------------------------------------------------------------------------------


def test_a_budget_gives_exactly_its_limit() -> None:
    budget = RequestBudget(3)
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
    assert budget.used == 3 and budget.spent
    assert RequestBudget(3, used=2).take() and not RequestBudget(3, used=3).take()
    with pytest.raises(ConfigError, match="limit must be >= 1"):
        RequestBudget(0)
    with pytest.raises(ConfigError, match="used must be >= 0"):
        RequestBudget(2, used=-1)
    with pytest.raises(ConfigError, match="compact_max_summary_requests must be >= 1"):
        Policy(compact_max_summary_requests=0)
    assert Policy().compact_max_summary_requests == 4  # the stated default


def test_retries_are_taken_from_the_active_budget_only() -> None:
    assert take_retry()  # no compaction: nothing bounds a retry
    budget = RequestBudget(2)
    with budget.active():
        assert take_retry() and take_retry() and not take_retry()
    assert take_retry() and budget.used == 2  # the budget is active inside the block only


def test_a_retrying_provider_stops_when_the_budget_is_spent() -> None:
    model = Flaky(failures=10)
    retrying = RetryingProvider(model, max_retries=5, sleep=no_wait)
    budget = RequestBudget(4, used=1)  # the first attempt was taken by its sender

    async def send() -> None:
        with budget.active():
            await retrying.create({"model": "m", "max_tokens": 10, "messages": []})

    with pytest.raises(OverloadedError):
        asyncio.run(send())
    assert model.requests == 4 and budget.spent  # 1 + 3 retries, not 1 + 5
    assert retrying.stats.gave_up == 1


def entries() -> list[Entry]:
    first = Entry.user("Please build the thing.")
    reply = Entry.assistant([{"type": "text", "text": "On it. " * 300}], message_id="msg_1")
    return [first, reply, Entry.user("and now?")]


def context(budget: RequestBudget | None, events: list[Event]) -> CompactionContext:
    view = entries()
    return CompactionContext(
        entries=view,
        view=view,
        policy=Policy(),
        params=CacheSafeParams(model="claude-sonnet-4-5"),
        autocompact_threshold=100_000,
        tokens=5_000,
        rehydrate_from=None,
        events=events.append,
        budget=budget,
    )


def tiers(model: Any) -> TieredCompaction:
    offline = ExtractiveSummarizer()
    return TieredCompaction(
        [
            TierSlot(CacheSharingSummaryTier(model, trigger="manual"), "closed"),
            TierSlot(DirectSummaryTier(model, trigger="manual"), "closed"),
            TierSlot(CacheSharingSummaryTier(offline, trigger="manual"), "open"),
        ]
    )


def test_the_offline_hand_over_lands_the_compaction_once_the_budget_is_spent() -> None:
    events: list[Event] = []
    model = Flaky(failures=10)
    budget = RequestBudget(3, used=1)  # one request spent by an earlier, failed run
    outcome = asyncio.run(tiers(model).run(context(budget, events), failures=1))
    assert model.requests == 2  # the cache-sharing request and the direct one: then none left
    assert outcome.result is not None and outcome.result.author.fallback == "request_budget"
    assert outcome.result.summary_requests == 3 and outcome.summary_requests == 3
    assert [e for e in events if isinstance(e, SummaryRequestsSpent)] == [SummaryRequestsSpent(3, 3)]
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert [(e.summarizer, e.fallback, e.summary_requests) for e in finished] == [("extractive", "request_budget", 3)]


def test_a_failed_run_with_requests_left_waits_for_the_next_turn() -> None:
    events: list[Event] = []
    model = Flaky(failures=10)
    budget = RequestBudget(4)
    outcome = asyncio.run(tiers(model).run(context(budget, events), failures=0))
    assert outcome.result is None and outcome.failures == 1 and outcome.summary_requests == 2
    assert not [e for e in events if isinstance(e, SummaryRequestsSpent)]


def test_a_model_that_recovers_within_the_budget_writes_the_summary() -> None:
    events: list[Event] = []
    model = Flaky(failures=1)
    outcome = asyncio.run(tiers(model).run(context(RequestBudget(4), events), failures=0))
    assert outcome.result is not None and outcome.result.author.summarizer == "flaky"
    assert outcome.result.author.fallback is None and outcome.result.summary_requests == 2


def test_without_a_budget_nothing_is_counted() -> None:
    events: list[Event] = []
    outcome = asyncio.run(tiers(Flaky(failures=1)).run(context(None, events), failures=0))
    assert outcome.result is not None and outcome.summary_requests == 0


# -- a wrapped offline summary --------------------------------------------------------------------


def wrappers(inner: Any) -> dict[str, Any]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider

    return {
        "retrying": RetryingProvider(inner, sleep=no_wait),
        "recording": RecordingProvider(inner),
        "traced": Telemetry(tracer_provider=TracerProvider()).traced(inner),
        "continuation": ContinuationSummarizer(inner),
        "nested": RecordingProvider(RetryingProvider(inner, sleep=no_wait)),
    }


def test_a_wrapped_offline_summary_is_read_as_the_bare_one() -> None:
    """Wrapped, the offline summary is still final text (never parsed for tags) that lists the
    facts itself (no second ledger), so it is the same summary."""
    view = [
        Entry.user("Fix parser.py: parse_header fails on empty lines."),
        Entry.assistant([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest tests/test_parser.py"}}], message_id="m1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "FAILED test_empty_line", "is_error": True}]),
        Entry.assistant([{"type": "text", "text": "The parser skips nothing: I will fix parse_header. " * 40}], message_id="m2"),
        Entry.user("Go on."),
    ]

    def summary(provider: Any) -> str:
        result = asyncio.run(
            compact_conversation(view, provider, params=CacheSafeParams(model="claude-sonnet-4-5"), facts_ledger=default_facts_ledger, policy=Policy())
        )
        return result.summary_text

    bare = summary(ExtractiveSummarizer())
    for name, wrapper in wrappers(ExtractiveSummarizer()).items():
        if name != "continuation":  # asks for another summary shape on purpose
            assert summary(wrapper) == bare, name


def test_a_retrying_wrapper_of_a_model_is_not_offline() -> None:
    model = Flaky(failures=0)
    assert RetryingProvider(model).profile == MODEL_PROFILE
