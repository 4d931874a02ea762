"""The request of a managed side call: the session's view as its next request would send it,
the side call's own messages after it, the side call's own parameters; nothing recorded.

A side call that continues the conversation (a title or judge request over it, a call whose
system carries the time) would otherwise send the caller's whole history, which the session
may have compacted long ago: past the window, it is refused as too long."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.compaction.micro import clear_tool_results
from unbounded.model.content import MessageParam
from unbounded.model.request import ProviderRequest
from unbounded.recall.schema import RECALL_TOOL_NAME, recall_tool_schema
from unbounded.session import Session

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
    "SIDE_PARAMETERS",
    "calls_recall",
    "fresh_messages",
    "side_request",
    "side_view",
    "with_recall_tool",
]
