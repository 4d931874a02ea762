"""`SyncSession`: a `Session` with blocking methods, for code that is not async.

Each async step runs to completion on one event loop kept for the session's life
(`unbounded.blocking.BlockingRunner`); every public method of `Session` has its twin here
(tests/test_session.py checks that none is missing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from unbounded.blocking import SYNC_SESSION, BlockingDriver, BlockingHold, BlockingRunner
from unbounded.caching.ttl import CacheTtl
from unbounded.catalog import ModelInfo
from unbounded.compaction.auto import TierEntry
from unbounded.compaction.background import BackgroundSummary
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CacheSafeParams, CompactionResult
from unbounded.compaction.prompts import PartialDirection
from unbounded.configuration import SessionConfig
from unbounded.events import EventSink
from unbounded.model.content import ContentBlock, MessageParam
from unbounded.model.entries import Entry
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy, Thresholds
from unbounded.providers.base import ModelResponse, Provider
from unbounded.session import Session
from unbounded.session_options import SessionOptions, chosen_policy
from unbounded.session_state import SessionStatus

T = TypeVar("T")


def refuse_background_summary(
    policy: Policy,
    entry_point: str = SYNC_SESSION.entry_point,
    instead: str = SYNC_SESSION.instead,
) -> None:
    """ConfigError for `Policy.background_summary` at a blocking entry point
    (`BlockingDriver.refuse_background_summary`): `entry_point` names the caller; `instead`
    is its async twin."""
    BlockingDriver(entry_point, instead).refuse_background_summary(policy)


def blocking_options(keywords: Mapping[str, Any]) -> SessionOptions:
    """The `SessionOptions` that `Session` keywords (`options=` among them) make, their policy
    resolved (a policy file read, else `Policy.from_env`) and checked by
    `refuse_background_summary` before any folder is opened."""
    fields = dict(keywords)
    resolved = SessionOptions.of(fields.pop("options", None), fields)
    policy = chosen_policy(resolved)
    refuse_background_summary(policy)
    # The session runs the policy checked here, not a second read of the environment.
    return dataclasses.replace(resolved, policy=policy)


class SyncSession:
    """`Session` with blocking methods: each async step runs to completion on one event loop
    kept for the session's life (`unbounded.blocking.BlockingRunner`: a loop per call costs
    more than a turn, and would strand what an extension started on the previous one).
    Inside a running event loop the kept loop runs on a worker thread (the blocking rule)."""

    def __init__(self, session: Session) -> None:
        session.drive_blocking(SYNC_SESSION)  # background_summary refused, now and later
        self.session = session
        self._runner = BlockingRunner()

    @classmethod
    def open(cls, folder: str | Path, config: SessionConfig, **options: Any) -> SyncSession:
        """A folder-backed session (`Session.open`)."""
        checked = blocking_options(options)  # refused before the folder is locked
        return cls(Session.open(folder, config, options=checked))

    @classmethod
    def from_transcript(
        cls, path: str | Path, folder: str | Path, config: SessionConfig | None = None,
        **options: Any,
    ) -> SyncSession:
        """A new session continuing a transcript (`Session.from_transcript`)."""
        checked = blocking_options(options)  # refused before the folder is written
        return cls(Session.from_transcript(path, folder, config, options=checked))

    # -- configuration and state (no waiting: passed through)
    @property
    def config(self) -> SessionConfig:
        """`Session.config`."""
        return self.session.config

    @property
    def model_info(self) -> ModelInfo:
        """`Session.model_info`."""
        return self.session.model_info

    @property
    def policy(self) -> Policy:
        """`Session.policy`."""
        return self.session.policy

    @property
    def thresholds(self) -> Thresholds:
        """`Session.thresholds`."""
        return self.session.thresholds

    def reconfigure(
        self,
        config: SessionConfig | None = None,
        *,
        policy: Policy | None = None,
        summarizer: Provider | None = None,
    ) -> None:
        """`Session.reconfigure` (`Policy.background_summary` refused, as at construction)."""
        self.session.reconfigure(config, policy=policy, summarizer=summarizer)

    def drive_blocking(self, driver: BlockingDriver) -> BlockingHold:
        """`Session.drive_blocking` (a SyncSession drives its session already)."""
        return self.session.drive_blocking(driver)

    def release_blocking(self, hold: BlockingHold) -> None:
        """`Session.release_blocking`."""
        self.session.release_blocking(hold)

    @property
    def closed(self) -> bool:
        """True after `close()`."""
        return self.session.closed

    @property
    def messages(self) -> list[MessageParam]:
        """`Session.messages`."""
        return self.session.messages

    @property
    def offers_recall(self) -> bool:
        """`Session.offers_recall`."""
        return self.session.offers_recall

    def status(self) -> SessionStatus:
        """Where the context stands."""
        return self.session.status()

    def estimate_request_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """`Session.estimate_request_tokens`."""
        return self.session.estimate_request_tokens(messages)

    def cache_safe_params(self) -> CacheSafeParams:
        """`Session.cache_safe_params`."""
        return self.session.cache_safe_params()

    def cache_ttls(self) -> tuple[CacheTtl, CacheTtl]:
        """`Session.cache_ttls`."""
        return self.session.cache_ttls()

    def offered_tools(self) -> list[dict[str, Any]]:
        """`Session.offered_tools`."""
        return self.session.offered_tools()

    def model_provider(self) -> Provider | None:
        """`Session.model_provider`."""
        return self.session.model_provider()

    def bind_call_provider(self, provider: Provider) -> None:
        """`Session.bind_call_provider`."""
        self.session.bind_call_provider(provider)

    def call_provider(self) -> Provider | None:
        """`Session.call_provider`."""
        return self.session.call_provider()

    def extension_state(self, name: str) -> dict[str, Any]:
        """`Session.extension_state`."""
        return self.session.extension_state(name)

    def compaction_tiers(self) -> tuple[TierEntry, ...]:
        """`Session.compaction_tiers`."""
        return self.session.compaction_tiers()

    def default_compaction_tiers(self) -> tuple[TierEntry, ...]:
        """`Session.default_compaction_tiers`."""
        return self.session.default_compaction_tiers()

    def compaction_context(self) -> CompactionContext:
        """`Session.compaction_context`."""
        return self.session.compaction_context()

    def events_sink(self) -> EventSink | None:
        """`Session.events_sink`."""
        return self.session.events_sink()

    def pending_tool_use_ids(self) -> list[str]:
        """`Session.pending_tool_use_ids`."""
        return self.session.pending_tool_use_ids()

    # -- input and output
    def append(self, entries: Sequence[Entry]) -> None:
        """`Session.append`."""
        self.session.append(entries)

    def add_user(
        self, content: str | Sequence[ContentBlock] | Sequence[dict[str, Any]], **flags: Any
    ) -> Entry:
        """Add a user message."""
        return self.session.add_user(content, **flags)

    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> Entry:
        """Add tool results."""
        return self.session.add_tool_results(results)

    def interrupt(self, *, for_tool_use: bool | None = None) -> Entry:
        """Record a user interrupt (pending tool calls answered)."""
        return self.session.interrupt(for_tool_use=for_tool_use)

    def discard_last_reply(self) -> list[Entry]:
        """`Session.discard_last_reply`."""
        return self.session.discard_last_reply()

    def record(
        self, response: ModelResponse | Mapping[str, Any], *, extra: Mapping[str, Any] | None = None
    ) -> Entry:
        """Record the model's answer."""
        return self.session.record(response, extra=extra)

    def run_recall(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a `recall` call (`Session.run_recall`)."""
        return self.session.run_recall(tool_use)

    def answers_tool(self, name: str) -> bool:
        """`Session.answers_tool`."""
        return self.session.answers_tool(name)

    def answer_tool(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a call the session answers itself (`Session.answer_tool`)."""
        return self._runner.run(self.session.answer_tool(tool_use))

    def write_notes(self, text: str) -> None:
        """`Session.write_notes`."""
        self.session.write_notes(text)

    def answer_pending_calls(self, reason: str, *, except_ids: set[str] | None = None) -> None:
        """`Session.answer_pending_calls`."""
        self.session.answer_pending_calls(reason, except_ids=except_ids)

    def save_state(self) -> None:
        """`Session.save_state`."""
        self.session.save_state()

    # -- what waits (on the kept loop)
    def prepare(self) -> ProviderRequest:
        """Run the pipeline and return the request."""
        return self._runner.run(self.session.prepare())

    def call(self, provider: Provider, *, stream: bool = False) -> ModelResponse:
        """Prepare, send, record (see `Session.call`)."""
        return self._runner.run(self.session.call(provider, stream=stream))

    def compact(
        self,
        *,
        instructions: str | None = None,
        pivot: str | None = None,
        direction: PartialDirection | None = None,
    ) -> CompactionResult:
        """Manual compaction (`Session.compact`)."""
        return self._runner.run(
            self.session.compact(instructions=instructions, pivot=pivot, direction=direction)
        )

    def auto_compact(self) -> CompactionResult | None:
        """`Session.auto_compact`."""
        return self._runner.run(self.session.auto_compact())

    def idle(self) -> CompactionResult | None:
        """`Session.idle`: compact an idle session when that costs less than the resume."""
        return self._runner.run(self.session.idle())

    def idle_deadline(self) -> datetime | None:
        """`Session.idle_deadline`."""
        return self.session.idle_deadline()

    @property
    def background(self) -> BackgroundSummary:
        """`Session.background`."""
        return self.session.background

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run another coroutine on this session's loop (an extension's, a provider's)."""
        return self._runner.run(awaitable)

    def close(self) -> None:
        """Release the store and the kept event loop."""
        try:
            self.session.close()
        finally:
            self._runner.close()

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SyncSession", "refuse_background_summary"]
