"""The caller's prompt-cache markers: the TTLs a caller put on message, tool and system
blocks, and `honor_caller_markers`, which puts the caller's settings back on the request
`Session.prepare` planned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from unbounded.model.request import ProviderRequest
from unbounded.wire.anthropic import block_dict, plain_data


def _marker_ttl(block: Any) -> str | None:
    if block is None:
        return None
    # A dict's marker read in place; anything else as `block_dict` reads it (SDK blocks dumped).
    marker = (block if isinstance(block, Mapping) else block_dict(block)).get("cache_control")
    if not isinstance(marker, Mapping):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


def _block_ttls(block: Any) -> list[str]:
    """The TTLs of the markers on a block and on the blocks of a tool_result's content (a
    caller may mark the result's text rather than the tool_result block itself)."""
    if block is None:
        return []
    data = block if isinstance(block, Mapping) else block_dict(block)
    ttl = _marker_ttl(data)
    found = [] if ttl is None else [ttl]
    inner = data.get("content") if data.get("type") == "tool_result" else None
    if isinstance(inner, list):
        found.extend(t for t in map(_marker_ttl, inner) if t is not None)
    return found


def message_markers(messages: Sequence[Any]) -> list[str]:
    """The TTLs of the cache markers a caller put on message blocks."""
    found: list[str] = []
    for message in messages:
        data = plain_data(message)
        content = data.get("content") if isinstance(data, Mapping) else None
        found.extend(content_ttls(content))
    return found


def content_ttls(content: Any) -> list[str]:
    """The TTLs of the cache markers on a message content's blocks (those inside a
    tool_result's content too)."""
    if isinstance(content, str) or not content:
        return []
    return [ttl for block in content for ttl in _block_ttls(block)]


def sdk_block_ttls(blocks: Sequence[Any]) -> list[str]:
    """The marker TTLs on a reply's blocks (`content_ttls`), without dumping the SDK blocks
    (pydantic models) that hold no marker, as a reply's blocks never do."""
    for block in blocks:
        fields = getattr(type(block), "model_fields", None)
        extra = getattr(block, "model_extra", None) if isinstance(fields, dict) else None
        if (
            not isinstance(fields, dict)
            or isinstance(block, Mapping)
            or "cache_control" in fields
            or (extra and "cache_control" in extra)
        ):
            return content_ttls(list(blocks))
    return []


def longest_ttl(ttls: Sequence[str]) -> str | None:
    if not ttls:
        return None
    return "1h" if "1h" in ttls else "5m"


def _with_ttl(marker: Mapping[str, Any], ttl: str) -> dict[str, Any]:
    out = {k: v for k, v in marker.items() if k != "ttl"}
    if ttl == "1h":
        out["ttl"] = "1h"
    return out


def honor_caller_markers(
    request: ProviderRequest,
    system: Any,
    tools: Sequence[Mapping[str, Any]],
    messages_ttl: str | None,
    *,
    marked_messages: Sequence[int] | None = None,
) -> ProviderRequest:
    """The prepared request with the caller's cache settings put back (see the module doc).

    `marked_messages`: the only messages that can carry a marker (the plan's), when known;
    otherwise every message is looked at.

    A system block the caller marked keeps the caller's marker as given (TTL and scope); the
    tools marker takes the longest TTL the caller put on a tool, the message markers the
    longest one put on a message. The planner already kept the request within the API's 4
    markers (the caller's system markers count among them). Last, the API's rule that a
    1-hour marker never follows a 5-minute one: markers before the last 1-hour one are raised
    to 1 hour. The request is copied where it changes; the input is untouched.
    """
    body: dict[str, Any] = dict(cast(Mapping[str, Any], request))
    # Every marked block: [where, the block sent, the block to send]; lists are copied below
    # only where a block changes.
    slots: list[list[Any]] = []
    sent_tools = body.get("tools")
    if isinstance(sent_tools, list) and sent_tools:
        last = sent_tools[-1]
        if isinstance(last.get("cache_control"), Mapping):
            wanted = longest_ttl([t for t in (_marker_ttl(x) for x in tools) if t is not None])
            new = last
            if wanted is not None:
                new = {**last, "cache_control": _with_ttl(last["cache_control"], wanted)}
            slots.append([("tools", len(sent_tools) - 1), last, new])
    sent_system = body.get("system")
    if isinstance(sent_system, list) and sent_system:
        given = system if isinstance(system, list) else []
        for index, block in enumerate(sent_system):
            if not isinstance(block.get("cache_control"), Mapping):
                continue
            own = block_dict(given[index]).get("cache_control") if index < len(given) else None
            new = {**block, "cache_control": dict(own)} if isinstance(own, Mapping) else block
            slots.append([("system", index), block, new])
    sent_messages = body.get("messages")
    if isinstance(sent_messages, list):
        where = range(len(sent_messages)) if marked_messages is None else sorted(marked_messages)
        for index in where:
            if index >= len(sent_messages):
                continue
            content = sent_messages[index].get("content")
            if not isinstance(content, list):
                continue
            for position, block in enumerate(content):
                if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping):
                    new = block
                    if messages_ttl is not None:
                        marker = _with_ttl(block["cache_control"], messages_ttl)
                        new = {**block, "cache_control": marker}
                    slots.append([("messages", index, position), block, new])
    ttls = [_marker_ttl(slot[2]) for slot in slots]
    if "1h" in ttls:
        last_long = max(i for i, ttl in enumerate(ttls) if ttl == "1h")
        for slot in slots[:last_long]:
            block = slot[2]
            if _marker_ttl(block) != "1h":
                slot[2] = {**block, "cache_control": _with_ttl(block["cache_control"], "1h")}
    _put_back(body, [(slot[0], slot[2]) for slot in slots if slot[2] is not slot[1]])
    return cast(ProviderRequest, body)


def _put_back(body: dict[str, Any], changed: Sequence[tuple[tuple[Any, ...], Any]]) -> None:
    """Write the changed marked blocks into `body`, copying the lists (and messages) on the
    way to each one once: the request `body` was copied from stays as it was."""
    copied: dict[Any, list[Any]] = {}
    for where, block in changed:
        kind = where[0]
        if kind != "messages":
            if kind not in copied:
                copied[kind] = body[kind] = list(body[kind])
            copied[kind][where[1]] = block
            continue
        if "messages" not in copied:
            copied["messages"] = body["messages"] = list(body["messages"])
        messages, index = copied["messages"], where[1]
        if index not in copied:
            message = messages[index]
            copied[index] = list(message["content"])
            messages[index] = {**message, "content": copied[index]}
        copied[index][where[2]] = block
