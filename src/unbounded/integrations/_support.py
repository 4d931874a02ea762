"""What the integrations share: session coercion and tool registration for microcompaction
(reactive compaction is the turn engine's, `unbounded.engine`)."""

from __future__ import annotations

from collections.abc import Iterable

from unbounded.errors import ConfigError
from unbounded.session import Session
from unbounded.sync_session import SyncSession


def as_session(value: Session | SyncSession) -> Session:
    """The async `Session` behind a `Session` or a `SyncSession`."""
    if isinstance(value, SyncSession):
        return value.session
    if isinstance(value, Session):
        return value
    raise ConfigError(f"expected a Session or a SyncSession, not {type(value).__name__}")


def register_compactable_tools(session: Session, names: Iterable[str]) -> None:
    """Let microcompaction clear the results of these tools (their output can be reproduced)."""
    session.micro.register_compactable(*names)


__all__ = [
    "as_session",
    "register_compactable_tools",
]
