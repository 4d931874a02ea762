"""A model's reply and the protocol of what sends requests to a model.

They sit in the conversation model, below compaction (which calls a summarizer) and the
providers (which implement the protocol over an SDK); `unbounded.providers` re-exports them.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from unbounded.errors import ConfigError
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.profile import ProviderProfile
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

T = TypeVar("T")


async def call_with_heartbeat(
    call: Awaitable[T], heartbeat: Heartbeat | None, interval: float
) -> T:
    """Await `call`, calling `heartbeat(elapsed_seconds)` every `interval` seconds meanwhile.

    The call runs as a task of its own while the heartbeat waits; if the caller is cancelled
    (or the heartbeat fails), that task is cancelled and awaited before this returns, so no
    request goes on in the background.
    """
    if heartbeat is None or interval <= 0:
        return await call
    task = asyncio.ensure_future(call)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                return task.result()
            beat = heartbeat(time.monotonic() - started)
            if inspect.isawaitable(beat):
                await beat
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@runtime_checkable
class Provider(Protocol):
    """Sends requests to a model."""

    name: str
    supports_cache_edits: bool

    @property
    def profile(self) -> ProviderProfile:
        """What it declares about its replies (`MODEL_PROFILE` for a plain model)."""
        ...

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send one request and return the whole reply (streamed underneath when asked)."""
        ...


class ProviderWrapper:
    """A provider that sends through another one (retrying, tracing, recording it...).

    Its `name`, `supports_cache_edits` and `profile` are the wrapped provider's, so what
    compaction reads of a summarizer is the same wrapped as bare; a subclass writes `create`
    and overrides `profile` only when it changes what the replies are (the sub-agent
    continuation asks for other sections).
    """

    def __init__(self, inner: Provider) -> None:
        if not isinstance(inner, Provider):
            raise ConfigError(
                f"{type(self).__name__} wraps a Provider (name, supports_cache_edits, profile "
                f"and create()), not {type(inner).__name__}"
            )
        self.inner = inner
        """The provider it sends through."""
        self.name = inner.name
        self.supports_cache_edits = inner.supports_cache_edits

    @property
    def profile(self) -> ProviderProfile:
        """The wrapped provider's profile."""
        return self.inner.profile
