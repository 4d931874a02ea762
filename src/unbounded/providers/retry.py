"""`RetryingProvider`: transient API failures retried with the server's wait or a backoff.

Wraps any `Provider`. A call that fails with a `RetryableError` (429 rate limit, 529/503
overload, other 5xx, a reset or refused connection, a timeout, a stream cut mid-reply, a
malformed reply) is sent again:

- after `retry_after` seconds when the server said how long to wait (`retry-after-ms` /
  `retry-after`), never earlier; a wait longer than `max_retry_after` (when set) is not
  waited for: the error is raised at once, for the caller to schedule;
- else after an exponential backoff, `base_delay * 2**(retry - 1)` capped at `max_delay`,
  with jitter: the delay is drawn from `[(1 - jitter) * d, d]` by a seedable random source,
  so many clients that failed together do not retry together;
- never past `max_elapsed` seconds (by `clock`) since the call began, when set;
- never past the budget of the compaction whose summary it is sending, when there is one
  (each retry is taken from it: `unbounded.model.request_budget`).

`PromptTooLongError`, `AuthenticationError`, `BadRequestError` and every other error are
raised at once: sending the same request again cannot succeed. After `max_retries` retries
the last error is raised, unchanged. `sleep` and `clock` are injectable, so tests and soaks
run without waiting; `stats` counts attempts, retries, give-ups and every delay requested.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from unbounded.blocking import run_blocking
from unbounded.errors import ConfigError
from unbounded.events import EventSink, ProviderRetried, emit
from unbounded.model.request import ProviderRequest
from unbounded.model.request_budget import take_retry
from unbounded.model.response import ProviderWrapper
from unbounded.providers.base import (
    Heartbeat,
    ModelResponse,
    Provider,
    RetryableError,
)

logger = logging.getLogger(__name__)
DEFAULT_MAX_RETRIES = 4
"""Retries after the first attempt (so at most five calls)."""
DEFAULT_BASE_DELAY = 0.5
"""Seconds before the first retry when the server gave no wait."""
DEFAULT_MAX_DELAY = 32.0
"""Longest backoff between two attempts (a server's `retry_after` may be longer)."""
DEFAULT_JITTER = 0.25
"""Fraction of the backoff drawn at random (0: none, 1: anywhere between 0 and the delay)."""

Sleep = Callable[[float], Awaitable[Any]]
"""An awaitable sleep, `asyncio.sleep` by default."""


@dataclass(slots=True)
class RetryStats:
    """What a `RetryingProvider` did: calls, attempts, retries, give-ups and each delay."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    gave_up: int = 0
    succeeded: int = 0
    delays: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def note_error(self, error: BaseException) -> None:
        """Count an error by its class name."""
        name = type(error).__name__
        self.errors[name] = self.errors.get(name, 0) + 1


class RetryingProvider(ProviderWrapper):
    """A `Provider` that retries another provider's transient failures (see the module doc)."""

    def __init__(
        self,
        provider: Provider,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        base_delay: float = DEFAULT_BASE_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        jitter: float = DEFAULT_JITTER,
        max_retry_after: float | None = None,
        max_elapsed: float | None = None,
        seed: int | None = None,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        events: EventSink | None = None,
    ) -> None:
        if max_retries < 0:
            raise ConfigError("max_retries must be >= 0")
        if base_delay < 0 or max_delay < 0 or max_delay < base_delay:
            raise ConfigError("delays must be >= 0 and max_delay >= base_delay")
        if not 0 <= jitter <= 1:
            raise ConfigError("jitter must be between 0 and 1")
        if max_retry_after is not None and max_retry_after < 0:
            raise ConfigError("max_retry_after must be >= 0")
        if max_elapsed is not None and max_elapsed < 0:
            raise ConfigError("max_elapsed must be >= 0")
        super().__init__(provider)
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self.max_retry_after = max_retry_after
        self.max_elapsed = max_elapsed
        self.rng = rng or random.Random(seed)
        self.sleep = sleep
        self.clock = clock
        self.events = events
        self.stats = RetryStats()

    def backoff(self, retry: int) -> float:
        """The delay before retry number `retry` (1-based) when the server gave none."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        return ceiling * (1 - self.jitter * self.rng.random())

    def delay_for(self, error: RetryableError, retry: int) -> float | None:
        """Seconds to wait before retry `retry` after `error`; None: do not retry."""
        if retry > self.max_retries:
            return None
        wait = error.retry_after
        if wait is None:
            return self.backoff(retry)
        if self.max_retry_after is not None and wait > self.max_retry_after:
            return None
        return max(0.0, wait)

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Send the request, retrying transient failures; raise the last error on giving up."""
        self.stats.calls += 1
        started = self.clock()
        retry = 0
        while True:
            self.stats.attempts += 1
            try:
                response = await self.inner.create(request, stream=stream, heartbeat=heartbeat)
            except RetryableError as error:
                self.stats.note_error(error)
                retry += 1
                delay = self.delay_for(error, retry)
                if (
                    delay is not None
                    and self.max_elapsed is not None
                    and self.clock() - started + delay > self.max_elapsed
                ):
                    delay = None
                # A compaction's summary counts its retries too (model/request_budget.py).
                if delay is not None and not take_retry():
                    delay = None
                if delay is None:
                    self.stats.gave_up += 1
                    raise
                self.stats.retries += 1
                self.stats.delays.append(delay)
                logger.warning(
                    "%s call failed (%s), retry %d in %.1f s",
                    self.name,
                    type(error).__name__,
                    retry,
                    delay,
                )
                emit(
                    self.events,
                    ProviderRetried(
                        provider=self.name,
                        attempt=retry,
                        delay=delay,
                        error=type(error).__name__,
                        status=error.status,
                        retry_after=error.retry_after,
                    ),
                )
                await self.sleep(delay)
                continue
            self.stats.succeeded += 1
            return response

    def create_sync(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """`create` for blocking code (inside a running event loop, on a worker thread: see
        `unbounded.blocking`)."""
        return run_blocking(self.create(request, stream=stream, heartbeat=heartbeat))


__all__ = ["RetryStats", "RetryingProvider"]
