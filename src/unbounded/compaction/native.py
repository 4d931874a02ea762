"""The provider's own compaction and context editing, as compaction tiers (docs/compaction.md).

Anthropic compacts a conversation on its server (`compact_20260112`, beta
`compact-2026-01-12`) and edits it (`clear_tool_uses_20250919`, `clear_thinking_20251015`,
beta `context-management-2025-06-27`), both asked for in the request's
`context_management.edits`. Two ways are used here, and only where the provider declares the
edits (`ProviderProfile.native_context_edits`) and the model declares compaction
(`ModelInfo.native_compaction`):

- **Threshold** (`ServerCompaction`, a session extension): every request carries the compact
  edit with a trigger below the session's own auto-compact threshold, so the server compacts
  first, in the same call, and our summary stays the fallback. The reply then starts with a
  `compaction` block; it is recorded as it came and sent back unchanged in every later
  request (the server drops what precedes it). After one, the facts ledger of what it closed
  is appended as a note before the next request.
- **On demand** (`NativeCompactionTier`, a tier): at our threshold, the summary request of
  the cache-sharing tier goes to the server as a compaction instead: the same prefix, our
  summary prompt as the edit's `instructions`, `pause_after_compaction` so the server only
  compacts. The compaction's text becomes our summary, so the boundary, the facts ledger,
  the re-attached files and instructions and the receipt are the usual ones. A provider or
  model without it, a context under the server's 50,000-token minimum, or any error: None,
  and the next tier (our summary) runs.

OpenAI's Responses API compacts on its server too, in the threshold form only through
`ServerCompaction`: its provider profile declares the `compaction` entry
(`OPENAI_CONTEXT_EDITS`), each request carries `context_management` with the session's
trigger as `compact_threshold`, and the reply's compaction item (opaque, encrypted) travels
as an `opaque_item` block sent back byte-for-byte; the facts ledger follows it the same way.
The Responses API takes no instructions or pause, and its item has no text to read, so the
on-demand tier is Anthropic's alone here (the `/responses/compact` endpoint is not used yet).
Its usage is the reply's own (no separate iterations): priced once, as any reply.

Billing: the compaction step is a `compaction` entry of `usage.iterations`, not counted in
the top-level usage fields (`billed_usage` adds it, once).

`arrange_tiers` orders the tiers by `Policy.compaction_tier_order`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from unbounded.catalog import ModelInfo
from unbounded.compaction.auto import (
    CacheSharingSummaryTier,
    SummaryHandover,
    TierEntry,
    TierSlot,
)
from unbounded.compaction.context import CompactionContext
from unbounded.compaction.conversation import CompactionResult
from unbounded.compaction.glue import default_facts_ledger
from unbounded.compaction.server_blocks import (
    compaction_blocks,
    last_compaction,
    responses_compaction_items,
)
from unbounded.errors import CompactionError, ConfigError, ProviderError
from unbounded.extension import Extension, ExtensionHost
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ModelResponse, Provider
from unbounded.policy import COMPACTION_TIERS
from unbounded.wire.context_edits import (
    ANTHROPIC_CONTEXT_EDITS,
    CLEAR_THINKING_EDIT,
    CLEAR_TOOL_USES_EDIT,
    COMPACT_EDIT,
    COMPACTION_BETA,
    COMPACTION_BLOCK,
    CONTEXT_EDITING_BETA,
    DEFAULT_COMPACTION_TRIGGER,
    MIN_COMPACTION_TRIGGER,
    OPENAI_CONTEXT_EDITS,
    RESPONSES_COMPACTION,
)

if TYPE_CHECKING:
    from unbounded.turn import TurnContext

logger = logging.getLogger(__name__)

TIER_NAMES = COMPACTION_TIERS
"""The tiers `Policy.compaction_tier_order` may name."""
LEDGER_NOTE = "The server compacted the conversation above. Facts it closed, kept verbatim:"


def native_edits(profile: ProviderProfile, model: ModelInfo | None) -> frozenset[str]:
    """The native edits a provider and model both support: the provider's context edits, the
    compact edit only for a model that declares it (none without a known model)."""
    if model is None:
        return frozenset()
    edits = profile.native_context_edits
    return edits if model.native_compaction else edits - {COMPACT_EDIT, RESPONSES_COMPACTION}


@dataclass(frozen=True, slots=True)
class ServerCompactionSettings:
    """What the compact edit asks (checked at construction, as the server would)."""

    trigger_tokens: int | None = None
    """Input tokens at which the server compacts (>= 50,000). None: the session's warning
    level, 20,000 tokens below its own auto-compact threshold, or 50,000 if that is lower."""
    instructions: str | None = None
    """Extra instructions for the server's summary."""
    pause_after_compaction: bool = False
    """The reply stops after the compaction block (`stop_reason` "compaction"); the next
    request goes on from it."""
    clear_tool_uses_keep: int | None = None
    """Also send `clear_tool_uses_20250919`, keeping this many recent tool uses (None: not
    sent; our microcompaction clears results already)."""
    clear_thinking_keep: int | None = None
    """Also send `clear_thinking_20251015`, keeping the thinking of this many recent turns
    (None: not sent)."""

    def __post_init__(self) -> None:
        trigger = self.trigger_tokens
        if trigger is not None and (isinstance(trigger, bool) or trigger < MIN_COMPACTION_TRIGGER):
            raise ConfigError(
                f"ServerCompactionSettings.trigger_tokens must be at least "
                f"{MIN_COMPACTION_TRIGGER:,} (the server's minimum), not {trigger!r}"
            )
        for name in ("clear_tool_uses_keep", "clear_thinking_keep"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ConfigError(f"ServerCompactionSettings.{name} must be >= 0, not {value!r}")
        if self.instructions is not None and not self.instructions.strip():
            raise ConfigError("ServerCompactionSettings.instructions must not be blank")

    def edits(self, supported: frozenset[str], *, trigger_tokens: int) -> list[dict[str, Any]]:
        """The `context_management.edits` for what `supported` allows; clear_thinking first,
        as the API requires when it is combined with others."""
        edits: list[dict[str, Any]] = []
        if self.clear_thinking_keep is not None and CLEAR_THINKING_EDIT in supported:
            keep = {"type": "thinking_turns", "value": self.clear_thinking_keep}
            edits.append({"type": CLEAR_THINKING_EDIT, "keep": keep})
        if self.clear_tool_uses_keep is not None and CLEAR_TOOL_USES_EDIT in supported:
            keep = {"type": "tool_uses", "value": self.clear_tool_uses_keep}
            edits.append({"type": CLEAR_TOOL_USES_EDIT, "keep": keep})
        if COMPACT_EDIT in supported:
            pause = self.pause_after_compaction
            edits.append(compact_edit(trigger_tokens, self.instructions, pause))
        if RESPONSES_COMPACTION in supported:
            # The Responses API takes only the threshold: instructions and pause have no form.
            edits.append({"type": RESPONSES_COMPACTION, "compact_threshold": trigger_tokens})
        return edits


def compact_edit(trigger_tokens: int, instructions: str | None, pause: bool) -> dict[str, Any]:
    """One `compact_20260112` edit."""
    if trigger_tokens < MIN_COMPACTION_TRIGGER:
        raise ConfigError(
            f"a server compaction trigger must be at least {MIN_COMPACTION_TRIGGER:,} tokens, "
            f"not {trigger_tokens:,}"
        )
    edit: dict[str, Any] = {
        "type": COMPACT_EDIT,
        "trigger": {"type": "input_tokens", "value": trigger_tokens},
    }
    if instructions:
        edit["instructions"] = instructions
    if pause:
        edit["pause_after_compaction"] = True
    return edit


def with_context_edits(
    request: ProviderRequest, edits: Sequence[Mapping[str, Any]]
) -> ProviderRequest:
    """A copy of `request` asking for `edits`, with the beta headers they need added to its
    own (nothing changed when `edits` is empty). The messages are shared, not copied."""
    if not edits:
        return request
    betas = list(cast(Sequence[str], request.get("betas") or ()))
    kinds = {str(edit.get("type")) for edit in edits}
    wanted = [COMPACTION_BETA] if COMPACT_EDIT in kinds else []
    if kinds - {COMPACT_EDIT, RESPONSES_COMPACTION}:
        wanted.append(CONTEXT_EDITING_BETA)
    betas.extend(beta for beta in wanted if beta not in betas)
    out = dict(request)
    out["context_management"] = {"edits": [dict(edit) for edit in edits]}
    out["betas"] = betas
    return cast(ProviderRequest, out)


def compaction_iterations(usage: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The `compaction` entries of a usage's `iterations`."""
    iterations = (usage or {}).get("iterations")
    if not isinstance(iterations, list):
        return []
    return [i for i in iterations if isinstance(i, Mapping) and i.get("type") == COMPACTION_BLOCK]


_BILLED_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def billed_usage(usage: Usage) -> Usage:
    """The usage a reply is billed for: its top-level fields plus each server compaction step
    (`usage.iterations` entries of type compaction, which the top-level fields leave out);
    every billed iteration counted once. Without such entries, `usage` itself."""
    steps = compaction_iterations(cast(Mapping[str, Any], usage))
    if not steps:
        return usage
    top = cast(Mapping[str, Any], usage)
    out: dict[str, Any] = dict(usage)
    for name in _BILLED_FIELDS:
        out[name] = int(top.get(name) or 0) + sum(int(s.get(name) or 0) for s in steps)
    split = dict(usage.get("cache_creation") or {})
    for step in steps:
        extra = step.get("cache_creation")
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                split[key] = split.get(key, 0) + int(value or 0)
    if split:
        out["cache_creation"] = split
    return cast(Usage, out)


# -- on demand: a tier ------------------------------------------------------------------------


@dataclass(slots=True)
class ServerCompactor:
    """A summarizer whose "summary request" is a compaction on the server: the request's last
    message (the summary prompt) becomes the edit's instructions, the rest is sent with the
    compact edit at the server's minimum trigger and `pause_after_compaction`; the reply's
    compaction text is returned as the summary, the compaction step's tokens in its usage."""

    provider: Provider
    name: str = "anthropic-server-compaction"
    supports_cache_edits: bool = False

    @property
    def profile(self) -> ProviderProfile:
        """A plain model's profile: the text is parsed and checked like any summary."""
        return MODEL_PROFILE

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """The server's compaction of `request`'s conversation, as a summary reply."""
        messages = list(request.get("messages") or [])
        if len(messages) < 2:
            raise CompactionError("nothing for the server to compact", reason="no_summary")
        prompt = messages.pop()
        edit = compact_edit(MIN_COMPACTION_TRIGGER, _text_of(prompt.get("content")), True)
        sent = with_context_edits(cast(ProviderRequest, {**request, "messages": messages}), [edit])
        reply = await self.provider.create(sent, stream=stream, heartbeat=heartbeat)
        blocks = compaction_blocks(reply.content)
        text = blocks[-1].get("content") if blocks else None
        if not isinstance(text, str) or not text.strip():
            raise CompactionError(
                "the server answered without a compaction (the context may be under its "
                f"{MIN_COMPACTION_TRIGGER:,}-token minimum, or its summary failed)",
                reason="no_summary",
            )
        content: list[ContentBlock] = [{"type": "text", "text": text}]
        return ModelResponse(
            content=content,
            stop_reason="end_turn",
            usage=billed_usage(reply.usage),
            model=reply.model,
            id=reply.id,
            raw=reply.raw,
        )


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return "\n".join(str(b.get("text", "")) for b in texts)
    return ""


@dataclass(frozen=True, slots=True)
class NativeCompactionTier:
    """The server's compaction as the first tier: None (the next tier runs) when the provider
    or the model lacks it, the context is under the server's minimum, or it failed."""

    provider: Provider
    model: ModelInfo | None

    async def compact(self, context: CompactionContext) -> CompactionResult | None:
        """The compaction the server wrote, or None to fall through."""
        if COMPACT_EDIT not in native_edits(self.provider.profile, self.model):
            return None
        if context.tokens < MIN_COMPACTION_TRIGGER:
            return None
        tier = CacheSharingSummaryTier(ServerCompactor(self.provider))
        try:
            answer = await tier.compact(context)
            if isinstance(answer, SummaryHandover):
                failure = answer.give_up()
                if failure is not None:
                    raise failure
                return None
        except (CompactionError, ProviderError) as error:
            logger.warning("the server compaction failed (%s): our own summary takes over", error)
            return None
        return answer


def native_tiers(provider: Provider, model: ModelInfo | None) -> tuple[NativeCompactionTier, ...]:
    """The native tier for this provider and model, or none when either lacks compaction."""
    if COMPACT_EDIT not in native_edits(provider.profile, model):
        return ()
    return (NativeCompactionTier(provider, model),)


def arrange_tiers(
    order: Sequence[str],
    *,
    native: Sequence[TierEntry],
    summary: Sequence[TierEntry],
    offline: Sequence[TierEntry],
) -> tuple[TierEntry, ...]:
    """The tiers in `order` (names from `TIER_NAMES`). `summary` and `offline` come slotted as
    the session builds them; with no summary named, the offline tiers run throughout."""
    unknown = [name for name in order if name not in TIER_NAMES]
    if unknown:
        raise ConfigError(f"unknown compaction tiers {unknown}: choose from {list(TIER_NAMES)}")
    groups: dict[str, Sequence[TierEntry]] = {
        "native": [TierSlot(t, "closed") if not isinstance(t, TierSlot) else t for t in native],
        "summary": summary,
        "offline": offline
        if "summary" in order
        else [TierSlot(t.tier if isinstance(t, TierSlot) else t, "any") for t in offline],
    }
    return tuple(entry for name in order for entry in groups[name])


# -- threshold: an extension ------------------------------------------------------------------


class ServerCompaction(Extension):
    """Asks the server to compact (and edit) on its own threshold in every request; keeps the
    compaction blocks it answers with, and notes the facts ledger after each.

    `profile` is the provider's (None: the profile of the provider the conversation's requests
    go to, once it is known; else of the session's model provider)."""

    def __init__(
        self,
        settings: ServerCompactionSettings | None = None,
        *,
        profile: ProviderProfile | None = None,
    ) -> None:
        if settings is not None and not isinstance(settings, ServerCompactionSettings):
            raise ConfigError("ServerCompaction takes a ServerCompactionSettings")
        if profile is not None and not isinstance(profile, ProviderProfile):
            raise ConfigError("ServerCompaction.profile must be a ProviderProfile")
        self.settings = settings or ServerCompactionSettings()
        self.profile = profile
        self.compactions = 0
        """Server compactions seen in replies."""
        self._ledger_due: int | None = None  # entries before the compaction still to note

    def supported(self, session: ExtensionHost) -> frozenset[str]:
        """The native edits the provider and the session's model support now."""
        profile = self.profile
        if profile is None:
            # The edits go into the conversation's own requests: its provider decides, and a
            # summarizer from elsewhere (or the offline one) only when that is not known yet.
            provider = session.call_provider()
            if provider is None:
                provider = session.model_provider()
            if provider is None:
                return frozenset()
            profile = provider.profile
        return native_edits(profile, session.model_info)

    def trigger_tokens(self, session: ExtensionHost) -> int:
        """The server's trigger: the setting, else the session's warning level (at least the
        server's minimum)."""
        if self.settings.trigger_tokens is not None:
            return self.settings.trigger_tokens
        return max(MIN_COMPACTION_TRIGGER, session.thresholds.warning)

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Note the facts ledger of the history a server compaction closed (once per
        compaction, after the reply that carried it)."""
        due = self._ledger_due
        if due is None:
            return
        self._ledger_due = None
        ledger = default_facts_ledger(list(session.entries[:due])).strip()
        if ledger:
            session.append([Entry.user(f"{LEDGER_NOTE}\n\n{ledger}", is_meta=True)])

    async def before_request(self, session: ExtensionHost, turn: TurnContext) -> None:
        """Add the edits the provider and model support to the request."""
        supported = self.supported(session)
        if not supported:
            return
        edits = self.settings.edits(supported, trigger_tokens=self.trigger_tokens(session))
        turn.request = with_context_edits(turn.built_request(), edits)

    def after_record(self, session: ExtensionHost, entry: Entry) -> None:
        """Count a reply that carries a compaction block (or a Responses compaction item) and
        schedule its ledger note."""
        content = entry.message.get("content") if entry.message else None
        if compaction_blocks(content) or responses_compaction_items(content):
            self.compactions += 1
            self._ledger_due = len(session.entries) - 1
            logger.info("the server compacted the conversation (%d so far)", self.compactions)


__all__ = [
    "ANTHROPIC_CONTEXT_EDITS",
    "CLEAR_THINKING_EDIT",
    "CLEAR_TOOL_USES_EDIT",
    "COMPACTION_BETA",
    "COMPACT_EDIT",
    "CONTEXT_EDITING_BETA",
    "DEFAULT_COMPACTION_TRIGGER",
    "MIN_COMPACTION_TRIGGER",
    "OPENAI_CONTEXT_EDITS",
    "RESPONSES_COMPACTION",
    "TIER_NAMES",
    "NativeCompactionTier",
    "ServerCompaction",
    "ServerCompactionSettings",
    "ServerCompactor",
    "arrange_tiers",
    "billed_usage",
    "compact_edit",
    "compaction_blocks",
    "compaction_iterations",
    "last_compaction",
    "native_edits",
    "native_tiers",
    "responses_compaction_items",
    "with_context_edits",
]
