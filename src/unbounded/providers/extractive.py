"""An offline, deterministic summarizer with the shape of a model provider.

`ExtractiveSummarizer` answers a summary request (the conversation, then a user message
holding the summary prompt) the way a model would, `<analysis>…</analysis>` then
`<summary>…</summary>` with the nine sections of the seeds' prompt (seed 000), so the same
formatting code handles both. Nothing is invented: every section is filled from the
transcript's structure.

1. Primary Request and Intent: the first user prompt and the latest one.
2. Key Technical Concepts: languages (from file extensions), tools used, frequent identifiers.
3. Files and Code Sections: files modified, with an excerpt of the last edit, and files read.
4. Errors and fixes: every error with its text and the next edit or command after it.
5. Problem Solving: counts, every shell command (first 80 characters) and the latest
   assistant notes.
6. All user messages: every prompt, capped but never below its first 80 characters.
7. Pending Tasks: open todos; otherwise the last request when no final answer followed it.
8. Current Work: the last assistant text and the last tool calls with their outcome.
9. Optional Next Step: the last user request, quoted verbatim.

Budget. The summary aims at `target_ratio` (5%) of the conversation's tokens, or
`min_tokens` (1,000) for a short conversation (but never more than the conversation itself),
never below what sections 6 and the fact lists need, never above `max_tokens` (8,000) nor
the request's own `max_tokens` (a small window's compaction budget).
Token counts are the rough estimate (characters / 4, unpadded). It renders at a
ladder of levels, from rich (long quotes, code excerpts, notes) to lean (prompts at 80
characters, no excerpts), and keeps the first level that fits. What is cut first is prose;
the facts that ../shared/RETENTION.md scores (prompts, file paths, errors, commands) go last,
and only when even the lean level is over `max_tokens`, as "(N more)" cuts of the longest
lists.

The summary prompt is recognised as the last user message's text that contains
`summary_prompt_marker` (default `"<summary>"`, which every summary prompt asks for); it is
dropped before summarizing. A prompt asking for "Work Completed" (partial compaction,
`up_to`) gets sections 8 and 9 named as that prompt names them.

A previous compaction summary among the messages (a user text starting with the summary
preamble) is not a user prompt: its "All user messages" lines are carried into section 6
and an abridged copy of it opens section 1, so chained compactions keep the user's words.

Limits. It quotes and lists; it cannot say why a decision was taken or which detail
mattered. For a partial compaction `from` a pivot, the request holds the whole view (for
cache sharing) and nothing marks the pivot, so the summary covers the retained part too (a
superset, larger than needed). With `Policy.facts_ledger` on, the appended ledger repeats
facts this summary already lists.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from unbounded.compaction.facts import (
    PROMPT_SCORE_CHARS,
    ErrorFact,
    Facts,
    clip,
    extract_facts,
    is_prompt_text,
    normalize_text,
    shown_items,
    text_of,
)
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.request import ProviderRequest
from unbounded.model.tools import file_read_path, file_write_path, shell_command
from unbounded.providers.base import Heartbeat, ModelResponse
from unbounded.tokens.estimate import content_tokens, rough_token_count

DEFAULT_SUMMARY_PROMPT_MARKER = "<summary>"
"""Text whose presence in the last user message marks it as the summary prompt."""
DEFAULT_MAX_SUMMARY_TOKENS = 8_000
"""Hard cap of the summary, in rough tokens."""
DEFAULT_TARGET_RATIO = 0.05
"""The summary aims at this share of the conversation's tokens (sections 6 and facts first)."""
DEFAULT_MIN_SUMMARY_TOKENS = 1_000
"""Short conversations may use up to this many tokens (never more than the conversation)."""
COMMAND_CHARS = 80
"""Each shell command is shown up to this many characters (whitespace collapsed)."""

PREVIOUS_SUMMARY_PREFIXES: tuple[str, ...] = (
    "This session is being continued from a previous conversation",
    "This session continues an earlier conversation",
)
"""How a compaction summary message begins (Claude Code's wording, then unbounded's)."""

_LANGUAGES: dict[str, str] = {
    ".py": "Python",
    ".pyi": "Python",
    ".ipynb": "Jupyter notebooks",
    ".js": "JavaScript",
    ".mjs": "JavaScript",
    ".cjs": "JavaScript",
    ".jsx": "JavaScript (JSX)",
    ".ts": "TypeScript",
    ".tsx": "TypeScript (TSX)",
    ".ex": "Elixir",
    ".exs": "Elixir",
    ".heex": "HEEx templates",
    ".erl": "Erlang",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".kt": "Kotlin",
    ".scala": "Scala",
    ".rb": "Ruby",
    ".php": "PHP",
    ".c": "C",
    ".h": "C/C++ headers",
    ".cc": "C++",
    ".cpp": "C++",
    ".hpp": "C++",
    ".cs": "C#",
    ".swift": "Swift",
    ".m": "Objective-C",
    ".sh": "shell scripts",
    ".bash": "shell scripts",
    ".zsh": "shell scripts",
    ".sql": "SQL",
    ".html": "HTML",
    ".css": "CSS",
    ".scss": "SCSS",
    ".vue": "Vue",
    ".svelte": "Svelte",
    ".md": "Markdown",
    ".rst": "reStructuredText",
    ".json": "JSON",
    ".jsonl": "JSON Lines",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".toml": "TOML",
    ".xml": "XML",
    ".tf": "Terraform",
    ".dockerfile": "Docker",
    ".lua": "Lua",
    ".r": "R",
    ".jl": "Julia",
    ".dart": "Dart",
    ".zig": "Zig",
    ".nix": "Nix",
}
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\b")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|^[A-Z][a-z0-9]+[A-Z]")
_SECTION_6 = re.compile(r"^\s*6\.\s*All user messages\s*:?\s*$", re.I | re.M)
_NEXT_SECTION = re.compile(r"^\s*7\.\s", re.M)


@dataclass(frozen=True, slots=True)
class _Level:
    """How much of each section one rendering shows."""

    prompt_chars: int
    request_chars: int
    excerpt_files: int
    excerpt_lines: int
    excerpt_chars: int
    error_chars: int
    command_chars: int
    notes: int
    note_chars: int
    current_chars: int
    last_calls: int
    identifiers: int
    previous_chars: int


_LEVELS: tuple[_Level, ...] = (
    _Level(600, 1_000, 5, 15, 900, 300, COMMAND_CHARS, 5, 300, 800, 6, 10, 2_000),
    _Level(400, 600, 3, 10, 600, 200, COMMAND_CHARS, 3, 240, 500, 5, 8, 1_200),
    _Level(300, 400, 2, 8, 400, 160, COMMAND_CHARS, 2, 200, 300, 4, 6, 800),
    _Level(200, 300, 1, 6, 300, 120, COMMAND_CHARS, 1, 160, 200, 3, 5, 400),
    _Level(120, 200, 0, 0, 0, 100, COMMAND_CHARS, 0, 0, 160, 2, 4, 200),
    _Level(PROMPT_SCORE_CHARS, 120, 0, 0, 0, 60, 50, 0, 0, 100, 1, 0, 0),
)
"""From rich to lean; the lean level keeps what RETENTION.md scores and little else."""


@dataclass(frozen=True, slots=True)
class _Call:
    """One tool call and what came back."""

    position: int
    tool_id: str
    name: str
    block: Mapping[str, Any]


@dataclass(slots=True)
class _Conversation:
    """The summary's raw material, read once from the messages."""

    facts: Facts
    calls: list[_Call]
    results: dict[str, tuple[bool, str]]
    """tool_use id -> (is_error, text)."""
    error_positions: dict[str, int]
    """normalized error text -> position of its first tool_result."""
    assistant_texts: list[tuple[int, str]]
    last_prompt_position: int
    last_event_is_answer: bool
    previous_summaries: list[str]
    tokens: int
    messages: int


def _is_previous_summary(text: str) -> bool:
    return text.lstrip().startswith(PREVIOUS_SUMMARY_PREFIXES)


def _without_previous_summaries(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The messages with previous compaction summaries taken out, and those summaries."""
    kept: list[Mapping[str, Any]] = []
    summaries: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user":
            kept.append(message)
        elif isinstance(content, str):
            if _is_previous_summary(content):
                summaries.append(content)
            else:
                kept.append(message)
        elif isinstance(content, list):
            blocks: list[Any] = []
            for block in content:
                if (
                    isinstance(block, dict)
                    and block.get("type") == "text"
                    and _is_previous_summary(str(block.get("text", "")))
                ):
                    summaries.append(str(block.get("text", "")))
                else:
                    blocks.append(block)
            if blocks:
                kept.append({**message, "content": blocks})
        else:
            kept.append(message)
    return kept, summaries


def _read_conversation(messages: Sequence[Mapping[str, Any]]) -> _Conversation:
    plain, previous = _without_previous_summaries(messages)
    facts = extract_facts(plain)
    calls: list[_Call] = []
    results: dict[str, tuple[bool, str]] = {}
    error_positions: dict[str, int] = {}
    assistant_texts: list[tuple[int, str]] = []
    last_prompt = -1
    last_kind = ""
    position = 0
    for message in plain:
        role = message.get("role")
        content = message.get("content")
        blocks: list[Any] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        )
        if not isinstance(blocks, list):
            continue
        for block in blocks:
            if not isinstance(block, dict):
                continue
            position += 1
            kind = block.get("type")
            if role == "assistant" and kind == "text":
                text = str(block.get("text", "")).strip()
                if text:
                    assistant_texts.append((position, text))
                    last_kind = "answer"
            elif role == "assistant" and kind == "tool_use":
                calls.append(
                    _Call(position, str(block.get("id", "")), str(block.get("name", "")), block)
                )
                last_kind = "tool_use"
            elif kind == "tool_result":
                text = text_of(block.get("content")).strip()
                is_error = bool(block.get("is_error"))
                results[str(block.get("tool_use_id", ""))] = (is_error, text)
                if is_error and text:
                    error_positions.setdefault(normalize_text(text), position)
                last_kind = "tool_result"
            elif role == "user" and kind == "text" and is_prompt_text(str(block.get("text", ""))):
                last_prompt = position
                last_kind = "prompt"
    tokens = sum(content_tokens(m.get("content")) for m in messages)
    return _Conversation(
        facts=facts,
        calls=calls,
        results=results,
        error_positions=error_positions,
        assistant_texts=assistant_texts,
        last_prompt_position=last_prompt,
        last_event_is_answer=last_kind == "answer",
        previous_summaries=previous,
        tokens=tokens,
        messages=len(messages),
    )


# -- pieces of the sections ------------------------------------------------------------------


def _quote(text: str, chars: int) -> str:
    return '"' + clip(text, max(chars, PROMPT_SCORE_CHARS)) + '"'


def _extension(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if name == "dockerfile":
        return ".dockerfile"
    return "." + name.rsplit(".", 1)[-1] if "." in name.lstrip(".") else ""


def _languages(facts: Facts) -> list[str]:
    counts: Counter[str] = Counter()
    extensions: dict[str, list[str]] = {}
    for path in (*facts.files_modified, *facts.files_read):
        extension = _extension(path)
        language = _LANGUAGES.get(extension)
        if language:
            counts[language] += 1
            seen = extensions.setdefault(language, [])
            if extension not in seen:
                seen.append(extension)
    ranked = sorted(counts, key=lambda name: (-counts[name], name))
    return [f"{name} ({', '.join(extensions[name])})" for name in ranked]


def _identifiers(texts: Iterable[str], limit: int) -> list[str]:
    if limit <= 0:
        return []
    counts: Counter[str] = Counter()
    for text in texts:
        for match in _IDENTIFIER.findall(text):
            if len(match) < 4 or len(match) > 60:
                continue
            if "_" in match.strip("_") or _CAMEL.search(match) or "." in match:
                dotted = "." in match
                if dotted and (match.count(".") > 3 or _extension(match) in _LANGUAGES):
                    continue  # a file name, not an identifier
                counts[match] += 1
    frequent = [name for name, count in counts.items() if count >= 2]
    frequent.sort(key=lambda name: (-counts[name], name))
    return frequent[:limit]


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
        shown.append(line)
        used += len(line) + 1
    if len(shown) < len(lines):
        shown.append(f"… ({len(lines) - len(shown)} more lines)")
    return shown


def _describe_call(block: Mapping[str, Any], chars: int = COMMAND_CHARS) -> str:
    name = str(block.get("name", "tool"))
    written = file_write_path(block)
    if written:
        return f"{name} {written}"
    read = file_read_path(block)
    if read:
        return f"{name} {read}"
    command = shell_command(block)
    if command:
        return f"{name}: {clip(command, chars)}"
    tool_input = block.get("input")
    if isinstance(tool_input, Mapping):
        for key in ("description", "pattern", "query", "url", "prompt", "skill", "path"):
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return f"{name}: {clip(value, 60)}"
    return name


def _todo_text(item: Mapping[str, Any], chars: int) -> str:
    text = item.get("content") or item.get("title") or item.get("description") or ""
    return f"[{item.get('status', 'pending')}] {clip(str(text), chars)}"


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
    return [line for line in lines if line]


def _summary_body(summary: str) -> str:
    """An earlier summary without its preamble and analysis."""
    match = re.search(r"<summary>(.*?)(?:</summary>|$)", summary, re.S)
    if match:
        return match.group(1)
    index = summary.find("Summary:")
    return summary[index + len("Summary:") :] if index >= 0 else summary


# -- rendering -------------------------------------------------------------------------------


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


class _Renderer:
    """Builds the answer text from a read conversation at a given level."""

    def __init__(self, conversation: _Conversation, *, up_to: bool) -> None:
        self.c = conversation
        self.up_to = up_to
        self.previous_lines: list[str] = []
        for summary in conversation.previous_summaries:
            self.previous_lines.extend(_previous_user_lines(summary))

    # sections ---------------------------------------------------------------------------
    def primary(self, level: _Level) -> list[str]:
        prompts = self.c.facts.user_prompts
        lines: list[str] = []
        if self.c.previous_summaries and level.previous_chars:
            body = _summary_body(self.c.previous_summaries[-1])
            lines.append(
                "   Earlier context (from the previous summary, abridged): "
                + clip(body, level.previous_chars)
            )
        if not prompts:
            lines.append("   No user request is recorded in this part of the conversation.")
            return lines
        lines.append("   The user's first request: " + _quote(prompts[0], level.request_chars))
        if len(prompts) > 2:
            lines.append(f"   {len(prompts) - 2} further message(s) are listed in section 6.")
        if len(prompts) > 1:
            lines.append("   The most recent request: " + _quote(prompts[-1], level.request_chars))
        return lines

    def concepts(self, level: _Level) -> list[str]:
        lines: list[str] = []
        languages = _languages(self.c.facts)
        if languages:
            lines.append("   - Languages and file types: " + ", ".join(languages))
        if self.c.facts.tool_counts:
            tools = ", ".join(
                f"{name} ×{count}" if count > 1 else name
                for name, count in self.c.facts.tool_counts
            )
            lines.append("   - Tools used: " + tools)
        texts = [*self.c.facts.user_prompts, *(text for _, text in self.c.assistant_texts)]
        texts.extend(
            _edit_excerpt(call.block) for call in self.c.calls if file_write_path(call.block)
        )
        identifiers = _identifiers(texts, level.identifiers)
        if identifiers:
            lines.append("   - Frequent identifiers: " + ", ".join(identifiers))
        return lines or ["   - None recorded."]

    def files(self, level: _Level, cuts: _Cuts) -> list[str]:
        facts = self.c.facts
        lines: list[str] = []
        if facts.files_modified:
            tools_by_path: dict[str, list[str]] = {}
            last_edit: dict[str, _Call] = {}
            for call in self.c.calls:
                path = file_write_path(call.block)
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
                counted = Counter(tools)
                how = ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in counted.items())
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
        return lines or ["   None."]

    def _fix_after(self, position: int) -> str | None:
        for call in self.c.calls:
            if call.position <= position:
                continue
            if file_write_path(call.block) or shell_command(call.block):
                return _describe_call(call.block)
        return None

    def errors(self, level: _Level, cuts: _Cuts) -> list[str]:
        errors: list[ErrorFact] = list(self.c.facts.errors)
        if not errors:
            return ["   None recorded."]
        keep = len(errors) if cuts.errors is None else cuts.errors
        if keep >= len(errors):
            shown = errors
        elif keep <= 0:
            shown = []
        else:
            shown = [errors[0], *errors[len(errors) - (keep - 1) :]] if keep > 1 else errors[:1]
        lines: list[str] = []
        for error in shown:
            lines.append(f"   - [{error.tool}] {clip(error.text, level.error_chars)}")
            position = self.c.error_positions.get(normalize_text(error.text))
            fix = self._fix_after(position) if position is not None else None
            if fix:
                lines.append(f"     Next action: {fix}")
        if len(shown) < len(errors):
            lines.append(f"   - ({len(errors) - len(shown)} more)")
        return lines

    def problem_solving(self, level: _Level, cuts: _Cuts) -> list[str]:
        facts = self.c.facts
        calls = sum(count for _, count in facts.tool_counts)
        lines = [
            f"   {calls} tool call(s): {len(facts.files_modified)} file(s) modified, "
            f"{len(facts.files_read)} read, {len(facts.commands)} distinct command(s), "
            f"{len(facts.errors)} error(s)."
        ]
        if facts.commands:
            lines.append("   Commands run, in order:")
            commands = [f"`{clip(c, level.command_chars)}`" for c in facts.commands]
            lines.extend(f"   - {c}" for c in _limit(commands, cuts.commands))
        if level.notes and self.c.assistant_texts:
            notes = self.c.assistant_texts[-level.notes :]
            lines.append("   Latest assistant notes:")
            lines.extend(f"   - {clip(text, level.note_chars)}" for _, text in notes)
        return lines

    def user_messages(self, level: _Level, cuts: _Cuts) -> list[str]:
        lines: list[str] = []
        if self.previous_lines:
            lines.append("   Before the previous summary:")
            lines.extend(
                f"   - {clip(line, max(level.prompt_chars, PROMPT_SCORE_CHARS))}"
                for line in self.previous_lines
            )
        prompts = [_quote(p, level.prompt_chars) for p in self.c.facts.user_prompts]
        lines.extend(f"   - {p}" for p in _limit(prompts, cuts.prompts))
        return lines or ["   None."]

    def pending(self, level: _Level) -> list[str]:
        todos = self.c.facts.open_todos
        if todos:
            return [f"   - {_todo_text(item, level.note_chars or 120)}" for item in todos]
        prompts = self.c.facts.user_prompts
        if prompts and not self.c.last_event_is_answer:
            return [
                "   - Not finished when the summary was made: "
                + _quote(prompts[-1], level.request_chars)
            ]
        return ["   None explicitly pending."]

    def current(self, level: _Level) -> list[str]:
        lines: list[str] = []
        if self.c.assistant_texts:
            lines.append(
                "   Last assistant message: "
                + _quote(self.c.assistant_texts[-1][1], level.current_chars)
            )
        if self.c.calls and level.last_calls:
            lines.append("   Last tool calls:")
            for call in self.c.calls[-level.last_calls :]:
                outcome = self.c.results.get(call.tool_id)
                if outcome is None:
                    state = "no result recorded"
                elif outcome[0]:
                    state = "error: " + clip(outcome[1], 100)
                else:
                    state = "ok"
                lines.append(f"   - {_describe_call(call.block)} -> {state}")
        return lines or ["   Nothing recorded."]

    def next_step(self, level: _Level) -> list[str]:
        prompts = self.c.facts.user_prompts
        if self.up_to:
            return ["   The messages that follow this summary continue the work; read them next."]
        if not prompts:
            return ["   Continue with the work described above."]
        quote = _quote(prompts[-1], level.request_chars)
        in_progress = [t for t in self.c.facts.open_todos if str(t.get("status")) == "in_progress"]
        if self.c.last_event_is_answer and not self.c.facts.open_todos:
            return [
                "   The last request appears answered; wait for the user. Their latest message: "
                + quote
            ]
        lines = [
            "   Continue the most recent request. The user's latest message, verbatim: " + quote
        ]
        if in_progress:
            lines.append("   In progress: " + _todo_text(in_progress[0], level.note_chars or 120))
        return lines

    # whole text -------------------------------------------------------------------------
    def analysis(self) -> str:
        facts = self.c.facts
        return (
            "<analysis>\n"
            "Extractive summary written without a model from the structure of the conversation: "
            f"{self.c.messages} message(s), about {self.c.tokens} tokens; "
            f"{len(facts.user_prompts)} user message(s), {len(facts.files_modified)} file(s) "
            f"modified, {len(facts.files_read)} read, {len(facts.commands)} command(s), "
            f"{len(facts.errors)} error(s). User messages are quoted, not paraphrased.\n"
            "</analysis>"
        )

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
            ("4. Errors and fixes:", self.errors(level, cuts)),
            ("5. Problem Solving:", self.problem_solving(level, cuts)),
            ("6. All user messages:", self.user_messages(level, cuts)),
            ("7. Pending Tasks:", self.pending(level)),
            (f"8. {eighth}:", self.current(level)),
            (f"9. {ninth}:", self.next_step(level)),
        ]
        body = "\n\n".join(title + "\n" + "\n".join(lines) for title, lines in sections)
        return f"{self.analysis()}\n\n<summary>\n{body}\n</summary>"


def _cut_to_fit(renderer: _Renderer, level: _Level, max_tokens: int) -> str:
    """Shorten the longest fact lists, one step at a time, until the text fits."""
    facts = renderer.c.facts
    sizes = {
        "commands": len(facts.commands),
        "read": len(facts.files_read),
        "prompts": len(facts.user_prompts),
        "modified": len(facts.files_modified),
        "errors": len(facts.errors),
    }
    cuts = _Cuts()
    text = renderer.render(level, cuts)
    while rough_token_count(text) > max_tokens and any(size > 0 for size in sizes.values()):
        name = max(sizes, key=lambda key: sizes[key])
        sizes[name] = max(0, sizes[name] - max(1, (sizes[name] - 1) // 8))
        cuts = replace(cuts, **{name: sizes[name]})
        text = renderer.render(level, cuts)
    return text


def summarize_conversation(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    min_tokens: int = DEFAULT_MIN_SUMMARY_TOKENS,
    up_to: bool = False,
) -> str:
    """The `<analysis>` + `<summary>` answer for a conversation (without the summary prompt)."""
    conversation = _read_conversation(messages)
    renderer = _Renderer(conversation, up_to=up_to)
    lean = _LEVELS[-1]
    lean_text = renderer.render(lean, _Cuts())
    floor = rough_token_count(lean_text)
    budget = min(
        max_tokens,
        max(floor, int(conversation.tokens * target_ratio), min(min_tokens, conversation.tokens)),
    )
    for level in _LEVELS:
        text = lean_text if level is lean else renderer.render(level, _Cuts())
        if rough_token_count(text) <= budget:
            return text
    return _cut_to_fit(renderer, lean, max_tokens)


def split_summary_prompt(
    messages: Sequence[Mapping[str, Any]], marker: str = DEFAULT_SUMMARY_PROMPT_MARKER
) -> tuple[list[Mapping[str, Any]], str | None]:
    """The conversation without its trailing summary prompt, and that prompt (None if absent).

    The prompt is the text of the last message when it is a user message containing
    `marker`; when normalization merged it into a message of tool results, only the text
    blocks holding the marker are removed.
    """
    conversation = list(messages)
    if not conversation or not marker:
        return conversation, None
    last = conversation[-1]
    if last.get("role") != "user":
        return conversation, None
    content = last.get("content")
    if isinstance(content, str):
        if marker in content:
            return conversation[:-1], content
        return conversation, None
    if not isinstance(content, list):
        return conversation, None
    prompt_blocks = [
        b
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and marker in str(b.get("text", ""))
    ]
    if not prompt_blocks:
        return conversation, None
    rest = [b for b in content if not any(b is p for p in prompt_blocks)]
    prompt = "\n".join(str(b.get("text", "")) for b in prompt_blocks)
    if rest:
        conversation[-1] = {**last, "content": rest}
    else:
        conversation.pop()
    return conversation, prompt


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


class ExtractiveSummarizer:
    """A Provider that writes a nine-section summary offline, deterministically, without a model."""

    name = "extractive"
    includes_facts = True
    """Its summary is built from the facts, so no separate facts ledger is appended."""
    supports_cache_edits = False

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
        target_ratio: float = DEFAULT_TARGET_RATIO,
        min_tokens: int = DEFAULT_MIN_SUMMARY_TOKENS,
        summary_prompt_marker: str = DEFAULT_SUMMARY_PROMPT_MARKER,
        model: str = "extractive",
    ) -> None:
        if max_tokens <= 0:
            raise ValueError("max_tokens must be > 0")
        if not 0 < target_ratio <= 1:
            raise ValueError("target_ratio must be in (0, 1]")
        self.max_tokens = max_tokens
        self.target_ratio = target_ratio
        self.min_tokens = max(0, min_tokens)
        self.summary_prompt_marker = summary_prompt_marker
        self.model = model

    def summarize(self, request: ProviderRequest) -> ModelResponse:
        """Answer a summary request (the pure computation behind `create`)."""
        messages: Sequence[Mapping[str, Any]] = request.get("messages", [])
        conversation, prompt = split_summary_prompt(messages, self.summary_prompt_marker)
        up_to = prompt is not None and "Work Completed" in prompt
        # The request's output budget is the summary's too (small windows get small summaries).
        asked = request.get("max_tokens")
        limit = min(self.max_tokens, asked) if isinstance(asked, int) and asked > 0 else None
        text = summarize_conversation(
            conversation,
            max_tokens=limit or self.max_tokens,
            target_ratio=self.target_ratio,
            min_tokens=self.min_tokens,
            up_to=up_to,
        )
        input_tokens = rough_token_count(_system_text(request.get("system"))) + sum(
            content_tokens(m.get("content")) for m in messages
        )
        usage: Usage = {"input_tokens": input_tokens, "output_tokens": rough_token_count(text)}
        block: ContentBlock = {"type": "text", "text": text}
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        return ModelResponse(
            content=[block],
            stop_reason="end_turn",
            usage=usage,
            model=self.model,
            id=f"msg_extractive_{digest}",
        )

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Answer a summary request; `stream` and `heartbeat` are accepted and unused."""
        return self.summarize(request)

    def create_sync(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Synchronous `create` (no event loop needed: nothing here waits)."""
        return self.summarize(request)


__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "DEFAULT_MIN_SUMMARY_TOKENS",
    "DEFAULT_SUMMARY_PROMPT_MARKER",
    "DEFAULT_TARGET_RATIO",
    "ExtractiveSummarizer",
    "split_summary_prompt",
    "summarize_conversation",
]
