"""The system prompt as named sections split into cache scopes (seed 001 "System Prompt
Architecture").

Rules:

- A prompt is an ordered list of named sections. `system_prompt_section(name, compute)` is
  computed once and cached until the session is cleared or compacted
  (`SystemPromptBuilder.clear_cache()`); `dangerous_uncached_system_prompt_section(name,
  compute, reason)` is recomputed every turn and *requires* a reason, because whenever its
  output changes the system prompt hash changes and the whole prompt cache is re-created.
- `SYSTEM_PROMPT_DYNAMIC_BOUNDARY` separates the static sections (the same for every user,
  cacheable across organisations: scope `global`) from the session-specific ones (scope
  `org`). The marker itself is never sent.
- `split_sys_prompt_prefix` turns the list into blocks, in this order: the attribution header
  and the CLI prefix (no cache_control), the static content joined into one block (`global`),
  the dynamic content joined into one block (`org`). Without global caching (third-party
  providers, or MCP tools present, whose schemas differ per user and precede the system in
  the prefix) static and dynamic content form one `org` block. Without a boundary the whole
  prompt is session content (`org`).
- A caller's own system prompt (`custom_system_prompt`) replaces the default entirely and
  skips the split: one `org` block, no global caching.
- `SystemPrompt.to_api(ttl=...)` renders Messages API blocks; only blocks with a scope get
  `cache_control` (seed `getCacheControl`: `{"type": "ephemeral"}`, plus `"ttl": "1h"` for
  the 1-hour TTL, plus `"scope": "global"` for global blocks; org is the API's default and
  is not written).

Where the seeds disagree: seed 001's `splitSysPromptPrefix` comment gives the dynamic block
no cache scope, while its block table and request diagram show it cached at org scope. The
diagram is followed (org), as issue 6 asks; breakpoints.py keeps the total within the API's
four markers.

The attribution header is part of the cached prefix (it comes first): it must be byte-stable
for the session, or every request misses the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from unbounded.caching.ttl import CacheTtl, check_ttl
from unbounded.errors import ConfigError
from unbounded.model.request import SystemBlock

SYSTEM_PROMPT_DYNAMIC_BOUNDARY = "__SYSTEM_PROMPT_DYNAMIC_BOUNDARY__"
"""Marks where static (globally cacheable) content ends and session content begins."""
SECTION_SEPARATOR = "\n\n"
"""How sections are joined inside one block."""

CacheScope = Literal["global", "org"]


def get_cache_control(scope: CacheScope | None = None, ttl: CacheTtl = "5m") -> dict[str, Any]:
    """Seed 001 `getCacheControl`: the marker for a scope and TTL."""
    check_ttl(ttl)
    if scope not in (None, "global", "org"):
        raise ConfigError(f"cache scope must be 'global', 'org' or None, not {scope!r}")
    marker: dict[str, Any] = {"type": "ephemeral"}
    if ttl == "1h":
        marker["ttl"] = "1h"
    if scope == "global":
        marker["scope"] = "global"
    return marker


def cache_scope_of(block: SystemBlock | dict[str, Any]) -> CacheScope | None:
    """The scope a system block's cache_control declares (None when it has no marker)."""
    marker = block.get("cache_control")
    if not isinstance(marker, dict):
        return None
    return "global" if marker.get("scope") == "global" else "org"


@dataclass(frozen=True, slots=True)
class SystemPromptSection:
    """A named piece of the system prompt and how to compute it."""

    name: str
    compute: Callable[[], str | None]
    uncached_reason: str | None = None
    """Set for sections recomputed every turn: why that is worth breaking the cache."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("a system prompt section needs a non-empty name")
        if not callable(self.compute):
            raise ConfigError(f"system prompt section {self.name!r}: compute must be callable")
        if self.uncached_reason is not None and not self.uncached_reason.strip():
            raise ConfigError(
                f"uncached system prompt section {self.name!r} needs a non-empty reason"
            )

    @property
    def cached(self) -> bool:
        """Computed once per session (until /clear or /compact)."""
        return self.uncached_reason is None


def system_prompt_section(name: str, compute: Callable[[], str | None]) -> SystemPromptSection:
    """A section computed once and cached until the session is cleared or compacted."""
    return SystemPromptSection(name, compute)


def dangerous_uncached_system_prompt_section(
    name: str, compute: Callable[[], str | None], reason: str
) -> SystemPromptSection:
    """A section recomputed every turn; `reason` documents why (it breaks the cache on change)."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"uncached system prompt section {name!r} needs a reason")
    return SystemPromptSection(name, compute, uncached_reason=reason)


@dataclass(frozen=True, slots=True)
class ScopedSystemBlock:
    """One system block and the cache scope it is cached at (None: never cached)."""

    text: str
    cache_scope: CacheScope | None = None

    def __post_init__(self) -> None:
        if self.cache_scope not in (None, "global", "org"):
            raise ConfigError(f"cache scope must be 'global', 'org' or None: {self.cache_scope!r}")


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """The system prompt as blocks with their cache scopes."""

    blocks: tuple[ScopedSystemBlock, ...]

    @property
    def text(self) -> str:
        """All blocks' text, joined."""
        return SECTION_SEPARATOR.join(block.text for block in self.blocks)

    @property
    def uses_global_cache(self) -> bool:
        """Whether any block is cached at global scope."""
        return any(block.cache_scope == "global" for block in self.blocks)

    def to_api(
        self, *, ttl: CacheTtl = "5m", enable_prompt_caching: bool = True
    ) -> list[SystemBlock]:
        """Seed 001 `buildSystemPromptBlocks`: text blocks, cache_control on scoped ones."""
        check_ttl(ttl)
        rendered: list[SystemBlock] = []
        for block in self.blocks:
            item: SystemBlock = {"type": "text", "text": block.text}
            if enable_prompt_caching and block.cache_scope is not None and block.text:
                item["cache_control"] = get_cache_control(block.cache_scope, ttl)
            rendered.append(item)
        return rendered


def split_sys_prompt_prefix(
    parts: Sequence[str],
    *,
    use_global_cache: bool = True,
    attribution_header: str | None = None,
    cli_prefix: str | None = None,
) -> SystemPrompt:
    """Seed 001 `splitSysPromptPrefix`: prompt strings (with the boundary marker) -> blocks."""
    strings = [p for p in parts if isinstance(p, str)]
    if len(strings) != len(parts):
        raise ConfigError("system prompt parts must all be strings")
    markers = [i for i, part in enumerate(strings) if part == SYSTEM_PROMPT_DYNAMIC_BOUNDARY]
    if len(markers) > 1:
        raise ConfigError("the system prompt holds the dynamic boundary marker more than once")
    if markers:
        static = [p for p in strings[: markers[0]] if p]
        dynamic = [p for p in strings[markers[0] + 1 :] if p]
    else:
        static, dynamic = [], [p for p in strings if p]
    blocks: list[ScopedSystemBlock] = []
    if attribution_header:
        blocks.append(ScopedSystemBlock(attribution_header, None))
    if cli_prefix:
        blocks.append(ScopedSystemBlock(cli_prefix, None))
    if use_global_cache and static:
        blocks.append(ScopedSystemBlock(SECTION_SEPARATOR.join(static), "global"))
        if dynamic:
            blocks.append(ScopedSystemBlock(SECTION_SEPARATOR.join(dynamic), "org"))
    elif static or dynamic:
        blocks.append(ScopedSystemBlock(SECTION_SEPARATOR.join(static + dynamic), "org"))
    return SystemPrompt(tuple(blocks))


def custom_system_prompt(text: str | Sequence[str]) -> SystemPrompt:
    """A caller's own system prompt: replaces the default, skips the split (one org block)."""
    joined = text if isinstance(text, str) else SECTION_SEPARATOR.join(p for p in text if p)
    if SYSTEM_PROMPT_DYNAMIC_BOUNDARY in joined:
        joined = joined.replace(SYSTEM_PROMPT_DYNAMIC_BOUNDARY, "").strip()
    return SystemPrompt((ScopedSystemBlock(joined, "org"),) if joined else ())


@dataclass(slots=True)
class SystemPromptSectionCache:
    """Values of cached sections, kept until /clear or /compact."""

    values: dict[str, str | None] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget every cached section (after /clear or a compaction)."""
        self.values.clear()


def resolve_system_prompt_sections(
    sections: Iterable[SystemPromptSection], cache: SystemPromptSectionCache
) -> list[str]:
    """Section texts in order: cached sections from `cache` (computed once), uncached ones
    recomputed; empty results are left out."""
    texts: list[str] = []
    for section in sections:
        if section.cached:
            if section.name not in cache.values:
                cache.values[section.name] = section.compute()
            value = cache.values[section.name]
        else:
            value = section.compute()
        if value:
            texts.append(value)
    return texts


class SystemPromptBuilder:
    """Builds the session's system prompt from static and dynamic sections, turn after turn."""

    def __init__(
        self,
        static_sections: Sequence[SystemPromptSection] = (),
        dynamic_sections: Sequence[SystemPromptSection] = (),
        *,
        use_global_cache: bool = True,
        attribution_header: str | None = None,
        cli_prefix: str | None = None,
    ) -> None:
        for section in [*static_sections, *dynamic_sections]:
            if not isinstance(section, SystemPromptSection):
                raise ConfigError("sections must be SystemPromptSection values")
        names = [s.name for s in [*static_sections, *dynamic_sections]]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"system prompt section names must be unique: {duplicates}")
        self.static_sections = tuple(static_sections)
        self.dynamic_sections = tuple(dynamic_sections)
        self.use_global_cache = use_global_cache
        self.attribution_header = attribution_header
        self.cli_prefix = cli_prefix
        self.cache = SystemPromptSectionCache()

    @property
    def uncached_sections(self) -> dict[str, str]:
        """Names of the sections recomputed every turn, with their reasons."""
        return {
            s.name: s.uncached_reason
            for s in [*self.static_sections, *self.dynamic_sections]
            if s.uncached_reason is not None
        }

    def parts(self) -> list[str]:
        """The prompt as strings, with the dynamic boundary marker between the two halves."""
        static = resolve_system_prompt_sections(self.static_sections, self.cache)
        dynamic = resolve_system_prompt_sections(self.dynamic_sections, self.cache)
        return [*static, SYSTEM_PROMPT_DYNAMIC_BOUNDARY, *dynamic]

    def build(self) -> SystemPrompt:
        """The system prompt for the next request."""
        return split_sys_prompt_prefix(
            self.parts(),
            use_global_cache=self.use_global_cache,
            attribution_header=self.attribution_header,
            cli_prefix=self.cli_prefix,
        )

    def clear_cache(self) -> None:
        """Recompute every section on the next build (call after /clear or a compaction)."""
        self.cache.clear()
