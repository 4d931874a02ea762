"""The library logs through `logging`, under the `unbounded` logger tree, quiet by default:
compactions at info, failures and fallbacks at warning, the breaker tripping at warning, cache
breaks at info; it never prints."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from summaries import nine_section_summary

from test_caching_break_detector import Session as DetectorSession
from test_caching_break_detector import build, warm
from test_compaction_auto import CONFIG as NOTES_CONFIG
from test_compaction_auto import POLICY as NOTES_POLICY
from test_compaction_auto import grow
from unbounded.compaction.memory_updaters import OfflineNotesUpdater, UpdateJob, UpdateOutcome
from unbounded.errors import ServerError
from unbounded.events import CacheBreak
from unbounded.extensions import SessionMemory
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.providers.retry import RetryingProvider
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

CONFIG = SessionConfig(model="claude-sonnet-4-5", system="You are a coding agent.", context_window=60_000)


class Model:
    """Writes a nine-section summary, or fails with a server error."""

    name = "model"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        if self.fail:
            raise ServerError("down", status=500)
        return ModelResponse([{"type": "text", "text": nine_section_summary("the work so far")}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def worked(session: Session, turns: int = 6) -> Session:
    """The session after a few tool-using turns (something to summarize)."""
    session.add_user("Build it.")
    for turn in range(turns):
        session.append([Entry.assistant([{"type": "tool_use", "id": f"a{turn}", "name": "Bash", "input": {"command": f"make {turn}"}}], message_id=f"msg_{turn}")])
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"a{turn}", "content": "o" * 1_600}])
    session.record(ModelResponse([{"type": "text", "text": "Done."}], "end_turn", {"input_tokens": 4_000, "output_tokens": 5}, "m"))
    session.add_user("Go on.")
    return session


def logged(caplog: pytest.LogCaptureFixture, logger: str, level: int) -> list[str]:
    """The messages `logger` logged at exactly `level`."""
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


def test_the_package_logger_is_quiet_by_default() -> None:
    root = logging.getLogger("unbounded")
    assert any(isinstance(handler, logging.NullHandler) for handler in root.handlers)


def test_a_compaction_is_logged_at_info_and_never_printed(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    session = worked(Session(CONFIG, store=MemoryStore(), summarizer=Model()))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        result = asyncio.run(session.compact())
    infos = logged(caplog, "unbounded.compaction.conversation", logging.INFO)
    assert infos == [f"manual compaction: {result.pre_tokens} -> {result.post_tokens} tokens, summary by model"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # the model wrote it
    assert all(r.name.startswith("unbounded.") for r in caplog.records)
    assert capsys.readouterr() == ("", "")


def test_a_summary_by_a_fallback_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    session = worked(Session(CONFIG, store=MemoryStore(), summarizer=ExtractiveSummarizer()))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        asyncio.run(session.compact())
    warnings = logged(caplog, "unbounded.compaction.conversation", logging.WARNING)
    assert warnings == ["the manual summary was written by a fallback (asked_for)"]


def test_failed_summaries_and_the_breaker_tripping_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    policy = Policy(compact_max_summary_requests=100)
    session = worked(Session(CONFIG, store=MemoryStore(), policy=policy, summarizer=Model(fail=True)))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        for _ in range(3):
            asyncio.run(session.auto_compact())
    failed = logged(caplog, "unbounded.compaction.conversation", logging.WARNING)
    assert failed == ["auto compaction failed (ServerError): down"] * 3 + ["the auto summary was written by a fallback (breaker_open)"]
    tripped = logged(caplog, "unbounded.compaction.auto", logging.WARNING)
    assert tripped == ["circuit breaker tripped after 3 failed summaries (down): the offline hand-over writes them now"]


def test_a_cache_break_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    detector = DetectorSession()
    time = warm(detector)
    with caplog.at_level(logging.INFO, logger="unbounded"):
        event = detector.call(time, build(5, model="claude-opus-4-6"))
    assert isinstance(event, CacheBreak)
    infos = logged(caplog, "unbounded.caching.break_detector", logging.INFO)
    assert infos == [f"prompt cache break (repl_main_thread): {event.previous_read} -> {event.current_read} tokens read, {event.reason}"]


class RefusingUpdater:
    """A notes updater whose every update fails."""

    name = "refusing"
    offline = False

    async def update(self, job: UpdateJob) -> UpdateOutcome:
        raise ServerError("notes down", status=500)


def test_a_failed_notes_update_and_the_offline_takeover_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    memory = SessionMemory(RefusingUpdater(), background=False)
    session = worked(Session(CONFIG, store=MemoryStore(), extensions=[memory]))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        assert asyncio.run(memory.update_now(session)) is None
    logger = "unbounded.extensions.session_memory"
    assert logged(caplog, logger, logging.WARNING) == ["session notes update by refusing failed: notes down"]

    caplog.clear()
    by_model = SessionMemory(background=False)
    session = worked(Session(CONFIG, store=MemoryStore(), summarizer=Model(fail=True), extensions=[by_model]))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        assert asyncio.run(by_model.update_now(session)) is not None  # the offline notes
    assert logged(caplog, logger, logging.WARNING) == [
        "session notes update by model failed: down",
        "the model's notes update failed: the offline updater writes them",
    ]


def test_a_retried_call_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky:
        name = "flaky"
        supports_cache_edits = False
        profile = MODEL_PROFILE

        def __init__(self) -> None:
            self.calls = 0

        async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
            self.calls += 1
            if self.calls == 1:
                raise ServerError("blip", status=500)
            return ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")

    async def no_wait(delay: float) -> None:
        return None

    provider = RetryingProvider(Flaky(), base_delay=1.0, max_delay=1.0, jitter=0.0, sleep=no_wait)
    with caplog.at_level(logging.INFO, logger="unbounded"):
        asyncio.run(provider.create({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
    assert logged(caplog, "unbounded.providers.retry", logging.WARNING) == ["flaky call failed (ServerError), retry 1 in 1.0 s"]


def test_a_compaction_from_the_notes_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    session = Session(NOTES_CONFIG, store=MemoryStore(), policy=NOTES_POLICY, extensions=[memory])
    session.add_user("Build it.")
    grow(session, 8)
    asyncio.run(memory.update_now(session))
    with caplog.at_level(logging.INFO, logger="unbounded"):
        result = asyncio.run(memory.compact_from_memory(session))
    assert result is not None
    infos = logged(caplog, "unbounded.compaction.memory_compact", logging.INFO)
    assert infos == [f"auto compaction: {result.pre_tokens} -> {result.post_tokens} tokens, summary from the session notes"]
