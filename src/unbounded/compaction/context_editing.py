"""Provider-native context management: Anthropic's `context_management` edits, typed.

Seed 004 ("API-Native Context Management"): besides clearing results locally, a request can
ask the API to manage context itself, with edit strategies that compose. This module builds
the `context_management` request field, the `anthropic-beta` values it needs, and reads back
which edits the API applied.

Shapes, as confirmed (sources below):

- `clear_tool_uses_20250919` — `trigger` `{"type": "input_tokens" | "tool_uses", "value": N}`
  (API default 100,000 input tokens), `keep` `{"type": "tool_uses", "value": N}` (default 3),
  `clear_at_least` `{"type": "input_tokens", "value": N}` (the edit is skipped unless at
  least that much can be cleared), `exclude_tools` (names never cleared) and
  `clear_tool_inputs` (true/false, or a list of tool names whose inputs are cleared too).
- `clear_thinking_20251015` — `keep` is `{"type": "thinking_turns", "value": N}` with N > 0,
  or `"all"`. The API rejects it unless `thinking` is enabled or adaptive, and it must come
  first in `edits` when several strategies are combined.
- `compact_20260112` — `trigger` `{"type": "input_tokens", "value": N}` (default 150,000;
  at least 50,000), `instructions` (replaces the default summary prompt), and
  `pause_after_compaction` (the response stops with `stop_reason` "compaction").
- Beta headers: `context-management-2025-06-27` for the two clearing strategies,
  `compact-2026-01-12` for compaction.
- Responses carry `context_management.applied_edits`: `{"type": "clear_tool_uses_20250919",
  "cleared_tool_uses": N, "cleared_input_tokens": N}` and `{"type": "clear_thinking_20251015",
  "cleared_thinking_turns": N, "cleared_input_tokens": N}`; when streaming they arrive on the
  final `message_delta` event.

Sources: anthropics/anthropic-sdk-python, src/anthropic/types/beta/
beta_clear_tool_uses_20250919_edit_param.py, beta_clear_thinking_20251015_edit_param.py,
beta_compact_20260112_edit_param.py, beta_input_tokens_trigger_param.py,
beta_tool_uses_keep_param.py, beta_thinking_turns_param.py, beta_context_management_response.py,
beta_clear_*_edit_response.py, anthropic_beta_param.py (which lists both beta strings) and
lib/streaming/_beta_messages.py (the streamed message takes `context_management` from
`message_delta`), as installed (anthropic 2.12.0); Anthropic's docs
platform.claude.com/docs/en/build-with-claude/context-editing (defaults, "clear_thinking must
be listed first", response and streaming shapes) and .../compaction (beta header, "must be at
least 50,000 tokens", `pause_after_compaction`); the API error "`clear_thinking_20251015`
strategy requires `thinking` to be enabled or adaptive" reported in anthropics/claude-code#11971
and router-for-me/CLIProxyAPI#4957. Assumed, not confirmed: that several
`clear_tool_uses_20250919` edits may be combined in one request (seed 004 composes a result-
clearing and a use-clearing strategy), and that `compact_20260112` does not need the
context-management beta as well.

Everything is checked at construction and a wrong value raises `ConfigError`: integers
(never booleans) in range, the trigger kinds each strategy accepts, non-empty unique tool
names, at most one thinking and one compaction edit.

`seed_context_management` builds seed 004's configuration: results of compactable tools
cleared past 180,000 input tokens, clearing at least 140,000 (the 40,000-token keep target
of seed 004 is not expressible as a `keep` in tokens, so it becomes `clear_at_least =
trigger - target`), the other declared tools excluded, write-like tools' inputs cleared too;
and, with thinking, every thinking turn kept while the cache is warm and only the last one
after an idle gap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from unbounded.compaction.tools_registry import CompactableTools
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
"""Beta header value for `clear_tool_uses_20250919` and `clear_thinking_20251015`."""
COMPACT_BETA = "compact-2026-01-12"
"""Beta header value for `compact_20260112`."""
COMPACT_MIN_TRIGGER_TOKENS = 50_000
"""The API's lowest accepted compaction trigger."""
COMPACT_DEFAULT_TRIGGER_TOKENS = 150_000
"""The API's compaction trigger when none is given."""

SEED_TRIGGER_TOKENS = 180_000
"""Seed 004: tool-result clearing starts above this many input tokens."""
SEED_KEEP_TARGET_TOKENS = 40_000
"""Seed 004: clearing keeps recent results up to about this many tokens."""
WRITE_LIKE_TOOLS = frozenset({"Edit", "Write"})
"""Canonical tools whose large part is the input (seed 004 "Tool use clearing")."""


def _count(value: object, what: str, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{what} must be a whole number, not {value!r}")
    if value < minimum:
        raise ConfigError(f"{what} must be >= {minimum:,}, not {value:,}")
    return value


def _names(values: object, what: str) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ConfigError(f"{what} must be a list of tool names, not {values!r}")
    names = tuple(values)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{what} must hold non-empty tool names, not {name!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{what} names a tool twice: {list(names)}")
    return names


# -- values --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InputTokens:
    """A number of input tokens (`{"type": "input_tokens", "value": N}`), N >= 1."""

    value: int

    def __post_init__(self) -> None:
        _count(self.value, "input_tokens value", 1)

    def to_param(self) -> dict[str, Any]:
        """The JSON shape."""
        return {"type": "input_tokens", "value": self.value}


@dataclass(frozen=True, slots=True)
class ToolUses:
    """A number of tool uses (`{"type": "tool_uses", "value": N}`), N >= 0."""

    value: int

    def __post_init__(self) -> None:
        _count(self.value, "tool_uses value", 0)

    def to_param(self) -> dict[str, Any]:
        """The JSON shape."""
        return {"type": "tool_uses", "value": self.value}


@dataclass(frozen=True, slots=True)
class ThinkingTurns:
    """A number of assistant turns (`{"type": "thinking_turns", "value": N}`), N >= 1."""

    value: int

    def __post_init__(self) -> None:
        _count(self.value, "thinking_turns value", 1)

    def to_param(self) -> dict[str, Any]:
        """The JSON shape."""
        return {"type": "thinking_turns", "value": self.value}


# -- edits ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClearToolUses:
    """`clear_tool_uses_20250919`: clear old tool results (and optionally their inputs)."""

    TYPE: ClassVar[str] = "clear_tool_uses_20250919"
    BETA: ClassVar[str] = CONTEXT_MANAGEMENT_BETA

    trigger: InputTokens | ToolUses | None = None
    keep: ToolUses | None = None
    clear_at_least: InputTokens | None = None
    exclude_tools: tuple[str, ...] | None = None
    clear_tool_inputs: bool | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.trigger is not None:
            if not isinstance(self.trigger, (InputTokens, ToolUses)):
                raise ConfigError("trigger must be InputTokens(n) or ToolUses(n)")
            if isinstance(self.trigger, ToolUses) and self.trigger.value < 1:
                raise ConfigError("a tool_uses trigger must be >= 1")
        if self.keep is not None and not isinstance(self.keep, ToolUses):
            raise ConfigError("keep must be ToolUses(n)")
        if self.clear_at_least is not None and not isinstance(self.clear_at_least, InputTokens):
            raise ConfigError("clear_at_least must be InputTokens(n)")
        if self.exclude_tools is not None:
            object.__setattr__(self, "exclude_tools", _names(self.exclude_tools, "exclude_tools"))
        inputs = self.clear_tool_inputs
        if inputs is not None and not isinstance(inputs, bool):
            object.__setattr__(self, "clear_tool_inputs", _names(inputs, "clear_tool_inputs"))

    def to_param(self) -> dict[str, Any]:
        """The JSON shape (only the fields that were set)."""
        param: dict[str, Any] = {"type": self.TYPE}
        if self.trigger is not None:
            param["trigger"] = self.trigger.to_param()
        if self.keep is not None:
            param["keep"] = self.keep.to_param()
        if self.clear_at_least is not None:
            param["clear_at_least"] = self.clear_at_least.to_param()
        if self.exclude_tools is not None:
            param["exclude_tools"] = list(self.exclude_tools)
        if self.clear_tool_inputs is not None:
            inputs = self.clear_tool_inputs
            param["clear_tool_inputs"] = inputs if isinstance(inputs, bool) else list(inputs)
        return param


@dataclass(frozen=True, slots=True)
class ClearThinking:
    """`clear_thinking_20251015`: keep thinking of the last N turns, or `"all"`."""

    TYPE: ClassVar[str] = "clear_thinking_20251015"
    BETA: ClassVar[str] = CONTEXT_MANAGEMENT_BETA

    keep: ThinkingTurns | Literal["all"] | None = None

    def __post_init__(self) -> None:
        if (
            self.keep is not None
            and self.keep != "all"
            and not isinstance(self.keep, ThinkingTurns)
        ):
            raise ConfigError('keep must be ThinkingTurns(n) or "all"')

    def to_param(self) -> dict[str, Any]:
        """The JSON shape."""
        param: dict[str, Any] = {"type": self.TYPE}
        if self.keep is not None:
            param["keep"] = "all" if self.keep == "all" else self.keep.to_param()
        return param


@dataclass(frozen=True, slots=True)
class Compact:
    """`compact_20260112`: server-side summary when input tokens pass the trigger."""

    TYPE: ClassVar[str] = "compact_20260112"
    BETA: ClassVar[str] = COMPACT_BETA

    trigger: InputTokens | None = None
    instructions: str | None = None
    pause_after_compaction: bool | None = None

    def __post_init__(self) -> None:
        if self.trigger is not None:
            if not isinstance(self.trigger, InputTokens):
                raise ConfigError("the compaction trigger must be InputTokens(n)")
            _count(self.trigger.value, "the compaction trigger", COMPACT_MIN_TRIGGER_TOKENS)
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise ConfigError("instructions must be a non-empty string")
        if self.pause_after_compaction is not None and not isinstance(
            self.pause_after_compaction, bool
        ):
            raise ConfigError("pause_after_compaction must be true or false")

    def to_param(self) -> dict[str, Any]:
        """The JSON shape."""
        param: dict[str, Any] = {"type": self.TYPE}
        if self.trigger is not None:
            param["trigger"] = self.trigger.to_param()
        if self.instructions is not None:
            param["instructions"] = self.instructions
        if self.pause_after_compaction is not None:
            param["pause_after_compaction"] = self.pause_after_compaction
        return param


Edit = ClearToolUses | ClearThinking | Compact
"""One context-management edit strategy."""


@dataclass(frozen=True, slots=True)
class ContextManagement:
    """A checked `context_management` configuration: its edits, their JSON and betas."""

    edits: tuple[Edit, ...]

    def __post_init__(self) -> None:
        edits = tuple(self.edits) if not isinstance(self.edits, tuple) else self.edits
        if not edits:
            raise ConfigError("context_management needs at least one edit")
        for edit in edits:
            if not isinstance(edit, (ClearToolUses, ClearThinking, Compact)):
                raise ConfigError(f"not a context-management edit: {edit!r}")
        for kind in (ClearThinking, Compact):
            if sum(isinstance(e, kind) for e in edits) > 1:
                raise ConfigError(f"at most one {kind.TYPE} edit is allowed")
        # The API requires clear_thinking first when strategies are combined.
        ordered = tuple(e for e in edits if isinstance(e, ClearThinking)) + tuple(
            e for e in edits if not isinstance(e, ClearThinking)
        )
        object.__setattr__(self, "edits", ordered)

    @property
    def betas(self) -> tuple[str, ...]:
        """The `anthropic-beta` values these edits need, in first-use order."""
        seen: dict[str, None] = {}
        for edit in self.edits:
            seen[edit.BETA] = None
        return tuple(seen)

    @property
    def clears_thinking(self) -> bool:
        """Whether a thinking edit is present (the request must enable thinking)."""
        return any(isinstance(e, ClearThinking) for e in self.edits)

    def to_param(self) -> dict[str, Any]:
        """The `context_management` request field."""
        return {"edits": [edit.to_param() for edit in self.edits]}

    def apply(self, request: ProviderRequest) -> ProviderRequest:
        """A copy of the request with `context_management` set and the betas merged in.

        Raises ConfigError when a thinking edit is present but the request does not enable
        thinking (the API answers 400 in that case).
        """
        if self.clears_thinking and not thinking_enabled(request):
            raise ConfigError(
                "clear_thinking_20251015 needs thinking enabled or adaptive in the request"
            )
        updated: ProviderRequest = {**request}
        updated["context_management"] = self.to_param()
        betas = list(request.get("betas", []))
        for beta in self.betas:
            if beta not in betas:
                betas.append(beta)
        updated["betas"] = betas
        return updated


def thinking_enabled(request: Mapping[str, Any]) -> bool:
    """Whether a request enables extended thinking (`enabled` or `adaptive`)."""
    thinking = request.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


class ContextManagementBuilder:
    """Fluent construction with plain numbers; each step is checked when it is added."""

    __slots__ = ("_edits",)

    def __init__(self) -> None:
        self._edits: list[Edit] = []

    def clear_tool_uses(
        self,
        *,
        trigger_input_tokens: int | None = None,
        trigger_tool_uses: int | None = None,
        keep: int | None = None,
        clear_at_least: int | None = None,
        exclude_tools: Sequence[str] | None = None,
        clear_tool_inputs: bool | Sequence[str] | None = None,
    ) -> ContextManagementBuilder:
        """Add `clear_tool_uses_20250919` (one trigger kind at most)."""
        if trigger_input_tokens is not None and trigger_tool_uses is not None:
            raise ConfigError("give trigger_input_tokens or trigger_tool_uses, not both")
        trigger: InputTokens | ToolUses | None = None
        if trigger_input_tokens is not None:
            trigger = InputTokens(trigger_input_tokens)
        elif trigger_tool_uses is not None:
            trigger = ToolUses(trigger_tool_uses)
        inputs: bool | tuple[str, ...] | None
        if clear_tool_inputs is None or isinstance(clear_tool_inputs, bool):
            inputs = clear_tool_inputs
        else:
            inputs = _names(clear_tool_inputs, "clear_tool_inputs")
        self._edits.append(
            ClearToolUses(
                trigger=trigger,
                keep=ToolUses(keep) if keep is not None else None,
                clear_at_least=InputTokens(clear_at_least) if clear_at_least is not None else None,
                exclude_tools=_names(exclude_tools, "exclude_tools")
                if exclude_tools is not None
                else None,
                clear_tool_inputs=inputs,
            )
        )
        return self

    def clear_thinking(
        self, *, keep: int | Literal["all"] | None = None
    ) -> ContextManagementBuilder:
        """Add `clear_thinking_20251015`: keep the last `keep` thinking turns, or "all"."""
        if keep is None or keep == "all":
            self._edits.append(ClearThinking(keep))
        elif isinstance(keep, str):
            raise ConfigError(f'keep must be a number of turns or "all", not {keep!r}')
        else:
            self._edits.append(ClearThinking(ThinkingTurns(keep)))
        return self

    def compact(
        self,
        *,
        trigger: int | None = None,
        instructions: str | None = None,
        pause_after_compaction: bool | None = None,
    ) -> ContextManagementBuilder:
        """Add `compact_20260112` (trigger in input tokens, at least 50,000)."""
        self._edits.append(
            Compact(
                trigger=InputTokens(trigger) if trigger is not None else None,
                instructions=instructions,
                pause_after_compaction=pause_after_compaction,
            )
        )
        return self

    def build(self) -> ContextManagement:
        """The checked configuration."""
        return ContextManagement(tuple(self._edits))


def seed_context_management(
    declared_tools: Iterable[str],
    *,
    tools: CompactableTools | None = None,
    thinking: bool = False,
    cache_cold: bool = False,
    trigger_tokens: int = SEED_TRIGGER_TOKENS,
    keep_target_tokens: int = SEED_KEEP_TARGET_TOKENS,
) -> ContextManagement:
    """Seed 004's API-native configuration for a request declaring these tools.

    Results of compactable tools are cleared above `trigger_tokens`, clearing at least
    `trigger_tokens - keep_target_tokens`; every other declared tool is excluded; the inputs of
    write-like tools (Edit, Write and their aliases) are cleared too. With `thinking`, all
    thinking turns are kept while the cache is warm, only the last after an idle gap
    (`cache_cold`).
    """
    registry = tools if tools is not None else CompactableTools.default()
    names = _names(list(dict.fromkeys(declared_tools)), "declared_tools")
    _count(trigger_tokens, "trigger_tokens", 1)
    _count(keep_target_tokens, "keep_target_tokens", 0)
    if keep_target_tokens >= trigger_tokens:
        raise ConfigError("keep_target_tokens must be below trigger_tokens")
    excluded = [n for n in names if not registry.is_compactable(n)]
    write_like = [n for n in names if registry.canonical(n) in WRITE_LIKE_TOOLS]
    builder = ContextManagementBuilder()
    if thinking:
        builder.clear_thinking(keep=1 if cache_cold else "all")
    builder.clear_tool_uses(
        trigger_input_tokens=trigger_tokens,
        clear_at_least=trigger_tokens - keep_target_tokens,
        exclude_tools=excluded or None,
        clear_tool_inputs=write_like or None,
    )
    return builder.build()


# -- responses -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AppliedEdit:
    """One edit the API reports it applied."""

    type: str
    cleared_input_tokens: int = 0
    cleared_tool_uses: int | None = None
    cleared_thinking_turns: int | None = None


def _plain(value: Any) -> Any:
    """SDK models (pydantic) as plain data; dicts and lists through unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=False)
    return value


def _context_management_of(response: Any) -> Any:
    if isinstance(response, Mapping):
        return response.get("context_management")
    return getattr(response, "context_management", None)


def applied_edits(response: Any) -> tuple[AppliedEdit, ...]:
    """The edits a response applied: from a message (dict or SDK object, plain, async or a
    stream's final message) or a `message_delta` event; () when there are none."""
    section = _plain(_context_management_of(response))
    if not isinstance(section, Mapping):
        return ()
    edits = section.get("applied_edits")
    if not isinstance(edits, list):
        return ()
    result: list[AppliedEdit] = []
    for item in edits:
        data = _plain(item)
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            continue
        result.append(
            AppliedEdit(
                type=data["type"],
                cleared_input_tokens=_int_or(data.get("cleared_input_tokens"), 0),
                cleared_tool_uses=_int_or(data.get("cleared_tool_uses"), None),
                cleared_thinking_turns=_int_or(data.get("cleared_thinking_turns"), None),
            )
        )
    return tuple(result)


def applied_edits_from_events(events: Iterable[Any]) -> tuple[AppliedEdit, ...]:
    """Applied edits from raw stream events: those of the last `message_delta` carrying them."""
    found: tuple[AppliedEdit, ...] = ()
    for event in events:
        kind = event.get("type") if isinstance(event, Mapping) else getattr(event, "type", None)
        if kind == "message_delta":
            edits = applied_edits(event)
            if edits:
                found = edits
    return found


def _int_or(value: Any, default: int | None) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def cleared_input_tokens(response: Any) -> int:
    """Total input tokens the applied edits of a response cleared."""
    return sum(edit.cleared_input_tokens for edit in applied_edits(response))
