"""Compaction: microcompaction, full and partial compaction.

Microcompaction (docs/microcompaction.md): `tools_registry` (which tools' results may be
cleared), `ledger` (tool calls registered turn by turn), `micro` (count-based and time-based
tiers, the per-turn `microcompact` and its state) and `cached_micro` (cache-edit deletions).
Full and partial compaction (docs/compaction.md): `conversation` (`compact_conversation`),
`prompts`, `ptl`, `summary_text`, `facts`, `rehydrate` and `glue`.
"""

from unbounded.compaction.cached_micro import (
    CachedMicrocompactState,
    cache_expired,
    delete_edit,
    select_cache_deletions,
    with_cache_edits,
)
from unbounded.compaction.conversation import (
    CacheSafeParams,
    CompactionResult,
    compact_conversation,
)
from unbounded.compaction.ledger import ToolLedger, ToolRecord
from unbounded.compaction.micro import (
    MicrocompactResult,
    MicrocompactState,
    MicrocompactStats,
    cache_is_cold,
    cached_microcompact,
    clear_tool_results,
    count_based_microcompact,
    last_assistant_time,
    microcompact,
    select_count_based,
    select_time_based,
    time_based_microcompact,
)
from unbounded.compaction.ptl import truncate_head_for_ptl_retry
from unbounded.compaction.tools_registry import (
    CLEARED_TOOL_RESULT,
    DEFAULT_COMPACTABLE_TOOLS,
    CompactableTools,
)

__all__ = [
    "CLEARED_TOOL_RESULT",
    "DEFAULT_COMPACTABLE_TOOLS",
    "CacheSafeParams",
    "CachedMicrocompactState",
    "CompactableTools",
    "CompactionResult",
    "MicrocompactResult",
    "MicrocompactState",
    "MicrocompactStats",
    "ToolLedger",
    "ToolRecord",
    "cache_expired",
    "cache_is_cold",
    "cached_microcompact",
    "clear_tool_results",
    "compact_conversation",
    "count_based_microcompact",
    "delete_edit",
    "last_assistant_time",
    "microcompact",
    "select_cache_deletions",
    "select_count_based",
    "select_time_based",
    "time_based_microcompact",
    "truncate_head_for_ptl_retry",
    "with_cache_edits",
]
