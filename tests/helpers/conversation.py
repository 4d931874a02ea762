"""Small builders for plain API conversations in tests of the hand-over and the offline summary."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]


def user(text: str) -> Message:
    """A user message with one text."""
    return {"role": "user", "content": text}


def says(text: str) -> Message:
    """An assistant message with one text."""
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def use(tool_id: str, name: str, text: str = "", **tool_input: Any) -> Message:
    """An assistant message calling one tool (after an optional text)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return {"role": "assistant", "content": content}


def result(tool_id: str, content: str, *, error: bool = False) -> Message:
    """A user message answering one tool call."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def bash(tool_id: str, command: str, output: str, *, error: bool = False, text: str = "") -> list[Message]:
    """A Bash call and its result."""
    return [use(tool_id, "Bash", text, command=command), result(tool_id, output, error=error)]


def edit(tool_id: str, path: str, new: str, *, old: str = "x", output: str = "ok", error: bool = False) -> list[Message]:
    """An Edit call and its result."""
    return [use(tool_id, "Edit", file_path=path, old_string=old, new_string=new), result(tool_id, output, error=error)]


def write(tool_id: str, path: str, content: str) -> list[Message]:
    """A Write call and its result."""
    return [use(tool_id, "Write", file_path=path, content=content), result(tool_id, "File created")]


def read(tool_id: str, path: str, output: str = "1→x", *, error: bool = False) -> list[Message]:
    """A Read call and its result."""
    return [use(tool_id, "Read", file_path=path), result(tool_id, output, error=error)]
