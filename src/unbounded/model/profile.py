"""What a provider declares about itself: its `ProviderProfile`.

Compaction reads a summarizer's profile instead of probing it for attributes: whether its text
is the summary itself, whether it lists the transcript's facts already, which headings the
guard checks in its summaries, and whether it sends anything to a model at all. A wrapper
(retrying, tracing, recording...) has the profile of the provider it wraps, by construction
(`unbounded.model.response.ProviderWrapper`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unbounded.errors import ConfigError


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """The headings a summary prompt asks for, those it must have, and how many at least."""

    sections: tuple[tuple[str, re.Pattern[str]], ...]
    required: tuple[str, ...]
    minimum: int


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """The capabilities a provider declares; the defaults describe a plain model."""

    writes_final_summary: bool = False
    """Its reply is the summary itself: used as it is, never parsed for `<summary>` tags."""
    includes_facts: bool = False
    """Its summary lists the transcript's facts already: no facts ledger is appended."""
    summary_sections: SectionSpec | None = None
    """The headings the guard checks in its summaries (None: the prompt's nine sections)."""
    offline: bool = False
    """It sends no request to a model (the offline hand-over: costs nothing, never fails)."""
    native_context_edits: frozenset[str] = frozenset()
    """The provider's own context-management edits its API takes (Anthropic:
    `compact_20260112`, `clear_tool_uses_20250919`, `clear_thinking_20251015`); a model must
    also declare them (`ModelInfo.native_compaction`). Empty: none (`compaction.native`)."""

    def __post_init__(self) -> None:
        for flag in ("writes_final_summary", "includes_facts", "offline"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise ConfigError(f"ProviderProfile.{flag} must be True or False, not {value!r}")
        if not isinstance(self.native_context_edits, frozenset) or not all(
            isinstance(edit, str) for edit in self.native_context_edits
        ):
            raise ConfigError(
                "ProviderProfile.native_context_edits must be a frozenset of edit type names, "
                f"not {self.native_context_edits!r}"
            )
        if self.summary_sections is not None and not isinstance(self.summary_sections, SectionSpec):
            raise ConfigError(
                "ProviderProfile.summary_sections must be a SectionSpec or None, "
                f"not {type(self.summary_sections).__name__}"
            )


MODEL_PROFILE = ProviderProfile()
"""The profile of a provider that sends requests to a model and declares nothing more."""


__all__ = ["MODEL_PROFILE", "ProviderProfile", "SectionSpec"]
