"""Session memory: notes kept up to date while a session runs (seed 004 "Tier 3").

A compaction normally pays for a summary call. Session memory pays for it in small pieces
while the conversation runs: a markdown notes file of ten sections (`notes.SECTIONS`) is
updated in the background, and when the context reaches the auto-compact threshold the notes
*are* the summary (`unbounded.compaction.memory_compact`), so that compaction makes no model
call.

The parts, one module each:

- `compaction.notes`: the notes format (sections, parsing, size caps).
- `compaction.memory_trigger`: when to update (`should_update`), from what the notes do not
  cover yet (`progress_since`, kept up to date per turn by a `ProgressTracker`).
- `compaction.memory_updaters`: how (`ModelNotesUpdater`: a forked cache-sharing call that may
  only edit the notes; `OfflineNotesUpdater`: no model, `compaction.offline_notes`). Without
  an updater of its own, `SessionMemory` asks the session's model (`Session.model_provider()`)
  and the offline updater when there is none, or in place of a model update that failed.
- this module: `SessionMemory`, which ties them to a `Session`.

Where. `<session folder>/session-memory/summary.md` (`SessionStore.read_memory` /
`write_memory`); a `MemoryStore` keeps it in memory. The pointer to the last message the
notes cover ("updated through") and the update counters are saved as the `session_memory`
state document, so a resumed session knows what the notes cover.

`SessionMemory` is the session extension that ties them to a `Session`
(`Session(..., extensions=[SessionMemory(...)])`): an update starts in the background (an
asyncio task) from `prepare()` and after a response without tool calls when the trigger
holds; compaction waits for an update in flight up to `session_memory_wait_seconds` (15 s)
and then uses the notes as they are; an update is abandoned after
`session_memory_update_timeout_seconds` (60 s). With `SyncSession` (each call runs its own
event loop, which would cancel a background task) use `SessionMemory(background=False)`:
updates then run inside `prepare()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from unbounded.compaction.conversation import CompactionResult
from unbounded.compaction.memory_compact import try_session_memory_compaction
from unbounded.compaction.memory_trigger import (
    ProgressTracker,
    UpdateProgress,
    should_update,
    tool_use_count,
)
from unbounded.compaction.memory_updaters import (
    ModelNotesUpdater,
    NotesUpdater,
    OfflineNotesUpdater,
    UpdateJob,
    UpdateOutcome,
)
from unbounded.compaction.micro import clear_tool_results
from unbounded.compaction.notes import QUERY_SOURCE, notes_are_empty, session_memory_template
from unbounded.errors import ConfigError, ProviderError
from unbounded.events import SessionMemoryUpdated, SessionMemoryUpdateFailed, emit
from unbounded.extension import Extension, ExtensionHost
from unbounded.model.entries import Entry
from unbounded.policy import GUARDED_QUERY_SOURCES
from unbounded.tokens.estimate import rough_token_count

logger = logging.getLogger(__name__)
STATE_NAME = "session_memory"
"""Name of the state document holding the pointer and counters."""
VIRTUAL_NOTES_PATH = "session-memory/summary.md"
"""The path the notes go by when the store keeps them in memory only."""


@dataclass(slots=True)
class _MemoryState:
    """Persisted: the covered message and counters."""

    updated_through: str | None = None
    updates: int = 0
    failures: int = 0
    last_writer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "updated_through": self.updated_through,
            "updates": self.updates,
            "failures": self.failures,
            "last_writer": self.last_writer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _MemoryState:
        state = cls()
        through = data.get("updated_through")
        state.updated_through = through if isinstance(through, str) else None
        for key in ("updates", "failures"):
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(state, key, value)
        writer = data.get("last_writer")
        state.last_writer = writer if isinstance(writer, str) else None
        return state


class SessionMemory(Extension):
    """A session's notes, as a session extension: background updates (`before_prepare`,
    `after_record`), the notes as the first compaction tier (`compact_from_memory`), the
    pointer's post-compact cleanup (`after_compact`)."""

    def __init__(
        self,
        updater: NotesUpdater | None = None,
        *,
        background: bool = True,
        rehydrate: bool = True,
    ) -> None:
        if updater is not None and not callable(getattr(updater, "update", None)):
            raise ConfigError("SessionMemory updater must have an async update(job) method")
        self.updater: NotesUpdater | None = updater
        """The updater chosen; None: the session's model writes the notes
        (`Session.model_provider()`), the offline updater when there is none or it failed."""
        self.background = background
        self.rehydrate = rehydrate
        self.state = _MemoryState()
        self._task: asyncio.Task[UpdateOutcome | None] | None = None
        self._session: ExtensionHost | None = None
        self._tracker = ProgressTracker()

    # -- hooks ----------------------------------------------------------------------------
    def attached(self, session: ExtensionHost) -> None:
        """Load the saved pointer (a SessionMemory belongs to one session)."""
        if self._session is not None and self._session is not session:
            raise ConfigError("a SessionMemory belongs to one session; create one per session")
        self._session = session
        saved = session.store.load_state(STATE_NAME)
        if saved:
            self.state = _MemoryState.from_dict(saved)

    @property
    def updated_through(self) -> str | None:
        """uuid of the last message the notes cover (None: none in the current view)."""
        return self.state.updated_through

    @property
    def in_flight(self) -> bool:
        """Whether an update is running now."""
        return self._live_task() is not None

    def notes_path(self, session: ExtensionHost) -> str:
        """Where the notes are (a virtual path for a memory store)."""
        return session.store.memory_path or VIRTUAL_NOTES_PATH

    def read(self, session: ExtensionHost) -> str | None:
        """The notes as stored (None when never written)."""
        return session.store.read_memory()

    def progress(self, session: ExtensionHost) -> UpdateProgress:
        """What the notes do not cover yet (O(entries appended since the last call))."""
        return self._tracker.progress(session.view, self.state.updated_through)

    def _enabled_for(self, session: ExtensionHost) -> bool:
        return (
            session.policy.session_memory_enabled
            and session.config.query_source not in GUARDED_QUERY_SOURCES
        )

    def should_update(self, session: ExtensionHost) -> bool:
        """The trigger rule applied to the session now."""
        if not self._enabled_for(session):
            return False
        return should_update(
            self.progress(session),
            session.policy,
            context_tokens=session.status().tokens,
            initialized=self.state.updates > 0 or not notes_are_empty(self.read(session)),
        )

    # -- running updates -------------------------------------------------------------------------
    def _live_task(self) -> asyncio.Task[UpdateOutcome | None] | None:
        task = self._task
        if task is None or task.done():
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return task
        if task.get_loop() is not loop:  # left over from a closed loop (sync facade)
            self._task = None
            return None
        return task

    async def maybe_update(
        self, session: ExtensionHost
    ) -> asyncio.Task[UpdateOutcome | None] | None:
        """Start an update when the trigger holds and none is running (inline when not
        `background`). Returns the running task, if any."""
        running = self._live_task()
        if running is not None:
            return running
        if not self.should_update(session):
            return None
        if not self.background:
            await self.update_now(session)
            return None
        self._task = asyncio.ensure_future(self.update_now(session))
        return self._task

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Update the notes when the trigger holds (started in the background)."""
        await self.maybe_update(session)

    def after_record(self, session: ExtensionHost, entry: Entry) -> None:
        """After a response without tool calls, start an update when the trigger holds."""
        # A response without tool calls ends the agent's turn: a good moment for notes.
        # With tool calls the results are still to come (a request now would be invalid);
        # prepare() picks it up once they are there.
        if not self.background or tool_use_count(entry) > 0:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._live_task() is None and self.should_update(session):
            self._task = asyncio.ensure_future(self.update_now(session))

    async def wait_for_update(self, timeout: float) -> bool:
        """Wait for an update in flight, at most `timeout` seconds; True when none is left."""
        task = self._live_task()
        if task is None:
            return True
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)

    async def update_now(self, session: ExtensionHost) -> UpdateOutcome | None:
        """Run one update now, whatever the trigger says; None when it failed or timed out."""
        policy = session.policy
        view = list(session.view)
        progress = self._tracker.progress(view, self.state.updated_through)
        current = self.read(session)
        notes = current if current and current.strip() else session_memory_template()
        messages, _ = clear_tool_results(session.messages, session.micro.cleared_ids)
        ttl, prefix_ttl = session.cache_ttls()
        job = UpdateJob(
            notes=notes,
            new_items=view[progress.start :],
            messages=messages,
            params=session.cache_safe_params(),
            ttl=ttl,
            prefix_ttl=prefix_ttl,
            notes_path=self.notes_path(session),
            policy=policy,
        )
        sink = session.events_sink()
        updater, fallback = self._updater_for(session)
        outcome = await self._run(session, updater, job)
        if outcome is None and self.updater is None and not updater.offline:
            # The session's model failed: the offline notes cover these messages instead.
            logger.warning("the model's notes update failed: the offline updater writes them")
            updater, fallback = OfflineNotesUpdater(), "model_failed"
            outcome = await self._run(session, updater, job)
        if outcome is None:
            return None
        if outcome.notes is not None and outcome.notes != current:
            session.write_notes(outcome.notes)
        self.state.updated_through = progress.last_uuid
        self.state.updates += 1
        self.state.last_writer = updater.name
        self._save(session)
        emit(
            sink,
            SessionMemoryUpdated(
                updater=updater.name,
                fallback=fallback,
                through=progress.last_uuid,
                applied=outcome.applied,
                refused=tuple(outcome.refused),
                tokens=rough_token_count(outcome.notes or notes),
            ),
        )
        return outcome

    def _updater_for(self, session: ExtensionHost) -> tuple[NotesUpdater, str | None]:
        """The updater of this update and why the offline one writes (None: a model does):
        the one given, else the session's model, else the offline updater."""
        if self.updater is not None:
            return self.updater, "asked_for" if self.updater.offline else None
        model = session.model_provider()
        if model is not None:
            return ModelNotesUpdater(model), None
        return OfflineNotesUpdater(), "no_model"

    async def _run(
        self, session: ExtensionHost, updater: NotesUpdater, job: UpdateJob
    ) -> UpdateOutcome | None:
        """One update by `updater`; None (reported, counted) when it failed or timed out."""
        timeout = session.policy.session_memory_update_timeout_seconds
        try:
            outcome = await asyncio.wait_for(updater.update(job), timeout=timeout)
        except (asyncio.TimeoutError, ProviderError) as error:
            reason = "timeout" if isinstance(error, asyncio.TimeoutError) else str(error)
            self._failed(session, reason, updater)
            return None
        if not outcome.accepted:
            self._failed(session, "; ".join(outcome.refused) or "no acceptable edit", updater)
            return None
        return outcome

    def _failed(self, session: ExtensionHost, reason: str, updater: NotesUpdater) -> None:
        logger.warning("session notes update by %s failed: %s", updater.name, reason)
        self.state.failures += 1
        self._save(session)
        emit(session.events_sink(), SessionMemoryUpdateFailed(updater.name, reason))

    def _save(self, session: ExtensionHost) -> None:
        session.store.save_state(STATE_NAME, self.state.to_dict())

    # -- compaction ------------------------------------------------------------------------------
    async def compact_from_memory(
        self, session: ExtensionHost, *, max_post_tokens: int | None = None
    ) -> CompactionResult | None:
        """Session-memory compaction: the notes as the summary (None to fall through)."""
        if not self._enabled_for(session):
            return None
        return await try_session_memory_compaction(
            session.compaction_context(), self, max_post_tokens=max_post_tokens
        )

    def after_compact(self, session: ExtensionHost, result: CompactionResult) -> None:
        """Post-compact cleanup of the pointer: keep it when the message it names is still in
        the view; after a session-memory compaction the notes cover everything the summary
        replaced; after a summary call they cover nothing of the new view yet."""
        through = self.state.updated_through
        if through is not None and any(e.uuid == through for e in session.view):
            return
        if result.summarizer == QUERY_SOURCE and result.summary_messages:
            self.state.updated_through = result.summary_messages[-1].uuid
        else:
            self.state.updated_through = None
        self._save(session)

    async def aclose(self) -> None:
        """Cancel an update still running (when the session is done)."""
        task = self._live_task()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


__all__ = ["STATE_NAME", "VIRTUAL_NOTES_PATH", "SessionMemory"]
