"""`CompactionContext`: everything a compaction tier reads, as one frozen value.

A `Session` builds it (`Session.compaction_context()`) and the LangChain middleware builds
its own; the tiers of `compaction.auto`, `compact_conversation`'s callers and
`try_session_memory_compaction` read its fields instead of reaching into a session. A new
input is a new field with a default, so no tier's signature changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from unbounded.compaction.conversation import (
    CachePlanner,
    CacheSafeParams,
    CompactionHooks,
    FallbackReason,
    PostCompactionFit,
    SummaryJob,
)
from unbounded.compaction.glue import (
    RecordedState,
    RehydrateSource,
    Rehydrator,
    rehydrator_for,
)
from unbounded.errors import ConfigError
from unbounded.events import EventSink
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry
from unbounded.model.request_budget import RequestBudget
from unbounded.policy import Policy
from unbounded.tokens.estimate import estimate_messages_tokens


class Handover(Protocol):
    """A summary one tier passes on to the next (`compaction.auto.SummaryHandover`)."""

    @property
    def job(self) -> SummaryJob | None:
        """The summary in progress, or None when there was nothing to summarize."""
        ...

    def taken_by(self, tier: object) -> bool:
        """Whether `tier` finishes this summary."""
        ...


RequestEstimator = Callable[[Sequence[Mapping[str, Any]]], int]
"""The tokens a request of these messages will count (system prompt and tools included)."""
FactsLedger = Callable[[list[Entry]], str]
"""Text appended to a summary, built from the entries it replaces."""


def _no_notes() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class CompactionContext:
    """The conversation and its settings at the moment a compaction is tried."""

    entries: Sequence[Entry]
    """The main thread, oldest first (what came before the last boundary included)."""
    view: Sequence[Entry]
    """The records after the last compact boundary: what the model sees."""
    policy: Policy
    params: CacheSafeParams
    """What the main requests send, so a summary call shares their prompt cache."""
    autocompact_threshold: int
    """The context size at which the conversation compacts (a result must end under it)."""
    tokens: int
    """The context's size now (reported usage plus the estimate of what followed)."""
    calibration: float | None = None
    """Reported tokens / length estimate from the last usage (None: no usage seen yet)."""
    estimate_request_tokens: RequestEstimator = estimate_messages_tokens
    """Calibrated size of a request of these messages, system prompt and tools included."""
    transcript_path: str | None = None
    """Where the full transcript is, named in the summary."""
    notes_path: str | None = None
    """Where the session notes are, named when they are cut for a summary."""
    read_notes: Callable[[], str | None] = _no_notes
    """The session notes as stored now (None when never written)."""
    allowed_roots: Sequence[str] | None = None
    """Folders files may be re-read from after a compaction (None: the session's roots)."""
    rehydrate_from: RehydrateSource | None = "disk"
    """Re-injected files come from the disk or the transcript; None re-injects nothing."""
    recorded: RecordedState | None = None
    """What earlier compactions (and turns) already read of `entries` and `view` (a
    transcript that only grows); with it, `view` is taken as derived from `entries`."""
    hooks: CompactionHooks | None = None
    events: EventSink | None = None
    boundary_metadata: Mapping[str, Any] = field(default_factory=dict)
    """Added to the boundary's compactMetadata (query source, recompaction tracking)."""
    sent_messages: Sequence[MessageParam] | None = None
    """The last main request's messages as sent (earlier clears applied), so a full
    compaction's summary request repeats their prefix; None normalizes the view again."""
    planner: CachePlanner | None = None
    """Places the summary request's cache breakpoints (None: the default placement)."""
    facts_ledger: FactsLedger | None = None
    rewritten: bool | None = None
    """False: the caller knows no entry holds a block a summary request rewrites (media, a
    server compaction: `view_folds.holds_rewritten_block`); None: not known, looked for."""
    keep_from: str | None = None
    """An automatic compaction keeps the records from this uuid on verbatim (the messages of
    the current turn); "" when those are all there is (nothing to summarize)."""
    handover: Handover | None = None
    """A summary the previous tier of this run handed over for the tier given this context to
    finish (`compaction.auto`: the cache-sharing request failed, the direct one goes on)."""
    budget: RequestBudget | None = None
    """The model requests this compaction may still send for its summary, shared by its
    tiers and counted by every request and retry (None: unbounded)."""
    fallback: FallbackReason | None = None
    """Set by the tiers' run for a fallback tier: why the offline hand-over writes now."""

    def __post_init__(self) -> None:
        if self.autocompact_threshold <= 0:
            raise ConfigError(
                f"CompactionContext.autocompact_threshold must be > 0, "
                f"not {self.autocompact_threshold}"
            )
        if self.tokens < 0:
            raise ConfigError(f"CompactionContext.tokens must be >= 0, not {self.tokens}")
        if self.calibration is not None and self.calibration <= 0:
            raise ConfigError(
                f"CompactionContext.calibration must be > 0 or None, not {self.calibration}"
            )
        if self.rehydrate_from not in ("disk", "transcript", None):
            raise ConfigError(
                "CompactionContext.rehydrate_from must be 'disk', 'transcript' or None, "
                f"not {self.rehydrate_from!r}"
            )

    def post_fit(self) -> PostCompactionFit:
        """Whether the messages a compaction leaves fill at most
        `Policy.rehydrate_max_room_share` of the room below the threshold (the system prompt
        and tools left out): past that, its re-injected attachments are left out."""
        prefix = self.estimate_request_tokens([])
        room = max(0, self.autocompact_threshold - prefix)
        limit = prefix + self.policy.rehydrate_max_room_share * room
        return lambda messages: self.estimate_request_tokens(messages) <= limit

    def rehydrator(self) -> Rehydrator | None:
        """What re-injects files, todos and plans after a compaction (None: nothing)."""
        if self.rehydrate_from is None:
            return None
        return rehydrator_for(
            self.entries,
            self.allowed_roots,
            source=self.rehydrate_from,
            policy=self.policy,
            recorded=self.recorded,
        )


__all__ = ["CompactionContext", "FactsLedger", "RequestEstimator"]
