"""Session memory: notes kept up to date while a session runs (seed 004 "Tier 3").

A compaction normally pays for a summary call. Session memory pays for it in small pieces
while the conversation runs: a markdown notes file of ten sections (`SECTIONS`) is updated in
the background, and when the context reaches the auto-compact threshold the notes *are* the
summary (`unbounded.compaction.memory_compact`), so that compaction makes no model call.

Where. `<session folder>/session-memory/summary.md` (`SessionStore.read_memory` /
`write_memory`); a `MemoryStore` keeps it in memory. The pointer to the last message the
notes cover ("updated through") and the update counters are saved as the `session_memory`
state document, so a resumed session knows what the notes cover.

When. `should_update`: tokens added since the covered message >=
`Policy.session_memory_min_tokens_between_updates` (5,000) AND (tool calls since then >=
`session_memory_tool_calls_between_updates` (3) OR the last response made no tool call).
The first update also waits for the context to hold `session_memory_init_tokens` (10,000).
Why these numbers: 5,000 tokens is two to four agent steps of tool output; an update is a
full-context forked call (cheap when it reads the shared cache, never free), so updating
every turn would cost more than the compactions it saves, while updating rarely leaves more
uncovered messages that compaction must keep verbatim. 5,000 is half of the 10,000 tokens a
session-memory compaction keeps anyway, so the uncovered tail normally fits in what is kept.
Three tool calls is one read-edit-check cycle, a unit worth a note; a response without tool
calls ends the agent's turn, a natural moment to write things down even after fewer calls.

How. A `NotesUpdater` turns the current notes and the conversation into new notes:

- `ModelNotesUpdater(provider)`: a forked call sharing the session's prompt cache (the same
  `CacheSafeParams` and message prefix, tool results cleared as the main request clears
  them, the update prompt appended as the last user message, the breakpoint on the
  second-to-last message so nothing new is written to the cache; query source
  `session_memory`, which never auto-compacts). The model may only edit the notes file: with
  the session's own editor tool (Edit / Write / MultiEdit, or a str_replace editor) when it
  has one, so the tool list stays byte-identical and cached, else with the
  `edit_session_notes` tool added for this call. Every other call, and every edit aimed at
  another path, is refused and never run (`apply_notes_edits`). Edits that would remove a
  section header are refused as a whole.
- `OfflineNotesUpdater()`: no model. Fills the notes deterministically from the facts of the
  messages since the last update (`compaction.facts`): the user's requests, files read and
  edited, commands, errors and what followed them, final answers, a worklog line; merged
  into the existing notes and condensed to the caps. This makes session memory, and
  compactions without a summary call, work without an API key (tests, replay).

Caps. Each section should stay under `session_memory_section_tokens` (2,000) and the file
under `session_memory_total_tokens` (12,000). The update prompt carries a condense reminder
for each section over its cap and a critical one when the file is over; the offline updater
condenses by itself (oldest lines first, the first line kept, a count of what went).

`SessionMemory` ties it to a `Session` (`Session(..., extensions=[SessionMemory(...)])` or
`memory.attach(session)`): an update starts in the background (an asyncio task) from
`prepare()` and after a response without tool calls when the trigger holds; compaction waits
for an update in flight up to `session_memory_wait_seconds` (15 s) and then uses the notes as
they are; an update is abandoned after `session_memory_update_timeout_seconds` (60 s). With
`SyncSession` (each call runs its own event loop, which would cancel a background task) use
`SessionMemory(background=False)`: updates then run inside `prepare()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.caching.ttl import CacheTtl
from unbounded.compaction.conversation import CacheSafeParams, CompactionResult
from unbounded.compaction.extractive import escape_tags
from unbounded.compaction.facts import clip, extract_facts, text_of
from unbounded.compaction.handover import PREVIOUS_SUMMARY_PREFIXES, Handover, read_handover
from unbounded.compaction.micro import clear_tool_results
from unbounded.compaction.notes import (
    CONDENSED_LINE,
    QUERY_SOURCE,
    SECTION_TITLES,
    SECTIONS,
    NotesSection,
    ParsedNotes,
    first_message_index,
    missing_sections,
    notes_are_empty,
    parse_notes,
    section_tokens,
    session_memory_template,
    size_reminders,
    truncate_notes_for_compact,
)
from unbounded.errors import ConfigError, ProviderError
from unbounded.events import GenericEvent, emit
from unbounded.model.content import MessageParam, Usage
from unbounded.model.entries import Entry
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Provider
from unbounded.model.tools import (
    EDITOR_TOOLS,
    file_read_path,
    file_write_path,
    shell_command,
)
from unbounded.policy import GUARDED_QUERY_SOURCES, Policy
from unbounded.tokens.estimate import entry_tokens, pad_estimate, rough_token_count

if TYPE_CHECKING:
    from unbounded.session import Session

STATE_NAME = "session_memory"
"""Name of the state document holding the pointer and counters."""
VIRTUAL_NOTES_PATH = "session-memory/summary.md"
"""The path the notes go by when the store keeps them in memory only."""
NOTES_TOOL_NAME = "edit_session_notes"


# -- when to update ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdateProgress:
    """What happened since the last message the notes cover."""

    start: int
    """Index in the view of the first message the notes do not cover."""
    pointer_found: bool
    """Whether the covered message is still in the view (False: nothing is covered)."""
    tokens_since: int
    """Estimated tokens (padded) of the view from `start` on."""
    tool_calls_since: int
    """tool_use blocks in responses from `start` on."""
    last_turn_tool_calls: int | None
    """tool_use blocks of the last response in the view (None: there is none)."""
    last_uuid: str | None
    """The last entry of the view an update started now would cover."""


def _tool_use_count(entry: Entry) -> int:
    content = entry.content
    if entry.type != "assistant" or not isinstance(content, list):
        return 0
    return sum(1 for block in content if block.get("type") == "tool_use")


def progress_since(view: Sequence[Entry], updated_through: str | None) -> UpdateProgress:
    """Tokens and tool calls in the view after the message the notes cover (pure)."""
    floor = first_message_index(view)
    start = floor
    found = False
    if updated_through is not None:
        for index in range(len(view) - 1, floor - 1, -1):
            if view[index].uuid == updated_through:
                start, found = index + 1, True
                break
    raw = 0
    calls = 0
    for entry in view[start:]:
        raw += entry_tokens(entry)
        calls += _tool_use_count(entry)
    last_turn: int | None = None
    last_id: str | None = None
    for entry in reversed(view):
        if entry.type != "assistant" or entry.is_synthetic_api_error:
            continue
        if last_turn is None:
            last_turn, last_id = 0, entry.message_id
        elif entry.message_id is None or entry.message_id != last_id:
            break
        last_turn += _tool_use_count(entry)
        if last_id is None:
            break
    last_uuid = next((e.uuid for e in reversed(view) if e.uuid and e.is_conversation), None)
    return UpdateProgress(
        start=start,
        pointer_found=found,
        tokens_since=pad_estimate(raw),
        tool_calls_since=calls,
        last_turn_tool_calls=last_turn,
        last_uuid=last_uuid,
    )


def should_update(
    progress: UpdateProgress, policy: Policy, *, context_tokens: int, initialized: bool
) -> bool:
    """The update trigger (module docstring): enough new tokens and calls, or a quiet turn."""
    if not policy.session_memory_enabled:
        return False
    if not initialized and context_tokens < policy.session_memory_init_tokens:
        return False
    if progress.tokens_since < policy.session_memory_min_tokens_between_updates:
        return False
    if progress.tool_calls_since >= policy.session_memory_tool_calls_between_updates:
        return True
    return progress.last_turn_tool_calls == 0


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
    return place_cache_breakpoints(request, ttl=job.ttl, skip_cache_write=True), tool


class ModelNotesUpdater:
    """Updates the notes with a forked model call that may only edit the notes file."""

    name = "model"

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

    async def update(self, job: UpdateJob) -> UpdateOutcome:
        """Merge the facts of the new messages into the notes."""
        return UpdateOutcome(notes=offline_notes(job.notes, job.new_items, policy=job.policy))


# -- the offline notes --------------------------------------------------------------------------

PROMPT_CHARS = 300
"""A user request is kept up to this many characters (well above the 80 RETENTION.md probes)."""
LINE_CHARS = 160
"""Commands, errors and other single lines are kept up to this many characters."""
ANSWER_CHARS = 400
"""A final answer is kept up to this many characters."""
TITLE_WORDS = 10

_ACCUMULATING = (
    "Task Specification",
    "Files and Functions",
    "Workflow",
    "Errors & Corrections",
    "Key Results",
    "Worklog",
)


def _describe_call(block: Mapping[str, Any]) -> str:
    name = str(block.get("name", "tool"))
    command = shell_command(block)
    if command:
        return f"{name} `{clip(command, LINE_CHARS)}`"
    path = file_write_path(block) or file_read_path(block)
    if path:
        return f"{name} {path}"
    return name


@dataclass(slots=True)
class _Delta:
    """What the new messages add to each section."""

    prompts: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    edited: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    last_call: str | None = None
    last_answer: str | None = None
    last_was_answer: bool = False


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


_USER_MESSAGES_HEADING = re.compile(r"user messages", re.I)
_LIST_ITEM = re.compile(r"^\s*[-*]\s+(.*\S)\s*$")


def _is_summary_text(text: str) -> bool:
    return text.lstrip().startswith(PREVIOUS_SUMMARY_PREFIXES)


def summary_user_messages(summary: str) -> list[str]:
    """The user messages an earlier compaction summary lists (its "All user messages"
    section or its facts ledger), so chained compactions keep the user's words."""
    found: list[str] = []
    inside = False
    for line in summary.splitlines():
        item = _LIST_ITEM.match(line)
        if inside and item:
            text = item.group(1).strip()
            if len(text) >= 2 and text[0] == text[-1] == '"':
                text = text[1:-1]
            if text and not re.fullmatch(r"\(\d+ more\)", text):
                found.append(text)
            continue
        inside = bool(_USER_MESSAGES_HEADING.search(line)) and not item
    return found


def _read_delta(items: Sequence[Entry | Mapping[str, Any]]) -> _Delta:
    facts = extract_facts(items)
    delta = _Delta()
    carried: list[str] = []
    for item in items:
        if isinstance(item, Entry):
            summary = text_of(item.content) if item.is_compact_summary else ""
        else:
            text = text_of(item.get("content")) if item.get("role") == "user" else ""
            summary = text if _is_summary_text(text) else ""
        if summary:
            carried.extend(summary_user_messages(summary))
    prompts = [*carried, *(p for p in facts.user_prompts if not _is_summary_text(p))]
    delta.prompts = list(dict.fromkeys(f'- "{clip(prompt, PROMPT_CHARS)}"' for prompt in prompts))
    for path in facts.files_modified:
        delta.files.append(f"- `{path}` (edited)")
    for path in facts.files_read:
        delta.files.append(f"- `{path}` (read)")
    delta.edited = list(facts.files_modified)
    for todo in facts.open_todos:
        text = todo.get("content") or todo.get("title") or ""
        delta.todos.append(f"- [{todo.get('status', 'pending')}] {clip(str(text), LINE_CHARS)}")
    delta.commands = [f"- `{clip(command, LINE_CHARS)}`" for command in facts.commands]
    names: dict[str, str] = {}
    pending: list[int] = []
    for item in items:
        role: Any
        content: Any
        if isinstance(item, Entry):
            if item.type not in ("user", "assistant") or item.is_compact_summary:
                continue
            role, content = item.role or item.type, item.content
        else:
            role, content = item.get("role"), item.get("content")
        blocks = _blocks(content)
        if role == "assistant":
            calls = [b for b in blocks if b.get("type") == "tool_use"]
            text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            for call in calls:
                name = str(call.get("name", "tool"))
                names[str(call.get("id", ""))] = name
                delta.calls[name] = delta.calls.get(name, 0) + 1
                described = _describe_call(call)
                delta.last_call = described
                for index in pending:
                    delta.errors[index] += f" → next: {described}"
                pending = []
            if text.strip() and not calls:
                delta.answers.append(f"- {clip(text, ANSWER_CHARS)}")
                delta.last_answer = clip(text, ANSWER_CHARS)
                delta.last_was_answer = True
            elif calls:
                delta.last_was_answer = False
        elif role == "user":
            for block in blocks:
                if block.get("type") == "tool_result" and block.get("is_error"):
                    error = text_of(block.get("content")).strip()
                    if error:
                        tool = names.get(str(block.get("tool_use_id", "")), "tool")
                        pending.append(len(delta.errors))
                        delta.errors.append(f"- [{tool}] {clip(error, LINE_CHARS)}")
    return delta


def _error_lines(handover: Handover) -> list[str]:
    """Errors of the new messages, each marked fixed (by which later call) or not."""
    lines: list[str] = []
    for record in handover.errors:
        call = record.call
        head = f"- [{call.name}] {escape_tags(clip(call.result, LINE_CHARS))}"
        fix = record.resolved_by
        later = (c for c in handover.calls if c.position > call.position)
        following = next((c for c in later if c.path_written or c.command), None)
        if fix is not None:
            head += f" → fixed: {_describe_call(fix.block)} succeeded"
        elif following is not None:
            head += f" → next: {_describe_call(following.block)} (not resolved yet)"
        else:
            head += " → not resolved yet"
        lines.append(head)
    return lines


def _condense(lines: list[str], cap: int) -> list[str]:
    """Drop the oldest lines after the first until the section fits, counting what went."""
    dropped = 0
    kept: list[str] = []
    for line in lines:
        match = CONDENSED_LINE.match(line.strip())
        if match:
            dropped += int(match.group(1))
        else:
            kept.append(line)

    def render() -> list[str]:
        if not dropped or not kept:
            return list(kept)
        plural = "s" if dropped != 1 else ""
        return [kept[0], f"- ({dropped} earlier line{plural} condensed away)", *kept[1:]]

    while len(kept) > 1 and rough_token_count("\n".join(render())) > cap:
        step = max(1, (len(kept) - 1) // 8)
        del kept[1 : 1 + step]
        dropped += step
    return render()


def _merge(existing: list[str], new: list[str]) -> list[str]:
    seen = {line.strip() for line in existing}
    merged = list(existing)
    for line in new:
        if line.strip() not in seen:
            seen.add(line.strip())
            merged.append(line)
    return merged


def _folders(file_lines: Iterable[str]) -> list[str]:
    counts: dict[str, int] = {}
    for line in file_lines:
        match = re.match(r"^- `(.+?)`", line.strip())
        if not match:
            continue
        folder = os.path.dirname(match.group(1)) or "."
        counts[folder] = counts.get(folder, 0) + 1
    return [f"- `{folder}/`: {count} file(s) involved" for folder, count in counts.items()]


NAMES_PREFIX = "- Names in the recent work: "
PATHS_PREFIX = "- Other paths seen recently: "
PATHS_KEPT = 40
"""The Files and Functions line that lists the names the recent work revolves around."""
NAMES_KEPT = 120
"""How many names that line keeps (newest ranking first, then earlier ones)."""


def _as_messages(items: Sequence[Entry | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    from unbounded.model.normalize import MessageNormalizer

    normalizer = MessageNormalizer()
    for item in items:
        if isinstance(item, Entry):
            if not item.is_compact_summary:
                normalizer.append(item)
        else:
            normalizer.append_message(dict(item))
    return list(normalizer.messages)


def _quote(text: str, chars: int = PROMPT_CHARS) -> str:
    return '"' + escape_tags(clip(text, chars)) + '"'


def handover_state(handover: Handover) -> list[str]:
    """Current State lines: the task as it stands, from the hand-over of the new messages."""
    lines: list[str] = []
    latest = handover.latest_request
    if latest is not None:
        lines.append(f"- Latest request: {_quote(latest.text)}")
        for item in handover.request_items:
            lines.append(f"  - asks for: {escape_tags(clip(item, LINE_CHARS))}")
    open_items = handover.todos_with("in_progress", "pending", "open", "todo")
    for todo in open_items:
        text = escape_tags(clip(str(todo.get("content") or todo.get("title") or ""), LINE_CHARS))
        lines.append(f"- [{todo.get('status', 'pending')}] {text}")
    done = handover.todos_with("completed", "done", "complete")
    if done:
        names = "; ".join(clip(str(t.get("content", "")), 80) for t in done)
        lines.append(f"- Done: {escape_tags(names)}")
    for call in handover.tracker[-4:]:
        first = next((line for line in call.result.splitlines() if line.strip()), "")
        command = clip(call.command or "", 100)
        lines.append(f"- Tracker: `{command}` -> {escape_tags(clip(first, 100))}")
    if handover.next_step:
        lines.append(f"- Next step, as last stated: {_quote(handover.next_step, ANSWER_CHARS)}")
    unresolved = handover.unresolved_errors
    if unresolved:
        lines.append(f"- {len(unresolved)} error(s) not resolved yet (see Errors & Corrections)")
    return lines


def offline_notes(
    notes: str | None, items: Sequence[Entry | Mapping[str, Any]], *, policy: Policy
) -> str:
    """The notes with the facts of `items` merged in, condensed to the caps (deterministic).

    `items` are the messages the notes do not cover yet (entries or plain messages). Lists
    grow (requests, files, commands, errors with what followed, decisions, answers, one
    worklog line per update); Current State is rewritten from the task state of the new
    messages (latest request, todo list, tracker, stated next step, unresolved errors); the
    names the recent work revolves around are re-ranked, newest first; the title is set
    once from the first request. Text quoted from the conversation has its `<summary>` and
    `<analysis>` tags escaped.
    """
    parsed = parse_notes(notes if notes and notes.strip() else session_memory_template())
    for name, description in SECTIONS:
        if parsed.get(name) is None:
            parsed.sections.append(NotesSection(name, f"_{description}_"))
    delta = _read_delta(items)
    handover = read_handover(_as_messages(items))

    def section(title: str) -> NotesSection:
        found = parsed.get(title)
        assert found is not None
        return found

    title = section("Session Title")
    if not title.body_text.strip() and delta.prompts:
        words = delta.prompts[0][3:-1].split()
        title.body = [" ".join(words[:TITLE_WORDS]) + (" …" if len(words) > TITLE_WORDS else "")]

    state = handover_state(handover)
    if not handover.todos:
        state = [*delta.todos, *state]
    if delta.last_was_answer and delta.last_answer:
        state.append(f"- Last answer given: {escape_tags(delta.last_answer)}")
    elif delta.last_call:
        state.append(f"- Last step: {delta.last_call}")
    if state:
        section("Current State").body = state

    requests = [f"- {_quote(r.text)}" for r in handover.requests]
    carried = [p for p in delta.prompts if p not in requests and not handover.requests]
    additions = {
        "Task Specification": list(dict.fromkeys([*carried, *requests])) or delta.prompts,
        "Files and Functions": delta.files,
        "Workflow": delta.commands,
        "Errors & Corrections": _error_lines(handover) or delta.errors,
        "Learnings": [f"- {escape_tags(clip(d, ANSWER_CHARS))}" for d in handover.decisions[-6:]],
        "Key Results": [escape_tags(a) for a in delta.answers],
    }
    for name, lines in additions.items():
        if lines:
            target = section(name)
            target.body = _merge(target.body, lines)
    if delta.calls or delta.prompts:
        calls = ", ".join(f"{name} ×{count}" for name, count in delta.calls.items())
        parts = [f"{sum(delta.calls.values())} tool call(s)" + (f" ({calls})" if calls else "")]
        if delta.edited:
            parts.append("edited " + ", ".join(clip(p, LINE_CHARS) for p in delta.edited[:5]))
        if delta.errors:
            parts.append(f"{len(delta.errors)} error(s)")
        if delta.prompts:
            parts.append(f"{len(delta.prompts)} new request(s)")
        worklog = section("Worklog")
        worklog.body = [*worklog.body, "- " + "; ".join(parts)]
    files = section("Files and Functions")
    old: dict[str, list[str]] = {NAMES_PREFIX: [], PATHS_PREFIX: []}
    kept_lines: list[str] = []
    for line in files.body:
        prefix = next((p for p in old if line.startswith(p)), None)
        if prefix is None:
            kept_lines.append(line)
        else:
            old[prefix] = [n.strip() for n in line[len(prefix) :].split(",") if n.strip()]
    for prefix, new, limit in (
        (NAMES_PREFIX, handover.identifiers, NAMES_KEPT),
        (PATHS_PREFIX, handover.recent_paths, PATHS_KEPT),
    ):
        ranked = list(dict.fromkeys([*new, *old[prefix]]))[:limit]
        if ranked:
            kept_lines.append(prefix + escape_tags(", ".join(ranked)))
    files.body = kept_lines
    folders = _folders(section("Files and Functions").body)
    if folders:
        section("Codebase and System Documentation").body = folders

    cap = max(1, policy.session_memory_section_tokens - 20)
    for name in _ACCUMULATING:
        target = section(name)
        target.body = _condense(target.body, cap)
    for other in (section("Current State"), section("Codebase and System Documentation")):
        other.body = _condense(other.body, cap)
    total_cap = policy.session_memory_total_tokens
    text = parsed.render()
    budget = cap
    while rough_token_count(text) > total_cap and budget > 50:
        budget = budget * 3 // 4
        largest = max(_ACCUMULATING, key=lambda n: rough_token_count(section(n).body_text))
        target = section(largest)
        target.body = _condense(target.body, budget)
        text = parsed.render()
    return text


# -- the session glue ---------------------------------------------------------------------------


@dataclass(slots=True)
class _MemoryState:
    """Persisted: the covered message and counters."""

    updated_through: str | None = None
    updates: int = 0
    failures: int = 0
    last_writer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "updated_through": self.updated_through,
            "updates": self.updates,
            "failures": self.failures,
            "last_writer": self.last_writer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _MemoryState:
        state = cls()
        through = data.get("updated_through")
        state.updated_through = through if isinstance(through, str) else None
        for key in ("updates", "failures"):
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(state, key, value)
        writer = data.get("last_writer")
        state.last_writer = writer if isinstance(writer, str) else None
        return state


class SessionMemory:
    """A session's notes: background updates, the compaction waits, post-compact cleanup."""

    def __init__(
        self,
        updater: NotesUpdater | None = None,
        *,
        background: bool = True,
        rehydrate: bool = True,
    ) -> None:
        if updater is not None and not callable(getattr(updater, "update", None)):
            raise ConfigError("SessionMemory updater must have an async update(job) method")
        self.updater: NotesUpdater = updater or OfflineNotesUpdater()
        self.background = background
        self.rehydrate = rehydrate
        self.state = _MemoryState()
        self._task: asyncio.Task[UpdateOutcome | None] | None = None
        self._session: Session | None = None

    # -- wiring ----------------------------------------------------------------------------
    def attach(self, session: Session) -> None:
        """Load the saved pointer and register the listeners and the memory compactor."""
        if self._session is not None and self._session is not session:
            raise ConfigError("a SessionMemory belongs to one session; create one per session")
        self._session = session
        saved = session.store.load_state(STATE_NAME)
        if saved:
            self.state = _MemoryState.from_dict(saved)
        session.prepare_listeners.append(self._on_prepare)
        session.turn_listeners.append(self._on_turn)
        session.compaction_listeners.append(self.after_compaction)
        if session.memory_compactor is None:
            session.memory_compactor = self.compact

    @property
    def updated_through(self) -> str | None:
        """uuid of the last message the notes cover (None: none in the current view)."""
        return self.state.updated_through

    @property
    def in_flight(self) -> bool:
        """Whether an update is running now."""
        return self._live_task() is not None

    def notes_path(self, session: Session) -> str:
        """Where the notes are (a virtual path for a memory store)."""
        return session.store.memory_path or VIRTUAL_NOTES_PATH

    def read(self, session: Session) -> str | None:
        """The notes as stored (None when never written)."""
        return session.store.read_memory()

    def progress(self, session: Session) -> UpdateProgress:
        """What the notes do not cover yet."""
        return progress_since(session.view, self.state.updated_through)

    def _enabled_for(self, session: Session) -> bool:
        return (
            session.policy.session_memory_enabled
            and session.config.query_source not in GUARDED_QUERY_SOURCES
        )

    def should_update(self, session: Session) -> bool:
        """The trigger rule applied to the session now."""
        if not self._enabled_for(session):
            return False
        return should_update(
            self.progress(session),
            session.policy,
            context_tokens=session.status().tokens,
            initialized=self.state.updates > 0 or not notes_are_empty(self.read(session)),
        )

    # -- running updates -------------------------------------------------------------------------
    def _live_task(self) -> asyncio.Task[UpdateOutcome | None] | None:
        task = self._task
        if task is None or task.done():
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return task
        if task.get_loop() is not loop:  # left over from a closed loop (sync facade)
            self._task = None
            return None
        return task

    async def maybe_update(self, session: Session) -> asyncio.Task[UpdateOutcome | None] | None:
        """Start an update when the trigger holds and none is running (inline when not
        `background`). Returns the running task, if any."""
        running = self._live_task()
        if running is not None:
            return running
        if not self.should_update(session):
            return None
        if not self.background:
            await self.update_now(session)
            return None
        self._task = asyncio.ensure_future(self.update_now(session))
        return self._task

    async def _on_prepare(self, session: Session) -> None:
        await self.maybe_update(session)

    def _on_turn(self, session: Session, entry: Entry) -> None:
        # A response without tool calls ends the agent's turn: a good moment for notes.
        # With tool calls the results are still to come (a request now would be invalid);
        # prepare() picks it up once they are there.
        if not self.background or _tool_use_count(entry) > 0:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._live_task() is None and self.should_update(session):
            self._task = asyncio.ensure_future(self.update_now(session))

    async def wait_for_update(self, timeout: float) -> bool:
        """Wait for an update in flight, at most `timeout` seconds; True when none is left."""
        task = self._live_task()
        if task is None:
            return True
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)

    async def update_now(self, session: Session) -> UpdateOutcome | None:
        """Run one update now, whatever the trigger says; None when it failed or timed out."""
        policy = session.policy
        view = list(session.view)
        progress = progress_since(view, self.state.updated_through)
        current = self.read(session)
        notes = current if current and current.strip() else session_memory_template()
        messages, _ = clear_tool_results(session.messages, session.micro.cleared_ids)
        job = UpdateJob(
            notes=notes,
            new_items=view[progress.start :],
            messages=messages,
            params=session.cache_safe_params(),
            ttl=session.ttl_latch.ttl_for(session.config.query_source),
            notes_path=self.notes_path(session),
            policy=policy,
        )
        sink = session.events_sink()
        try:
            outcome = await asyncio.wait_for(
                self.updater.update(job), timeout=policy.session_memory_update_timeout_seconds
            )
        except (asyncio.TimeoutError, ProviderError) as error:
            reason = "timeout" if isinstance(error, asyncio.TimeoutError) else str(error)
            self._failed(session, reason)
            return None
        if not outcome.accepted:
            self._failed(session, "; ".join(outcome.refused) or "no acceptable edit")
            return None
        if outcome.notes is not None and outcome.notes != current:
            session.write_notes(outcome.notes)
        self.state.updated_through = progress.last_uuid
        self.state.updates += 1
        self.state.last_writer = self.updater.name
        self._save(session)
        emit(
            sink,
            GenericEvent(
                "session_memory_updated",
                {
                    "updater": self.updater.name,
                    "through": progress.last_uuid,
                    "applied": outcome.applied,
                    "refused": list(outcome.refused),
                    "tokens": rough_token_count(outcome.notes or notes),
                },
            ),
        )
        return outcome

    def _failed(self, session: Session, reason: str) -> None:
        self.state.failures += 1
        self._save(session)
        event = GenericEvent("session_memory_update_failed", {"reason": reason})
        emit(session.events_sink(), event)

    def _save(self, session: Session) -> None:
        session.store.save_state(STATE_NAME, self.state.to_dict())

    # -- compaction ------------------------------------------------------------------------------
    async def compact(
        self, session: Session, /, *, max_post_tokens: int | None = None
    ) -> CompactionResult | None:
        """Session-memory compaction (the session's `memory_compactor`)."""
        from unbounded.compaction.memory_compact import try_session_memory_compaction

        if not self._enabled_for(session):
            return None
        return await try_session_memory_compaction(
            session.compaction_context(), self, max_post_tokens=max_post_tokens
        )

    def after_compaction(self, session: Session, result: CompactionResult) -> None:
        """Post-compact cleanup of the pointer: keep it when the message it names is still in
        the view; after a session-memory compaction the notes cover everything the summary
        replaced; after a summary call they cover nothing of the new view yet."""
        through = self.state.updated_through
        if through is not None and any(e.uuid == through for e in session.view):
            return
        if result.summarizer == QUERY_SOURCE and result.summary_messages:
            self.state.updated_through = result.summary_messages[-1].uuid
        else:
            self.state.updated_through = None
        self._save(session)

    async def aclose(self) -> None:
        """Cancel an update still running (when the session is done)."""
        task = self._live_task()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


__all__ = [
    "NOTES_TOOL",
    "NOTES_TOOL_NAME",
    "QUERY_SOURCE",
    "SECTIONS",
    "SECTION_TITLES",
    "EditOutcome",
    "ModelNotesUpdater",
    "NotesSection",
    "NotesUpdater",
    "OfflineNotesUpdater",
    "ParsedNotes",
    "SessionMemory",
    "UpdateJob",
    "UpdateOutcome",
    "UpdateProgress",
    "apply_notes_edits",
    "build_update_prompt",
    "build_update_request",
    "choose_notes_tool",
    "missing_sections",
    "notes_are_empty",
    "offline_notes",
    "parse_notes",
    "progress_since",
    "section_tokens",
    "session_memory_template",
    "should_update",
    "size_reminders",
    "summary_user_messages",
    "truncate_notes_for_compact",
]
