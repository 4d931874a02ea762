"""What every model provider offers the pipeline, and the errors it raises.

A provider turns a `ProviderRequest` (Anthropic-shaped plain data) into a `ModelResponse`,
async first with a sync facade. Errors from any SDK are mapped onto one small hierarchy with
the server's details attached, so the pipeline can decide: retry after `retry_after`, truncate
by `token_gap` and retry on prompt-too-long, or give up.
"""

from __future__ import annotations

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
from unbounded.wire.base import is_prompt_too_long_message, parse_prompt_too_long


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
