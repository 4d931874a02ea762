"""One turn of the pipeline: the context the prepare steps pass along, and the step shape.

`Session.prepare` is a fold over the session's steps, each an async callable taking the
turn's `TurnContext`. In order (docs/session.md draws the same list):

    answer_pending_calls   tool calls left without a result get a synthetic one
    before_prepare         extensions first (session notes, instruction files)
    upgrade_cache_ttl      the 1-hour TTL at a cold moment, once pauses showed it pays
    auto_compact           compaction when the context is at the threshold (or early)
    microcompact           clear stale tool results, queue cache edits
    build_request          system, tools and the messages into one request
    place_breakpoints      cache markers (CacheBreakpointPlanner)
    attach_cache_edits     the queued cache deletions
    before_request         extensions' `before_request` (may replace the request)
    validate               optional: the request checked against the API's rules
    record_prompt_state    the break detector's snapshot of what is sent
    finish                 the warning level, the saved state

Each step keeps its own watermark of what it has already read (the tool ledger, the
breakpoint planner, the break detector, the notes trigger) and reads only the messages past
it, so a turn costs what it appended. `first_changed` says where this turn's messages start
to differ from the previous turn's (a compaction makes it 0, a cleared tool result its
message's index, a plain turn the previous length): the steps after `microcompact` reuse
what they derived from the messages before it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from unbounded.model.content import MessageParam
from unbounded.model.request import ProviderRequest

if TYPE_CHECKING:
    from unbounded.compaction.micro import MicrocompactResult


@dataclass(slots=True)
class TurnContext:
    """What one call of `Session.prepare` has built so far."""

    now: datetime
    """The turn's clock reading (every step sees the same time)."""
    messages: list[MessageParam] = field(default_factory=list)
    """The messages to send, once `microcompact` has run: microcompaction's own list, to read
    during this turn only (it is brought up to date in place next turn: copy it to keep it)."""
    first_changed: int = 0
    """`messages[:first_changed]` are those of the previous turn's request (the same objects,
    or equal ones): what a step derived from them last turn still holds."""
    microcompaction: MicrocompactResult | None = None
    """What microcompaction did this turn."""
    request: ProviderRequest | None = None
    """The request, once `build_request` has run; later steps replace it."""

    def built_request(self) -> ProviderRequest:
        """The request built so far (a step that needs one runs after `build_request`)."""
        if self.request is None:
            raise RuntimeError("no request yet: this step must run after build_request")
        return self.request


class TurnStep(Protocol):
    """One step of `Session.prepare`: reads and updates the turn context."""

    def __call__(self, turn: TurnContext, /) -> Awaitable[None]:
        """Run the step for this turn."""
        ...
