"""The offline notes: session-memory notes filled without a model (`offline_notes`).

The facts of the messages the notes do not cover yet (`compaction.facts`, the hand-over of
`compaction.handover`) are merged into the notes deterministically: the user's requests,
files read and edited, commands, errors and what followed them, decisions, final answers, a
worklog line per update. Current State is rewritten from the task state of the new messages.
Each section is then condensed to `Policy.session_memory_section_tokens` and the file to
`session_memory_total_tokens` (oldest lines first, the first line kept, a count of what
went). This makes session memory, and compactions without a summary call, work without an
API key (tests, replay); `OfflineNotesUpdater` in `memory_updaters` runs it as an update.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.extractive import describe_call, escape_tags
from unbounded.compaction.facts import clip, extract_facts, text_of
from unbounded.compaction.handover import PREVIOUS_SUMMARY_PREFIXES, Handover, read_handover
from unbounded.compaction.notes import (
    SECTIONS,
    NotesSection,
    condense_lines,
    parse_notes,
    session_memory_template,
)
from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer
from unbounded.policy import Policy
from unbounded.tokens.estimate import rough_token_count

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
                described = describe_call(call, LINE_CHARS)
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
            head += f" → fixed: {describe_call(fix.block, LINE_CHARS)} succeeded"
        elif following is not None:
            head += f" → next: {describe_call(following.block, LINE_CHARS)} (not resolved yet)"
        else:
            head += " → not resolved yet"
        lines.append(head)
    return lines


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
"""The Files and Functions line that lists the names the recent work revolves around."""
PATHS_KEPT = 40
"""How many recent paths the paths line keeps."""
NAMES_KEPT = 120
"""How many names the names line keeps (newest ranking first, then earlier ones)."""


def _as_messages(items: Sequence[Entry | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
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
        target.body = condense_lines(target.body, cap)
    for other in (section("Current State"), section("Codebase and System Documentation")):
        other.body = condense_lines(other.body, cap)
    total_cap = policy.session_memory_total_tokens
    text = parsed.render()
    budget = cap
    while rough_token_count(text) > total_cap and budget > 50:
        budget = budget * 3 // 4
        largest = max(_ACCUMULATING, key=lambda n: rough_token_count(section(n).body_text))
        target = section(largest)
        target.body = condense_lines(target.body, budget)
        text = parsed.render()
    return text


__all__ = ["handover_state", "offline_notes", "summary_user_messages"]
