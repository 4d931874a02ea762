"""The offline notes: session-memory notes filled without a model (`offline_notes`).

The facts of the messages the notes do not cover yet (`compaction.facts`, the hand-over of
`compaction.handover`) are merged into the notes deterministically: the user's requests,
files read and edited, commands, errors and what followed them, decisions, final answers, a
worklog line per update. Current State is rewritten from the task state of the new messages,
and keeps the user's standing instructions and latest request verbatim (`compaction.carried`).
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

from unbounded.compaction.carried import (
    carried_latest,
    carried_standing,
    carried_user_messages,
    escape_tags,
    render_latest,
    render_standing,
    standing_instructions,
)
from unbounded.compaction.extractive import command_text, describe_call
from unbounded.compaction.facts import clip, extract_facts, text_of
from unbounded.compaction.handover import Handover, read_handover
from unbounded.compaction.notes import (
    SECTIONS,
    NotesSection,
    condense_lines,
    parse_notes,
    session_memory_template,
)
from unbounded.compaction.prompts import is_previous_summary
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


def _read_delta(items: Sequence[Entry | Mapping[str, Any]]) -> _Delta:
    facts = extract_facts(items)
    delta = _Delta()
    carried: list[str] = []
    for item in items:
        if isinstance(item, Entry):
            summary = text_of(item.content) if item.is_compact_summary else ""
        else:
            text = text_of(item.get("content")) if item.get("role") == "user" else ""
            summary = text if is_previous_summary(text) else ""
        if summary:
            carried.extend(carried_user_messages(summary))
    prompts = [*carried, *(p for p in facts.user_prompts if not is_previous_summary(p))]
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
        head = f"- [{call.name}] {escape_tags(clip(call.failure, LINE_CHARS))}"
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


def handover_state(handover: Handover, previous: str = "") -> list[str]:
    """Current State lines: the task as it stands, from the hand-over of the new messages;
    the standing instructions and the latest request of `previous` (the notes so far) are
    carried when the new messages change nothing about them."""
    rules = standing_instructions(
        [r.text for r in handover.requests], [*carried_standing(previous), *handover.standing]
    )
    lines = render_standing(rules)
    latest = handover.latest_request_text or carried_latest(previous)
    lines.extend(render_latest(latest))
    for asked in handover.request_items:
        lines.append(f"  - asks for: {escape_tags(clip(asked, LINE_CHARS))}")
    task = handover.current_task
    if task is not None:
        title = f" — {escape_tags(clip(task.title, LINE_CHARS))}" if task.title else ""
        lines.append(f"- In progress in the tracker: {task.id}{title}")
    for item in handover.tracker_items:
        if item is not task and item.state != "seen":
            lines.append(f"- Tracker: {item.id} is {item.state}")
    ready = handover.next_ready
    if ready is not None:
        title = f" — {escape_tags(clip(ready.title, LINE_CHARS))}" if ready.title else ""
        lines.append(f"- Next ready in the tracker: {ready.id}{title}")
    open_items = handover.open_todos
    for todo in open_items:
        text = escape_tags(clip(str(todo.get("content") or todo.get("title") or ""), LINE_CHARS))
        lines.append(f"- [{todo.get('status', 'pending')}] {text}")
    done = handover.done_todos
    if done:
        names = "; ".join(clip(str(t.get("content", "")), 80) for t in done)
        lines.append(f"- Done: {escape_tags(names)}")
    last = handover.last_commit
    if last is not None:
        lines.append(f"- Last commit: {last[1].sha} {_quote(last[1].message, LINE_CHARS)}")
        after = handover.written_after(last[0].position)
        if after:
            lines.append("- Changed after it: " + escape_tags(", ".join(after)))
    for check in handover.checks:
        verdict = "failed" if check.call.failed else "passed"
        since = f", {check.writes_after} file change(s) since" if check.writes_after else ""
        lines.append(f"- Last {command_text(check.key)} {verdict}{since}")
    if handover.plan is not None:
        for step in handover.plan.items:
            if step.names_files and not step.changed:
                planned = escape_tags(clip(step.text, LINE_CHARS))
                lines.append(f"- Planned, no file change yet: {planned}")
    for status in handover.status_files[-1:]:  # the project's plan, as last read
        items = "; ".join(clip(item, LINE_CHARS) for item in status.open_items)
        lines.append(f"- Still open in {escape_tags(status.path)}: {escape_tags(items)}")
    request = handover.latest_request
    # An intention stated before the latest request answered an older one: no next step.
    if handover.next_step and (request is None or handover.next_step[0] > request.position):
        lines.append(f"- Next step, as last stated: {_quote(handover.next_step[1], ANSWER_CHARS)}")
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
    messages (the user's standing instructions and latest request, verbatim and carried from
    the notes so far when the new messages hold none, never condensed away; the tracker, the
    todo list, the last commit and what changed after it, the last check runs, the plan's
    items not started, the stated next step, unresolved errors); the title is set once from
    the first request. Text quoted from the conversation has its `<summary>` and
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

    state = handover_state(handover, section("Current State").body_text)
    if not handover.todos:
        state = [*delta.todos, *state]
    if delta.last_was_answer and delta.last_answer:
        state.append(f"- Last answer given: {escape_tags(delta.last_answer)}")
    elif delta.last_call:
        state.append(f"- Last step: {delta.last_call}")
    if state and handover.messages:
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
    folders = _folders(section("Files and Functions").body)
    if folders:
        section("Codebase and System Documentation").body = folders

    cap = max(1, policy.session_memory_section_tokens - 20)
    for name in _ACCUMULATING:
        target = section(name)
        target.body = condense_lines(target.body, cap)
    current = section("Current State")
    # The user's standing instructions and latest request are never condensed away.
    kept = [
        *render_standing(carried_standing(current.body_text)),
        *render_latest(carried_latest(current.body_text)),
    ]
    others = [line for line in current.body if line not in kept]
    room = max(1, cap - rough_token_count("\n".join(kept)))
    current.body = [*kept, *condense_lines(others, room)]
    codebase = section("Codebase and System Documentation")
    codebase.body = condense_lines(codebase.body, cap)
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


__all__ = ["handover_state", "offline_notes"]
