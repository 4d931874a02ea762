"""Compaction: microcompaction, full and partial compaction, provider-native context editing.

Microcompaction (docs/microcompaction.md): `tools_registry` (which tools' results may be
cleared), `ledger` (tool calls registered turn by turn), `micro` (count-based and time-based
tiers, the per-turn `microcompact` and its state), `cached_micro` (cache-edit deletions),
`state_store` (atomic persistence) and `context_editing` (Anthropic `context_management`).
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
from unbounded.compaction.context_editing import (
    COMPACT_BETA,
    CONTEXT_MANAGEMENT_BETA,
    AppliedEdit,
    ClearThinking,
    ClearToolUses,
    Compact,
    ContextManagement,
    ContextManagementBuilder,
    InputTokens,
    ThinkingTurns,
    ToolUses,
    applied_edits,
    applied_edits_from_events,
    seed_context_management,
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
from unbounded.compaction.state_store import (
    MicrocompactStateStore,
    load_microcompact_state,
    save_microcompact_state,
)
from unbounded.compaction.tools_registry import (
    CLEARED_TOOL_RESULT,
    DEFAULT_COMPACTABLE_TOOLS,
    CompactableTools,
)
from unbounded.fileio import atomic_write_json

__all__ = [
    "CLEARED_TOOL_RESULT",
    "COMPACT_BETA",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_COMPACTABLE_TOOLS",
    "AppliedEdit",
    "CacheSafeParams",
    "CachedMicrocompactState",
    "ClearThinking",
    "ClearToolUses",
    "Compact",
    "CompactableTools",
    "CompactionResult",
    "ContextManagement",
    "ContextManagementBuilder",
    "InputTokens",
    "MicrocompactResult",
    "MicrocompactState",
    "MicrocompactStateStore",
    "MicrocompactStats",
    "ThinkingTurns",
    "ToolLedger",
    "ToolRecord",
    "ToolUses",
    "applied_edits",
    "applied_edits_from_events",
    "atomic_write_json",
    "cache_expired",
    "cache_is_cold",
    "cached_microcompact",
    "clear_tool_results",
    "compact_conversation",
    "count_based_microcompact",
    "delete_edit",
    "last_assistant_time",
    "load_microcompact_state",
    "microcompact",
    "save_microcompact_state",
    "seed_context_management",
    "select_cache_deletions",
    "select_count_based",
    "select_time_based",
    "time_based_microcompact",
    "truncate_head_for_ptl_retry",
    "with_cache_edits",
]
