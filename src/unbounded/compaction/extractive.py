"""The offline summary: a hand-over under the nine headings, written without a model.

`extractive_summary(messages)` turns `read_handover(messages)` into the summary the next
context starts with, under the nine headings the summary prompt asks a model for, so an agent
reads both the same way. It spends its words on what an agent continuing the work must know:
the state, the next step, the errors and the recent code, not on lists of names.

1. Primary Request and Intent: the user's latest request, whole (`compaction.carried`), the
   first request of this part, the tracker item being worked on, the user's standing
   instructions verbatim (from every earlier part too), the instruction files attached, and
   what the previous summary said the intent was.
2. Key Technical Concepts: the working directory the paths are relative to, languages, the
   branch.
3. Files and Code Sections: each file written, the most recent first: created or edited, by
   which tools, whether it changed after the last commit, the agent's words before its latest
   change; the code of the latest ones (a whole file, a long one outlined by its definition
   lines, an edit with what it replaced), the definitions of the others; the files only read,
   the last read of them with their definition lines; the layout of the folders the agent
   listed (`folder_tree`).
4. Errors and fixes: each failed call (flagged, or a failing output such as a compiler error,
   failing tests or a JSON error reply), unresolved first: the failure's lines, the agent's
   first words after it, what it tried since, and the call that fixed it; then the problems
   the agent reported in its own words.
5. Problem Solving: commits (sha, message, files changed), pushes, files changed after the
   last commit, the last `git status` (or that no commit was seen, or that no git command
   ran and the changed files are presumably uncommitted); the last run of each
   check and how it went; the agent's decisions with its reasons.
6. All user messages: every request, quoted (the latest whole in section 1); the user
   messages an earlier summary listed, the first (the task) and the newest up to the level's
   `carried_messages`, with one "(N more)" line counting those left out now and before.
7. Pending Tasks: the tracker items as the agent's commands left them, with their
   dependencies; what the current one asks for and which files it names changed since it
   started; the todo list; the items of the latest request; what the status and plan files
   read still list as open.
8. Current Work: the findings the agent stated in its older messages, its latest words (its
   status reports), its latest plan with the files changed since per item, the latest
   searches with what they found, the last command of each program that made or started
   something, the last tool calls with their outcome, what the last result showed,
   background-task notifications.
9. Optional Next Step: one action, then the follow-ups (`_Renderer._next_actions`: the checks
   files changed after come first), then the larger plan (the previous summary's next step,
   the status files' open items); the agent's last stated intention; then "continue without
   asking", unless the last reply may have finished everything.

After an earlier summary, sections 2, 3, 4, 5 and 7 also keep what it said there
(`carried_sections`, `CARRIED_SECTIONS`), its newest items first, within the level's
`carried_chars`.

Nothing is invented: every line quotes the conversation or lists what it holds. Commands are
shown whole up to `COMMAND_CHARS` or by their program alone, never cut in the middle. Text
quoted from the conversation has its `<summary>` / `<analysis>` tags made inert; the text is
final (no tags, no tag parser).

Size. The summary aims at `target_ratio` (10 %) of the conversation's tokens, at least
`min_tokens` (1,000; never more than the conversation) or 1,500 tokens for a conversation
over 6,000 (the most the compaction guard asks of a summary), at most `max_tokens` (4,000:
Claude Code's own summaries of the same points hold 2,000 to 4,000). It renders at a ladder of
levels, from rich (long quotes, code excerpts) to lean, and keeps the first that fits; given
the budget, the code of the files changed last takes its share of the room the other sections
leave before the last steps take the rest (`_Renderer._with_code`). Past the lean level the
long lists are cut with "(N more)" markers, the least needed first (`CUT_ORDER`). Token
counts are length / 4.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from unbounded.compaction.carried import (
    LATEST_REQUEST_CHARS,
    carried_user_messages,
    escape_tags,
    left_out_user_messages,
    previous_sections,
    render_latest,
    render_standing,
)
from unbounded.compaction.command_results import command_key, failure_headline, shorten_quoted
from unbounded.compaction.facts import clip, normalize_text, shown_items
from unbounded.compaction.handover import (
    Call,
    ErrorRecord,
    FileChange,
    Handover,
    Listing,
    Plan,
    TrackerItem,
    defined_name,
    definition_lines,
    env_file_read,
    is_env_file,
    mentioned_paths,
    push_target,
    read_handover,
    removed_paths,
    replaced_code,
    writes_whole_file,
    written_code,
)
from unbounded.compaction.summary_guard import FLOOR_MAX_TOKENS
from unbounded.model.tools import file_read_path, file_write_path, shell_command
from unbounded.model.user_messages import notification_summary
from unbounded.tokens.estimate import rough_token_count

DEFAULT_MAX_SUMMARY_TOKENS = 4_000
"""Hard cap of the summary, in rough tokens."""
DEFAULT_TARGET_RATIO = 0.10
"""The summary aims at this share of the conversation's tokens."""
DEFAULT_MIN_SUMMARY_TOKENS = 1_000
"""Short conversations may use up to this many tokens (never more than the conversation)."""
SUMMARY_HEADER = "Summary:"
COMMAND_CHARS = 300
"""A command is shown whole up to this many characters, else by its program alone."""
LINE_CHARS = 200
"""A one-line quote (a title, a todo, an outcome, an item) is cut to this many characters."""
LONG_LINE_CHARS = 300
"""Lines of an error, of a plan, of a decision: cut to this many characters."""
QUOTE_CHARS = 400
"""The agent's words quoted as they are (its reading of an error, its next step)."""
DEFINITIONS_SHOWN = 12
TRACKER_SHOWN = 12
NOTIFICATIONS_SHOWN = 4
PENDING_SHOWN = 3
"""Pending todo items named as follow-ups in section 9."""
UNRESOLVED_SHOWN = 2
"""Unresolved errors always shown in section 4, and repeated in section 9."""
STATUS_LINES = 10
"""Lines of the last `git status` shown (about 60 characters each)."""
LATEST_PREVIEW_CHARS = 200
"""Section 6 shows the latest request this far (section 1 quotes it whole)."""
REPORT_MIN_CHARS = 400
"""An agent message this long before the latest request is quoted as its last report."""
SUBAGENT_TOOLS = frozenset({"Task", "Agent"})
"""Tools that run a sub-agent: their result is the sub-agent's own report."""
PLAN_ONLY_SLACK = 200
"""A text holding its plan and less than this much more is shown as the plan alone."""
OUTLINE_HEAD = 4
"""Lines a long file's outline starts with (section 3)."""
OUTLINE_MIN_DEFINITIONS = 3
"""A long file is outlined when this many definitions follow its head, else its head shown."""
ROOT_MIN_DEPTH = 3
"""A common folder is used as the working directory from this many levels down."""

SHORT_REQUEST_WORDS = 40
"""A request this short is read with the agent's message before it, quoted whole up to the
level's `answered_chars`; a longer one states its own task and gets a quarter of that."""
RECENT_MIN_CHARS = 1_000
"""The last steps get at least this much room, even when the other sections fill the budget
(the level is then too long and a leaner one is tried). No more than the leanest level's
`recent_chars`: the leanest rendering, the budget's floor, then always fits."""
RECENT_ROOM_CHARS = 8_000
"""Given a budget, the last steps take what the other sections leave up to this many
characters (about 2,000 tokens), or the level's `recent_chars` when that is more."""
RECENT_TEXT_CHARS = 1_200
"""An agent text among the last steps is shown whole up to this many characters."""
RECENT_INPUT_LINES = 6
"""First lines of a write's new content (or of a long command) shown among the last steps."""
RECENT_RESULT_LINES = 3
"""Lines of a result's head, and of its tail, shown among the last steps."""
RECENT_ERROR_LINES = 12
"""Lines of a failure shown among the last steps."""
CODE_ROOM_CHARS = 3_000
"""Given a budget, the code of the files changed last takes up to this many characters of
the room the other sections leave (at most half of it past the last steps' least), before
the last steps take the rest: an agent goes on from that code."""
CODE_MIN_CHARS = 400
"""Less room than this for code is left to the last steps."""
CODE_EXCERPTS = 2
"""Files whose latest code is shown when the room allows (the most recently changed)."""
CODE_EXCERPT_LINES = 20
"""Lines of each such excerpt, at least."""
EARLIER_COMMANDS_CHARS = 600
"""Room (at most a quarter of the last steps') for the commands of the steps before them:
a command the last steps leave out is still named."""
EARLIER_COMMAND_CHARS = 80
"""Characters of one such command."""

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
CARRIED_SECTIONS: tuple[tuple[int, float], ...] = ((4, 0.3), (2, 0.2), (3, 0.2), (7, 0.2), (5, 0.1))
"""The previous summary's sections kept beside this part's, each with its share of the
level's `carried_chars`; a share a section does not use goes to the others in this order."""
MADE_SHOWN = 4
"""Commands that made or started something shown (section 8)."""
ENV_KEYS_SHOWN = 12
"""Key names shown per `.env` file (section 2)."""
SEARCHES_SHOWN = 4
"""The latest searches shown with what they found (section 8)."""
SEARCH_PROGRAMS = frozenset({"grep", "egrep", "rg", "ag", "ack", "find", "fd"})
SEARCH_TOOLS = frozenset({"Grep", "Glob", "grep", "glob", "search_files", "find_file"})
_NO_MATCH = re.compile(r"^No (?:files|matches) found\b", re.I)
_FOUND = re.compile(r"^(?:Found )?\d+ (?:files?|matches?|lines?|occurrences?)\b", re.I)
STATUS_FILES_SHOWN = 2
"""Status and plan files whose open items are shown (the latest read)."""
_OWN_NEXT_STEP_BOILERPLATE = ("Continue with the latest request", "The agent's last stated")
CARRIED_HEADING = "From the previous summary (the work before this part):"
CARRIED_PENDING_HEADING = "Pending in the previous summary (some may be done since):"
_FENCE = re.compile(r"^\s*```")
_PORT = re.compile(r"(?<![\w.])\d{4,5}(?![\w.])")
_WORD = re.compile(r"[\w-]+(?:\.[\w-]+)*")
_SECTION_ONE = re.compile(r"^\s*1\.\s*Primary Request[^\n]*\n(.*?)(?=^\s*2\.\s)", re.M | re.S)


@dataclass(frozen=True, slots=True)
class _Level:
    """How much of each section one rendering shows."""

    latest_chars: int
    request_chars: int
    previous_chars: int
    reports: int
    report_chars: int
    excerpts: int
    excerpt_lines: int
    excerpt_chars: int
    files: int
    read_files: int
    errors: int
    error_lines: int
    decisions: int
    spec_lines: int
    follow_ups: int = 8
    """Follow-up actions listed after the next one (section 9)."""
    findings: int = 12
    """Sentences stating findings kept from the agent's older texts (section 8)."""
    carried_chars: int = 5_600
    """Characters of the previous summary's sections kept (about 35 % of the 4,000-token cap
    at the richest level)."""
    details: bool = True
    """Per-error readings and attempts, per-file definitions."""
    carried_messages: int = 30
    """User messages listed by the previous summary kept (section 6): the first (the task)
    and the newest. Each summary lists its predecessors' messages and its own, so without a
    bound the section grows with every compaction."""
    answered_chars: int = 6_000
    """Characters of the agent's message the latest request answers, quoted in section 1
    (about 1,500 tokens at the richest level): "yes" means what that message proposed."""
    earlier_files: int = 20
    """Paths listed after the files shown (newest first, then "(N more)"): a shell-driven
    agent's session can change dozens."""
    git_events: int = 12
    """Commits, and pushes, listed one a line (section 5), the newest; the earlier ones are
    one line of their shas or targets, so a long session's Git list never crowds out the
    user's messages."""
    read_outlines: int = 2
    """Files read, not changed, whose definitions are listed (section 3), the latest read."""
    outline_lines: int = 8
    """Definitions listed per such file."""
    listings: int = 2
    """Folders shown as the agent last listed them (section 3), the newest first."""
    layout_chars: int = 800
    """Characters of one folder's layout (its names grouped by subfolder)."""
    recent_chars: int = 6_000
    """Characters of the last steps shown as they happened (section 8), filled from the
    newest backwards: what the last calls did and showed, the agent's words between. Given a
    budget, they take the room the other sections leave instead (`_Renderer.render`)."""


_LEVELS: tuple[_Level, ...] = (
    _Level(3_000, 1_000, 1_500, 4, 1_200, 3, 25, 1_500, 14, 15, 8, 8, 6, 40),
    _Level(
        3_000,
        700,
        1_000,
        3,
        800,
        2,
        15,
        900,
        12,
        10,
        6,
        6,
        4,
        25,
        findings=8,
        carried_chars=4_000,
        carried_messages=20,
        earlier_files=15,
        answered_chars=4_000,
        git_events=8,
        recent_chars=4_000,
    ),
    _Level(
        2_000,
        400,
        600,
        2,
        500,
        1,
        10,
        500,
        10,
        6,
        4,
        4,
        3,
        15,
        findings=5,
        carried_chars=2_400,
        carried_messages=12,
        earlier_files=10,
        answered_chars=2_400,
        git_events=5,
        recent_chars=2_400,
        read_outlines=1,
        outline_lines=6,
        listings=1,
        layout_chars=500,
    ),
    _Level(
        1_500,
        250,
        300,
        1,
        400,
        0,
        0,
        0,
        8,
        0,
        3,
        3,
        2,
        8,
        follow_ups=4,
        findings=2,
        carried_chars=800,
        details=False,
        carried_messages=6,
        earlier_files=6,
        answered_chars=1_000,
        git_events=3,
        recent_chars=1_000,
        read_outlines=0,
        listings=1,
        layout_chars=300,
    ),
)
"""From rich to lean; the lean level keeps the request, the state and the next step."""


@dataclass(frozen=True, slots=True)
class _Cuts:
    """How many items of the long lists to show when even the lean level is too long."""

    files: int | None = None
    earlier: int | None = None
    """Paths listed after the files shown (at most the level's `earlier_files`)."""
    prompts: int | None = None
    carried: int | None = None
    errors: int | None = None
    """Errors shown, the unresolved first (at least `UNRESOLVED_SHOWN` of those)."""
    fixed_errors: int | None = None
    """Fixed errors shown at most (after the unresolved ones)."""
    spec_lines: int | None = None
    recent: int | None = None
    """Hundreds of characters the last steps may take (at most the level's)."""
    answered: int | None = None
    """Hundreds of characters of the answered message quoted (at most the level's)."""


def _shown_after_first(items: Sequence[str], keep: int, left_out: int) -> list[str]:
    """`keep` items (at least one): the first and the most recent, with one "(N more)" line
    after the first counting those cut here and the `left_out` ones cut before."""
    keep = max(1, keep)
    hidden = max(0, len(items) - keep) + left_out
    if not items or not hidden:
        return list(items)
    tail = list(items[len(items) - (keep - 1) :]) if keep > 1 else []
    return [items[0], f"({hidden} more)", *tail]


def _earlier(kind: str, names: Sequence[str]) -> list[str]:
    """One line for the earlier commits or pushes a capped Git list leaves out, oldest
    first, cut to a line: the count stays exact even when the names do not fit."""
    if not names:
        return []
    return [f"   - {len(names)} earlier {kind}: " + _line(", ".join(names), LINE_CHARS)]


_STEPS_HEAD = (
    "   The last {shown} steps as they happened (newest last; the {left} earlier ones are {where}):"
)
_WITH_COMMANDS = "in the sections above, and their commands here"


def _size(lines: Sequence[str]) -> int:
    """Characters of these lines, a newline each."""
    return sum(len(line) + 1 for line in lines)


_EARLIER_COMMANDS_HEAD = "   Commands of the earlier steps ({head}newest last): "


def _earlier_commands(events: Sequence[tuple[int, Any]], chars: int) -> list[str]:
    """One line naming the commands of these steps (shell calls), newest last, filled from
    the newest backwards, with how many older ones are not listed: at most `chars` long."""
    chars -= len(_EARLIER_COMMANDS_HEAD.format(head=f"the {len(events)} older not listed; ")) + 1
    commands = [e.command for _, e in events if isinstance(e, Call) and e.command]
    # A command run again right after itself is named once.
    commands = [c for i, c in enumerate(commands) if i == 0 or c != commands[i - 1]]
    listed: list[str] = []
    used = 0
    for command in reversed(commands):
        text = command_text(command, EARLIER_COMMAND_CHARS)
        if used + len(text) + 2 > chars:
            break
        listed.append(text)
        used += len(text) + 2
    if not listed:
        return []
    older = len(commands) - len(listed)
    head = f"the {older} older not listed; " if older else ""
    return [_EARLIER_COMMANDS_HEAD.format(head=head) + ", ".join(reversed(listed))]


def _title(title: str) -> str:
    """A tracker item's title after a dash, or nothing."""
    return f" — {_line(title, LINE_CHARS)}" if title else ""


def _relation_marks(item: TrackerItem) -> str:
    """What an item depends on (with their states) and blocks, as its `bd show` listed."""
    marks: list[str] = []
    if item.depends_on:
        marks.append("depends on " + ", ".join(f"{i} ({state})" for i, state in item.depends_on))
    if item.blocks:
        marks.append("blocks " + ", ".join(item.blocks))
    return f" [{'; '.join(marks)}]" if marks else ""


def _todo_text(todo: Mapping[str, Any]) -> str:
    return str(todo.get("content") or todo.get("title") or todo.get("description") or "")


def _line(text: str, chars: int) -> str:
    return escape_tags(clip(text, chars))


def _quote(text: str, chars: int) -> str:
    return '"' + _line(text, chars) + '"'


def command_text(command: str, chars: int = COMMAND_CHARS) -> str:
    """A command whole (whitespace collapsed) up to `chars`, else its program and length:
    never cut in the middle of an argument."""
    flat = " ".join(command.split())
    if len(flat) <= chars:
        return f"`{escape_tags(flat)}`"
    key = command_key(command) or flat.split(" ", 1)[0]
    return f"a `{escape_tags(key)}` command of {len(flat):,} characters"


def describe_call(block: Mapping[str, Any], chars: int = COMMAND_CHARS, root: str = "") -> str:
    """A tool call in one line: its name and the file it writes or reads (relative to `root`
    when under it), else its command (whole up to `chars`, see `command_text`), else its first
    telling input (a description, pattern, query, URL...). Shared by the offline summary and
    the offline session notes."""
    name = str(block.get("name", "tool"))
    path = file_write_path(block) or file_read_path(block)
    if path:
        return f"{name} {relative(path, root)}"
    command = shell_command(block)
    if command:
        return f"{name} {command_text(command, chars)}"
    tool_input = block.get("input")
    if isinstance(tool_input, Mapping):
        for key in ("description", "pattern", "query", "url", "prompt", "skill", "path"):
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return f"{name}: {_line(value, LINE_CHARS)}"
    return name


def relative(path: str, root: str) -> str:
    """`path` relative to `root` when it is under it, else as it is."""
    if root and path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path


def _outcome(call: Call) -> str:
    if call.is_error is None:
        return "no result recorded"
    if call.failed:
        return "failed: " + _line(call.failure.splitlines()[0], LINE_CHARS)
    return "ok"


def _text_block(text: str, chars: int) -> list[str]:
    """A text's lines (empty ones dropped) up to about `chars`, cut at a line end with a
    count of the lines left out; tags made inert."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return _excerpt_lines("\n".join(lines), len(lines), chars)


def _excerpt_lines(text: str, max_lines: int, max_chars: int) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    shown: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        if used + len(line) > max_chars:
            if not shown:  # a first line over the budget is cut, not lost whole
                shown.append(_line(line, max_chars))
            break
        shown.append(escape_tags(line))
        used += len(line) + 1
    if len(shown) < len(lines):
        shown.append(f"… ({len(lines) - len(shown)} more lines)")
    return shown


def _indented(line: str, chars: int) -> str:
    """A line cut to `chars` with its indentation kept (code reads by it)."""
    body = line.lstrip()
    return line[: len(line) - len(body)] + _line(body, chars)


def _verbatim(line: str, chars: int) -> str:
    """A line of code as written (its spacing kept), cut to `chars`."""
    return escape_tags(line if len(line) <= chars else line[:chars] + "…")


def _head(text: str, max_lines: int, chars: int = LINE_CHARS, *, code: bool = False) -> list[str]:
    """The first `max_lines` lines of a text, each cut to `chars` (code as written, else
    with its spacing collapsed but its indentation kept), with a count of the rest."""
    lines = text.strip("\n").splitlines()
    cut = _verbatim if code else _indented
    shown = [cut(line.rstrip(), chars) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"… ({len(lines) - max_lines} more lines)")
    return shown


def _head_and_tail(text: str, lines_each: int) -> list[str]:
    """A text's non-blank lines: all when few, else its first and last `lines_each` with a
    count of those between."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if len(lines) <= 2 * lines_each + 1:
        return [_indented(line, LINE_CHARS) for line in lines]
    return [
        *(_indented(line, LINE_CHARS) for line in lines[:lines_each]),
        f"… ({len(lines) - 2 * lines_each} more lines)",
        *(_indented(line, LINE_CHARS) for line in lines[-lines_each:]),
    ]


def _given_text(block: Mapping[str, Any]) -> str:
    """The new content a call gives: a write's code, a long or multi-line command (a patch
    passed to a shell), or a patch tool's input."""
    code = written_code(block)
    if code:
        return code
    command = shell_command(block)
    if command:
        return command if len(command) > COMMAND_CHARS or "\n" in command.strip() else ""
    tool_input = block.get("input")
    if isinstance(tool_input, Mapping):
        for key in ("input", "patch"):
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                return value
    elif isinstance(tool_input, str):
        return tool_input
    return ""


def _is_search(call: Call) -> bool:
    """A search tool's call (Grep, Glob) or a shell search (grep, rg, find…) that answered."""
    if call.is_error is None:
        return False
    if call.command:
        words = command_key(call.command).split()
        return bool(words) and words[0] in SEARCH_PROGRAMS
    return call.name in SEARCH_TOOLS


def _search_outcome(call: Call) -> str:
    """What a search found: no match, its own count line, or how many lines and the first."""
    if call.failed:
        return "failed: " + _line(call.failure.splitlines()[0], LINE_CHARS)
    lines = [line.strip() for line in call.result.splitlines() if line.strip()]
    if not lines or _NO_MATCH.match(lines[0]):
        return "no match"
    if env_file_read(call):
        return f"{len(lines)} line(s) of an env file (its keys are named in section 2)"
    if _FOUND.match(lines[0]):
        return _line(lines[0], LINE_CHARS)
    first = _line(lines[0], LINE_CHARS)
    return f"{len(lines)} line(s), the first: {first}" if len(lines) > 1 else first


def _root(handover: Handover) -> str:
    """The deepest folder (at least `ROOT_MIN_DEPTH` levels down) above the folders of two
    thirds of the absolute paths written and read (so a path keeps its own folder:
    `shop/exporter.py`), or "" when there is none."""
    paths = [*handover.facts.files_modified, *handover.facts.files_read]
    absolute = [p for p in dict.fromkeys(paths) if p.startswith("/")]
    if len(absolute) < 2:
        return ""
    counts: Counter[str] = Counter()
    for path in absolute:
        folders = path.split("/")[1:-2]
        for depth in range(ROOT_MIN_DEPTH, len(folders) + 1):
            counts["/" + "/".join(folders[:depth])] += 1
    shared = [folder for folder, count in counts.items() if 3 * count >= 2 * len(absolute)]
    return max(shared, key=lambda folder: (folder.count("/"), folder), default="")


CACHE_FOLDERS = frozenset(
    {
        "__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox",
        ".venv", "site-packages", "node_modules", "bower_components", "deps", "_build",
        ".next", ".nuxt", "target",
    }
)  # fmt: skip
"""Folders tools fill (caches, installed packages and their builds: Python's, npm's,
Mix's, Next's, Nuxt's, Cargo's): a layout shows the project without them."""


BRACED_SHOWN = 3
"""Folders named in a brace of a layout line too long for its room; the rest counted."""
LAYOUT_MIN_NAMES = 2
"""A listing showing fewer names (once tool folders are left out) shows no layout: one file
found is no folder's layout."""


def _folders_line(folders: Sequence[str], names: Sequence[str], braced: int = 0) -> str:
    """Folders holding the same names in one line, those of one parent braced together:
    `deps/{a, b}/: mix.exs`; with `braced`, at most that many children in each brace and a
    count of the rest (`pkg/{a, b, … 40 more}/: __init__.py`)."""
    by_parent: dict[str, list[str]] = {}
    for folder in folders:
        parent, _, child = folder.rpartition("/")
        by_parent.setdefault(parent, []).append(child)
    parts = []
    for parent, children in by_parent.items():
        if braced and len(children) > braced:
            children = [*children[:braced], f"… {len(children) - braced} more"]
        inner = children[0] if len(children) == 1 else "{" + ", ".join(children) + "}"
        parts.append((f"{parent}/" if parent else "") + inner)
    return ", ".join(f"{part or '.'}/" for part in parts) + ": " + ", ".join(names)


def folder_tree(listing: Listing, root: str, chars: int) -> list[str]:
    """A listing's names grouped by folder (`src/api/: a.py, b.py`; folders holding the
    same names in one line), in the order the listing showed them, tool-filled folders
    (`CACHE_FOLDERS`) left out, within about `chars`, with a count of the names not shown;
    paths relative to `root`."""
    groups: dict[str, list[str]] = {}
    for entry in listing.entries:
        bare = entry.rstrip("/")
        path = bare if "/" in bare or listing.folder == "." else f"{listing.folder}/{bare}"
        path = relative(path, root)
        path = path[2:] if path.startswith("./") else path
        if not CACHE_FOLDERS.isdisjoint(path.split("/")[:-1]):
            continue
        folder, _, name = path.rpartition("/")
        groups.setdefault(folder, []).append(name + ("/" if entry.endswith("/") else ""))
    same: dict[tuple[str, ...], list[str]] = {}
    for folder, in_folder in groups.items():
        same.setdefault(tuple(in_folder), []).append(folder)
    total = sum(len(names) * len(folders) for names, folders in same.items())
    if total < LAYOUT_MIN_NAMES:
        return []
    lines: list[str] = []
    used = shown = 0
    for names, folders in same.items():
        line = _folders_line(folders, names)
        counted = len(names) * len(folders)
        if used + len(line) > chars and len(folders) > 1:
            # Fewer folders, so the names they hold stay (a cut inside the braces hid them).
            line = _folders_line(folders, names, BRACED_SHOWN)
            parents = Counter(folder.rpartition("/")[0] for folder in folders)
            counted = len(names) * sum(min(n, BRACED_SHOWN) for n in parents.values())
        if used + len(line) > chars:
            # The line's start that fits, cut after a name: the rest is counted below.
            cut = line[: max(0, chars - used - 3)].rpartition(", ")[0]
            if cut:
                lines.append(escape_tags(cut + ", …"))
            break
        lines.append(escape_tags(line))
        used += len(line) + 1
        shown += counted
    if total > shown and lines:
        lines.append(f"({total} names in all, not all shown)")
    return lines


BODY_LINES = 15
"""Lines of the definition a file read last shows whole (the one the agent named since)."""
BODY_CHARS = 900
"""Characters of that definition."""
_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
"""A line as a read tool numbers it (`    12→code`)."""
_NAME = re.compile(r"[A-Za-z_][\w.?!-]*")


_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_CALLED = re.compile(r"([A-Za-z_][\w.?!]*)\(")
_IDENTIFIER_SHAPE = re.compile(r"_|(?:^|\.)[a-z][a-z\d]*[A-Z]")
"""A word shaped as code (`load_rows`, `loadRows`), not as English (nor a brand: `GitHub`)."""


def code_names(text: str) -> frozenset[str]:
    """The names a text writes as code: a backticked name (a command's words, `npm run
    build`, are no names), one before a "(", or one shaped as an identifier (an underscore,
    a lower-then-upper letter after a lower first); a plain word ("project") is prose."""
    names = {span.strip() for span in _CODE_SPAN.findall(text) if _NAME.fullmatch(span.strip())}
    names.update(_CALLED.findall(text))
    names.update(word for word in _NAME.findall(text) if _IDENTIFIER_SHAPE.search(word))
    # A sentence's full stop is no part of a name; a question's mark may be ("valid?").
    bare = {cut for name in names for cut in (name.rstrip(".-"), name.rstrip(".-?!"))}
    return frozenset(part for name in bare for part in (name, name.rsplit(".", 1)[-1]) if part)


def _read_code(output: str) -> tuple[list[str], list[str]]:
    """A read's lines without the numbers a read tool put before them, and those numbers
    (none when most lines have none)."""
    lines = output.splitlines()
    matches = [_NUMBERED.match(line) for line in lines]
    if sum(1 for m in matches if m) * 2 >= sum(1 for line in lines if line.strip()):
        code = [m.group(2) if m else "" for m in matches]
        return code, [m.group(1) if m else "" for m in matches]
    return lines, []


def _indent(line: str) -> int:
    """How far a line is indented, in characters."""
    return len(line) - len(line.lstrip())


def _qualified_names(code: Sequence[str], starts: Sequence[int]) -> list[tuple[int, str, str]]:
    """Each definition line's index, name and name within the definitions around it
    (`Store.save`: the less indented ones above it), those defining a name only."""
    found: list[tuple[int, str, str]] = []
    around: list[tuple[int, str]] = []
    for index in starts:
        name = defined_name(code[index])
        if not name:
            continue
        while around and around[-1][0] >= _indent(code[index]):
            around.pop()
        found.append((index, name, ".".join([*(n for _, n in around), name])))
        around.append((_indent(code[index]), name))
    return found


def definition_body(
    output: str, said: Sequence[str], max_lines: int, max_chars: int
) -> tuple[str, list[str]]:
    """The definition of a read's output that the newest of the texts `said` names (the
    agent's words since the read), with its lines up to the next definition as little
    indented, numbered as the read numbered them, within `max_lines` and `max_chars`, with a
    count of the rest; ("", []) when no text names one."""
    code, numbers = _read_code(output)
    starts = definition_lines("\n".join(code))
    defined = _qualified_names(code, starts)
    for text in reversed(said):
        words = code_names(text)
        # A method named with its class (`Other.save`) is that class's, before any `save`.
        index, name = next(
            ((i, n) for i, n, q in defined if "." in q and q in words),
            next(((i, n) for i, n, _ in defined if n in words), (-1, None)),
        )
        if name is None:
            continue
        end = next(
            (j for j in starts if j > index and _indent(code[j]) <= _indent(code[index])),
            len(code),
        )
        while end > index + 1 and not code[end - 1].strip():
            end -= 1
        while index > 0 and code[index - 1].strip().startswith("@"):
            index -= 1  # its decorators are part of it
        body = [
            (f"{numbers[i]:>5}: " if numbers and numbers[i] else "") + code[i].rstrip()
            for i in range(index, end)
        ]
        return name, _excerpt_lines("\n".join(body), max_lines, max_chars)
    return "", []


def read_definitions(output: str, named: frozenset[str], max_lines: int) -> list[str]:
    """The lines of a file's read output that define something (signatures), with their
    line numbers when the read tool numbered them: those defining a name the conversation
    uses (`named`) first, then the others in order, `max_lines` of them, shown in file
    order, with a count of those left out."""
    code, numbers = _read_code(output)
    found = definition_lines("\n".join(code))

    def defines_named(index: int) -> bool:
        return defined_name(code[index]) in named

    chosen = sorted(sorted(found, key=lambda i: (not defines_named(i), i))[:max_lines])
    shown = [
        (f"{numbers[i]:>5}: " if numbers and numbers[i] else "  ")
        + _verbatim(code[i].rstrip(), LINE_CHARS)
        for i in chosen
    ]
    if len(found) > len(chosen) and shown:
        shown.append(f"… ({len(found) - len(chosen)} more definitions)")
    return shown


def _outline(code: str, max_lines: int, max_chars: int) -> list[str]:
    """A long file in `max_lines`: its first `OUTLINE_HEAD` lines, then its definition lines
    with their line numbers, up to `max_chars`; gaps marked."""
    lines = code.splitlines()
    head = min(OUTLINE_HEAD, len(lines))
    shown = [escape_tags(line.rstrip()) for line in lines[:head]]
    used = sum(len(line) + 1 for line in shown)
    last = head - 1
    for index in definition_lines(code):
        line = f"{index + 1:>4}: {lines[index].rstrip()}"
        if index <= last:
            continue
        if len(shown) >= max_lines or used + len(line) > max_chars:
            break
        if index > last + 1:
            shown.append("     …")
        shown.append(escape_tags(line))
        used += len(line) + 1
        last = index
    if last < len(lines) - 1:
        shown.append(f"… ({len(lines) - 1 - last} more lines)")
    return shown


def _edit_summary(change: FileChange) -> str:
    """An edit in one line: how many lines it replaced, from which first line, with how many,
    and which definitions it touched (old → new)."""
    old = [line for line in replaced_code(change.last.block).splitlines() if line.strip()]
    new = [line for line in written_code(change.last.block).splitlines() if line.strip()]
    first = f" from {_quote(old[0].strip(), LINE_CHARS)}" if old else ""
    return f"{len(old)} line(s){first} → {len(new)} line(s), the new code:"


def _previous_intent(summary: str) -> str:
    """The first section of an earlier summary, without the blocks carried separately."""
    match = _SECTION_ONE.search(summary)
    if not match:
        return ""
    kept = [
        line
        for line in match.group(1).splitlines()
        if not line.strip().startswith((">", '- "')) and not line.strip().endswith("(verbatim):")
    ]
    return " ".join(" ".join(kept).split())


def _groups(lines: Sequence[str]) -> list[list[str]]:
    """Lines grouped by item: a line with its more indented lines after it; fenced code left
    out (the previous summary's code is the least of what it carries)."""
    kept: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    if not kept:
        return []
    base = min(len(line) - len(line.lstrip()) for line in kept)
    groups: list[list[str]] = []
    for line in kept:
        text = " " * (len(line) - len(line.lstrip()) - base) + line.strip()
        if groups and text.startswith(" "):
            groups[-1].append(text)
        else:
            groups.append([text])
    return groups


def _newest_within(groups: list[list[str]], chars: int, first: Sequence[int] = ()) -> list[str]:
    """The items that fit in `chars`, those of `first` and then the last (newest) first,
    shown in their order; an item too long keeps its first lines that fit."""
    chosen: dict[int, list[str]] = {}
    left = chars
    order = sorted(first, reverse=True) + [
        i for i in range(len(groups) - 1, -1, -1) if i not in first
    ]
    for index in order:
        lines: list[str] = []
        for line in groups[index]:
            indent = len(line) - len(line.lstrip())
            line = " " * indent + clip(line, LONG_LINE_CHARS)
            if len(line) + 1 > left:
                break
            lines.append(line)
            left -= len(line) + 1
        if lines:
            chosen[index] = lines
        if left <= 0:
            break
    return [line for index in sorted(chosen) for line in chosen[index]]


def landmarks(handover: Handover) -> frozenset[str]:
    """What this part still works with, as a previous summary's errors would name it: the
    port-like numbers (4 or 5 digits) its commands use and the names of the files it
    touched."""
    found: set[str] = set()
    for call in handover.calls:
        if call.command:
            found.update(_PORT.findall(call.command))
        path = file_write_path(call.block) or file_read_path(call.block)
        if path:
            found.add(os.path.basename(path))
    return frozenset(found)


def _mentions(group: Sequence[str], names: frozenset[str]) -> bool:
    words = set(_WORD.findall(" ".join(group)))
    return not words.isdisjoint(names)


def carried_sections(
    summary: str, chars: int, still_used: frozenset[str] = frozenset()
) -> dict[int, list[str]]:
    """What of a previous summary's sections (`CARRIED_SECTIONS`) fits in `chars`: per
    section its newest items first, within its share and what the others leave; its errors
    that name what this part still uses (`still_used`, see `landmarks`: a server's port, a
    file) before the others, as the ones most likely to come back."""
    sections = previous_sections(summary)
    groups = {n: _groups(sections.get(n, [])) for n, _ in CARRIED_SECTIONS}
    need = {n: sum(len(line) + 1 for g in groups[n] for line in g) for n in groups}
    allowance = {n: int(chars * share) for n, share in CARRIED_SECTIONS}
    spare = sum(max(0, allowance[n] - need[n]) for n in groups)
    for number, _ in CARRIED_SECTIONS:
        extra = min(spare, max(0, need[number] - allowance[number]))
        allowance[number] += extra
        spare -= extra
    carried = {
        n: _newest_within(
            groups[n],
            allowance[n],
            [i for i, g in enumerate(groups[n]) if _mentions(g, still_used)] if n == 4 else (),
        )
        for n in groups
    }
    return {n: lines for n, lines in carried.items() if lines}


class _Renderer:
    """Writes the nine sections from a hand-over at a given level."""

    def __init__(self, handover: Handover, *, up_to: bool) -> None:
        self.h = handover
        self.up_to = up_to
        self.root = _root(handover)
        self.errors = self._distinct_errors()
        self.still_used = landmarks(handover)
        self.previous_messages = [
            m for summary in handover.previous_summaries for m in carried_user_messages(summary)
        ]
        # Messages the previous summaries had already left out (their "(N more)" lines).
        self.previous_left_out = sum(
            left_out_user_messages(summary) for summary in handover.previous_summaries
        )
        # Each request once, at its latest place, so the last one is the latest request.
        self.requests = list(dict.fromkeys(r.text for r in reversed(handover.requests)))[::-1]
        self.named = frozenset(
            name
            for text in [*(t for _, t in handover.assistant_texts), *self.requests]
            for name in code_names(text)
        )
        """Names the agent's words and the user's requests use (definitions read are
        listed those first)."""
        self.recent_chars = 0
        """Room of the last steps in the rendering under way (`render`)."""
        self.code_shown: set[int] = set()
        """Where the writes whose code section 3 shows sit, in the rendering under way: the
        last steps do not quote it again."""
        self.answered_chars = 0
        """Room of the answered message in the rendering under way (`render`)."""

    def carried(self, level: _Level, number: int, heading: str = CARRIED_HEADING) -> list[str]:
        """The previous summary's lines of one section kept at this level, under a heading."""
        if not self.h.previous_summaries or not level.carried_chars:
            return []
        lines = carried_sections(
            self.h.previous_summaries[-1], level.carried_chars, self.still_used
        ).get(number)
        if not lines:
            return []
        return ["   " + heading, *(f"     {escape_tags(line)}" for line in lines)]

    def path(self, path: str) -> str:
        """A path relative to the working directory when it is under it."""
        return relative(path, self.root)

    def call(self, call: Call, chars: int = COMMAND_CHARS) -> str:
        """A call described with its path relative to the working directory."""
        return describe_call(call.block, chars, self.root)

    def _distinct_errors(self) -> list[ErrorRecord]:
        """One record per failure text, the latest occurrence deciding whether it is open;
        unresolved first, newest first within each."""
        latest: dict[str, ErrorRecord] = {}
        for record in self.h.errors:
            key = normalize_text(record.call.failure)
            latest.pop(key, None)
            latest[key] = record
        records = list(reversed(latest.values()))
        return [r for r in records if r.resolved_by is None] + [
            r for r in records if r.resolved_by is not None
        ]

    def _calls_after(self, position: int) -> int:
        return sum(1 for call in self.h.calls if call.position > position)

    # -- sections ------------------------------------------------------------------------
    def primary(self, level: _Level) -> list[str]:
        lines = render_latest(self.h.latest_request_text, "   ", level.latest_chars)
        if not lines:
            lines.append("   No user request is recorded in this part of the conversation.")
        lines.extend(self.answered_lines(level))
        requests = self.h.requests
        if len(self.requests) > 1:
            lines.append(
                "   The first request in this part: "
                + _quote(requests[0].text, level.request_chars)
            )
        task = self.h.current_task
        if task is not None:
            title = _title(task.title)
            lines.append(f"   Being worked on: {task.id} ({task.state}){title}")
        lines.extend(render_standing(self.h.standing, "   "))
        if self.h.instruction_files:
            files = ", ".join(self.path(p) for p in self.h.instruction_files)
            lines.append(f"   Instruction files attached in the conversation: {files}")
        if self.h.previous_summaries and level.previous_chars:
            intent = _previous_intent(self.h.previous_summaries[-1])
            if intent:
                lines.append(
                    "   The previous summary's account of the intent: "
                    + _quote(intent, level.previous_chars)
                )
        return lines

    def answered_lines(self, level: _Level) -> list[str]:
        """The agent's message the latest request answers, quoted (its lines, cut at a line
        end with a count of those left out): a "yes" means what it proposed."""
        answered, latest = self.h.answered, self.h.latest_request
        if answered is None or latest is None or not self.answered_chars:
            return []
        short = len(latest.text.split()) <= SHORT_REQUEST_WORDS
        chars = self.answered_chars if short else self.answered_chars // 4
        how = "approves" if self.h.approves else "answers"
        lines = [f"   The agent's message this request {how} (its words, right before it):"]
        lines.extend(f"     {line}" for line in _text_block(answered[1], chars))
        return lines

    def concepts(self, level: _Level) -> list[str]:
        lines: list[str] = []
        if self.root:
            lines.append(f"   - Working directory (paths below are relative to it): {self.root}")
        counts: Counter[str] = Counter()
        for path in (*self.h.facts.files_modified, *self.h.facts.files_read):
            language = _LANGUAGES.get(os.path.splitext(path)[1].lower())
            if language:
                counts[language] += 1
        if counts:
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            lines.append("   - Languages: " + ", ".join(name for name, _ in ranked))
        if self.h.branch:
            lines.append(f"   - Git branch: {escape_tags(self.h.branch)}")
        for env, names in sorted(self.h.env_keys.items()):
            lines.append(
                f"   - Keys in {escape_tags(self.path(env))} (names only): "
                + escape_tags(", ".join(names[:ENV_KEYS_SHOWN]))
                + (f" ({len(names) - ENV_KEYS_SHOWN} more)" if len(names) > ENV_KEYS_SHOWN else "")
            )
        lines += self.carried(level, 2)
        return lines or ["   - None recorded."]

    def _file_lines(self, change: FileChange, level: _Level, excerpt: bool) -> list[str]:
        counts = Counter(call.name for call in change.calls)
        how = ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in counts.items())
        marks = ["created" if change.created else "edited", how]
        last_commit = self.h.last_commit
        if last_commit is not None and change.last.position > last_commit[0].position:
            marks.append("changed after the last commit")
        lines = [f"   - {escape_tags(self.path(change.path))} ({'; '.join(marks)})"]
        said = self.h.said_before(change.last)
        if said and level.details:
            lines.append(
                "     The agent, before its latest change: " + _quote(said, LONG_LINE_CHARS)
            )
        whole = writes_whole_file(change.last.block)
        code = written_code(change.last.block) if excerpt else ""
        shown = _excerpt_lines(code, level.excerpt_lines, level.excerpt_chars) if code else []
        cut = bool(shown) and shown[-1].startswith("… (")
        defined_later = [i for i in definition_lines(code) if i >= OUTLINE_HEAD]
        outlined = whole and cut and len(defined_later) >= OUTLINE_MIN_DEFINITIONS
        names = change.definitions[:DEFINITIONS_SHOWN] if level.details else []
        # A file shown whole or outlined names its definitions itself.
        if names and not (whole and shown and (outlined or not cut)):
            lines.append("     Defines: " + escape_tags(", ".join(names)))
        if not shown:
            return lines
        self.code_shown.add(change.last.position)
        if outlined:
            shown = _outline(code, level.excerpt_lines, level.excerpt_chars)
            lines.append(
                f"     Its content as last written ({change.last.name}), its first lines and "
                "then each line that defines something:"
            )
        elif whole:
            lines.append(f"     Its content as last written ({change.last.name}):")
        else:
            lines.append(f"     Its latest change ({change.last.name}): {_edit_summary(change)}")
        lines.append("     ```")
        lines.extend(f"     {line}" for line in shown)
        lines.append("     ```")
        return lines

    def files(self, level: _Level, cuts: _Cuts) -> list[str]:
        lines: list[str] = []
        changes = self.h.changes
        if changes:
            keep = level.files if cuts.files is None else cuts.files
            lines.append(f"   Changed ({len(changes)}), the most recent first:")
            for index, change in enumerate(changes[:keep]):
                lines.extend(self._file_lines(change, level, index < level.excerpts))
            rest = changes[keep:]
            listed = level.earlier_files if cuts.earlier is None else cuts.earlier
            if rest and listed:
                names = ", ".join(escape_tags(self.path(c.path)) for c in rest[:listed])
                more = f" ({len(rest) - listed} more)" if len(rest) > listed else ""
                lines.append(f"   - Also changed, earlier: {names}{more}")
            elif rest:
                lines.append(f"   - ({len(rest)} more)")
        written = {c.path for c in changes}
        read = [p for p in reversed(self.h.facts.files_read) if p not in written]
        if read and level.read_files:
            shown = [escape_tags(self.path(p)) for p in read[: level.read_files]]
            more = f" ({len(read) - level.read_files} more)" if len(read) > level.read_files else ""
            lines.append(
                f"   Read, not changed ({len(read)}), the most recent first: "
                + ", ".join(shown)
                + more
            )
        elif read:
            lines.append(f"   {len(read)} other file(s) were read, not changed.")
        lines += self.read_outlines(read, level)
        lines += self.layout(level)
        lines += self.carried(level, 3)
        return lines or ["   No file was read or changed."]

    def read_outlines(self, paths: Sequence[str], level: _Level) -> list[str]:
        """What the files read last that define something define (`level.read_outlines` of
        them), as their latest read showed it (signatures with line numbers), the
        definitions of names the conversation uses first."""
        lines: list[str] = []
        files = 0
        for path in paths:
            if files >= level.read_outlines:
                break
            if is_env_file(path):
                continue  # its values stay unshown: section 2 names its keys only
            call = next(
                (
                    c
                    for c in reversed(self.h.calls)
                    if c.path_read == path and not c.failed and c.result.strip()
                ),
                None,
            )
            if call is None or self._removed_since(path, call.position):
                continue
            shown = read_definitions(call.result, self.named, level.outline_lines)
            if not shown:
                continue
            files += 1
            lines.append(f"   - {escape_tags(self.path(path))} as last read, its definitions:")
            lines.extend(f"     {line}" for line in shown)
            said = [
                t
                for p, t in self.h.assistant_texts
                if p > call.position and self._may_be_about(t, path)
            ]
            name, body = definition_body(call.result, said, BODY_LINES, BODY_CHARS)
            if body:
                lines.append(
                    f"     `{escape_tags(name)}` as read (the agent's words since name it):"
                )
                lines.extend(["     ```", *(f"     {line}" for line in body), "     ```"])
        return lines

    def _removed_since(self, path: str, position: int) -> bool:
        """Whether a command after `position` removed the file (`rm`, `git rm`)."""
        for call in self.h.calls:
            if call.position <= position or not call.command or call.failed:
                continue
            for removed in removed_paths(call.command):
                removed = removed.removeprefix("./")
                if path == removed or path.endswith("/" + removed):
                    return True
        return False

    def _may_be_about(self, text: str, path: str) -> bool:
        """Whether a text may speak of the file at `path`: it names it, or no other file read."""
        named = {os.path.basename(p) for p in mentioned_paths(text)}
        others = {os.path.basename(p) for p in self.h.facts.files_read} - {os.path.basename(path)}
        return os.path.basename(path) in named or named.isdisjoint(others)

    def layout(self, level: _Level) -> list[str]:
        """The folders the agent listed, each as it last listed them, the newest first."""
        lines: list[list[str]] = []
        for listing in reversed(self.h.listings):
            if len(lines) >= level.listings:
                break
            tree = folder_tree(listing, self.root, level.layout_chars)
            if tree:
                ago = self._calls_after(listing.call.position)
                lines.append(
                    [
                        f"   - {self.call(listing.call)} ({ago} tool call(s) ago):",
                        *(f"     {line}" for line in tree),
                    ]
                )
        if not lines:
            return []
        heading = "   Folders as the agent last listed them (the newest first):"
        return [heading, *(line for shown in lines for line in shown)]

    def _error_lines(self, record: ErrorRecord, level: _Level) -> list[str]:
        call = record.call
        if record.resolved_by is not None:
            state = "Fixed"
        elif call.position >= self.h.work_start:
            state = "Unresolved"
        else:
            state = "Not seen fixed (before the current work began)"
        lines = [f"   - {state}: {self.call(call)} failed:"]
        failure = call.failure.splitlines()[: level.error_lines]
        lines.extend(f"       {_line(line, LONG_LINE_CHARS)}" for line in failure)
        if level.details and record.reading:
            lines.append("     The agent's next words: " + _quote(record.reading, QUOTE_CHARS))
        if level.details and record.tried:
            tried = "; ".join(f"{self.call(c)} ({_outcome(c)})" for c in record.tried)
            lines.append(f"     Done after it: {tried}")
        if record.resolved_by is not None:
            lines.append(f"     Fixed by: {self.call(record.resolved_by)} (succeeded)")
        return lines

    def errors_section(self, level: _Level, cuts: _Cuts) -> list[str]:
        carried = self.carried(level, 4)
        noted = self._noted_lines(level)
        if noted:
            carried = noted + carried
        if not self.errors:
            if carried:
                return [
                    "   In this part no call failed and no output reported a failure.",
                    *carried,
                ]
            return ["   None: no call failed, no output reported a failure."]
        keep = level.errors if cuts.errors is None else cuts.errors
        unresolved = [r for r in self.errors if r.resolved_by is None]
        shown = self.errors[: max(keep, min(len(unresolved), UNRESOLVED_SHOWN))]
        if cuts.fixed_errors is not None:
            # Unresolved first, the fixed ones after them: those past the cut go.
            shown = shown[: sum(1 for r in shown if r.resolved_by is None) + cuts.fixed_errors]
        lines: list[str] = []
        for record in shown:
            lines.extend(self._error_lines(record, level))
        if len(shown) < len(self.errors):
            lines.append(f"   - ({len(self.errors) - len(shown)} earlier errors not shown)")
        return lines + carried

    def _noted_lines(self, level: _Level) -> list[str]:
        """The problems the agent reported in its own words, the newest `level.errors`, each
        with the first file change or command after it."""
        noted = self.h.noted_problems[-level.errors :] if level.errors else []
        if not noted:
            return []
        lines = ["   Problems the agent reported in its own words (newest last):"]
        for position, sentence in noted:
            after = next(
                (
                    c
                    for c in self.h.calls
                    if c.position > position and (c.path_written or c.command)
                ),
                None,
            )
            then = f" Then: {self.call(after)} ({_outcome(after)})." if after else ""
            lines.append(f"   - {_quote(sentence, LONG_LINE_CHARS)}{then}")
        return lines

    def _git_lines(self, level: _Level) -> list[str]:
        h = self.h
        lines: list[str] = []
        commits = [commit for _, commit in h.commits]
        shown = commits[-level.git_events :] if level.git_events else []
        lines.extend(_earlier("commits", [c.sha for c in commits[: len(commits) - len(shown)]]))
        for commit in shown:
            stat = f" ({escape_tags(commit.stat)})" if commit.stat else ""
            lines.append(
                f"   - Committed {commit.sha} on {commit.branch}: "
                f"{_quote(commit.message, LINE_CHARS)}{stat}"
            )
        pushes = h.pushes[-level.git_events :] if level.git_events else []
        earlier = h.pushes[: len(h.pushes) - len(pushes)]
        targets = [_line(push_target(p) or self.call(p), LINE_CHARS) for p in earlier]
        lines.extend(_earlier("pushes", targets))
        for push in pushes:
            target = push_target(push)
            lines.append(
                "   - Pushed"
                + (f": {_line(target, LINE_CHARS)}" if target else f" ({self.call(push)})")
            )
        last = h.last_commit
        if last is not None:
            pending = h.written_after(last[0].position)
            if pending:
                files = ", ".join(escape_tags(self.path(p)) for p in pending)
                lines.append(
                    f"   - Changed after the last commit ({last[1].sha}), so not in it: {files}"
                )
            else:
                lines.append(f"   - No file was changed after the last commit ({last[1].sha}).")
            if not h.pushes or h.pushes[-1].position < last[0].position:
                lines.append(f"   - No push recorded after the last commit ({last[1].sha}).")
        ran_git = any(command_key(c.command or "").startswith("git ") for c in h.calls)
        if last is None and ran_git:
            lines.append("   - No commit seen in this part.")
        elif not ran_git and h.changes:
            lines.append(
                f"   - No git command ran in this part; the {len(h.changes)} changed file(s) of "
                "section 3 are presumably uncommitted (check git status)."
            )
        status = h.git_status
        if status is not None:
            later = len(h.written_after(status.position))
            when = (
                f", before {later} later file change(s)"
                if later
                else ", after the last file change"
            )
            lines.append(
                f"   - The last {command_text(status.command or 'git status')} ({when[2:]}):"
            )
            lines.extend(
                f"       {line}"
                for line in _excerpt_lines(status.result, STATUS_LINES, STATUS_LINES * 60)
            )
        return lines

    def problem_solving(self, level: _Level) -> list[str]:
        lines: list[str] = []
        git = self._git_lines(level)
        if git:
            lines.append("   Git:")
            lines.extend(git)
        if self.h.checks:
            lines.append("   Checks, the last run of each:")
            for check in self.h.checks:
                verdict = "failed" if check.call.failed else "passed"
                since = f"; {check.writes_after} file change(s) since" if check.writes_after else ""
                lines.append(
                    f"   - {command_text(check.call.command or check.key)} {verdict}: "
                    f"{_quote(check.outcome, LINE_CHARS)}{since}"
                )
        decisions = self.h.decisions[-level.decisions :] if level.decisions else []
        if decisions:
            lines.append("   Decisions and reasons, in the agent's words (latest last):")
            lines.extend(f"   - {_line(d, LONG_LINE_CHARS)}" for d in decisions)
        lines += self.carried(level, 5)
        return lines or ["   None."]

    def carried_kept(self, level: _Level, cuts: _Cuts) -> int:
        """How many of the previous summary's user messages this rendering lists: the
        level's bound, cut further when even the lean level is too long, never below the
        first (the task)."""
        keep = min(level.carried_messages, len(self.previous_messages))
        return keep if cuts.carried is None else max(1, min(keep, cuts.carried))

    def user_messages(self, level: _Level, cuts: _Cuts) -> list[str]:
        lines: list[str] = []
        if self.previous_messages:
            lines.append("   Listed by the previous summary:")
            keep = self.carried_kept(level, cuts)
            lines.extend(
                f"   - {item}"
                for item in _shown_after_first(
                    [_quote(m, level.request_chars) for m in self.previous_messages],
                    keep,
                    self.previous_left_out,
                )
            )
        quoted = [_quote(text, level.request_chars) for text in self.requests[:-1]]
        if self.requests:
            quoted.append(_quote(self.requests[-1], LATEST_PREVIEW_CHARS))
        keep = len(quoted) if cuts.prompts is None else cuts.prompts
        lines.extend(f"   - {q}" for q in shown_items(quoted, keep))
        if self.requests:
            lines.append("   (The last of them is the latest request, quoted whole in section 1.)")
        return lines or ["   None in this part."]

    def _spec_lines(self, level: _Level, cuts: _Cuts) -> list[str]:
        task = self.h.current_task
        if task is None or not task.spec:
            return []
        keep = level.spec_lines if cuts.spec_lines is None else cuts.spec_lines
        lines: list[str] = []
        if keep:
            lines.append(f"   What {task.id} asks for (its tracker entry):")
            lines.extend(f"     {line}" for line in _excerpt_lines(task.spec, keep, keep * 100))
        named = list(dict.fromkeys(p for p in mentioned_paths(task.spec) if "/" in p))
        if named:
            marks: list[str] = []
            for path in named:
                change = next(
                    (c for c in self.h.changes if c.path.endswith(path.lstrip("./"))), None
                )
                if change is None:
                    marks.append(f"{escape_tags(path)} (not changed)")
                elif change.last.position > task.started:
                    marks.append(f"{escape_tags(path)} (changed since {task.id} started)")
                else:
                    marks.append(f"{escape_tags(path)} (changed before {task.id} started)")
            lines.append("   Files its entry names: " + "; ".join(marks))
        return lines

    def pending(self, level: _Level, cuts: _Cuts) -> list[str]:
        lines: list[str] = []
        items = self.h.tracker_items
        if items:
            lines.append("   Tracker, as the agent's commands left it:")
            for item in items[-TRACKER_SHOWN:]:
                title = _title(item.title)
                lines.append(f"   - {item.id}: {item.state}{title}{_relation_marks(item)}")
            lines.extend(self._spec_lines(level, cuts))
        open_items = self.h.open_todos
        done = self.h.done_todos
        if self.h.todos:
            lines.append(
                f"   Todo list as last written ({len(done)} done, {len(open_items)} open):"
            )
            for todo in open_items:
                lines.append(
                    f"   - [{todo.get('status', 'pending')}] {_line(_todo_text(todo), LINE_CHARS)}"
                )
            if done:
                lines.append(
                    "   Done: " + "; ".join(_line(_todo_text(t), LINE_CHARS) for t in done)
                )
        if self.h.request_items:
            lines.append("   Items of the latest request:")
            lines.extend(f"   - {_line(item, LINE_CHARS)}" for item in self.h.request_items)
        for status in self.h.status_files[-STATUS_FILES_SHOWN:] if level.details else ():
            lines.append(
                f"   Still open in {escape_tags(self.path(status.path))}, as the agent read it "
                f"({self._calls_after(status.position)} tool call(s) ago):"
            )
            lines.extend(f"   - {_line(item, LINE_CHARS)}" for item in status.open_items)
        if self._untouched_plan_items():
            lines.append("   The agent's plan has items no file change answers yet (section 9).")
        if self._open_errors():
            lines.append(f"   {len(self._open_errors())} error(s) unresolved (section 4).")
        if not lines:
            latest = self.h.latest_request_text
            if latest is not None and not self.h.last_event_is_answer:
                lines.append(
                    "   No task list was kept; the latest request (section 1) was still being "
                    "worked on."
                )
            else:
                lines.append("   No task list was kept; see sections 8 and 9.")
        return lines + self.carried(level, 7, CARRIED_PENDING_HEADING)

    def _open_errors(self) -> list[ErrorRecord]:
        """Errors of the current work (since `work_start`) no later call fixed."""
        since = self.h.work_start
        return [r for r in self.errors if r.resolved_by is None and r.call.position >= since]

    def _untouched_plan_items(self) -> list[str]:
        plan = self.h.plan
        if plan is None:
            return []
        return [item.text for item in plan.items if item.names_files and not item.changed]

    def _plan_lines(self, plan: Plan) -> list[str]:
        calls = self._calls_after(plan.position)
        lines = [
            f"   Its latest plan ({calls} tool call(s) ago), each item with the files changed "
            "since:"
        ]
        lines.append("     " + _quote(plan.intro, QUOTE_CHARS))
        for number, item in enumerate(plan.items, 1):
            if item.changed:
                mark = "changed since: " + ", ".join(
                    escape_tags(self.path(p)) for p in item.changed
                )
            elif item.names_files:
                mark = "no change since"
            else:
                mark = ""
            lines.append(
                f"     {number}. {_line(item.text, LONG_LINE_CHARS)}"
                + (f" [{mark}]" if mark else "")
            )
        return lines

    def current(self, level: _Level) -> list[str]:
        lines: list[str] = []
        latest = self.h.latest_request
        since = latest.position if latest is not None else 0
        plan = self.h.plan
        recent, oldest = self.recent_steps(self.recent_chars)
        # The agent's words the last steps or section 1 quote are not repeated here.
        quoted = {self.h.answered[0]} if self.h.answered and self.answered_chars else set()
        texts = [
            (p, t)
            for p, t in self.h.assistant_texts
            if not self._only_the_plan(p, t) and p < oldest and p not in quoted
        ]
        reports = (
            [(p, t) for p, t in texts if p >= since][-level.reports :] if level.reports else []
        )
        earlier = next(
            ((p, t) for p, t in reversed(texts) if p < since and len(t) >= REPORT_MIN_CHARS), None
        )
        shown = {p for p, _ in reports} | ({earlier[0]} if earlier and level.reports else set())
        findings = [(p, f) for p, f in self.h.findings if p not in shown | quoted and p < oldest]
        findings = findings[-level.findings :] if level.findings else []
        if findings:
            lines.append("   Findings and results the agent stated earlier (newest last):")
            lines.extend(f"   - {_line(f, LONG_LINE_CHARS)}" for _, f in findings)
        if earlier is not None and level.reports:
            lines.append("   The agent's last full report before the latest request:")
            lines.extend(f"     {line}" for line in _text_block(earlier[1], level.report_chars))
        if reports:
            lines.append("   The agent's latest words (newest last):")
            for position, text in reports:
                calls = self._calls_after(position)
                ago = f"{calls} tool call(s) ago" if calls else "its last message"
                block = _text_block(text, level.report_chars)
                lines.append(f"   - ({ago}) {block[0]}")
                lines.extend(f"     {line}" for line in block[1:])
        if plan is not None:
            lines.extend(self._plan_lines(plan))
        agents = [
            c
            for c in self.h.calls
            if c.name in SUBAGENT_TOOLS and since <= c.position < oldest  # else a last step
        ]
        for call in agents[-level.reports :] if level.reports else []:
            lines.append(f"   Report of the sub-agent {self.call(call)}:")
            lines.extend(f"     {line}" for line in _text_block(call.result, level.report_chars))
        searches = [c for c in self.h.calls if _is_search(c)][-SEARCHES_SHOWN:]
        if searches and level.details:
            lines.append("   What the latest searches found (newest last):")
            lines.extend(f"   - {self._search_line(call)}" for call in searches)
        made = self.h.made[-MADE_SHOWN:]
        if made and level.details:
            lines.append(
                "   Commands that made or started something (the last of each program and script):"
            )
            lines.extend(
                f"   - {command_text(shorten_quoted(segment))} "
                f"({self._calls_after(call.position)} tool call(s) "
                "ago)"
                for call, segment in made
            )
        if self.h.notifications:
            lines.append("   Background task notifications (events, not requests):")
            for note in self.h.notifications[-NOTIFICATIONS_SHOWN:]:
                what = notification_summary(note) or note.status or "notification"
                lines.append(f"   - task {note.task_id or '?'}: {_line(what, LINE_CHARS)}")
        lines.extend(recent)
        return lines or ["   Nothing recorded."]

    def recent_steps(self, chars: int) -> tuple[list[str], int]:
        """The last steps as they happened, newest last, within `chars` filled from the
        newest backwards (the newest always shown), and where the oldest shown sits (past the
        end when none is)."""
        if not chars:
            return [], self.h.positions + 1
        events: list[tuple[int, Any]] = [
            *((p, t) for p, t in self.h.assistant_texts),
            *((c.position, c) for c in self.h.calls),
            *((r.position, r) for r in self.h.requests),
        ]
        events.sort(key=lambda event: event[0])
        steps, oldest, left = self._newest_steps(events, chars)
        if left:
            # Not every step fits: the earlier ones' commands take the room they need first
            # (at most `room`), and the steps the rest; when more steps then drop out and
            # their commands no longer fit beside them, the commands get all of `room`.
            n = len(events)
            chars -= len(_STEPS_HEAD.format(shown=n, left=n, where=_WITH_COMMANDS)) + 1
            room = min(EARLIER_COMMANDS_CHARS, chars // 4)
            need = _size(_earlier_commands(events[:left], room))
            steps, oldest, left = self._newest_steps(events, chars - need)
            earlier = _earlier_commands(events[:left], room)
            if _size(earlier) + sum(_size(lines) for lines in steps) > chars:
                steps, oldest, left = self._newest_steps(events, chars - room)
                earlier = _earlier_commands(events[:left], room)
            where = _WITH_COMMANDS if earlier else "not shown"
            heading = _STEPS_HEAD.format(shown=len(steps), left=left, where=where)
            return [heading, *earlier, *(line for lines in steps for line in lines)], oldest
        if not steps:
            return [], oldest
        heading = "   Every step as it happened (newest last):"
        return [heading, *(line for lines in steps for line in lines)], oldest

    def _newest_steps(
        self, events: Sequence[tuple[int, Any]], chars: int
    ) -> tuple[list[list[str]], int, int]:
        """The newest steps within `chars` (the newest always), oldest first, where the
        oldest shown sits, and how many earlier events are left out."""
        shown: list[list[str]] = []
        used = 0
        oldest = self.h.positions + 1
        for position, event in reversed(events):
            lines = self._step(position, event)
            size = sum(len(line) + 1 for line in lines)
            if shown and used + size > chars:
                break
            shown.append(lines)
            used += size
            oldest = position
        shown.reverse()
        return shown, oldest, len(events) - len(shown)

    def _step(self, position: int, event: Any) -> list[str]:
        """One step: a user request, an agent text (whole up to `RECENT_TEXT_CHARS`), or a
        tool call with what it was given and what came back."""
        if isinstance(event, str):
            answered = self.h.answered
            if answered is not None and answered[0] == position:
                return ["   - The agent: (its message quoted in section 1)"]
            if self._only_the_plan(position, event):
                return ["   - The agent: (its plan, shown above with the files changed since)"]
            block = _text_block(event, RECENT_TEXT_CHARS)
            return [f"   - The agent: {block[0]}", *(f"     {line}" for line in block[1:])]
        if not isinstance(event, Call):
            return [f"   - The user: {_quote(event.text, LATEST_PREVIEW_CHARS)}"]
        call = event
        given = _given_text(call.block)
        # A command quoted line by line below is named by its program in the headline.
        lines = [f"   - {self.call(call, 0 if given == call.command else COMMAND_CHARS)}"]
        if given and call.position in self.code_shown:
            lines.append("       | (its code is shown in section 3)")
        elif given:
            lines.extend(
                f"       | {line}".rstrip() for line in _head(given, RECENT_INPUT_LINES, code=True)
            )
        if call.is_error is None:
            lines.append("     -> no result recorded")
        elif env_file_read(call):
            # An env file's values are never quoted: section 2 names its keys.
            outcome = "failed" if call.failed else "ok"
            lines.append(f"     -> {outcome} (an env file's lines)")
        elif call.failed:
            lines.append("     -> failed:")
            lines.extend(
                f"       {line}"
                for line in _head(call.failure, RECENT_ERROR_LINES, LONG_LINE_CHARS)
            )
        elif (file_read := bool(call.path_read) and not call.command) or (
            call.path_written or not call.result.strip()
        ):
            # A file tool's read is counted; what a shell read shows (a log's tail) is quoted.
            size = len(call.result.splitlines())
            lines.append("     -> ok" + (f" ({size} lines)" if file_read else ""))
        else:
            lines.append("     -> ok:")
            lines.extend(
                f"       {line}" for line in _head_and_tail(call.result, RECENT_RESULT_LINES)
            )
        return lines

    def _search_line(self, call: Call) -> str:
        """A search in one line: what it looked for, where, and what it found."""
        if call.command:
            what = command_text(call.command)
        else:
            tool_input = call.block.get("input")
            given = tool_input if isinstance(tool_input, Mapping) else {}
            pattern = given.get("pattern", "")
            where = given.get("path") or given.get("glob") or ""
            what = f"{call.name} `{_line(str(pattern), LINE_CHARS)}`" + (
                f" in {escape_tags(self.path(str(where)))}" if where else ""
            )
        return f"{what}: {_search_outcome(call)}"

    def _only_the_plan(self, position: int, text: str) -> bool:
        """Whether an agent text is little more than its plan (shown apart)."""
        plan = self.h.plan
        if plan is None or position != plan.position:
            return False
        planned = len(plan.intro) + sum(len(item.text) for item in plan.items)
        return len(text) - planned < PLAN_ONLY_SLACK

    def _next_actions(self) -> list[str]:
        """What is left to do, the most pressing first: the open errors nothing changed
        after, the checks files changed after (re-run together), the other open errors, what
        the agent said it was about to do (nothing done since), the latest request's steps
        not reported yet, the plan items no change answers, the todo list, the tracker (the
        item in progress, closed and committed the way earlier ones were; the next ready
        one), the files not committed."""
        actions: list[str] = self._approved()
        # An error nothing was changed after is fixed first; after changes, the checks that
        # have not seen them run first (they say whether the error and the rest still stand).
        records = self._open_errors()[:UNRESOLVED_SHOWN]
        untouched = [r for r in records if not self.h.written_after(r.call.position)]
        actions.extend(self._fix(record) for record in untouched)
        stale = self._stale_checks()
        if stale:
            actions.append(stale)
        actions.extend(self._fix(record) for record in records if record not in untouched)
        stated = self._stated_since_request()
        if stated is not None and not self._calls_after(stated[0]):
            actions.append(
                "what the agent said it would do next: " + _quote(stated[1], QUOTE_CHARS)
            )
        steps = self.h.request_steps
        if any(step.reported for step in steps):
            reported = max(i for i, step in enumerate(steps) if step.reported)
            actions.extend(
                "the latest request's next step: " + _quote(step.text, LINE_CHARS)
                for step in steps[reported + 1 :]
            )
        elif steps and self.h.step_on is not None and self.h.step_on[0] + 1 < len(steps):
            index, sentence, changes = self.h.step_on
            actions.append(
                f"the latest request's next step: {_quote(steps[index + 1].text, LINE_CHARS)} "
                f"(the agent was last on step {index + 1}, "
                f"{_quote(steps[index].text, LINE_CHARS)}: {_quote(sentence, LINE_CHARS)}, "
                f"then {changes} file change(s); check it is done)"
            )
            actions.extend(
                "the latest request's next step: " + _quote(step.text, LINE_CHARS)
                for step in steps[index + 2 :]
            )
        elif steps:
            actions.append(
                "the latest request's steps, in this order (its words, none reported done in "
                "the agent's words since): "
                + " ".join(f"({n}) {_quote(s.text, LINE_CHARS)}" for n, s in enumerate(steps, 1))
            )
        plan = self.h.plan
        for number, item in enumerate(plan.items if plan else (), 1):
            if item.names_files and not item.changed:
                files = ", ".join(escape_tags(self.path(p)) for p in item.files)
                actions.append(
                    f"item {number} of its plan: {_line(item.text, LINE_CHARS)}"
                    + (f" ({files})" if files else "")
                )
        for todo in self.h.todos_with("in_progress"):
            actions.append("finish the todo in progress: " + _line(_todo_text(todo), LINE_CHARS))
        for todo in self.h.todos_with("pending", "open", "todo")[:PENDING_SHOWN]:
            actions.append("the next todo: " + _line(_todo_text(todo), LINE_CHARS))
        task = self.h.current_task
        if task is not None:
            actions.append(
                f"finish the tracker item {task.id}"
                + _title(task.title)
                + (f", then {self._wrap_up(task)}" if self.h.closes else ", and close it")
            )
        ready = self.h.next_ready
        if ready is not None:
            actions.append(
                f"start the next task the tracker lists as ready: {ready.id}" + _title(ready.title)
            )
        if task is None or not self.h.closes:
            commit = self._commit_pending()
            if commit:
                actions.append(commit)
        return actions

    def _approved(self) -> list[str]:
        """When the latest request approves the agent's message: the items of its proposal
        not reported done since, in order, or (a proposal without a numbered list) doing
        what it proposed."""
        if not self.h.approves or self.h.answered is None:
            return []
        latest = _quote(self.h.latest_request_text or "", LINE_CHARS)
        if not self.h.proposal:
            return [
                f"do what the agent proposed in its message quoted in section 1: the user's "
                f"{latest} approves it"
            ]
        return [
            f"item {number} of the proposal the user approved ({latest}, section 1), not "
            f"reported done since: {_quote(step.text, LINE_CHARS)}"
            for number, step in enumerate(self.h.proposal, 1)
            if not step.reported
        ]

    def _stated_since_request(self) -> tuple[int, str] | None:
        """The next step the agent stated after the latest request, with where: one stated
        before it answered an older request and is no next step now."""
        latest, stated = self.h.latest_request, self.h.next_step
        if stated is None or (latest is not None and stated[0] < latest.position):
            return None
        return stated

    def _commit_pending(self) -> str:
        """Committing the files changed after the last commit, or "" (no commit, or none)."""
        last_commit = self.h.last_commit
        if last_commit is None:
            return ""
        pending = self.h.written_after(last_commit[0].position)
        if not pending:
            return ""
        return f"commit the {len(pending)} file(s) changed after {last_commit[1].sha} (section 5)"

    def _fix(self, record: ErrorRecord) -> str:
        first = failure_headline(record.call.failure)
        return (
            f"fix {_quote(first, LINE_CHARS)}, which {self.call(record.call)} reported "
            "(section 4), and run it again"
        )

    def _stale_checks(self) -> str:
        """Re-running the checks that files changed after, as one action (they come first:
        the work they last judged is not the work there now), or ""."""
        stale = [check for check in self.h.checks if check.writes_after]
        if not stale:
            return ""
        commands = ", ".join(command_text(c.call.command or c.key) for c in stale)
        changed = self.h.written_after(min(c.call.position for c in stale))
        names = ", ".join(escape_tags(self.path(p)) for p in changed)
        return (
            f"re-run {commands} ({len(changed)} file(s) changed since: {names}) and fix what "
            + ("they report" if len(stale) > 1 else "it reports")
        )

    def _wrap_up(self, task: TrackerItem) -> str:
        """Closing a tracker item the way the session closed earlier ones: its close command,
        a commit when the part committed, then the parent (`a.3`'s is `a`) if still open."""
        close_call, closed_id = self.h.closes[-1]
        steps = [
            f"close it ({command_key(close_call.command or '')} {task.id}, as the session "
            f"closed {closed_id})"
        ]
        if self.h.commits:
            steps.append(self._commit_pending() or "commit")
        parent = task.id.rpartition(".")[0]
        if parent and parent not in {item_id for _, item_id in self.h.closes}:
            steps.append(f"close the parent {parent} if all its children are closed")
        return ", ".join(steps)

    def _larger_plan(self, level: _Level) -> list[str]:
        """What comes after the work of this part: the previous summary's next step (when the
        level carries the previous summary) and the open items of the status and plan files
        the agent read."""
        actions: list[str] = []
        if self.h.previous_summaries and level.carried_chars:
            said = [
                line.strip()
                for line in previous_sections(self.h.previous_summaries[-1]).get(9, [])
                if not line.strip().startswith(_OWN_NEXT_STEP_BOILERPLATE)
            ]
            if said:
                actions.append(
                    "the previous summary's next step (the larger plan; this part may have done "
                    "some of it): " + _quote(" ".join(said), QUOTE_CHARS)
                )
        for status in self.h.status_files[-STATUS_FILES_SHOWN:]:
            actions.append(
                f"what {escape_tags(self.path(status.path))} lists as still open: "
                + "; ".join(
                    _line(item, LINE_CHARS)
                    for item in status.open_items
                    if not item.startswith("#")  # a heading is no step
                )
            )
        return actions

    def next_step(self, level: _Level) -> list[str]:
        if self.up_to:
            return ["   The messages that follow this summary continue the work; read them next."]
        lines: list[str] = []
        own = self._next_actions()
        actions = own + self._larger_plan(level)
        if actions:
            lines.append("   Next: " + actions[0][0].upper() + actions[0][1:] + ".")
            if len(actions) > 1:
                lines.append("   Then:")
                lines.extend(f"   - {action}" for action in actions[1 : 1 + level.follow_ups])
                if len(actions) > 1 + level.follow_ups:
                    lines.append(f"   - ({len(actions) - 1 - level.follow_ups} more, sections 7–8)")
        stated = self._stated_since_request()
        if stated is not None and self._calls_after(stated[0]):
            position, step = stated
            lines.append(
                f"   The agent's last stated intention ({self._calls_after(position)} tool "
                f"call(s) ago, so possibly done): " + _quote(step, QUOTE_CHARS)
            )
        if self.h.last_event_is_answer and not own and not self.h.request_items:
            lines.append(
                "   The last reply may have finished the latest request (section 1): check it "
                "against sections 7 and 8; if nothing remains, report the result and wait for "
                "the user."
            )
        else:
            lines.append(
                "   Continue with the latest request (section 1) from there, without asking the "
                "user to repeat anything."
            )
        return lines

    # -- whole text ----------------------------------------------------------------------
    def render(self, level: _Level, cuts: _Cuts, room: int | None = None) -> str:
        """The summary at this level; given `room` (characters for the whole text), the last
        steps take what the other sections leave, between `RECENT_MIN_CHARS` and
        `RECENT_ROOM_CHARS` (or the level's `recent_chars`, or the cut's, when set)."""
        most = (
            level.recent_chars
            if cuts.recent is None
            else min(level.recent_chars, cuts.recent * 100)
        )
        self.answered_chars = (
            level.answered_chars
            if cuts.answered is None
            else min(level.answered_chars, cuts.answered * 100)
        )
        self.recent_chars = most
        if room is not None and most:
            self.recent_chars = 0
            rest = len(self._render(level, cuts))
            level, rest = self._with_code(level, cuts, room, rest)
            # A leaner level leaves more room: the last steps take it, up to their bound.
            most = max(most, RECENT_ROOM_CHARS) if cuts.recent is None else most
            self.recent_chars = max(min(RECENT_MIN_CHARS, most), min(most, room - rest))
        return self._render(level, cuts)

    def _with_code(self, level: _Level, cuts: _Cuts, room: int, rest: int) -> tuple[_Level, int]:
        """The level with the code of the files changed last (and the definitions of those
        read last) given up to half the room the other sections leave, before the last steps
        take the rest, and the length of the other sections then; the level as it is when
        that room is too small or the code adds nothing."""
        chars = min(CODE_ROOM_CHARS, (room - rest - RECENT_MIN_CHARS) // 2)
        if chars < CODE_MIN_CHARS:
            return level, rest
        fuller = replace(
            level,
            excerpts=max(level.excerpts, CODE_EXCERPTS),
            excerpt_lines=max(level.excerpt_lines, CODE_EXCERPT_LINES),
            excerpt_chars=max(level.excerpt_chars, chars // CODE_EXCERPTS),
            read_outlines=max(level.read_outlines, 1),
        )
        if fuller == level:
            return level, rest
        longer = len(self._render(fuller, cuts))
        if longer == rest or longer - rest > chars:
            return level, rest
        return fuller, longer

    def _render(self, level: _Level, cuts: _Cuts) -> str:
        self.code_shown = set()
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
            ("5. Problem Solving:", self.problem_solving(level)),
            ("6. All user messages:", self.user_messages(level, cuts)),
            ("7. Pending Tasks:", self.pending(level, cuts)),
            (f"8. {eighth}:", self.current(level)),
            (f"9. {ninth}:", self.next_step(level)),
        ]
        body = "\n\n".join(title + "\n" + "\n".join(lines) for title, lines in sections)
        return f"{SUMMARY_HEADER}\n{body}"


CUT_ORDER: tuple[tuple[str, ...], ...] = (
    ("spec_lines", "recent", "fixed_errors"),
    ("carried", "answered"),
    ("earlier", "files"),
    ("errors",),
    ("prompts",),
)
"""The long lists `_cut_to_fit` shortens, least needed first: a task's spec, the last steps
and the fixed errors (their commands and files are named elsewhere) before what the previous
summary carried and the answered message, those before the files, the files before the
unresolved errors (what is left to fix), the user's own prompts last (an agent cannot ask for
them again)."""


def _cut_to_fit(renderer: _Renderer, level: _Level, max_tokens: int) -> str:
    """Shorten the long lists one step at a time until the text fits: within the least
    needed group of `CUT_ORDER` that still has items, its longest list first."""
    cuts = _Cuts()
    unresolved = [r for r in renderer.errors if r.resolved_by is None]
    sizes = {
        "files": min(level.files, len(renderer.h.changes)),
        "earlier": min(level.earlier_files, max(0, len(renderer.h.changes) - level.files)),
        "prompts": len(renderer.requests),
        "carried": renderer.carried_kept(level, cuts),
        "errors": min(level.errors, len(unresolved)),
        "fixed_errors": max(0, min(level.errors, len(renderer.errors)) - len(unresolved)),
        "spec_lines": level.spec_lines,
        "recent": level.recent_chars // 100,
        "answered": level.answered_chars // 100,
    }
    text = renderer.render(level, cuts)
    while rough_token_count(text) > max_tokens and any(size > 0 for size in sizes.values()):
        group = next(g for g in CUT_ORDER if any(sizes[key] > 0 for key in g))
        name = max(sorted(group), key=lambda key: sizes[key])
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


BARE = _Cuts(files=0, earlier=0, prompts=0, carried=1, errors=0, spec_lines=0, recent=0, answered=0)
"""The lean level with every long list cut away, and the last steps and the answered message
with them: the least the offline summary says."""


def lean_summary_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of the barest offline summary of these messages (the lean level, with its long
    lists cut away or whole, whichever is shorter): the guard's floor never asks a summary
    for more."""
    renderer = _Renderer(read_handover(messages), up_to=False)
    # A cut list leaves a "(N more)" line, which can be longer than a short list it replaces.
    whole = _Cuts(recent=0, answered=0)
    return min(rough_token_count(renderer.render(_LEVELS[-1], cuts)) for cuts in (BARE, whole))


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
        text = renderer.render(level, _Cuts(), budget * 4)
        if rough_token_count(text) <= budget:
            return text
    return _cut_to_fit(renderer, lean, max_tokens)


__all__ = [
    "COMMAND_CHARS",
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "DEFAULT_MIN_SUMMARY_TOKENS",
    "DEFAULT_TARGET_RATIO",
    "LATEST_REQUEST_CHARS",
    "SUMMARY_HEADER",
    "command_text",
    "describe_call",
    "extractive_summary",
    "lean_summary_tokens",
    "summary_budget",
]
