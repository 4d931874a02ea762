"""Message content as the drop-in reads it: SDK objects as plain dicts, the form the session
stores (caller cache markers left out), and the canonical form prints and comparisons use
(only the fields that identify a block, `None` fields and markers left out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.errors import ConfigError

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


def plain_data(value: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-ready data; other values unchanged."""
    if type(value) is dict:  # the usual message or block: nothing to look up
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return value


def block_dict(block: Any) -> dict[str, Any]:
    data = plain_data(block)
    if isinstance(data, str):
        return {"type": "text", "text": data}
    if not isinstance(data, Mapping):
        raise ConfigError(f"a content block must be a dict or an SDK block, not {type(block)}")
    return dict(data)


def stored_content(content: Any) -> str | list[dict[str, Any]]:
    """Message content as the session stores it: plain dicts, caller cache markers removed."""
    if isinstance(content, str):
        return content
    if content is None:
        return []
    blocks: list[dict[str, Any]] = []
    for block in content:
        data = {k: v for k, v in block_dict(block).items() if k != "cache_control"}
        if data.get("type") == "tool_result" and isinstance(data.get("content"), list):
            data["content"] = [
                {k: v for k, v in block_dict(b).items() if k != "cache_control"}
                for b in data["content"]
            ]
        blocks.append(data)
    return blocks


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
