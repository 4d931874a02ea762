"""What a session's requests are made of (`SessionConfig`), and everything derived from it.

`derive_settings` is the one place that turns a config, a policy and the model table into
the values the pipeline reads: the model's limits (the window overridden by
`SessionConfig.context_window`), the policy scaled for that window, the thresholds, and the
tokens the system prompt and tools add to every request. `Session.__init__` and
`Session.reconfigure` both call it, so a change of model, window, system prompt or tools can
never leave a derived value stale.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from unbounded.catalog import (
    ASSUMED_MODELS,
    ModelInfo,
    ModelTable,
    assumed_model,
    provider_of_name,
)
from unbounded.compaction.decisions import ClearingPolicies
from unbounded.errors import ConfigError
from unbounded.model.request import SystemBlock
from unbounded.policy import MIN_COMPACTION_ROOM, Policy, Thresholds, compute_thresholds
from unbounded.recall.offer import with_recall_tool
from unbounded.tokens.estimate import pad_estimate, rough_token_count

MAIN_QUERY_SOURCE = "repl_main_thread"

logger = logging.getLogger(__name__)

_WARNED_UNKNOWN: set[str] = set()
"""Model names the "not in the model table" warning was logged for (once per name and
process: a session reconfigured every turn would log it every turn)."""


def _warn_unknown_once(name: str, message: str, *args: object) -> None:
    if name in _WARNED_UNKNOWN:
        return
    _WARNED_UNKNOWN.add(name)
    logger.warning(message, name, *args)


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What the main requests are made of. These are the cache-safe parameters."""

    model: str
    system: str | list[SystemBlock] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    thinking: dict[str, Any] | None = None
    max_tokens: int | None = None
    query_source: str = MAIN_QUERY_SOURCE
    cache_edits_supported: bool = False
    context_window: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    validate_requests: bool = False
    """Check every prepared request with validate_request (costs O(history) per turn)."""
    system_tokens: int | None = None
    """The tokens the system prompt and tools take, when you know them (counted once with
    the provider's token counter, or a prompt a proxy adds that `system` does not show): used
    as they are instead of a length estimate, so only the messages' estimate is calibrated."""

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("SessionConfig needs a model")
        if not isinstance(self.tools, (list, tuple)) or not all(
            isinstance(tool, Mapping) for tool in self.tools
        ):
            one = isinstance(self.tools, Mapping)
            given = (
                f"a list holding {sorted({type(t).__name__ for t in self.tools})}"
                if isinstance(self.tools, (list, tuple))
                else type(self.tools).__name__
            )
            raise ConfigError(
                f"SessionConfig.tools must be a list of tool definitions (dicts), not {given}"
                + (": wrap the one tool in a list, tools=[tool]" if one else "")
            )
        for name in ("context_window", "max_tokens", "system_tokens"):
            check_token_count(f"SessionConfig.{name}", getattr(self, name))
        if self.system_tokens is not None and self.system_tokens < 0:
            raise ConfigError("SessionConfig.system_tokens must be >= 0")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ConfigError("SessionConfig.max_tokens must be > 0")
        if not self.query_source:
            raise ConfigError("SessionConfig.query_source must not be empty")


def _whole_text(value: object) -> bool:
    """Whether `value` is a whole number written as text ("200000"), to suggest the number."""
    return isinstance(value, str) and value.strip().isdigit()


def check_token_count(label: str, value: object, unit: str = "tokens") -> None:
    """Refuse a count (`label`: the option, "SessionConfig.context_window") that is neither
    None nor a whole number, naming the number when it came as text."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        name = label.replace(" ", ".").rsplit(".", 1)[-1]
        raise ConfigError(
            f"{label} must be a whole number of {unit}, not {value!r}"
            + (f": pass {name}={int(str(value))}" if _whole_text(value) else "")
        )


def model_for_window(table: ModelTable, name: str, context_window: int | None) -> ModelInfo:
    """The model `name` planned with `context_window` when given. A model the table lacks is
    taken when the window is given, as the drop-ins take it: a `claude-` name with the current
    Claude model's figures and prices; any other with no prices (its costs count as 0, said
    in the log) and a max output of half the window, at most the current OpenAI model's.
    Without a window a model the table lacks is `ModelTable.get`'s ConfigError. The warning
    that a model is not in the table is logged once per model name and process."""
    info = table.find(name)
    if info is None and context_window is not None:
        family = provider_of_name(name)
        if family == "anthropic":
            _warn_unknown_once(
                name,
                "model %r is not in the model table: planned with a %s-token window "
                "(context_window=) and priced as %s",
                f"{context_window:,}",
                ASSUMED_MODELS["anthropic"],
            )
            info = assumed_model(table, name, "anthropic")
        else:
            _warn_unknown_once(
                name,
                "model %r is not in the model table: planned with a %s-token window "
                "(context_window=), its costs counted as 0 (add its row to a models file, "
                "UNBOUNDED_MODELS_FILE, to price it)",
                f"{context_window:,}",
            )
            base = assumed_model(table, name, "openai")
            info = replace(
                base,
                provider="other",
                max_output=min(base.max_output, max(1, context_window // 2)),
                input_per_mtok=0.0,
                output_per_mtok=0.0,
                source="not in the model table: context_window= given, no prices",
            )
    if info is None:
        try:
            info = table.get(name)  # the refusal, with close names and how to add a row
        except ConfigError as unknown:
            raise ConfigError(
                f"{unknown} Or give context_window= to plan it with that window."
            ) from None
    return info.with_window(context_window) if context_window else info


@dataclass(frozen=True, slots=True)
class DerivedSettings:
    """A config with every value derived from it (built only by `derive_settings`)."""

    config: SessionConfig
    model_info: ModelInfo
    """The model's limits, with the config's `context_window` when it gives one."""
    policy: Policy
    """The policy given, its token budgets scaled for the window."""
    thresholds: Thresholds
    overhead_raw: int
    """The length estimate of the system prompt and tools (with `recall`, offered or not:
    the estimate errs high), unpadded: the base calibration compares usage against."""
    clearing: ClearingPolicies
    """`policy` and its microcompaction variants (`compaction.decisions.microcompact_policy`)."""

    @property
    def overhead_tokens(self) -> int:
        """What the system prompt and tools add to every request: `system_tokens` when the
        config gives it, else the padded estimate."""
        exact = self.config.system_tokens
        return exact if exact is not None else pad_estimate(self.overhead_raw)


def derive_settings(
    config: SessionConfig,
    base_policy: Policy,
    model_table: ModelTable,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> DerivedSettings:
    """Everything `config` implies under `base_policy`; raises `ConfigError` when the system
    prompt and tools leave a compacting session no room under its threshold. `tools` are
    the tools the requests declare when extensions change the config's (default: those)."""
    model_info = model_for_window(model_table, config.model, config.context_window)
    policy = base_policy.for_window(model_info.context_window)
    thresholds = compute_thresholds(model_info, policy)
    offered_tools = with_recall_tool(config.tools if tools is None else tools, policy)
    overhead_raw = rough_token_count(orjson.dumps([config.system or "", offered_tools]).decode())
    settings = DerivedSettings(
        config=config,
        model_info=model_info,
        policy=policy,
        thresholds=thresholds,
        overhead_raw=overhead_raw,
        clearing=ClearingPolicies.of(policy),
    )
    # Only a session that compacts needs room under the threshold; one that never does
    # (auto-compaction off) runs until the window is full.
    overhead = settings.overhead_tokens
    room = thresholds.autocompact - overhead
    if room < policy.compaction_room_needed() and policy.auto_compact_enabled:
        raise ConfigError(
            f"the system prompt and tools alone take about "
            f"{overhead:,} tokens of the {thresholds.autocompact:,} a "
            f"{model_info.context_window:,}-token window holds before compacting, "
            f"leaving {max(room, 0):,} for the conversation: no compaction can make room "
            f"for a summary and one more turn ({MIN_COMPACTION_ROOM:,}), so every call "
            "would compact; use a larger context_window or a shorter system prompt"
        )
    return settings


__all__ = [
    "MAIN_QUERY_SOURCE",
    "DerivedSettings",
    "SessionConfig",
    "check_token_count",
    "derive_settings",
    "model_for_window",
]
