"""What every model provider offers the pipeline, and the errors it raises.

A provider turns a `ProviderRequest` (Anthropic-shaped plain data) into a `ModelResponse`,
async first with a sync facade. Errors from any SDK are mapped onto one small hierarchy with
the server's details attached, so the pipeline can decide: retry after `retry_after`, truncate
by `token_gap` and retry on prompt-too-long, or give up.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from unbounded.errors import UnboundedError
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.request import ProviderRequest


class ProviderError(UnboundedError):
    """A model call failed. `status` and `request_id` come from the server when it answered."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id
        self.body = body


class PromptTooLongError(ProviderError):
    """The request is over the context window; `token_gap` is how far over, when the server said."""

    def __init__(
        self,
        message: str,
        *,
        actual_tokens: int | None = None,
        limit_tokens: int | None = None,
        status: int | None = 400,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status=status, request_id=request_id, body=body)
        self.actual_tokens = actual_tokens
        self.limit_tokens = limit_tokens

    @property
    def token_gap(self) -> int | None:
        """Tokens to remove for the request to fit, or None when the error did not say."""
        if self.actual_tokens is None or self.limit_tokens is None:
            return None
        return max(0, self.actual_tokens - self.limit_tokens)


class RetryableError(ProviderError):
    """A transient failure; `retry_after` (seconds) when the server asked for a wait."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status=status, request_id=request_id, body=body)
        self.retry_after = retry_after


class RateLimitedError(RetryableError):
    """HTTP 429."""


class OverloadedError(RetryableError):
    """HTTP 529 (Anthropic) or 503: the service is overloaded."""


class ServerError(RetryableError):
    """HTTP 5xx other than overload, a reset connection or a timeout."""


class AuthenticationError(ProviderError):
    """The API key was refused (401/403). Never retried."""


class BadRequestError(ProviderError):
    """The request was refused as malformed (400 other than prompt-too-long). Never retried."""


_PTL_PATTERN = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)\s*maximum", re.I)
_CONTEXT_PATTERNS = (
    re.compile(
        r"maximum context length is (\d+) tokens.*?(?:requested|resulted in|you requested) (\d+)",
        re.I | re.S,
    ),
    re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ \d+ > (\d+)", re.I),
)


def parse_prompt_too_long(message: str) -> tuple[int, int] | None:
    """(actual tokens, limit) from a provider's prompt-too-long message, when it says."""
    match = _PTL_PATTERN.search(message)
    if match:
        return int(match.group(1)), int(match.group(2))
    openai_style = _CONTEXT_PATTERNS[0].search(message)
    if openai_style:
        return int(openai_style.group(2)), int(openai_style.group(1))
    max_tokens_style = _CONTEXT_PATTERNS[1].search(message)
    if max_tokens_style:
        return int(max_tokens_style.group(1)), int(max_tokens_style.group(2))
    return None


def is_prompt_too_long_message(message: str) -> bool:
    """Whether an error message says the prompt exceeds the context window."""
    lowered = message.lower()
    return (
        "prompt is too long" in lowered
        or "maximum context length" in lowered
        or "context_length_exceeded" in lowered
        or "exceed context limit" in lowered
        or "input is too long" in lowered
    )


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


class SdkProvider(ABC):
    """`create` and its blocking twin `create_sync`, over one `_create` the SDK adapters write."""

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send one request and return the whole reply (streamed underneath when asked)."""
        return await self._create(request, stream=stream, heartbeat=heartbeat, want_async=True)

    def create_sync(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """`create` for synchronous code (refuses inside a running event loop)."""
        call = self._create(request, stream=stream, heartbeat=heartbeat, want_async=False)
        try:
            result: ModelResponse = run_sync(call)
            return result
        finally:
            call.close()  # never started when refused inside a loop; a no-op otherwise

    @abstractmethod
    def _create(
        self,
        request: ProviderRequest,
        *,
        stream: bool,
        heartbeat: Heartbeat | None,
        want_async: bool,
    ) -> Coroutine[Any, Any, ModelResponse]:
        """The call itself, on an async or a sync client."""


def run_sync(awaitable: Awaitable[Any]) -> Any:
    """Run a coroutine from synchronous code (refuses inside a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    raise RuntimeError("use the async API inside a running event loop")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
