"""Session extensions: what plugs into a `Session` through the hooks of `Extension`.

- `session_memory.SessionMemory`: notes kept up to date while the session runs, used as the
  summary of a compaction that needs no model call.
- `instructions.NestedMemory`: instruction files (`CLAUDE.md`, `AGENTS.md`) attached along the
  paths the agent reads, and attached again after each compaction.
- `compaction_tool.CompactionTool`: a `compact_context` tool the model may call, with a
  focus the summary keeps, offered above a share of the auto-compact threshold.
- `budget_reminders.BudgetReminders`: context-budget notes the model sees at stated marks.
- `subagents`: child sessions forked from a parent, sharing its prompt cache
  (`fork_subagent`, `resume_subagent`); they take extensions of their own.

Write one by subclassing `Extension` and overriding the hooks you need (docs/session.md,
"Extensions").
"""

from unbounded.extension import Extension
from unbounded.extensions.budget_reminders import BudgetReminders
from unbounded.extensions.compaction_tool import CompactionTool
from unbounded.extensions.instructions import NestedMemory
from unbounded.extensions.session_memory import SessionMemory
from unbounded.extensions.subagents import (
    ContinuationSummarizer,
    fork_subagent,
    resume_subagent,
    subagent_result,
)

__all__ = [
    "BudgetReminders",
    "CompactionTool",
    "ContinuationSummarizer",
    "Extension",
    "NestedMemory",
    "SessionMemory",
    "fork_subagent",
    "resume_subagent",
    "subagent_result",
]
