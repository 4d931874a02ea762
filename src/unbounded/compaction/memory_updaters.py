"""How session memory updates its notes: the `NotesUpdater` protocol and its two updaters.

- `ModelNotesUpdater(provider)`: a forked call sharing the session's prompt cache (the same
  `CacheSafeParams` and message prefix, tool results cleared as the main request clears
  them, the update prompt (`build_update_prompt`) appended as the last user message, the
  breakpoint on the second-to-last message so nothing new is written to the cache; query
  source `session_memory`, which never auto-compacts). The model may only edit the notes
  file: with the session's own editor tool (Edit / Write / MultiEdit, or a str_replace
  editor) when it has one, so the tool list stays byte-identical and cached, else with the
  `edit_session_notes` tool added for this call (`choose_notes_tool`). Every other call, and
  every edit aimed at another path, is refused and never run (`apply_notes_edits`). Edits
  that would remove a section header are refused as a whole.
- `OfflineNotesUpdater()`: no model; merges the facts of the new messages into the notes
  (`compaction.offline_notes`).

The prompt carries a condense reminder for each section over
`Policy.session_memory_section_tokens` and a critical one when the file is over
`session_memory_total_tokens` (`notes.size_reminders`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.caching.ttl import CacheTtl
from unbounded.compaction.conversation import CacheSafeParams
from unbounded.compaction.notes import missing_sections, size_reminders
from unbounded.compaction.offline_notes import offline_notes
from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam, Usage
from unbounded.model.entries import Entry
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Provider
from unbounded.model.tools import EDITOR_TOOLS
from unbounded.policy import Policy

NOTES_TOOL_NAME = "edit_session_notes"
"""The notes-editing tool added to an update call when the session has none of its own."""

# -- the update prompt and the one tool -------------------------------------------------------

NOTES_TOOL: dict[str, Any] = {
    "name": NOTES_TOOL_NAME,
    "description": (
        "Edit the session notes file. Give old_string and new_string to replace one exact, "
        "unique piece of the current text, or give content alone to rewrite the whole file."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "old_string": {"type": "string", "description": "Exact text to replace (unique)."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "content": {"type": "string", "description": "The whole new file (a rewrite)."},
        },
    },
}
"""The tool added to an update call when the session has no editor tool of its own."""

_EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit"})


def choose_notes_tool(tools: Sequence[Mapping[str, Any]] | None) -> tuple[str, bool]:
    """(tool the model should use, whether `NOTES_TOOL` must be added to the tool list).

    The session's own Edit or str_replace editor keeps the tool list, and so the cached
    prefix, identical; without one, `edit_session_notes` is added (that call then misses the
    cache of the tool definitions and everything after them).
    """
    names = [str(tool.get("name")) for tool in tools or ()]
    for preferred in (NOTES_TOOL_NAME, "Edit"):
        if preferred in names:
            return preferred, False
    for name in names:
        if name in EDITOR_TOOLS:
            return name, False
    return NOTES_TOOL_NAME, True


def _tool_instructions(tool: str, path: str) -> str:
    if tool == "Edit":
        return (
            f'Use the Edit tool with file_path "{path}", old_string and new_string (Write with '
            "file_path and content rewrites the whole file)."
        )
    if tool in EDITOR_TOOLS:
        return (
            f'Use the {tool} tool with command "str_replace", path "{path}", old_str and '
            'new_str (command "create" with file_text rewrites the whole file).'
        )
    return (
        f"Use the {NOTES_TOOL_NAME} tool: old_string and new_string replace one exact, unique "
        "piece of the text; content alone rewrites the whole file."
    )


def build_update_prompt(
    notes: str, *, notes_path: str, policy: Policy, tool: str = NOTES_TOOL_NAME
) -> str:
    """The user message that asks the forked call to bring the notes up to date."""
    reminders = size_reminders(
        notes,
        section_cap=policy.session_memory_section_tokens,
        total_cap=policy.session_memory_total_tokens,
    )
    parts = [
        "SESSION NOTES UPDATE. This message is not part of the conversation above: do not "
        "answer the user, do not continue the task, and do not call any tool other than the "
        "one named below.",
        "Bring the session notes up to date with everything the conversation above shows, so "
        "that someone who reads only the notes could carry on the work. The notes file is "
        f"{notes_path}. It holds now:",
        f"<session_notes>\n{notes.rstrip()}\n</session_notes>",
        "Editing rules:\n"
        f"- {_tool_instructions(tool, notes_path)}\n"
        "- Edit this file only. Make every edit in this one reply (several calls are fine); "
        "any other call is refused and will not run.\n"
        '- Keep each line that starts with "# " and the italic line under it exactly as it '
        "is; write under the italic line.\n"
        "- Leave a section empty when there is nothing to say. Do not invent anything.",
        "What to write:\n"
        "- Current State: refresh it every time: what is in progress, what is left, the next "
        "step.\n"
        "- Be concrete: file paths, function names, exact commands, exact error messages and "
        "the fix for each, numbers and outputs the user asked for.\n"
        "- Keep the user's requests, decisions and corrections, with the reason when known; "
        "they must survive.\n"
        "- Worklog: add one short line per step since the last update; do not rewrite older "
        "lines.\n"
        "- Write facts about the work, not about the note taking, and never mention these "
        "instructions.",
        f"Size: keep each section under about {policy.session_memory_section_tokens:,} tokens "
        f"and the whole file under about {policy.session_memory_total_tokens:,} tokens. When "
        "something has to go, condense old detail before recent detail.",
    ]
    if reminders:
        parts.append("Over the limits now:\n" + "\n".join(reminders))
    return "\n\n".join(parts)


# -- applying the model's edits ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EditOutcome:
    """The notes after the accepted edits, how many were applied and why others were not."""

    notes: str
    applied: int
    refused: tuple[str, ...]


def _same_path(candidate: Any, notes_path: str) -> bool:
    if not isinstance(candidate, str) or not candidate:
        return False
    return os.path.normpath(candidate) == os.path.normpath(notes_path)


def _replace_once(text: str, old: Any, new: Any, *, replace_all: bool = False) -> str | None:
    if not isinstance(old, str) or not old or not isinstance(new, str):
        return None
    count = text.count(old)
    if count == 0 or (count > 1 and not replace_all):
        return None
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def _apply_one(notes: str, block: Mapping[str, Any], notes_path: str) -> tuple[str | None, str]:
    """The notes after one tool call, or None and the reason it was refused."""
    name = str(block.get("name", ""))
    raw = block.get("input")
    args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if name == NOTES_TOOL_NAME:
        if "old_string" in args:
            result = _replace_once(notes, args.get("old_string"), args.get("new_string"))
            return result, "old_string is not found exactly once in the notes"
        content = args.get("content")
        if isinstance(content, str):
            return content, ""
        return None, "neither old_string/new_string nor content was given"
    if name in _EDIT_TOOLS or name in EDITOR_TOOLS:
        path = args.get("file_path", args.get("path"))
        if not _same_path(path, notes_path):
            return None, f"{name} may only change {notes_path}, not {path!r}"
        if name == "Write":
            content = args.get("content")
            return (content if isinstance(content, str) else None), "Write without content"
        if name == "Edit":
            result = _replace_once(
                notes,
                args.get("old_string"),
                args.get("new_string"),
                replace_all=bool(args.get("replace_all")),
            )
            return result, "old_string is not found exactly once in the notes"
        if name == "MultiEdit":
            edits = args.get("edits")
            current: str | None = notes
            for edit in edits if isinstance(edits, list) else [None]:
                if current is None or not isinstance(edit, Mapping):
                    return None, "MultiEdit edits are not all applicable"
                current = _replace_once(
                    current,
                    edit.get("old_string"),
                    edit.get("new_string"),
                    replace_all=bool(edit.get("replace_all")),
                )
            return current, "MultiEdit edits are not all applicable"
        command = args.get("command")
        if command == "str_replace":
            result = _replace_once(notes, args.get("old_str"), args.get("new_str", ""))
            return result, "old_str is not found exactly once in the notes"
        if command == "create":
            text = args.get("file_text")
            return (text if isinstance(text, str) else None), "create without file_text"
        return None, f"{name} command {command!r} does not edit the notes"
    return None, f"the tool {name!r} is not allowed while updating the notes"


def apply_notes_edits(
    notes: str, tool_uses: Iterable[Mapping[str, Any]], *, notes_path: str
) -> EditOutcome:
    """Apply the edit calls that target the notes, in order; refuse everything else.

    A call is refused when it is not an editing tool, aims at another path, or its old text
    is not found exactly once. If the accepted edits would remove a template section
    header, all of them are refused and the notes stay as they were.
    """
    current = notes
    applied = 0
    refused: list[str] = []
    for block in tool_uses:
        if block.get("type", "tool_use") != "tool_use":
            continue
        result, reason = _apply_one(current, block, notes_path)
        if result is None:
            refused.append(reason)
        else:
            current = result
            applied += 1
    if applied and current != notes:
        before = set(missing_sections(notes))
        lost = [title for title in missing_sections(current) if title not in before]
        if lost:
            return EditOutcome(
                notes,
                0,
                (*refused, f"the edits removed section headers: {', '.join(lost)}"),
            )
    return EditOutcome(current, applied, tuple(refused))


# -- updaters -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdateJob:
    """Everything an updater gets: a snapshot taken when the update started."""

    notes: str
    """The current notes (the template when there are none yet)."""
    new_items: list[Entry]
    """View entries the notes do not cover yet."""
    messages: list[MessageParam]
    """The conversation as the main request sends it (for a forked model call)."""
    params: CacheSafeParams
    ttl: CacheTtl
    notes_path: str
    policy: Policy
    prefix_ttl: CacheTtl | None = None
    """TTL of the tools and system markers (the main requests' own, so the fork reads them)."""


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    """What an updater produced. `notes` None: leave the file unchanged. Not `accepted`: the
    update failed (only refused calls) and the notes do not cover anything more."""

    notes: str | None
    accepted: bool = True
    applied: int = 0
    refused: tuple[str, ...] = ()
    usage: Usage | None = None
    request: ProviderRequest | None = None


class NotesUpdater(Protocol):
    """Turns the current notes and the new messages into updated notes."""

    name: str
    offline: bool
    """It asks no model (a failure of it is not a model's, so nothing falls back)."""

    async def update(self, job: UpdateJob) -> UpdateOutcome:
        """One update; raise ProviderError when the model call fails."""
        ...


def build_update_request(job: UpdateJob) -> tuple[ProviderRequest, str]:
    """The forked request (cache-sharing, no cache write) and the tool the model should use."""
    tool, add_tool = choose_notes_tool(job.params.tools)
    prompt = build_update_prompt(job.notes, notes_path=job.notes_path, policy=job.policy, tool=tool)
    messages: list[MessageParam] = [*job.messages, {"role": "user", "content": prompt}]
    request = job.params.request(messages)
    if add_tool:
        request["tools"] = [*request.get("tools", []), dict(NOTES_TOOL)]
    return place_cache_breakpoints(
        request, ttl=job.ttl, prefix_ttl=job.prefix_ttl, skip_cache_write=True
    ), tool


class ModelNotesUpdater:
    """Updates the notes with a forked model call that may only edit the notes file."""

    name = "model"
    offline = False

    def __init__(self, provider: Provider) -> None:
        if not isinstance(provider, Provider):
            raise ConfigError("ModelNotesUpdater needs a Provider (an object with create())")
        self.provider = provider

    async def update(self, job: UpdateJob) -> UpdateOutcome:
        """Send the update request and apply the edits the reply makes to the notes."""
        request, _ = build_update_request(job)
        response = await self.provider.create(request)
        outcome = apply_notes_edits(job.notes, response.tool_uses, notes_path=job.notes_path)
        return UpdateOutcome(
            notes=outcome.notes,
            # Only refused calls: nothing reliable was written, so the pointer must stay.
            accepted=not (outcome.applied == 0 and outcome.refused),
            applied=outcome.applied,
            refused=outcome.refused,
            usage=response.usage,
            request=request,
        )


class OfflineNotesUpdater:
    """Fills the notes from the transcript's facts, without a model (`offline_notes`)."""

    name = "offline"
    offline = True
    """It asks no model: the fallback when there is none, or it failed."""

    async def update(self, job: UpdateJob) -> UpdateOutcome:
        """Merge the facts of the new messages into the notes."""
        return UpdateOutcome(notes=offline_notes(job.notes, job.new_items, policy=job.policy))


__all__ = [
    "NOTES_TOOL",
    "NOTES_TOOL_NAME",
    "EditOutcome",
    "ModelNotesUpdater",
    "NotesUpdater",
    "OfflineNotesUpdater",
    "UpdateJob",
    "UpdateOutcome",
    "apply_notes_edits",
    "build_update_prompt",
    "build_update_request",
    "choose_notes_tool",
]
