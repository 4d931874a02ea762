"""What the integrations share: reactive compaction, session coercion and tool registration
for microcompaction."""

from __future__ import annotations

from collections.abc import Iterable

from unbounded.errors import ConfigError
from unbounded.events import ReactiveCompaction, emit
from unbounded.session import Session, SyncSession


def as_session(value: Session | SyncSession) -> Session:
    """The async `Session` behind a `Session` or a `SyncSession`."""
    if isinstance(value, SyncSession):
        return value.session
    if isinstance(value, Session):
        return value
    raise ConfigError(f"expected a Session or a SyncSession, not {type(value).__name__}")


async def compact_after_prompt_too_long(session: Session, error: BaseException) -> bool:
    """One reactive compaction after a prompt-too-long answer, as `Session.call` does.

    True when the conversation was compacted (retry the call once); False when compaction is
    off or failed (give the error to the caller).
    """
    emit(session.events_sink(), ReactiveCompaction(str(error)))
    if not session.policy.compact_enabled:
        return False
    return await session.auto_compact() is not None


def register_compactable_tools(session: Session, names: Iterable[str]) -> None:
    """Let microcompaction clear the results of these tools (their output can be reproduced)."""
    session.micro.register_compactable(*names)


__all__ = [
    "as_session",
    "compact_after_prompt_too_long",
    "register_compactable_tools",
]
