"""`SessionCore`: what the parts of a session (its prepare steps, its compactor) read and call
of the session they serve.

`Session` is one; the parts name this protocol instead, so they sit below `session.py` and
import nothing of it. It extends `ExtensionHost` (what an extension sees) with the state, the
dependencies and the derived settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from unbounded.extension import ExtensionHost

if TYPE_CHECKING:
    from unbounded.caching.break_detector import PromptCacheBreakDetector
    from unbounded.configuration import DerivedSettings
    from unbounded.session_options import SessionDeps
    from unbounded.session_recall import SessionRecall
    from unbounded.session_state import SessionState
    from unbounded.session_transcript import SessionTranscript


class SessionCore(ExtensionHost, Protocol):
    """What a session's prepare steps and compactor use of it."""

    @property
    def settings(self) -> DerivedSettings:
        """Everything derived from the config and policy."""
        ...

    @property
    def state(self) -> SessionState:
        """What the session saves and restores."""
        ...

    @property
    def deps(self) -> SessionDeps:
        """What the session talks to."""
        ...

    @property
    def transcript(self) -> SessionTranscript:
        """The entries and their view."""
        ...

    @property
    def detector(self) -> PromptCacheBreakDetector:
        """The cache-break detector."""
        ...

    @property
    def recall(self) -> SessionRecall:
        """Recall answers and receipts."""
        ...

    @property
    def offers_recall(self) -> bool:
        """Whether requests offer the `recall` tool now."""
        ...

    def estimate_request_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """What a request of these messages will count."""
        ...

    def answer_pending_calls(self, reason: str, *, except_ids: set[str] | None = None) -> None:
        """Answer each tool call still waiting for a result with a synthetic error."""
        ...

    def save_state(self) -> None:
        """Save what changed of the state."""
        ...


__all__ = ["SessionCore"]
