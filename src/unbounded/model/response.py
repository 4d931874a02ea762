"""A model's reply and the protocol of what sends requests to a model.

They sit in the conversation model, below compaction (which calls a summarizer) and the
providers (which implement the protocol over an SDK); `unbounded.providers` re-exports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from unbounded.model.content import ContentBlock, Usage
from unbounded.model.request import ProviderRequest


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's reply in Anthropic shape: content blocks, why it stopped, and its usage."""

    content: list[ContentBlock]
    stop_reason: str | None
    usage: Usage
    model: str
    id: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def text(self) -> str:
        """All text blocks joined."""
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[ContentBlock]:
        """The tool_use blocks of the reply."""
        return [b for b in self.content if b.get("type") == "tool_use"]


Heartbeat = Callable[[float], Awaitable[None] | None]
"""Called with the seconds elapsed while a long call runs (a UI or an IDE link stays alive)."""


@runtime_checkable
class Provider(Protocol):
    """Sends requests to a model."""

    name: str
    supports_cache_edits: bool

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send one request and return the whole reply (streamed underneath when asked)."""
        ...


SUMMARY_CAPABILITIES: tuple[str, ...] = (
    "writes_final_summary",
    "includes_facts",
    "summary_sections",
    "offline",
)
"""What a summarizer may declare about its replies, beside `name` and `supports_cache_edits`:
`writes_final_summary` (its text is the summary itself, never parsed for tags),
`includes_facts` (it lists the transcript's facts already: no facts ledger is appended),
`summary_sections` (the headings the guard checks, a `SectionSpec`) and `offline` (it sends
no request to a model: the offline hand-over, which costs nothing and never fails)."""


def forward_capabilities(inner: object, wrapper: object) -> None:
    """Give `wrapper`, a provider that wraps `inner`, the capabilities `inner` declares
    (`SUMMARY_CAPABILITIES`), so what compaction reads of a summarizer is the same through a
    retrying, tracing or recording wrapper as on the provider itself (the wrapper sets its
    `name` and `supports_cache_edits` itself)."""
    for flag in SUMMARY_CAPABILITIES:
        if hasattr(inner, flag):
            setattr(wrapper, flag, getattr(inner, flag))


def is_offline(provider: object) -> bool:
    """Whether `provider` is the offline hand-over (sends nothing to a model)."""
    return bool(getattr(provider, "offline", False))
