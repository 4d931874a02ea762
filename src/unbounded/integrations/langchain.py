"""A LangChain v1 agent middleware: unbounded's context management for `create_agent`.

    from langchain.agents import create_agent
    from unbounded.integrations import UnboundedMiddleware

    agent = create_agent("anthropic:claude-sonnet-4-6", tools=[...],
                         middleware=[UnboundedMiddleware("claude-sonnet-4-6")])

Use it in place of LangChain's `SummarizationMiddleware` and `ContextEditingMiddleware`
(`ClearToolUsesEdit`). Before every model call (`before_model` / `abefore_model`) it reads
the agent's messages as unbounded entries (`HumanMessage`, `AIMessage` with its tool calls
and usage, `ToolMessage` -> Anthropic-shaped blocks) and:

1. **Counts** the context the way the session pipeline does: the usage the model last
   reported (`usage_metadata`, cache reads included) plus an estimate of what came after.
2. **Microcompacts** (cache-aware): old tool results are cleared in batches of at least
   `Policy.microcompact_min_savings` (20,000) tokens, keeping the 3 most recent and the last
   40,000 tokens of results, so the prompt cache breaks rarely; after an idle gap longer than
   the cache lives (60 minutes) all but the 5 most recent are cleared at once. A cleared
   result keeps its `ToolMessage` (tool pairs stay valid) with the content
   `[Old tool result content cleared — recall id=<tool call id>]` (`[Old tool result
   content cleared]` with `Policy.recall_enabled` off), and the clearing is written to the
   state so the next call sends the same prefix.
3. **Compacts** when the count reaches the trigger (the model's auto-compact threshold, or
   `trigger=` in the shapes `SummarizationMiddleware` takes, at any size): the older
   messages are replaced by unbounded's structured summary (nine sections plus the facts
   ledger) written by the agent's own chat model (the one `wrap_model_call` sees; the
   offline hand-over until it is known), or by the summarizer given — any unbounded
   `Provider`, a LangChain chat model or "provider:model" string, a function returning the
   summary text, "extractive" — and the most recent messages are kept verbatim: always the
   newest round (the last human message, or the tool calls the last results answer), older
   ones within `keep=` (or `keep_messages` / `keep_tokens`), cut between tool rounds so no
   tool call loses its result (`compaction/cut.py::kept_rounds_start`). The state is
   rewritten with `RemoveMessage(REMOVE_ALL_MESSAGES)` followed by the new list, as
   `SummarizationMiddleware` does; the summary is a
   `HumanMessage` marked with `additional_kwargs["lc_source"] = "summarization"`, and a
   later compaction summarizes it again (summaries chain). A transient summary failure is
   retried with backoff; a failed summary leaves the messages as they were (no exception);
   once the compaction has sent `Policy.compact_max_summary_requests` summary requests
   (retries included), or after 3 failures in a row, the offline hand-over summarizes at
   once. The state and `LangchainCompacted` say who wrote the summary and why.
4. **Retries a prompt-too-long** refusal of the model once (`wrap_model_call`), after the
   engine's reactive compaction (`engine.reactive_compaction`) with only the newest round
   kept.

**Recall.** With `Policy.recall_enabled` (the default) the middleware registers a `recall`
tool with the agent: the original of every cleared result and the summarized messages are
kept in the private state (`unbounded.archive`), and the tool brings them back by tool call
id, file path, command or a text search (`unbounded.integrations._langchain_recall`). A
model call whose only tool would be `recall` (an agent without tools) is made without it;
a recall error is a `ToolMessage` with `status="error"`.

What the previous call converted, normalized and counted is kept and brought up to date with
the messages each call adds (matched by message id, so the copies a checkpointed agent reloads
and this middleware's own cleared results are not read again): a call costs what is new, not
the history (`unbounded.integrations._langchain_view`). A conversation the middleware has not
seen (a new process, another thread) is not converted when the call needs only the count (no
compaction due, and a warm cache below the warning level, where nothing is cleared): the count
is then read from the last reported usage and the messages after it, so the first call on a
long state costs its tail. A call that may clear reads the messages from the oldest result
not cleared yet on (`unbounded.integrations._langchain_settled`): the messages before it,
whose results all read the placeholder already, are not converted; each call that clears
keeps in the state where that part ends (`settled`), and a new middleware that finds the
message there still carrying the id kept for it scans only from there, so on the state a
checkpointed thread holds that first call costs the tail, not the history (one pass over
every message's ids when the mark does not fit); a compaction converts the settled messages
for its summary.

What survives between calls lives in the agent state under two private keys: when the last
model call happened under `unbounded_turn` (written after every call, and small), the
archive, which kept messages carry a stale usage, the failure count, the summary requests
spent, who wrote the last summary and where the settled part ended under `unbounded`
(written only by a call that changes it: a checkpointer stores a key's whole value each time
it is written).
Importing this module needs `langchain>=1.0` (`pip install 'unbounded[langchain]'`).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from itertools import compress, repeat
from operator import is_not
from pathlib import Path
from typing import Annotated, Any, Final, cast
from uuid import uuid4

from typing_extensions import NotRequired, TypedDict

from unbounded.errors import ConfigError

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.runtime import Runtime
except ImportError as missing:  # pragma: no cover - exercised only without langchain
    raise ConfigError(
        f"the LangChain middleware needs langchain>=1.0 ({missing}): "
        "pip install 'unbounded[langchain]'"
    ) from None

try:  # recent langchain: keeps middleware-internal model calls out of run.messages
    from langchain.agents.middleware.internal_call_transformer import InternalCallTransformer

    _TRANSFORMERS: tuple[Any, ...] = (InternalCallTransformer,)
except ImportError:  # pragma: no cover - older langchain
    _TRANSFORMERS = ()

from unbounded.blocking import BlockingRunner
from unbounded.caching.breakpoints import CacheBreakpointPlanner
from unbounded.catalog import ModelInfo, ModelTable, load_model_table
from unbounded.compaction.auto import SummaryTier, TieredCompaction, TierSlot
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import (
    CachePlanner,
    CacheSafeParams,
    SummaryAuthor,
    media_placeholder,
)
from unbounded.compaction.decisions import ClearingPolicies, microcompact_policy
from unbounded.compaction.glue import RecordedState, default_facts_ledger
from unbounded.compaction.micro import microcompact
from unbounded.compaction.prompts import summary_message_text
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.configuration import check_token_count, model_for_window
from unbounded.engine import reactive_compaction
from unbounded.events import (
    EventSink,
    LangchainCompacted,
    MicrocompactApplied,
    emit,
)
from unbounded.integrations._langchain_recall import (
    archive_of,
    build_recall_tool,
    keep_cleared,
    keep_summarized,
    without_lone_recall,
)
from unbounded.integrations._langchain_settled import SettledMark, mark_start
from unbounded.integrations._langchain_trigger import (
    CompactionTrigger,
    KeptTail,
    kept_tail_start,
)
from unbounded.integrations._langchain_view import ConversationView, tail_count
from unbounded.model.content import Usage
from unbounded.model.entries import Entry, now_iso, parse_timestamp
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.model.request_budget import RequestBudget
from unbounded.policy import MIN_CONTEXT_WINDOW, Policy, Thresholds, compute_thresholds
from unbounded.providers.base import (
    Heartbeat,
    ModelResponse,
    OverloadedError,
    PromptTooLongError,
    Provider,
    ProviderError,
    RateLimitedError,
    ServerError,
    parse_prompt_too_long,
)
from unbounded.providers.retry import RetryingProvider
from unbounded.tokens.estimate import estimate_messages_tokens

logger = logging.getLogger(__name__)

SUMMARY_SOURCE = "summarization"
"""`additional_kwargs["lc_source"]` of summary messages (the value LangChain's own uses)."""
STATE_KEY: Final = "unbounded"
TURN_KEY: Final = "unbounded_turn"
"""The private key written after every model call, apart from `STATE_KEY`: a checkpointer
stores a key's whole value each time it is written, and `STATE_KEY` holds the archive."""
SUMMARY_RETRIES = 2
"""Retries of a summary call that failed with a transient error (with backoff), by default."""


class ContextState(TypedDict, total=False):
    """What the middleware keeps in the agent state between model calls."""

    last_model_at: str
    """Where a thread saved before `TurnState` kept when the model last answered: read only
    when the state has no `TURN_KEY` yet (never written now), and dropped by the first call
    that writes this key again, so a graph that drops `TURN_KEY` does not read it for good."""
    stale_usage_ids: list[str]
    """Kept messages whose reported usage predates the last compaction (not an anchor)."""
    failures: int
    """Consecutive failed compactions (the circuit breaker)."""
    summary_requests: int
    """Model requests spent on the summary of a compaction that has not landed yet."""
    last_summary: dict[str, Any]
    """Who wrote the last summary (`SummaryAuthor.to_dict()`: summarizer, fallback,
    summary_requests)."""
    compactions: int
    archive: dict[str, Any]
    """What clearing and compaction took out of the messages, for the recall tool."""
    settled: SettledMark
    """Where the settled part of the messages ended when a call last cleared: a new
    middleware scans from there (`unbounded.integrations._langchain_settled`)."""


class TurnState(TypedDict, total=False):
    """What the middleware writes after every model call (small: the checkpoint of a call
    that clears nothing does not store the archive again)."""

    last_model_at: str
    """When the model last answered (ISO 8601, UTC): the time-based microcompaction tier."""


class UnboundedAgentState(AgentState[Any]):
    """The agent state with the middleware's private `unbounded` and `unbounded_turn` keys."""

    # (the ignores are for type checks without langchain installed, where the base is Any)
    unbounded: NotRequired[Annotated[ContextState, PrivateStateAttr]]  # type: ignore[valid-type]
    unbounded_turn: NotRequired[Annotated[TurnState, PrivateStateAttr]]  # type: ignore[valid-type]


_TURN_KEY_DROPPED = (
    "the graph dropped the %r key that UnboundedMiddleware.after_model wrote: the time the "
    "model last answered is lost, so results are never cleared after an idle gap (the prompt "
    "cache has expired); declare %r: NotRequired[TurnState] in the graph's state class next to "
    "%r (or use UnboundedAgentState)"
)


def _answered_before(messages: Sequence[BaseMessage]) -> str | None:
    """The id of the AI message that the newest messages answer (only tool results after it),
    or None when something else came after it."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            continue
        return message.id if isinstance(message, AIMessage) else None
    return None


def _last_model_at(state: Mapping[str, Any]) -> str | None:
    """When the model last answered on this thread: the turn key, else where a thread saved
    before it kept the time (inside `STATE_KEY`)."""
    turn = state.get(TURN_KEY)
    if isinstance(turn, Mapping) and turn.get("last_model_at"):
        return str(turn["last_model_at"])
    context = state.get(STATE_KEY)
    earlier = context.get("last_model_at") if isinstance(context, Mapping) else None
    return str(earlier) if earlier else None


# --------------------------------------------------------------------------- conversion


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _media_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """An image or document block in Anthropic shape from LangChain's content block forms."""
    kind = block.get("type")
    if kind in ("image", "document") and isinstance(block.get("source"), Mapping):
        return {"type": kind, "source": dict(block["source"])}
    if kind == "image_url":
        value = block.get("image_url")
        url = value.get("url") if isinstance(value, Mapping) else value
        return {"type": "image", "source": {"type": "url", "url": str(url)}}
    if kind in ("image", "file", "document"):
        target = "image" if kind == "image" else "document"
        if block.get("base64") or block.get("data"):
            return {
                "type": target,
                "source": {
                    "type": "base64",
                    "media_type": str(block.get("mime_type", "application/octet-stream")),
                    "data": str(block.get("base64") or block.get("data")),
                },
            }
        if block.get("url"):
            return {"type": target, "source": {"type": "url", "url": str(block["url"])}}
    return None


def _user_blocks(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for block in content or []:
        if isinstance(block, str):
            blocks.append({"type": "text", "text": block})
        elif isinstance(block, Mapping):
            if block.get("type") == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
                continue
            media = _media_block(block)
            if media is not None:
                blocks.append(media)
            else:
                blocks.append({"type": "text", "text": json.dumps(block, default=str)})
    return blocks


def _tool_result_content(content: Any) -> str | list[dict[str, Any]]:
    blocks = _user_blocks(content)
    if isinstance(blocks, str):
        return blocks
    return [b for b in blocks if b["type"] in ("text", "image", "document")]


def usage_from_metadata(metadata: Mapping[str, Any] | None) -> Usage | None:
    """Anthropic-shaped usage from LangChain `usage_metadata` (whose input includes cache)."""
    if not metadata:
        return None
    details = metadata.get("input_token_details") or {}
    cache_read = int(details.get("cache_read") or 0)
    cache_creation = int(details.get("cache_creation") or 0)
    total_input = int(metadata.get("input_tokens") or 0)
    return {
        "input_tokens": max(0, total_input - cache_read - cache_creation),
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_creation,
        "output_tokens": int(metadata.get("output_tokens") or 0),
    }


def _assistant_blocks(message: AIMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    content = message.content
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        for block in content:
            if isinstance(block, str):
                blocks.append({"type": "text", "text": block})
            elif isinstance(block, Mapping):
                kind = block.get("type")
                if kind == "text":
                    blocks.append({"type": "text", "text": str(block.get("text", ""))})
                elif kind == "thinking":
                    thinking: dict[str, Any] = {
                        "type": "thinking",
                        "thinking": str(block.get("thinking", "")),
                    }
                    if block.get("signature"):
                        thinking["signature"] = str(block["signature"])
                    blocks.append(thinking)
                elif kind == "redacted_thinking":
                    blocks.append({"type": "redacted_thinking", "data": str(block.get("data"))})
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or ""),
                "name": call["name"],
                "input": dict(call.get("args") or {}),
            }
        )
    for invalid in message.invalid_tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": str(invalid.get("id") or ""),
                "name": str(invalid.get("name") or "unknown"),
                "input": {"raw": invalid.get("args")},
            }
        )
    return blocks


def is_summary_message(message: BaseMessage) -> bool:
    """A summary written by this middleware or by LangChain's `SummarizationMiddleware`."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    )


def message_to_entry(
    message: BaseMessage, *, anchor_usage: bool = True, timestamp: str | None = None
) -> Entry | None:
    """The unbounded entry for one LangChain message (None for messages never summarized:
    leading system messages are handled by the caller). Its uuid is the message id (a fresh
    one without; an AI message's id joined with a digest of its content), its timestamp
    `timestamp` (now when None)."""
    uuid = message.id or None
    if isinstance(message, AIMessage):
        usage = usage_from_metadata(message.usage_metadata) if anchor_usage else None
        blocks = _assistant_blocks(message)
        if uuid is not None:
            # The lines of one response kept as separate AI messages share its id: each line
            # needs a uuid of its own, and the same one every time it is converted.
            uuid = f"{uuid}#{_digest(blocks)}"
        return Entry.assistant(
            blocks,
            message_id=message.id or f"msg_{uuid4().hex[:24]}",
            model=str(message.response_metadata.get("model_name") or "langchain"),
            usage=usage,
            stop_reason=message.response_metadata.get("stop_reason"),
            timestamp=timestamp,
            uuid=uuid,
        )
    if isinstance(message, ToolMessage):
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": _tool_result_content(message.content),
        }
        if message.status == "error":
            result["is_error"] = True
        return Entry.user([result], timestamp=timestamp, uuid=uuid)
    if isinstance(message, HumanMessage):
        if is_summary_message(message):
            text = _text_of(message.content) or "(summary)"
            return Entry.user(text, is_compact_summary=True, timestamp=timestamp, uuid=uuid)
        return Entry.user(_user_blocks(message.content), timestamp=timestamp, uuid=uuid)
    if isinstance(message, SystemMessage):
        text = f"[system]\n{_text_of(message.content)}"
        return Entry.user(text, is_meta=True, timestamp=timestamp, uuid=uuid)
    return Entry.user(_text_of(message.content), timestamp=timestamp, uuid=uuid)


def _digest(blocks: list[dict[str, Any]]) -> str:
    """A short, stable digest of an AI message's content blocks."""
    text = json.dumps(blocks, sort_keys=True, default=str)  # tool args may hold any object
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _convert(message: BaseMessage, anchored: bool, timestamp: str) -> Entry | None:
    """`message_to_entry` as the view calls it (looked up at each call)."""
    return message_to_entry(message, anchor_usage=anchored, timestamp=timestamp)


def messages_to_entries(
    messages: Sequence[BaseMessage],
    stale_usage_ids: frozenset[str] = frozenset(),
    *,
    timestamp: str | None = None,
) -> list[Entry | None]:
    """Entries for LangChain messages, index for index (usage of stale ids not anchored),
    stamped `timestamp` (now when None)."""
    stamp = timestamp or now_iso()
    return [
        message_to_entry(m, anchor_usage=(m.id or "") not in stale_usage_ids, timestamp=stamp)
        for m in messages
    ]


# ------------------------------------------------------------ summaries by a chat model


def _render_block(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        arguments = json.dumps(block.get("input"), ensure_ascii=False, default=str)
        return f"[tool call {block.get('name')} {arguments}]"
    if kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else _text_of(content)
        flag = " (error)" if block.get("is_error") else ""
        return f"[tool result{flag}]\n{text}"
    if kind in ("image", "document"):
        return media_placeholder(block)
    return ""


_TRANSIENT_NAMES = (
    "RateLimitError",
    "OverloadedError",
    "InternalServerError",
    "ServiceUnavailableError",
    "APIConnectionError",
    "APITimeoutError",
    "Timeout",
    "ConnectionError",
)


def _provider_error(error: Exception) -> ProviderError:
    """An unbounded provider error for what a LangChain model raised: transient failures (429,
    5xx, 529, lost connections, timeouts) become retryable, so they are retried with backoff."""
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(error, "response", None), "status_code", None)
    message = f"the summary model failed: {error}"
    if status == 429 or "RateLimit" in type(error).__name__:
        return RateLimitedError(message, status=status)
    if status in (503, 529) or "Overloaded" in type(error).__name__:
        return OverloadedError(message, status=status)
    if (isinstance(status, int) and status >= 500) or any(
        name in type(error).__name__ for name in _TRANSIENT_NAMES
    ):
        return ServerError(message, status=status if isinstance(status, int) else None)
    return ProviderError(message, status=status if isinstance(status, int) else None)


class ChatModelSummarizer:
    """An unbounded `Provider` over a LangChain chat model, for compaction summaries.

    Tool calls and results are rendered as text (the summary call offers no tools); the call
    is tagged as internal to the middleware, so it stays out of the agent's streamed messages.
    """

    name = "langchain"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, model: Any, *, context_window: int | None = None) -> None:
        if not callable(getattr(model, "ainvoke", None)):
            raise ConfigError("ChatModelSummarizer needs a LangChain chat model (with ainvoke)")
        self.model = model
        self.context_window = context_window
        """The summary model's window: sizes a too-long refusal that gave no token count."""

    @staticmethod
    def to_langchain(request: ProviderRequest) -> list[BaseMessage]:
        """The request's system prompt and messages as LangChain messages, tools as text."""
        out: list[BaseMessage] = []
        system = request.get("system")
        if system:
            text = system if isinstance(system, str) else "\n\n".join(b["text"] for b in system)
            out.append(SystemMessage(content=text))
        for message in request.get("messages", []):
            content = message["content"]
            if isinstance(content, str):
                text = content
            else:
                text = "\n\n".join(
                    part
                    for part in (_render_block(cast(Mapping[str, Any], b)) for b in content)
                    if part
                )
            text = text or "(empty)"
            out.append(
                AIMessage(content=text) if message["role"] == "assistant" else HumanMessage(text)
            )
        return out

    def _too_long(self, request: ProviderRequest, error: Exception) -> PromptTooLongError:
        """Prompt-too-long with a token count: the server's when it gave one, else the
        request's estimate against the window (at least a quarter of it over: the estimate
        was wrong by that much at least), so the retry drops enough at once."""
        found = parse_prompt_too_long(str(error))
        if found is not None:
            return PromptTooLongError(str(error), actual_tokens=found[0], limit_tokens=found[1])
        estimate = estimate_messages_tokens(request.get("messages", []))
        limit = estimate * 3 // 4
        if self.context_window:
            room = self.context_window - int(request.get("max_tokens") or 0)
            limit = min(limit, max(1, room))
        return PromptTooLongError(str(error), actual_tokens=estimate, limit_tokens=limit)

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Ask the chat model for the summary."""
        metadata: dict[str, Any] = {"lc_source": SUMMARY_SOURCE}
        try:
            from langchain.agents.middleware.internal_call_transformer import (
                internal_call_metadata,
            )

            metadata.update(internal_call_metadata())
        except ImportError:  # pragma: no cover - langchain versions before the transformer
            pass
        try:
            reply = await self.model.ainvoke(
                self.to_langchain(request), config={"metadata": metadata}
            )
        except Exception as error:
            if _is_context_overflow(error):
                raise self._too_long(request, error) from error
            raise _provider_error(error) from error
        text = _text_of(getattr(reply, "content", reply))
        response_metadata = getattr(reply, "response_metadata", {}) or {}
        finish = response_metadata.get("stop_reason") or response_metadata.get("finish_reason")
        stop = "max_tokens" if finish in ("max_tokens", "length") else "end_turn"
        usage = usage_from_metadata(getattr(reply, "usage_metadata", None)) or {}
        return ModelResponse(
            [{"type": "text", "text": text}],
            stop,
            usage,
            str(response_metadata.get("model_name") or "langchain"),
        )


def _is_context_overflow(error: BaseException) -> bool:
    return any(cls.__name__ == "ContextOverflowError" for cls in type(error).__mro__)


class FunctionSummarizer:
    """An unbounded `Provider` over a function (or a LangChain `Runnable`) that writes the
    summary: it receives the LangChain messages to summarize (tool calls and results as text,
    no summary prompt) and returns the summary text or a message; sync or async."""

    name = "function"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, function: Any, *, context_window: int | None = None) -> None:
        if not callable(function) and not callable(getattr(function, "ainvoke", None)):
            raise ConfigError("FunctionSummarizer needs a function or a LangChain Runnable")
        self.function = function
        self.context_window = context_window

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Call the function with the conversation (the summary prompt left out)."""
        trimmed: ProviderRequest = {**request, "messages": list(request.get("messages", []))[:-1]}
        messages = ChatModelSummarizer.to_langchain(trimmed)
        function = self.function
        try:
            if callable(getattr(function, "ainvoke", None)):
                value = await function.ainvoke(messages)
            elif inspect.iscoroutinefunction(function):
                value = await function(messages)
            else:
                value = await asyncio.to_thread(function, messages)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as error:
            if _is_context_overflow(error):
                raise PromptTooLongError(str(error)) from error
            raise _provider_error(error) from error
        text = _text_of(getattr(value, "content", value)).strip()
        # The function returns the summary itself: it is not asked for tags or headings.
        body = f"<summary>\n{text}\n</summary>" if text else ""
        return ModelResponse([{"type": "text", "text": body}], "end_turn", {}, "function")


def summarizer_provider(
    summarizer: Provider | str | Any | None,
    *,
    context_window: int | None = None,
    events: EventSink | None = None,
    retries: int = 2,
) -> Provider | None:
    """The middleware's summarizer: None (none chosen: the agent's own model writes the
    summaries), "extractive" (the offline hand-over), an unbounded Provider, a LangChain chat
    model or a "provider:model" string (`init_chat_model`), or a function / Runnable
    returning the summary text. Model calls retry transient failures with backoff."""
    if summarizer is None:
        return None
    provider: Provider
    if isinstance(summarizer, Provider):
        provider = summarizer
    elif summarizer == "extractive":
        from unbounded.providers.extractive import ExtractiveSummarizer

        provider = ExtractiveSummarizer()
    elif isinstance(summarizer, str):
        try:
            from langchain.chat_models import init_chat_model

            model = init_chat_model(summarizer)
        except Exception as error:
            raise ConfigError(
                f"summarizer {summarizer!r}: LangChain could not make a chat model of it "
                f"({error}); give a 'provider:model' string init_chat_model knows, a chat "
                "model, a function or an unbounded Provider"
            ) from None
        provider = ChatModelSummarizer(model, context_window=context_window)
    elif _is_chat_model(summarizer):
        provider = ChatModelSummarizer(summarizer, context_window=context_window)
    elif callable(summarizer) or callable(getattr(summarizer, "ainvoke", None)):
        provider = FunctionSummarizer(summarizer, context_window=context_window)
    else:
        raise ConfigError(
            f"summarizer must be None, 'extractive', a Provider, a chat model, a "
            f"'provider:model' string or a function, not {type(summarizer).__name__}"
        )
    if isinstance(provider, RetryingProvider) or provider.profile.offline:
        return provider
    if retries <= 0:
        return provider
    return RetryingProvider(provider, max_retries=retries, events=events)


def _is_chat_model(value: Any) -> bool:
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError:  # pragma: no cover - langchain_core comes with langchain
        return False
    return isinstance(value, BaseChatModel)


# --------------------------------------------------------------------------- the middleware


def _model_info(model: Any, context_window: int | None, table: ModelTable | None) -> ModelInfo:
    known = table or load_model_table()
    info: ModelInfo | None
    if isinstance(model, ModelInfo):
        info = model
    elif isinstance(model, str):
        # "anthropic:claude-sonnet-4-6", the form LangChain's create_agent takes, is read by
        # the table (`catalog.bare_model_name`); a model it lacks is taken with its window.
        info = model_for_window(known, model, context_window)
    else:
        name = getattr(model, "model", None) or getattr(model, "model_name", None)
        info = known.find(name) if isinstance(name, str) else None
        profile = getattr(model, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if info is None and (isinstance(window, int) or context_window):
            output = profile.get("max_output_tokens") if isinstance(profile, Mapping) else None
            info = ModelInfo(
                name=str(name or "langchain-model"),
                provider="other",
                context_window=int(window or context_window or 0),
                max_output=int(output) if isinstance(output, int) and output > 0 else 8_192,
                input_per_mtok=0.0,
                output_per_mtok=0.0,
            )
        if info is None:
            raise ConfigError(
                f"cannot tell the context window of {type(model).__name__}: pass a model name "
                "from the model table (e.g. 'claude-sonnet-4-6') or context_window="
            )
    return info.with_window(context_window) if context_window else info


def _clearing_key(compactable: Sequence[str] | None, excluded: frozenset[str]) -> str:
    """A short digest of which tools' results may be cleared (the given ones or every tool
    called, less the excluded)."""
    given = None if compactable is None else sorted(compactable)
    text = json.dumps([given, sorted(excluded)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _now() -> datetime:
    return datetime.now(timezone.utc)


class UnboundedMiddleware(AgentMiddleware[UnboundedAgentState, Any, Any]):
    """Microcompaction and compaction for a LangChain agent (see the module docstring)."""

    state_schema = UnboundedAgentState
    transformers = _TRANSFORMERS
    """Keeps a chat-model summarizer's call out of the agent's streamed messages."""

    def __init__(
        self,
        model: str | ModelInfo | Any,
        *,
        context_window: int | None = None,
        policy: Policy | str | Path | None = None,
        summarizer: Provider | Any | None = None,
        trigger: Any = None,
        keep: Any = None,
        keep_messages: int | None = None,
        keep_tokens: int | None = None,
        compactable_tools: Sequence[str] | None = None,
        exclude_tools: Sequence[str] = (),
        events: EventSink | None = None,
        model_table: ModelTable | None = None,
        clock: Callable[[], datetime] = _now,
        summary_retries: int = SUMMARY_RETRIES,
    ) -> None:
        """`model`: a model-table name (a "provider:" prefix is allowed), a `ModelInfo` or the
        agent's chat model (its window sets the thresholds; `context_window` overrides it).
        `summarizer`: an unbounded Provider, a LangChain chat model, a "provider:model"
        string, a function returning the summary text, or "extractive" (the offline
        hand-over); by default the agent's own model writes the summaries (the model each
        model call is made with, or `model` when it is a chat model), and the offline
        hand-over until that model is known. A failed call is retried `summary_retries`
        times with backoff.
        `trigger`: when to compact, in the shapes LangChain's `SummarizationMiddleware`
        takes (`("tokens", n)`, `("fraction", f)`, `("messages", n)`, a dict of them all to
        be reached, a list of which any; `unbounded.integrations._langchain_trigger`), at any
        size; by default the model's auto-compact threshold. After a compaction the newest
        round stays verbatim, with older ones while the kept messages stay within
        `keep=("messages", n)` / `("tokens", n)` / `("fraction", f)`, or `keep_messages`
        and `keep_tokens` (default: 10 messages and a fifth of the threshold, at most
        20,000 tokens). Results of `compactable_tools` (default: every tool, as
        `ClearToolUsesEdit` does) except `exclude_tools` may be cleared."""
        super().__init__()
        for label, count, unit in (
            ("context_window", context_window, "tokens"),
            ("keep_messages", keep_messages, "messages"),
            ("keep_tokens", keep_tokens, "tokens"),
        ):
            check_token_count(f"UnboundedMiddleware {label}", count, unit)
        if isinstance(policy, (str, Path)):  # a policy file, read now as Session reads one
            policy = Policy.from_file(policy)
        if policy is not None and not isinstance(policy, Policy):
            raise ConfigError(
                f"UnboundedMiddleware policy must be a Policy (Policy(...)) or a policy "
                f"file's path, not {type(policy).__name__} {policy!r}"
            )
        self.model_info = _model_info(model, context_window, model_table)
        window = self.model_info.context_window
        chosen = policy or Policy.from_env()
        if chosen.background_summary:
            raise ConfigError(
                "Policy.background_summary: the LangChain middleware compacts inside the model "
                "call's hook and has no background summary; set background_summary=False"
            )
        if trigger is None:
            # The model's window plans everything, as a Session's does (too small: ConfigError).
            self.policy = chosen.for_window(window)
            self.thresholds: Thresholds = compute_thresholds(self.model_info, self.policy)
            self.trigger = CompactionTrigger.of_thresholds(self.thresholds)
        else:
            # A trigger the user set fires at its own level, whatever the window; the budgets
            # (clearing batches, the summary's size and floor) are scaled for that level.
            planned = self.model_info.with_window(max(window, MIN_CONTEXT_WINDOW))
            base = compute_thresholds(planned, chosen)
            self.trigger = CompactionTrigger.parse(trigger, base=base, context_window=window)
            level = self.trigger.lowest_tokens() or window
            self.policy = chosen.for_window(max(MIN_CONTEXT_WINDOW, min(window, level)))
            base = compute_thresholds(planned, self.policy)
            self.trigger = CompactionTrigger.parse(trigger, base=base, context_window=window)
            # Its lowest level is the warning level too: clearing stops holding back there.
            self.thresholds = self.trigger.lowest() or base
        self._clearing = ClearingPolicies.of(self.policy)
        if keep is not None and (keep_messages is not None or keep_tokens is not None):
            raise ConfigError("give keep=, or keep_messages= / keep_tokens=, not both")
        if keep_messages is not None and keep_messages < 0:
            raise ConfigError("keep_messages must be >= 0")
        if keep_tokens is not None and keep_tokens < 0:
            raise ConfigError("keep_tokens must be >= 0")
        if keep is not None:
            tail = KeptTail.parse(keep, context_window=window)
            self.keep_messages: int | None = tail.messages
            self.keep_tokens: int | None = tail.tokens
        else:
            self.keep_messages = keep_messages if keep_messages is not None else 10
            default_keep = min(20_000, self.trigger_level() // 5)
            self.keep_tokens = keep_tokens if keep_tokens is not None else default_keep
        if summary_retries < 0:
            raise ConfigError("summary_retries must be >= 0")
        self.summary_retries = summary_retries
        self.summarizer: Provider | None = summarizer_provider(
            summarizer,
            context_window=self.model_info.context_window,
            events=events,
            retries=summary_retries,
        )
        """The summarizer chosen (None: the agent's own model, `agent_summarizer`)."""
        self.agent_summarizer: Provider | None = None
        """The agent's own chat model as a summarizer: the model the last model call was
        made with (`wrap_model_call`), or `model` when it is a chat model."""
        self._agent_model: Any = None
        if summarizer is None and _is_chat_model(model):
            self._remember_model(model, events)
        # One name given bare ("search", which ("search") also is) means that tool, not its
        # letters.
        if isinstance(compactable_tools, str):
            compactable_tools = [compactable_tools]
        if isinstance(exclude_tools, str):
            exclude_tools = [exclude_tools]
        self.compactable_tools = list(compactable_tools) if compactable_tools is not None else None
        self.exclude_tools = frozenset(exclude_tools)
        self._clearing_key = _clearing_key(self.compactable_tools, self.exclude_tools)
        """Which tools' results may be cleared, as the state's `settled` mark records it."""
        self.events = events
        self._clock = clock
        # The conversation as the last call left it (converted, normalized, counted, its
        # clears), brought up to date with what each call adds; the lock keeps agents sharing
        # this middleware across threads apart.
        self._view = ConversationView(_convert, self._compactable_names)
        self._lock = threading.Lock()
        self._runners = threading.local()
        self._made_runners: list[BlockingRunner] = []
        """Every thread's runner, for `close()` (a thread-local cannot be listed)."""
        self._answered_id: str | None = None
        """The id of the AI message `after_model` last wrote the answer time for."""
        self._warned_turn_dropped = False
        if self.policy.recall_enabled:
            self.tools = [
                build_recall_tool(STATE_KEY, message_to_entry, self.policy.recall_max_tokens)
            ]

    # -- hooks

    def _remember_model(self, model: Any, events: EventSink | None) -> None:
        """Make the agent's chat model the summarizer (once per model object)."""
        if model is self._agent_model or not _is_chat_model(model):
            return
        self._agent_model = model
        self.agent_summarizer = summarizer_provider(
            model,
            context_window=self.model_info.context_window,
            events=events,
            retries=self.summary_retries,
        )

    def model_provider(self) -> Provider | None:
        """The model the summaries are written by: the summarizer chosen, else the agent's own
        model; None when there is none yet, or the offline hand-over was chosen."""
        chosen = self.summarizer if self.summarizer is not None else self.agent_summarizer
        return None if chosen is None or chosen.profile.offline else chosen

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Learn the agent's model (it writes the summaries unless a summarizer was given),
        then make the call (without `recall` when the agent has no tools of its own). When
        the model refuses the prompt as too long, compact once (`engine.reactive_compaction`)
        and send again; the compacted messages reach the state with the answer."""
        self._remember_model(request.model, self.events)
        offered = self._offered(request)
        try:
            return handler(offered)
        except Exception as error:
            if not _is_prompt_too_long(error):
                raise
            retry = self._runner().run(self._reactive(request.state, error))
            if retry is None:
                raise
            return _with_update(handler(offered.override(messages=retry[0])), retry[1])

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """`wrap_model_call` for async agents."""
        self._remember_model(request.model, self.events)
        offered = self._offered(request)
        try:
            return await handler(offered)
        except Exception as error:
            if not _is_prompt_too_long(error):
                raise
            retry = await self._reactive(request.state, error)
            if retry is None:
                raise
            return _with_update(await handler(offered.override(messages=retry[0])), retry[1])

    async def _reactive(
        self, state: UnboundedAgentState, error: BaseException
    ) -> tuple[list[AnyMessage], dict[str, Any]] | None:
        """The one reactive compaction after a too-long refusal: the messages to send again
        and the state update, or None when nothing could be compacted."""
        plan = self._plan(state, force=True)
        if plan.compact_at is None:
            return None
        call = _ReactiveCall(self, plan)
        if not await reactive_compaction(call, error):
            return None
        update = plan.update(call.summary)
        assert update is not None  # a summary always rewrites the messages
        return list(update["messages"][1:]), update

    @staticmethod
    def _offered(request: Any) -> Any:
        """The request with `recall` left out of a tool list it would be alone in: an agent
        without tools of its own could not have called it."""
        tools = without_lone_recall(list(getattr(request, "tools", None) or ()))
        return request if tools is None else request.override(tools=tools)

    def before_model(
        self, state: UnboundedAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Microcompact, and compact when over the threshold; returns the state update."""
        plan = self._plan(state)
        if plan.compact_at is None:
            return plan.update()
        return self._compacted(plan, self._runner().run(self._summarize(plan)))

    def _runner(self) -> BlockingRunner:
        """This thread's kept event loop for the sync hooks: an async chat-model client the
        summaries reuse holds connections bound to the loop they were opened on, so a loop
        per call would lose the first request of every compaction to a dead connection."""
        runner: BlockingRunner | None = getattr(self._runners, "runner", None)
        if runner is None:
            runner = self._runners.runner = BlockingRunner()
            with self._lock:
                self._made_runners.append(runner)
        return runner

    def close(self) -> None:
        """Close the event loops the sync hooks kept (one per thread that compacted); a
        later sync call opens a new one."""
        with self._lock:
            runners = list(self._made_runners)
        for runner in runners:
            runner.close()

    def __enter__(self) -> UnboundedMiddleware:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def abefore_model(
        self, state: UnboundedAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """`before_model` for async agents."""
        plan = self._plan(state)
        if plan.compact_at is None:
            return plan.update()
        return self._compacted(plan, await self._summarize(plan))

    def _compacted(self, plan: _Plan, summary: _Summary | None) -> dict[str, Any] | None:
        """The update of a call that compacted (`summary`: None when it failed). The view is
        told the messages the compaction leaves (`ConversationView.rebase`): the next call
        builds it from them whole, so the next compaction takes the view's messages too."""
        update = plan.update(summary)
        if summary is None or update is None:
            return update
        with self._lock:
            self._view.rebase(update["messages"][1 + plan.lead :])
        return update

    def after_model(
        self, state: UnboundedAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Remember when the model answered (whether the prompt cache is still warm), in the
        small turn key: `STATE_KEY` (the archive) is written only when it changes."""
        turn = TurnState(last_model_at=self._clock().astimezone(timezone.utc).isoformat())
        messages = state.get("messages") or ()
        last = messages[-1] if messages else None
        self._answered_id = last.id if isinstance(last, AIMessage) else None
        return {TURN_KEY: turn}

    async def aafter_model(
        self, state: UnboundedAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """`after_model` for async agents."""
        return self.after_model(state, runtime)

    # -- the work

    def _compactable_names(self, called: Mapping[str, None]) -> tuple[str, ...]:
        """The tools whose results may be cleared: the given ones, or every tool called."""
        names = self.compactable_tools if self.compactable_tools is not None else called
        return tuple(name for name in names if name not in self.exclude_tools)

    def _plan(self, state: UnboundedAgentState, *, force: bool = False) -> _Plan:
        """What this call clears, and where it cuts when the trigger is reached (or `force`:
        the model refused the prompt as too long)."""
        given = state["messages"]
        # Only read (never changed) while the plan lives: a list is not copied.
        messages = given if isinstance(given, list) else list(given)
        plan = _Plan(self, messages, state.get(STATE_KEY) or ContextState())
        lead = 0
        while lead < len(messages) and isinstance(messages[lead], SystemMessage):
            lead += 1
        plan.lead = lead
        stale = frozenset(plan.context.get("stale_usage_ids") or [])
        last_reply_at = parse_timestamp(_last_model_at(state))
        if TURN_KEY not in state:
            self._check_turn_kept(messages)
        conversation = messages[lead:] if lead else messages
        now: datetime | None = None
        with self._lock:
            view = self._view
            if not force and not view.reused(conversation, stale):
                # Not the conversation the view holds (a new middleware, another thread).
                count_only, now = self._count_only(
                    conversation, stale, last_reply_at, len(messages)
                )
                if count_only is not None:
                    plan.tokens = count_only
                    return plan
            settled_from = mark_start(conversation, plan.context.get("settled"), self._clearing_key)
            view.sync(conversation, stale, settled_from)
            tokens = view.counter.total
            # The originals of what this call clears; the settled messages are converted
            # only if a compaction needs them.
            plan.hold_entries(view.base, list(view.entries), stale, view.stamp)
            names = self._compactable_names(view.names)
            if names:
                view.use_tools(names)
                now = self._clock() if now is None else now
                policy = self._clearing_policy(now, last_reply_at, tokens)
                result = microcompact(
                    view.normalizer.borrowed_messages(),  # only read here: no copy
                    view.micro,
                    policy=policy,
                    now=now,
                    last_assistant_at=last_reply_at,
                    apply=False,  # the agent's state holds the cleared messages
                )
                if result.cleared_ids:
                    positions = view.tool_positions
                    plan.cleared = {
                        tool_id: lead + positions[tool_id]
                        for tool_id in result.cleared_ids
                        if tool_id in positions
                    }
                    # What the agent's state holds once it applies this call's update.
                    view.clear_results(
                        {
                            at - lead: (tool_id, message_to_entry(plan.cleared_copy(messages[at])))
                            for tool_id, at in plan.cleared.items()
                        }
                    )
                    self._mark_settled(plan, view.settled_after_clears(conversation, settled_from))
                    tokens = max(0, tokens - result.tokens_saved)
                    emit(
                        self.events,
                        MicrocompactApplied(
                            tier=result.tier,
                            cleared=len(result.cleared_ids),
                            tokens_saved=result.tokens_saved,
                            breaks_cache=result.breaks_cache,
                        ),
                    )
        plan.tokens = tokens
        if force or self.trigger.reached(self.policy, tokens, len(messages)):
            first = lead + 1 if is_summary_message(messages[lead]) else lead
            # After a too-long refusal only the newest round is kept: the keep budget did not
            # leave the prompt in the window.
            start = kept_tail_start(
                plan.entries,
                first=first - lead,
                keep_messages=0 if force else self.keep_messages,
                keep_tokens=0 if force else self.keep_tokens,
            )
            plan.compact_at = None if start is None else lead + start
        return plan

    def _check_turn_kept(self, messages: Sequence[BaseMessage]) -> None:
        """Warn once when the answer time `after_model` wrote did not come back: the state has
        no `TURN_KEY` although the model's answer it was written for is followed only by its
        tool results (the same run; a new invoke without a checkpointer adds a human message
        first, and carries no private key either)."""
        if self._warned_turn_dropped or self._answered_id is None:
            return
        if _answered_before(messages) == self._answered_id:
            self._warned_turn_dropped = True
            logger.warning(_TURN_KEY_DROPPED, TURN_KEY, TURN_KEY, STATE_KEY)

    def _mark_settled(self, plan: _Plan, settled: int) -> None:
        """Keep in the state where the settled part ends after this call's clears (none when
        nothing is settled, or the message there has no id to check it by)."""
        boundary = plan.messages[plan.lead + settled].id if settled else None
        if boundary is None:
            plan.context.pop("settled", None)
            return
        plan.context["settled"] = SettledMark(count=settled, id=boundary, tools=self._clearing_key)

    def _count_only(
        self,
        conversation: Sequence[BaseMessage],
        stale: frozenset[str],
        last_reply_at: datetime | None,
        message_count: int,
    ) -> tuple[int | None, datetime | None]:
        """The count, read from the tail since the last reported usage (`tail_count`), when it
        is all this call needs: no compaction due and nothing the microcompaction policy may
        clear (a warm cache below the warning level, or no tool to clear); else None, and the
        view is built. The clock reading taken to tell is returned for the call to reuse."""
        tokens = tail_count(conversation, stale, _convert)
        if tokens is None or self.trigger.reached(self.policy, tokens, message_count):
            return None, None
        if not self._calls_compactable_tool(conversation):
            return tokens, None
        now = self._clock()
        if self._clearing_policy(now, last_reply_at, tokens).microcompact_enabled:
            return None, now
        return tokens, now

    def _clearing_policy(
        self, now: datetime, last_reply_at: datetime | None, tokens: int
    ) -> Policy:
        """This call's microcompaction policy. The rule a Session follows: a warm cache is not
        rewritten below the warning level (the agent's model caches its prefix for the
        default 5 minutes)."""
        return microcompact_policy(
            self._clearing,
            now=now,
            last_reply_at=last_reply_at,
            ttl="5m",
            tokens=tokens,
            warning_threshold=self.thresholds.warning,
            cache_edits_supported=False,
        )

    def _calls_compactable_tool(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether microcompaction runs on these messages: some tool may be cleared (the
        compactable tools given, else a tool an AI message called), newest first."""
        if self.compactable_tools is not None:
            return bool(self._compactable_names({}))
        for message in reversed(messages):
            if isinstance(message, AIMessage) and any(
                call["name"] not in self.exclude_tools for call in message.tool_calls
            ):
                return True
        return False

    def trigger_level(self) -> int:
        """The lowest token level the middleware compacts at (the trigger's, else the
        model's auto-compact threshold)."""
        return self.trigger.lowest_tokens() or self.thresholds.autocompact

    def _compaction(self) -> TieredCompaction:
        """The agent's model (or the summarizer chosen) until the breaker trips or the
        compaction spends its summary requests, then the offline hand-over at once: in a
        small window a call left uncompacted would go over it."""
        from unbounded.providers.extractive import ExtractiveSummarizer

        model = self.model_provider()
        chosen = self.summarizer
        if model is None and chosen is not None:  # the offline hand-over was chosen
            return TieredCompaction([SummaryTier(chosen, fallback="asked_for")])
        if model is None:
            return TieredCompaction([SummaryTier(ExtractiveSummarizer(), fallback="no_model")])
        return TieredCompaction(
            [
                TierSlot(SummaryTier(model), "closed"),
                TierSlot(SummaryTier(ExtractiveSummarizer()), "open"),
            ]
        )

    async def _summarize(self, plan: _Plan) -> _Summary | None:
        assert plan.compact_at is not None
        summarized = plan.entries[: plan.compact_at - plan.lead]
        # (the entries that are not None, found at C speed)
        head = cast(list[Entry], list(compress(summarized, map(is_not, summarized, repeat(None)))))
        recorded: RecordedState | None = None
        with self._lock:
            # What the view normalized already, where it is exactly the head's normalization:
            # the summary request does not normalize thousands of messages again.
            normalized = self._view.normalized_head(summarized)
            # The ledger from the view's facts fold: only the records after its nearest copy
            # are read (a view leaving settled messages out holds no fold of them).
            facts_ledger = (
                default_facts_ledger
                if self._view.base
                else self._view.facts.ledger_of(summarized, self._view.entries)
            )
            # Known from the fold: no summarized record holds media or a server compaction,
            # so the request's messages need not be looked through for them.
            rewritten = (
                None
                if self._view.base
                else self._view.facts.rewrites(summarized, self._view.entries)
            )
            # The view's folds of the head (tools called, messages, media), so the summary
            # does not walk it for them; they reach it as a transcript's folds do.
            folds = (
                None
                if self._view.base
                else self._view.folds.folds_of(summarized, self._view.entries, head)
            )
            if folds is not None:
                recorded = RecordedState()
                recorded.view = folds
            # The summary request repeats the normalized messages: their unmarked form is the
            # view's, so its cache markers are placed without reading every message for them.
            planner = (
                None if normalized is None else _fork_planner(self._view.fork_planner(normalized))
            )
        params = CacheSafeParams(
            model=self.model_info.name,
            max_tokens=min(self.model_info.max_output, self.policy.compact_max_output_tokens),
            max_output=self.model_info.max_output,
        )
        spent = plan.context.get("summary_requests", 0)
        context = CompactionContext(
            entries=head,
            view=head,
            policy=self.policy,
            params=params,
            autocompact_threshold=self.thresholds.autocompact,
            tokens=plan.tokens,
            rehydrate_from=None,  # the agent's own state is not re-injected
            events=self.events,
            facts_ledger=facts_ledger,
            rewritten=rewritten,
            budget=RequestBudget(self.policy.compact_max_summary_requests, used=spent),
            sent_messages=normalized,
            recorded=recorded,
            planner=planner,
        )
        failures = plan.context.get("failures", 0)
        outcome = await self._compaction().run(context, failures=failures)
        if outcome.failures != failures:
            plan.context["failures"] = outcome.failures
        if outcome.result is None:
            if outcome.summary_requests != spent:
                plan.context["summary_requests"] = outcome.summary_requests
            return None
        return _Summary(
            text=outcome.result.summary_text,
            pre_tokens=outcome.result.pre_tokens,
            author=outcome.result.author,
        )


def _fork_planner(planner: CacheBreakpointPlanner) -> CachePlanner:
    """The summary request's cache markers by `planner.plan_fork` (what the default planner
    places, from the unmarked messages `planner` holds)."""

    def place(request: ProviderRequest, skip_cache_write: bool) -> ProviderRequest:
        return planner.plan_fork(request, skip_cache_write=skip_cache_write).request

    return place


def _is_prompt_too_long(error: BaseException) -> bool:
    """Whether a model call failed because its prompt is over the window."""
    if _is_context_overflow(error):
        return True
    return parse_prompt_too_long(str(error)) is not None or "prompt is too long" in str(error)


def _with_update(response: Any, update: dict[str, Any]) -> Any:
    """The model's answer with the compaction's state update. LangGraph applies the update
    after the answer, so the answer is listed again after the compacted messages (same ids):
    otherwise the update's RemoveMessage would take it out of the state."""
    from langchain.agents.middleware.types import ExtendedModelResponse
    from langgraph.types import Command

    answer = list(getattr(response, "result", None) or [])
    for message in answer:
        if message.id is None:
            message.id = str(uuid4())
    update = {**update, "messages": [*update["messages"], *answer]}
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


class _ReactiveCall:
    """The middleware's call as the engine's `CompactingSession`: compacting summarizes the
    plan's head, kept in `summary` for the state update."""

    def __init__(self, middleware: UnboundedMiddleware, plan: _Plan) -> None:
        self._middleware = middleware
        self._plan = plan
        self.summary: _Summary | None = None

    @property
    def policy(self) -> Policy:
        """The middleware's policy."""
        return self._middleware.policy

    async def auto_compact(self) -> _Summary | None:
        """Summarize the plan's head; None when the summary failed."""
        self.summary = await self._middleware._summarize(self._plan)
        return self.summary

    def events_sink(self) -> EventSink | None:
        """The middleware's events."""
        return self._middleware.events


class _Summary:
    """The text of a finished compaction and what to report about it."""

    def __init__(self, *, text: str, pre_tokens: int, author: SummaryAuthor) -> None:
        self.text = text
        self.pre_tokens = pre_tokens
        self.author = author


class _Plan:
    """One before_model decision: the messages, what to clear, where to cut."""

    def __init__(
        self, middleware: UnboundedMiddleware, messages: list[AnyMessage], context: ContextState
    ) -> None:
        self.middleware = middleware
        self.messages = messages
        self.context: ContextState = context.copy()
        self.original: ContextState = context.copy()
        self.lead = 0
        self._base = 0
        self._tail: list[Entry | None] = []
        """Entries of `messages[lead + _base:]` as they are before this call."""
        self._entries: list[Entry | None] | None = []
        self._stale: frozenset[str] = frozenset()
        self._stamp = ""
        self.cleared: dict[str, int] = {}
        """Tool call id -> index in `messages` of each result this call clears."""
        self._cleared_copies: dict[int, tuple[ToolMessage, ToolMessage]] = {}
        """id(message) -> (message, its cleared copy): each result this call clears is copied
        once (the view and the state update share the copy)."""
        self.tokens = 0
        self.compact_at: int | None = None

    def hold_entries(
        self, base: int, tail: list[Entry | None], stale: frozenset[str], stamp: str
    ) -> None:
        """The view's entries of the messages from `lead + base` on (the `base` settled
        messages before them are converted when `entries` is first read)."""
        self._base = base
        self._tail = tail
        self._entries = None if base else tail
        self._stale = stale
        self._stamp = stamp

    @property
    def entries(self) -> list[Entry | None]:
        """Entries of `messages[lead:]`, index for index, as they are before this call."""
        if self._entries is None:
            settled = self.messages[self.lead : self.lead + self._base]
            stamp = self._stamp or None
            head = messages_to_entries(settled, self._stale, timestamp=stamp)
            self._entries = [*head, *self._tail]
        return self._entries

    def entry_at(self, index: int) -> Entry | None:
        """The entry of `messages[index]` before this call (a result this call clears)."""
        return self._tail[index - self.lead - self._base]

    def _cleared(self, message: AnyMessage) -> AnyMessage:
        if not isinstance(message, ToolMessage) or message.tool_call_id not in self.cleared:
            return message
        return self.cleared_copy(message)

    def cleared_copy(self, message: ToolMessage) -> ToolMessage:
        """The message with its result cleared (the same id: the agent replaces it by id)."""
        known = self._cleared_copies.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        handle = message.tool_call_id if self.middleware.policy.recall_enabled else None
        copied = message.model_copy(
            update={
                "content": cleared_stub(handle),
                "artifact": None,
                "response_metadata": {
                    **message.response_metadata,
                    "context_editing": {"cleared": True, "strategy": "unbounded_microcompact"},
                },
            }
        )
        self._cleared_copies[id(message)] = (message, copied)
        return copied

    def update(self, summary: _Summary | None = None) -> dict[str, Any] | None:
        """The state update: cleared tool results, and the compacted message list."""
        if summary is None or self.compact_at is None:
            return self._cleared_only()
        kept = [self._cleared(m) for m in self.messages[self.compact_at :]]
        summarized = self.compact_at - self.lead
        text = summary_message_text(summary.text, messages_preserved=bool(kept), automatic=True)
        summary_message = HumanMessage(
            content=text,
            id=str(uuid4()),
            additional_kwargs={
                "lc_source": SUMMARY_SOURCE,
                "lc_data": {
                    "by": "unbounded",
                    "summarizer": summary.author.summarizer,
                    "fallback": summary.author.fallback,
                    "pre_tokens": summary.pre_tokens,
                    "messages_summarized": summarized,
                },
            },
        )
        self._archive(summarized=True)
        context = self.context.copy()
        context.pop("last_model_at", None)  # see ContextState.last_model_at
        context["failures"] = 0
        context["summary_requests"] = 0  # the next compaction has a budget of its own
        context["last_summary"] = summary.author.to_dict()
        context["compactions"] = self.context.get("compactions", 0) + 1
        context["stale_usage_ids"] = [m.id for m in kept if isinstance(m, AIMessage) and m.id]
        context.pop("settled", None)  # the messages it counted are gone
        emit(
            self.middleware.events,
            LangchainCompacted(
                pre_tokens=summary.pre_tokens,
                messages_summarized=summarized,
                messages_kept=len(kept),
                summarizer=summary.author.summarizer,
                fallback=summary.author.fallback,
                summary_requests=summary.author.summary_requests,
            ),
        )
        return {
            "messages": [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *self.messages[: self.lead],
                summary_message,
                *kept,
            ],
            STATE_KEY: context,
        }

    def _archive(self, *, summarized: bool) -> None:
        """Keep what this call takes out of the messages, for the recall tool."""
        if not self.middleware.policy.recall_enabled or not (self.cleared or summarized):
            return
        archive = archive_of(self.context)
        originals = {
            tool_id: entry
            for tool_id, at in self.cleared.items()
            if (entry := self.entry_at(at)) is not None
        }
        keep_cleared(archive, originals)
        if summarized and self.compact_at is not None:
            keep_summarized(archive, self.entries[: self.compact_at - self.lead])
        self.context["archive"] = archive

    def _cleared_only(self) -> dict[str, Any] | None:
        self._archive(summarized=False)
        out: dict[str, Any] = {}
        changed = [self._cleared(self.messages[at]) for at in sorted(self.cleared.values())]
        if changed and all(m.id for m in changed):
            out["messages"] = changed  # add_messages replaces messages by id
        elif changed:
            out["messages"] = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *(self._cleared(m) for m in self.messages),
            ]
        if self.context != self.original:
            self.context.pop("last_model_at", None)  # see ContextState.last_model_at
            out[STATE_KEY] = self.context
        return out or None


__all__ = [
    "ChatModelSummarizer",
    "ContextState",
    "TurnState",
    "UnboundedAgentState",
    "UnboundedMiddleware",
    "is_summary_message",
    "message_to_entry",
    "messages_to_entries",
    "usage_from_metadata",
]
