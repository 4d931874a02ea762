"""What a `Session` is built from besides its config: `SessionOptions`, checked when made, and
`SessionDeps`, the collaborators resolved from them.

    SessionOptions (frozen; the keywords of `Session(config, **options)`, checked here)
      -> resolve_deps() -> SessionDeps (frozen: store, summarizer, extensions, event sink,
                                       clock, telemetry, hooks, redactor, model table)

The options are what a caller chooses; the dependencies are what the session talks to. Both
are frozen: what changes while a session runs is its `SessionState` (session_state.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from unbounded.catalog import ModelTable, load_model_table
from unbounded.compaction.auto import TierChoice, tier_slots
from unbounded.compaction.glue import RehydrateSource
from unbounded.errors import ConfigError
from unbounded.events import EventSink
from unbounded.extension import Extension, checked_extensions
from unbounded.model.response import Provider
from unbounded.policy import Policy
from unbounded.redaction import Redactor, redacting_sink, redactor_for
from unbounded.storage import MemoryStore, SessionStore
from unbounded.telemetry import Telemetry, default_telemetry


def utc_now() -> datetime:
    """The current time, in UTC (a session's default clock)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """Everything a session is built from besides its `SessionConfig`; wrong values raise
    `ConfigError` here, before any store is opened."""

    store: SessionStore | None = None
    """Where the transcript, state and notes live (default: in memory)."""
    policy: Policy | str | Path | None = None
    """The policy, or a policy file (e.g. one `unbounded tune` wrote); default: from the
    environment. Read when the options are made: `policy` then always holds a `Policy`."""
    summarizer: Provider | None = None
    """Who writes summaries and notes (default: the model given to `call`)."""
    model_table: ModelTable | None = None
    """The models' limits and prices (default: the packaged table)."""
    events: EventSink | None = None
    """Where the session's events go."""
    hooks: Any | None = None
    """PreCompact / PostCompact / SessionStart hooks (`unbounded.hooks`)."""
    allowed_roots: Sequence[str | Path] | None = None
    """Where files may be re-read from after a compaction (None: the working directories
    the records name)."""
    rehydrate_from: RehydrateSource = "disk"
    """Re-read files from the disk, or from the transcript's last read of them."""
    diff_dir: str | Path | None = None
    """Where the cache-break detector writes its diffs (None: none written)."""
    ttl_eligible: bool | None = None
    """Whether the 1-hour cache TTL may be used (None: the policy and model decide)."""
    clock: Callable[[], datetime] = utc_now
    """The time (tests give a fake one)."""
    extensions: Sequence[Extension] = ()
    """The session's extensions, whose hooks run in this order."""
    redact_secrets: bool | Redactor = False
    """Redact secrets from what the session writes and emits (True: the default redactor)."""
    telemetry: Telemetry | None = None
    """Spans and metrics (default: opentelemetry when installed, else nothing)."""
    compaction_tiers: TierChoice | None = None
    """What `auto_compact` runs: None, the defaults; a list; or a function of the defaults
    (checked on each use, its defaults follow `summarizer` and the extensions)."""

    def __post_init__(self) -> None:
        if self.rehydrate_from not in ("disk", "transcript"):
            raise ConfigError(
                f"rehydrate_from must be 'disk' or 'transcript', not {self.rehydrate_from!r}"
            )
        if self.compaction_tiers is not None and not callable(self.compaction_tiers):
            tiers = tier_slots(self.compaction_tiers, name="compaction_tiers")
            object.__setattr__(self, "compaction_tiers", tiers)
        object.__setattr__(self, "extensions", checked_extensions(self.extensions))
        if isinstance(self.policy, (str, Path)):
            object.__setattr__(self, "policy", Policy.from_file(self.policy))
        elif self.policy is not None and not isinstance(self.policy, Policy):
            raise ConfigError(
                f"policy must be a Policy or a policy file's path, not "
                f"{type(self.policy).__name__}"
            )
        if self.allowed_roots is not None:
            if isinstance(self.allowed_roots, (str, Path)):
                raise ConfigError(
                    "allowed_roots must be a list of folders, not one path: wrap it in a list"
                )
            roots = tuple(str(root) for root in self.allowed_roots)
            object.__setattr__(self, "allowed_roots", roots)
        if not callable(self.clock):
            raise ConfigError(f"clock must be a function returning a datetime, not {self.clock!r}")

    @classmethod
    def of(cls, options: SessionOptions | None, overrides: Mapping[str, Any]) -> SessionOptions:
        """`options` (default: none set) with the keywords in `overrides` set; a keyword that
        is no option raises `TypeError` (as a wrong keyword does) naming it and the options."""
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            names = ", ".join(f.name for f in dataclasses.fields(cls))
            raise TypeError(
                f"Session got unknown option(s) {', '.join(unknown)}; the options are: {names}"
            )
        base = options if options is not None else cls()
        return dataclasses.replace(base, **overrides) if overrides else base


@dataclass(frozen=True, slots=True)
class SessionDeps:
    """What a session talks to, resolved from its options (events and telemetry redacted on
    their way out when the session redacts)."""

    store: SessionStore
    policy: Policy
    """The base policy, before it is scaled for the window."""
    summarizer: Provider | None
    model_table: ModelTable
    events: EventSink | None
    hooks: Any | None
    clock: Callable[[], datetime]
    extensions: tuple[Extension, ...]
    redactor: Redactor | None
    telemetry: Telemetry
    allowed_roots: list[str] | None
    """Where files may be re-read from after a compaction (None: the working directories
    the records name)."""


def chosen_policy(options: SessionOptions) -> Policy:
    """The base policy a session of `options` runs: the one they give (a policy file was read
    when they were made), else the environment's (`Policy.from_env`)."""
    return options.policy if isinstance(options.policy, Policy) else Policy.from_env()


def resolve_deps(options: SessionOptions) -> SessionDeps:
    """The collaborators `options` ask for, each default made here (a new store per session)."""
    redactor = redactor_for(options.redact_secrets)
    telemetry = options.telemetry or default_telemetry()
    events = options.events
    if redactor is not None:
        # Events and spans leave the process too: their text is redacted on the way out.
        events = redacting_sink(events, redactor)
        telemetry = telemetry.redacting(redactor.redact)
    roots = options.allowed_roots
    return SessionDeps(
        store=options.store or MemoryStore(),
        policy=chosen_policy(options),
        summarizer=options.summarizer,
        model_table=options.model_table or load_model_table(),
        events=events,
        hooks=options.hooks,
        clock=options.clock,
        extensions=tuple(options.extensions),
        redactor=redactor,
        telemetry=telemetry,
        allowed_roots=[str(root) for root in roots] if roots is not None else None,
    )


__all__ = ["SessionDeps", "SessionOptions", "chosen_policy", "resolve_deps", "utc_now"]
