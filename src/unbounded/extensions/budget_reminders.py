"""Context-budget reminders the model sees at stated marks.

`BudgetReminders` appends a short note when the context passes one of
`Policy.budget_reminder_marks` (shares of the auto-compact threshold; default 50 %, 75 %,
90 %), once per mark until the next compaction, so the model can wrap up a subtask, or call
`compact_context`, before the window decides for it. The note is a new user record after
the last one: the cached prefix is never rewritten. It waits for a turn that ends with a
user record (a reply still being answered is left alone). `Policy.budget_reminders_enabled`
switches it. The highest mark announced is kept in the session's state (`STATE_KEY`), so a
resumed session does not remind again of a mark it already gave.
"""

from __future__ import annotations

from typing import Any

from unbounded.compaction.conversation import CompactionResult
from unbounded.extension import Extension, ExtensionHost
from unbounded.model.entries import Entry

REMINDER = (
    "<system-reminder>Context budget: {share:.0%} of the room before this conversation is "
    "compacted is used ({tokens:,} of {threshold:,} tokens; {left:,} left). Finish the "
    "current step and keep notes of what must survive a summary.</system-reminder>"
)


STATE_KEY = "budget_reminders"
"""The extension's name in the session's saved state."""


def reminder_text(tokens: int, threshold: int) -> str:
    """The note for `tokens` used of an auto-compact `threshold`."""
    return REMINDER.format(
        share=tokens / threshold if threshold else 1.0,
        tokens=tokens,
        threshold=threshold,
        left=max(0, threshold - tokens),
    )


class BudgetReminders(Extension):
    """Appends a context-budget note at each mark passed (module docstring)."""

    def __init__(self) -> None:
        self.announced = 0.0
        """The highest mark announced since the last compaction (0: none)."""
        self._saved: dict[str, Any] = {}

    def attached(self, session: ExtensionHost) -> None:
        """Take up the marks a resumed session already announced."""
        self._saved = session.extension_state(STATE_KEY)
        announced = self._saved.get("announced")
        if isinstance(announced, (int, float)) and not isinstance(announced, bool):
            self.announced = float(announced)

    def _announce(self, mark: float) -> None:
        self.announced = mark
        self._saved.clear()
        if mark:
            self._saved["announced"] = mark

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Note the highest mark passed and not yet announced."""
        policy = session.policy
        if not policy.budget_reminders_enabled:
            return
        threshold = session.thresholds.autocompact
        tokens = session.status().tokens
        if threshold <= 0:
            return
        share = tokens / threshold
        passed = [m for m in policy.budget_reminder_marks if m <= share and m > self.announced]
        view = session.view
        if not passed or not view or view[-1].type != "user":
            return
        self._announce(passed[-1])
        session.append([Entry.user(reminder_text(tokens, threshold), is_meta=True)])

    def after_compact(self, session: ExtensionHost, result: CompactionResult) -> None:
        """Start the marks over."""
        self._announce(0.0)


__all__ = ["REMINDER", "STATE_KEY", "BudgetReminders", "reminder_text"]
