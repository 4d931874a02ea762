"""The request of a managed side call: the session's view as its next request would send it,
the side call's own messages after it, the side call's own parameters; nothing recorded.

A side call that continues the conversation (a title or judge request over it, a call whose
system carries the time) would otherwise send the caller's whole history, which the session
may have compacted long ago: past the window, it is refused as too long. A side call on a
model with a smaller window, or whose own messages take the view past it, gets the view cut
from its oldest rounds for that request (`fit_side_view`). Extensions' `before_request`
hooks do not run: they are steps of a turn, and a side call is none (docs/integrations.md)."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.catalog import ModelTable
from unbounded.compaction.micro import clear_tool_results
from unbounded.compaction.ptl import group_by_api_round
from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam
from unbounded.model.request import ProviderRequest
from unbounded.policy import effective_window
from unbounded.recall.schema import RECALL_TOOL_NAME, recall_tool_schema
from unbounded.session import Session
from unbounded.tokens.estimate import content_tokens, pad_estimate, rough_token_count

logger = logging.getLogger(__name__)

SIDE_CUT_MARKER = "[earlier conversation left out of this request to fit its model's window]"
"""Where a side call's view was cut to fit the side model's window."""

SIDE_PARAMETERS = ("model", "max_tokens", "system", "tools", "thinking")
"""The side call's own parameters, in place of the session's (given as `_config_fields` makes
them: plain dicts, empty tools for none)."""


def side_view(session: Session, *, drop_last_reply: bool) -> list[MessageParam]:
    """The session's messages as its next request would hold them before its new ones: the
    compacted view with the tool results microcompaction cleared, cleared. `drop_last_reply`:
    without the conversation's last reply (a side call asking again for it)."""
    messages = list(session.messages)
    if drop_last_reply and messages and messages[-1].get("role") == "assistant":
        messages.pop()
    micro = session.micro
    if micro.cleared:
        messages, _ = clear_tool_results(
            messages, list(micro.cleared), name_handles=micro.name_handles
        )
    return messages


def side_request(
    session: Session, messages: list[MessageParam], params: Mapping[str, Any]
) -> ProviderRequest:
    """The request of a side call: `messages` (its view and its own) with the session's
    request fields, its own `params` (`SIDE_PARAMETERS`) in place of the session's, and cache
    markers placed as the session places them."""
    request: dict[str, Any] = dict(session.cache_safe_params().request(messages, shared=True))
    for name in SIDE_PARAMETERS:
        request.pop(name, None)
        value = params.get(name)
        if value is not None and value != []:
            request[name] = value
    ttl, prefix_ttl = session.cache_ttls()
    return plan_cache_breakpoints(
        cast(ProviderRequest, request), ttl=ttl, prefix_ttl=prefix_ttl
    ).request


@dataclass(frozen=True, slots=True)
class SideBudget:
    """What a side call's request may hold: its model's window, less the output it reserves."""

    window: int
    """The context window of the side call's model (as the session plans it, for the session's
    own model)."""
    budget: int
    """The tokens its request may take: the window less the output reserved, as a turn
    reserves it (the smaller of the call's `max_tokens` and the turn's reserve)."""


_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
"""A model name's date (`claude-x-4-5-20250929`, `gpt-x-2025-08-07`)."""


def same_model(session: Session, model: str, table: ModelTable) -> bool:
    """Whether `model` names the session's own model: its name, an alias or a dated or
    undated name the table resolves to the same model, or (a model the table lacks) the
    same name but for its date."""
    own = session.config.model
    if model == own:
        return True
    side_info, own_info = table.find(model), table.find(own)
    if side_info is not None and own_info is not None:
        return side_info.name == own_info.name
    return _DATE_SUFFIX.sub("", model) == _DATE_SUFFIX.sub("", own)


def side_budget(
    session: Session, model: object, max_tokens: object, betas: Sequence[str] = ()
) -> SideBudget:
    """The window a side call on `model` must fit and its request's budget. The session's
    own model (or an alias) keeps the session's window (wrap()'s `context_window` when
    given); another model the session's table knows has its own window, larger or smaller,
    its long-context window when `betas` ask for it (`context-1m-...`); an unknown one the
    session's. Output is reserved as a turn reserves it (`effective_window`: at most
    `output_reserve_cap`), or the call's smaller `max_tokens`: a side call is cut only where
    a turn with the same messages would be too long."""
    table = session.deps.model_table
    info, policy = session.model_info, session.policy
    if isinstance(model, str) and model and not same_model(session, model, table):
        found = table.find(model)
        if found is not None:
            window = found.context_window
            if found.long_context_window and any(b.startswith("context-1m") for b in betas):
                window = found.long_context_window
            info = replace(found, context_window=window)
            try:
                policy = session.deps.policy.for_window(window)
            except ConfigError:  # a window below the smallest a session plans: unscaled
                policy = session.deps.policy
    reserve = info.context_window - effective_window(info, policy)
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        reserve = min(reserve, max_tokens)
    return SideBudget(info.context_window, info.context_window - reserve)


def side_request_tokens(
    messages: Sequence[MessageParam], params: Mapping[str, Any], scale: float | None
) -> int:
    """What a side request of `messages` under `params` (its system and tools) counts: the
    length estimate times `scale` (the session's calibration), padded by 4/3 without one."""
    raw = sum(content_tokens(m.get("content")) for m in messages)
    system = params.get("system")
    raw += content_tokens(system) if system else 0
    tools = params.get("tools")
    raw += rough_token_count(json.dumps(tools, default=str)) if tools else 0
    return pad_estimate(raw) if scale is None else math.ceil(raw * scale)


def fit_side_view(
    view: Sequence[MessageParam],
    fresh: Sequence[MessageParam],
    budget: int,
    count: Callable[[list[MessageParam]], int],
) -> tuple[list[MessageParam], int]:
    """`view` then `fresh`, the view cut to fit `budget` tokens as `count(messages)` counts
    them, and how many view messages were left out. The oldest API rounds go first; the
    view's opening (the task, or the summary of a compacted conversation) stays while it
    can, its last round always (the side call's messages may answer its calls); a marker
    says where the cut is. When no cut fits, the whole goes uncut: a cut would lose context
    and the API refuses either as too long.

    Each message is counted alone once and the cuts are sized by sums of those counts
    (linear in the rounds); only the cut chosen is counted whole, to confirm it."""
    whole = [*view, *fresh]
    if count(whole) <= budget:
        return whole, 0
    groups = group_by_api_round(view)
    if len(groups) < 2:
        return whole, 0
    head = groups[0] if groups[0][0].get("role") == "user" else []
    empty = count([])
    # What a message adds to a request beyond its own count: a joining comma, a rounding.
    joint = max(1, count([view[0], view[0]]) - 2 * count([view[0]]) + empty)

    def alone(messages: Sequence[MessageParam]) -> int:
        return sum(count([message]) - empty + joint for message in messages)

    sizes = [alone(group) for group in groups]
    # kept_sizes[drop]: what the rounds from `drop` on add.
    kept_sizes = [0] * (len(groups) + 1)
    for index in range(len(groups) - 1, -1, -1):
        kept_sizes[index] = kept_sizes[index + 1] + sizes[index]
    fresh_size = empty + alone(fresh)
    for keep_head in (True, False) if head else (False,):
        if keep_head:
            opening = [*head[:-1], _with_marker(head[-1])]
        else:
            opening = [cast(MessageParam, {"role": "user", "content": SIDE_CUT_MARKER})]
        opening_size = alone(opening)
        for drop in range(2 if head else 1, len(groups)):
            if opening_size + kept_sizes[drop] + fresh_size > budget:
                continue
            kept = [message for group in groups[drop:] for message in group]
            candidate = [*opening, *kept, *fresh]
            if count(candidate) <= budget:  # the sums err high; confirmed once
                left_out = len(view) - len(kept) - (len(head) if keep_head else 0)
                return candidate, left_out
    return whole, 0


def _with_marker(message: MessageParam) -> MessageParam:
    """A user message with the cut marker as its last text block."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    marker = {"type": "text", "text": SIDE_CUT_MARKER}
    return cast(MessageParam, {**message, "content": [*blocks, marker]})


def calls_recall(messages: Sequence[MessageParam]) -> bool:
    """Whether these messages hold a `recall` call (the session's rounds, which the caller
    never saw, or one it saw): a request holding one must declare the tool."""
    for message in messages:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and block.get("name") == RECALL_TOOL_NAME:
                return True
    return False


def holds_tool_blocks(messages: Sequence[MessageParam]) -> bool:
    """Whether these messages hold a tool_use or tool_result block (a request holding one
    must declare tools)."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            block.get("type") in ("tool_use", "tool_result") for block in content
        ):
            return True
    return False


def _result_text(content: Any) -> str:
    """The text of a tool result's content (a str, or blocks whose texts are joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


def recall_rounds_as_text(
    messages: Sequence[MessageParam], recall_ids: Collection[str]
) -> list[MessageParam]:
    """The messages with the session's `recall` calls (ids in `recall_ids`) and their results
    as text blocks, so a request declaring no recall tool holds none; a user message's other
    tool results stay first (the API wants them before any text)."""
    out: list[MessageParam] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(
            block.get("id") in recall_ids or block.get("tool_use_id") in recall_ids
            for block in content
        ):
            out.append(message)
            continue
        kept: list[Any] = []
        texts: list[Any] = []
        for block in content:
            if block.get("type") == "tool_use" and block.get("id") in recall_ids:
                called = json.dumps(block.get("input"), sort_keys=True)
                kept.append({"type": "text", "text": f"[{RECALL_TOOL_NAME} {called}]"})
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in recall_ids:
                said = _result_text(block.get("content")) or "(nothing)"
                texts.append({"type": "text", "text": f"[{RECALL_TOOL_NAME} result] {said}"})
            else:
                kept.append(block)
        out.append(cast(MessageParam, {**message, "content": [*kept, *texts]}))
    return out


def with_recall_tool(params: dict[str, Any]) -> dict[str, Any]:
    """The side call's parameters with the `recall` tool declared after its own tools."""
    tools = list(params.get("tools") or [])
    if not any(tool.get("name") == RECALL_TOOL_NAME for tool in tools):
        tools.append(recall_tool_schema("anthropic"))
    return {**params, "tools": tools}


def fresh_messages(fields: Sequence[tuple[str, Any]]) -> list[MessageParam]:
    """The side call's own messages (role and stored content) as request messages."""
    return [cast(MessageParam, {"role": role, "content": content}) for role, content in fields]


__all__ = [
    "SIDE_CUT_MARKER",
    "SIDE_PARAMETERS",
    "SideBudget",
    "calls_recall",
    "fit_side_view",
    "fresh_messages",
    "holds_tool_blocks",
    "recall_rounds_as_text",
    "same_model",
    "side_budget",
    "side_request",
    "side_request_tokens",
    "side_view",
    "with_recall_tool",
]
