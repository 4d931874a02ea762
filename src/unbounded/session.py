"""`Session`: the per-turn pipeline of DESIGN.md around one conversation.

    add_user / add_tool_results / record(response)      -> the append-only transcript
    prepare(): its steps in order (session_steps.py, over one `TurnContext` of turn.py):
      answer pending calls -> extensions' before_prepare -> cache TTL
      -> auto-compact? (at the threshold, or early when it pays; session_compaction.py)
      -> microcompact -> build the request -> breakpoints -> cache edits
      -> extensions' before_request -> validate (optional) -> break-detector snapshot -> finish
    record(response) -> usage anchors the count; cache-break check; state saved
    call(provider)   -> the turn engine (engine.py): prepare, send, record; prompt too long:
                        compact once and retry

A session is made of parts, each in its own module:

    SessionOptions, SessionDeps   what it is built from, what it talks to (session_options.py)
    SessionState, StateFile       what it saves and restores (session_state.py)
    SessionTranscript             the entries and the view derived from them
    PrepareSteps                  the prepare steps and what only they keep
    SessionCompactor              when and how it compacts, and applying a compaction
    SessionRecall                 recall answers and receipts
    Extension                     the hooks extensions override (extension.py)

The parts reach the session through `SessionCore` (session_core.py), so none imports this
module. `SyncSession` (sync_session.py) is the same with blocking methods.

A session holds its store (a folder lock) until `close()`; use it as a context manager
(`with` / `async with`). Tool calls that never got a result (a process killed while a tool
ran, an interrupt, a new prompt first) are answered with a synthetic error result, recorded
in the transcript, as soon as the conversation moves on (`add_user`, `prepare`, `compact`,
`interrupt`). A tool result or user text over `Policy.tool_result_max_tokens` is kept whole
on the side (`store.save_tool_output`) and enters the conversation as its head and tail.
In a conversation that uses tools the requests also offer a `recall` tool (docs/recall.md).
"""

from __future__ import annotations

import math
import uuid as uuid_module
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from unbounded.blocking import BlockingDriver, BlockingHold
from unbounded.caching.break_detector import PromptCacheBreakDetector
from unbounded.caching.ttl import CacheTtl, CacheTtlLatch, prefix_cache_ttl
from unbounded.catalog import ModelInfo, load_model_table
from unbounded.compaction.auto import TierEntry
from unbounded.compaction.background import BackgroundSummary
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CacheSafeParams, CompactionResult
from unbounded.compaction.micro import MicrocompactState
from unbounded.compaction.prompts import PartialDirection
from unbounded.configuration import DerivedSettings, SessionConfig, derive_settings
from unbounded.engine import drive_turn, turn_flow
from unbounded.errors import ConfigError, SessionClosedError
from unbounded.events import CacheBreak, EventSink, ToolCallsInterrupted, emit
from unbounded.extension import Extension
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.normalize import interrupted_result
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.repeated_prompt import repeated_prompt, trailing_prompt
from unbounded.model.request import ProviderRequest
from unbounded.model.tool_ids import RENAMED_FIELD
from unbounded.policy import Policy, Thresholds
from unbounded.providers.base import ModelResponse, Provider
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.offer import offers_recall
from unbounded.recall.schema import RECALL_TOOL_NAME, recall_tool_schema
from unbounded.redaction import private_diff_writer
from unbounded.session_compaction import SessionCompactor
from unbounded.session_input import (
    capped_blocks,
    distinct_call_ids,
    named_results,
    plain_block,
    repeats_previous_response_id,
    user_content,
)
from unbounded.session_options import SessionDeps, SessionOptions, chosen_policy, resolve_deps
from unbounded.session_recall import SessionRecall
from unbounded.session_state import (
    CompactionTracking,
    SessionState,
    SessionStatus,
    StateFile,
)
from unbounded.session_steps import PrepareSteps, iso_time
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import FolderStore, SessionStore
from unbounded.telemetry import set_attributes, usage_attributes
from unbounded.tokens.estimate import content_tokens, pad_estimate

INTERRUPT_TEXT = "[Request interrupted by user]"
INTERRUPT_FOR_TOOL_USE_TEXT = "[Request interrupted by user for tool use]"
"""What Claude Code writes when the user interrupts a response, or a running tool."""


class Session:
    """One conversation kept inside the window (see the module docstring)."""

    def __init__(
        self, config: SessionConfig, options: SessionOptions | None = None, **overrides: Any
    ) -> None:
        """A session of `config`, built from `options` (a `SessionOptions`) and/or its fields
        given as keywords; wrong options raise `ConfigError` before anything is opened."""
        self._options = SessionOptions.of(options, overrides)
        self._deps = resolve_deps(self._options)
        self._base_policy = self._deps.policy
        # Budgets scaled for a small window (and a window too small refused) before the
        # transcript is read, so a bad configuration reads and writes nothing.
        self._settings: DerivedSettings = derive_settings(
            config, self._base_policy, self._deps.model_table
        )
        self._closed = False
        self._blocking_holds: list[BlockingHold] = []
        """The holds of the blocking entry points driving the session (`drive_blocking`)."""
        self._call_provider: Provider | None = None
        """The provider of the last `call`: the model summaries and notes use by default."""
        self._requests_provider: Provider | None = None
        """Where the conversation's requests go (`call_provider()`): the last `call`'s
        provider, or one a drop-in binds; never the summaries' model on its own, so binding
        a drop-in's client adds no paid summary calls to a session without a summarizer."""
        self._detector = PromptCacheBreakDetector(
            self.policy,
            diff_dir=self._options.diff_dir,
            sink=self._deps.events,
            write_diff=private_diff_writer(self._deps.redactor),
            messages_immutable=True,  # the pipeline replaces messages, never edits them
        )
        self._transcript = SessionTranscript.load(self._deps.store, models=self._deps.model_table)
        self._state_file = StateFile(self._deps.store)
        self._state = self._state_file.load(
            policy=self.policy, model=self.model_info, ttl_eligible=self._options.ttl_eligible
        )
        self._recall = SessionRecall()
        self._compactor = SessionCompactor(
            self, tiers=self._options.compaction_tiers, rehydrate_from=self._options.rehydrate_from
        )
        self._steps = PrepareSteps(self, self._compactor)
        # Calls left unanswered by the previous process: answered when the session goes on.
        self._resumed_pending = bool(self.pending_tool_use_ids())
        # A prompt left unanswered by the previous process: given again first, it is kept once.
        self._resumed_prompt = trailing_prompt(self.entries)
        for extension in self._deps.extensions:
            extension.attached(self)
        if self._deps.extensions:  # the tools they add are counted from the first estimate
            self._settings = self._derive(config, self._base_policy)
        # Set before the first prepare does: the calibration counts the cleared results as
        # the placeholders the last request carried, with the handle when recall is offered.
        self.micro.name_handles = offers_recall(self.config.tools, self.policy)
        if self._state.calibration is None:
            # A saved calibration was measured when its usage arrived; measured again now,
            # it would count clears made since (a prepare whose reply never came) as billed.
            self._calibrate()

    # -- configuration ---------------------------------------------------------------------------
    @property
    def config(self) -> SessionConfig:
        """What the main requests are made of (change it with `reconfigure`)."""
        return self._settings.config

    @property
    def model_info(self) -> ModelInfo:
        """The model's limits, with the config's context window."""
        return self._settings.model_info

    @property
    def policy(self) -> Policy:
        """The session's policy, its token budgets scaled for the window."""
        return self._settings.policy

    @property
    def thresholds(self) -> Thresholds:
        """The warning, error and auto-compact thresholds of the window."""
        return self._settings.thresholds

    @property
    def settings(self) -> DerivedSettings:
        """Everything derived from the config and the policy (`configuration.derive_settings`)."""
        return self._settings

    def reconfigure(
        self,
        config: SessionConfig | None = None,
        *,
        policy: Policy | None = None,
        summarizer: Provider | None = None,
    ) -> None:
        """Change the config (model, window, system prompt, tools...), the policy or the
        summarizer; every value derived from them is computed again (the model's limits, the
        scaled policy, the thresholds, the system prompt and tools' overhead that estimates
        and calibration start from). A config the window cannot hold raises `ConfigError` and
        changes nothing, as does a policy with `background_summary` while a blocking entry
        point drives the session (`drive_blocking`).

        The calibration measured so far is kept: it compared a usage against the request
        that was then sent; the next usage is compared against the new overhead."""
        self._check_open()
        base = policy if policy is not None else self._base_policy
        for hold in self._blocking_holds:
            hold.driver.refuse_background_summary(base)
        settings = self._derive(config or self.config, base)
        self._base_policy = base
        self._settings = settings
        self._detector.policy = settings.policy
        if summarizer is not None:
            self._deps = replace(self._deps, summarizer=summarizer)

    def drive_blocking(self, driver: BlockingDriver) -> BlockingHold:
        """Note that a blocking entry point drives the session until `release_blocking` of the
        hold returned: `Policy.background_summary` is refused now (`ConfigError`) and by
        `reconfigure` while it drives it, since its event loop runs only inside each of its
        calls."""
        driver.refuse_background_summary(self._base_policy)
        hold = BlockingHold(driver)
        self._blocking_holds.append(hold)
        return hold

    def release_blocking(self, hold: BlockingHold) -> None:
        """The entry point of `hold` no longer drives the session (`drive_blocking`); a hold
        released already changes nothing (another hold of the same driver stays)."""
        self._blocking_holds = [kept for kept in self._blocking_holds if kept is not hold]

    def _derive(self, config: SessionConfig, base: Policy) -> DerivedSettings:
        """`derive_settings` of `config`, counting the tools the extensions add to it (their
        `tools_offered`, asked with the session as it is) in the system prompt and tools'
        overhead and the minimum-room check."""
        tools = [dict(tool) for tool in config.tools]
        for extension in self._deps.extensions:
            tools = extension.tools_offered(self, tools)
        return derive_settings(config, base, self._deps.model_table, tools=tools)

    # -- parts, dependencies and state -----------------------------------------------------------
    @property
    def options(self) -> SessionOptions:
        """What the session was built from (frozen)."""
        return self._options

    @property
    def deps(self) -> SessionDeps:
        """What the session talks to: store, summarizer, extensions, event sink, clock..."""
        return self._deps

    @property
    def state(self) -> SessionState:
        """What the session saves after each step and finds again when opened."""
        return self._state

    @property
    def transcript(self) -> SessionTranscript:
        """The entries and the view derived from them."""
        return self._transcript

    @property
    def recall(self) -> SessionRecall:
        """Recall answers and receipts over this session's transcript."""
        return self._recall

    @property
    def store(self) -> SessionStore:
        """Where the transcript, state and notes live."""
        return self._deps.store

    @property
    def extensions(self) -> tuple[Extension, ...]:
        """The session's extensions, whose hooks run in this order."""
        return self._deps.extensions

    @property
    def summarizer(self) -> Provider | None:
        """The summarizer chosen for this session (None: the model given to `call`)."""
        return self._deps.summarizer

    @property
    def entries(self) -> Sequence[Entry]:
        """The transcript's main thread (read it; add to it with `append` and the like)."""
        return self._transcript.entries

    @property
    def view(self) -> list[Entry]:
        """The entries after the last compaction boundary."""
        return self._transcript.view

    @property
    def warnings(self) -> list[str]:
        """What reading the transcript found amiss, and repairs made since."""
        return self._transcript.warnings

    @property
    def micro(self) -> MicrocompactState:
        """The microcompaction state (`state.micro`)."""
        return self._state.micro

    @property
    def tracking(self) -> CompactionTracking:
        """The breaker and compaction-chain counters (`state.tracking`)."""
        return self._state.tracking

    @property
    def ttl_latch(self) -> CacheTtlLatch:
        """The latched cache TTL (`state.ttl_latch`)."""
        return self._state.ttl_latch

    @property
    def calibration(self) -> float | None:
        """Reported tokens / length estimate, from the last usage (`state.calibration`)."""
        return self._state.calibration

    @property
    def detector(self) -> PromptCacheBreakDetector:
        """The prompt-cache break detector (its events go to the session's sink)."""
        return self._detector

    @property
    def recall_index(self) -> TranscriptIndex:
        """The transcript's tool calls (brought up to date on use)."""
        return self._recall.index

    @property
    def last_request(self) -> ProviderRequest | None:
        """The last request `prepare` returned."""
        return self._steps.last_request

    @property
    def marked_messages(self) -> tuple[int, ...]:
        """Indices of the last request's messages that carry a cache marker."""
        return self._steps.marked_messages

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after `close()`."""
        return self._closed

    def close(self) -> None:
        """Release the store (its folder lock) and the transcript's spill file. Safe twice."""
        if not self._closed:
            self._closed = True
            self._compactor.background.discard("closed")  # no summary call runs on after close
            self.store.close()
            self._transcript.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                "this session was closed; open it again (Session.open) to go on"
            )

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def open(cls, folder: str | Path, config: SessionConfig, **options: Any) -> Session:
        """A session kept in a folder: created when new, resumed when it exists.

        Close it (or use `with`) to release the folder for another process or a later open.
        """
        checked = _checked_options(config, options)  # before the folder is made or locked
        store = FolderStore(folder)
        try:
            return cls(config, replace(checked, store=store))
        except BaseException:
            store.close()
            raise

    @classmethod
    def from_transcript(
        cls,
        path: str | Path,
        folder: str | Path,
        config: SessionConfig | None = None,
        **options: Any,
    ) -> Session:
        """A new session in `folder` that continues an existing transcript (any format)."""
        from unbounded.transcripts.loader import load_transcript

        transcript = load_transcript(path)
        model = (config.model if config else None) or transcript.model
        if not model:
            raise ConfigError(
                "the transcript does not say which model it used: pass a SessionConfig"
            )
        chosen = config or SessionConfig(model=model)
        checked = _checked_options(chosen, options)  # before the folder is made or locked
        store = FolderStore(folder)
        try:
            if store.load().entries:
                raise ConfigError(f"{folder} already holds a session; open it with Session.open")
            session = cls(chosen, replace(checked, store=store))
        except BaseException:
            store.close()  # a failed start must not keep the folder locked
            raise
        session.append(transcript.main_thread())
        session._resumed_pending = bool(session.pending_tool_use_ids())
        session._resumed_prompt = trailing_prompt(session.entries)
        session._calibrate()
        return session

    # -- the view ----------------------------------------------------------------------------
    @property
    def messages(self) -> list[MessageParam]:
        """The API messages of the current view (before microcompaction)."""
        return self._transcript.messages

    def status(self) -> SessionStatus:
        """Tokens, percent left and warning level now."""
        counter = self._transcript.counter
        tokens = counter.total
        stats = self.micro.stats
        return SessionStatus(
            tokens=tokens,
            reported_tokens=counter.anchor_tokens,
            estimated_tokens=counter.estimated_tokens,
            percent_left=self.thresholds.percent_left(tokens),
            level=self.thresholds.level(tokens),
            thresholds=self.thresholds,
            compactions=stats.compactions,
            consecutive_failures=self.tracking.consecutive_failures,
            microcompacts=stats.microcompactions,
            last_summary=self.tracking.last_summary,
            summary_requests=self.tracking.summary_requests,
        )

    # -- input ------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries to the transcript and the view (parentUuid chained)."""
        if not entries:
            return
        self._check_open()
        self._transcript.append(entries)

    def add_user(self, content: str | Iterable[Any], **flags: Any) -> Entry:
        """Add a user message (text, or blocks: dicts or SDK blocks, in any iterable).

        Tool calls still waiting for a result are answered first with a synthetic error result
        (the user moved on), unless this message carries their results. A reopened session
        that ends with a prompt nothing answered (its call failed), given that same prompt
        first, returns the entry already there instead of adding it twice
        (`unbounded.model.repeated_prompt`).
        """
        self._check_open()
        given = user_content(content)  # read once: a generator has no second pass
        resumed, self._resumed_prompt = self._resumed_prompt, None
        repeated = repeated_prompt(self.entries, resumed, given)
        if repeated is not None:  # its call failed: the next request carries it once
            return repeated
        blocks = (
            [{"type": "text", "text": given}]
            if isinstance(given, str)
            else self._named_results(given)
        )
        answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        self.answer_pending_calls("user", except_ids=answered)
        capped = self._cap_blocks(blocks, key_prefix="user")
        stored: str | list[dict[str, Any]] = capped[0]["text"] if isinstance(given, str) else capped
        entry = Entry.user(stored, timestamp=self._timestamp(), **flags)
        self.append([entry])
        return entry

    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> Entry:
        """Add tool_result blocks (one user message); an oversized one is capped."""
        self._check_open()
        blocks = []
        for result in results:
            if result.get("type") != "tool_result" or not result.get("tool_use_id"):
                raise ConfigError("add_tool_results takes tool_result blocks with a tool_use_id")
            blocks.append(plain_block(result))
        blocks = self._named_results(blocks)
        entry = Entry.user(self._cap_blocks(blocks), timestamp=self._timestamp())
        self.append([entry])
        return entry

    def interrupt(self, *, for_tool_use: bool | None = None) -> Entry:
        """Record that the user interrupted: pending tool calls get an "interrupted" result and
        Claude Code's interrupt line is added (use it from a KeyboardInterrupt handler)."""
        self._check_open()
        pending = self.pending_tool_use_ids()
        self.answer_pending_calls("user")
        text = INTERRUPT_FOR_TOOL_USE_TEXT if (for_tool_use or pending) else INTERRUPT_TEXT
        entry = Entry.user([{"type": "text", "text": text}], timestamp=self._timestamp())
        self.append([entry])
        return entry

    def discard_last_reply(self) -> list[Entry]:
        """Take the last reply out of the conversation (a regenerate, or a retry after the
        reply was lost): the next record is chained to the message before it, so the reply
        stays in the transcript on an abandoned branch that reloading leaves out. Returns the
        entries taken out (none when the conversation does not end with a reply)."""
        self._check_open()
        return self._transcript.discard_last_reply()

    def pending_tool_use_ids(self) -> list[str]:
        """Tool calls of the last response that have no result yet."""
        return self._transcript.pending_tool_use_ids()

    def answer_pending_calls(self, reason: str, *, except_ids: set[str] | None = None) -> None:
        """Answer each tool call still waiting for a result (but those in `except_ids`) with a
        synthetic error result; `reason` says why the conversation moved on ("user",
        "prepare"), "resume" when the calls were left by an earlier process."""
        pending = [i for i in self.pending_tool_use_ids() if i not in (except_ids or set())]
        if not pending:
            return
        if self._resumed_pending:
            reason = "resume"
        self._resumed_pending = False
        entry = Entry.user(
            [interrupted_result(tool_id) for tool_id in pending],
            timestamp=self._timestamp(),
            extra={"toolUseResult": "interrupted"},
        )
        self.append([entry])
        emit(self.events_sink(), ToolCallsInterrupted(tuple(pending), reason))

    def _cap_blocks(
        self, blocks: list[dict[str, Any]], *, key_prefix: str = ""
    ) -> list[dict[str, Any]]:
        """Blocks with every oversized text cut to head and tail, the full text kept aside."""
        redactor = self._deps.redactor
        out, events = capped_blocks(
            blocks,
            limit=self.policy.tool_result_max_tokens,
            save=self.store.save_tool_output,
            redact=redactor.redact if redactor is not None else None,
            key_prefix=key_prefix,
        )
        for event in events:
            emit(self.events_sink(), event)
        return out

    def _named_results(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return named_results(blocks, self.entries, self.pending_tool_use_ids())

    def _timestamp(self) -> str:
        return iso_time(self._deps.clock())

    def record(
        self,
        response: ModelResponse | Mapping[str, Any],
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Entry:
        """Record the model's answer; its usage anchors the token count and is checked for a
        cache break. `extra` adds fields to the record (an integration's own marks)."""
        model: str | None
        if isinstance(response, ModelResponse):
            content, usage, model = list(response.content), dict(response.usage), response.model
            message_id, stop = response.id or None, response.stop_reason
        else:
            content = list(response.get("content") or [])
            usage = dict(response.get("usage") or {})
            model, message_id, stop = (
                response.get("model"),
                response.get("id"),
                response.get("stop_reason"),
            )
        now = self._deps.clock()
        content, renamed = distinct_call_ids(content, self.recall_index.update(self.entries).calls)
        if renamed:
            # A provider that repeats tool_use ids (or sends ids the API refuses): the call is
            # renamed here, its result renamed to match when it is added (model/tool_ids.py).
            extra = {**(extra or {}), RENAMED_FIELD: renamed}
        if message_id and repeats_previous_response_id(self.entries, message_id):
            # A server or mock that gives every reply one id: recorded under it, this whole
            # response would be read back as more lines of the previous one and merged.
            extra = {**(extra or {}), "responseId": message_id}
            message_id = None
        entry = Entry.assistant(
            content,
            message_id=message_id or f"msg_{uuid_module.uuid4().hex[:24]}",
            model=model or self.config.model,
            usage=usage or None,
            stop_reason=stop,
            timestamp=iso_time(now),
            extra=dict(extra) if extra else None,
        )
        self.append([entry])
        self.tracking.turns += 1
        if usage:
            # Only a new usage is measured: against the old one, clears made since would
            # be counted as if that request had carried them.
            self._calibrate()
            self.micro.observe_response(usage, self.policy)
            self._check_cache_break(entry, usage, now.timestamp())
        self.save_state()
        for extension in self.extensions:
            extension.after_record(self, entry)
        return entry

    def _check_cache_break(self, entry: Entry, usage: dict[str, Any], now: float) -> None:
        """The detector's check of a reported usage, traced (it reports breaks to the sink)."""
        recorded = {"gen_ai.request.model": entry.model or self.config.model}
        with self._deps.telemetry.span("unbounded.record", {**recorded, **usage_attributes(usage)}):
            check = self.detector.check_response_for_cache_break(
                usage, query_source=self.config.query_source, now=now
            )
            if isinstance(check, CacheBreak):
                with self._deps.telemetry.span(
                    "unbounded.cache_break",
                    {
                        "unbounded.cache_break.reason": str(check.reason),
                        "unbounded.cache_break.previous_read": check.previous_read,
                        "unbounded.cache_break.current_read": check.current_read,
                    },
                ):
                    pass

    # -- requests ------------------------------------------------------------------------------
    def cache_safe_params(self) -> CacheSafeParams:
        """The parameters a fork must repeat to share this session's prompt cache."""
        return CacheSafeParams(
            model=self.config.model,
            system=self.config.system,
            tools=self.offered_tools() or None,
            thinking=self.config.thinking,
            max_tokens=self.config.max_tokens or min(self.model_info.max_output, 32_000),
            extra=dict(self.config.extra),
            max_output=self.model_info.max_output,
        )

    async def prepare(self) -> ProviderRequest:
        """Run the pipeline and return the request to send now.

        The request shares unchanged message dicts with the session's view: treat it as
        read-only (deep-copy it before editing).
        """
        attributes = {
            "gen_ai.request.model": self.config.model,
            "unbounded.query_source": self.config.query_source,
        }
        with self._deps.telemetry.span("unbounded.prepare", attributes) as span:
            self._check_open()
            request = await self._steps.run(self._deps.clock())
            tokens = self._transcript.counter.total
            set_attributes(
                span,
                {"unbounded.context.tokens": tokens, "unbounded.context.level": self._steps.level},
            )
            self._deps.telemetry.context_usage(tokens, self.model_info.context_window, attributes)
            return request

    def cache_ttls(self) -> tuple[CacheTtl, CacheTtl]:
        """(messages' TTL, tools and system TTL) of this session's cache markers."""
        ttl = self.ttl_latch.ttl_for(self.config.query_source)
        prefix_ttl = prefix_cache_ttl(
            ttl,
            idle_expiries=self.tracking.idle_expiries,
            policy=self.policy,
            model=self.model_info,
        )
        return ttl, prefix_ttl

    def _calibrate(self) -> None:
        """Update the calibration from the counter's anchor (its usage against our estimate)."""
        self._state.calibrate(
            self._transcript.counter,
            overhead_raw=self._settings.overhead_raw,
            system_tokens=self.config.system_tokens,
        )

    def estimate_request_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """What a request of these messages (with this session's system prompt and tools)
        will count: the length estimate scaled by `calibration`, or padded by 4/3 before
        the first usage arrives (`SessionConfig.system_tokens`, when given, as it is)."""
        raw = sum(content_tokens(m.get("content")) for m in messages)
        exact = self.config.system_tokens
        if exact is None:
            raw += self._settings.overhead_raw
        if self.calibration is None:
            return pad_estimate(raw) + (exact or 0)
        return math.ceil(raw * self.calibration) + (exact or 0)

    # -- compaction (session_compaction.py) ------------------------------------------------------
    async def auto_compact(self) -> CompactionResult | None:
        """The compaction tiers in order (`compaction_tiers()`: session memory, the summary's
        cache-sharing request, its direct request); the offline hand-over takes over when the
        breaker trips after repeated failures, or the compaction has sent
        `Policy.compact_max_summary_requests` requests (counted across its failed runs).
        Returns the compaction, or None when it failed."""
        return await self._compactor.auto_compact()

    @property
    def background(self) -> BackgroundSummary:
        """The summary written off the turn's path (`Policy.background_summary`)."""
        return self._compactor.background

    def idle_deadline(self) -> datetime | None:
        """When a host should call `idle()`: `Policy.idle_compact_at_ttl_share` of the cache
        TTL after the last reply, while the cache is warm (None before any reply)."""
        return self._compactor.idle_deadline()

    async def idle(self) -> CompactionResult | None:
        """The host is idle (the user stepped away): compact now, while the cache is warm,
        when that costs less than resuming the whole context on an expired cache would
        (`compaction.idle`); None when it does not pay, the cache has already expired (the
        cold-resume guard decides at the next turn), session notes can compact the resume
        without a call, calls are left unanswered, or automatic compaction is off."""
        self._check_open()
        if self.pending_tool_use_ids():
            return None
        return await self._compactor.idle()

    async def compact(
        self,
        *,
        instructions: str | None = None,
        pivot: str | None = None,
        direction: PartialDirection | None = None,
    ) -> CompactionResult:
        """Manual compaction (`/compact`), optionally partial around a pivot record."""
        self._check_open()
        self.answer_pending_calls("prepare")
        return await self._compactor.compact(
            instructions=instructions, pivot=pivot, direction=direction
        )

    def bind_call_provider(self, provider: Provider) -> None:
        """Name the provider the conversation's requests go to when they are sent by a caller
        of `prepare()`/`record()` (a drop-in) rather than by `call`. The native tiers
        (`ServerCompaction`) read its profile; the summaries keep their own model
        (`model_provider()`), so a session without a summarizer still compacts offline."""
        self._requests_provider = provider

    def call_provider(self) -> Provider | None:
        """The provider the conversation's requests go to: the last one given to `call` or
        `bind_call_provider` (None: not known yet)."""
        return self._requests_provider

    def model_provider(self) -> Provider | None:
        """The model this session's summaries and session notes are written by: the
        `summarizer` given, else the provider of the last `call` (the conversation's own
        model); None when there is none yet, or the offline hand-over was chosen
        (`summarizer=ExtractiveSummarizer()`)."""
        chosen = self.summarizer if self.summarizer is not None else self._call_provider
        if chosen is None:
            return None
        # A provider written without a `profile` (a protocol default, not enforced at run
        # time) is an online model: this is asked on every turn, not only at compaction.
        return None if getattr(chosen, "profile", MODEL_PROFILE).offline else chosen

    def compaction_tiers(self) -> tuple[TierEntry, ...]:
        """What `auto_compact` runs: the `compaction_tiers` given to the session, or
        `default_compaction_tiers()`."""
        return self._compactor.compaction_tiers()

    def default_compaction_tiers(self) -> tuple[TierEntry, ...]:
        """The tiers cheapest first: the session notes (an extension's `compact_from_memory`),
        then the model's cache-sharing request and its direct request (`model_provider()`)
        until the circuit breaker trips or the summary requests are spent, the offline
        hand-over's two after (without a model, throughout)."""
        return self._compactor.default_compaction_tiers()

    def compaction_context(self) -> CompactionContext:
        """What a compaction of this conversation reads now (`compaction.context`)."""
        return self._compactor.context()

    # -- recall ---------------------------------------------------------------------------------
    @property
    def offers_recall(self) -> bool:
        """Whether requests offer the `recall` tool now: `Policy.recall_enabled`, tools in
        use, and something already taken out of the context (`Policy.recall_from_start`:
        from the first request)."""
        if not offers_recall(self.config.tools, self.policy):
            return False
        if self.policy.recall_from_start:
            return True
        stats = self.micro.stats
        # A result cleared or deleted from the cache, or the history compacted.
        return bool(
            stats.compactions
            or stats.results_cleared
            or stats.cache_refs_deleted
            or self._transcript.compacted_before
        )

    def offered_tools(self) -> list[dict[str, Any]]:
        """The tools the next request declares: the configured ones, then `recall` while it is
        offered."""
        tools = [dict(tool) for tool in self.config.tools]
        for extension in self.extensions:
            tools = extension.tools_offered(self, tools)
        if self.offers_recall:
            tools.append(recall_tool_schema("anthropic"))
        return tools

    def run_recall(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a `recall` tool_use block from this session's transcript.

        Returns the tool_result block to send back (add it with `add_tool_results`, with the
        results of the other calls of the same reply); wrong arguments give an `is_error`
        result that says what to fix. Only this session's records, and the outputs its store
        kept, are read; the answer is at most `Policy.recall_max_tokens` long.
        """
        self._check_open()
        result, served = self._recall.answer(
            tool_use,
            entries=self.entries,
            view=self.view,
            micro=self.micro,
            policy=self.policy,
            load_output=self.store.load_tool_output,
        )
        emit(self.events_sink(), served)
        return result

    def answers_tool(self, name: str) -> bool:
        """Whether this session answers calls of the tool `name` itself: `recall` while it is
        offered, or a tool an extension answers (`Extension.answers_tool`)."""
        if name == RECALL_TOOL_NAME and self.offers_recall:
            return True
        return any(extension.answers_tool(self, name) for extension in self.extensions)

    async def answer_tool(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """The tool_result block for a call this session answers itself (`answers_tool`):
        `run_recall`, or the extension's answer. Add it with the other results of its reply."""
        name = str(tool_use.get("name"))
        if name == RECALL_TOOL_NAME and self.offers_recall:
            return self.run_recall(tool_use)
        for extension in self.extensions:
            if extension.answers_tool(self, name):
                answer = await extension.answer_tool(self, tool_use)
                self.save_state()  # what the answer promised (a compaction) survives a restart
                return answer
        raise ConfigError(f"this session answers no calls of the tool {name!r}")

    # -- one whole turn ---------------------------------------------------------------------------
    async def call(self, provider: Provider, *, stream: bool = False) -> ModelResponse:
        """Prepare, send, record. A prompt-too-long answer is held back, the conversation is
        compacted once and the request retried; if that fails too, the error is raised.

        Without a `summarizer` of its own, the session writes its summaries (and a
        `SessionMemory` without an updater its notes) with `provider` from now on."""
        self._call_provider = provider
        self.bind_call_provider(provider)
        flow = turn_flow(self)

        async def send(request: ProviderRequest) -> ModelResponse:
            return await provider.create(request, stream=stream)

        return await drive_turn(flow, send, lambda response: response)

    # -- persistence ---------------------------------------------------------------------------
    def save_state(self) -> None:
        """Save what changed of the session's state (`StateFile`: most turns write nothing)."""
        self._state_file.save(self._state)

    def write_notes(self, text: str) -> None:
        """Replace the session notes in the store (secrets redacted when the session redacts)."""
        if self._deps.redactor is not None:
            text = self._deps.redactor.redact(text)
        self.store.write_memory(text)

    def extension_state(self, name: str) -> dict[str, Any]:
        """The values the extension `name` keeps across a resume (`SessionState.extensions`),
        saved with the session's state."""
        return self._state.extensions.setdefault(name, {})

    def events_sink(self) -> EventSink | None:
        """Where this session's events go (extensions emit through it)."""
        return self._deps.events


def _checked_options(config: SessionConfig, given: Mapping[str, Any]) -> SessionOptions:
    """The options of a session kept in a folder, and the settings they derive with `config`,
    checked before the folder is made: a refused open creates no folder and no `.lock`."""
    keywords = dict(given)
    base = keywords.pop("options", None)
    if "store" in keywords or (base is not None and base.store is not None):
        raise TypeError(
            "Session.open keeps the session in its folder: pass no store (or build "
            "Session(config, store=...) for another store)"
        )
    checked = SessionOptions.of(base, keywords)
    policy = chosen_policy(checked)
    table = checked.model_table or load_model_table()
    derive_settings(config, policy, table)
    # Pinned, so the session runs on the very policy and table checked here.
    return replace(checked, policy=policy, model_table=table)


__all__ = [
    "Extension",
    "Session",
    "SessionConfig",
    "SessionOptions",
    "SessionStatus",
]
