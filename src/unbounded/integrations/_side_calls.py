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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.catalog import ModelTable
from unbounded.compaction.micro import clear_tool_results
from unbounded.compaction.ptl import group_by_api_round
from unbounded.model.content import MessageParam
from unbounded.model.request import ProviderRequest
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


def side_window(session: Session, model: object, table: ModelTable | None) -> int:
    """The context window a side call on `model` must fit: the session's (as planned, with
    wrap()'s `context_window` when given), or the side model's when `table` knows it as
    smaller (a title asked of a small model over a long conversation)."""
    window = session.model_info.context_window
    if isinstance(model, str) and model and model != session.config.model and table is not None:
        info = table.find(model)
        if info is not None:
            window = min(window, info.context_window)
    return window


def side_request_tokens(
    session: Session, messages: Sequence[MessageParam], params: Mapping[str, Any]
) -> int:
    """What a side request of `messages` under `params` (its system and tools) counts, by
    the length estimate scaled as the session's last usage measured it (padded by 4/3
    before any usage)."""
    raw = sum(content_tokens(m.get("content")) for m in messages)
    system = params.get("system")
    raw += content_tokens(system) if system else 0
    tools = params.get("tools")
    raw += rough_token_count(json.dumps(tools, default=str)) if tools else 0
    calibration = session.calibration
    return pad_estimate(raw) if calibration is None else math.ceil(raw * calibration)


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
    says where the cut is. When no cut is enough, the shortest is returned: the API then
    refuses it as too long, as it would have refused the whole."""
    whole = [*view, *fresh]
    if count(whole) <= budget:
        return whole, 0
    groups = group_by_api_round(view)
    if len(groups) < 2:
        return whole, 0
    head = groups[0] if groups[0][0].get("role") == "user" else []
    shortest: tuple[list[MessageParam], int] = (whole, 0)
    for keep_head in (True, False) if head else (False,):
        if keep_head:
            opening = [*head[:-1], _with_marker(head[-1])]
        else:
            opening = [cast(MessageParam, {"role": "user", "content": SIDE_CUT_MARKER})]
        for drop in range(2 if head else 1, len(groups)):
            kept = [message for group in groups[drop:] for message in group]
            left_out = len(view) - len(kept) - (len(head) if keep_head else 0)
            shortest = ([*opening, *kept, *fresh], left_out)
            if count(shortest[0]) <= budget:
                return shortest
    return shortest


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
    "calls_recall",
    "fit_side_view",
    "fresh_messages",
    "holds_tool_blocks",
    "recall_rounds_as_text",
    "side_request",
    "side_request_tokens",
    "side_view",
    "side_window",
    "with_recall_tool",
]
