"""How attachment records become user content the model reads.

Claude Code attaches context (files, todo lists, plans, instruction files, hook output…) as
`attachment` records; on send they become text wrapped in `<system-reminder>` tags, merged
into the user message they follow. Unknown attachment types are rendered from their fields so
nothing the agent attached is silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from unbounded.model.content import TextBlock

Renderer = Callable[[dict[str, Any]], str | None]


def _reminder(text: str) -> str:
    return f"<system-reminder>\n{text.strip()}\n</system-reminder>"


def _file_text(attachment: dict[str, Any]) -> str | None:
    path = attachment.get("filename") or attachment.get("path") or "?"
    content = attachment.get("content")
    if isinstance(content, dict):
        file = content.get("file")
        content = file.get("content") if isinstance(file, dict) else content.get("content")
    if not isinstance(content, str):
        return f"The file {path} was attached."
    truncated = " (truncated)" if attachment.get("truncated") else ""
    return f"Contents of {path}{truncated}:\n{content}"


def _todo_text(attachment: dict[str, Any]) -> str | None:
    items = attachment.get("content")
    if not isinstance(items, list) or not items:
        return "The todo list is empty."
    lines = []
    for item in items:
        if isinstance(item, dict):
            lines.append(f"- [{item.get('status', 'pending')}] {item.get('content', '')}")
        else:
            lines.append(f"- {item}")
    return "Current todo list:\n" + "\n".join(lines)


def _plan_text(attachment: dict[str, Any]) -> str | None:
    path = attachment.get("planFilePath") or "the plan file"
    content = attachment.get("planContent")
    if not isinstance(content, str):
        return None
    return f"The plan for this session ({path}):\n{content}"


def _nested_memory_text(attachment: dict[str, Any]) -> str | None:
    path = attachment.get("path") or "?"
    content = attachment.get("content")
    if isinstance(content, dict):
        content = content.get("content")
    if not isinstance(content, str):
        return None
    return f"Instructions from {path}:\n{content}"


def _lines_text(attachment: dict[str, Any]) -> str | None:
    content = attachment.get("content")
    if isinstance(content, list):
        return "\n".join(str(part) for part in content)
    if isinstance(content, str):
        return content
    return None


def _generic_text(attachment: dict[str, Any]) -> str | None:
    fields = {k: v for k, v in attachment.items() if k != "type"}
    if not fields:
        return None
    body = orjson.dumps(fields, option=orjson.OPT_INDENT_2).decode()
    return f"Attached context ({attachment.get('type')}):\n{body}"


RENDERERS: dict[str, Renderer] = {
    "file": _file_text,
    "compact_file_reference": _file_text,
    "todo": _todo_text,
    "plan_file_reference": _plan_text,
    "nested_memory": _nested_memory_text,
    "hook_additional_context": _lines_text,
    "critical_system_reminder": _lines_text,
    "text": _lines_text,
    "plan_mode": lambda a: "Plan mode is active: plan before making changes.",
}
"""Attachment type -> text renderer. Users may register their own types here."""


def attachment_to_content(attachment: dict[str, Any]) -> list[TextBlock]:
    """Render one attachment as user content blocks (empty when it carries nothing)."""
    renderer = RENDERERS.get(str(attachment.get("type")), _generic_text)
    text = renderer(attachment)
    if not text or not text.strip():
        return []
    return [{"type": "text", "text": _reminder(text)}]
