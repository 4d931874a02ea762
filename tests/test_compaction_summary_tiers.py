"""compaction.auto: the cache-sharing and direct summary requests as two tiers, and the tier
list a Session runs (its default order and the `compaction_tiers` a user gives)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    CompactionOutcome,
    DirectSummaryTier,
    SessionMemoryTier,
    SummaryHandover,
    SummaryTier,
    TieredCompaction,
    TierSlot,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CacheSafeParams, CompactionResult
from unbounded.compaction.memory_updaters import OfflineNotesUpdater
from unbounded.compaction.prompts import SUMMARY_SYSTEM_PROMPT
from unbounded.errors import (
    CompactionError,
    ConfigError,
    PromptTooLongError,
    ProviderError,
    ServerError,
)
from unbounded.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionRetried,
    CompactionStarted,
    Event,
)
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

SUMMARY = nine_section_summary("finish the parser", chars=1_600)
PARAMS = CacheSafeParams(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
)


def reply(text: str = SUMMARY) -> ModelResponse:
    return ModelResponse([{"type": "text", "text": text}], "end_turn", {"input_tokens": 10, "output_tokens": 5}, "m")


class Scripted:
    """A provider answering from a script (a reply or an exception per call); keeps requests."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, *script: ModelResponse | Exception) -> None:
        self.script = list(script)
        self.requests: list[ProviderRequest] = []

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.requests.append(request)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return item


def entries(turns: int = 6) -> list[Entry]:
    out: list[Entry] = []
    for n in range(turns):
        out.append(Entry.user(f"request number {n}: please handle part {n}"))
        out.append(Entry.assistant([{"type": "text", "text": f"part {n} handled: " + "detail " * 60}], message_id=f"m{n}"))
    return out


def context(events: list[Event], **changes: Any) -> CompactionContext:
    history = entries()
    fields: dict[str, Any] = {
        "entries": history,
        "view": history,
        "policy": Policy(),
        "params": PARAMS,
        "autocompact_threshold": 100_000,
        "tokens": 5_000,
        "events": events.append,
        "rehydrate_from": None,
        "planner": lambda request, skip: request,
    }
    fields.update(changes)
    return CompactionContext(**fields)


def too_long() -> PromptTooLongError:
    return PromptTooLongError("prompt is too long: 8100 tokens > 8000 maximum", actual_tokens=8_100, limit_tokens=8_000)


def is_direct(request: ProviderRequest) -> bool:
    return request.get("system") == SUMMARY_SYSTEM_PROMPT and "tools" not in request


# -- each tier alone ----------------------------------------------------------------------------


def test_the_cache_sharing_tier_alone_forks_the_cached_prefix() -> None:
    events: list[Event] = []
    provider = Scripted(reply())
    result = asyncio.run(CacheSharingSummaryTier(provider).compact(context(events)))
    assert result is not None and not result.used_fallback and result.attempts == 1
    (request,) = provider.requests
    assert request["system"] == PARAMS.system and request.get("tools") == PARAMS.tools  # the cache key
    assert [e.kind for e in events] == ["compaction_started", "compaction_finished"]


def test_the_cache_sharing_tier_hands_a_failed_request_over() -> None:
    events: list[Event] = []
    error = ServerError("down", status=500)
    tier = CacheSharingSummaryTier(Scripted(error))
    handover = asyncio.run(tier.compact(context(events)))
    assert isinstance(handover, SummaryHandover) and handover.tier is tier
    assert handover.job is not None and handover.job.handed_over is error and handover.job.attempts == 0
    assert handover.taken_by(DirectSummaryTier(tier.provider))
    assert not handover.taken_by(DirectSummaryTier(Scripted(reply())))  # another summarizer
    assert not handover.taken_by(DirectSummaryTier(tier.provider, instructions="keep the API"))
    # Handed over, not ended: no failure event until it is given up.
    assert [e.kind for e in events] == ["compaction_started"]
    assert handover.give_up() is error and isinstance(events[-1], CompactionFailed)


def test_the_cache_sharing_tier_fails_on_what_a_direct_request_would_not_mend() -> None:
    events: list[Event] = []
    provider = Scripted(too_long())
    outcome = asyncio.run(TieredCompaction([CacheSharingSummaryTier(provider), DirectSummaryTier(provider)]).run(context(events)))
    assert outcome == CompactionOutcome(None, 1, False)
    assert not any(is_direct(r) for r in provider.requests)  # prompt too long: no direct request
    assert [e.kind for e in events][-1] == "compaction_failed" and events[-1].reason == "prompt_too_long"  # type: ignore[attr-defined]


def test_the_direct_tier_alone_sends_a_plain_request() -> None:
    events: list[Event] = []
    provider = Scripted(reply())
    result = asyncio.run(DirectSummaryTier(provider).compact(context(events)))
    assert result is not None and result.used_fallback and result.attempts == 1
    (request,) = provider.requests
    assert is_direct(request) and request["max_tokens"] == Policy().compact_max_output_tokens
    assert [e.kind for e in events] == ["compaction_started", "compaction_finished"]


def test_the_direct_tier_alone_fails_and_is_counted_once() -> None:
    events: list[Event] = []
    provider = Scripted(ServerError("down", status=500))
    outcome = asyncio.run(TieredCompaction([DirectSummaryTier(provider)]).run(context(events), failures=1))
    assert outcome == CompactionOutcome(None, 2, False) and len(provider.requests) == 1
    assert [e.kind for e in events] == ["compaction_started", "compaction_failed"]


@pytest.mark.parametrize("tiers", [["cache"], ["direct"], ["cache", "direct"]])
def test_nothing_before_the_turn_falls_through_with_one_event(tiers: list[str]) -> None:
    events: list[Event] = []
    provider = Scripted(reply())
    built = {"cache": CacheSharingSummaryTier(provider), "direct": DirectSummaryTier(provider)}
    outcome = asyncio.run(TieredCompaction([built[name] for name in tiers]).run(context(events, keep_from="")))
    assert outcome == CompactionOutcome(None, 0, False) and provider.requests == []
    assert [getattr(e, "reason", None) for e in events] == ["nothing_to_summarize"]


# -- the hand-over keeps the events, retries and counts of one summary ----------------------------


def events_of(run: Any, *script: ModelResponse | Exception) -> tuple[list[Event], Scripted, Any]:
    events: list[Event] = []
    provider = Scripted(*script)
    try:
        outcome: Any = asyncio.run(run(provider, context(events)))
    except (CompactionError, ProviderError) as error:  # the combined tier raises them
        outcome = error
    return events, provider, outcome


def split(provider: Scripted, built: CompactionContext) -> Any:
    return TieredCompaction([CacheSharingSummaryTier(provider), DirectSummaryTier(provider)]).run(built)


def combined(provider: Scripted, built: CompactionContext) -> Any:
    return SummaryTier(provider).compact(built)


@pytest.mark.parametrize(
    "script",
    [
        pytest.param([ServerError("down", status=500), reply()], id="api-error"),
        pytest.param([reply("too short"), reply()], id="implausible-reply"),
        pytest.param([too_long(), ServerError("down", status=500), reply()], id="retried-then-api-error"),
        pytest.param([ServerError("down", status=500), ServerError("still down", status=500)], id="both-fail"),
    ],
)
def test_a_cache_sharing_failure_falls_through_to_the_direct_tier_as_before(script: list[Any]) -> None:
    split_events, split_provider, outcome = events_of(split, *script)
    one_events, one_provider, one = events_of(combined, *script)
    assert split_events == one_events  # names, order and fields
    assert split_provider.requests == one_provider.requests
    assert is_direct(split_provider.requests[-1]) and not is_direct(split_provider.requests[0])
    assert [e.kind for e in split_events].count("compaction_started") == 1
    if isinstance(one, Exception):
        assert outcome == CompactionOutcome(None, 1, False)  # one failed run
        assert [e.kind for e in split_events][-1] == "compaction_failed"
    else:
        assert outcome.result.summary_text == one.summary_text and outcome.result.attempts == one.attempts
        assert isinstance(split_events[-1], CompactionFinished) and split_events[-1].used_fallback


def test_the_events_of_a_retried_hand_over_are_those_of_one_summary() -> None:
    events, provider, outcome = events_of(split, too_long(), ServerError("down", status=500), reply())
    assert [type(e) for e in events] == [CompactionStarted, CompactionRetried, CompactionFinished]
    retried = events[1]
    assert isinstance(retried, CompactionRetried) and retried.attempt == 1
    # The direct request goes on from the shortened messages, as the third request.
    assert len(provider.requests[2]["messages"]) == len(provider.requests[1]["messages"])
    assert len(provider.requests[1]["messages"]) < len(provider.requests[0]["messages"])
    assert outcome.result.attempts == 2 and outcome.result.used_fallback


def test_a_hand_over_no_tier_takes_is_the_runs_failure() -> None:
    events: list[Event] = []
    provider, other = Scripted(ServerError("down", status=500)), Scripted(reply())
    tiers = TieredCompaction([CacheSharingSummaryTier(provider), DirectSummaryTier(other)])
    outcome = asyncio.run(tiers.run(context(events)))
    assert outcome == CompactionOutcome(None, 1, False) and other.requests == []
    assert [e.kind for e in events] == ["compaction_started", "compaction_failed"]
    assert events[-1].reason == "ServerError"  # type: ignore[attr-defined]


def test_the_breaker_trips_on_the_direct_tier_and_the_extractive_tiers_take_over() -> None:
    events: list[Event] = []
    failing = Scripted(ServerError("down", status=500))
    offline = Scripted(reply())
    tiers = TieredCompaction(
        [
            TierSlot(CacheSharingSummaryTier(failing), "closed"),
            TierSlot(DirectSummaryTier(failing), "closed"),
            TierSlot(CacheSharingSummaryTier(offline), "open"),
            TierSlot(DirectSummaryTier(offline), "open"),
        ]
    )
    outcome = asyncio.run(tiers.run(context(events), failures=2))
    assert outcome.tripped and outcome.result is not None and outcome.failures == 0
    assert len(failing.requests) == 2 and len(offline.requests) == 1 and not is_direct(offline.requests[0])
    assert [e.kind for e in events] == [
        "compaction_started",
        "compaction_failed",
        "circuit_breaker_tripped",
        "compaction_started",
        "compaction_finished",
    ]


# -- the Session's list ---------------------------------------------------------------------------

CONFIG = SessionConfig(model="claude-sonnet-4-5", system="You are a coding agent.", context_window=60_000)


def shape(tiers: tuple[Any, ...]) -> list[tuple[str, str]]:
    slots = [tier if isinstance(tier, TierSlot) else TierSlot(tier) for tier in tiers]
    return [(type(slot.tier).__name__, slot.when_breaker) for slot in slots]


def test_the_session_default_order() -> None:
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    session = Session(CONFIG, store=MemoryStore(), summarizer=Scripted(reply()), extensions=[memory])
    assert shape(session.compaction_tiers()) == [
        ("SessionMemoryTier", "any"),
        ("CacheSharingSummaryTier", "closed"),
        ("DirectSummaryTier", "closed"),
        ("CacheSharingSummaryTier", "open"),
        ("DirectSummaryTier", "open"),
    ]
    cache, direct = (slot.tier for slot in session.compaction_tiers()[1:3])  # type: ignore[union-attr]
    assert cache.provider is direct.provider  # one summary: the direct tier takes the hand-over
    plain = Session(CONFIG, store=MemoryStore())
    assert shape(plain.compaction_tiers()) == [("CacheSharingSummaryTier", "any"), ("DirectSummaryTier", "any")]


class Marker:
    """A user's tier: logs that it ran and lets the next tier compact."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        self.log.append(f"marker saw {len(context.view)} records")
        return None


def conversation(session: Session) -> None:
    for n in range(4):
        session.add_user(f"Step {n}: " + "explain the parser " * 40)
        session.record(ModelResponse([{"type": "text", "text": "done " * 200}], "end_turn", {"input_tokens": 100 * (n + 1), "output_tokens": 5}, "m"))
    session.add_user("And now?")


def test_a_user_tier_list_runs_instead_of_the_default() -> None:
    log: list[str] = []
    summarizer = Scripted(reply())
    session = Session(CONFIG, store=MemoryStore(), summarizer=summarizer, compaction_tiers=[Marker(log), DirectSummaryTier(summarizer)])
    conversation(session)
    records = len(session.view)
    result = asyncio.run(session.auto_compact())
    assert log == [f"marker saw {records} records"] and result is not None and result.used_fallback
    assert len(summarizer.requests) == 1 and is_direct(summarizer.requests[0])
    assert session.view[0].type == "system"  # applied: the conversation starts at the boundary


def test_a_function_of_the_defaults_inserts_a_tier() -> None:
    log: list[str] = []
    summarizer = Scripted(reply())
    session = Session(
        CONFIG,
        store=MemoryStore(),
        summarizer=summarizer,
        extensions=[SessionMemory(OfflineNotesUpdater(), background=False)],
        compaction_tiers=lambda defaults: [Marker(log), *defaults[1:]],  # no session memory
    )
    assert shape(session.compaction_tiers())[:2] == [("Marker", "any"), ("CacheSharingSummaryTier", "closed")]
    conversation(session)
    records = len(session.view)
    result = asyncio.run(session.auto_compact())
    assert log == [f"marker saw {records} records"] and result is not None and not result.used_fallback


@pytest.mark.parametrize(
    ("tiers", "message"),
    [
        ([], "compaction_tiers needs at least one tier"),
        ([Marker([]), "summary"], r"compaction_tiers\[1\]: str is not a compaction tier"),
        (Marker([]), "compaction_tiers must be a list of compaction tiers"),
        ("summary", "compaction_tiers must be a list"),
        ([object()], r"compaction_tiers\[0\]: object is not a compaction tier"),
    ],
)
def test_a_bad_tier_list_is_refused_at_construction(tiers: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Session(CONFIG, store=MemoryStore(), compaction_tiers=tiers)


def test_a_function_giving_a_bad_list_is_refused_when_it_runs() -> None:
    session = Session(CONFIG, store=MemoryStore(), compaction_tiers=lambda defaults: [*defaults, 42])
    with pytest.raises(ConfigError, match=r"compaction_tiers\(defaults\)\[2\]: int is not a compaction tier"):
        session.compaction_tiers()


def test_session_memory_tier_is_still_one_entry() -> None:
    async def never(context: CompactionContext, limit: int | None) -> CompactionResult | None:
        return None

    summarizer = Scripted(reply())
    session = Session(CONFIG, store=MemoryStore(), compaction_tiers=[SessionMemoryTier(never), DirectSummaryTier(summarizer)])
    conversation(session)
    result = asyncio.run(session.auto_compact())
    # the notes tier declined, so the next entry wrote the summary, with one request
    assert result is not None and result.summarizer == "scripted" and len(summarizer.requests) == 1
    assert session.status().compactions == 1 and session.view[0].is_compact_boundary
