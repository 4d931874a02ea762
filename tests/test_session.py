"""The Session pipeline: auto-compaction, breaker, reactive compaction, resume, storage."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.conversation import SummaryAuthor
from unbounded.errors import CompactionError, ConfigError, SessionLockedError
from unbounded.events import Event
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, PromptTooLongError, ServerError
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore, MemoryStore
from unbounded.sync_session import SyncSession
from unbounded.tokens.estimate import estimate_messages_tokens

SUMMARY = nine_section_summary("build it", analysis=False)
CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=60_000,
    validate_requests=True,
)


class Summarizer:
    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.calls = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return ModelResponse([{"type": "text", "text": item}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def answer(turn: int, request: ProviderRequest) -> ModelResponse:
    size = estimate_messages_tokens(request["messages"]) + 2_000
    return ModelResponse(
        [{"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {"command": f"make step{turn}"}}],
        "tool_use",
        {"input_tokens": 50, "cache_read_input_tokens": size - 50, "output_tokens": 40},
        "claude-sonnet-4-5",
        id=f"msg_{turn}",
    )


async def drive(session: Session, turns: int, start: int = 0) -> None:
    for turn in range(start, start + turns):
        request = await session.prepare()
        validate_request(request["messages"])
        session.record(answer(turn, request))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "line\n" * 1200}])


def test_auto_compaction_with_the_extractive_default(tmp_path: Path) -> None:
    events: list[Event] = []
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(), events=events.append)
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 40))
    assert session.status().compactions >= 2
    assert session.status().tokens < session.thresholds.autocompact
    boundaries = [e for e in session.entries if e.is_compact_boundary]
    metadata = boundaries[-1].compact_metadata
    assert metadata["trigger"] == "auto" and metadata["isRecompactionInChain"] is True
    assert metadata["querySource"] == "repl_main_thread" and metadata["turnsSincePreviousCompact"] > 0
    assert any(e.kind == "compaction_finished" for e in events)


def test_resume_gives_the_same_view_and_state(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    session = Session.open(folder, CONFIG, policy=Policy())
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 30))
    before = (normalize_messages(session.view), session.status(), session.micro.to_dict(), session.ttl_latch)
    assert isinstance(session.store, FolderStore)
    session.store.close()
    again = Session.open(folder, CONFIG, policy=Policy())
    assert normalize_messages(again.view) == before[0]
    assert again.status() == before[1]
    assert again.micro.to_dict() == before[2] and again.ttl_latch == before[3]
    asyncio.run(drive(again, 2, start=30))


def test_a_session_stopped_before_its_first_reply_reopens(tmp_path: Path) -> None:
    """Its state was saved with no calibration yet (null): reopening it must not fail."""
    folder = tmp_path / "s"
    session = Session.open(folder, CONFIG, policy=Policy())
    session.add_user("Please build the thing.")
    asyncio.run(session.prepare())  # the state is saved; no usage has arrived
    assert session.calibration is None
    assert isinstance(session.store, FolderStore)
    session.store.close()  # the process stops here, before the reply
    again = Session.open(folder, CONFIG, policy=Policy())
    assert again.calibration is None
    request = asyncio.run(again.prepare())
    validate_request(request["messages"])
    again.record(answer(0, request))
    assert again.calibration is not None and again.calibration > 0
    again.store.close()
    # A state document edited by hand says what is wrong with it and how to recover.
    state = FolderStore(folder)
    data = state.load_state("session") or {}
    state.save_state("session", {**data, "calibration": "fast"})
    state.close()
    with pytest.raises(ConfigError, match=r"calibration of 'fast'.*delete that state document"):
        Session.open(folder, CONFIG, policy=Policy())


def test_replies_that_share_one_id_stay_separate_turns() -> None:
    """A mock or proxy that gives every reply the same id: each whole reply is its own turn,
    not more lines of the previous one (as a transcript's repeated id would mean)."""
    session = Session(CONFIG, policy=Policy())
    session.add_user("Read both files.")
    for n in range(3):
        asyncio.run(session.prepare())
        session.record(
            {
                "id": "msg_same",
                "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"n": n}}],
                "usage": {"input_tokens": 100, "output_tokens": 10},
                "stop_reason": "tool_use",
            }
        )
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"file {n}"}])
    request = asyncio.run(session.prepare())
    validate_request(request["messages"])
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    replies = [e for e in session.entries if e.type == "assistant"]
    # Only a reply that would be merged into the one before it gets an id of its own.
    assert [e.message_id == "msg_same" for e in replies] == [True, False, True]
    assert [e.data.get("responseId") for e in replies] == [None, "msg_same", None]


UNBOUNDED_REQUESTS = Policy(compact_max_summary_requests=100)
"""A policy whose summary-request budget never runs out first: the breaker alone decides."""


def test_breaker_hands_over_to_extractive(tmp_path: Path) -> None:
    summarizer = Summarizer([ServerError("down", status=500)])
    events: list[Event] = []
    session = Session.open(tmp_path / "s", CONFIG, policy=UNBOUNDED_REQUESTS, summarizer=summarizer, events=events.append)
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 40))
    kinds = [e.kind for e in events]
    assert kinds.count("compaction_failed") >= 3
    assert "circuit_breaker_tripped" in kinds
    # The extractive summarizer took over at once (the run may later reach the threshold again).
    assert kinds[kinds.index("circuit_breaker_tripped") + 1 :][:2] == ["compaction_started", "compaction_finished"]
    assert session.status().compactions >= 1


def test_a_failed_compaction_leaves_history_untouched(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(), summarizer=Summarizer([ServerError("x")]))
    session.add_user("hello")
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 10}})
    session.add_user("and now?")  # something before this turn's message to summarize
    before = len(session.entries)
    assert asyncio.run(session.auto_compact()) is None
    assert len(session.entries) == before and session.status().consecutive_failures == 1


def test_breaker_trips_at_exactly_the_third_consecutive_failure(tmp_path: Path) -> None:
    """Two failed summary calls leave the next compaction to the summarizer; the third trips
    the breaker and the extractive summarizer compacts in that same call."""
    summarizer = Summarizer([ServerError("down", status=500)])
    events: list[Event] = []
    session = Session.open(tmp_path / "s", CONFIG, policy=UNBOUNDED_REQUESTS, summarizer=summarizer, events=events.append)
    session.add_user("hello")
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 10}})
    session.add_user("and now?")
    for failures in (1, 2):
        calls = summarizer.calls
        assert asyncio.run(session.auto_compact()) is None
        assert summarizer.calls > calls  # the summarizer was asked, not the extractive one
        assert session.status().consecutive_failures == failures
        assert not [e for e in events if e.kind == "circuit_breaker_tripped"]
    result = asyncio.run(session.auto_compact())
    tripped = [e for e in events if e.kind == "circuit_breaker_tripped"]
    assert len(tripped) == 1 and getattr(tripped[0], "failures", None) == 3
    assert result is not None and result.summarizer == "extractive"
    assert session.status().consecutive_failures == 0
    assert session.status().last_summary == SummaryAuthor("extractive", "breaker_open", 6)


def test_three_recorded_failures_skip_the_summarizer(tmp_path: Path) -> None:
    """With three failures on record (the extractive fallback failed too, or a resumed session),
    the next compaction goes straight to the extractive summarizer; with two it does not."""
    for recorded, asked in ((2, True), (3, False)):
        summarizer = Summarizer([SUMMARY])
        session = Session.open(tmp_path / f"s{recorded}", CONFIG, policy=Policy(), summarizer=summarizer)
        session.add_user("hello")
        session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 10}})
        session.add_user("and now?")
        session.tracking.consecutive_failures = recorded
        result = asyncio.run(session.auto_compact())
        assert result is not None and (summarizer.calls > 0) is asked
        assert result.summarizer == ("scripted" if asked else "extractive")


def _session_at(folder: Path, tokens: int) -> Session:
    """A session whose counted context is exactly `tokens` when the next request is prepared,
    with a first turn to summarize."""
    probe = Session.open(folder / "probe", CONFIG, policy=Policy())
    probe.add_user("hello")
    probe.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 1_000}})
    probe.add_user("and now?")
    estimated = probe.status().tokens - 1_000  # the new user message, not yet anchored
    session = Session.open(folder / "session", CONFIG, policy=Policy())
    session.add_user("hello")
    session.record({"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": tokens - estimated}})
    session.add_user("and now?")
    assert session.status().tokens == tokens
    return session


def test_auto_compaction_fires_at_exactly_the_threshold(tmp_path: Path) -> None:
    """At the threshold the session compacts before the request; one token under, it does not."""
    threshold = Session.open(tmp_path / "t", CONFIG, policy=Policy()).thresholds.autocompact
    below = _session_at(tmp_path / "below", threshold - 1)
    asyncio.run(below.prepare())
    assert below.status().compactions == 0
    at = _session_at(tmp_path / "at", threshold)
    asyncio.run(at.prepare())
    assert at.status().compactions == 1


class PtlOnce:
    name = "main"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise PromptTooLongError("prompt is too long: 70000 tokens > 60000 maximum", actual_tokens=70_000, limit_tokens=60_000)
        if is_summary_request(request):
            return ModelResponse([{"type": "text", "text": SUMMARY}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")
        return answer(99, request)


def is_summary_request(request: ProviderRequest) -> bool:
    """The request asks for a compaction summary (the prompt closes the messages)."""
    last = request["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(str(b.get("text", "")) for b in last)
    return "<summary>" in text


def test_reactive_compaction_on_prompt_too_long(tmp_path: Path) -> None:
    """The provider given to call() writes the summary of the reactive compaction too."""
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy())
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 3))
    provider = PtlOnce()
    response = asyncio.run(session.call(provider))
    assert provider.calls == 3 and response.id == "msg_99"  # refused, summary, retried
    assert session.status().compactions == 1
    assert session.status().last_summary == SummaryAuthor("main", None, 1)


def test_prompt_too_long_twice_raises(tmp_path: Path) -> None:
    class AlwaysTooLong(PtlOnce):
        async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
            raise PromptTooLongError("prompt is too long")

    session = Session.open(tmp_path / "s", CONFIG, policy=Policy())
    session.add_user("hi")
    with pytest.raises(PromptTooLongError):
        asyncio.run(session.call(AlwaysTooLong()))


def test_manual_partial_compaction(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(auto_compact_enabled=False), summarizer=Summarizer([SUMMARY]))
    first = session.add_user("first request")
    asyncio.run(drive(session, 2))
    pivot = session.add_user("second request")
    asyncio.run(drive(session, 2, start=2))
    result = asyncio.run(session.compact(pivot=pivot.uuid, direction="up_to", instructions="keep it short"))
    assert result.messages_to_keep[0] is pivot
    messages = normalize_messages(session.view)
    validate_request(messages)
    assert "second request" in str(messages[0]["content"])
    # the first request survives only inside the summary (its facts ledger), not as a message
    texts = [b.get("text") for m in messages for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert "first request" not in texts and all(m["content"] != "first request" for m in messages)
    assert first.uuid != pivot.uuid


def test_disabled_auto_compaction_never_compacts(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(auto_compact_enabled=False))
    session.add_user("x")
    asyncio.run(drive(session, 30))
    assert session.status().compactions == 0 and session.status().level in ("autocompact", "blocking", "error")


def test_guarded_query_source_never_auto_compacts(tmp_path: Path) -> None:
    config = SessionConfig(model="claude-sonnet-4-5", context_window=60_000, query_source="session_memory")
    session = Session.open(tmp_path / "s", config, policy=Policy())
    session.add_user("x")
    asyncio.run(drive(session, 30))
    assert session.status().compactions == 0


def test_prepared_request_layout(tmp_path: Path) -> None:
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy())
    session.add_user("hello")
    request = asyncio.run(session.prepare())
    assert request["model"] == "claude-sonnet-4-5" and request["system"]
    assert request["tools"][-1].get("cache_control") and request["messages"][-1]["content"][-1].get("cache_control")


def test_storage_is_private_and_locked(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    session = Session.open(folder, CONFIG, policy=Policy())
    session.add_user("hello")
    asyncio.run(session.prepare())
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    for path in [folder / "transcript.jsonl", *sorted((folder / "state").iterdir())]:
        assert oct(path.stat().st_mode & 0o777) == "0o600", path
    with pytest.raises(SessionLockedError):
        FolderStore(folder)
    assert FolderStore(folder, lock=False).load().entries


def test_sync_facade(tmp_path: Path) -> None:
    session = SyncSession.open(tmp_path / "s", CONFIG, policy=Policy(), summarizer=Summarizer([SUMMARY]))
    session.add_user("hello")
    request = session.prepare()
    session.record(answer(0, request))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}])
    result = session.compact()
    assert result.summary_text.startswith("Summary:") and session.status().compactions == 1


def test_from_transcript(tmp_path: Path, session_2_1: Path) -> None:
    session = Session.from_transcript(session_2_1, tmp_path / "s", policy=Policy())
    assert session.config.model == "claude-sonnet-4-5-20250929"
    session.add_user("continue")
    request = asyncio.run(session.prepare())
    validate_request(request["messages"])
    assert isinstance(session.store, FolderStore)
    session.store.close()
    with pytest.raises(ConfigError, match="already holds"):
        Session.from_transcript(session_2_1, tmp_path / "s", policy=Policy())


def test_compaction_error_is_an_unbounded_error() -> None:
    from unbounded.errors import UnboundedError

    assert issubclass(CompactionError, UnboundedError)


class CountingStore(MemoryStore):
    """A memory store that counts the saves of each state document."""

    def __init__(self) -> None:
        super().__init__()
        self.saves: dict[str, int] = {}

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        self.saves[name] = self.saves.get(name, 0) + 1
        super().save_state(name, data)


def test_the_cleared_ids_are_saved_apart_and_only_when_they_change() -> None:
    """A turn's save does not carry the cleared ids (they grow with the history): their own
    document is written when ids are added, and a resumed session has them all."""
    store = CountingStore()
    session = Session(CONFIG, policy=Policy(auto_compact_enabled=False), store=store)
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 30))
    assert session.micro.cleared, "the drive clears results"
    assert "cleared" not in (store.load_state("session") or {})["microcompact"]
    assert store.load_state("session_cleared") == {"version": 1, "cleared": session.micro.cleared_pairs()}
    changes = store.saves["session_cleared"]
    cleared = dict(session.micro.cleared)
    saves = store.saves["session"]
    for turn in range(30, 32):  # tool results of 6 tokens: nothing more to clear
        request = asyncio.run(session.prepare())
        session.record(answer(turn, request))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "ok"}])
    assert session.micro.cleared == cleared and store.saves["session"] > saves
    assert store.saves["session_cleared"] == changes
    again = Session(CONFIG, policy=Policy(auto_compact_enabled=False), store=store)
    assert again.micro.to_dict() == session.micro.to_dict()


def test_a_state_saved_with_the_cleared_ids_inside_still_loads() -> None:
    """Sessions saved before the cleared ids had their own document keep them on resume."""
    store = MemoryStore()
    session = Session(CONFIG, policy=Policy(auto_compact_enabled=False), store=store)
    session.add_user("Please build the thing.")
    asyncio.run(drive(session, 30))
    assert session.micro.cleared
    data = store.load_state("session") or {}
    store.save_state("session", {**data, "microcompact": session.micro.to_dict()})
    del store.states["session_cleared"]
    again = Session(CONFIG, policy=Policy(auto_compact_enabled=False), store=store)
    assert again.micro.cleared == session.micro.cleared
    store.save_state("session_cleared", {"version": 2, "cleared": []})
    with pytest.raises(ConfigError, match=r"session_cleared.*version 2.*delete that state document"):
        Session(CONFIG, policy=Policy(auto_compact_enabled=False), store=store)
