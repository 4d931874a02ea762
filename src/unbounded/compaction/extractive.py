"""The offline summary: the nine sections, written from a hand-over read without a model.

`extractive_summary(messages)` turns `read_handover(messages)` into the summary text the
next context starts with, under the nine headings the summary prompt asks a model for, so
an agent reads both the same way:

1. Primary Request and Intent: the first request, the latest one (a slash command with its
   arguments, never its expanded template), and the items the latest one lists.
2. Key Technical Concepts: languages, tools used, and the names the recent work revolves
   around (most recent and frequent first).
3. Files and Code Sections: files modified (with the last change of the most recent ones),
   files read, files mentioned but not opened yet, other paths seen recently.
4. Errors and fixes: errors still unresolved first, with the action that followed; then
   errors a later call fixed, with that call.
5. Problem Solving: decisions and their reasons in the assistant's words, every command run,
   task-tracker commands with the first line of their output.
6. All user messages: every request, verbatim up to a length; background notifications
   listed apart, as events.
7. Pending Tasks: the todo list as the agent last left it, and what the latest request lists.
8. Current Work: the last assistant message, what it reported done since the latest request,
   the last tool calls and their outcome.
9. Optional Next Step: the next step as the agent last stated it, the task in progress, and
   the latest request verbatim.

The text is final: it carries no `<summary>` tags and goes through no tag parser, and any
`<summary>` / `<analysis>` text quoted from the conversation (a task notification holds
one) is escaped, so nothing downstream can mistake a quote for the end of the summary.

Size. The summary aims at `target_ratio` (5 %) of the conversation's tokens, at least
`min_tokens` (1,000; never more than the conversation) or 1,500 tokens for a conversation
over 6,000 (the most the compaction guard asks of a summary), at most `max_tokens` (8,000),
and never below what the facts need. It renders at a ladder of levels, from rich (long quotes,
code excerpts, many names) to lean, and keeps the first that fits; past the lean level the
longest fact lists are cut with "(N more)" markers. Token counts are length / 4.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from unbounded.compaction.facts import (
    PROMPT_SCORE_CHARS,
    clip,
    normalize_text,
    shown_items,
)
from unbounded.compaction.handover import Call, ErrorRecord, Handover, read_handover
from unbounded.compaction.summary_guard import FLOOR_MAX_TOKENS
from unbounded.model.tools import file_read_path, file_write_path, shell_command
from unbounded.model.user_messages import notification_summary
from unbounded.tokens.estimate import rough_token_count

DEFAULT_MAX_SUMMARY_TOKENS = 8_000
"""Hard cap of the summary, in rough tokens."""
DEFAULT_TARGET_RATIO = 0.05
"""The summary aims at this share of the conversation's tokens."""
DEFAULT_MIN_SUMMARY_TOKENS = 1_000
"""Short conversations may use up to this many tokens (never more than the conversation)."""
SUMMARY_HEADER = "Summary:"

_TAGS = re.compile(r"<(/?)(summary|analysis)>", re.I)
_LANGUAGES: dict[str, str] = {
    ".py": "Python", ".pyi": "Python", ".ipynb": "Jupyter notebooks", ".js": "JavaScript",
    ".mjs": "JavaScript", ".cjs": "JavaScript", ".jsx": "JavaScript (JSX)",
    ".ts": "TypeScript", ".tsx": "TypeScript (TSX)", ".ex": "Elixir", ".exs": "Elixir",
    ".heex": "HEEx templates", ".erl": "Erlang", ".go": "Go", ".rs": "Rust", ".java": "Java",
    ".kt": "Kotlin", ".scala": "Scala", ".rb": "Ruby", ".php": "PHP", ".c": "C",
    ".h": "C/C++ headers", ".cc": "C++", ".cpp": "C++", ".hpp": "C++", ".cs": "C#",
    ".swift": "Swift", ".sh": "shell scripts", ".bash": "shell scripts", ".sql": "SQL",
    ".html": "HTML", ".css": "CSS", ".scss": "SCSS", ".vue": "Vue", ".svelte": "Svelte",
    ".md": "Markdown", ".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".toml": "TOML",
    ".tf": "Terraform", ".lua": "Lua", ".dart": "Dart", ".zig": "Zig",
}  # fmt: skip


def escape_tags(text: str) -> str:
    """`text` with `<summary>`, `</summary>`, `<analysis>`, `</analysis>` made inert."""
    return _TAGS.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}&gt;", text)


def _quote(text: str, chars: int) -> str:
    return '"' + escape_tags(clip(text, max(chars, PROMPT_SCORE_CHARS))) + '"'


def _line(text: str, chars: int) -> str:
    return escape_tags(clip(text, chars))


@dataclass(frozen=True, slots=True)
class _Level:
    """How much of each section one rendering shows."""

    request_chars: int
    prompt_chars: int
    excerpt_files: int
    excerpt_lines: int
    excerpt_chars: int
    error_chars: int
    command_chars: int
    decisions: int
    decision_chars: int
    current_chars: int
    done: int
    last_calls: int
    identifiers: int
    paths: int
    previous_chars: int
    todo_chars: int
    tracker: int
    noted_commands: int
    error_actions: bool = True


_LEVELS: tuple[_Level, ...] = (
    _Level(1_200, 400, 5, 15, 900, 300, 80, 8, 300, 1_500, 6, 8, 260, 60, 2_000, 200, 10, 20),
    _Level(800, 300, 3, 10, 600, 200, 80, 6, 260, 1_000, 5, 6, 220, 50, 1_200, 160, 8, 18),
    _Level(500, 220, 2, 8, 400, 160, 80, 5, 220, 600, 4, 5, 180, 40, 800, 140, 6, 16),
    _Level(300, 160, 1, 6, 300, 120, 80, 4, 200, 400, 3, 4, 140, 30, 400, 120, 5, 14),
    _Level(200, 110, 0, 0, 0, 100, 80, 3, 160, 250, 2, 3, 100, 25, 200, 100, 4, 12),
    _Level(120, PROMPT_SCORE_CHARS, 0, 0, 0, 60, 44, 2, 140, 150, 2, 2, 70, 20, 0, 80, 3, 10),
)
"""From rich to lean; the lean level keeps what retention scores and the task state."""


@dataclass(frozen=True, slots=True)
class _Cuts:
    """How many items of the long lists to show when even the lean level is too long."""

    prompts: int | None = None
    commands: int | None = None
    read: int | None = None
    modified: int | None = None
    errors: int | None = None


def _limit(items: Sequence[str], keep: int | None) -> list[str]:
    return list(items) if keep is None else shown_items(items, keep)


def _extension(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return "." + name.rsplit(".", 1)[-1] if "." in name.lstrip(".") else ""


def describe_call(block: Mapping[str, Any], chars: int = 80) -> str:
    """A tool call in one line: its name and the file it writes or reads, else its command
    (up to `chars`), else the first telling input (a description, pattern, query, URL...).
    Shared by the offline summary and the offline session notes."""
    name = str(block.get("name", "tool"))
    written = file_write_path(block)
    if written:
        return f"{name} {written}"
    read = file_read_path(block)
    if read:
        return f"{name} {read}"
    command = shell_command(block)
    if command:
        return f"{name}: `{_line(command, chars)}`"
    tool_input = block.get("input")
    if isinstance(tool_input, Mapping):
        for key in ("description", "pattern", "query", "url", "prompt", "skill", "path"):
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return f"{name}: {_line(value, 60)}"
    return name


def _outcome(call: Call) -> str:
    if call.is_error is None:
        return "no result recorded"
    if call.is_error:
        return "error: " + _line(call.result, 120)
    first = next((line for line in call.result.splitlines() if line.strip()), "")
    return "ok" + (f" ({_line(first, 80)})" if first and call.command else "")


def _todo(item: Mapping[str, Any], chars: int) -> str:
    text = item.get("content") or item.get("title") or item.get("description") or ""
    return f"[{item.get('status', 'pending')}] {_line(str(text), chars)}"


def _edit_excerpt(block: Mapping[str, Any]) -> str:
    tool_input = block.get("input")
    if not isinstance(tool_input, Mapping):
        return ""
    edits = tool_input.get("edits")
    if isinstance(edits, list) and edits and isinstance(edits[-1], Mapping):
        tool_input = edits[-1]
    for key in ("new_string", "content", "new_source", "new_str", "file_text", "text"):
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _excerpt_lines(text: str, max_lines: int, max_chars: int) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    shown: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        if used + len(line) > max_chars:
            break
        shown.append(escape_tags(line))
        used += len(line) + 1
    if len(shown) < len(lines):
        shown.append(f"… ({len(lines) - len(shown)} more lines)")
    return shown


_SECTION_6 = re.compile(r"^\s*6\.\s*All user messages\s*:?\s*$", re.I | re.M)
_NEXT_SECTION = re.compile(r"^\s*7\.\s", re.M)


def _previous_user_lines(summary: str) -> list[str]:
    """The "All user messages" lines of an earlier summary (any summarizer's)."""
    match = _SECTION_6.search(summary)
    if not match:
        return []
    rest = summary[match.end() :]
    end = _NEXT_SECTION.search(rest)
    block = rest[: end.start()] if end else rest
    lines = []
    for line in block.splitlines():
        stripped = line.strip()
        if stripped.startswith(("-", "*")) or re.match(r"^\d+[.)]\s", stripped):
            lines.append(stripped.lstrip("-* ").strip())
    return [line for line in lines if line and not line.endswith(":")]


def _summary_body(summary: str) -> str:
    index = summary.find(SUMMARY_HEADER)
    return summary[index + len(SUMMARY_HEADER) :] if index >= 0 else summary


class _Renderer:
    """Writes the nine sections from a hand-over at a given level."""

    def __init__(self, handover: Handover, *, up_to: bool) -> None:
        self.h = handover
        self.up_to = up_to
        self.previous_lines: list[str] = []
        for summary in handover.previous_summaries:
            self.previous_lines.extend(_previous_user_lines(summary))
        self.errors = self._distinct_errors()

    def _distinct_errors(self) -> list[ErrorRecord]:
        """One record per error text, the latest occurrence deciding whether it is open."""
        latest: dict[str, ErrorRecord] = {}
        for record in self.h.errors:
            key = normalize_text(record.call.result)
            if key:
                latest.pop(key, None)
                latest[key] = record
        return list(latest.values())

    def _distinct_requests(self) -> list[str]:
        seen: set[str] = set()
        texts: list[str] = []
        for request in self.h.requests:
            key = normalize_text(request.text)
            if key not in seen:
                seen.add(key)
                texts.append(request.text)
        return texts

    # -- sections ------------------------------------------------------------------------
    def primary(self, level: _Level) -> list[str]:
        lines: list[str] = []
        if self.h.previous_summaries and level.previous_chars:
            body = _summary_body(self.h.previous_summaries[-1])
            lines.append(
                "   Earlier context (from the previous summary, abridged): "
                + _line(body, level.previous_chars)
            )
        requests = self.h.requests
        if not requests:
            lines.append("   No user request is recorded in this part of the conversation.")
            return lines
        first = _quote(requests[0].text, level.request_chars)
        lines.append("   The user's first request: " + first)
        if len(requests) > 2:
            lines.append(f"   {len(requests) - 2} further request(s) are listed in section 6.")
        if len(requests) > 1:
            lines.append(
                "   The latest request (what the work is for now): "
                + _quote(requests[-1].text, level.request_chars)
            )
        if self.h.request_items:
            lines.append("   It asks for these items:")
            lines.extend(f"   - {_line(item, 200)}" for item in self.h.request_items)
        return lines

    def concepts(self, level: _Level) -> list[str]:
        lines: list[str] = []
        counts: Counter[str] = Counter()
        for path in (*self.h.facts.files_modified, *self.h.facts.files_read):
            language = _LANGUAGES.get(_extension(path))
            if language:
                counts[language] += 1
        if counts:
            lines.append("   - Languages: " + ", ".join(n for n, _ in counts.most_common()))
        if self.h.facts.tool_counts:
            tools = ", ".join(
                f"{name} ×{count}" if count > 1 else name
                for name, count in self.h.facts.tool_counts
            )
            lines.append("   - Tools used: " + tools)
        names = self.h.identifiers[: level.identifiers]
        if names:
            lines.append(
                "   - Names in the recent work (most recent and frequent first): "
                + escape_tags(", ".join(names))
            )
        return lines or ["   - None recorded."]

    def files(self, level: _Level, cuts: _Cuts) -> list[str]:
        facts = self.h.facts
        lines: list[str] = []
        if facts.files_modified:
            tools_by_path: dict[str, list[str]] = {}
            last_edit: dict[str, Call] = {}
            for call in self.h.calls:
                path = call.path_written
                if path:
                    tools_by_path.setdefault(path, []).append(call.name)
                    last_edit[path] = call
            recent = sorted(last_edit, key=lambda p: -last_edit[p].position)[: level.excerpt_files]
            lines.append(f"   Modified ({len(facts.files_modified)}):")
            for path in _limit(facts.files_modified, cuts.modified):
                tools = tools_by_path.get(path)
                if not tools:
                    lines.append(f"   - {path}")
                    continue
                how = ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in Counter(tools).items())
                lines.append(f"   - {path} ({how})")
                if path in recent and level.excerpt_lines:
                    excerpt = _excerpt_lines(
                        _edit_excerpt(last_edit[path].block),
                        level.excerpt_lines,
                        level.excerpt_chars,
                    )
                    if excerpt:
                        lines.append(f"     Last change ({last_edit[path].name}):")
                        lines.append("     ```")
                        lines.extend(f"     {line}" for line in excerpt)
                        lines.append("     ```")
        if facts.files_read:
            read = _limit(facts.files_read, cuts.read)
            lines.append(f"   Read ({len(facts.files_read)}): " + ", ".join(read))
        if self.h.planned_files:
            lines.append(
                "   Mentioned for the work ahead but not opened yet: "
                + ", ".join(self.h.planned_files[:20])
            )
        paths = [p for p in self.h.recent_paths if p not in self.h.planned_files]
        if paths and level.paths:
            lines.append("   Other paths seen recently: " + ", ".join(paths[: level.paths]))
        return lines or ["   None."]

    def _after(self, position: int) -> Call | None:
        return next(
            (
                call
                for call in self.h.calls
                if call.position > position and (call.path_written or call.command)
            ),
            None,
        )

    @staticmethod
    def _error_line(call: Call, level: _Level) -> str:
        return f"   - [{describe_call(call.block, 60)}] {_line(call.result, level.error_chars)}"

    def errors_section(self, level: _Level, cuts: _Cuts) -> list[str]:
        records = self.errors
        if not records:
            return ["   None recorded."]
        open_records = [r for r in records if r.resolved_by is None]
        fixed = [r for r in records if r.resolved_by is not None]
        keep = len(records) if cuts.errors is None else cuts.errors
        lines: list[str] = []
        if open_records:
            lines.append(f"   Still unresolved ({len(open_records)}):")
            for record in open_records[-max(1, keep) :]:
                call = record.call
                lines.append(self._error_line(call, level))
                following = self._after(call.position) if level.error_actions else None
                if following is not None:
                    lines.append(f"     Next action taken: {describe_call(following.block)}")
            hidden = len(open_records) - max(1, keep)
            if hidden > 0:
                lines.append(f"   - ({hidden} more)")
        if fixed:
            shown = fixed[-max(0, keep - len(open_records)) :] if cuts.errors is not None else fixed
            lines.append(f"   Resolved ({len(fixed)}):")
            for record in shown:
                call, fix = record.call, record.resolved_by
                assert fix is not None
                lines.append(self._error_line(call, level))
                if level.error_actions:
                    lines.append(f"     Fixed: {describe_call(fix.block)} succeeded afterwards")
            if len(shown) < len(fixed):
                lines.append(f"   - ({len(fixed) - len(shown)} more)")
        return lines

    def problem_solving(self, level: _Level, cuts: _Cuts) -> list[str]:
        facts = self.h.facts
        calls = sum(count for _, count in facts.tool_counts)
        lines = [
            f"   {calls} tool call(s): {len(facts.files_modified)} file(s) modified, "
            f"{len(facts.files_read)} read, {len(facts.commands)} distinct command(s), "
            f"{len(self.errors)} error(s), {len(self.h.unresolved_errors)} of them unresolved."
        ]
        decisions = self.h.decisions[-level.decisions :] if level.decisions else []
        if decisions:
            lines.append("   Decisions and reasons (the assistant's words, latest last):")
            lines.extend(f"   - {_line(d, level.decision_chars)}" for d in decisions)
        if self.h.tracker:
            lines.append("   Task tracker:")
            for call in self.h.tracker[-level.tracker :]:
                lines.append(f"   - `{_line(call.command or '', 100)}` -> {_outcome(call)}")
        if facts.commands:
            lines.append("   Commands run, in order:")
            commands = [f"`{_line(c, level.command_chars)}`" for c in facts.commands]
            lines.extend(f"   - {c}" for c in _limit(commands, cuts.commands))
        noted = self.h.noted_commands[: level.noted_commands]
        if noted:
            lines.append("   Commands written down in the conversation (docs, plans), not run:")
            lines.extend(f"   - `{_line(c, level.command_chars)}`" for c in noted)
        return lines

    def user_messages(self, level: _Level, cuts: _Cuts) -> list[str]:
        lines: list[str] = []
        if self.previous_lines:
            lines.append("   Before the previous summary:")
            lines.extend(
                f"   - {_line(line, max(level.prompt_chars, PROMPT_SCORE_CHARS))}"
                for line in self.previous_lines
            )
        prompts = [_quote(p, level.prompt_chars) for p in self._distinct_requests()]
        lines.extend(f"   - {p}" for p in _limit(prompts, cuts.prompts))
        if self.h.notifications:
            lines.append("   Background task notifications (events, not requests):")
            for note in self.h.notifications[-6:]:
                what = notification_summary(note) or note.status or "notification"
                lines.append(f"   - task {note.task_id or '?'}: {_line(what, 160)}")
        return lines or ["   None."]

    def pending(self, level: _Level) -> list[str]:
        lines: list[str] = []
        items = self.h.tracker_items
        if items:
            lines.append("   Task tracker, as the agent's commands left it:")
            for item in items[-12:]:
                title = f" — {_line(item.title, 120)}" if item.title else ""
                lines.append(f"   - {item.id}: {item.state}{title}")
            shown = [i for i in reversed(items) if i.spec and i.state != "closed"]
            current = next((i for i in shown if "progress" in i.state), None) or next(
                iter(shown), None
            )
            if current is not None and level.excerpt_lines:
                spec_lines = _excerpt_lines(
                    current.spec, level.excerpt_lines * 2, level.excerpt_chars * 2
                )
                lines.append(f"   What {current.id} asks for (its tracker entry):")
                lines.extend(f"     {line}" for line in spec_lines)
        open_items = self.h.todos_with("in_progress", "pending", "open", "todo")
        done = self.h.todos_with("completed", "done", "complete")
        if self.h.todos:
            lines.append(
                f"   Todo list as last written ({len(done)} done, {len(open_items)} open):"
            )
            lines.extend(f"   - {_todo(item, level.todo_chars)}" for item in open_items)
            if done:
                lines.append(
                    "   Done: " + "; ".join(_line(str(t.get("content", "")), 80) for t in done)
                )
        if self.h.request_items and not open_items:
            lines.append("   Items of the latest request (check each against section 8):")
            lines.extend(f"   - {_line(item, 200)}" for item in self.h.request_items)
        unresolved = self.h.unresolved_errors
        if unresolved:
            lines.append(f"   {len(unresolved)} error(s) still unresolved (section 4).")
        if not lines:
            latest = self.h.latest_request
            if latest is not None and not self.h.last_event_is_answer:
                lines.append(
                    "   The latest request was still being worked on: "
                    + _quote(latest.text, level.request_chars)
                )
            else:
                lines.append("   No task list was kept; see sections 8 and 9.")
        return lines

    def current(self, level: _Level) -> list[str]:
        lines: list[str] = []
        if self.h.assistant_texts:
            lines.append(
                "   Last assistant message: "
                + _quote(self.h.assistant_texts[-1][1], level.current_chars)
            )
        done = self.h.reported_done[-level.done :] if level.done else []
        if done:
            lines.append("   Reported done since the latest request:")
            lines.extend(f"   - {_line(s, 200)}" for s in done)
        if self.h.calls and level.last_calls:
            lines.append("   Last tool calls:")
            for call in self.h.calls[-level.last_calls :]:
                lines.append(f"   - {describe_call(call.block)} -> {_outcome(call)}")
        recent_files: list[str] = []
        for call in reversed(self.h.calls[-20:]):
            path = file_write_path(call.block)
            if path and path not in recent_files:
                recent_files.append(path)
        if recent_files:
            lines.append("   Files changed most recently: " + ", ".join(recent_files[:6]))
        return lines or ["   Nothing recorded."]

    def next_step(self, level: _Level) -> list[str]:
        if self.up_to:
            return ["   The messages that follow this summary continue the work; read them next."]
        lines: list[str] = []
        if self.h.next_step:
            lines.append(
                "   Next step as the assistant last stated it: "
                + _quote(self.h.next_step, max(200, level.request_chars))
            )
        in_progress = self.h.todos_with("in_progress")
        if in_progress:
            lines.append("   In progress: " + _todo(in_progress[0], level.todo_chars))
        latest = self.h.latest_request
        if latest is not None:
            verbatim = _quote(latest.text, level.request_chars)
            lines.append("   The user's latest request, verbatim: " + verbatim)
        open_work = (
            self.h.todos_with("in_progress", "pending", "open", "todo")
            or self.h.unresolved_errors
            or self.h.request_items
        )
        if self.h.last_event_is_answer and not open_work:
            lines.append(
                "   The last reply may have finished it: check the request against sections "
                "7 and 8; if nothing remains, report the result and wait for the user."
            )
        else:
            lines.append("   Continue from there without asking the user to repeat anything.")
        return lines

    # -- whole text ----------------------------------------------------------------------
    def render(self, level: _Level, cuts: _Cuts) -> str:
        eighth, ninth = (
            ("Work Completed", "Context for Continuing Work")
            if self.up_to
            else ("Current Work", "Optional Next Step")
        )
        sections = [
            ("1. Primary Request and Intent:", self.primary(level)),
            ("2. Key Technical Concepts:", self.concepts(level)),
            ("3. Files and Code Sections:", self.files(level, cuts)),
            ("4. Errors and fixes:", self.errors_section(level, cuts)),
            ("5. Problem Solving:", self.problem_solving(level, cuts)),
            ("6. All user messages:", self.user_messages(level, cuts)),
            ("7. Pending Tasks:", self.pending(level)),
            (f"8. {eighth}:", self.current(level)),
            (f"9. {ninth}:", self.next_step(level)),
        ]
        body = "\n\n".join(title + "\n" + "\n".join(lines) for title, lines in sections)
        return f"{SUMMARY_HEADER}\n{body}"


_AUSTERE = replace(
    _LEVELS[-1],
    decisions=0,
    done=1,
    last_calls=1,
    identifiers=25,
    paths=8,
    tracker=2,
    noted_commands=3,
    error_actions=False,
)
"""The lean level with the extras cut to a minimum: tried before any fact list is cut."""


def _cut_to_fit(renderer: _Renderer, level: _Level, max_tokens: int) -> str:
    """Shorten the extras, then the longest fact lists one step at a time, until it fits."""
    if rough_token_count(renderer.render(level, _Cuts())) > max_tokens:
        level = _AUSTERE
    facts = renderer.h.facts
    sizes = {
        "commands": len(facts.commands),
        "read": len(facts.files_read),
        "prompts": len(renderer._distinct_requests()),
        "modified": len(facts.files_modified),
        "errors": len(renderer.errors),
    }
    cuts = _Cuts()
    text = renderer.render(level, cuts)
    while rough_token_count(text) > max_tokens and any(size > 0 for size in sizes.values()):
        name = max(sizes, key=lambda key: sizes[key])
        sizes[name] = max(0, sizes[name] - max(1, (sizes[name] - 1) // 8))
        cuts = replace(cuts, **{name: sizes[name]})
        text = renderer.render(level, cuts)
    return text


def summary_budget(
    conversation_tokens: int, floor: int, *, max_tokens: int, target_ratio: float, min_tokens: int
) -> int:
    """Tokens the summary may use (see the module docstring)."""
    return min(
        max_tokens,
        max(
            floor,
            int(conversation_tokens * target_ratio),
            min(min_tokens, conversation_tokens),
            # What the guard may ask of a summary: a conversation's tokens as the API counts
            # them can be several times its length estimate (system prompt, code).
            min(FLOOR_MAX_TOKENS, conversation_tokens // 4),
        ),
    )


def lean_summary_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of the leanest offline summary of these messages: what a summary of them holds
    at the least without losing a fact (the guard's floor never asks for more)."""
    renderer = _Renderer(read_handover(messages), up_to=False)
    return rough_token_count(renderer.render(_LEVELS[-1], _Cuts()))


def extractive_summary(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    min_tokens: int = DEFAULT_MIN_SUMMARY_TOKENS,
    up_to: bool = False,
) -> str:
    """The summary text for a conversation (plain API messages, summary prompt removed)."""
    renderer = _Renderer(read_handover(messages), up_to=up_to)
    lean = _LEVELS[-1]
    lean_text = renderer.render(lean, _Cuts())
    budget = summary_budget(
        renderer.h.tokens,
        rough_token_count(lean_text),
        max_tokens=max_tokens,
        target_ratio=target_ratio,
        min_tokens=min_tokens,
    )
    for level in _LEVELS:
        text = lean_text if level is lean else renderer.render(level, _Cuts())
        if rough_token_count(text) <= budget:
            return text
    return _cut_to_fit(renderer, lean, max_tokens)


__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "DEFAULT_MIN_SUMMARY_TOKENS",
    "DEFAULT_TARGET_RATIO",
    "SUMMARY_HEADER",
    "describe_call",
    "escape_tags",
    "extractive_summary",
    "lean_summary_tokens",
    "summary_budget",
]
