"""Message content in the canonical form the drop-in's prints and comparisons use (only the
fields that identify a block, `None` fields and markers left out). The stored form, and SDK
objects as plain dicts, are the Messages wire format's (`unbounded.wire.anthropic`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.wire.anthropic import block_dict

_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
    "server_tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id", "content", "is_error"),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
    "image": ("source",),
    "document": ("source",),
}


def _canonical_block(block: Any) -> dict[str, Any]:
    data = block_dict(block)
    kind = data.get("type")
    keys = _BLOCK_KEYS.get(str(kind))
    if keys is None:
        return {k: v for k, v in data.items() if k != "cache_control" and v is not None}
    out: dict[str, Any] = {"type": kind}
    for key in keys:
        value = data.get(key)
        if value is None or (key == "is_error" and value is False):
            continue
        if key == "content":
            value = canonical_content(value)
        out[key] = value
    return out


def canonical_content(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_canonical_block(b) for b in content or []]


def canonical_system(system: Any) -> list[dict[str, Any]]:
    """A system prompt for comparison: text blocks, cache markers and None fields left out."""
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return [_canonical_block(b) for b in system]


def canonical_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "cache_control"} for t in tools]
