"""A tool the model may call to compact its own context, with an optional focus.

`CompactionTool` offers `compact_context` once the context passes
`Policy.compaction_tool_share` of the auto-compact threshold (`Policy.compaction_tool_enabled`
switches it), and keeps offering it until the next compaction, so the tool list changes
twice per compaction at most (each change writes the tools and system prompt to the cache
once). A call is answered by the session itself, like `recall`: inside the turn when the
driver answers the session's tools (the Anthropic drop-in, `TurnOptions.recall_rounds`),
else by the caller with `Session.answer_tool`. The result says the context will be
compacted; the next `prepare()` compacts (a manual compaction) with the focus in the
summary prompt's instructions, and puts the focus, verbatim, in a note right after the
summary, so it survives whatever the summary kept. A failed compaction is logged and the
turn goes on (the automatic compaction still guards the window).

Whether the tool is offered, and the focuses of calls answered but not yet compacted, are
kept in the session's state (`STATE_KEY`): a resumed session offers the tool as it did
before (the tool list, and so the cache, unchanged) and still runs a compaction it promised.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from unbounded.compaction.conversation import CompactionResult
from unbounded.errors import CompactionError, ProviderError
from unbounded.extension import Extension, ExtensionHost
from unbounded.model.entries import Entry

logger = logging.getLogger(__name__)

COMPACTION_TOOL_NAME = "compact_context"
FOCUS_MAX_CHARS = 2_000
"""A focus is cut to this many characters (it goes into a prompt and a note)."""
FOCUS_INSTRUCTIONS = (
    "The agent asked for this compaction itself. Keep in particular, naming things exactly "
    "as the conversation does: {focus}"
)
PLAIN_INSTRUCTIONS = "The agent asked for this compaction itself, at a natural break in its work."
FOCUS_NOTE = "Focus the agent asked this compaction to keep: {focus}"
STATE_KEY = "compaction_tool"
"""The extension's name in the session's saved state."""


def compaction_tool_schema() -> dict[str, Any]:
    """The `compact_context` tool as the Messages API declares tools."""
    return {
        "name": COMPACTION_TOOL_NAME,
        "description": (
            "Replace the conversation so far with a structured summary to free context, then "
            "go on from the summary. Use it at a natural break (a subtask done, before a new "
            "phase), not in the middle of an edit. Optionally say what the summary must keep."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "focus": {
                    "type": "string",
                    "description": (
                        "What the summary must keep in particular, e.g. 'the failing test "
                        "names and the fix plan'."
                    ),
                }
            },
            "additionalProperties": False,
        },
    }


def _focus(tool_use: Mapping[str, Any]) -> str | None:
    """The call's focus (None: none given); ValueError saying what to fix when it is no text."""
    arguments = tool_use.get("input")
    if not isinstance(arguments, Mapping):
        raise ValueError("the input must be an object, e.g. {\"focus\": \"the failing tests\"}")
    focus = arguments.get("focus")
    if focus is None:
        return None
    if not isinstance(focus, str):
        raise ValueError("focus must be a string, e.g. \"the failing test names\"")
    focus = " ".join(focus.split())[:FOCUS_MAX_CHARS]
    return focus or None


class CompactionTool(Extension):
    """Offers `compact_context` above a share of the threshold and compacts when it is called
    (module docstring)."""

    def __init__(self) -> None:
        self._offered = False
        self._due: list[str | None] = []  # focuses of calls answered, compacted at the next prepare
        self._note: str | None = None
        self._saved: dict[str, Any] = {}

    def attached(self, session: ExtensionHost) -> None:
        """Take up where a resumed session left off (offered or not, compactions promised)."""
        self._saved = session.extension_state(STATE_KEY)
        self._offered = self._saved.get("offered") is True
        due = self._saved.get("due")
        if isinstance(due, list):
            self._due = [focus if isinstance(focus, str) else None for focus in due]

    def _save(self) -> None:
        """Keep the offer and the promised compactions in the session's state."""
        self._saved.clear()
        if self._offered:
            self._saved["offered"] = True
        if self._due:
            self._saved["due"] = list(self._due)

    def _reached(self, session: ExtensionHost) -> bool:
        policy = session.policy
        if not (policy.compaction_tool_enabled and policy.compact_enabled):
            return False
        mark = policy.compaction_tool_share * session.thresholds.autocompact
        return session.status().tokens >= mark

    def tools_state(self, session: ExtensionHost) -> object:
        """Whether the tool is offered: from the share on, until the next compaction."""
        if not self._offered and self._reached(session):
            self._offered = True
            self._save()
        return self._offered

    def tools_offered(
        self, session: ExtensionHost, tools: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The tools, with `compact_context` while it is offered."""
        return [*tools, compaction_tool_schema()] if self._offered else tools

    def answers_tool(self, session: ExtensionHost, name: str) -> bool:
        """Calls of `compact_context` while it is offered."""
        return name == COMPACTION_TOOL_NAME and self._offered

    async def answer_tool(
        self, session: ExtensionHost, tool_use: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The result of a call (the compaction itself runs at the next prepare)."""
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use.get("id")}
        try:
            focus = _focus(tool_use)
        except ValueError as problem:
            return {**result, "is_error": True, "content": f"compact_context: {problem}"}
        self._due.append(focus)
        self._save()
        kept = f"; the summary will keep: {focus}" if focus else ""
        return {**result, "content": f"The context will be compacted before your next turn{kept}."}

    async def before_prepare(self, session: ExtensionHost) -> None:
        """Compact when the model asked for it (the focuses of its calls, in order)."""
        if not self._due:
            return
        focuses = [f for f in self._due if f]
        self._due = []
        focus = "; ".join(focuses) or None
        self._save()
        instructions = FOCUS_INSTRUCTIONS.format(focus=focus) if focus else PLAIN_INSTRUCTIONS
        self._note = focus
        try:
            await session.compact(instructions=instructions)
        except (CompactionError, ProviderError) as error:
            self._note = None
            logger.warning("the compaction the model asked for failed (%s): going on", error)

    def after_compact(self, session: ExtensionHost, result: CompactionResult) -> None:
        """Stop offering the tool until the share is passed again; note the focus kept."""
        self._offered = False
        self._save()
        note, self._note = self._note, None
        if note:
            session.append([Entry.user(FOCUS_NOTE.format(focus=note), is_meta=True)])


__all__ = [
    "COMPACTION_TOOL_NAME",
    "STATE_KEY",
    "CompactionTool",
    "compaction_tool_schema",
]
