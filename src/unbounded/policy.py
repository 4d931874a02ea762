"""Every threshold and switch in one policy object, with the seeds' values as defaults.

Threshold arithmetic (seeds 000 and 004; where they disagree, 000's `min` is used, because
reserving more than the model can ever output would waste window):

    effective window    = context window - min(max output, 20,000)
    auto-compact at     = effective window - 13,000
                          (or floor(effective * pct / 100) with a percentage override,
                          never above the default)
    warning / error at  = 20,000 below the auto-compact threshold (below the effective window
                          when auto-compaction is off)  (seed 002 `calculateThresholds`)
    blocking limit      = context window - 3,000

Small windows: the buffers above are sized for 200K-token models. Below
`small_window_reference` (100,000 tokens) every token budget of the policy left at its
default (the buffers, the output reservation cap, microcompaction, session-memory and
rehydration budgets, the summary's output cap and the single-output cap) is multiplied by
window / 100,000, so a 32K local model compacts near 67 % of its window rather than every
turn; a budget you set yourself is used as it is. A window under
`MIN_CONTEXT_WINDOW` (8,192 tokens) cannot hold a summary and one more turn: `ConfigError`.

Environment overrides (prefix UNBOUNDED_), read by `Policy.from_env()`:

    UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE   1-100: compact at this % of the effective window
    UNBOUNDED_DISABLE_COMPACT            disable all compaction, manual included
    UNBOUNDED_DISABLE_AUTO_COMPACT       disable automatic compaction only
    UNBOUNDED_DISABLE_MICROCOMPACT       disable microcompaction
    UNBOUNDED_DISABLE_SESSION_MEMORY     disable session-memory notes and their compaction
    UNBOUNDED_MAX_OUTPUT_TOKENS          override the model's max output
    UNBOUNDED_BLOCKING_LIMIT_OVERRIDE    override the hard blocking limit (tokens)
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from unbounded.catalog import MIN_CONTEXT_WINDOW as MIN_CONTEXT_WINDOW
from unbounded.catalog import ModelInfo, window_too_small
from unbounded.errors import ConfigError

ENV_PREFIX = "UNBOUNDED_"
MIN_COMPACTION_ROOM = 2_048
"""The fewest tokens the system prompt and tools must leave below the auto-compact threshold:
a summary and one more turn. With less, every call would compact and still be over it."""
SCALED_BUDGETS: tuple[str, ...] = (
    "output_reserve_cap",
    "autocompact_buffer",
    "warning_buffer",
    "error_buffer",
    "blocking_buffer",
    "microcompact_protect_recent_tokens",
    "microcompact_min_savings",
    "compact_max_output_tokens",
    "summary_floor_min_tokens",
    "tool_result_max_tokens",
    "rehydrate_tokens_per_file",
    "rehydrate_total_file_tokens",
    "rehydrate_tokens_per_skill",
    "rehydrate_total_skill_tokens",
    "session_memory_init_tokens",
    "session_memory_min_tokens_between_updates",
    "session_memory_section_tokens",
    "session_memory_total_tokens",
    "session_memory_keep_min_tokens",
    "session_memory_keep_max_tokens",
    "recall_max_tokens",
    "compaction_summary_tokens",
    "idle_compact_min_tokens",
)
"""Policy fields (token budgets) that scale with windows below `small_window_reference`."""
_MIN_SCALED = {
    "compact_max_output_tokens": 1_024,
    "tool_result_max_tokens": 500,
    "recall_max_tokens": 500,
}
MIN_RECALL_TOKENS = 100
"""The smallest `Policy.recall_max_tokens`: an answer's header and a few lines."""
COMPACTION_TIERS: tuple[str, ...] = ("native", "summary", "offline")
"""The tiers `Policy.compaction_tier_order` may name (docs/compaction.md, "Tiers")."""
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


_SCALARS: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "float": (int, float)}


def _check_type(name: str, annotation: str, value: object) -> None:
    """A field's value has its declared type (a whole number for a token count, a bool for
    a switch): checked first, so a wrong type is a ConfigError, not a comparison's TypeError."""
    kind, _, optional = annotation.partition(" | ")
    if optional and value is None:
        return
    if kind.startswith("tuple["):
        item = kind.removeprefix("tuple[").split(",")[0]
        if isinstance(value, tuple) and all(_is(item, part) for part in value):
            return
        wanted = f"a list of {'text' if item == 'str' else 'numbers'}"
    elif _is(kind, value):
        return
    else:
        wanted = {"bool": "true or false", "int": "a whole number", "float": "a number"}[kind]
    raise ConfigError(
        f"Policy.{name} must be {wanted}{' or None' if optional else ''}, not {value!r}"
    )


def _is(kind: str, value: object) -> bool:
    """Whether `value` is of the scalar type named `kind` (bool is no number here)."""
    if kind == "str":
        return isinstance(value, str)
    if isinstance(value, bool) and kind != "bool":
        return False
    return isinstance(value, _SCALARS[kind]) and not (
        isinstance(value, float) and math.isnan(value)
    )


def _check_compaction_choices(policy: Policy) -> None:
    """The tier order, the compaction tool's share and the reminder marks."""
    order = policy.compaction_tier_order
    known = COMPACTION_TIERS
    if not order or any(name not in known for name in order) or len(set(order)) != len(order):
        raise ConfigError(
            f"Policy.compaction_tier_order must name each of {list(known)} at most once, "
            f"at least one, not {list(order)}"
        )
    if not 0 < policy.compaction_tool_share <= 1:
        raise ConfigError(
            f"Policy.compaction_tool_share must be in (0, 1], not {policy.compaction_tool_share}"
        )
    marks = policy.budget_reminder_marks
    if any(not 0 < mark <= 1 for mark in marks) or list(marks) != sorted(set(marks)):
        raise ConfigError(
            "Policy.budget_reminder_marks must be rising shares in (0, 1], each once, "
            f"not {list(marks)}"
        )


@dataclass(frozen=True, slots=True)
class Policy:
    """All tunable numbers of the pipeline. Values are checked at construction."""

    output_reserve_cap: int = 20_000
    """At most this much of the window is reserved for the model's output."""
    autocompact_buffer: int = 13_000
    """Auto-compaction fires this far below the effective window (room for one more turn)."""
    warning_buffer: int = 20_000
    """The warning level sits this far below the auto-compact threshold."""
    error_buffer: int = 20_000
    """The error level sits this far below the auto-compact threshold."""
    blocking_buffer: int = 3_000
    """Requests are refused this close to the full window."""
    autocompact_pct_override: float | None = None
    """Compact at this percentage of the effective window (capped at the default threshold)."""
    max_output_override: int | None = None
    """Use this instead of the model's max output tokens."""
    blocking_limit_override: int | None = None
    """Use this blocking limit instead of window - blocking_buffer."""
    compact_enabled: bool = True
    """False disables all compaction, manual included."""
    auto_compact_enabled: bool = True
    """False disables automatic compaction; manual compaction still works."""
    microcompact_enabled: bool = True
    """False disables microcompaction."""
    small_window_reference: int = 100_000
    """Windows below this scale every token budget by window / this (0: never scale)."""
    tool_result_max_tokens: int = 25_000
    """A single tool result or user text over this is sent as its head and tail, with the
    full text kept on the side (`unbounded.compaction.large_output`)."""

    # -- microcompaction (seeds 002, 003, 004) ---------------------------------------------
    microcompact_keep_recent: int = 3
    """Count-based tier: the most recent compactable tool results always kept intact."""
    microcompact_protect_recent_tokens: int = 40_000
    """Count-based tier: the most recent tool-result tokens protected from clearing."""
    microcompact_min_savings: int = 20_000
    """Count-based tier: clear only when at least this many tokens are saved (clearing in
    batches bounds how often the prompt cache is broken)."""
    clear_superseded_reads: bool = True
    """Count-based tier: also clear reads of a file that a later read or write of the same
    file made stale, whatever their age (still in batches of `microcompact_min_savings`,
    or at once when the prompt cache has expired anyway)."""
    time_based_gap_minutes: float = 60.0
    """Time-based tier: fires when the last assistant message is older than this (the cache
    has expired anyway, so changing messages costs nothing extra)."""
    time_based_keep_recent: int = 5
    """Time-based tier: compactable results kept intact."""
    cached_microcompact_trigger: int = 12
    """Cached tier: queue cache_edits deletions once this many tool results are active."""
    cached_microcompact_keep_recent: int = 5
    """Cached tier: the most recent tool results never deleted."""

    # -- cost-aware compaction (docs/policy.md "When compacting early pays") ------------------
    cold_cache_compact_fraction: float = 0.2
    """When the prompt cache has expired (the gap since the last response is over its TTL)
    and the conversation fills at least this share of its room below the auto-compact
    threshold (the system prompt and tools left out), compact now if a
    compaction costs no summary call: the whole prefix is written again anyway, and a small
    one costs less (0 turns it off)."""
    early_compact_fraction: float = 0.45
    """With a compaction that costs no summary call available, compact once the conversation
    fills this share of its room below the threshold (1.0: only at the threshold)."""
    cache_ttl_upgrade_after_idle: int = 0
    """After this many pauses that expired the 5-minute cache but were under an hour, switch
    to the 1-hour TTL at that cold moment (0: never; models without a 1-hour price never)."""
    early_compact_min_saving: float = 0.3
    """An early compaction must free at least this share of the context, else it is not
    worth a cache write and is not made."""
    compact_instead_of_clearing: bool = True
    """At the warning level, where count-based clearing would break the warm cache, compact
    instead when that costs no summary call."""
    cold_cache_compact_min_saving: float = 0.05
    """A compaction at a cold-cache moment must free at least this share of the context: the
    whole context is written again anyway, so a smaller saving already pays."""
    early_compact_retry_tokens: int = 5_000
    """After an early compaction was refused, wait for this many more tokens before trying
    again."""

    # -- compaction off the critical path (docs/compaction.md "Background summary", "Idle
    # compaction") ---------------------------------------------------------------------------
    background_summary: bool = False
    """Write the summary in the background once the conversation passes
    `background_summary_fraction` of its room, and swap it in at the threshold, so a turn
    waits on a summary call only when its request would leave no room for the reply. Off by
    default: it sends the summary call earlier (and again when the summary went stale), and
    what was recorded after the mark stays verbatim after the summary."""
    background_summary_fraction: float = 0.9
    """The mark, as a share of the room below the auto-compact threshold (the system prompt
    and tools left out). 0.9 leaves a tenth of the room, ~16,000 tokens of a 200K window:
    several turns of an agent run, as long as a summary call takes (30 s to a few minutes),
    and no more than that is kept verbatim after the summary when it is swapped in."""
    compaction_summary_tokens: int = 4_000
    """What a summary is expected to hold (its output tokens), for the cost comparisons of
    idle compaction and the cold-resume guard."""
    compaction_payback_turns: int = 3
    """The turns after a resume that the cost comparisons count: each reads the whole context
    from the cache, so a compacted one is cheaper every turn. A resumed session is taken to
    go on for at least this many turns (0: the resume alone). 3 is cautious: with it a
    summary call on an expired cache pays only near the threshold (from ~140,000 tokens of a
    200K window on a 5-minute cache), where the session would compact within a few turns
    anyway."""
    idle_compact_at_ttl_share: float = 0.9
    """When a host should run idle compaction: this share of the cache TTL after the last
    reply (54 minutes of the 1-hour cache, as Claude Code does), while the cache is warm."""
    idle_compact_min_tokens: int = 50_000
    """Idle compaction never runs on a smaller context, whatever the comparison says: the
    saving is small and the pause may have no resume at all."""

    # -- full compaction (seeds 000, 002, 004) -----------------------------------------------
    compact_max_output_tokens: int = 20_000
    """Output cap of the fallback (non cache-sharing) summary call."""
    summary_floor_min_tokens: int = 300
    """The summary guard's smallest floor (`compaction/summary_guard.py`): a summary of a
    long stretch holding fewer tokens is refused as collapsed. Sized for a 200K window, it
    scales with a small one, where a summary of a few hundred tokens is all there is room
    for."""
    ptl_max_retries: int = 3
    """Attempts of the summary call when it is itself over the window (prompt too long)."""
    compact_max_summary_requests: int = 4
    """Model requests one compaction may send for its summary, from its first try to the
    one that lands it: the cache-sharing request and its retries (a cut-off reply, each
    prompt-too-long round, each transport retry), the direct request it hands over to, and
    the tries of later turns after a failure. Once they are spent, the offline hand-over
    writes that summary. 4 covers a request and its direct fallback, each retried once, and
    stops a failing model from being sent the whole conversation turn after turn."""
    compaction_tier_order: tuple[str, ...] = ("native", "summary", "offline")
    """The automatic compaction's tiers, in the order tried (after the session notes): the
    provider's own compaction where provider and model declare it, our summary by the model,
    the offline hand-over (docs/compaction.md, "Tiers")."""

    # -- what the model sees and may ask for (docs/compaction.md) ---------------------------
    compaction_tool_enabled: bool = True
    """Offer a `compact_context` tool (with the `CompactionTool` extension) once the context
    passes `compaction_tool_share` of the auto-compact threshold."""
    compaction_tool_share: float = 0.8
    """The share of the auto-compact threshold from which the compaction tool is offered."""
    budget_reminders_enabled: bool = True
    """Append a short context-budget note (with the `BudgetReminders` extension) each time
    the context passes one of `budget_reminder_marks`."""
    budget_reminder_marks: tuple[float, ...] = (0.5, 0.75, 0.9)
    """Shares of the auto-compact threshold at which the model is told how full it is."""
    ptl_fallback_drop_fraction: float = 0.2
    """Share of the oldest API-round groups dropped when the error gives no token gap."""
    compact_heartbeat_seconds: float = 30.0
    """Interval of the heartbeat event while a summary call runs."""
    facts_ledger: bool = True
    """Append a ledger of facts taken from the transcript (files, commands, errors, todos,
    user messages) to every summary, so they never depend on what a model chose to keep."""

    # -- rehydration after compaction (seed 004 "Re-Injected Attachments") -----------------
    rehydrate_max_files: int = 5
    """Most recently read files re-read after a compaction."""
    rehydrate_min_uses: int = 1
    """A file is re-read only if the agent read or wrote it at least this often, or modified
    it, or it is the most recently read (1: every recent file, as Claude Code does)."""
    rehydrate_tokens_per_file: int = 5_000
    """Cap per re-read file."""
    rehydrate_total_file_tokens: int = 10_000
    """Cap on all re-read files together."""
    rehydrate_max_room_share: float = 0.5
    """Re-read files, then skills, the plan and the todo list are left out after a compaction
    (the largest first) while the context would fill more than this share of its room below
    the auto-compact threshold (the system prompt and tools left out). In a small window they
    would otherwise bring on the next compaction at once; in a large one they fit (1.0: only
    what would not fit under the threshold)."""
    rehydrate_tokens_per_skill: int = 5_000
    """Cap per invoked skill re-injected."""
    rehydrate_total_skill_tokens: int = 25_000
    """Cap on all skills together."""
    hook_timeout_seconds: float = 60.0
    """Default timeout of a shell hook command."""

    # -- prompt cache (seed 001) -------------------------------------------------------------
    cache_break_min_drop_fraction: float = 0.05
    """A cache-read drop counts as a break only above this fraction of the previous reads…"""
    cache_break_min_drop_tokens: int = 2_000
    """…and above this many tokens."""
    cache_ttl_1h: bool = False
    """Ask for the 1-hour cache TTL for eligible query sources (latched for the session)."""
    cache_ttl_1h_query_sources: tuple[str, ...] = ("repl_main_thread*", "sdk", "agent:*")
    """Query-source patterns (fnmatch) allowed the 1-hour TTL; others use 5 minutes."""
    prefix_ttl_1h: bool = True
    """Cache the tools and the system prompt (the prefix every request and every compaction
    keeps) with the 1-hour TTL while the messages keep theirs, once the session has paused
    `prefix_ttl_1h_after_pauses` times. A pause of 5 to 60 minutes, or a compaction on a cold
    cache, then writes the messages again but reads the prefix; the prefix costs 2x the input
    price to write instead of 1.25x, once per session while calls keep coming (docs/caching.md
    "Two lifetimes in one request"). Models without a 1-hour price keep one TTL."""
    prefix_ttl_1h_after_pauses: int = 2
    """The pauses (each expired the 5-minute cache, and was under an hour) a session must have
    shown before the prefix takes the 1-hour TTL, switched when the prefix is written anyway.
    The expectation: a session that paused this often pauses again, and one more pause wins
    back the premium (0.75x of the prefix once, against 1.25x at each pause); a session that
    never pauses never pays it. 0: from the first request."""

    # -- session memory (seed 004 "Tier 3: Session Memory Compact"; docs/session.md) ---------
    session_memory_enabled: bool = True
    """False: notes are never updated and session-memory compaction always falls through."""
    session_memory_init_tokens: int = 10_000
    """The first notes update waits until the context holds this many tokens (a short
    conversation has nothing worth noting, and never reaches the auto-compact threshold)."""
    session_memory_min_tokens_between_updates: int = 5_000
    """An update needs at least this many tokens added since the messages the notes cover…"""
    session_memory_tool_calls_between_updates: int = 3
    """…and at least this many tool calls since then, or a last turn that made none."""
    session_memory_section_tokens: int = 2_000
    """A notes section over this size gets a condense reminder in the update prompt."""
    session_memory_total_tokens: int = 12_000
    """Notes over this size get a critical shorten reminder in the update prompt."""
    session_memory_compact_section_chars: int = 8_000
    """Each section is cut to this many characters (~2,000 tokens) when the notes become a
    compaction summary; headers and descriptions are kept and a marker points to the file."""
    session_memory_keep_min_tokens: int = 2_400
    """Session-memory compaction keeps at least this many tokens of recent messages…"""
    session_memory_keep_min_text_messages: int = 3
    """…and at least this many recent messages with text…"""
    session_memory_keep_max_tokens: int = 6_000
    """…and stops expanding backwards once it keeps this many."""
    session_memory_wait_seconds: float = 15.0
    """Compaction waits this long for a notes update in flight, then uses the notes as they are."""
    session_memory_update_timeout_seconds: float = 60.0
    """A notes update (the forked model call) is abandoned after this long."""

    # -- recall (docs/recall.md) -------------------------------------------------------------
    recall_enabled: bool = True
    """Offer the `recall` tool in conversations that use tools (it brings back cleared results
    and summarized text from the session's own transcript); cleared placeholders and
    summaries then name the handles it takes. False: never offered."""
    recall_max_tokens: int = 5_000
    """The most one recall answer may hold (a longer output is read on with `start_line`)."""
    recall_from_start: bool = False
    """Offer `recall` from the first request. By default it is offered from the first request
    that takes something out of the context (a clear or a compaction): before that it has
    nothing to bring back, and a session that never needs it would pay for its schema on
    every call; adding it then writes the tools and system prompt to the cache once more."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, list) and str(spec.type).startswith("tuple["):
                # A list as JSON or a caller's code gives it: kept as the tuple the field is,
                # so the policy stays hashable and equal to one built from a tuple.
                value = tuple(value)
                object.__setattr__(self, spec.name, value)
            _check_type(spec.name, str(spec.type), value)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise ConfigError(f"Policy.{spec.name} must be >= 0, not {value}")
        pct = self.autocompact_pct_override
        if pct is not None and not (0 < pct <= 100):
            raise ConfigError(f"Policy.autocompact_pct_override must be in (0, 100], not {pct}")
        if self.max_output_override is not None and self.max_output_override <= 0:
            raise ConfigError("Policy.max_output_override must be > 0")
        if self.blocking_limit_override is not None and self.blocking_limit_override <= 0:
            raise ConfigError("Policy.blocking_limit_override must be > 0")
        for name in (
            "cold_cache_compact_fraction",
            "early_compact_fraction",
            "early_compact_min_saving",
            "cold_cache_compact_min_saving",
            "rehydrate_max_room_share",
            "background_summary_fraction",
            "idle_compact_at_ttl_share",
        ):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"Policy.{name} must be in [0, 1], not {getattr(self, name)}")
        if not (0 < self.ptl_fallback_drop_fraction < 1):
            raise ConfigError("Policy.ptl_fallback_drop_fraction must be in (0, 1)")
        if self.ptl_max_retries < 1:
            raise ConfigError("Policy.ptl_max_retries must be >= 1")
        if self.compact_max_summary_requests < 1:
            raise ConfigError("Policy.compact_max_summary_requests must be >= 1")
        _check_compaction_choices(self)
        if self.hook_timeout_seconds <= 0 or self.compact_heartbeat_seconds <= 0:
            raise ConfigError("Policy timeouts and intervals must be > 0")
        if not (0 <= self.cache_break_min_drop_fraction < 1):
            raise ConfigError("Policy.cache_break_min_drop_fraction must be in [0, 1)")
        if self.time_based_gap_minutes <= 0:
            raise ConfigError("Policy.time_based_gap_minutes must be > 0")
        if self.cached_microcompact_keep_recent >= self.cached_microcompact_trigger:
            raise ConfigError(
                "Policy.cached_microcompact_keep_recent must be below cached_microcompact_trigger"
            )
        if self.session_memory_keep_min_tokens > self.session_memory_keep_max_tokens:
            raise ConfigError(
                "Policy.session_memory_keep_min_tokens must not exceed "
                "session_memory_keep_max_tokens"
            )
        if self.session_memory_section_tokens > self.session_memory_total_tokens:
            raise ConfigError(
                "Policy.session_memory_section_tokens must not exceed session_memory_total_tokens"
            )
        if self.recall_max_tokens < MIN_RECALL_TOKENS:
            raise ConfigError(
                f"Policy.recall_max_tokens must be >= {MIN_RECALL_TOKENS} (room for an "
                f"answer's header and a few lines), not {self.recall_max_tokens}"
            )
        if self.session_memory_wait_seconds < 0 or self.session_memory_update_timeout_seconds <= 0:
            raise ConfigError(
                "Policy.session_memory_wait_seconds must be >= 0 and "
                "session_memory_update_timeout_seconds > 0"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Policy:
        """The default policy with UNBOUNDED_* environment overrides, then keyword overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        pct = _env_float(env, "AUTOCOMPACT_PCT_OVERRIDE")
        if pct is not None:
            if not (0 < pct <= 100):
                raise ConfigError(
                    f"{ENV_PREFIX}AUTOCOMPACT_PCT_OVERRIDE must be a number in (0, 100], not {pct}"
                )
            values["autocompact_pct_override"] = pct
        for name, attribute in (
            ("DISABLE_COMPACT", "compact_enabled"),
            ("DISABLE_AUTO_COMPACT", "auto_compact_enabled"),
            ("DISABLE_MICROCOMPACT", "microcompact_enabled"),
            ("DISABLE_SESSION_MEMORY", "session_memory_enabled"),
        ):
            if _env_bool(env, name):
                values[attribute] = False
        for name, attribute in (
            ("MAX_OUTPUT_TOKENS", "max_output_override"),
            ("BLOCKING_LIMIT_OVERRIDE", "blocking_limit_override"),
        ):
            number = _env_int(env, name)
            if number is not None:
                values[attribute] = number
        values.update(overrides)
        try:
            return cls(**values)  # type: ignore[arg-type]
        except TypeError as exc:
            raise ConfigError(f"unknown Policy field: {exc}") from None

    @classmethod
    def claude_code(cls, **overrides: object) -> Policy:
        """The numbers Claude Code uses, without unbounded's cost-aware changes: compact only
        at the threshold, keep 10,000 to 40,000 tokens after a session-memory compaction, one
        cache TTL for every marker."""
        values: dict[str, object] = {
            "early_compact_fraction": 1.0,
            "cold_cache_compact_fraction": 0.0,
            "compact_instead_of_clearing": False,
            "clear_superseded_reads": False,
            "session_memory_keep_min_tokens": 10_000,
            "session_memory_keep_max_tokens": 40_000,
            "session_memory_keep_min_text_messages": 5,
            "rehydrate_total_file_tokens": 50_000,
            "cold_cache_compact_min_saving": 0.1,
            "prefix_ttl_1h": False,
            **overrides,
        }
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def from_file(cls, path: str | Path, *, base: Policy | None = None) -> Policy:
        """A policy from a TOML file of `field = value` lines (a `[policy]` table or top
        level), over `base` (default: `Policy.from_env()`). Unknown fields and wrong types
        are errors naming the file."""
        source = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
            data: dict[str, Any] = tomllib.loads(text)
        except FileNotFoundError:
            raise ConfigError(f"{source}: no such policy file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML ({exc})") from None
        values = data.get("policy", data)
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [policy] must be a table of field = value")
        known = {spec.name: spec for spec in fields(cls)}
        changes: dict[str, object] = {}
        for name, value in values.items():
            spec = known.get(name)
            if spec is None:
                raise ConfigError(f"{source}: unknown policy field {name!r}")
            default = getattr(cls(), name)
            if isinstance(default, bool) != isinstance(value, bool) or (
                isinstance(default, (int, float))
                and not isinstance(value, (int, float))
                and default is not None
            ):
                raise ConfigError(
                    f"{source}{_line_of(text, name)}: policy field {name!r} has the wrong type: "
                    f"{value!r} where the default is {default!r} (change it in the file)"
                )
            if isinstance(default, tuple) and isinstance(value, list):
                value = tuple(value)
            if isinstance(default, float) and isinstance(value, int):
                value = float(value)
            changes[name] = value
        try:
            return (base or cls.from_env()).with_changes(**changes)
        except ConfigError as exc:
            # The refusal names its field first: point at that field's line when the file set it.
            named = next((n for n in changes if str(exc).startswith(f"Policy.{n} ")), None)
            where = f"{source}{_line_of(text, named)}" if named else str(source)
            raise ConfigError(f"{where}: {exc} (change it in the file)") from None

    def to_toml(self, *, only_changed: bool = True) -> str:
        """The policy as a TOML `[policy]` table (by default only fields off their default)."""
        lines = ["[policy]"]
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None or (only_changed and value == spec.default):
                continue
            lines.append(f"{spec.name} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"

    def with_changes(self, **changes: object) -> Policy:
        """A copy with some fields changed (checked again)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def compaction_room_needed(self) -> int:
        """Tokens the system prompt and tools must leave below the auto-compact threshold:
        `MIN_COMPACTION_ROOM`, or one when the caller chose the threshold (a percent
        override), which then only has to be above them."""
        return 1 if self.autocompact_pct_override is not None else MIN_COMPACTION_ROOM

    def for_window(self, context_window: int) -> Policy:
        """This policy with its token budgets scaled for a small window (see the module doc).

        The result no longer scales (`small_window_reference` 0), so calling it twice is safe.
        """
        if context_window < MIN_CONTEXT_WINDOW:
            raise ConfigError(window_too_small(context_window))
        reference = self.small_window_reference
        if reference <= 0 or context_window >= reference:
            return self
        scale = context_window / reference
        changes: dict[str, object] = {"small_window_reference": 0}
        for name in SCALED_BUDGETS:
            value = getattr(self, name)
            if value == _DEFAULTS[name]:  # what the user set is taken as it is
                changes[name] = max(_MIN_SCALED.get(name, 1), round(value * scale))
        return replace(self, **changes)  # type: ignore[arg-type]


_DEFAULTS: dict[str, object] = {spec.name: spec.default for spec in fields(Policy)}


def _line_of(text: str, name: str) -> str:
    """`:LINE` of the first `name = ...` line in a policy file's text, or "" (not found)."""
    for number, line in enumerate(text.splitlines(), start=1):
        key, equals, _ = line.partition("=")
        if equals and key.strip().strip('"\'') == name:
            return f":{number}"
    return ""


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _env_raw(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(ENV_PREFIX + name)
    return value.strip() if value is not None else None


def _env_bool(env: Mapping[str, str], name: str) -> bool:
    raw = _env_raw(env, name)
    if raw is None:
        return False
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{ENV_PREFIX}{name} must be 1/0, true/false, yes/no or on/off, not {raw!r}")


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = _env_raw(env, name)
    if not raw:
        return None
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ConfigError(
            f"{ENV_PREFIX}{name} must be a whole number of tokens, not {raw!r}"
        ) from None
    if value <= 0:
        raise ConfigError(f"{ENV_PREFIX}{name} must be > 0, not {value}")
    return value


def _env_float(env: Mapping[str, str], name: str) -> float | None:
    raw = _env_raw(env, name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name} must be a number, not {raw!r}") from None
    if math.isnan(value):
        raise ConfigError(f"{ENV_PREFIX}{name} must be a number, not NaN")
    return value


WarningLevel = Literal["ok", "warning", "error", "autocompact", "blocking"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The token levels for one model under one policy."""

    context_window: int
    max_output: int
    effective_window: int
    autocompact: int
    warning: int
    error: int
    blocking: int
    auto_compact_enabled: bool

    @property
    def limit(self) -> int:
        """What `percent_left` is measured against: the auto-compact threshold when on."""
        return self.autocompact if self.auto_compact_enabled else self.effective_window

    def percent_left(self, tokens: int) -> int:
        """Percent of the limit still free, rounded, never below 0."""
        limit = self.limit
        if limit <= 0:
            return 0
        return max(0, round((limit - tokens) / limit * 100))

    def level(self, tokens: int) -> WarningLevel:
        """The most severe level these tokens reach."""
        if tokens >= self.blocking:
            return "blocking"
        if self.auto_compact_enabled and tokens >= self.autocompact:
            return "autocompact"
        if tokens >= self.error:
            return "error"
        if tokens >= self.warning:
            return "warning"
        return "ok"

    def should_autocompact(self, tokens: int) -> bool:
        """Auto-compaction is on and the tokens reached its threshold."""
        return self.auto_compact_enabled and tokens >= self.autocompact


def effective_window(model: ModelInfo, policy: Policy) -> int:
    """Context window minus the output reservation (at most `output_reserve_cap`)."""
    max_output = policy.max_output_override or model.max_output
    return model.context_window - min(max_output, policy.output_reserve_cap)


def autocompact_threshold(model: ModelInfo, policy: Policy) -> int:
    """Where auto-compaction fires (with the percentage override, capped at the default)."""
    effective = effective_window(model, policy)
    default = effective - policy.autocompact_buffer
    if policy.autocompact_pct_override is not None:
        return min(math.floor(effective * policy.autocompact_pct_override / 100), default)
    return default


def compute_thresholds(model: ModelInfo, policy: Policy | None = None) -> Thresholds:
    """All threshold levels for a model (budgets scaled for a small window, see the module
    doc); a window too small to work in is a ConfigError."""
    active = (policy or Policy()).for_window(model.context_window)
    effective = effective_window(model, active)
    autocompact = autocompact_threshold(model, active)
    auto_on = active.compact_enabled and active.auto_compact_enabled
    base = autocompact if auto_on else effective
    blocking = active.blocking_limit_override or (model.context_window - active.blocking_buffer)
    if autocompact <= 0:
        raise ConfigError(
            f"the policy leaves no room in a {model.context_window:,}-token window "
            f"(auto-compact at {autocompact:,} tokens): lower its buffers or use a larger window"
        )
    return Thresholds(
        context_window=model.context_window,
        max_output=active.max_output_override or model.max_output,
        effective_window=effective,
        autocompact=autocompact,
        warning=max(0, base - active.warning_buffer),
        error=max(0, base - active.error_buffer),
        blocking=blocking,
        auto_compact_enabled=auto_on,
    )


GUARDED_QUERY_SOURCES = frozenset({"compact", "session_memory"})
"""Query sources that never trigger auto-compaction (it would recurse or deadlock)."""
