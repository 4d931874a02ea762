"""`compact_conversation`: full and partial compaction by a summary call (seeds 000-004).

1. The view is the main thread from the last boundary on (with a partial compaction's
   preserved messages spliced back), so the previous summary is summarized again and
   summaries chain.
2. PreCompact hooks run; their instructions are merged after the caller's.
3. What is summarized: everything (full), the part before a pivot (`up_to`, the rest is kept
   verbatim and the prompt cache of the summarized prefix is reused) or the part from a pivot
   on (`from`, the prefix is kept and keeps its cache). The pivot is moved back to the start
   of an API round so a tool call is never split from its result. Images and documents become
   `[image]` / `[document]` (`[image: URL]` when given by URL), inside tool results too, and
   attachments that are re-injected afterwards are left out.
4. The summary request shares the main conversation's cache: the same system blocks, tools,
   model and thinking config (`CacheSafeParams`) and the same message prefix, the summary
   prompt appended as the last user message, and the message breakpoint on the second-to-last
   message so this one-shot call writes no new cache entry. Its `max_tokens` is the policy's
   compaction budget (`compact_max_output_tokens`, plus any thinking budget, under the
   model's output limit), not the main request's: max_tokens is not part of the cache key,
   and a caller's small reply budget must not cut every summary off. A summary cut off at
   that budget is asked for once more with twice the budget. If the call fails for a reason
   other than length, a direct call with the compact system prompt and the compaction
   output cap is tried (seed 004 "fallback chain").
5. A prompt-too-long answer drops the oldest API rounds and retries, up to 3 attempts.
6. The reply is checked (not empty, not an API error, not cut off, holds a summary; a tool
   call is refused, never run) and formatted; the facts ledger is appended.
7. The result: boundary (trigger, preTokens, messagesSummarized, logicalParentUuid,
   preCompactDiscoveredTools, preservedSegment), the summary message (preamble, summary,
   transcript path, the continue instruction when automatic), re-injected attachments, hook
   results, token counts before and after, and the call's usage. Nothing is written here:
   the caller appends `result.new_entries()` to the transcript, so a failure leaves the
   history untouched.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

from unbounded.compaction.cut import discovered_tools, is_one_run
from unbounded.compaction.extractive import lean_summary_tokens
from unbounded.compaction.prompts import (
    SUMMARY_SYSTEM_PROMPT,
    PartialDirection,
    full_compact_prompt,
    merge_instructions,
    partial_compact_prompt,
    summary_message_text,
)
from unbounded.compaction.ptl import truncate_head_for_ptl_retry
from unbounded.compaction.server_blocks import (
    check_cut_after_server_compaction,
    compaction_blocks_as_text,
    from_last_server_compaction,
    kept_holds_server_compaction,
)
from unbounded.compaction.summary_guard import NINE_SECTIONS, check_summary
from unbounded.compaction.summary_text import check_summary_reply, format_compact_summary
from unbounded.compaction.view_folds import ViewFacts, ViewFolds, holds_rewritten_block
from unbounded.errors import CompactionError, ConfigError, PromptTooLongError, ProviderError
from unbounded.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionHeartbeat,
    CompactionRetried,
    CompactionStarted,
    EventSink,
    SummaryRejected,
    emit,
)
from unbounded.model.content import MessageParam, Usage
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages
from unbounded.model.request import ProviderRequest, SystemBlock
from unbounded.model.request_budget import RequestBudget
from unbounded.model.response import ModelResponse, Provider, call_with_heartbeat
from unbounded.policy import Policy
from unbounded.tokens.estimate import (
    estimate_messages_tokens,
    pre_compaction_tokens,
    rough_token_count,
    token_count_with_estimation,
)

Trigger = Literal["auto", "manual"]

logger = logging.getLogger(__name__)
REINJECTED_ATTACHMENT_TYPES = frozenset(
    {
        "file",
        "compact_file_reference",
        "todo",
        "plan_file_reference",
        "plan_mode",
        "invoked_skills",
        "skill_listing",
        "agent_status",
        "tool_delta",
        "mcp_instructions",
    }
)
"""Attachments rebuilt after every compaction, so they are not summarized."""


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class CacheSafeParams:
    """What a fork must send byte-identically to share the main conversation's prompt cache."""

    model: str
    system: str | list[SystemBlock] | None = None
    tools: list[dict[str, Any]] | None = None
    thinking: dict[str, Any] | None = None
    max_tokens: int = 32_000
    betas: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    max_output: int | None = None
    """The model's output limit: the summary call's budget stays under it."""

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("CacheSafeParams needs a model")
        if self.max_tokens <= 0:
            raise ConfigError("CacheSafeParams.max_tokens must be > 0")

    def request(self, messages: list[MessageParam], *, shared: bool = False) -> ProviderRequest:
        """A request with these parameters and the given messages.

        The system prompt, tools and extra fields are deep copies, or with `shared` these
        parameters' own objects (for a caller that only reads the request, as the session's
        pipeline does: it sends or copies, never edits)."""
        duplicate: Callable[[Any], Any] = _as_is if shared else copy.deepcopy
        request: ProviderRequest = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system:
            request["system"] = duplicate(self.system)
        if self.tools:
            request["tools"] = duplicate(self.tools)
        request["messages"] = messages
        if self.thinking:
            request["thinking"] = dict(self.thinking)
        if self.betas:
            request["betas"] = list(self.betas)
        for key, value in self.extra.items():
            request[key] = duplicate(value)  # type: ignore[literal-required]
        return request


class PreCompactDecision(Protocol):
    """What the PreCompact hooks decided (`hooks.PreCompactOutcome` is one)."""

    @property
    def blocked(self) -> bool:
        """A hook refused the compaction."""
        ...

    @property
    def block_reason(self) -> str | None:
        """Why it was refused."""
        ...

    @property
    def new_custom_instructions(self) -> str | None:
        """Instructions the hooks add after the caller's."""
        ...

    @property
    def user_display_message(self) -> str | None:
        """What to show the user about the hooks."""
        ...


class CompactionHooks(Protocol):
    """The hook calls a compaction makes (`hooks.HookRunner` is one)."""

    async def arun_pre_compact(
        self, trigger: Trigger, custom_instructions: str | None = None, /
    ) -> PreCompactDecision:
        """Run the PreCompact hooks before anything is summarized."""
        ...

    async def arun_session_start(self, source: str = "compact", /) -> list[str]:
        """Run the SessionStart hooks; the context texts they add after the summary."""
        ...

    async def arun_post_compact(self, trigger: Trigger, compact_summary: str = "", /) -> object:
        """Tell the PostCompact hooks the summary."""
        ...


CachePlanner = Callable[[ProviderRequest, bool], ProviderRequest]
"""Places cache breakpoints on a request; the flag asks for a fork that writes no cache."""


def place_fork_breakpoint(request: ProviderRequest, skip_cache_write: bool) -> ProviderRequest:
    """The default planner: unbounded's cache breakpoint placement (caching package)."""
    from unbounded.caching.breakpoints import place_cache_breakpoints

    return place_cache_breakpoints(request, skip_cache_write=skip_cache_write)


FallbackReason = Literal["no_model", "asked_for", "breaker_open", "request_budget"]
"""Why the offline hand-over wrote a summary: there is no model to ask, it was asked for,
the circuit breaker is open (summaries failed repeatedly), or the compaction spent its
summary requests (`Policy.compact_max_summary_requests`)."""
FALLBACK_REASONS: tuple[FallbackReason, ...] = (
    "no_model",
    "asked_for",
    "breaker_open",
    "request_budget",
)


@dataclass(frozen=True, slots=True)
class SummaryAuthor:
    """Who wrote a compaction's summary (`summarizer`), why a fallback did (`fallback`,
    None when the summarizer chosen for it did) and how many model requests the compaction
    sent for it, failed tries included (`summary_requests`)."""

    summarizer: str
    fallback: FallbackReason | None = None
    summary_requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (persisted in a session's state)."""
        return {
            "summarizer": self.summarizer,
            "fallback": self.fallback,
            "summary_requests": self.summary_requests,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryAuthor:
        """The author a state document holds (unknown values read as none)."""
        fallback = data.get("fallback")
        requests = data.get("summary_requests")
        return cls(
            summarizer=str(data.get("summarizer") or "?"),
            fallback=fallback if fallback in FALLBACK_REASONS else None,
            summary_requests=requests if isinstance(requests, int) and requests >= 0 else 0,
        )


@dataclass(slots=True)
class CompactionResult:
    """What a compaction produced; `new_entries()` is what to append to the transcript."""

    boundary: Entry
    summary_messages: list[Entry]
    messages_to_keep: list[Entry]
    attachments: list[Entry]
    hook_results: list[Entry]
    pre_tokens: int
    post_tokens: int
    summary_tokens: int
    summary_text: str
    usage: Usage | None
    request: ProviderRequest
    attempts: int
    used_fallback: bool
    summarizer: str
    user_display_message: str | None = None
    skipped_attachments: list[str] = field(default_factory=list)
    fallback: FallbackReason | None = None
    """Why a fallback summarizer wrote the summary (None: the one chosen did)."""
    summary_requests: int = 0
    """Model requests this compaction sent for its summary, failed tries included."""

    @property
    def author(self) -> SummaryAuthor:
        """Who wrote the summary, why, and at how many requests."""
        return SummaryAuthor(self.summarizer, self.fallback, self.summary_requests)

    def new_entries(self) -> list[Entry]:
        """Boundary, summary, attachments and hook results, to append in this order.

        Kept messages are not written again: the boundary's preservedSegment relinks them.
        """
        return [self.boundary, *self.summary_messages, *self.attachments, *self.hook_results]

    def view(self) -> list[Entry]:
        """The conversation as the model sees it after this compaction."""
        return messages_after_compact_boundary([*self.messages_to_keep, *self.new_entries()])


# -- preparing the messages -------------------------------------------------------------------


def media_placeholder(block: Mapping[str, Any]) -> str:
    """An image or document as text for a summary request: `[image: URL]` when it is given by
    URL (so the summary can keep the link), else `[image]` / `[document]`."""
    source = block.get("source")
    url = source.get("url") if isinstance(source, Mapping) else None
    kind = block.get("type")
    return f"[{kind}: {url}]" if url else f"[{kind}]"


def _strip_media(blocks: list[Any]) -> tuple[list[Any], bool]:
    changed = False
    out: list[Any] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("image", "document"):
            out.append({"type": "text", "text": media_placeholder(block)})
            changed = True
        elif kind == "tool_result" and isinstance(block.get("content"), list):
            inner, inner_changed = _strip_media(block["content"])
            if inner_changed:
                block = {**block, "content": inner}
                changed = True
            out.append(block)
        else:
            out.append(block)
    return out, changed


def strip_images_and_documents(messages: list[MessageParam]) -> list[MessageParam]:
    """Images and documents become `[image]` / `[document]` text; untouched messages are kept."""
    result: list[MessageParam] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            blocks, changed = _strip_media(list(content))
            if changed:
                result.append({"role": message["role"], "content": blocks})
                continue
        result.append(message)
    return result


def _as_sent_for_summary(messages: list[MessageParam]) -> list[MessageParam]:
    """The messages a summary request sends: from the last server compaction on, its blocks
    as text, media as placeholders. One pass finds whether any message holds such a block;
    most conversations hold none, and the three rewrites (each a walk of every block) would
    then return the same messages."""
    for message in messages:
        if holds_rewritten_block(message["content"]):
            # What a server compaction stands for is the server's summary alone.
            return compaction_blocks_as_text(
                strip_images_and_documents(from_last_server_compaction(messages))
            )
    return list(messages)


def _without_reinjected(entries: Sequence[Entry]) -> list[Entry]:
    return [
        e
        for e in entries
        if not (
            e.type == "attachment"
            and (e.attachment or {}).get("type") in REINJECTED_ATTACHMENT_TYPES
        )
    ]


def _is_round_start(entries: Sequence[Entry], index: int) -> bool:
    """A user prompt (not tool results) at `index`: cutting here splits no tool pair."""
    entry = entries[index]
    if entry.type != "user" or entry.is_compact_summary:
        return False
    content = entry.content
    return isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content)


def safe_pivot(view: Sequence[Entry], pivot_uuid: str) -> int:
    """Index of the pivot in the view, moved back to the start of an API round."""
    positions = [i for i, entry in enumerate(view) if entry.uuid == pivot_uuid]
    if not positions:
        raise ConfigError(f"pivot {pivot_uuid} is not in the conversation after the last boundary")
    index = positions[0]
    while index > 0 and not _is_round_start(view, index):
        index -= 1
    first_message = next(
        (i for i, e in enumerate(view) if e.type in ("user", "assistant", "attachment")), len(view)
    )
    if index <= first_message:
        raise ConfigError(
            f"pivot {pivot_uuid} leaves nothing on one side: choose a later user message"
        )
    return index


def _kept_tail(
    view: Sequence[Entry], keep_from: str, first: Mapping[str, int] | None = None
) -> list[Entry]:
    """The records from `keep_from` to the end of the view; something must come before them.
    `first`: each uuid's first position in the view, when the caller keeps it."""
    index = first.get(keep_from) if first is not None and isinstance(keep_from, str) else None
    if index is None:
        positions = [i for i, entry in enumerate(view) if entry.uuid == keep_from]
        if not positions:
            raise ConfigError(
                f"keep_from {keep_from} is not in the conversation after the last boundary"
            )
        index = positions[0]
    if not any(e.type in ("user", "assistant") for e in view[:index]):
        raise CompactionError(
            "nothing before the kept messages to summarize", reason="nothing_to_summarize"
        )
    return list(view[index:])


def _require_contiguous(entries: Sequence[Entry], kept: Sequence[Entry]) -> None:
    """Kept messages must be one run of the file: a boundary can relink only one segment.

    After an earlier partial compaction the view splices old records in front of newer ones;
    a pivot that keeps both sides of that splice cannot be recorded, so it is refused.
    """
    if not kept:
        return
    # One run of the transcript with a uuid on each record: they are all in it (the usual
    # case, found from the end without a set of every uuid of the session).
    if all(entry.uuid for entry in kept) and is_one_run(entries, kept):
        return
    known = {entry.uuid for entry in entries if entry.uuid}
    if any(entry.uuid not in known for entry in kept):
        raise ConfigError("the kept messages are not all in the transcript")
    if not is_one_run(entries, kept):
        raise ConfigError(
            "this pivot would keep messages from both sides of an earlier partial compaction; "
            "choose a pivot after that compaction's summary"
        )


# -- the call -----------------------------------------------------------------------------------


async def _call_with_heartbeat(
    provider: Provider, request: ProviderRequest, policy: Policy, events: EventSink | None
) -> ModelResponse:
    """The summary call, with a CompactionHeartbeat event every `compact_heartbeat_seconds`;
    cancelled with its caller (a host that cancels `prepare()` stops the call too)."""

    def beat(elapsed: float) -> None:
        emit(events, CompactionHeartbeat(elapsed_seconds=elapsed))

    return await call_with_heartbeat(
        provider.create(request, stream=True), beat, policy.compact_heartbeat_seconds
    )


def summary_max_tokens(params: CacheSafeParams, policy: Policy, *, attempt: int = 1) -> int:
    """The summary call's output budget: the policy's compaction budget, whatever the main
    request's `max_tokens` (max_tokens is not part of the prompt-cache key, so the fork still
    shares the cache), doubled for the one retry of a cut-off summary; plus the thinking
    budget when thinking is on (the API wants max_tokens above it); never above the model's
    output limit."""
    budget = policy.compact_max_output_tokens * (2 if attempt > 1 else 1)
    thinking = params.thinking or {}
    if thinking.get("type") == "enabled":
        budget += int(thinking.get("budget_tokens") or 0)
    return min(budget, params.max_output) if params.max_output else budget


def _fallback_request(
    messages: list[MessageParam], params: CacheSafeParams, policy: Policy
) -> ProviderRequest:
    limit = policy.compact_max_output_tokens
    request: ProviderRequest = {
        "model": params.model,
        "max_tokens": min(limit, params.max_output) if params.max_output else limit,
        "system": SUMMARY_SYSTEM_PROMPT,
        "messages": messages,
    }
    if params.tools and _holds_tool_blocks(messages):
        # The API refuses tool_use / tool_result blocks in a request that defines no tools;
        # declared but not callable, they cost their tokens and nothing else.
        request["tools"] = copy.deepcopy(params.tools)
        request["tool_choice"] = {"type": "none"}
    return request


def _holds_tool_blocks(messages: list[MessageParam]) -> bool:
    """Whether a message holds a tool_use or tool_result block."""
    return any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )


SummaryReader = Callable[[ModelResponse], str]
"""Checks a reply and returns the summary text, or raises CompactionError."""
RETRYABLE_REPLIES = frozenset({"no_summary", "implausible_summary", "truncated"})
"""Reply problems the direct request is tried for (a different request may do better)."""
SummaryRequestKind = Literal["cache_sharing", "direct"]
"""The cache-sharing request (forks the main conversation's cached prefix) or the direct one
(the compact system prompt, no cache, tools not callable)."""


@dataclass(slots=True)
class _Reply:
    summary: str
    response: ModelResponse
    request: ProviderRequest
    direct: bool


PostCompactionFit = Callable[[list[MessageParam]], bool]
"""Whether the messages a compaction leaves are small enough (`CompactionContext.post_fit`)."""

DROP_ORDER = ("file", "invoked_skills", "plan_file_reference", "todo")
"""Re-injected attachments a compaction leaves out when the room is short, first to last:
re-read files (the agent can read them again), skills, the plan, the todo list."""


def drop_attachments_to_fit(result: CompactionResult, fits: PostCompactionFit) -> None:
    """Leave out re-injected attachments until `fits` the messages after `result`: in
    `DROP_ORDER`, the largest first within a kind. Each one left out is named in
    `skipped_attachments`; the summary and the kept messages are never touched."""
    if fits(normalize_messages(result.view())):
        return
    order = sorted(
        (DROP_ORDER.index(kind), -rough_token_count(orjson.dumps(entry.data).decode()), n)
        for n, entry in enumerate(result.attachments)
        if (kind := str(_attachment(entry).get("type"))) in DROP_ORDER
    )
    attachments = list(result.attachments)
    for _, _, n in order:
        attachment = _attachment(attachments[n])
        name = attachment.get("filename") or attachment.get("planFilePath") or ""
        what = f"{attachment.get('type')} {name}".strip()
        result.skipped_attachments.append(f"{what}: no room after the compaction")
        left_out = attachments[n]
        result.attachments = [a for a in result.attachments if a is not left_out]
        if fits(normalize_messages(result.view())):
            return


def _attachment(entry: Entry) -> Mapping[str, Any]:
    value = entry.data.get("attachment")
    return value if isinstance(value, Mapping) else {}


class SummaryJob:
    """One summary in progress, in three steps (see `compact_conversation`).

    `start_summary` emits `CompactionStarted`, runs the PreCompact hooks and prepares the
    messages and the prompt once. `request("cache_sharing")` then asks the cache-sharing
    request; when it fails in a way the direct request may not (an API error, a reply that
    holds no usable summary) it returns False and keeps the failure in `handed_over`, and
    `request("direct")` goes on from the same messages and attempt count (prompt-too-long
    retries included). `finish()` builds the result and emits `CompactionFinished`. A failure
    emits `CompactionFailed` once; `give_up()` emits it for a handed-over failure nobody
    finishes.
    """

    def __init__(
        self,
        *,
        entries: Sequence[Entry],
        provider: Provider,
        params: CacheSafeParams,
        trigger: Trigger,
        direction: PartialDirection | None,
        view: list[Entry],
        summarized: list[Entry],
        kept: list[Entry],
        keep_from: str | None,
        pre_tokens: int,
        transcript_path: str | None,
        session_id: str | None,
        hooks: CompactionHooks | None,
        rehydrate: Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]] | None,
        facts_ledger: Callable[[list[Entry]], str] | None,
        planner: CachePlanner,
        policy: Policy,
        events: EventSink | None,
        boundary_metadata: dict[str, Any] | None,
        fits: PostCompactionFit | None = None,
        budget: RequestBudget | None = None,
        fallback: FallbackReason | None = None,
        facts: ViewFacts | None = None,
        rewritten: bool | None = None,
    ) -> None:
        self.entries = entries
        self.provider = provider
        self.params = params
        self.trigger: Trigger = trigger
        self.direction: PartialDirection | None = direction
        self.view = view
        self.summarized = summarized
        self.kept = kept
        self.keep_from = keep_from
        self.pre_tokens = pre_tokens
        self.transcript_path = transcript_path
        self.session_id = session_id
        self.hooks = hooks
        self.rehydrate = rehydrate
        self.facts_ledger = facts_ledger
        self.planner = planner
        self.policy = policy
        self.events = events
        self.boundary_metadata = boundary_metadata
        self.fits = fits
        self.budget = budget
        """Requests this compaction may still send (None: unbounded); an offline summarizer
        takes none."""
        self.fallback: FallbackReason | None = fallback
        """Why this summarizer is writing the summary as a fallback (None: it was chosen)."""
        self.prompt = ""
        self.messages: list[MessageParam] = []
        """What the summary request sends before the prompt (its oldest rounds dropped after
        a prompt-too-long answer)."""
        self.user_display: str | None = None
        self.attempts = 0
        """Requests counted against `Policy.ptl_max_retries` so far."""
        self.handed_over: CompactionError | ProviderError | None = None
        """Why the cache-sharing request gave the summary over to the direct one."""
        self._budget_round = 1
        self._reply: _Reply | None = None
        self._replaced_tokens = 0
        self._lean_source: list[MessageParam] = []
        """The messages as first prepared: the lean-summary yardstick of `check_summary`."""
        self._facts = facts
        """The view, folded as it grew (`ViewFolds`; None: read from the view here)."""
        self._rewritten = rewritten
        """False: the caller knows no record of the view holds a block a summary request
        rewrites (None: not known)."""

    @property
    def summary_requests(self) -> int:
        """Model requests the compaction has sent for its summary so far."""
        return self.budget.used if self.budget is not None else 0

    def _report(self, error: CompactionError | ProviderError) -> None:
        reason = error.reason if isinstance(error, CompactionError) else type(error).__name__
        logger.warning("%s compaction failed (%s): %s", self.trigger, reason, error)
        emit(
            self.events,
            CompactionFailed(
                trigger=self.trigger,
                reason=reason,
                message=str(error),
                summary_requests=self.summary_requests,
            ),
        )

    def _take_request(self) -> None:
        """Count the request about to be sent; CompactionError when the budget is spent."""
        budget = self.budget
        if budget is None or self.provider.profile.offline or budget.take():
            return
        raise CompactionError(
            f"this compaction has sent its {budget.limit} summary requests "
            "(Policy.compact_max_summary_requests): no more are sent for it",
            reason="request_budget",
        )

    async def _send(self, request: ProviderRequest) -> ModelResponse:
        """One summary request; retries inside it are taken from the same budget."""
        self._take_request()
        if self.budget is None or self.provider.profile.offline:
            return await _call_with_heartbeat(self.provider, request, self.policy, self.events)
        with self.budget.active():
            return await _call_with_heartbeat(self.provider, request, self.policy, self.events)

    def give_up(self) -> CompactionError | ProviderError:
        """The handed-over failure, reported (`CompactionFailed`) as the summary's end."""
        if self.handed_over is None:
            raise ConfigError("give_up() is for a summary whose cache-sharing request failed")
        self._report(self.handed_over)
        return self.handed_over

    async def _prepare(
        self, instructions: str | None, sent_messages: list[MessageParam] | None
    ) -> None:
        hook_instructions: str | None = None
        if self.hooks is not None:
            outcome = await self.hooks.arun_pre_compact(self.trigger, instructions)
            if outcome.blocked:
                raise CompactionError(
                    f"a PreCompact hook blocked the compaction: {outcome.block_reason}",
                    reason="blocked_by_hook",
                )
            hook_instructions = outcome.new_custom_instructions
            self.user_display = outcome.user_display_message
        merged = merge_instructions(instructions, hook_instructions)
        direction = self.direction
        self.prompt = (
            full_compact_prompt(merged)
            if direction is None
            else partial_compact_prompt(direction, merged)
        )
        if direction == "from":
            to_send = normalize_messages(_without_reinjected(self.view))
        elif direction == "up_to":
            to_send = normalize_messages(_without_reinjected(self.summarized))
        elif sent_messages is not None:
            to_send = list(sent_messages)
        else:
            to_send = normalize_messages(_without_reinjected(self.view))
        # Every message sent here is normalized from the view: none holds a block to rewrite
        # when no record of the view does.
        facts = self._facts
        rewrites = (facts is None or facts.rewritten) and self._rewritten is not False
        # `to_send` is a new list here: kept as it is.
        self.messages = _as_sent_for_summary(to_send) if rewrites else to_send
        # A full compaction summarizes the whole view (a kept tail included), which
        # `pre_tokens` counted: not counted again.
        self._replaced_tokens = (
            self.pre_tokens
            if self.direction is None
            else token_count_with_estimation(self.summarized)
        )
        self._lean_source = self.messages

    def _read_summary(self, response: ModelResponse, room: int | None) -> str:
        """The summary in `response`, checked by the guard; `room` is the output budget the
        request gave it (the guard never asks for more)."""
        provider = self.provider
        if provider.profile.writes_final_summary:
            text = response.text.strip()  # final text: never through a tag parser
        else:
            text = format_compact_summary(check_summary_reply(response))
        spec = provider.profile.summary_sections or NINE_SECTIONS
        lean_source = self._lean_source
        verdict = check_summary(
            text,
            self._replaced_tokens,
            spec=spec,
            lean_tokens=lambda: lean_summary_tokens(lean_source),
            room_tokens=room,
            min_tokens=self.policy.summary_floor_min_tokens,
        )
        if not verdict.ok:
            emit(
                self.events,
                SummaryRejected(
                    summarizer=provider.name,
                    reason=verdict.reason,
                    summary_tokens=verdict.tokens,
                    floor=verdict.floor,
                    missing_sections=verdict.missing_sections,
                ),
            )
            raise CompactionError(verdict.reason, reason="implausible_summary")
        return text

    async def request(self, kind: SummaryRequestKind) -> bool:
        """Ask for the summary with the `kind` request: True once it is there; False when the
        cache-sharing request hands over to the direct one (`handed_over`). Raises (and
        reports) CompactionError / ProviderError when the summary failed."""
        if self._reply is not None:
            raise ConfigError("this summary already has its reply; call finish()")
        try:
            return await self._ask(direct=kind == "direct")
        except (CompactionError, ProviderError) as error:
            self._report(error)
            raise

    async def _ask(self, *, direct: bool) -> bool:
        """The request loop: a summary cut off at its output budget is asked for once more
        with twice the budget (cache-sharing only); a prompt-too-long answer drops the oldest
        rounds and retries, up to `ptl_max_retries` attempts in all."""
        policy, params = self.policy, self.params
        self.handed_over = None
        while self.attempts < policy.ptl_max_retries:
            self.attempts += 1
            with_prompt: list[MessageParam] = [
                *self.messages,
                {"role": "user", "content": self.prompt},
            ]
            budget = summary_max_tokens(params, policy, attempt=self._budget_round)
            if direct:
                request = _fallback_request(with_prompt, params, policy)
            else:
                sized = dataclasses.replace(params, max_tokens=budget)
                request = self.planner(sized.request(with_prompt), True)
            try:
                response = await self._send(request)
                if (
                    response.stop_reason == "max_tokens"
                    and not direct
                    and self._budget_round == 1
                    and summary_max_tokens(params, policy, attempt=2) > budget
                ):
                    self._budget_round = 2  # cut off: once more with the larger budget
                    self.attempts -= 1
                    continue
                try:
                    summary = self._read_summary(response, request.get("max_tokens"))
                except CompactionError as problem:
                    if direct or problem.reason not in RETRYABLE_REPLIES:
                        raise
                    return self._hand_over(problem)  # a different request may do better
                self._reply = _Reply(summary, response, request, direct)
                return True
            except PromptTooLongError as error:
                truncated = truncate_head_for_ptl_retry(
                    self.messages,
                    error.token_gap,
                    fallback_drop_fraction=policy.ptl_fallback_drop_fraction,
                )
                if truncated is None:
                    break
                self.messages = truncated
                emit(
                    self.events,
                    CompactionRetried(
                        attempt=self.attempts,
                        token_gap=error.token_gap,
                        messages_left=len(truncated),
                    ),
                )
            except ProviderError as error:
                if direct:
                    raise
                return self._hand_over(error)
        raise CompactionError(
            "the conversation is too long to summarize even after dropping its oldest turns; "
            "go back a few messages (or start a new session) and try again",
            reason="prompt_too_long",
        )

    def _hand_over(self, error: CompactionError | ProviderError) -> bool:
        self.handed_over = error
        self.attempts -= 1  # the direct request is another path, not another length retry
        return False

    async def finish(self) -> CompactionResult:
        """The compaction built from the reply (boundary, summary, re-injected attachments,
        hook results); emits `CompactionFinished`. Nothing is written."""
        reply = self._reply
        if reply is None:
            raise ConfigError("finish() needs a summary: request() has not returned True")
        summary = reply.summary
        active = self.policy
        # A summarizer built from the facts (the extractive one) already lists them.
        if (
            active.facts_ledger
            and self.facts_ledger is not None
            and not self.provider.profile.includes_facts
        ):
            try:
                ledger = self.facts_ledger(self.summarized).strip()
            except (CompactionError, ProviderError) as error:
                self._report(error)
                raise
            if ledger:
                summary = f"{summary}\n\n{ledger}"
        return await self._result(summary, reply)

    async def _result(self, summary: str, reply: _Reply) -> CompactionResult:
        entries, view, kept = self.entries, self.view, self.kept
        trigger, direction = self.trigger, self.direction
        session_id = self.session_id
        last_before = next((e.uuid for e in reversed(entries) if e.uuid), None)
        # What the summary replaces (with keep_from, the summary also covers the kept tail).
        summarized = self.summarized
        replaced = (
            summarized[: len(summarized) - len(kept)] if self.keep_from is not None else summarized
        )
        summary_entry = Entry.user(
            summary_message_text(
                summary,
                transcript_path=self.transcript_path,
                messages_preserved=bool(kept),
                automatic=trigger == "auto",
            ),
            is_compact_summary=True,
            is_visible_in_transcript_only=True,
            extra={"sessionId": session_id} if session_id else None,
        )
        preserved: dict[str, str | None] | None = None
        facts = self._facts
        if facts is not None and direction is None:
            # `replaced` is the view without the kept tail, its last records.
            tools = facts.tools
            messages = facts.messages - sum(1 for e in kept if e.type in ("user", "assistant"))
        else:
            tools = discovered_tools(view)
            messages = sum(1 for e in replaced if e.type in ("user", "assistant"))
        boundary = create_compact_boundary(
            trigger,
            self.pre_tokens,
            logical_parent_uuid=last_before,
            messages_summarized=messages,
            pre_compact_discovered_tools=tools,
            session_id=session_id,
            extra_metadata={
                **(self.boundary_metadata or {}),
                **({"partialDirection": direction} if direction else {}),
            }
            or None,
        )
        if kept:
            anchor = boundary.uuid if direction == "from" else summary_entry.uuid
            preserved = {"headUuid": kept[0].uuid, "anchorUuid": anchor, "tailUuid": kept[-1].uuid}
            boundary.compact_metadata["preservedSegment"] = preserved
        summary_entry.data["parentUuid"] = boundary.uuid

        attachments: list[Entry] = []
        skipped: list[str] = []
        if self.rehydrate is not None:
            payloads, skipped = self.rehydrate(kept)
            attachments = [Entry.attachment_record(payload) for payload in payloads]
        hook_entries: list[Entry] = []
        if self.hooks is not None:
            for text in await self.hooks.arun_session_start("compact"):
                hook_entries.append(Entry.user(text, is_meta=True))
            await self.hooks.arun_post_compact(trigger, summary)

        provider_name = self.provider.name
        result = CompactionResult(
            boundary=boundary,
            summary_messages=[summary_entry],
            messages_to_keep=kept,
            attachments=attachments,
            hook_results=hook_entries,
            pre_tokens=self.pre_tokens,
            post_tokens=0,
            summary_tokens=rough_token_count(summary),
            summary_text=summary,
            usage=reply.response.usage,
            request=reply.request,
            attempts=self.attempts,
            used_fallback=reply.direct,
            summarizer=provider_name,
            user_display_message=self.user_display,
            skipped_attachments=skipped,
            fallback=self.fallback,
            summary_requests=self.summary_requests,
        )
        if self.fits is not None:
            drop_attachments_to_fit(result, self.fits)
        result.post_tokens = estimate_messages_tokens(normalize_messages(result.view()))
        logger.info(
            "%s compaction: %d -> %d tokens, summary by %s",
            trigger,
            self.pre_tokens,
            result.post_tokens,
            provider_name,
        )
        if self.fallback is not None:
            logger.warning("the %s summary was written by a fallback (%s)", trigger, self.fallback)
        emit(
            self.events,
            CompactionFinished(
                trigger=trigger,
                pre_tokens=self.pre_tokens,
                post_tokens=result.post_tokens,
                summary_tokens=result.summary_tokens,
                summarizer=provider_name,
                used_fallback=reply.direct,
                fallback=self.fallback,
                summary_requests=self.summary_requests,
            ),
        )
        return result

    async def summarize(self) -> CompactionResult:
        """The cache-sharing request, the direct one if it handed over, then `finish()`."""
        if not await self.request("cache_sharing"):
            await self.request("direct")
        return await self.finish()


# -- the orchestrator ------------------------------------------------------------------------------


async def start_summary(
    entries: Sequence[Entry],
    provider: Provider,
    *,
    params: CacheSafeParams,
    trigger: Trigger = "manual",
    instructions: str | None = None,
    direction: PartialDirection | None = None,
    pivot_uuid: str | None = None,
    sent_messages: list[MessageParam] | None = None,
    transcript_path: str | None = None,
    session_id: str | None = None,
    hooks: CompactionHooks | None = None,
    rehydrate: Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]] | None = None,
    facts_ledger: Callable[[list[Entry]], str] | None = None,
    planner: CachePlanner | None = None,
    policy: Policy | None = None,
    events: EventSink | None = None,
    boundary_metadata: dict[str, Any] | None = None,
    keep_from: str | None = None,
    fits: PostCompactionFit | None = None,
    budget: RequestBudget | None = None,
    fallback: FallbackReason | None = None,
    view: Sequence[Entry] | None = None,
    folds: ViewFolds | None = None,
    rewritten: bool | None = None,
) -> SummaryJob:
    """The summary's first step (`SummaryJob`): checks, `CompactionStarted`, the PreCompact
    hooks, the messages and prompt. Parameters as `compact_conversation`'s; `fits`: whether
    the messages after the compaction leave enough room (`drop_attachments_to_fit`);
    `budget`: the model requests the compaction may still send (None: unbounded);
    `fallback`: why `provider` writes this summary as a fallback, reported with it.

    `view`: `messages_after_compact_boundary(entries)` when the caller keeps it (a session's
    transcript), not derived again; `folds`: the `ViewFolds` the caller advances over that
    list as it grows, so that the whole view is not walked again here; `rewritten`: False when
    the caller knows no record of the view holds a block a summary request rewrites
    (`holds_rewritten_block`: the request's messages are then sent as normalized)."""
    active = policy or Policy()
    if not active.compact_enabled:
        raise CompactionError(
            "compaction is disabled (UNBOUNDED_DISABLE_COMPACT)", reason="disabled"
        )
    if (direction is None) != (pivot_uuid is None):
        raise ConfigError("partial compaction needs both a direction and a pivot")
    first: Mapping[str, int] | None = None
    facts: ViewFacts | None = None
    if view is None:
        view = messages_after_compact_boundary(entries)
        pre_tokens = pre_compaction_tokens(entries)
    else:
        if folds is not None:
            folds.advance(view)  # the caller's list, the one it grows
            facts = folds.facts()
            if facts is not None and keep_from is not None:
                first = folds.first  # (only a kept tail is looked up in it)
        # A copy: the caller's list may grow while the summary is asked for.
        view = list(view)
        pre_tokens = token_count_with_estimation(view)
    if not any(e.type in ("user", "assistant") for e in view):
        raise CompactionError("not enough messages to compact", reason="empty")
    emit(events, CompactionStarted(trigger=trigger, pre_tokens=pre_tokens, partial=direction))

    if direction is None:
        # The whole view, this call's own list (never edited): not copied again (10,000
        # entries at the default trigger, one more list for the turn's collections to walk).
        summarized, kept = view, []
        if keep_from is not None:
            kept = _kept_tail(view, keep_from, first)
            _require_contiguous(entries, kept)
            if kept_holds_server_compaction(kept):
                # Kept after our summary, the block would have the server drop the summary.
                logger.info("the turn to keep holds a server compaction: summarizing it too")
                kept, keep_from = [], None
    else:
        if keep_from is not None:
            raise ConfigError("keep_from applies to a full compaction, not a partial one")
        assert pivot_uuid is not None
        pivot = safe_pivot(view, pivot_uuid)
        check_cut_after_server_compaction(view, pivot, f"pivot {pivot_uuid}")
        if direction == "up_to":
            summarized, kept = list(view[:pivot]), list(view[pivot:])
        else:
            summarized, kept = list(view[pivot:]), list(view[:pivot])
        _require_contiguous(entries, kept)

    job = SummaryJob(
        entries=entries,
        provider=provider,
        params=params,
        trigger=trigger,
        direction=direction,
        view=view,
        summarized=summarized,
        kept=kept,
        keep_from=keep_from,
        pre_tokens=pre_tokens,
        transcript_path=transcript_path,
        session_id=session_id,
        hooks=hooks,
        rehydrate=rehydrate,
        facts_ledger=facts_ledger,
        planner=planner or place_fork_breakpoint,
        policy=active,
        events=events,
        boundary_metadata=boundary_metadata,
        fits=fits,
        budget=budget,
        fallback=fallback,
        facts=facts,
        rewritten=rewritten,
    )
    try:
        await job._prepare(instructions, sent_messages)
    except (CompactionError, ProviderError) as error:
        job._report(error)
        raise
    return job


async def compact_conversation(
    entries: Sequence[Entry],
    provider: Provider,
    *,
    params: CacheSafeParams,
    trigger: Trigger = "manual",
    instructions: str | None = None,
    direction: PartialDirection | None = None,
    pivot_uuid: str | None = None,
    sent_messages: list[MessageParam] | None = None,
    transcript_path: str | None = None,
    session_id: str | None = None,
    hooks: CompactionHooks | None = None,
    rehydrate: Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]] | None = None,
    facts_ledger: Callable[[list[Entry]], str] | None = None,
    planner: CachePlanner | None = None,
    policy: Policy | None = None,
    events: EventSink | None = None,
    boundary_metadata: dict[str, Any] | None = None,
    keep_from: str | None = None,
) -> CompactionResult:
    """Summarize the conversation and return what to append (see the module docstring).

    `keep_from` (a full compaction only): the uuid of the first record that stays verbatim
    after the summary, the messages that trigger the next turn. The summary request still
    sends the whole conversation (it shares the main request's cache) and the summary covers
    it all; the records from `keep_from` on follow it unchanged (relinked like an `up_to`
    compaction's), so the newest message is never known only through a summary.

    `entries` is the main thread (everything before the last boundary may be included; it is
    ignored). `sent_messages` are the messages of the last main request exactly as sent (after
    microcompaction), so the summary request shares their cache; by default the view is
    normalized again. `rehydrate(kept_entries)` returns the attachments to re-inject and what
    it skipped; `facts_ledger(summarized_entries)` returns text appended to the summary.
    `boundary_metadata` is added to the boundary's compactMetadata (recompaction tracking).

    The steps are `start_summary` and `SummaryJob`'s (the compaction tiers run them apart).
    """
    job = await start_summary(
        entries,
        provider,
        params=params,
        trigger=trigger,
        instructions=instructions,
        direction=direction,
        pivot_uuid=pivot_uuid,
        sent_messages=sent_messages,
        transcript_path=transcript_path,
        session_id=session_id,
        hooks=hooks,
        rehydrate=rehydrate,
        facts_ledger=facts_ledger,
        planner=planner,
        policy=policy,
        events=events,
        boundary_metadata=boundary_metadata,
        keep_from=keep_from,
    )
    return await job.summarize()
