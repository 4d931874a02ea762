"""What the integrations share: session coercion, appending a framework's message, answering
the `recall` tool, and tool registration for microcompaction (reactive compaction is the turn
engine's, `unbounded.engine`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from unbounded.errors import ConfigError
from unbounded.model.content import Role
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.session import Session
from unbounded.sync_session import SyncSession


def as_session(value: Session | SyncSession) -> Session:
    """The async `Session` behind a `Session` or a `SyncSession`."""
    if isinstance(value, SyncSession):
        return value.session
    if isinstance(value, Session):
        return value
    raise ConfigError(f"expected a Session or a SyncSession, not {type(value).__name__}")


def append_message(
    session: Session,
    role: Role,
    blocks: list[dict[str, Any]],
    reply: Mapping[str, Any] | None = None,
) -> None:
    """Append one message of a framework's history to `session` by what it is: an assistant
    message is recorded as a reply (with `reply`'s other fields: usage, model, id...), a user
    message of tool results only as tool results, any other user message as a user turn."""
    if role == "assistant":
        session.record({"content": blocks, **(reply or {})})
    elif all(block.get("type") == "tool_result" for block in blocks):
        session.add_tool_results(blocks)
    else:
        session.add_user(blocks)


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    """The session's answer to a `recall` call, as a framework's tool returns it."""

    text: str
    """The result's content: its text, or its blocks as JSON."""
    is_error: bool
    """Whether the arguments were wrong (the text says what to fix)."""


def recall_answer(result: Mapping[str, Any]) -> RecallAnswer:
    """A `recall` tool_result block as a framework's tool returns it."""
    content = result.get("content", "")
    text = content if isinstance(content, str) else json.dumps(content)
    return RecallAnswer(text, bool(result.get("is_error")))


def answer_recall(session: Session, call_id: str, arguments: Any) -> RecallAnswer:
    """Answer a `recall` call (its id and its parsed arguments) from the session's transcript."""
    return recall_answer(
        session.run_recall(
            {"type": "tool_use", "id": call_id, "name": RECALL_TOOL_NAME, "input": arguments}
        )
    )


def register_compactable_tools(session: Session, names: Iterable[str]) -> None:
    """Let microcompaction clear the results of these tools (their output can be reproduced)."""
    session.micro.register_compactable(*names)


__all__ = [
    "RecallAnswer",
    "answer_recall",
    "append_message",
    "as_session",
    "recall_answer",
    "register_compactable_tools",
]
