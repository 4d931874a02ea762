"""How many requests one compaction's summary may send, counted through every wrapper.

One summary can cost several requests: the cache-sharing request, its retry with a larger
output budget when the reply was cut off, a round per prompt-too-long answer, the direct
request it hands over to, and the transport retries of a retrying wrapper under each of
them; a summary that keeps failing is tried again on the next turns until the circuit
breaker trips. Each of those requests resends the whole conversation, so a compaction
carries one `RequestBudget` (`Policy.compact_max_summary_requests`) from its first request
to the one that lands it, and every request is taken from it before it is sent.

The summary job takes its own requests (`take`). A wrapper that sends again inside one
`create` call (`RetryingProvider`) cannot be handed the budget through the `Provider`
protocol, so the job makes it the active budget while its request runs (`active()`, a
context variable: tasks started inside inherit it) and the wrapper asks `take_retry()`
before each retry; with no active budget (a request outside a compaction) nothing bounds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from unbounded.errors import ConfigError

_ACTIVE: ContextVar[RequestBudget | None] = ContextVar("unbounded_request_budget", default=None)


@dataclass(slots=True)
class RequestBudget:
    """Requests a compaction may still send: `limit` in all, `used` so far."""

    limit: int
    used: int = 0

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ConfigError(f"RequestBudget.limit must be >= 1, not {self.limit}")
        if self.used < 0:
            raise ConfigError(f"RequestBudget.used must be >= 0, not {self.used}")

    @property
    def spent(self) -> bool:
        """No request is left."""
        return self.used >= self.limit

    def take(self) -> bool:
        """Count one request about to be sent; False (nothing counted) when none is left."""
        if self.spent:
            return False
        self.used += 1
        return True

    @contextmanager
    def active(self) -> Iterator[RequestBudget]:
        """Make this the budget retries inside the block are taken from (`take_retry`)."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


def take_retry() -> bool:
    """Count a retry against the active budget: False when it is spent (do not send), True
    when it was counted or no budget is active."""
    budget = _ACTIVE.get()
    return True if budget is None else budget.take()


__all__ = ["RequestBudget", "take_retry"]
