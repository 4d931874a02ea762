"""What a session saves and restores: `SessionState`, and the two state documents it lives in.

    SessionState
      micro        microcompaction: the tool-result ledger, what is cleared, cache edits
      tracking     the circuit breaker, turns and compaction chain, idle expiries, the last
                   summary's author, summary requests spent on a compaction not landed yet
      ttl_latch    the latched cache TTL
      calibration  reported tokens / length estimate, from the last usage seen
      extensions   each extension's own saved values, by its name (`extension_state`)

`StateFile` loads it from a store and saves it after each step: the cleared tool ids in a
document of their own (`CLEARED_STATE_NAME`), written only when they change, the rest in
`STATE_NAME`, written only when it differs from what was last written. Everything else a
session holds is derived (from the transcript, the config and the policy) or a dependency.
`SessionStatus` reports where the context stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unbounded.caching.ttl import CacheTtlLatch, latch_cache_ttl
from unbounded.catalog import ModelInfo
from unbounded.compaction.conversation import SummaryAuthor
from unbounded.compaction.micro import MicrocompactState
from unbounded.errors import ConfigError
from unbounded.policy import Policy, Thresholds, WarningLevel
from unbounded.storage import SessionStore
from unbounded.tokens.estimate import ContextCounter

STATE_NAME = "session"
CLEARED_STATE_NAME = "session_cleared"
"""The state document holding the tool ids microcompaction cleared, apart from `STATE_NAME`:
it grows with the history but changes only when results are cleared, so a turn's save does
not compare or write it again."""
CALIBRATION_MIN = 0.75
CALIBRATION_MAX = 3.0
"""Bounds of the reported/estimated ratio: outside them a usage is more likely wrong (a
cache-edit credit, a provider that reports oddly) than the estimate that far off."""


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """Where the context stands now."""

    tokens: int
    reported_tokens: int
    estimated_tokens: int
    percent_left: int
    level: WarningLevel
    thresholds: Thresholds
    compactions: int
    consecutive_failures: int
    microcompacts: int
    last_summary: SummaryAuthor | None = None
    """Who wrote the last compaction's summary (the model, the offline hand-over, the session
    notes), why a fallback did, and the model requests it took; None before any."""
    summary_requests: int = 0
    """Model requests already spent on a compaction that has not landed yet (its summary
    failed); at most `Policy.compact_max_summary_requests`."""


@dataclass(slots=True)
class CompactionTracking:
    """Persisted pipeline counters (circuit breaker and recompaction tracking); how many
    compactions and microcompactions ran is `MicrocompactStats`' to count."""

    consecutive_failures: int = 0
    turns: int = 0
    turns_at_last_compaction: int | None = None
    last_compaction_turn_id: str | None = None
    idle_expiries: int = 0
    """Times the 5-minute cache expired during a pause shorter than an hour."""
    summary_requests: int = 0
    """Model requests spent on the summary of the compaction not landed yet (failed runs)."""
    last_summary: SummaryAuthor | None = None
    """Who wrote the last compaction's summary."""

    def to_dict(self) -> dict[str, Any]:
        """The counters as saved."""
        return {
            "idle_expiries": self.idle_expiries,
            "consecutive_failures": self.consecutive_failures,
            "turns": self.turns,
            "turns_at_last_compaction": self.turns_at_last_compaction,
            "last_compaction_turn_id": self.last_compaction_turn_id,
            "summary_requests": self.summary_requests,
            "last_summary": self.last_summary.to_dict() if self.last_summary else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionTracking:
        """The counters a saved document holds (missing ones at their start)."""
        tracking = cls()
        for key in tracking.to_dict():
            if key in data and key != "last_summary":
                setattr(tracking, key, data[key])
        author = data.get("last_summary")
        tracking.last_summary = SummaryAuthor.from_dict(author) if author else None
        return tracking


@dataclass(slots=True)
class SessionState:
    """What a session saves after each step and finds again when it is opened."""

    micro: MicrocompactState
    tracking: CompactionTracking
    ttl_latch: CacheTtlLatch
    calibration: float | None = None
    """Reported tokens / length estimate of the same request, from the last usage seen: how
    far length/4 is off for this session's content (None until a usage arrives)."""
    extensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What extensions keep across a resume (e.g. the compaction tool offered, the budget
    marks announced), a JSON object per extension name; empty ones are not saved."""

    def to_dict(self) -> dict[str, Any]:
        """The main state document (the cleared ids are saved apart)."""
        document: dict[str, Any] = {
            "microcompact": self.micro.to_dict(with_cleared=False),
            "tracking": self.tracking.to_dict(),
            "ttl": self.ttl_latch.to_dict(),
            "calibration": self.calibration,
        }
        kept = {name: dict(values) for name, values in sorted(self.extensions.items()) if values}
        if kept:
            document["extensions"] = kept
        return document

    def calibrate(
        self, counter: ContextCounter, *, overhead_raw: int, system_tokens: int | None
    ) -> None:
        """Update `calibration` from the counter's anchor (its usage against our estimate of
        the same request as it was sent: the messages with the cleared results as their
        placeholders, and the system prompt and tools unless their size is known exactly)."""
        if not counter.anchored:
            return
        # The counter reads the transcript, where cleared results stay whole; the billed
        # request carried every clear made so far (they are made before it is sent).
        sent = counter.raw_estimate_at_anchor - self.micro.cleared_savings()
        if system_tokens is None:
            estimate = overhead_raw + sent
            reported = counter.anchor_tokens
        else:  # a known system size is not estimated, so only the messages are calibrated
            estimate = sent
            reported = counter.anchor_tokens - system_tokens
        if estimate > 0 and reported > 0:
            ratio = reported / estimate
            self.calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN, ratio))


def _stored_calibration(value: object) -> float | None:
    """The calibration a state document holds (saved as null before any usage arrived)."""
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float)):
        raise ConfigError(
            f"the stored session state ({STATE_NAME!r}) has a calibration of {value!r}, "
            "not a number or null; delete that state document to start it afresh"
        )
    return float(value) if value > 0 else None


def _stored_extensions(value: object) -> dict[str, dict[str, Any]]:
    """The extensions' saved values a state document holds (none before they were saved)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise ConfigError(
            f"the stored session state ({STATE_NAME!r}) has extensions {value!r:.80}, not an "
            "object of objects by extension name; delete that state document to start it afresh"
        )
    return {str(name): dict(values) for name, values in value.items()}


def _load_micro(state: Mapping[str, Any], cleared: Mapping[str, Any] | None) -> MicrocompactState:
    """The stored microcompaction state: the session document's, with the cleared ids of
    their own document (a document saved before they were apart holds them itself)."""
    if "microcompact" not in state:
        return MicrocompactState()
    data = state["microcompact"]
    if cleared is not None and isinstance(data, Mapping):
        if cleared.get("version") != 1:
            raise ConfigError(
                f"the stored state {CLEARED_STATE_NAME!r} has version "
                f"{cleared.get('version')!r}, not 1; delete that state document to start it afresh"
            )
        data = {**data, "cleared": cleared.get("cleared", [])}
    return MicrocompactState.from_dict(data)


class StateFile:
    """A session's state in its store: loaded once, saved only what changed."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._saved: dict[str, Any] | None = None
        """What was last written to the main document."""
        self._saved_cleared: tuple[dict[str, int], int] | None = None
        """The cleared-ids dict last written (and its size then): ids are only ever added to
        it until a compaction replaces it, so this tells whether it changed."""

    def load(
        self, *, policy: Policy, model: ModelInfo, ttl_eligible: bool | None
    ) -> SessionState:
        """The saved state (a new one when there is none), its TTL latched for this model."""
        state = self.store.load_state(STATE_NAME) or {}
        stored_ttl = CacheTtlLatch.from_dict(state["ttl"]) if "ttl" in state else None
        return SessionState(
            micro=_load_micro(state, self.store.load_state(CLEARED_STATE_NAME)),
            tracking=CompactionTracking.from_dict(state.get("tracking", {})),
            ttl_latch=latch_cache_ttl(
                stored_ttl, policy=policy, model=model, eligible=ttl_eligible
            ),
            calibration=_stored_calibration(state.get("calibration")),
            extensions=_stored_extensions(state.get("extensions")),
        )

    def save(self, state: SessionState) -> None:
        """Write what changed since the last save (most turns: nothing)."""
        cleared = state.micro.cleared
        saved = self._saved_cleared
        if saved is None or saved[0] is not cleared or saved[1] != len(cleared):
            # Written first: a crash before the main document keeps ids known as cleared.
            pairs = state.micro.cleared_pairs()
            self.store.save_state(CLEARED_STATE_NAME, {"version": 1, "cleared": pairs})
            self._saved_cleared = (cleared, len(cleared))
        document = state.to_dict()
        if document == self._saved:
            return  # most turns change nothing persisted: no write (a file per turn saved)
        self.store.save_state(STATE_NAME, document)
        self._saved = document


__all__ = [
    "CALIBRATION_MAX",
    "CALIBRATION_MIN",
    "CLEARED_STATE_NAME",
    "STATE_NAME",
    "CompactionTracking",
    "SessionState",
    "SessionStatus",
    "StateFile",
]
