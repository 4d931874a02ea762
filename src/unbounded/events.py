"""Every typed event the library emits instead of printing: a CLI, a UI or telemetry consumes
them through an `EventSink`. All of them are defined here (an extension of your own may
subclass `Event` too), so a consumer matches on classes, never on names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from unbounded.model.response import ModelResponse


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every event."""

    @property
    def kind(self) -> str:
        """The event's name in snake_case (e.g. compaction_finished)."""
        name = type(self).__name__
        return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


@dataclass(frozen=True, slots=True)
class CompactionStarted(Event):
    """A compaction began."""

    trigger: str
    pre_tokens: int
    partial: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionHeartbeat(Event):
    """Sent every few seconds while the summary call runs."""

    elapsed_seconds: float


@dataclass(frozen=True, slots=True)
class CompactionRetried(Event):
    """The summary request was too long; the oldest rounds were dropped and it is retried."""

    attempt: int
    token_gap: int | None
    messages_left: int


@dataclass(frozen=True, slots=True)
class CompactionFinished(Event):
    """A compaction succeeded."""

    trigger: str
    pre_tokens: int
    post_tokens: int
    summary_tokens: int
    summarizer: str
    used_fallback: bool = False
    """The direct request wrote the summary (the cache-sharing one failed)."""
    fallback: str | None = None
    """Why the offline hand-over (or another fallback) wrote it instead of the model:
    `no_model`, `asked_for`, `breaker_open`, `request_budget`; None: the chosen summarizer."""
    summary_requests: int = 0
    """Model requests this compaction sent for its summary, retries and earlier failed
    tries included (bounded by `Policy.compact_max_summary_requests`)."""


@dataclass(frozen=True, slots=True)
class CompactionFailed(Event):
    """A compaction failed; the history is unchanged."""

    trigger: str
    reason: str
    message: str
    summary_requests: int = 0
    """Model requests spent on this compaction's summary so far."""


@dataclass(frozen=True, slots=True)
class SummaryRequestsSpent(Event):
    """A compaction sent as many summary requests as `Policy.compact_max_summary_requests`
    allows: the offline hand-over writes its summary."""

    requests: int
    limit: int


@dataclass(frozen=True, slots=True)
class CacheTtlUpgraded(Event):
    """The session switched to the 1-hour cache TTL at a moment its cache was cold: for the
    tools and system prompt (`part="prefix"`) or for every marker (`part="all"`)."""

    idle_expiries: int
    part: Literal["prefix", "all"] = "all"


@dataclass(frozen=True, slots=True)
class EarlyCompaction(Event):
    """A compaction before the threshold, because it pays now (`cold_cache`: the prompt cache
    expired anyway; `early`: a compaction without a summary call is available)."""

    reason: str
    tokens: int
    threshold: int


@dataclass(frozen=True, slots=True)
class BackgroundSummaryStarted(Event):
    """The context passed the background mark: the summary is being written off the turn's
    path (`Policy.background_summary`)."""

    tokens: int


@dataclass(frozen=True, slots=True)
class BackgroundSummarySwapped(Event):
    """The background summary replaced the history it covers at the threshold; the records
    appended since it started (`kept_since`) follow it verbatim."""

    started_tokens: int
    kept_since: int
    post_tokens: int


@dataclass(frozen=True, slots=True)
class BackgroundSummaryDiscarded(Event):
    """A background summary was dropped: `stale` (what it replaced changed, or a compaction
    came first), `failed`, `too_large` (with what was recorded since it would not end under
    the threshold), `superseded` (another compaction was applied), `closed` (the session),
    `hook` (at the swap a PreCompact hook blocked, or added instructions it was not written
    with: the turn compacts with that answer)."""

    reason: str


@dataclass(frozen=True, slots=True)
class SummaryStall(Event):
    """A turn waited for a summary call: a compaction at the threshold that sent a model
    request in the turn, or waited for the background summary (`background` False: the
    background summary is off). A compaction from the notes or by the offline hand-over
    alone sends no request: no stall."""

    tokens: int
    background: bool


@dataclass(frozen=True, slots=True)
class IdleCompaction(Event):
    """The host said the session is idle and compacting now costs less than the resume would
    (`compaction.idle`): estimated costs of both, in USD."""

    tokens: int
    keep_cost_usd: float
    compact_cost_usd: float


@dataclass(frozen=True, slots=True)
class SummaryRejected(Event):
    """A summary failed the sanity guard (too small for what it replaces, or missing
    sections): the compaction is retried or fails, and nothing is written."""

    summarizer: str
    reason: str
    summary_tokens: int
    floor: int
    missing_sections: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MicrocompactApplied(Event):
    """Stale tool results were cleared (or queued for deletion from the cache)."""

    tier: str
    cleared: int
    tokens_saved: int
    breaks_cache: bool


@dataclass(frozen=True, slots=True)
class ContextWarning(Event):
    """The context crossed a warning level."""

    level: str
    tokens: int
    percent_left: int


@dataclass(frozen=True, slots=True)
class ToolCallsInterrupted(Event):
    """Tool calls that never got a result were answered with a synthetic error result.

    `reason` is `user` (an interrupt or a new prompt came first), `resume` (the session was
    reopened with calls unanswered: a process killed while a tool ran) or `prepare` (a request
    was prepared before the results were added).
    """

    tool_use_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class RequestRepaired(Event):
    """The request needed repairs to be valid (see `MessageNormalizer.repairs`)."""

    repairs: tuple[str, ...]
    """One `kind@message-index` per repair."""


@dataclass(frozen=True, slots=True)
class ToolOutputCapped(Event):
    """A tool result (or user message) was too large and is sent as its head and tail."""

    tool_use_id: str | None
    original_chars: int
    kept_chars: int
    saved_to: str | None
    """Where the full text is kept (a file path), if anywhere."""


@dataclass(frozen=True, slots=True)
class ReactiveCompaction(Event):
    """The API answered prompt-too-long: the conversation is compacted and the call retried."""

    error: str


@dataclass(frozen=True, slots=True)
class CircuitBreakerTripped(Event):
    """Summary calls failed repeatedly: the offline summarizer takes over."""

    failures: int
    error: str


@dataclass(frozen=True, slots=True)
class LangchainCompacted(Event):
    """The LangChain middleware replaced older messages with a summary in the agent state."""

    pre_tokens: int
    messages_summarized: int
    messages_kept: int
    summarizer: str = ""
    """Who wrote the summary (the agent's model, the offline hand-over `extractive`…)."""
    fallback: str | None = None
    """Why the fallback wrote it (see `CompactionFinished.fallback`); None: the model did."""
    summary_requests: int = 0
    """Model requests the compaction sent for its summary."""


@dataclass(frozen=True, slots=True)
class ReceiptWritten(Event):
    """A compaction or microcompaction left a receipt of what it took out of the context
    (`unbounded.recall.receipts`)."""

    source: str
    """compaction or microcompaction."""
    trigger: str
    """auto / manual for a compaction, the tier for a microcompaction."""
    tool_results: int
    tokens: int
    files: tuple[str, ...]
    record_uuid: str | None


@dataclass(frozen=True, slots=True)
class RecallServed(Event):
    """The model called `recall` and the session answered from its transcript."""

    tool_use_id: str
    lookup: str
    """id, path, command, query; invalid for arguments that named nothing."""
    found: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class SessionMemoryUpdated(Event):
    """The session notes were brought up to date (`unbounded.extensions.SessionMemory`)."""

    updater: str
    """Who wrote them: the session's model (`model`), the offline updater (`offline`)…"""
    fallback: str | None
    """Why the offline updater wrote them (`asked_for`, `no_model`, `model_failed`); None:
    the updater chosen."""
    through: str | None
    """uuid of the last message the notes now cover."""
    applied: int
    """Edits applied to the notes."""
    refused: tuple[str, ...]
    """Why the edits that were not applied were refused."""
    tokens: int
    """The notes' length now (estimated tokens)."""


@dataclass(frozen=True, slots=True)
class SessionMemoryUpdateFailed(Event):
    """A notes update failed or timed out; the notes are unchanged."""

    updater: str
    reason: str


@dataclass(frozen=True, slots=True)
class SessionMemoryWaitTimedOut(Event):
    """A compaction waited `seconds` for a notes update in flight and uses the notes as
    they are."""

    seconds: float


@dataclass(frozen=True, slots=True)
class SessionMemoryCompactionSkipped(Event):
    """Session-memory compaction refused (no notes, disabled, too large…): a summary is
    written instead."""

    reason: str


# -- prompt cache (caching/break_detector.py) ------------------------------------------------------


BreakCause = Literal[
    "model",
    "system",
    "tools",
    "cache_control",
    "betas",
    "thinking",
    "effort",
    "extra_body",
    "messages",
    "ttl_expiry",
    "server_side",
]


@dataclass(frozen=True, slots=True)
class CacheBreak(Event):
    """Cache reads dropped more than the thresholds allow, with why."""

    reason: str
    previous_read: int
    current_read: int
    changes: tuple[str, ...]
    diff_path: Path | None
    query_source: str
    causes: tuple[BreakCause, ...] = ()
    gap_seconds: float | None = None

    @property
    def drop(self) -> int:
        """Tokens no longer read from the cache."""
        return self.previous_read - self.current_read


@dataclass(frozen=True, slots=True)
class ExpectedCacheDrop(Event):
    """Cache reads dropped as announced (a compaction, or cache_edits deletions)."""

    reason: Literal["compaction", "cache_deletion"]
    previous_read: int
    current_read: int
    query_source: str
    deleted_tokens: int | None = None


# -- providers (providers/retry.py) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProviderRetried(Event):
    """A provider call failed with a transient error and will be sent again after `delay`."""

    provider: str
    attempt: int
    delay: float
    error: str
    status: int | None
    retry_after: float | None


# -- the drop-in client (integrations/anthropic_client.py) -----------------------------------------


@dataclass(frozen=True, slots=True)
class CacheParamsChanged(Event):
    """A cache-safe parameter changed after a request went out: the prompt cache is re-written."""

    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SideCallPassed(Event):
    """A call that does not continue the conversation (a title, a classifier, a judge) went to
    the SDK as given: nothing recorded, nothing compacted."""

    reason: str
    messages: int


@dataclass(frozen=True, slots=True)
class LastReplyDiscarded(Event):
    """The caller asked again with the list that preceded the last reply (regenerate, or a
    retry after a crash): that reply left the conversation and a new one is asked for."""

    message_id: str | None


# -- the agent loop (integrations/agent_loop.py) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelTurn(Event):
    """The model answered (turn counts from 1)."""

    turn: int
    response: ModelResponse


@dataclass(frozen=True, slots=True)
class ToolExecuted(Event):
    """A tool call was run; `content` is the tool_result content sent back."""

    tool_use_id: str
    name: str
    input: dict[str, Any]
    content: str | list[dict[str, Any]]
    is_error: bool


@dataclass(frozen=True, slots=True)
class AgentFinished(Event):
    """The loop ended: the model answered without tool calls, or `max_turns` was reached."""

    text: str
    stop_reason: str
    turns: int


EventSink = Callable[[Event], None]
"""Where events go: any callable taking an event."""


def emit(sink: EventSink | None, event: Event) -> None:
    """Send an event to a sink when there is one."""
    if sink is not None:
        sink(event)
