"""What every model provider offers the pipeline, and the errors it raises.

A provider turns a `ProviderRequest` (Anthropic-shaped plain data) into a `ModelResponse`,
async first with a sync facade. Errors from any SDK are mapped onto one small hierarchy with
the server's details attached, so the pipeline can decide: retry after `retry_after`, truncate
by `token_gap` and retry on prompt-too-long, or give up.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any

from unbounded.blocking import run_blocking

# The error tree lives in unbounded.errors, the reply and the protocol in
# unbounded.model.response (below compaction, which uses them); importable from here as before.
from unbounded.errors import (
    AuthenticationError,
    BadRequestError,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    RetryableError,
    ServerError,
)
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ModelResponse, Provider

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


class SdkProvider(ABC):
    """`create` and its blocking twin `create_sync`, over one `_create` the SDK adapters write."""

    profile: ProviderProfile = MODEL_PROFILE
    """A model behind an SDK: its replies are parsed for the summary and checked in full."""

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
        """`create` for blocking code (inside a running event loop, on a worker thread: see
        `unbounded.blocking`)."""
        return run_blocking(
            self._create(request, stream=stream, heartbeat=heartbeat, want_async=False)
        )

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


run_sync = run_blocking
"""The old name of `unbounded.blocking.run_blocking`."""


__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "Heartbeat",
    "ModelResponse",
    "OverloadedError",
    "PromptTooLongError",
    "Provider",
    "ProviderError",
    "RateLimitedError",
    "RetryableError",
    "SdkProvider",
    "ServerError",
    "is_prompt_too_long_message",
    "parse_prompt_too_long",
    "run_sync",
]
