"""The providers' context-management edits: their names, beta headers and the servers' limits.

The facts `compaction.native` builds requests from, kept apart so a provider can declare the
edits it takes (`ProviderProfile.native_context_edits`) without importing compaction.
"""

from __future__ import annotations

COMPACT_EDIT = "compact_20260112"
"""Server-side compaction: the reply starts with a `compaction` block summarizing the past."""
CLEAR_TOOL_USES_EDIT = "clear_tool_uses_20250919"
"""Clears old tool results (and optionally their calls) on the server."""
CLEAR_THINKING_EDIT = "clear_thinking_20251015"
"""Clears the thinking blocks of older turns on the server."""
ANTHROPIC_CONTEXT_EDITS = frozenset({COMPACT_EDIT, CLEAR_TOOL_USES_EDIT, CLEAR_THINKING_EDIT})
"""The edits Anthropic's Messages API takes in `context_management.edits`."""
COMPACTION_BETA = "compact-2026-01-12"
"""The beta header the compact edit, and a request carrying compaction blocks, need."""
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
"""The beta header of the clear edits."""
MIN_COMPACTION_TRIGGER = 50_000
"""The smallest input-token trigger the server accepts for `compact_20260112`."""
DEFAULT_COMPACTION_TRIGGER = 150_000
"""The server's trigger when none is given."""
COMPACTION_BLOCK = "compaction"
"""The type of the content block a server compaction answers with."""
RESPONSES_COMPACTION = "compaction"
"""OpenAI's Responses API: the `context_management` entry type asking the server to compact
past a `compact_threshold`, and the type of the opaque item it answers with."""
OPENAI_CONTEXT_EDITS = frozenset({RESPONSES_COMPACTION})
"""The edits the Responses API takes: only threshold compaction (no instructions, no pause,
no clear edits, and an opaque item no summary can be read from)."""

__all__ = [
    "ANTHROPIC_CONTEXT_EDITS",
    "CLEAR_THINKING_EDIT",
    "CLEAR_TOOL_USES_EDIT",
    "COMPACTION_BETA",
    "COMPACTION_BLOCK",
    "COMPACT_EDIT",
    "CONTEXT_EDITING_BETA",
    "DEFAULT_COMPACTION_TRIGGER",
    "MIN_COMPACTION_TRIGGER",
    "OPENAI_CONTEXT_EDITS",
    "RESPONSES_COMPACTION",
]
