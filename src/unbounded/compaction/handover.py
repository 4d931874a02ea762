"""What an agent needs to go on with a task, read from a conversation without a model.

A summary that lists every path and command is an index; an agent continuing from it still
has to work out what was done, what remains, what it was about to do, and why it chose what
it chose. `read_handover(messages)` reads those from the conversation's own structure and the
assistant's own words, deterministically, for the offline summarizer and the offline session
notes:

- **requests**: what the user asked, in order: typed prompts and slash commands with their
  arguments (`/orchestrator create TODO app`); never a command's expanded template, a skill
  body, a background-task notification, hook output or a system reminder
  (`unbounded.model.user_messages`). Notifications are kept apart, as events.
- **task state**: the todo list as the agent last left it (TodoWrite and alike), with the
  items done, in progress and pending; task-tracker commands it ran (`bd`, `gh issue`,
  `gh pr`, new `git` branches) with the first line of their output; the items the latest
  request enumerates (`1) …`, `- …`).
- **the agent's own words**: the next step as it last stated it ("Next I split
  test_db_roundtrip…"), what it reported done, and its decisions with their reasons
  (sentences with "because", "instead of", "so that"…).
- **errors**: each failed tool call, resolved when a later call of the same command (or of
  the same program and first argument), or a later successful write of the same file,
  succeeded; unresolved otherwise.
- **files**: modified and read files; files the latest request or the later replies mention
  that no tool has touched yet (planned); other paths seen recently in outputs.
- **identifiers**: the names the recent work revolves around (functions, modules, classes,
  CSS classes, task ids), ranked by how often and how recently they appear, so the agent can
  search for them instead of rediscovering them.

Everything is quoted or listed, never paraphrased: nothing is invented.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.facts import Facts, extract_facts, normalize_text, text_of
from unbounded.model.names import identifiers_in, strings_in
from unbounded.model.tools import file_read_path, file_write_path, shell_command
from unbounded.model.user_messages import UserMessage, classify_message_texts
from unbounded.tokens.estimate import content_tokens

PREVIOUS_SUMMARY_PREFIXES: tuple[str, ...] = (
    "This session is being continued from a previous conversation",
    "This session continues an earlier conversation",
)
"""How a compaction summary message begins (Claude Code's wording, then unbounded's)."""

TRACKER_COMMAND = re.compile(
    r"^\s*(?:bd|beads|gh\s+(?:issue|pr)|git\s+(?:checkout\s+-b|switch\s+-c|branch\s+\S)|"
    r"jira|linear|glab\s+issue|todo)\b"
)
"""Shell commands that read or change a task tracker (or start a branch for a task)."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[*])|\n+")
_DECISION = re.compile(
    r"\b(because|since the|so that|instead of|rather than|in order to|to avoid|decided|"
    r"the (?:root )?cause|the reason|which means|chose|choosing|prefer|trade-?off|"
    r"approach)\b",
    re.I,
)
_NEXT_STEP = re.compile(
    r"^(?:next,?|now,?|then,?|after that,?|finally,?)?\s*(?:i'll|i will|let me|let's|i'm going to|"
    r"i need to|next step|we still need|still need to|remaining:?|next:|the next)\b",
    re.I,
)
_DONE = re.compile(
    r"\b(?:is|are|now)\s+(?:done|complete|completed|finished|fixed|in place|passing|green)\b|"
    r"\b(?:all\s+\d+\s+tests?\s+pass(?:ed)?|tests?\s+pass(?:ed|es)?|completed|closed|fixed|"
    r"implemented|done)\b",
    re.I,
)
_ENUMERATED = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*•])\s+(.+?)(?=(?:\s\d+[.)]\s)|$)", re.M)
_PATH = re.compile(
    r"(?<![\w/.-])(?:~/|\.{1,2}/|/)?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
    r"(?![\w/-])"
)
_SOURCE_EXTENSIONS = frozenset(
    {
        "py",
        "pyi",
        "js",
        "jsx",
        "ts",
        "tsx",
        "mjs",
        "cjs",
        "ex",
        "exs",
        "heex",
        "eex",
        "erl",
        "go",
        "rs",
        "java",
        "kt",
        "rb",
        "php",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cs",
        "swift",
        "sh",
        "md",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "css",
        "scss",
        "html",
        "sql",
        "txt",
        "xml",
        "vue",
        "svelte",
        "lua",
        "dart",
        "zig",
        "csv",
        "ipynb",
        "lock",
        "cfg",
        "ini",
        "env",
        "rst",
        "tf",
        "proto",
        "graphql",
    }
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*(?:\s+#.*)?$")
_SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console|zsh)\s*\n(.*?)```", re.S)
_LONG_TOKEN = re.compile(r"\S{400,}")
"""Runs this long are data, not paths: dropped before matching (keeps it linear)."""
_RESULT_CHARS = 6_000
"""Of each tool result, the first this many characters are read for names and paths."""
_INPUT_CHARS = 20_000
"""Of each tool call's input (a written file), the first this many characters."""
_TEST_OR_BUILD = frozenset(
    {
        "pytest",
        "python",
        "python3",
        "mix",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "cargo",
        "go",
        "make",
        "uv",
        "poetry",
        "bundle",
        "rake",
        "gradle",
        "mvn",
        "dotnet",
        "swift",
        "jest",
        "vitest",
        "tox",
        "nox",
        "ruff",
        "mypy",
        "eslint",
        "tsc",
    }
)


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call, where it sits in the conversation, and what came back."""

    position: int
    tool_id: str
    name: str
    block: Mapping[str, Any]
    is_error: bool | None = None
    """True / False once its result is known; None when no result was recorded."""
    result: str = ""

    @property
    def path_written(self) -> str | None:
        """The file it writes, if any."""
        return file_write_path(self.block)

    @property
    def path_read(self) -> str | None:
        """The file it reads, if any."""
        return file_read_path(self.block)

    @property
    def command(self) -> str | None:
        """The shell command it runs, if any."""
        return shell_command(self.block)


@dataclass(slots=True)
class TrackerItem:
    """One task of a tracker, as the agent's tracker commands left it."""

    id: str
    state: str
    title: str = ""
    spec: str = ""
    """The output of the latest command that showed it (`bd show`, `gh issue view`)."""


_TRACKER_VERB = re.compile(
    r"^\s*(?:bd|beads)\s+(show|update|close|reopen|create)\s+([\w.-]+)(.*)$|"
    r"^\s*gh\s+issue\s+(view|edit|close|reopen)\s+(\d+)(.*)$"
)
_STATUS_FLAG = re.compile(r"--status[= ]+([\w-]+)")
_BD_TITLE = re.compile(r"^\S+\s+[\w.-]+(?:\s+\[[^\]]*\])?\s+·\s+(.*?)\s+\[")


@dataclass(frozen=True, slots=True)
class Request:
    """Something the user asked: a prompt or a command with its arguments."""

    position: int
    text: str


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """A failed tool call and whether a later call succeeded at the same thing."""

    call: Call
    resolved_by: Call | None


@dataclass(slots=True)
class Handover:
    """The conversation read for a hand-over (see the module docstring)."""

    facts: Facts
    requests: list[Request] = field(default_factory=list)
    notifications: list[UserMessage] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    assistant_texts: list[tuple[int, str]] = field(default_factory=list)
    todos: list[dict[str, Any]] = field(default_factory=list)
    tracker: list[Call] = field(default_factory=list)
    tracker_items: list[TrackerItem] = field(default_factory=list)
    """Tasks the tracker commands named, in the order first seen, with their last state."""
    errors: list[ErrorRecord] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    reported_done: list[str] = field(default_factory=list)
    next_step: str | None = None
    request_items: list[str] = field(default_factory=list)
    planned_files: list[str] = field(default_factory=list)
    recent_paths: list[str] = field(default_factory=list)
    noted_commands: list[str] = field(default_factory=list)
    """Commands written in shell code blocks (docs, plans, replies) but never run."""
    identifiers: list[str] = field(default_factory=list)
    previous_summaries: list[str] = field(default_factory=list)
    last_event_is_answer: bool = False
    tokens: int = 0
    messages: int = 0
    positions: int = 0

    @property
    def latest_request(self) -> Request | None:
        """The last thing the user asked."""
        return self.requests[-1] if self.requests else None

    def todos_with(self, *statuses: str) -> list[dict[str, Any]]:
        """Todo items whose status is one of these."""
        wanted = {s.lower() for s in statuses}
        return [t for t in self.todos if str(t.get("status", "pending")).lower() in wanted]

    @property
    def unresolved_errors(self) -> list[ErrorRecord]:
        """Errors no later call fixed."""
        return [e for e in self.errors if e.resolved_by is None]

    @property
    def resolved_errors(self) -> list[ErrorRecord]:
        """Errors a later call fixed."""
        return [e for e in self.errors if e.resolved_by is not None]


def is_previous_summary(text: str) -> bool:
    """A compaction summary message (not something the user typed)."""
    return text.lstrip().startswith(PREVIOUS_SUMMARY_PREFIXES)


def sentences(text: str) -> list[str]:
    """The sentences (and lines) of a text, stripped, without empty ones."""
    return [s.strip(" -*\t") for s in _SENTENCE.split(text) if s.strip(" -*\t")]


def _without_previous_summaries(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[str]]:
    kept: list[Mapping[str, Any]] = []
    summaries: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user":
            kept.append(message)
        elif isinstance(content, str):
            if is_previous_summary(content):
                summaries.append(content)
            else:
                kept.append(message)
        elif isinstance(content, list):
            blocks: list[Any] = []
            for block in content:
                if (
                    isinstance(block, dict)
                    and block.get("type") == "text"
                    and is_previous_summary(str(block.get("text", "")))
                ):
                    summaries.append(str(block.get("text", "")))
                else:
                    blocks.append(block)
            if blocks:
                kept.append({**message, "content": blocks})
        else:
            kept.append(message)
    return kept, summaries


def _resolution_keys(call: Call) -> set[str]:
    """What a later success must share with a failed call to count as its fix."""
    keys: set[str] = set()
    written = call.path_written
    if written:
        keys.add("file:" + written)
    command = call.command
    if command:
        normalized = normalize_text(command)
        keys.add("cmd:" + normalized)
        words = normalized.replace("&&", " ").split()
        program = next((w for w in words if "=" not in w and w not in ("cd", "sudo")), "")
        if program in _TEST_OR_BUILD and len(words) >= 2:
            index = words.index(program)
            keys.add("run:" + " ".join(words[index : index + 2]))
    if not keys:
        keys.add("tool:" + call.name + ":" + normalize_text(str(call.block.get("input")))[:200])
    return keys


def _resolve_errors(calls: Sequence[Call]) -> list[ErrorRecord]:
    records: list[ErrorRecord] = []
    for index, call in enumerate(calls):
        if call.is_error is not True:
            continue
        keys = _resolution_keys(call)
        fix = next(
            (
                later
                for later in calls[index + 1 :]
                if later.is_error is False and keys & _resolution_keys(later)
            ),
            None,
        )
        records.append(ErrorRecord(call=call, resolved_by=fix))
    return records


def _weight(position: int, total: int) -> float:
    """Recent mentions count more: weight halves every quarter of the conversation back."""
    if total <= 0:
        return 1.0
    return float(math.pow(0.5, (total - position) / max(1.0, total / 4)))


def _rank(scores: Mapping[str, float], first_seen: Mapping[str, int]) -> list[str]:
    # The name itself breaks the last ties: the order never depends on how they were found.
    return sorted(scores, key=lambda name: (-scores[name], first_seen[name], name))


def _mentioned_paths(text: str) -> list[str]:
    found: list[str] = []
    for match in _PATH.findall(_LONG_TOKEN.sub(" ", text)):
        extension = match.rsplit(".", 1)[-1].lower()
        if extension in _SOURCE_EXTENSIONS and not match.startswith("http"):
            found.append(match)
    return found


def _one_per_file(paths: Sequence[str]) -> list[str]:
    """Ranked paths with one entry per file name: the most complete spelling, at the rank of
    its best-ranked spelling."""
    best: dict[str, str] = {}
    order: list[str] = []
    for path in paths:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name not in best:
            order.append(name)
            best[name] = path
        elif len(path) > len(best[name]):
            best[name] = path
    return [best[name] for name in order]


def _shell_lines(text: str) -> list[str]:
    """Commands written in shell code blocks (```bash / ```sh / ```shell / ```console), with
    continued lines joined; comments, option lines and bare variable assignments left out."""
    lines: list[str] = []
    for block in _SHELL_BLOCK.findall(text):
        pending = ""
        for line in block.splitlines():
            stripped = line.strip().removeprefix("$ ").strip()
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            command = (pending + stripped).strip()
            pending = ""
            if (
                command
                and (command[0].isalnum() or command[0] in "~./_")
                and not _ASSIGNMENT.match(command)
                and len(command) <= 300
            ):
                lines.append(command)
    return lines


def _request_items(text: str) -> list[str]:
    """The items a request enumerates (`1) a 2) b`, `- a` lines), if it lists any."""
    items = [m.strip().rstrip(",;") for m in _ENUMERATED.findall(text) if m.strip()]
    return items if len(items) >= 2 else []


def read_handover(messages: Sequence[Mapping[str, Any]]) -> Handover:
    """Read a conversation (plain API messages) for a hand-over (see the module docstring)."""
    plain, previous = _without_previous_summaries(messages)
    handover = Handover(facts=extract_facts(_only_requests(plain)), previous_summaries=previous)
    results: dict[str, tuple[bool, str]] = {}
    raw_calls: list[Call] = []
    texts: list[tuple[int, str, float]] = []  # (position, text, weight) for names and paths
    position = 0
    last_kind = ""
    for message in plain:
        role = message.get("role")
        content = message.get("content")
        sorted_texts = iter(classify_message_texts(content) if role == "user" else [])
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
                    handover.assistant_texts.append((position, text))
                    texts.append((position, text, 2.0))
                    last_kind = "answer"
            elif role == "assistant" and kind == "tool_use":
                raw_calls.append(
                    Call(position, str(block.get("id", "")), str(block.get("name", "")), block)
                )
                arguments = " ".join(strings_in(block.get("input")))
                texts.append((position, arguments[:_INPUT_CHARS], 2.0))
                last_kind = "tool_use"
            elif kind == "tool_result":
                text = text_of(block.get("content")).strip()
                results[str(block.get("tool_use_id", ""))] = (bool(block.get("is_error")), text)
                texts.append((position, text[:_RESULT_CHARS], 1.0))
                last_kind = "tool_result"
            elif role == "user" and kind == "text":
                message_kind = next(sorted_texts, None)
                if message_kind is None:
                    continue
                if message_kind.is_request and message_kind.request:
                    handover.requests.append(Request(position, message_kind.request))
                    texts.append((position, message_kind.request, 3.0))
                    last_kind = "prompt"
                elif message_kind.kind == "notification":
                    handover.notifications.append(message_kind)
    handover.positions = position
    handover.calls = [
        Call(
            c.position,
            c.tool_id,
            c.name,
            c.block,
            results[c.tool_id][0] if c.tool_id in results else None,
            results[c.tool_id][1] if c.tool_id in results else "",
        )
        for c in raw_calls
    ]
    handover.last_event_is_answer = last_kind == "answer"
    handover.tokens = sum(content_tokens(m.get("content")) for m in messages)
    handover.messages = len(messages)
    _task_state(handover)
    _own_words(handover)
    handover.errors = _resolve_errors(handover.calls)
    _files_and_names(handover, texts)
    return handover


def _only_requests(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Messages for the facts: user texts that are not requests (templates, skill bodies,
    notifications) are left out so they are not counted as prompts."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            if message.get("role") == "user" and isinstance(content, str):
                sorted_text = classify_message_texts(content)
                if sorted_text and not sorted_text[0].is_request:
                    continue
            out.append(message)
            continue
        sorted_texts = iter(classify_message_texts(content))
        blocks = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                message_kind = next(sorted_texts, None)
                if message_kind is not None and not message_kind.is_request:
                    continue
            blocks.append(block)
        out.append({**message, "content": blocks})
    return out


def _task_state(handover: Handover) -> None:
    """The todo list as last left, tracker commands, and the latest request's items."""
    from unbounded.compaction.facts import todo_list_from_tool

    for call in handover.calls:
        todos = todo_list_from_tool(call.block)
        if todos is not None:
            handover.todos = [
                dict(item) if isinstance(item, Mapping) else {"content": str(item)}
                for item in todos
            ]
        command = call.command
        if command and TRACKER_COMMAND.search(command):
            handover.tracker.append(call)
            _track(handover, command, call)
    latest = handover.latest_request
    if latest is not None:
        handover.request_items = _request_items(latest.text)


def _track(handover: Handover, command: str, call: Call) -> None:
    """Update the tracker items from one tracker command and its output."""
    if call.is_error:
        return
    match = _TRACKER_VERB.match(command.splitlines()[0] if command else "")
    if match is None:
        return
    verb, item_id, rest = (
        (match.group(1), match.group(2), match.group(3))
        if match.group(1)
        else (match.group(4), match.group(5), match.group(6))
    )
    item = next((i for i in handover.tracker_items if i.id == item_id), None)
    if item is None:
        item = TrackerItem(item_id, "seen")
        handover.tracker_items.append(item)
    if verb in ("show", "view"):
        item.spec = call.result.strip()
        title = _BD_TITLE.match(item.spec.splitlines()[0]) if item.spec else None
        if title:
            item.title = title.group(1)
    elif verb == "close":
        item.state = "closed"
    elif verb == "reopen":
        item.state = "open"
    elif verb == "create":
        item.state = "created"
    else:
        status = _STATUS_FLAG.search(rest)
        if status:
            item.state = status.group(1).replace("_", " ")


def _own_words(handover: Handover) -> None:
    """Decisions, reported progress and the stated next step, from the assistant's texts."""
    since = handover.latest_request.position if handover.latest_request else 0
    seen: set[str] = set()
    for _, text in handover.assistant_texts:
        for sentence in sentences(text):
            key = normalize_text(sentence)
            if key in seen or len(sentence) < 20:
                continue
            if _DECISION.search(sentence):
                seen.add(key)
                handover.decisions.append(sentence)
    for position, text in handover.assistant_texts:
        if position < since:
            continue
        for sentence in sentences(text):
            if _DONE.search(sentence) and len(sentence) >= 15:
                handover.reported_done.append(sentence)
    for _, text in reversed(handover.assistant_texts):
        stated = [s for s in sentences(text) if _NEXT_STEP.search(s) and len(s.split()) >= 5]
        if stated:
            handover.next_step = stated[-1]
            break


def _files_and_names(handover: Handover, texts: Sequence[tuple[int, str, float]]) -> None:
    """Planned files, recent paths and the ranked identifiers of the recent work."""
    touched = {*handover.facts.files_modified, *handover.facts.files_read}
    touched_names = {p.rstrip("/").rsplit("/", 1)[-1] for p in touched}
    total = handover.positions
    name_scores: dict[str, float] = {}
    name_first: dict[str, int] = {}
    path_scores: dict[str, float] = {}
    path_first: dict[str, int] = {}
    for position, text, weight in texts:
        factor = weight * _weight(position, total)
        for name in identifiers_in(text):
            name_scores[name] = name_scores.get(name, 0.0) + factor
            name_first.setdefault(name, position)
        for path in _mentioned_paths(text):
            if path in touched or (path.rsplit("/", 1)[-1] in touched_names and "/" not in path):
                continue
            path_scores[path] = path_scores.get(path, 0.0) + factor
            path_first.setdefault(path, position)
    handover.identifiers = _rank(name_scores, name_first)
    handover.recent_paths = _one_per_file(_rank(path_scores, path_first))
    ran = {normalize_text(command) for command in handover.facts.commands}
    noted: dict[str, float] = {}
    noted_first: dict[str, int] = {}
    for position, text, weight in texts:
        for command in _shell_lines(text):
            if normalize_text(command) in ran:
                continue
            noted[command] = noted.get(command, 0.0) + weight * _weight(position, total)
            noted_first.setdefault(command, position)
    handover.noted_commands = _rank(noted, noted_first)
    since = handover.latest_request.position if handover.latest_request else 0
    planned: list[str] = []
    sources = [r.text for r in handover.requests[-1:]] + [
        text for position, text in handover.assistant_texts if position >= since
    ]
    for text in sources:
        for path in _mentioned_paths(text):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if path not in touched and name not in touched_names and path not in planned:
                planned.append(path)
    handover.planned_files = planned


__all__ = [
    "PREVIOUS_SUMMARY_PREFIXES",
    "TRACKER_COMMAND",
    "Call",
    "ErrorRecord",
    "Handover",
    "Request",
    "is_previous_summary",
    "read_handover",
    "sentences",
]
