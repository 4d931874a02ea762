"""`Session`: the per-turn pipeline of DESIGN.md around one conversation.

    add_user / add_tool_results / record(response)      -> the append-only transcript
    prepare(): its steps in order, over one `TurnContext` (unbounded/turn.py):
      answer pending calls -> extensions' before_prepare -> cache TTL
      -> auto-compact? (tokens >= threshold, or early when it pays; the tiers of
                        `compaction_tiers()`: session memory, a cache-sharing summary and a
                        direct summary by the session's model, the offline hand-over once
                        the breaker tripped after 3 consecutive failures or the compaction
                        spent its summary requests; compaction/auto.py)
      -> microcompact (time | cached | count) -> build the request -> breakpoints
      -> cache edits -> extensions' before_request -> validate (optional)
      -> break-detector snapshot -> finish
      -> the provider request
    record(response) -> usage anchors the count; cache-break check; state saved
    call(provider)   -> prepare, send, record; prompt-too-long: compact once and retry;
                        `provider` writes the summaries and notes unless a summarizer is given

Extensions (`extensions=[...]`, e.g. session memory, instruction files) are `Extension`
subclasses whose hooks the session runs in order: before_prepare, tools_offered,
before_request, after_record, compact_from_memory, after_compact; see docs/session.md.

Everything that must survive a restart is saved in the store after each step: the
microcompaction state, the circuit breaker and compaction tracking, the latched cache TTL.
The transcript is only ever appended to. The class is async; `SyncSession` is the same
with blocking methods.

A session holds its store (a folder lock) until `close()`; use it as a context manager
(`with` / `async with`). Tool calls that never got a result (a process killed while a tool
ran, an interrupt, a new prompt first) are answered with a synthetic error result, recorded
in the transcript, as soon as the conversation moves on (`add_user`, `prepare`, `compact`,
`interrupt`). A tool result or user text over `Policy.tool_result_max_tokens` is kept whole
on the side (`store.save_tool_output`) and enters the conversation as its head and tail.

Recall (docs/recall.md): in a conversation that uses tools the requests also offer a `recall`
tool (`Policy.recall_enabled`); cleared results and summaries name its handles, and
`run_recall(tool_use)` answers a call from this session's transcript. Every compaction and
microcompaction leaves a receipt of what it took out (`unbounded.recall.receipts`).
"""

from __future__ import annotations

import math
import uuid as uuid_module
from collections import ChainMap
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson

from unbounded.blocking import BlockingRunner
from unbounded.caching.break_detector import PromptCacheBreakDetector
from unbounded.caching.breakpoints import CacheBreakpointPlanner, place_cache_breakpoints
from unbounded.caching.ttl import (
    CacheTtl,
    CacheTtlLatch,
    latch_cache_ttl,
    prefix_cache_ttl,
)
from unbounded.catalog import ModelInfo, ModelTable, load_model_table
from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    DirectSummaryTier,
    SessionMemoryTier,
    SummaryTier,
    TierChoice,
    TieredCompaction,
    TierEntry,
    TierSlot,
    tier_slots,
)
from unbounded.compaction.cached_micro import with_cache_edits
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import (
    CacheSafeParams,
    CompactionResult,
    FallbackReason,
    SummaryAuthor,
)
from unbounded.compaction.cut import turn_tail_start
from unbounded.compaction.decisions import (
    auto_compaction_allowed,
    cache_expired,
    decide_ttl_upgrade,
    early_compaction_reason,
    microcompact_policy,
    should_auto_compact,
)
from unbounded.compaction.glue import RecordedState, RehydrateSource, default_facts_ledger
from unbounded.compaction.large_output import cap_block_texts
from unbounded.compaction.micro import MicrocompactState, microcompact
from unbounded.compaction.prompts import PartialDirection
from unbounded.configuration import (
    DerivedSettings,
    SessionConfig,
    derive_settings,
)
from unbounded.engine import drive_turn, turn_flow
from unbounded.errors import ConfigError, SessionClosedError
from unbounded.events import (
    CacheBreak,
    CacheTtlUpgraded,
    ContextWarning,
    EarlyCompaction,
    EventSink,
    MicrocompactApplied,
    RecallServed,
    ReceiptWritten,
    RequestRepaired,
    ToolCallsInterrupted,
    ToolOutputCapped,
    emit,
)
from unbounded.model.content import ContentBlock, MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import (
    MessageNormalizer,
    interrupted_result,
    is_tool_result_only,
    validate_request,
)
from unbounded.model.request import ProviderRequest
from unbounded.model.request_budget import RequestBudget
from unbounded.model.text import repair_value
from unbounded.model.tool_ids import RENAMED_FIELD, name_results, renamed_tool_id
from unbounded.policy import (
    Policy,
    Thresholds,
    WarningLevel,
)
from unbounded.providers.base import (
    ModelResponse,
    Provider,
)
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.lookup import RecallContext
from unbounded.recall.offer import (
    answer_tokens,
    offers_recall,
    recall_tool_result,
)
from unbounded.recall.receipts import (
    RECEIPT_KEY,
    compaction_receipt,
    microcompact_receipt,
    microcompact_receipt_entry,
    recall_note,
    receipts_in,
)
from unbounded.recall.schema import RECALL_TOOL_NAME, recall_tool_schema
from unbounded.redaction import (
    Redactor,
    private_diff_writer,
    redact_compaction,
    redacting_sink,
    redactor_for,
    strings_in,
)
from unbounded.storage import FolderStore, MemoryStore, SessionStore
from unbounded.telemetry import Telemetry, default_telemetry, set_attributes, usage_attributes
from unbounded.tokens.estimate import (
    ContextCounter,
    content_tokens,
    pad_estimate,
)
from unbounded.turn import TurnContext, TurnStep

STATE_NAME = "session"
CLEARED_STATE_NAME = "session_cleared"
"""The state document holding the tool ids microcompaction cleared, apart from `STATE_NAME`:
it grows with the history but changes only when results are cleared, so a turn's save does
not compare or write it again."""
CALIBRATION_MIN = 0.75
CALIBRATION_MAX = 3.0
"""Bounds of the reported/estimated ratio: outside them a usage is more likely wrong (a
cache-edit credit, a provider that reports oddly) than the estimate that far off."""
INTERRUPT_TEXT = "[Request interrupted by user]"
INTERRUPT_FOR_TOOL_USE_TEXT = "[Request interrupted by user for tool use]"
"""What Claude Code writes when the user interrupts a response, or a running tool."""


def _compaction_attributes(span: Any, result: CompactionResult | None) -> None:
    """What a compaction span reports: whether it happened, and its sizes."""
    if result is None:
        set_attributes(span, {"unbounded.compaction.succeeded": False})
        return
    set_attributes(
        span,
        {
            "unbounded.compaction.succeeded": True,
            "unbounded.compaction.summarizer": result.summarizer,
            "unbounded.compaction.pre_tokens": result.pre_tokens,
            "unbounded.compaction.post_tokens": result.post_tokens,
            "unbounded.compaction.summary_tokens": result.summary_tokens,
        },
    )


class Extension:
    """Something that plugs into a session (session memory, instruction files): subclass it
    and override the hooks you need; each one here does nothing.

    A session runs the hooks of its `extensions` in the order they were given, each with the
    session and what the hook is about (docs/session.md, "Extensions"). The hooks belong to
    one session: a sub-agent's compaction (its own Session) never reaches the parent's.
    """

    def attached(self, session: Session) -> None:
        """Called once, when `session` is built with this extension (load saved state)."""

    async def before_prepare(self, session: Session) -> None:
        """Awaited at the start of every `prepare()`, before the auto-compact check."""

    def tools_offered(
        self, session: Session, tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The tools the requests declare, given those the extensions before this one left;
        asked when the session builds its request parameters, not on every turn (again
        whenever `tools_state` changes). The size estimate made at construction counts the
        configured tools only: the first reported usage calibrates the count for what an
        extension adds."""
        return tools

    def tools_state(self, session: Session) -> object:
        """A small comparable value that changes when `tools_offered` would give other tools
        (asked every turn; the default never changes)."""
        return None

    async def before_request(self, session: Session, turn: TurnContext) -> None:
        """Awaited once the request is built and its cache markers placed, before it is
        validated and kept as sent: may replace `turn.request`."""

    def after_record(self, session: Session, entry: Entry) -> None:
        """Called after each recorded response, with its entry."""

    def answers_tool(self, session: Session, name: str) -> bool:
        """Whether this extension answers calls of the tool `name` (one it offers in
        `tools_offered`); the session then asks `answer_tool` for their results."""
        return False

    async def answer_tool(self, session: Session, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """The tool_result block for a call of a tool this extension answers."""
        raise NotImplementedError(f"{type(self).__name__} answers no tool calls")

    async def compact_from_memory(
        self, session: Session, *, max_post_tokens: int | None = None
    ) -> CompactionResult | None:
        """A compaction without a summary call (the first tier of `auto_compact`), or None to
        fall through; None too when it would hold more than `max_post_tokens` (default: the
        auto-compact threshold). Only extensions that override it are asked, in order."""
        return None

    def after_compact(self, session: Session, result: CompactionResult) -> None:
        """Called after a compaction was appended: post-compact cleanup of state that referred
        to the old messages."""


def _offers_memory_compaction(extension: Extension) -> bool:
    """Whether the extension overrides `compact_from_memory` (it holds notes to compact from)."""
    return type(extension).compact_from_memory is not Extension.compact_from_memory


def _checked_extensions(extensions: Sequence[object]) -> tuple[Extension, ...]:
    """The extensions, each an `Extension` (a ConfigError names the first that is not)."""
    checked: list[Extension] = []
    for position, extension in enumerate(extensions):
        if not isinstance(extension, Extension):
            raise ConfigError(
                f"extensions[{position}] is a {type(extension).__name__}, not an "
                "unbounded.Extension: subclass Extension and override the hooks you need "
                "(an attach(session) that appends to the session's listener lists is no "
                "longer called; docs/session.md, Extensions)"
            )
        checked.append(extension)
    return tuple(checked)


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """Where the context stands now."""

    tokens: int
    reported_tokens: int
    estimated_tokens: int
    percent_left: int
    level: WarningLevel
    thresholds: Thresholds
    compactions: int
    consecutive_failures: int
    microcompacts: int
    last_summary: SummaryAuthor | None = None
    """Who wrote the last compaction's summary (the model, the offline hand-over, the session
    notes), why a fallback did, and the model requests it took; None before any."""
    summary_requests: int = 0
    """Model requests already spent on a compaction that has not landed yet (its summary
    failed); at most `Policy.compact_max_summary_requests`."""


def _stored_calibration(value: object) -> float | None:
    """The calibration a state document holds (saved as null before any usage arrived)."""
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        raise ConfigError(
            f"the stored session state ({STATE_NAME!r}) has a calibration of {value!r}, "
            "not a number or null; delete that state document to start it afresh"
        )
    return float(value) if value > 0 else None


@dataclass(slots=True)
class _Tracking:
    """Persisted pipeline counters (circuit breaker and recompaction tracking); how many
    compactions and microcompactions ran is `MicrocompactStats`' to count."""

    consecutive_failures: int = 0
    turns: int = 0
    turns_at_last_compaction: int | None = None
    last_compaction_turn_id: str | None = None
    idle_expiries: int = 0
    """Times the 5-minute cache expired during a pause shorter than an hour."""
    summary_requests: int = 0
    """Model requests spent on the summary of the compaction not landed yet (failed runs)."""
    last_summary: SummaryAuthor | None = None
    """Who wrote the last compaction's summary."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "idle_expiries": self.idle_expiries,
            "consecutive_failures": self.consecutive_failures,
            "turns": self.turns,
            "turns_at_last_compaction": self.turns_at_last_compaction,
            "last_compaction_turn_id": self.last_compaction_turn_id,
            "summary_requests": self.summary_requests,
            "last_summary": self.last_summary.to_dict() if self.last_summary else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Tracking:
        tracking = cls()
        for key in tracking.to_dict():
            if key in data and key != "last_summary":
                setattr(tracking, key, data[key])
        author = data.get("last_summary")
        tracking.last_summary = SummaryAuthor.from_dict(author) if author else None
        return tracking


def _load_micro(state: Mapping[str, Any], cleared: Mapping[str, Any] | None) -> MicrocompactState:
    """The stored microcompaction state: the session document's, with the cleared ids of
    their own document (a document saved before they were apart holds them itself)."""
    if "microcompact" not in state:
        return MicrocompactState()
    data = state["microcompact"]
    if cleared is not None and isinstance(data, Mapping):
        if cleared.get("version") != 1:
            raise ConfigError(
                f"the stored state {CLEARED_STATE_NAME!r} has version "
                f"{cleared.get('version')!r}, not 1; delete that state document to start it afresh"
            )
        data = {**data, "cleared": cleared.get("cleared", [])}
    return MicrocompactState.from_dict(data)


T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Session:
    """One conversation kept inside the window (see the module docstring)."""

    def __init__(
        self,
        config: SessionConfig,
        *,
        store: SessionStore | None = None,
        policy: Policy | str | Path | None = None,
        summarizer: Provider | None = None,
        model_table: ModelTable | None = None,
        events: EventSink | None = None,
        hooks: Any | None = None,
        allowed_roots: Sequence[str | Path] | None = None,
        rehydrate_from: RehydrateSource = "disk",
        diff_dir: str | Path | None = None,
        ttl_eligible: bool | None = None,
        clock: Callable[[], datetime] = _now,
        extensions: Sequence[Extension] = (),
        redact_secrets: bool | Redactor = False,
        telemetry: Telemetry | None = None,
        compaction_tiers: TierChoice | None = None,
    ) -> None:
        if rehydrate_from not in ("disk", "transcript"):
            raise ConfigError(
                f"rehydrate_from must be 'disk' or 'transcript', not {rehydrate_from!r}"
            )
        # What auto_compact runs: None, the defaults; a list, checked here; a function of the
        # defaults, checked on each use (its defaults follow summarizer and the extensions).
        if compaction_tiers is not None and not callable(compaction_tiers):
            compaction_tiers = tier_slots(compaction_tiers, name="compaction_tiers")
        self._compaction_tiers: TierChoice | None = compaction_tiers
        self.redactor = redactor_for(redact_secrets)
        """Redacts what the session writes (None: `redact_secrets` off)."""
        self.telemetry = telemetry or default_telemetry()
        """Spans and metrics (`unbounded.telemetry`; nothing without opentelemetry-api)."""
        if self.redactor is not None:
            # Events and spans leave the process too: their text is redacted on the way out.
            events = redacting_sink(events, self.redactor)
            self.telemetry = self.telemetry.redacting(self.redactor.redact)
        self._model_table = model_table or load_model_table()
        if isinstance(policy, (str, Path)):
            policy = Policy.from_file(policy)  # a policy file, e.g. one `unbounded tune` wrote
        self._base_policy = policy or Policy.from_env()
        # Budgets scaled for a small window (and a window too small refused) before anything
        # is opened, so a bad configuration holds no lock.
        self._settings: DerivedSettings = derive_settings(
            config, self._base_policy, self._model_table
        )
        self.store: SessionStore = store or MemoryStore()
        self._closed = False
        self.summarizer = summarizer
        """The summarizer chosen for this session (None: the model given to `call`)."""
        self._call_provider: Provider | None = None
        """The provider of the last `call`: the model summaries and notes use by default."""
        self.hooks = hooks
        self.extensions: tuple[Extension, ...] = _checked_extensions(extensions)
        """The session's extensions, whose hooks run in this order."""
        self.allowed_roots = [str(r) for r in allowed_roots] if allowed_roots is not None else None
        self.rehydrate_from: RehydrateSource = rehydrate_from
        self._events = events
        self._clock = clock
        self.detector = PromptCacheBreakDetector(
            self.policy,
            diff_dir=diff_dir,
            sink=events,
            write_diff=private_diff_writer(self.redactor),
            messages_immutable=True,  # the pipeline replaces messages, never edits them
        )
        transcript = self.store.load()
        self.warnings = list(transcript.warnings) + transcript.thread_report().warnings()
        self.entries: list[Entry] = transcript.main_thread()
        self._compacted_before = any(e.is_compact_boundary for e in self.entries)
        """The history holds a compaction (recall has something to bring back)."""
        state = self.store.load_state(STATE_NAME) or {}
        self.micro = _load_micro(state, self.store.load_state(CLEARED_STATE_NAME))
        self.tracking = _Tracking.from_dict(state.get("tracking", {}))
        stored_ttl = CacheTtlLatch.from_dict(state["ttl"]) if "ttl" in state else None
        self.ttl_latch: CacheTtlLatch = latch_cache_ttl(
            stored_ttl, policy=self.policy, model=self.model_info, eligible=ttl_eligible
        )
        self.last_request: ProviderRequest | None = None
        self._breakpoints = CacheBreakpointPlanner()
        self.marked_messages: tuple[int, ...] = ()
        """Indices of the last request's messages that carry a cache marker."""
        self._recorded = RecordedState()
        """What compactions read of the transcript (its working state), read once per entry."""
        self.recall_index = TranscriptIndex()
        """The transcript's tool calls, for recall and receipts (brought up to date on use)."""
        self._level: WarningLevel = "ok"
        self._request_params: (
            tuple[tuple[object, ...], CacheSafeParams, tuple[object, ...]] | None
        ) = None
        """The parameters of the session's own requests, while config and policy stay."""
        self._saved_state: dict[str, Any] | None = None
        """What was last written to the store's state document."""
        self._saved_cleared: tuple[dict[str, int], int] | None = None
        """The cleared-ids dict last written (and its size then): ids are only ever added to
        it until a compaction replaces it, so this tells whether it changed."""
        self._prepare_steps: tuple[TurnStep, ...] = self._default_prepare_steps()
        """What `prepare` runs, in order (extensions hook in through `Extension`)."""
        self._rebuild_view()
        self.calibration = _stored_calibration(state.get("calibration"))
        """Reported tokens / length estimate of the same request, from the last usage seen:
        how far length/4 is off for this session's content (None until a usage arrives)."""
        self._calibrate()
        self._reported_repairs: tuple[str, ...] = ()
        self._early_refused_at: int | None = None
        # Calls left unanswered by the previous process: answered when the session goes on.
        self._resumed_pending = bool(self.pending_tool_use_ids())
        for extension in self.extensions:
            extension.attached(self)

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

    def reconfigure(
        self, config: SessionConfig | None = None, *, policy: Policy | None = None
    ) -> None:
        """Change the config (model, window, system prompt, tools...) or the policy; every
        value derived from them is computed again (the model's limits, the scaled policy, the
        thresholds, the system prompt and tools' overhead that estimates and calibration
        start from). A config the window cannot hold raises `ConfigError` and changes nothing.

        The calibration measured so far is kept: it compared a usage against the request
        that was then sent; the next usage is compared against the new overhead."""
        self._check_open()
        base = policy if policy is not None else self._base_policy
        settings = derive_settings(config or self.config, base, self._model_table)
        self._base_policy = base
        self._settings = settings
        self.detector.policy = settings.policy

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after `close()`."""
        return self._closed

    def close(self) -> None:
        """Release the store (its folder lock). Safe to call twice."""
        if not self._closed:
            self._closed = True
            self.store.close()

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
        store = FolderStore(folder)
        try:
            return cls(config, store=store, **options)
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
        store = FolderStore(folder)
        try:
            if store.load().entries:
                raise ConfigError(f"{folder} already holds a session; open it with Session.open")
            # Built on the empty store first, so a bad configuration writes nothing.
            session = cls(config or SessionConfig(model=model), store=store, **options)
        except BaseException:
            store.close()  # a failed start must not keep the folder locked
            raise
        session.append(transcript.main_thread())
        session._resumed_pending = bool(session.pending_tool_use_ids())
        session._calibrate()
        return session

    # -- the view ----------------------------------------------------------------------------
    def _rebuild_view(self) -> None:
        self.view: list[Entry] = messages_after_compact_boundary(self.entries)
        self._normalizer = MessageNormalizer(self.view)
        self._counter = ContextCounter(self.view)

    @property
    def messages(self) -> list[MessageParam]:
        """The API messages of the current view (before microcompaction)."""
        return self._normalizer.messages

    def status(self) -> SessionStatus:
        """Tokens, percent left and warning level now."""
        tokens = self._counter.total
        return SessionStatus(
            tokens=tokens,
            reported_tokens=self._counter.anchor_tokens,
            estimated_tokens=self._counter.estimated_tokens,
            percent_left=self.thresholds.percent_left(tokens),
            level=self.thresholds.level(tokens),
            thresholds=self.thresholds,
            compactions=self.micro.stats.compactions,
            consecutive_failures=self.tracking.consecutive_failures,
            microcompacts=self.micro.stats.microcompactions,
            last_summary=self.tracking.last_summary,
            summary_requests=self.tracking.summary_requests,
        )

    # -- input ------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries to the transcript and the view (parentUuid chained)."""
        if not entries:
            return
        self._check_open()
        for entry in entries:
            self._repair_text(entry)
        previous = self.entries[-1].uuid if self.entries else None
        for entry in entries:
            if entry.data.get("parentUuid") is None and not entry.is_compact_boundary:
                entry.data["parentUuid"] = previous
            previous = entry.uuid or previous
        self.store.append(entries)
        self.entries.extend(entries)
        if any(e.is_compact_boundary for e in entries):
            self._compacted_before = True
            self._rebuild_view()
            return
        for entry in entries:
            self.view.append(entry)
            self._normalizer.append(entry)
            self._counter.append(entry)

    def _repair_text(self, entry: Entry) -> None:
        """Replace lone surrogates (which neither the transcript nor the API can encode) with
        U+FFFD, in place, and say so in the warnings."""
        try:
            orjson.dumps(entry.data)
        except TypeError:
            repaired, changed = repair_value(entry.data)
            if not changed:
                raise
            entry.data.clear()
            entry.data.update(repaired)
            self.warnings.append(
                f"lone surrogates in {changed} string(s) of a {entry.type} message were "
                "replaced by U+FFFD (text that UTF-8 cannot encode)"
            )

    def add_user(
        self, content: str | Sequence[ContentBlock] | Sequence[dict[str, Any]], **flags: Any
    ) -> Entry:
        """Add a user message (text or blocks).

        Tool calls still waiting for a result are answered first with a synthetic error result
        (the user moved on), unless this message carries their results.
        """
        self._check_open()
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else self._named_results([dict(b) for b in content])
        )
        answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        self._answer_pending_calls("user", except_ids=answered)
        capped = self._cap_blocks(blocks, key_prefix="user")
        stored: str | list[dict[str, Any]] = (
            capped[0]["text"] if isinstance(content, str) else capped
        )
        entry = Entry.user(stored, timestamp=_iso(self._clock()), **flags)
        self.append([entry])
        return entry

    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> Entry:
        """Add tool_result blocks (one user message); an oversized one is capped."""
        self._check_open()
        blocks = []
        for result in results:
            if result.get("type") != "tool_result" or not result.get("tool_use_id"):
                raise ConfigError("add_tool_results takes tool_result blocks with a tool_use_id")
            blocks.append(dict(result))
        blocks = self._named_results(blocks)
        entry = Entry.user(self._cap_blocks(blocks), timestamp=_iso(self._clock()))
        self.append([entry])
        return entry

    def interrupt(self, *, for_tool_use: bool | None = None) -> Entry:
        """Record that the user interrupted: pending tool calls get an "interrupted" result and
        Claude Code's interrupt line is added (use it from a KeyboardInterrupt handler)."""
        self._check_open()
        pending = self.pending_tool_use_ids()
        self._answer_pending_calls("user")
        text = INTERRUPT_FOR_TOOL_USE_TEXT if (for_tool_use or pending) else INTERRUPT_TEXT
        entry = Entry.user([{"type": "text", "text": text}], timestamp=_iso(self._clock()))
        self.append([entry])
        return entry

    def discard_last_reply(self) -> list[Entry]:
        """Take the last reply out of the conversation (a regenerate, or a retry after the
        reply was lost): the next record is chained to the message before it, so the reply
        stays in the transcript on an abandoned branch that reloading leaves out. Returns the
        entries taken out (none when the conversation does not end with a reply)."""
        self._check_open()
        end = len(self.entries)
        start = end
        reply_id: str | None = None
        while start > 0:
            entry = self.entries[start - 1]
            if entry.type != "assistant" or entry.is_sidechain:
                break
            if start < end and entry.message_id != reply_id:
                break  # one response only (its lines share a message id)
            reply_id = entry.message_id
            start -= 1
        removed = self.entries[start:]
        if removed:
            del self.entries[start:]
            self._rebuild_view()
        return removed

    def pending_tool_use_ids(self) -> list[str]:
        """Tool calls of the last response that have no result yet."""
        last = self._normalizer.last()
        if last is None or last["role"] != "assistant":
            return []
        content = last["content"]
        if not isinstance(content, list):
            return []
        return [str(b.get("id")) for b in content if b.get("type") == "tool_use"]

    def _answer_pending_calls(self, reason: str, *, except_ids: set[str] | None = None) -> None:
        """Record a synthetic error result for each tool call still waiting for one."""
        pending = [i for i in self.pending_tool_use_ids() if i not in (except_ids or set())]
        if not pending:
            return
        if self._resumed_pending:
            reason = "resume"
        self._resumed_pending = False
        entry = Entry.user(
            [interrupted_result(tool_id) for tool_id in pending],
            timestamp=_iso(self._clock()),
            extra={"toolUseResult": "interrupted"},
        )
        self.append([entry])
        emit(self._events, ToolCallsInterrupted(tuple(pending), reason))

    def _cap_blocks(
        self, blocks: list[dict[str, Any]], *, key_prefix: str = ""
    ) -> list[dict[str, Any]]:
        """Blocks with every oversized text cut to head and tail, the full text kept aside."""
        limit = self.policy.tool_result_max_tokens
        if limit <= 0:
            return blocks
        out: list[dict[str, Any]] = []
        for block in blocks:
            tool_id = block.get("tool_use_id")
            key = str(tool_id) if tool_id else f"{key_prefix or 'text'}-{uuid_module.uuid4().hex}"
            new, capped = cap_block_texts(
                block,
                limit,
                key,
                self.store.save_tool_output,
                redact=self.redactor.redact if self.redactor is not None else None,
            )
            for item in capped:
                emit(
                    self._events,
                    ToolOutputCapped(
                        tool_use_id=str(tool_id) if tool_id else None,
                        original_chars=item.original_chars,
                        kept_chars=len(item.text),
                        saved_to=item.saved_to,
                    ),
                )
            out.append(new)
        return out

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
        now = self._clock()
        content, renamed = self._distinct_call_ids(content)
        if renamed:
            # A provider that repeats tool_use ids (or sends ids the API refuses): the call is
            # renamed here, its result renamed to match when it is added (model/tool_ids.py).
            extra = {**(extra or {}), RENAMED_FIELD: renamed}
        if message_id and self._repeats_previous_response_id(message_id):
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
            timestamp=_iso(now),
            extra=dict(extra) if extra else None,
        )
        self.append([entry])
        self.tracking.turns += 1
        self._calibrate()
        if usage:
            self.micro.observe_response(usage, self.policy)
            recorded = {"gen_ai.request.model": entry.model or self.config.model}
            with self.telemetry.span("unbounded.record", {**recorded, **usage_attributes(usage)}):
                # The detector reports breaks to the session's event sink itself.
                check = self.detector.check_response_for_cache_break(
                    usage, query_source=self.config.query_source, now=now.timestamp()
                )
                if isinstance(check, CacheBreak):
                    with self.telemetry.span(
                        "unbounded.cache_break",
                        {
                            "unbounded.cache_break.reason": str(check.reason),
                            "unbounded.cache_break.previous_read": check.previous_read,
                            "unbounded.cache_break.current_read": check.current_read,
                        },
                    ):
                        pass
        self._save_state()
        for extension in self.extensions:
            extension.after_record(self, entry)
        return entry

    def _distinct_call_ids(
        self, content: list[Any]
    ) -> tuple[list[Any], dict[str, str]]:
        """The reply's blocks with each tool_use id that is taken in this session, or that the
        API would refuse, renamed (`renamed_tool_id`), and {new name: id the provider gave}."""
        # The index's own dict, read in place (a set of it per reply would cost O(history)),
        # with this reply's names beside it.
        taken = ChainMap[str, object](
            {}, cast(dict[str, object], self.recall_index.update(self.entries).calls)
        )
        renamed: dict[str, str] = {}
        out: list[Any] = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                tool_id = str(block.get("id"))
                name = renamed_tool_id(tool_id, taken)
                if name != tool_id:
                    renamed[name] = tool_id
                    block = {**block, "id": name}
                taken[name] = block
            out.append(block)
        return out, renamed

    def _named_results(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Results for renamed calls named as the calls are: a host answers with the ids the
        provider gave (`_distinct_call_ids`)."""
        renamed: Mapping[str, str] = {}
        for entry in reversed(self.entries):
            if entry.type == "assistant":
                found = entry.data.get(RENAMED_FIELD)
                renamed = found if isinstance(found, Mapping) else {}
                break
        if not renamed:
            return blocks
        calls = [(str(renamed.get(name, name)), name) for name in self.pending_tool_use_ids()]
        return name_results(blocks, calls)

    def _repeats_previous_response_id(self, message_id: str) -> bool:
        """Whether the last response recorded has this id, with only its tool results after
        it: the transcript would read the next lines with that id as the same response."""
        for entry in reversed(self.entries):
            if entry.type == "assistant":
                return entry.message_id == message_id
            if entry.type in ("system", "progress"):
                continue
            if entry.type != "user" or not is_tool_result_only(entry.content):
                return False
        return False

    # -- the pipeline --------------------------------------------------------------------------
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
        with self.telemetry.span("unbounded.prepare", attributes) as span:
            request = await self._prepare()
            tokens = self._counter.total
            window = self.model_info.context_window
            set_attributes(
                span,
                {"unbounded.context.tokens": tokens, "unbounded.context.level": self._level},
            )
            self.telemetry.context_usage(tokens, window, attributes)
            return request

    async def _prepare(self) -> ProviderRequest:
        self._check_open()
        turn = TurnContext(now=self._clock())
        for step in self._prepare_steps:
            await step(turn)
        return turn.built_request()

    def _default_prepare_steps(self) -> tuple[TurnStep, ...]:
        """The pipeline, in order (unbounded/turn.py says what each step does)."""
        return (
            self._answer_pending_calls_step,
            self._before_prepare,
            self._upgrade_cache_ttl,
            self._auto_compact_step,
            self._microcompact_step,
            self._build_request,
            self._place_breakpoints,
            self._attach_cache_edits,
            self._before_request,
            self._validate_request,
            self._record_prompt_state,
            self._finish_turn,
        )

    async def _answer_pending_calls_step(self, turn: TurnContext) -> None:
        self._answer_pending_calls("prepare")

    async def _before_prepare(self, turn: TurnContext) -> None:
        for extension in self.extensions:
            await extension.before_prepare(self)

    async def _before_request(self, turn: TurnContext) -> None:
        for extension in self.extensions:
            await extension.before_request(self, turn)

    async def _upgrade_cache_ttl(self, turn: TurnContext) -> None:
        self._maybe_upgrade_ttl()

    async def _auto_compact_step(self, turn: TurnContext) -> None:
        await self._maybe_auto_compact()

    async def _microcompact_step(self, turn: TurnContext) -> None:
        now = turn.now
        last_assistant_at = self._last_assistant_time()
        self._prepare_recall_handles()
        with self.telemetry.span("unbounded.microcompaction") as span:
            result = microcompact(
                self._normalizer.messages,
                self.micro,
                policy=self._microcompact_policy(now, last_assistant_at),
                now=now,
                last_assistant_at=last_assistant_at,
                cache_edits_supported=self.config.cache_edits_supported,
            )
            set_attributes(
                span,
                {
                    "unbounded.microcompaction.tier": result.tier,
                    "unbounded.microcompaction.cleared": len(result.cleared_ids)
                    + len(result.deleted_ids),
                    "unbounded.microcompaction.tokens_saved": result.tokens_saved,
                    "unbounded.microcompaction.breaks_cache": result.breaks_cache,
                },
            )
        turn.microcompaction = result
        turn.messages = result.messages  # a new list each turn, never edited after
        # Compared at C speed with what the planner took last turn: what later steps reuse.
        turn.first_changed = self._breakpoints.reusable_prefix(turn.messages)
        if result.tier != "none":
            emit(
                self._events,
                MicrocompactApplied(
                    tier=result.tier,
                    cleared=len(result.cleared_ids) + len(result.deleted_ids),
                    tokens_saved=result.tokens_saved,
                    breaks_cache=result.breaks_cache,
                ),
            )
            self._write_microcompact_receipt(result)

    async def _build_request(self, turn: TurnContext) -> None:
        key = (self.config, self.policy, self.model_info, self.offers_recall)
        tools = tuple(extension.tools_state(self) for extension in self.extensions)
        memo = self._request_params
        if (
            memo is None
            or any(a is not b for a, b in zip(memo[0], key, strict=True))
            or memo[2] != tools
        ):
            memo = self._request_params = (key, self.cache_safe_params(), tools)
        turn.request = memo[1].request(turn.messages, shared=True)

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

    async def _place_breakpoints(self, turn: TurnContext) -> None:
        ttl, prefix_ttl = self.cache_ttls()
        request = turn.built_request()
        # The hint holds for the turn's own messages (a step may have put others in).
        same = turn.first_changed if request.get("messages") is turn.messages else None
        plan = self._breakpoints.plan(
            request, ttl=ttl, prefix_ttl=prefix_ttl, unchanged_prefix=same
        )
        turn.request = plan.request
        self.marked_messages = plan.marked_messages

    async def _attach_cache_edits(self, turn: TurnContext) -> None:
        result = turn.microcompaction
        if result is None:
            return
        if result.cache_edits:
            turn.request = with_cache_edits(turn.built_request(), result.cache_edits)
        if result.new_cache_edits:
            self.detector.notify_cache_deletion(
                self.config.query_source,
                self.micro.cached.pending_deleted_tokens,
                cache_deleted_baseline=self.micro.cache_deleted_input_tokens,
            )

    async def _validate_request(self, turn: TurnContext) -> None:
        self._report_repairs()
        if self.config.validate_requests:
            validate_request(turn.built_request()["messages"])

    async def _record_prompt_state(self, turn: TurnContext) -> None:
        self.detector.record_prompt_state(
            turn.built_request(), query_source=self.config.query_source, now=turn.now.timestamp()
        )

    async def _finish_turn(self, turn: TurnContext) -> None:
        self.last_request = turn.built_request()
        self._warn_if_needed()
        self._save_state()

    def _report_repairs(self) -> None:
        """Emit a RequestRepaired event when the view needed new repairs to be valid."""
        repairs = tuple(f"{r.kind}@{r.index}" for r in self._normalizer.repairs)
        if repairs and repairs != self._reported_repairs:
            emit(self._events, RequestRepaired(repairs))
        self._reported_repairs = repairs

    def _microcompact_policy(self, now: datetime, last_assistant_at: datetime | None) -> Policy:
        """The policy for this turn's microcompaction (`compaction.decisions`)."""
        return microcompact_policy(
            self._settings.clearing,
            now=now,
            last_reply_at=last_assistant_at,
            ttl=self.ttl_latch.ttl_for(self.config.query_source),
            tokens=self._counter.total,
            warning_threshold=self.thresholds.warning,
            cache_edits_supported=self.config.cache_edits_supported,
        )

    def _last_assistant_time(self) -> datetime | None:
        for entry in reversed(self.view):
            if entry.type == "assistant" and not entry.is_synthetic_api_error:
                return entry.time
        return None

    def _calibrate(self) -> None:
        """Update `calibration` from the counter's anchor (its usage against our estimate)."""
        counter = self._counter
        if not counter.anchored:
            return
        exact = self.config.system_tokens
        if exact is None:
            estimate = self._settings.overhead_raw + counter.raw_estimate_at_anchor
            reported = counter.anchor_tokens
        else:  # a known system size is not estimated, so only the messages are calibrated
            estimate = counter.raw_estimate_at_anchor
            reported = counter.anchor_tokens - exact
        if estimate > 0 and reported > 0:
            ratio = reported / estimate
            self.calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN, ratio))

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

    def _warn_if_needed(self) -> None:
        status = self.status()
        if status.level != self._level and status.level != "ok":
            emit(self._events, ContextWarning(status.level, status.tokens, status.percent_left))
        self._level = status.level

    async def _maybe_auto_compact(self) -> None:
        tokens = self._counter.total
        query_source = self.config.query_source
        if should_auto_compact(self.policy, self.thresholds, tokens, query_source=query_source):
            await self.auto_compact()
            return
        if not auto_compaction_allowed(self.policy, query_source=query_source):
            return
        reason = early_compaction_reason(
            self.policy,
            self.thresholds,
            tokens=tokens,
            overhead=self.estimate_request_tokens([]),
            cache_expired=self._cache_expired(),
            cache_edits_supported=self.config.cache_edits_supported,
            refused_at=self._early_refused_at,
            free_compaction_available=self._free_compaction_available,
        )
        if reason is None:
            return
        if await self._compact_early(reason) is None:
            self._early_refused_at = tokens

    def _maybe_upgrade_ttl(self) -> None:
        """Count a pause towards the 1-hour cache TTL, and switch to it when it pays
        (`compaction.decisions.decide_ttl_upgrade`)."""
        upgrade = decide_ttl_upgrade(
            self.ttl_latch,
            query_source=self.config.query_source,
            model=self.model_info,
            policy=self.policy,
            now=self._clock(),
            last_reply_at=self._last_assistant_time(),
            idle_expiries=self.tracking.idle_expiries,
        )
        if upgrade is None:
            return
        self.tracking.idle_expiries = upgrade.idle_expiries
        if upgrade.prefix_upgraded:
            emit(self._events, CacheTtlUpgraded(upgrade.idle_expiries, part="prefix"))
        if upgrade.latch is not None:
            self.ttl_latch = upgrade.latch
            emit(self._events, CacheTtlUpgraded(upgrade.idle_expiries))

    def _cache_expired(self) -> bool:
        """The gap since the last response is over the session's cache TTL."""
        ttl = self.ttl_latch.ttl_for(self.config.query_source)
        return cache_expired(self._clock(), self._last_assistant_time(), ttl)

    def _free_compaction_available(self) -> bool:
        """A compaction without a summary call: session notes exist to compact from."""
        if not any(_offers_memory_compaction(e) for e in self.extensions):
            return False
        notes = self.store.read_memory()
        return bool(notes and notes.strip())

    async def _compact_early(self, reason: str) -> CompactionResult | None:
        """A session-memory compaction before the threshold (None when it is refused: also
        when it would free less than `Policy.early_compact_min_saving` of the context, or
        `cold_cache_compact_min_saving` at a cold-cache moment)."""
        tokens = self._counter.total
        policy = self.policy
        saving = (
            policy.cold_cache_compact_min_saving
            if reason == "cold_cache"
            else policy.early_compact_min_saving
        )
        # The limit goes to the compactor so a refused compaction announces and hooks nothing.
        tiers = TieredCompaction(self._memory_tiers(max_post_tokens=int((1 - saving) * tokens)))
        outcome = await tiers.run(
            self.compaction_context(), failures=self.tracking.consecutive_failures
        )
        if outcome.result is None:
            return None
        emit(self._events, EarlyCompaction(reason, tokens, self.thresholds.autocompact))
        self.tracking.consecutive_failures = outcome.failures
        self._apply(outcome.result)
        return outcome.result

    async def auto_compact(self) -> CompactionResult | None:
        """The compaction tiers in order (`compaction_tiers()`: session memory, the summary's
        cache-sharing request, its direct request); the offline hand-over takes over when the
        breaker trips after repeated failures, or the compaction has sent
        `Policy.compact_max_summary_requests` requests (counted across its failed runs).
        Returns the compaction, or None when it failed."""
        with self.telemetry.span(
            "unbounded.compaction", {"unbounded.compaction.trigger": "auto"}
        ) as span:
            tiers = self.compaction_tiers()
            tracking = self.tracking
            before = tracking.consecutive_failures, tracking.summary_requests
            budget = RequestBudget(
                self.policy.compact_max_summary_requests, used=tracking.summary_requests
            )
            context = replace(self.compaction_context(), budget=budget)
            outcome = await TieredCompaction(tiers).run(context, failures=before[0])
            tracking.consecutive_failures = outcome.failures
            if outcome.result is not None:
                self._apply(outcome.result)
            else:
                tracking.summary_requests = outcome.summary_requests
                if (outcome.failures, outcome.summary_requests) != before:
                    self._save_state()
            _compaction_attributes(span, outcome.result)
            return outcome.result

    def model_provider(self) -> Provider | None:
        """The model this session's summaries and session notes are written by: the
        `summarizer` given, else the provider of the last `call` (the conversation's own
        model); None when there is none yet, or the offline hand-over was chosen
        (`summarizer=ExtractiveSummarizer()`)."""
        chosen = self.summarizer if self.summarizer is not None else self._call_provider
        return None if chosen is None or chosen.profile.offline else chosen

    def _offline_summarizer(self) -> tuple[Provider, FallbackReason]:
        """The offline hand-over this session falls back to, and why it runs when there is
        no model: the one given as `summarizer` (asked for), else a default one."""
        if self.summarizer is not None and self.summarizer.profile.offline:
            return self.summarizer, "asked_for"
        return self._extractive(), "no_model"

    def compaction_tiers(self) -> tuple[TierEntry, ...]:
        """What `auto_compact` runs: the `compaction_tiers` given to the session, or
        `default_compaction_tiers()`."""
        chosen = self._compaction_tiers
        if chosen is None:
            return self.default_compaction_tiers()
        if callable(chosen):
            return tier_slots(
                chosen(self.default_compaction_tiers()), name="compaction_tiers(defaults)"
            )
        return tuple(chosen)

    def default_compaction_tiers(self) -> tuple[TierEntry, ...]:
        """The tiers cheapest first: the session notes (an extension's `compact_from_memory`),
        then the model's cache-sharing request and its direct request (`model_provider()`) until the
        circuit breaker trips or the summary requests are spent, the offline hand-over's two
        after (without a model, throughout)."""
        offline, reason = self._offline_summarizer()
        extractive = self.telemetry.traced(offline)
        model = self.model_provider()
        if model is None:
            return (
                *self._memory_tiers(),
                CacheSharingSummaryTier(extractive, fallback=reason),
                DirectSummaryTier(extractive, fallback=reason),
            )
        from unbounded.compaction.native import arrange_tiers, native_tiers

        summarizer = self.telemetry.traced(model)  # one wrapper: the two share a summary
        return (
            *self._memory_tiers(),
            *arrange_tiers(
                self.policy.compaction_tier_order,
                native=native_tiers(summarizer, self.model_info),
                summary=(
                    TierSlot(CacheSharingSummaryTier(summarizer), "closed"),
                    TierSlot(DirectSummaryTier(summarizer), "closed"),
                ),
                offline=(
                    TierSlot(CacheSharingSummaryTier(extractive), "open"),
                    TierSlot(DirectSummaryTier(extractive), "open"),
                ),
            ),
        )

    def _memory_tiers(self, *, max_post_tokens: int | None = None) -> tuple[SessionMemoryTier, ...]:
        """The session-memory tier over the extensions' `compact_from_memory` (none when no
        extension offers one): the first that compacts wins."""
        offering = [e for e in self.extensions if _offers_memory_compaction(e)]
        if not offering:
            return ()

        async def from_notes(_: CompactionContext, limit: int | None) -> CompactionResult | None:
            # The hook takes the session (it builds the context it needs).
            for extension in offering:
                result = await extension.compact_from_memory(self, max_post_tokens=limit)
                if result is not None:
                    return result
            return None

        return (SessionMemoryTier(from_notes, max_post_tokens=max_post_tokens),)

    def _extractive(self) -> Provider:
        from unbounded.providers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()

    async def compact(
        self,
        *,
        instructions: str | None = None,
        pivot: str | None = None,
        direction: PartialDirection | None = None,
    ) -> CompactionResult:
        """Manual compaction (`/compact`), optionally partial around a pivot record."""
        self._check_open()
        self._answer_pending_calls("prepare")
        model = self.model_provider()
        provider, reason = (model, None) if model is not None else self._offline_summarizer()
        with self.telemetry.span(
            "unbounded.compaction", {"unbounded.compaction.trigger": "manual"}
        ) as span:
            tier = SummaryTier(
                self.telemetry.traced(provider),
                trigger="manual",
                instructions=instructions,
                pivot=pivot,
                direction=direction,
                fallback=reason,
            )
            budget = RequestBudget(self.policy.compact_max_summary_requests)
            # compact_conversation reports its own failures (CompactionFailed) to the sink.
            result = await tier.summarize(replace(self.compaction_context(), budget=budget))
            self._apply(result)
            _compaction_attributes(span, result)
            return result

    def compaction_context(self) -> CompactionContext:
        """What a compaction of this conversation reads now (`compaction.context`)."""
        tracking = self.tracking
        metadata: dict[str, Any] = {
            "querySource": self.config.query_source,
            "autoCompactThreshold": self.thresholds.autocompact,
            "isRecompactionInChain": tracking.turns_at_last_compaction is not None,
        }
        if tracking.turns_at_last_compaction is not None:
            metadata["turnsSincePreviousCompact"] = (
                tracking.turns - tracking.turns_at_last_compaction
            )
            metadata["previousCompactTurnId"] = tracking.last_compaction_turn_id
        ttl, prefix_ttl = self.cache_ttls()
        return CompactionContext(
            entries=self.entries,
            view=self.view,
            policy=self.policy,
            params=self.cache_safe_params(),
            autocompact_threshold=self.thresholds.autocompact,
            tokens=self._counter.total,
            calibration=self.calibration,
            estimate_request_tokens=self.estimate_request_tokens,
            transcript_path=self.store.transcript_path,
            notes_path=self.store.memory_path,
            read_notes=self.store.read_memory,
            allowed_roots=self.allowed_roots,
            rehydrate_from=self.rehydrate_from,
            recorded=self._recorded,
            hooks=self.hooks,
            events=self._events,
            boundary_metadata=metadata,
            # The prefix the main requests sent (earlier clears applied), so the fork shares it.
            sent_messages=self.micro.apply_clears(self._normalizer.messages),
            planner=lambda request, skip: place_cache_breakpoints(
                request, ttl=ttl, prefix_ttl=prefix_ttl, skip_cache_write=skip
            ),
            facts_ledger=default_facts_ledger,
            keep_from=turn_tail_start(self.entries, self.view),
        )

    def _apply(self, result: CompactionResult) -> None:
        """Append a compaction and clean up what referred to the old messages (seed 004)."""
        self._early_refused_at = None
        receipt = self._compaction_receipt(result)
        if self.redactor is not None:
            # A summary may quote a secret cut short, or a piece of one: the secrets found in
            # what it summarized are redacted wherever they appear in it, whole or in pieces.
            redactor = self.redactor.learning_from(strings_in([e.content for e in self.view]))
            redact_compaction(result, redactor)
            receipt = result.boundary.compact_metadata.get(RECEIPT_KEY, receipt)
        self.append(result.new_entries())
        emit(
            self._events,
            ReceiptWritten(
                source="compaction",
                trigger=str(result.boundary.compact_metadata.get("trigger") or "?"),
                tool_results=len(receipt["toolResults"]),
                tokens=int(receipt["tokens"]),
                files=tuple(receipt["files"]),
                record_uuid=result.boundary.uuid,
            ),
        )
        self.micro.reset_after_compaction()
        self.detector.notify_compaction(self.config.query_source)
        self.tracking.turns_at_last_compaction = self.tracking.turns
        self.tracking.last_compaction_turn_id = result.boundary.uuid
        self.tracking.last_summary = result.author
        self.tracking.summary_requests = 0  # the next compaction has a budget of its own
        for extension in self.extensions:
            extension.after_compact(self, result)
        self._save_state()

    # -- recall and receipts ----------------------------------------------------------------------
    @property
    def offers_recall(self) -> bool:
        """Whether requests offer the `recall` tool now: `Policy.recall_enabled`, tools in
        use, and something already taken out of the context (`Policy.recall_from_start`:
        from the first request)."""
        if not offers_recall(self.config.tools, self.policy):
            return False
        return self.policy.recall_from_start or self._removed_from_context()

    def _removed_from_context(self) -> bool:
        """A result was cleared or deleted from the cache, or the history was compacted."""
        stats = self.micro.stats
        return bool(
            stats.compactions
            or stats.results_cleared
            or stats.cache_refs_deleted
            or self._compacted_before
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
                return await extension.answer_tool(self, tool_use)
        raise ConfigError(f"this session answers no calls of the tool {name!r}")

    def run_recall(self, tool_use: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a `recall` tool_use block from this session's transcript.

        Returns the tool_result block to send back (add it with `add_tool_results`, with the
        results of the other calls of the same reply); wrong arguments give an `is_error`
        result that says what to fix. Only this session's records, and the outputs its store
        kept, are read; the answer is at most `Policy.recall_max_tokens` long.
        """
        self._check_open()
        context = RecallContext(
            entries=self.entries,
            view=self.view,
            cleared_ids=self.micro.cleared_ids,
            index=self.recall_index.update(self.entries),
            budget_tokens=self.policy.recall_max_tokens,
            load_output=self.store.load_tool_output,
            receipts=receipts_in(self.entries),
        )
        result, answer = recall_tool_result(tool_use, context)
        emit(
            self._events,
            RecallServed(
                tool_use_id=str(result["tool_use_id"]),
                lookup=answer.lookup if answer is not None else "invalid",
                found=answer is not None and answer.found,
                tokens=answer_tokens(result),
            ),
        )
        return result

    def _prepare_recall_handles(self) -> None:
        """Placeholders name recall handles while the tool is offered, and recall's own
        results may be cleared again like any reproducible output."""
        # Whatever is cleared turns recall on (offers_recall), so placeholders name handles
        # from the first clear on and read the same bytes every turn after it.
        offered = offers_recall(self.config.tools, self.policy)
        self.micro.name_handles = offered
        if offered:
            self.micro.register_compactable(RECALL_TOOL_NAME)

    def _write_microcompact_receipt(self, result: Any) -> None:
        """Append the receipt of a microcompaction that took results out (a system record)."""
        ids = tuple(result.cleared_ids) + tuple(result.deleted_ids)
        if not ids:
            return
        ledger = self.micro.ledger
        tokens = {}
        for tool_id in ids:
            record = ledger.get(tool_id)
            tokens[tool_id] = record.tokens if record is not None else 0
        receipt = microcompact_receipt(
            result.tier,
            ids,
            index=self.recall_index.update(self.entries),
            tokens=tokens,
            tokens_saved=result.tokens_saved,
            breaks_cache=result.breaks_cache,
        )
        if self.redactor is not None:
            receipt = self.redactor.redact_data(receipt)
        entry = microcompact_receipt_entry(receipt, timestamp=_iso(self._clock()))
        self.append([entry])
        emit(
            self._events,
            ReceiptWritten(
                source="microcompaction",
                trigger=result.tier,
                tool_results=len(ids),
                tokens=result.tokens_saved,
                files=tuple(receipt["files"]),
                record_uuid=entry.uuid,
            ),
        )

    def _compaction_receipt(self, result: CompactionResult) -> dict[str, Any]:
        """Write the receipt into the boundary, and the recall note into the summary."""
        kept = {entry.uuid for entry in result.messages_to_keep if entry.uuid}
        dropped = [e for e in self.view if e.uuid not in kept and not e.is_compact_boundary]
        receipt = compaction_receipt(
            dropped,
            index=self.recall_index.update(self.entries),
            summary_text=result.summary_text,
            summarizer=result.summarizer,
            already_cleared=self.micro.cleared_ids,
        )
        result.boundary.compact_metadata[RECEIPT_KEY] = receipt
        # This compaction takes history out: recall is offered from now on (offers_recall).
        if offers_recall(self.config.tools, self.policy) and result.summary_messages:
            summary = result.summary_messages[0]
            message = summary.message
            if message is not None and isinstance(message.get("content"), str):
                message["content"] = f"{message['content']}\n\n{recall_note(receipt)}"
        return receipt

    # -- one whole turn ---------------------------------------------------------------------------
    async def call(self, provider: Provider, *, stream: bool = False) -> ModelResponse:
        """Prepare, send, record. A prompt-too-long answer is held back, the conversation is
        compacted once and the request retried; if that fails too, the error is raised.

        Without a `summarizer` of its own, the session writes its summaries (and a
        `SessionMemory` without an updater its notes) with `provider` from now on."""
        self._call_provider = provider
        flow = turn_flow(self)

        async def send(request: ProviderRequest) -> ModelResponse:
            return await provider.create(request, stream=stream)

        return await drive_turn(flow, send, lambda response: response)

    # -- persistence ---------------------------------------------------------------------------
    def _save_state(self) -> None:
        cleared = self.micro.cleared
        saved = self._saved_cleared
        if saved is None or saved[0] is not cleared or saved[1] != len(cleared):
            # Written first: a crash before the main document keeps ids known as cleared.
            pairs = self.micro.cleared_pairs()
            self.store.save_state(CLEARED_STATE_NAME, {"version": 1, "cleared": pairs})
            self._saved_cleared = (cleared, len(cleared))
        state = {
            "microcompact": self.micro.to_dict(with_cleared=False),
            "tracking": self.tracking.to_dict(),
            "ttl": self.ttl_latch.to_dict(),
            "calibration": self.calibration,
        }
        if state == self._saved_state:
            return  # most turns change nothing persisted: no write (a file per turn saved)
        self.store.save_state(STATE_NAME, state)
        self._saved_state = state

    def write_notes(self, text: str) -> None:
        """Replace the session notes in the store (secrets redacted when the session redacts)."""
        if self.redactor is not None:
            text = self.redactor.redact(text)
        self.store.write_memory(text)

    def events_sink(self) -> EventSink | None:
        """Where this session's events go (extensions emit through it)."""
        return self._events


class SyncSession:
    """`Session` with blocking methods: each async step runs to completion on one event loop
    kept for the session's life (`unbounded.blocking.BlockingRunner`: a loop per call costs
    more than a turn, and would strand what an extension started on the previous one).
    Inside a running event loop the kept loop runs on a worker thread (the blocking rule)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._runner = BlockingRunner()

    @classmethod
    def open(cls, folder: str | Path, config: SessionConfig, **options: Any) -> SyncSession:
        """A folder-backed session (`Session.open`)."""
        return cls(Session.open(folder, config, **options))

    @classmethod
    def from_transcript(
        cls, path: str | Path, folder: str | Path, config: SessionConfig | None = None,
        **options: Any,
    ) -> SyncSession:
        """A new session continuing a transcript (`Session.from_transcript`)."""
        return cls(Session.from_transcript(path, folder, config, **options))

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
        self, config: SessionConfig | None = None, *, policy: Policy | None = None
    ) -> None:
        """`Session.reconfigure`."""
        self.session.reconfigure(config, policy=policy)

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
        result: dict[str, Any] = self._runner.run(self.session.answer_tool(tool_use))
        return result

    def write_notes(self, text: str) -> None:
        """`Session.write_notes`."""
        self.session.write_notes(text)

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


__all__ = [
    "Extension",
    "Session",
    "SessionConfig",
    "SessionStatus",
    "SyncSession",
]
