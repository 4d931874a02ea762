"""compaction.auto: the tier list and its one circuit breaker; the context a Session builds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.auto import (
    CIRCUIT_BREAKER_FAILURES,
    CompactionOutcome,
    SessionMemoryTier,
    SummaryTier,
    TieredCompaction,
    TierSlot,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CacheSafeParams, CompactionHooks, CompactionResult
from unbounded.compaction.memory_compact import try_session_memory_compaction
from unbounded.compaction.memory_updaters import OfflineNotesUpdater
from unbounded.errors import CompactionError, ConfigError
from unbounded.events import Event, SessionMemoryCompactionSkipped, SessionMemoryUpdated
from unbounded.extensions.session_memory import SessionMemory
from unbounded.hooks import HookRunner
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.providers.base import ServerError
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.tokens.estimate import estimate_messages_tokens


def context(events: list[Event] | None = None, **changes: Any) -> CompactionContext:
    """A small context; the fake tiers below read nothing from it."""
    fields: dict[str, Any] = {
        "entries": [],
        "view": [],
        "policy": Policy(),
        "params": CacheSafeParams(model="claude-sonnet-4-5"),
        "autocompact_threshold": 1_000,
        "tokens": 0,
        "events": events.append if events is not None else None,
    }
    fields.update(changes)
    return CompactionContext(**fields)


def result(name: str) -> CompactionResult:
    """A compaction result that only names its tier."""
    boundary = create_compact_boundary("auto", 0)
    return CompactionResult(boundary, [], [], [], [], 0, 0, 0, name, None, {}, 0, False, name)


class Scripted:
    """A tier that answers from a script: a result's name, None, or an error; logs its runs."""

    def __init__(self, name: str, log: list[str], *answers: str | Exception | None) -> None:
        self.name = name
        self.log = log
        self.answers = list(answers)

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        self.log.append(self.name)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return None if answer is None else result(answer)


def run(tiers: TieredCompaction, failures: int = 0, events: list[Event] | None = None) -> CompactionOutcome:
    return asyncio.run(tiers.run(context(events), failures=failures))


def tripped(events: list[Event]) -> list[int]:
    return [getattr(e, "failures", -1) for e in events if e.kind == "circuit_breaker_tripped"]


def test_tiers_run_in_order_and_the_first_result_wins() -> None:
    log: list[str] = []
    tiers = TieredCompaction([Scripted("a", log, None), Scripted("b", log, "from b"), Scripted("c", log, "from c")])
    outcome = run(tiers, failures=2)
    assert log == ["a", "b"]  # c is never asked
    assert outcome.result is not None and outcome.result.summary_text == "from b"
    assert outcome.failures == 0 and not outcome.tripped  # a success resets the count


def test_none_everywhere_is_no_compaction_and_no_failure() -> None:
    log: list[str] = []
    outcome = run(TieredCompaction([Scripted("a", log, None), Scripted("b", log, None)]), failures=1)
    assert log == ["a", "b"] and outcome == CompactionOutcome(None, 1, False)


def test_a_failure_stops_the_run_and_is_counted_once() -> None:
    log: list[str] = []
    tiers = TieredCompaction([Scripted("a", log, ServerError("down")), Scripted("b", log, "from b")])
    outcome = run(tiers)
    assert log == ["a"] and outcome == CompactionOutcome(None, 1, False)
    # An error that is neither a compaction nor a provider failure is a bug: it is raised.
    with pytest.raises(KeyError):
        run(TieredCompaction([Scripted("k", log, KeyError("x"))]))


def test_the_breaker_trips_at_the_limit_and_hands_over_at_once() -> None:
    events: list[Event] = []
    log: list[str] = []
    summary = Scripted("summary", log, CompactionError("bad", reason="implausible_summary"))
    fallback = Scripted("fallback", log, "offline")
    tiers = TieredCompaction([TierSlot(summary, "closed"), TierSlot(fallback, "open")])
    for failures in range(1, CIRCUIT_BREAKER_FAILURES):
        outcome = run(tiers, failures=failures - 1, events=events)
        assert outcome == CompactionOutcome(None, failures, False) and not tripped(events)
    assert log == ["summary"] * (CIRCUIT_BREAKER_FAILURES - 1)  # no fallback while closed
    outcome = run(tiers, failures=CIRCUIT_BREAKER_FAILURES - 1, events=events)
    assert tripped(events) == [CIRCUIT_BREAKER_FAILURES] and outcome.tripped
    assert outcome.result is not None and outcome.result.summary_text == "offline"
    assert outcome.failures == 0 and log[-2:] == ["summary", "fallback"]


def test_an_open_breaker_skips_the_closed_tiers_and_counts_fallback_failures() -> None:
    events: list[Event] = []
    log: list[str] = []
    tiers = TieredCompaction(
        [TierSlot(Scripted("summary", log, "never"), "closed"), TierSlot(Scripted("fallback", log, ServerError("x")), "open")]
    )
    outcome = run(tiers, failures=3, events=events)
    assert log == ["fallback"] and outcome == CompactionOutcome(None, 4, False) and not tripped(events)


def test_the_fallback_failing_right_after_the_trip_is_not_counted_again() -> None:
    events: list[Event] = []
    log: list[str] = []
    tiers = TieredCompaction(
        [TierSlot(Scripted("summary", log, ServerError("a")), "closed"), TierSlot(Scripted("fallback", log, ServerError("b")), "open")]
    )
    outcome = run(tiers, failures=2, events=events)
    assert log == ["summary", "fallback"] and outcome == CompactionOutcome(None, 3, True)
    assert tripped(events) == [3]


def test_without_hand_over_the_tripping_run_ends_and_the_next_uses_the_fallback() -> None:
    events: list[Event] = []
    log: list[str] = []
    tiers = TieredCompaction(
        [TierSlot(Scripted("summary", log, ServerError("a")), "closed"), TierSlot(Scripted("fallback", log, "offline"), "open")],
        hand_over_at_once=False,
    )
    assert run(tiers, failures=2, events=events) == CompactionOutcome(None, 3, True)
    assert log == ["summary"] and tripped(events) == [3]
    outcome = run(tiers, failures=3, events=events)
    assert log == ["summary", "fallback"] and outcome.result is not None and outcome.failures == 0


def test_a_tier_that_may_run_always_never_trips_the_breaker() -> None:
    events: list[Event] = []
    log: list[str] = []
    outcome = run(TieredCompaction([Scripted("only", log, ServerError("x"))]), failures=2, events=events)
    assert outcome == CompactionOutcome(None, 3, False) and not tripped(events)


def test_a_custom_tier_is_one_entry() -> None:
    class Truncate:
        """Keeps the last message only: a tier the library does not have."""

        async def compact(self, context: CompactionContext) -> CompactionResult | None:
            return result(f"kept 1 of {len(context.view)}")

    log: list[str] = []
    tiers = TieredCompaction([Scripted("notes", log, None), Truncate()], failure_limit=5)
    outcome = asyncio.run(tiers.run(context(view=[Entry.user("a"), Entry.user("b")])))
    assert outcome.result is not None and outcome.result.summary_text == "kept 1 of 2"


def test_wrong_tier_settings_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="at least one tier"):
        TieredCompaction([])
    with pytest.raises(ConfigError, match="failure_limit"):
        TieredCompaction([Scripted("a", [], None)], failure_limit=0)
    with pytest.raises(ConfigError, match="when_breaker"):
        TierSlot(Scripted("a", [], None), "half-open")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a compaction tier"):
        TierSlot(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_post_tokens"):
        SessionMemoryTier(lambda c, limit: asyncio.sleep(0, None), max_post_tokens=-1)
    with pytest.raises(ConfigError, match="pivot and a direction"):
        SummaryTier(Summarizer(), trigger="manual", pivot="u1")
    with pytest.raises(ConfigError, match="trigger='manual'"):
        SummaryTier(Summarizer(), pivot="u1", direction="up_to")
    with pytest.raises(ConfigError, match="create"):
        SummaryTier(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="autocompact_threshold"):
        context(autocompact_threshold=0)
    with pytest.raises(ConfigError, match="rehydrate_from"):
        context(rehydrate_from="cloud")
    with pytest.raises(ConfigError, match="calibration"):
        context(calibration=0.0)
    with pytest.raises(ConfigError, match="failures"):
        run(TieredCompaction([Scripted("a", [], None)]), failures=-1)


def test_an_automatic_summary_with_nothing_before_the_turn_does_not_apply() -> None:
    events: list[Event] = []
    summarizer = Summarizer()
    outcome = asyncio.run(TieredCompaction([SummaryTier(summarizer)]).run(context(events, keep_from="")))
    assert outcome == CompactionOutcome(None, 0, False) and summarizer.calls == 0
    assert [getattr(e, "reason", None) for e in events if e.kind == "compaction_failed"] == ["nothing_to_summarize"]


def test_the_hook_runner_is_compaction_hooks() -> None:
    hooks: CompactionHooks = HookRunner(session_id="s", cwd=".")  # mypy accepts the assignment (run on this file)
    assert all(callable(getattr(hooks, name)) for name in ("arun_pre_compact", "arun_session_start", "arun_post_compact"))


# -- the context a Session builds ----------------------------------------------------------------

CONFIG = SessionConfig(model="claude-sonnet-4-5", system="You are a coding agent.", context_window=60_000)
POLICY = Policy(
    session_memory_init_tokens=1_000,
    session_memory_min_tokens_between_updates=1_000,
    session_memory_keep_min_tokens=2_000,
    session_memory_keep_min_text_messages=2,
    session_memory_keep_max_tokens=6_000,
)


class Summarizer:
    """Writes a plausible summary, or fails every call."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.calls = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        if self.fail:
            raise ServerError("down", status=500)
        return ModelResponse([{"type": "text", "text": nine_section_summary("the work so far")}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def grow(session: Session, turns: int) -> None:
    for turn in range(turns):
        session.append([Entry.assistant([{"type": "tool_use", "id": f"a{turn}", "name": "Bash", "input": {"command": f"make {turn}"}}], message_id=f"msg_{turn}")])
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"a{turn}", "content": "o" * 1_600}])
        if turn % 3 == 0:
            size = estimate_messages_tokens(session.messages)
            session.record(ModelResponse([{"type": "text", "text": f"Step {turn} done."}], "end_turn", {"input_tokens": size, "output_tokens": 5}, "m"))
            session.add_user(f"Continue with step {turn + 1}.")


def test_the_session_context_is_the_session_as_data(tmp_path: Path) -> None:
    session = Session(CONFIG, store=MemoryStore(), policy=POLICY, allowed_roots=[str(tmp_path)], rehydrate_from="transcript")
    session.add_user("Build it.")
    grow(session, 4)
    built = session.compaction_context()
    assert list(built.entries) == session.entries and list(built.view) == session.view
    assert built.autocompact_threshold == session.thresholds.autocompact and built.tokens == session.status().tokens
    assert built.calibration == session.calibration and built.calibration is not None
    assert built.estimate_request_tokens(session.messages) == session.estimate_request_tokens(session.messages)
    assert built.params == session.cache_safe_params() and built.policy is session.policy
    assert built.allowed_roots == [str(tmp_path)] and built.rehydrate_from == "transcript"
    assert built.rehydrator() is not None and built.facts_ledger is not None
    assert built.boundary_metadata == {"querySource": "repl_main_thread", "autoCompactThreshold": session.thresholds.autocompact, "isRecompactionInChain": False}
    assert built.keep_from == session.view[-1].uuid  # the last user message stays verbatim
    assert built.sent_messages == session.messages  # nothing cleared yet
    session.store.write_memory("# notes")
    assert built.read_notes() == "# notes"  # read when asked, not when built
    with pytest.raises(AttributeError):
        built.tokens = 0  # type: ignore[misc]  # frozen
    asyncio.run(session.compact())
    again = session.compaction_context()
    assert again.boundary_metadata["isRecompactionInChain"] is True and "previousCompactTurnId" in again.boundary_metadata


def test_notes_compaction_reads_only_the_context() -> None:
    """The same compaction from the context a Session builds and from the extension's hook;
    and a context built by hand, with no Session, is enough."""
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    session = Session(CONFIG, store=MemoryStore(), policy=POLICY, extensions=[memory])
    session.add_user("Build it.")
    grow(session, 8)
    asyncio.run(memory.update_now(session))
    from_context = asyncio.run(try_session_memory_compaction(session.compaction_context(), memory))
    from_hook = asyncio.run(memory.compact_from_memory(session))
    assert from_context is not None and from_hook is not None
    assert from_context.summary_text == from_hook.summary_text and from_context.post_tokens == from_hook.post_tokens
    assert from_context.boundary.compact_metadata["notesUpdatedThrough"] == memory.updated_through
    built = session.compaction_context()
    events: list[Event] = []
    by_hand = CompactionContext(
        entries=list(built.entries),
        view=list(built.view),
        policy=built.policy,
        params=built.params,
        autocompact_threshold=built.autocompact_threshold,
        tokens=built.tokens,
        read_notes=lambda: None,
        events=events.append,
    )
    assert asyncio.run(try_session_memory_compaction(by_hand, memory)) is None
    assert [e for e in events if isinstance(e, SessionMemoryCompactionSkipped)] == [SessionMemoryCompactionSkipped("there are no notes yet")]


# -- one breaker for the Session and the LangChain middleware ------------------------------------


def test_the_session_and_the_langchain_middleware_share_the_breaker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both trip at the third failure in a row and hand over to the offline hand-over in that
    same run (the middleware too: in a small window a call left uncompacted overflows)."""
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from unbounded.integrations import UnboundedMiddleware

    runs: list[str] = []
    original = TieredCompaction.run

    async def spy(self: TieredCompaction, context: CompactionContext, *, failures: int = 0) -> CompactionOutcome:
        runs.append("hand over" if self.hand_over_at_once else "next call")
        return await original(self, context, failures=failures)

    monkeypatch.setattr(TieredCompaction, "run", spy)
    breaker_only = Policy(compact_max_summary_requests=100, small_window_reference=0)  # the budget never decides

    session_events: list[Event] = []
    session = Session(CONFIG, store=MemoryStore(), policy=breaker_only, summarizer=Summarizer(fail=True), events=session_events.append)
    session.add_user("hello")
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 10}})
    session.add_user("and now?")
    session_failures = []
    for _ in range(CIRCUIT_BREAKER_FAILURES):
        compacted = asyncio.run(session.auto_compact())
        session_failures.append(session.status().consecutive_failures)
    assert session_failures == [1, 2, 0]  # the third trips; the extractive one compacts at once
    assert compacted is not None and compacted.summarizer == "extractive" and compacted.fallback == "breaker_open"

    middleware_events: list[Event] = []
    middleware = UnboundedMiddleware(
        "claude-sonnet-4-6", context_window=40_000, policy=breaker_only, summarizer=Summarizer(fail=True), summary_retries=0, events=middleware_events.append
    )
    messages: list[Any] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(12):
        messages.append(AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}"))
        messages.append(ToolMessage(content="x = compute(value)\n" * 450, tool_call_id=f"call_{n}", id=f"tool_{n}"))
    state: dict[str, Any] = {"messages": messages}
    middleware_failures = []
    for _ in range(CIRCUIT_BREAKER_FAILURES):
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        assert update is not None
        state["unbounded"] = update["unbounded"]
        middleware_failures.append(update["unbounded"]["failures"])
    assert middleware_failures == [1, 2, 0]  # the third trips and the offline hand-over lands
    assert update is not None and "messages" in update
    assert update["unbounded"]["last_summary"]["fallback"] == "breaker_open"

    assert tripped(session_events) == tripped(middleware_events) == [CIRCUIT_BREAKER_FAILURES]
    assert runs == ["hand over"] * (2 * CIRCUIT_BREAKER_FAILURES)


class DeclaredOnline(OfflineNotesUpdater):
    """The offline notes, declared as a model's: a failure of it would be a model's."""

    name = "declared-online"
    offline = False


@pytest.mark.parametrize(("updater", "fallback"), [(OfflineNotesUpdater(), "asked_for"), (DeclaredOnline(), None)])
def test_the_notes_updater_given_says_by_its_offline_flag_whether_the_offline_notes_were_asked_for(updater: OfflineNotesUpdater, fallback: str | None) -> None:
    events: list[Event] = []
    memory = SessionMemory(updater, background=False)
    session = Session(CONFIG, store=MemoryStore(), policy=POLICY, extensions=[memory], events=events.append)
    session.add_user("Build it.")
    grow(session, 8)
    asyncio.run(memory.update_now(session))
    updates = [e for e in events if isinstance(e, SessionMemoryUpdated)]
    assert [(u.updater, u.fallback) for u in updates] == [(updater.name, fallback)]
