"""What an agent needs to go on with a task, read from a conversation without a model.

A summary that lists every path and command is an index; an agent continuing from it still
has to work out what was done, what remains, what it was about to do and why. Most of that is
already in the transcript, written by the agent or its tools, and `read_handover(messages)`
reads it deterministically, for the offline summary and the offline session notes:

- **requests**: what the user asked, in order: typed prompts and slash commands with their
  arguments, never a command's expanded template, a skill body, a notification, hook output
  or a system reminder (`unbounded.model.user_messages`); notifications are kept apart, as
  events. With them the user's **standing instructions** (`compaction.carried`), and what
  earlier summaries carried (their latest request, instructions, user messages).
- **task state**: the todo list as last written (TodoWrite and alike); the tracker items the
  agent's commands named (`bd`, `gh issue`, TaskCreate / TaskUpdate) with their last state,
  the output that showed each, what each depends on and blocks (`bd show`), and where the
  current one was started, and the close commands that succeeded; the tasks the last
  `bd ready` listed; the open items of the status and plan files read; the items the latest
  request enumerates, and its steps when it orders them ("A, then B") with whether the
  agent's words since report each.
- **git**: the commits made (branch, sha, message, files changed), the pushes, the last
  `git status` / `git diff --stat`, and the files written after the last commit.
- **checks**: the last run of each test, build or lint command (`mix test`, `pytest`…) with
  the line that says how it went and how many file writes came after it; and the last
  command of each program and script that made or started something (`makes_something`).
- **errors**: every failed call: flagged as an error, or a command whose output says it
  failed (`compaction.command_results`). Each with the agent's first words after it (its
  reading of the cause), what it did next, and the later call that succeeded at the same
  thing (the same command key, a write of the same file, a read of the same file), or none.
- **the agent's own words**: its texts in order (status reports and plans are summaries a
  model already wrote), its latest numbered plan with, per item, the files written since
  that the item names, its stated next step, its decisions with their reasons, the
  sentences stating a finding or result, and the problems it reported in its own words.
- **files**: each file written, newest change first, with the calls that wrote it and the
  definitions (functions, classes, modules, CSS selectors) in the code it wrote; the latest
  listing of each folder the agent listed (`ls`, `find`, `tree`, Glob, LS), read as paths.

Everything is quoted or listed, never paraphrased, and every list keeps conversation order
or an explicit sort: the same messages give the same hand-over.
"""

from __future__ import annotations

import bisect
import itertools
import posixpath
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.carried import (
    carried_latest,
    carried_standing,
    carried_user_messages,
    sentences,
    standing_instructions,
)
from unbounded.compaction.command_results import (
    Commit,
    command_key,
    command_segments,
    command_words,
    commits_in,
    failure_excerpt,
    is_check,
    makes_something,
    outcome_line,
)
from unbounded.compaction.facts import (
    Facts,
    extract_facts,
    normalize_text,
    text_of,
    todo_list_from_tool,
)
from unbounded.compaction.prompts import is_previous_summary
from unbounded.compaction.recorded_files import strip_line_numbers
from unbounded.model.shell_files import unwrap_output
from unbounded.model.tools import file_read_paths, file_write_paths, file_writes, shell_command
from unbounded.model.user_messages import UserMessage, classify_message_texts
from unbounded.tokens.estimate import content_tokens

TRACKER_COMMAND = re.compile(
    r"^\s*(?:bd|beads|gh\s+(?:issue|pr)|git\s+(?:checkout\s+-b|switch\s+-c|branch\s+\S)|"
    r"jira|linear|glab\s+issue|todo)\b"
)
"""Shell commands that read or change a task tracker (or start a branch for a task)."""
TASK_CREATE_TOOLS = frozenset({"TaskCreate", "task_create"})
TASK_UPDATE_TOOLS = frozenset({"TaskUpdate", "task_update"})

_DECISION = re.compile(
    r"\b(because|since the|so that|instead of|rather than|in order to|to avoid|decided|"
    r"the (?:root )?cause|the reason|which means|chose|choosing|prefer|trade-?off|"
    r"approach)\b",
    re.I,
)
_PROBLEM = re.compile(
    r"\b(?:errors?|fails?|failed|failing|failures?|warnings?|undefined|unused|broken|"
    r"crash(?:es|ed)?|exception|not found|doesn[’']t work|does not work|too deep|complain\w*|"
    r"fehler|funktioniert nicht|schl[äa]gt fehl)\b",
    re.I,
)
_NO_PROBLEM = re.compile(
    r"\b(?:no|0|zero|without|keine?n?|fixed|resolved|behoben)\s+(?:new\s+|more\s+)?"
    r"(?:errors?|warnings?|issues|failures?|fehler)\b|\ball\b.{0,20}\bpass|\bclean\b|"
    r"\bnothing\s+(?:is\s+)?broken",
    re.I,
)
_FINDING = re.compile(
    r"`[^`]+`|\d|\b(?:found|finds|shows?|turns out|has no|have no|contains?|returns?|works|"
    r"passe[sd]|is done|are done|complete[d]?|created|fixed|confirmed|means|exists?|missing|"
    r"gefunden|zeigt|fertig|erledigt|erstellt|funktioniert|enthält|fehlt|läuft)\b",
    re.I,
)
_PROSE_START = re.compile(r"^[*_`\"'(]*[^\W\d_]")
"""A sentence of prose starts with a word (not a table row, a tree line or a heading)."""
FINDING_MIN_WORDS = 4
FINDING_MAX_CHARS = 300
"""A longer sentence is prose or a pasted list, not one finding."""
NOTED_MIN_CHARS = 20
"""A shorter sentence about a problem says too little to carry."""
_NEXT_STEP = re.compile(
    r"^(?:next,?|now,?|then,?|after that,?|finally,?)?\s*(?:i'll|i will|let me|let's|i'm going to|"
    r"i need to|next step|we still need|still need to|remaining:?|next:|the next|"
    r"jetzt \w+ ich|nun \w+ ich|lass mich|lass uns|ich werde|als n[äa]chstes)\b",
    re.I,
)
_FUTURE = re.compile(
    r"\b(?:i'll|i will|let me|let's|next|plan|need to|going to|remaining|still|to do|todo|"
    r"n[äa]chsten?|als n[äa]chstes)\b",
    re.I,
)
_PLAN_ITEM = re.compile(r"^\s{0,3}(\d+)[.)]\s+(.+?)\s*$")
_ENUMERATED = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*•])\s+(.+?)(?=(?:\s\d+[.)]\s)|$)", re.M)
_PATH = re.compile(
    r"(?<![\w/.-])(?:~/|\.{1,2}/|/)?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
    r"(?![\w/-])"
)
_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b")
_EMPHASIZED = re.compile(r"\*\*([A-Za-z][\w-]*)\*\*")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_DEFINITION = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:pub(?:\(\w+\))?\s+)?"
    r"(?:def|defp|defmacro|defmodule|class|function|func|fn|interface|struct|enum|trait|"
    r"module|type)\s+([A-Za-z_][\w.?!]*)"
    r"|^\s*func\s+\([^()\n]*\)\s*([A-Za-z_]\w*)"  # a Go method: `func (s *Store) Save(`
    # A JS/TS class's method (`  async load(x) {`), no control word (`if (x) {`).
    r"|^[ \t]+(?:(?:static|async|get|set|public|private|protected)\s+)*"
    r"(?!(?:if|for|while|switch|catch|with|return|function|else)\b)([A-Za-z_$][\w$]*)"
    r"\s*\([^()\n]*\)\s*(?::\s*[^{\n]+)?\{\s*$"
    r"|^\s*(?:export\s+)?const\s+([A-Za-z_]\w*)\s*=\s*(?:async\s*)?(?:\(|function\b)"
    r"|^([.#][A-Za-z_][\w-]*)[^{\n]*\{",
    re.M,
)
_TASK_NUMBER = re.compile(r"#(\w+)")
_INSTRUCTION_FILE = re.compile(
    r"^Instructions from (\S.*?):$|^# AGENTS\.md instructions for (\S+)", re.M
)
STATUS_FILE = re.compile(
    r"(?i)(?:^|[/_.-])(?:status|todo|plan|roadmap|checkpoint|progress)[^/]*\.(?:md|txt)$"
    r"|/plans/[^/]+\.md$"
)
"""Files whose open items a hand-over keeps when the agent read them (the project's plan)."""
STATUS_ITEMS = 8
LISTING_PROGRAMS = frozenset({"ls", "find", "tree", "fd", "eza", "exa"})
"""Programs whose output lists a folder's files."""
LISTING_TOOLS = frozenset({"Glob", "glob", "LS", "list_directory", "list_dir", "list_files"})
"""Tools whose result lists a folder's files."""
_LONG_LISTING = re.compile(r"^[bcdlps-][rwxsStT-]{9}[@+.]?\s")
"""An `ls -l` line: its name is its ninth field."""
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
"""An `ls -l --time-style=long-iso` date: the line has one field less, its name the eighth."""
OPTION_VALUES = frozenset(
    {
        "-I", "-P", "-L", "--ignore", "--pattern", "-e", "-E", "-t", "--extension", "--exclude",
        "--type", "-d", "--max-depth", "--level", "-name", "-iname", "-path", "-type",
        "-maxdepth", "-mindepth", "-newer", "-size", "-mtime",
    }
)  # fmt: skip
"""Options of the listing programs whose value is the next word (`tree -I node_modules`,
`fd -e py`, `find -name x`): no folder."""
_LS_HEADING = re.compile(r"^(\S[^:]*):$")
"""The heading `ls` prints over each folder's names when it lists several (`src:`)."""
_TREE_GLYPHS = re.compile(r"^(?:[\s│├└─|`]|-\s)+")
"""What a nested listing puts before a name: tree lines, indentation, a list's dashes."""
_ENTRY = re.compile(r"^[\w@.+~/-][\w@.+~/-]*$")
"""A file or folder name or path as a listing prints it (no spaces: not a sentence)."""
_OPEN_ITEM = re.compile(
    r"^\s*[-*]\s*\[ \]\s*\S"
    r"|\b(?:next|todo|open|pending|nächste[nrs]?|offene?|ausstehend)\b",
    re.I,
)
_DONE_BOX = re.compile(r"^\s*[-*]\s*\[[xX]\]")
_BULLET = re.compile(r"^[-*]\s+(?=\[ \])")
_TRACKER_VERBS = (
    re.compile(r"^\s*(?:bd|beads)\s+(show|update|close|reopen|create)\s+([\w.-]+)(.*)$"),
    re.compile(r"^\s*gh\s+issue\s+(view|edit|close|reopen)\s+(\d+)(.*)$"),
)
_READY_LINE = re.compile(r"^\s*\d+\.\s+((?:\[[^\]]*\]\s*)*)([\w.-]+):\s+(.+?)\s*$", re.M)
_SEQUENCE = re.compile(
    r"(?:[,;.!?]\s*(?:and\s+|und\s+)?|\s+(?:and|und)\s+)(?:then|after\s+that|afterwards|"
    r"dann|danach|anschlie(?:ß|ss)end)\b\s*",
    re.I,
)
"""A word that orders a request's steps, after a comma or sentence end or an "and" ("A, then
B", "A. Dann B", "A und dann B"): a bare "then" inside a sentence orders nothing."""
_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}")
STEP_MIN_WORDS = 2
"""A part of a request shorter than this (in words) is no step of its own."""
_ENV_FILE = re.compile(r"[\w~./-]*\.env(?:\.[\w-]+)?(?![\w/])")
_ENV_NAME = re.compile(r"^(?:export\s+)?([A-Z][A-Z0-9_]{2,})(?:=|$)")
STEP_WORD_LETTERS = 6
"""A word this long names a request step when the agent's sentence holds it too."""
STEP_REQUEST_CHARS = 1_500
"""A longer request is a document: its "then"s are not the user's order of work."""
_RELATION_HEADING = re.compile(r"^(DEPENDS ON|BLOCKS|CHILDREN|PARENT)\s*$")
_RELATION_LINE = re.compile(r"^\s+[→←↳↑]\s+(\S)\s+([\w.-]+):\s+(.*?)(?:\s+●\s*P\d)?\s*$")
RELATION_STATES = {"✓": "closed", "◐": "in progress", "○": "open", "●": "blocked"}
"""The state a `bd show` relation line's mark gives the item it names."""
_STATUS_FLAG = re.compile(r"--status[= ]+([\w-]+)")
_BD_STATE = re.compile(r"\[[^\]]*·\s*([A-Z_]+)\]\s*$")
_BD_TITLE = re.compile(r"^\S+\s+[\w.-]+(?:\s+\[[^\]]*\])?\s+·\s+(.*?)\s+\[")
_GIT_BRANCH = re.compile(r"^\s*git\s+(?:checkout\s+-b|switch\s+-c)\s+(\S+)")
_ON_BRANCH = re.compile(r"^On branch (\S+)", re.M)
_PUSH_TARGET = re.compile(r"^.*->.*$", re.M)
IN_PROGRESS = "in progress"
"""A tracker item's state while it is worked on (tracker spellings normalized to this)."""
_APPROVAL_TEXT = (
    "yes yeah yep yup ya sure ok okay k go ahead proceed continue do it please pls sounds "
    "good great perfect fine lgtm agreed approved approve confirmed confirm right correct "
    "all of them that those these both everything to and the with let's lets start on "
    "ja jawohl gerne bitte mach das alle los weiter oui vas-y allez tout sí si vale dale "
    "todo adelante da sì certo va bene thanks thank you item items one ones first"
)
_APPROVAL_WORDS = frozenset(_APPROVAL_TEXT.split())
"""Words a request that only approves what the agent proposed is made of (in a few
languages): a request with no other word (a number choosing items aside) adds no task."""
_APPROVING = (
    "yes yeah yep yup ya sure ok okay go proceed continue do please sounds lgtm agreed "
    "approved approve ja jawohl gerne mach los weiter oui vas-y allez sí si vale dale "
    "adelante da sì certo"
)
_APPROVAL_START = frozenset(_APPROVING.split())
"""Words one of which an approving request holds (a bare "thanks" approves nothing)."""
APPROVAL_MAX_WORDS = 12
"""A longer request brings its own task, even when it starts with "yes"."""
_REQUEST_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d+", re.U)


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
    result_position: int = 0
    """Where its result sits (0 when none was recorded)."""
    failure: str = ""
    """The lines saying it failed ("" when it did not): flagged, or a failing output."""

    @property
    def paths_written(self) -> tuple[str, ...]:
        """Every file it writes: a file tool's, each file of a patch, a shell command's
        here-document targets and `sed -i` edits."""
        return file_write_paths(self.block)

    @property
    def path_written(self) -> str | None:
        """The first file it writes, if any."""
        paths = self.paths_written
        return paths[0] if paths else None

    @property
    def paths_read(self) -> tuple[str, ...]:
        """Every file it reads: a file tool's, or those a shell command shows."""
        return file_read_paths(self.block)

    @property
    def path_read(self) -> str | None:
        """The first file it reads, if any."""
        paths = self.paths_read
        return paths[0] if paths else None

    @property
    def command(self) -> str | None:
        """The shell command it runs, if any."""
        return shell_command(self.block)

    @property
    def failed(self) -> bool:
        """Whether it failed (flagged or by its output)."""
        return bool(self.failure)


@dataclass(slots=True)
class TrackerItem:
    """One task of a tracker, as the agent's tracker commands left it."""

    id: str
    state: str
    title: str = ""
    spec: str = ""
    """The output that last showed it (`bd show`, `gh issue view`) or its description."""
    started: int = 0
    """Where it was last set in progress (0 when it was not)."""
    depends_on: list[tuple[str, str]] = field(default_factory=list)
    """The items it depends on with their state, as its last `bd show` listed them."""
    blocks: list[str] = field(default_factory=list)
    """The items it blocks, as its last `bd show` listed them."""


@dataclass(frozen=True, slots=True)
class ReadyItem:
    """A task the tracker's last `bd ready` listed as ready to start."""

    id: str
    title: str
    tags: str = ""
    """Its bracketed marks (`[● P1] [task]`)."""


@dataclass(frozen=True, slots=True)
class RequestStep:
    """One step of a request that orders its work ("do A, then B"), and whether the agent's
    words since the request name most of its content words."""

    text: str
    reported: bool


@dataclass(frozen=True, slots=True)
class Request:
    """Something the user asked: a prompt or a command with its arguments."""

    position: int
    text: str


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """A failed call, what the agent made of it and did next, and the call that fixed it."""

    call: Call
    resolved_by: Call | None
    reading: str = ""
    """The agent's first words after the failure (its reading of the cause)."""
    tried: tuple[Call, ...] = ()
    """Writes and commands after it, up to the fix (or the end), at most `TRIED_CALLS`."""


@dataclass(frozen=True, slots=True)
class CheckRun:
    """The last run of one test, build or lint command."""

    key: str
    call: Call
    outcome: str
    writes_after: int
    """File writes after it: its result may no longer hold."""


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One item of the agent's plan, and the files written since that it names."""

    text: str
    names_files: bool
    changed: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    """The files read or written in the conversation that it names."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The agent's latest numbered plan."""

    position: int
    intro: str
    """The line that introduces the list."""
    items: tuple[PlanItem, ...]


@dataclass(frozen=True, slots=True)
class StatusFile:
    """A status or plan file the agent read, with the lines that say what is still open."""

    path: str
    position: int
    open_items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Listing:
    """A folder's layout as the agent last listed it (`ls`, `find`, `tree`, Glob…): the call,
    the folder it named ("." for the working directory), and the names it showed (paths, or
    names inside the folder)."""

    call: Call
    folder: str
    entries: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileChange:
    """A file written in the conversation: the calls that wrote it, in order."""

    path: str
    calls: tuple[Call, ...]

    @property
    def last(self) -> Call:
        """Its latest write."""
        return self.calls[-1]

    @property
    def created(self) -> bool:
        """Whether its first write wrote the whole file (Write, an editor's create)."""
        first = self.calls[0].block
        return writes_whole_file(first) or any(
            written.path == self.path and written.action == "add" for written in file_writes(first)
        )

    @property
    def definitions(self) -> list[str]:
        """Names defined in the code it was given, newest write first, each once."""
        names: list[str] = []
        for call in reversed(self.calls):
            for match in _DEFINITION.finditer(code_written_to(call.block, self.path)):
                name = next(group for group in match.groups() if group)
                if name not in names:
                    names.append(name)
        return names


OPEN_TODO_STATUSES = ("in_progress", "pending", "open", "todo")
DONE_TODO_STATUSES = ("completed", "done", "complete")
TRIED_CALLS = 4


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
    closes: list[tuple[Call, str]] = field(default_factory=list)
    """The tracker close commands that succeeded, with the item each closed."""
    """Tasks the tracker commands named, in the order first seen, with their last state."""
    errors: list[ErrorRecord] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    findings: list[tuple[int, str]] = field(default_factory=list)
    """Sentences of the agent stating a finding or result (a number, an id, code, "found",
    "works", "is done"…), not an intention ("Let me…", a line ending in a colon), with where
    it said so, each once."""
    noted_problems: list[tuple[int, str]] = field(default_factory=list)
    """Sentences in which the agent reports a problem (a check's complaint, an error a hook or
    a tool showed it), with where it said so: failures no tool output holds."""
    next_step: tuple[int, str] | None = None
    """The next step as the agent last stated it, with where it said so."""
    plan: Plan | None = None
    request_items: list[str] = field(default_factory=list)
    request_steps: list[RequestStep] = field(default_factory=list)
    step_on: tuple[int, str, int] | None = None
    """The request step the agent said it was on last (its index), that sentence, and how
    many file changes followed it: a step done or under way though not reported."""
    """The latest request's steps when it orders them ("A, then B") or enumerates them."""
    ready: list[ReadyItem] = field(default_factory=list)
    """The tasks the last `bd ready` listed, in its order."""
    standing: list[str] = field(default_factory=list)
    instruction_files: list[str] = field(default_factory=list)
    carried_latest: str | None = None
    """The latest request an earlier summary carries (when none followed it)."""
    commits: list[tuple[Call, Commit]] = field(default_factory=list)
    pushes: list[Call] = field(default_factory=list)
    git_status: Call | None = None
    branch: str | None = None
    checks: list[CheckRun] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)
    status_files: list[StatusFile] = field(default_factory=list)
    env_keys: dict[str, list[str]] = field(default_factory=dict)
    """The key names (never values) the agent saw in each `.env` file it read or searched."""
    made: list[tuple[Call, str]] = field(default_factory=list)
    """The last command of each program and script that made or started something
    (`makes_something`), with the call that ran it, the latest last."""
    """The status / plan files read, each at its latest read, the latest last."""
    """Files written, the most recently changed first."""
    listings: list[Listing] = field(default_factory=list)
    """The latest listing of each folder the agent listed, the latest last (`_listings`)."""
    previous_summaries: list[str] = field(default_factory=list)
    answered: tuple[int, str] | None = None
    """The agent's message the latest request answers (its last text before it, no other
    request between), with where it said so: a short request means nothing without it."""
    approves: bool = False
    """Whether the latest request only approves that message (`approves`)."""
    proposal: list[RequestStep] = field(default_factory=list)
    """The numbered items of that message the request approves (those whose numbers it
    names, else all of its last list), each marked reported when the agent's words since hold
    most of it or a file it names was changed since."""
    stale_findings: int = 0
    """Findings left out because a later change touched what they name (`_stale`)."""
    last_event_is_answer: bool = False
    tokens: int = 0
    messages: int = 0
    positions: int = 0

    @property
    def latest_request(self) -> Request | None:
        """The last thing the user asked in these messages."""
        return self.requests[-1] if self.requests else None

    @property
    def latest_request_text(self) -> str | None:
        """The last thing the user asked, here or (without a request here) as carried."""
        latest = self.latest_request
        return latest.text if latest is not None else self.carried_latest

    def todos_with(self, *statuses: str) -> list[dict[str, Any]]:
        """Todo items whose status is one of these (an item without one is pending)."""
        wanted = {s.lower() for s in statuses}
        return [t for t in self.todos if str(t.get("status", "pending")).lower() in wanted]

    @property
    def open_todos(self) -> list[dict[str, Any]]:
        """Todo items not done yet (`OPEN_TODO_STATUSES`)."""
        return self.todos_with(*OPEN_TODO_STATUSES)

    @property
    def done_todos(self) -> list[dict[str, Any]]:
        """Todo items done (`DONE_TODO_STATUSES`)."""
        return self.todos_with(*DONE_TODO_STATUSES)

    @property
    def unresolved_errors(self) -> list[ErrorRecord]:
        """Errors no later call fixed."""
        return [e for e in self.errors if e.resolved_by is None]

    @property
    def resolved_errors(self) -> list[ErrorRecord]:
        """Errors a later call fixed."""
        return [e for e in self.errors if e.resolved_by is not None]

    @property
    def last_commit(self) -> tuple[Call, Commit] | None:
        """The latest commit made, with the call that made it."""
        return self.commits[-1] if self.commits else None

    def said_before(self, call: Call) -> str:
        """The agent's text right before a call (no other call between), or ""."""
        earlier = [c.position for c in self.calls if c.position < call.position]
        since = max(earlier, default=0)
        texts = [t for p, t in self.assistant_texts if since < p < call.position]
        return texts[-1] if texts else ""

    def written_after(self, position: int) -> list[str]:
        """Files written after `position`, the most recently changed first."""
        return [c.path for c in self.changes if c.last.position > position]

    @property
    def work_start(self) -> int:
        """Where the current piece of work began: the latest request, or the current tracker
        item's start when that came later."""
        latest = self.latest_request.position if self.latest_request else 0
        task = self.current_task
        return max(latest, task.started if task is not None else 0)

    @property
    def next_ready(self) -> ReadyItem | None:
        """The first task `bd ready` listed that is not an epic, not the one in progress and
        not closed or started since."""
        task = self.current_task
        states = {item.id: item.state for item in self.tracker_items}
        return next(
            (
                item
                for item in self.ready
                if "[epic]" not in item.tags.lower()
                and (task is None or item.id != task.id)
                and states.get(item.id) not in ("closed", IN_PROGRESS)
            ),
            None,
        )

    @property
    def current_task(self) -> TrackerItem | None:
        """The tracker item last set in progress and not closed since, if any."""
        active = [i for i in self.tracker_items if i.state == IN_PROGRESS and i.started]
        return max(active, key=lambda item: item.started, default=None)


def writes_whole_file(block: Mapping[str, Any]) -> bool:
    """Whether a write call gives the whole file (Write, an editor's create), not an edit."""
    tool_input = block.get("input")
    return isinstance(tool_input, Mapping) and any(
        isinstance(tool_input.get(key), str) for key in ("content", "file_text")
    )


def definition_lines(code: str) -> list[int]:
    """The indexes of the lines of `code` that define something (`_DEFINITION`), in order."""
    # `^\s*` may start a match at the blank lines before the definition: count from its text.
    starts = [
        m.start() + len(m.group(0)) - len(m.group(0).lstrip()) for m in _DEFINITION.finditer(code)
    ]
    return sorted({code.count("\n", 0, start) for start in starts})


def defined_name(line: str) -> str | None:
    """The name a line of code defines (`def load(…)` → `load`; a module's last part), or
    None when it defines nothing (`_DEFINITION`)."""
    match = _DEFINITION.match(line)
    if match is None:
        return None
    name = next((group for group in match.groups() if group), None)
    return name.rsplit(".", 1)[-1] if name else None


def replaced_code(block: Mapping[str, Any]) -> str:
    """The code an edit call replaces (an edit's old text, all of a MultiEdit's); "" for a
    write of a whole file."""
    tool_input = block.get("input")
    if not isinstance(tool_input, Mapping):
        return ""
    edits = tool_input.get("edits")
    parts = (
        [e for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else [tool_input]
    )
    texts: list[str] = []
    for part in parts:
        for key in ("old_string", "old_str", "old_source"):
            value = part.get(key)
            if isinstance(value, str) and value.strip():
                texts.append(value)
                break
    return "\n".join(texts)


def written_code(block: Mapping[str, Any]) -> str:
    """The code a write call gives (an edit's new text, all of a MultiEdit's, a file's)."""
    tool_input = block.get("input")
    if not isinstance(tool_input, Mapping):
        return ""
    parts = [tool_input]
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        parts = [e for e in edits if isinstance(e, Mapping)]
    texts: list[str] = []
    for part in parts:
        for key in ("new_string", "content", "new_source", "new_str", "file_text"):
            value = part.get(key)
            if isinstance(value, str) and value.strip():
                texts.append(value)
                break
    return "\n".join(texts)


def code_written_to(block: Mapping[str, Any], path: str) -> str:
    """The code a write call gives `path`: a file tool's (`written_code`), else what a patch
    or a shell command wrote to that file (an added or written file's text, an update's new
    lines)."""
    code = written_code(block)
    if code:
        return code
    texts: list[str] = []
    for written in file_writes(block):
        if written.path != path:
            continue
        if written.text is not None:
            texts.append(written.text)
        texts.extend("\n".join(hunk.new) for hunk in written.hunks)
    return "\n".join(text for text in texts if text.strip())


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
                text = block.get("text") if isinstance(block, dict) else None
                if isinstance(text, str) and is_previous_summary(text):
                    summaries.append(text)
                else:
                    blocks.append(block)
            if blocks:
                kept.append({**message, "content": blocks})
        else:
            kept.append(message)
    return kept, summaries


def _redo_key(failed: Call) -> tuple[Any, ...]:
    """What a later call must share to do what a failed one tried (see `_redo_keys`): the
    files it writes and reads; else its program and subcommand (its whole command, when it
    runs no program); else its tool and its whole input (`_input_key`)."""
    written, read = failed.paths_written, failed.paths_read
    if written or read:
        return ("files", written, read)
    command = failed.command
    if command:
        key = command_key(command)
        return ("program", key) if key else ("command", normalize_text(command))
    return ("tool", failed.name, _input_key(failed))


def _redo_keys(call: Call) -> list[tuple[Any, ...]]:
    """Every `_redo_key` a failed call may have that this call shares."""
    command = call.command or ""
    return [
        ("files", call.paths_written, call.paths_read),
        ("program", command_key(command)),
        ("command", normalize_text(command)),
        ("tool", call.name, _input_key(call)),
    ]


def _input_key(call: Call) -> Hashable:
    """A call's input as a hashable value equal for equal inputs (`_canonical`)."""
    return _canonical(call.block.get("input"))


def _canonical(value: Any) -> Hashable:
    """A JSON-like value as a hashable one that is equal exactly when the values are equal
    (mappings as sets of items, sequences as tuples, each tagged by its kind)."""
    if isinstance(value, Mapping):
        return ("map", frozenset((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(item) for item in value))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value  # type: ignore[no-any-return]


def _same_input(later: Call, failed: Call) -> bool:
    """Whether two calls were given the same input."""
    return later.block.get("input") == failed.block.get("input")


def _reading_after(handover: Handover, call: Call, call_positions: Sequence[int]) -> str:
    """The agent's first text after a failed call's result, when no call came between
    (`call_positions`: every call's position, in order)."""
    after = call.result_position
    texts = handover.assistant_texts
    index = bisect.bisect_right(texts, after, key=lambda text: text[0])
    if index == len(texts):
        return ""
    position, text = texts[index]
    between = bisect.bisect_right(call_positions, after)
    if between < len(call_positions) and call_positions[between] < position:
        return ""
    return text


def _resolve_errors(handover: Handover) -> list[ErrorRecord]:
    """Each failed call with the first later call that did again what it tried and succeeded
    (its fix), the agent's words right after it, and the calls tried before the fix: the
    calls read once, from the last back (a scan per failure took minutes in long sessions)."""
    calls = handover.calls
    call_positions = [c.position for c in calls]
    # The next call (by index) that writes a file or runs a command: what a failure "tried".
    next_tried = [len(calls)] * (len(calls) + 1)
    for index in range(len(calls) - 1, -1, -1):
        doing = calls[index].path_written or calls[index].command
        next_tried[index] = index if doing else next_tried[index + 1]
    # The nearest later succeeded call by each key (a tool's by its whole input).
    fixes: dict[tuple[Any, ...], Call] = {}
    found: list[tuple[Call, Call | None]] = []
    for call in reversed(calls):
        if call.failed:
            key = _redo_key(call)
            fix = fixes.get(key)
            if fix is not None and key[0] == "tool" and not _same_input(fix, call):
                fix = None  # an input `_canonical` could not tell apart (an odd value's repr)
            found.append((call, fix))
        elif call.is_error is not None:
            for key in _redo_keys(call):
                fixes[key] = call
    records: list[ErrorRecord] = []
    index_of = {id(call): index for index, call in enumerate(calls)}
    for call, fix in reversed(found):
        tried: list[Call] = []
        at = next_tried[index_of[id(call)] + 1]
        while at < len(calls) and len(tried) < TRIED_CALLS:
            if fix is not None and calls[at].position >= fix.position:
                break
            tried.append(calls[at])
            at = next_tried[at + 1]
        records.append(
            ErrorRecord(
                call=call,
                resolved_by=fix,
                reading=_reading_after(handover, call, call_positions),
                tried=tuple(tried),
            )
        )
    return records


def _request_items(text: str) -> list[str]:
    """The items a request enumerates (`1) a 2) b`, `- a` lines), if it lists any."""
    items = [m.strip().rstrip(",;") for m in _ENUMERATED.findall(text) if m.strip()]
    return items if len(items) >= 2 else []


def mentioned_paths(text: str) -> list[str]:
    """File paths a text mentions (a name with an extension), in order; the path of a URL
    does not count (the pattern never starts after a `/`)."""
    return list(_PATH.findall(text))


def _name(path: str) -> str:
    """A path's file name, lower-cased."""
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()


def _stem(path: str) -> str:
    """A file name without its extensions (`parser.spec.ts` is `parser`)."""
    return _name(path).split(".", 1)[0]


def _named_files(text: str) -> tuple[set[str], set[str]]:
    """File names and file stems a plan item names: paths, CamelCase words and words in
    bold (as snake_case: `SessionLive` is `session_live`), snake_case words."""
    names = {_name(p) for p in mentioned_paths(text)}
    words = [*_CAMEL.findall(text), *_EMPHASIZED.findall(text)]
    stems = {re.sub(r"(?<!^)(?=[A-Z])", "_", word).lower() for word in words}
    stems |= set(_SNAKE.findall(text))
    return names, stems


def plan_runs(text: str) -> list[tuple[str, list[str]]]:
    """The numbered lists of a text, each with the line that introduces it: items numbered
    1, 2, 3… in order; indented lines and sub-items inside an item belong to it."""
    runs: list[tuple[str, list[str]]] = []
    intro = ""
    items: list[str] = []
    for line in text.splitlines():
        item = _PLAN_ITEM.match(line)
        if item and int(item.group(1)) == len(items) + 1:
            items.append(item.group(2))
            continue
        if items and (not line.strip() or line[:1].isspace() or line.lstrip().startswith("-")):
            continue
        if len(items) >= 2:
            runs.append((intro, items))
        items = []
        if item and item.group(1) == "1":
            items = [item.group(2)]
        elif line.strip():
            intro = line.strip()
    if len(items) >= 2:
        runs.append((intro, items))
    return runs


def _plan(handover: Handover) -> Plan | None:
    """The agent's latest numbered list since the latest request, introduced by words about
    what comes next ("Let me …", "Next:", "I'll update:"); each item with the files written
    since that it names. A plan from before the latest request answered an older one."""
    since = handover.latest_request.position if handover.latest_request else 0
    for position, text in reversed(handover.assistant_texts):
        if position < since:
            break
        runs = [(intro, items) for intro, items in plan_runs(text) if _FUTURE.search(intro)]
        if not runs:
            continue
        intro, items = runs[-1]
        written = [c for c in handover.changes if c.last.position > position]
        known = list(dict.fromkeys((*handover.facts.files_modified, *handover.facts.files_read)))
        planned: list[PlanItem] = []
        for item in items:
            names, stems = _named_files(item)
            changed = tuple(
                c.path for c in written if _name(c.path) in names or _stem(c.path) in stems
            )
            files = tuple(p for p in known if _name(p) in names or _stem(p) in stems)
            planned.append(PlanItem(item, bool(names or stems), changed, files))
        return Plan(position, intro, tuple(planned))
    return None


def approves(request: str) -> bool:
    """Whether a request only approves what the agent proposed ("yes", "Yes to all", "go
    ahead", "ja bitte", "oui"): short, with an approving word, and no word of its own but
    approving ones and numbers (which choose items)."""
    if "?" in request:
        return False  # "yes?" asks back; it approves nothing
    words = [w.lower().strip("'’-") for w in _REQUEST_WORD.findall(request)]
    if not words or len(words) > APPROVAL_MAX_WORDS:
        return False
    if not any(w in _APPROVAL_START for w in words):
        return False
    return all(w in _APPROVAL_WORDS or w.isdigit() for w in words)


_PROPOSING = re.compile(
    r"\?(?=[\s*_)\"'”]|$)|\b(?:shall|should|can|may) (?:i|we)\b|\bwant me to\b|"
    r"\bwould you like\b|\bdo you want\b|\b(?:next,? )?i(?:'ll| will) (?:next|now|then)\b|"
    r"\bnext,? i(?:'ll| will)\b|\bi could\b|\bi can also\b|\blet me know\b|"
    r"\b(?:soll ich|möchtest du|voulez-vous|veux-tu|quieres que)\b",
    re.I,
)
"""Words that offer work still to do: a question, "shall I", "want me to", "next I will"."""


def proposes(text: str) -> bool:
    """Whether an agent's message proposes work an approval can answer: it asks (a question,
    "shall I", "want me to") or lists what comes next ("Next I will:"); a report of work
    done ("Done. Here is what I changed: …") proposes nothing, so "ok thanks" redoes nothing."""
    if _PROPOSING.search(text):
        return True
    return any(_FUTURE.search(intro) for intro, _ in plan_runs(text))


def _answered(handover: Handover) -> None:
    """The agent's message the latest request answers, whether the request approves it, and
    the proposal's items it approves with whether each was reported since."""
    latest = handover.latest_request
    if latest is None:
        return
    before = handover.requests[-2].position if len(handover.requests) > 1 else 0
    texts = [(p, t) for p, t in handover.assistant_texts if before < p < latest.position]
    if not texts:
        return
    position, text = texts[-1]
    if any(position < c.position < latest.position for c in handover.calls):
        return  # the turn ended in a call (interrupted): the request follows no message
    handover.answered = (position, text)
    handover.approves = approves(latest.text) and proposes(text)
    if not handover.approves:
        return
    runs = plan_runs(text)
    if not runs:
        return
    items = runs[-1][1]
    chosen = {int(n) for n in re.findall(r"\d+", latest.text)}
    if chosen & set(range(1, len(items) + 1)):
        items = [item for n, item in enumerate(items, 1) if n in chosen]
    said = " ".join(t for p, t in handover.assistant_texts if p > latest.position)
    written = [c.path for c in handover.changes if c.last.position > latest.position]
    for item in items:
        names, stems = _named_files(item)
        changed = any(_name(p) in names or _stem(p) in stems for p in written)
        handover.proposal.append(RequestStep(item, changed or _reported(item, said)))


_IDENTIFIER = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z_]\w*_\w+|[a-z]+[A-Z]\w*|[A-Z]\w*[A-Z]\w*)\b")
"""Names a sentence may hold about code: backquoted spans, snake_case, camelCase."""


def _drop_stale_findings(handover: Handover) -> None:
    """Leave out the findings a later file change made stale: the sentence names the changed
    file, or a name (`code`, snake_case, camelCase) the later change defines. What
    the agent said before it changed a thing ("X is still missing") is not its state; a file
    that only uses the name changed nothing the finding is about, so it stays."""
    later_writes = [
        _Write(c.position, {_name(p) for p in c.paths_written}, written_code(c.block))
        for c in handover.calls
        if c.path_written
    ]
    if not later_writes:
        return
    kept: list[tuple[int, str]] = []
    for position, sentence in handover.findings:
        if _stale(position, sentence, later_writes):
            handover.stale_findings += 1
        else:
            kept.append((position, sentence))
    handover.findings = kept


def _defines(code: str, name: str) -> bool:
    """Whether the code defines `name`: a definition line (def, class, function…) that holds
    it, its name or a parameter, or an assignment to it."""
    word = rf"(?<![\w.]){re.escape(name)}(?!\w)"
    for match in _DEFINITION.finditer(code):
        line_end = code.find("\n", match.start())
        line = code[match.start() : line_end if line_end >= 0 else len(code)]
        if re.search(word, line):
            return True
    assigned = rf"^\s*(?:self\.)?{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)"
    return re.search(assigned, code, re.M) is not None


@dataclass(frozen=True, slots=True)
class _Write:
    """A file write as `_stale` reads it (worked out once, not once per finding)."""

    position: int
    names: set[str]
    """The names (`_name`) of the files it writes."""
    code: str
    """The code it was given (`written_code`)."""


def _stale(position: int, sentence: str, writes: Sequence[_Write]) -> bool:
    """Whether a write after `position` changed what the sentence is about: the file it names,
    or the definition of a name it holds. When unsure the finding stays."""
    after = [c for c in writes if c.position > position]
    if not after:
        return False
    files = {_name(p) for p in mentioned_paths(sentence)}
    if any(not files.isdisjoint(c.names) for c in after):
        return True
    names = {(m.group(1) or m.group(2)).strip("()") for m in _IDENTIFIER.finditer(sentence)}
    names = {n for n in names if re.fullmatch(r"[A-Za-z_][\w.]*", n) and len(n) >= 3}
    if not names:
        return False
    code = "\n".join(c.code for c in after)
    return any(_defines(code, n) for n in names)


def _own_words(handover: Handover) -> None:
    """Decisions, problems the agent reported and the stated next step, from its texts."""
    seen: set[str] = set()
    for _, text in handover.assistant_texts:
        for sentence in sentences(text):
            key = normalize_text(sentence)
            if key not in seen and len(sentence) >= 20 and _DECISION.search(sentence):
                seen.add(key)
                handover.decisions.append(sentence)
    said: set[str] = set(seen)
    for position, text in handover.assistant_texts:
        for sentence in sentences(text):
            key = normalize_text(sentence)
            intention = sentence.endswith(":") or bool(_NEXT_STEP.search(sentence))
            if (
                key not in said
                and NOTED_MIN_CHARS <= len(sentence) <= FINDING_MAX_CHARS
                and len(sentence.split()) >= FINDING_MIN_WORDS
                and _PROSE_START.match(sentence)
                and _FINDING.search(sentence)
                and not intention
            ):
                said.add(key)
                handover.findings.append((position, sentence))
            if (
                len(sentence) >= NOTED_MIN_CHARS
                and _PROBLEM.search(sentence)
                and not _NO_PROBLEM.search(sentence)
                and not intention
            ):
                handover.noted_problems.append((position, sentence))
    for position, text in reversed(handover.assistant_texts):
        stated = [s for s in sentences(text) if _NEXT_STEP.search(s) and len(s.split()) >= 5]
        if stated:
            handover.next_step = (position, stated[-1])
            break


def _track(handover: Handover, command: str, call: Call) -> None:
    """Update the tracker items from one tracker command and its output."""
    if call.failed:
        return
    line = command.splitlines()[0]
    match = next((m for m in (p.match(line) for p in _TRACKER_VERBS) if m), None)
    if match is None:
        return
    verb, item_id, rest = match.groups()
    item = _tracker_item(handover, item_id)
    if verb in ("show", "view"):
        item.spec = call.result.strip()
        title = _BD_TITLE.match(item.spec)
        if title:
            item.title = title.group(1)
        shown_state = _BD_STATE.search(item.spec.split("\n", 1)[0])
        if shown_state:
            _set_state(item, shown_state.group(1).lower().replace("_", " "), call.position)
        _relations(handover, item)
    elif verb == "close":
        item.state = "closed"
        handover.closes.append((call, item_id))
    elif verb == "reopen":
        item.state = "open"
    elif verb == "create":
        item.state = "created"
    else:
        status = _STATUS_FLAG.search(rest)
        if status:
            _set_state(item, status.group(1).replace("_", " "), call.position)


def _relations(handover: Handover, item: TrackerItem) -> None:
    """The dependencies, blocked items and children a `bd show` output lists: each named item
    is known to the tracker with the state its mark gives, unless a command set it since."""
    item.depends_on, item.blocks = [], []
    heading = ""
    for line in item.spec.splitlines():
        found = _RELATION_HEADING.match(line)
        if found:
            heading = found.group(1)
            continue
        relation = _RELATION_LINE.match(line)
        if relation is None:
            if line.strip():
                heading = ""
            continue
        mark, other_id, title = relation.groups()
        state = RELATION_STATES.get(mark, "seen")
        if heading == "DEPENDS ON":
            item.depends_on.append((other_id, state))
        elif heading == "BLOCKS":
            item.blocks.append(other_id)
        if heading in ("DEPENDS ON", "BLOCKS", "CHILDREN"):
            other = _tracker_item(handover, other_id)
            if other.state == "seen":
                other.state = state
            other.title = other.title or title


def _tracker_item(handover: Handover, item_id: str) -> TrackerItem:
    item = next((i for i in handover.tracker_items if i.id == item_id), None)
    if item is None:
        item = TrackerItem(item_id, "seen")
        handover.tracker_items.append(item)
    return item


def _set_state(item: TrackerItem, state: str, position: int) -> None:
    item.state = state
    if state == IN_PROGRESS:
        item.started = position


def _task_tool(handover: Handover, call: Call) -> None:
    """A TaskCreate / TaskUpdate call as a tracker change."""
    tool_input = call.block.get("input")
    if not isinstance(tool_input, Mapping) or call.failed:
        return
    if call.name in TASK_CREATE_TOOLS:
        number = _TASK_NUMBER.search(call.result)
        item_id = number.group(1) if number else str(len(handover.tracker_items) + 1)
        item = _tracker_item(handover, item_id)
        item.state = "pending"
        item.title = str(tool_input.get("subject") or "")
        item.spec = str(tool_input.get("description") or "")
    elif call.name in TASK_UPDATE_TOOLS and tool_input.get("taskId") is not None:
        item = _tracker_item(handover, str(tool_input["taskId"]))
        if tool_input.get("status"):
            _set_state(item, str(tool_input["status"]).replace("_", " "), call.position)
        if tool_input.get("subject"):
            item.title = str(tool_input["subject"])


def _task_state(handover: Handover) -> None:
    """The todo list as last left, tracker items, and the latest request's items."""
    for call in handover.calls:
        todos = todo_list_from_tool(call.block)
        if todos is not None:
            handover.todos = [
                dict(item) if isinstance(item, Mapping) else {"content": str(item)}
                for item in todos
            ]
        if call.name in TASK_CREATE_TOOLS | TASK_UPDATE_TOOLS:
            handover.tracker.append(call)
            _task_tool(handover, call)
        command = call.command
        if command and TRACKER_COMMAND.search(command):
            handover.tracker.append(call)
            _track(handover, command, call)
            if command_key(command) in ("bd ready", "beads ready") and not call.failed:
                handover.ready = ready_items(call.result)
    latest = handover.latest_request
    if latest is not None:
        handover.request_items = _request_items(latest.text)
        said = " ".join(t for p, t in handover.assistant_texts if p > latest.position)
        handover.request_steps = request_steps(latest.text, said) or [
            RequestStep(item, _reported(item, said)) for item in handover.request_items
        ]
        handover.step_on = _step_on(handover, latest.position)


def ready_items(output: str) -> list[ReadyItem]:
    """The tasks a `bd ready` output lists (`1. [● P1] [task] id: title`), in its order."""
    return [
        ReadyItem(match.group(2), match.group(3), " ".join(match.group(1).split()))
        for match in _READY_LINE.finditer(output)
    ]


def _content_words(text: str) -> set[str]:
    return {word.lower() for word in _CONTENT_WORD.findall(text)}


def request_steps(text: str, said: str) -> list[RequestStep]:
    """The steps of a request that orders its work ("A, then B", "A und dann B"), each marked
    reported when the agent's words since (`said`) hold at least half its content words;
    none for a request without such an order, or too long to be an instruction."""
    if len(text) > STEP_REQUEST_CHARS:
        return []
    parts = [part.strip(" ,;.") for part in _SEQUENCE.split(" ".join(text.split()))]
    parts = [part for part in parts if len(part.split()) >= STEP_MIN_WORDS]
    if len(parts) < 2:
        return []
    return [RequestStep(part, _reported(part, said)) for part in parts]


def _step_on(handover: Handover, since: int) -> tuple[int, str, int] | None:
    """The latest sentence of the agent since `since` that names a request step by one of its
    long words (`STEP_WORD_LETTERS` letters or more) and was followed by file changes, with the
    step's index (the latest step it names) and the number of changes."""
    steps = [_long_words(step.text) for step in handover.request_steps]
    if not steps:
        return None
    for position, text in reversed(handover.assistant_texts):
        if position <= since:
            break
        changes = sum(1 for c in handover.calls if c.path_written and c.position > position)
        if not changes:
            continue
        for sentence in reversed(sentences(text)):
            named = [i for i, words in enumerate(steps) if words & _long_words(sentence)]
            if named:
                return named[-1], sentence, changes
    return None


def _long_words(text: str) -> set[str]:
    return {w for w in _content_words(text) if len(w) >= STEP_WORD_LETTERS}


def _reported(step: str, said: str) -> bool:
    """Whether `said` holds at least half the content words of `step`."""
    words = _content_words(step)
    return bool(words) and 2 * len(words & _content_words(said)) >= len(words)


def _git_and_checks(handover: Handover) -> None:
    """Commits, pushes, the last status, the branch, and the last run of each check."""
    last_checks: dict[str, Call] = {}
    for call in handover.calls:
        command = call.command
        if not command or call.is_error is None:
            continue
        branch = _GIT_BRANCH.match(command)
        if branch and not call.failed:
            handover.branch = branch.group(1)
        if re.search(r"\bgit\s+commit\b", command) and not call.failed:
            for commit in commits_in(call.result):
                handover.commits.append((call, commit))
                handover.branch = commit.branch
        if re.search(r"\bgit\s+push\b", command) and not call.failed:
            handover.pushes.append(call)
        key = command_key(command)
        if key in ("git status", "git diff") and not call.failed:
            handover.git_status = call
            on_branch = _ON_BRANCH.search(call.result)
            if on_branch:
                handover.branch = on_branch.group(1)
        if is_check(command):
            last_checks.pop(key, None)  # keep the order of the last runs
            last_checks[key] = call
    for key, call in last_checks.items():
        writes = sum(1 for c in handover.calls if c.path_written and c.position > call.position)
        outcome = outcome_line(call.result, call.failure)
        handover.checks.append(CheckRun(key, call, outcome, writes))


def push_target(call: Call) -> str:
    """What a push output says went where (its `a -> b` line), or ""."""
    match = _PUSH_TARGET.search(call.result)
    return match.group(0).strip() if match else ""


def _changes(handover: Handover) -> None:
    by_path: dict[str, list[Call]] = {}
    for call in handover.calls:
        if call.failed:
            continue
        for path in call.paths_written:
            by_path.setdefault(path, []).append(call)
    changes = [FileChange(path, tuple(calls)) for path, calls in by_path.items()]
    handover.changes = sorted(changes, key=lambda change: -change.last.position)


def open_items(text: str) -> tuple[str, ...]:
    """The lines of a status or plan file that say what is still to do: unchecked boxes and
    lines naming what is next, open or pending (`STATUS_ITEMS` at most, in file order)."""
    found = [
        _BULLET.sub("", line.strip())
        for line in strip_line_numbers(text).splitlines()
        if _OPEN_ITEM.search(line) and not _DONE_BOX.match(line)
    ]
    return tuple(found[:STATUS_ITEMS])


def is_env_file(path: str) -> bool:
    """Whether a path names an env file (`.env`, `.env.local`, `app/.env.sh`): its values are
    never shown, only its key names."""
    return bool(path) and _ENV_FILE.fullmatch(path) is not None


def env_file_read(call: Call) -> str | None:
    """The env file a call reads (a file tool's, or one its command names: `cat .env`,
    `grep DB .env.local`), or None."""
    paths = list(call.paths_read) or _ENV_FILE.findall(call.command or "")
    return next((p for p in paths if is_env_file(p)), None)


def _env_keys(handover: Handover) -> None:
    """Which `.env` file holds which key, by name: from a read of the file or a command naming
    it, the names its output shows (`NAME=…` lines, or a bare `NAME` as `cut -d= -f1` prints)."""
    for call in handover.calls:
        if call.failed or call.is_error is None:
            continue
        env = env_file_read(call)
        if env is None:
            continue
        names = handover.env_keys.setdefault(env, [])
        for line in strip_line_numbers(call.result).splitlines():
            found = _ENV_NAME.match(line.strip())
            if found and found.group(1) not in names:
                names.append(found.group(1))
        if not names:
            del handover.env_keys[env]


def _made(handover: Handover) -> None:
    latest: dict[str, tuple[Call, str]] = {}
    for call in handover.calls:
        if not call.command or call.failed or call.is_error is None:
            continue
        for segment in command_segments(call.command):
            if makes_something(segment):
                # a program with what it runs: `bun run a.ts` and `bun run b.ts` are two
                key = " ".join([w for w in command_words(segment) if not w.startswith("-")][:3])
                latest.pop(key, None)  # keep the order of the last runs
                latest[key] = (call, segment)
    handover.made = list(latest.values())


def listing_entry(line: str) -> str | None:
    """The name a listing's line shows (a folder's with a trailing "/" when `ls -l` marks
    it; "." and ".." too), or None for a line that is no name (a heading, a count, a
    sentence)."""
    line = line.rstrip()
    if _LONG_LISTING.match(line):
        iso = len(line.split(None, 6)) > 5 and _ISO_DATE.match(line.split(None, 6)[5])
        last = 7 if iso else 8
        fields = line.split(None, last)
        if len(fields) <= last:
            return None
        name = fields[last].split(" -> ", 1)[0]
        name += "/" if line.startswith("d") and not name.endswith("/") else ""
    else:
        name = _TREE_GLYPHS.sub("", line)
    return name if _ENTRY.match(name) else None


def listing_paths(output: str) -> tuple[list[str], int]:
    """The paths a listing shows, a nested one (`tree`, a tool's indented list) read by its
    indentation (a line under a deeper-indented one is inside it), and how many of its lines
    are names; "." and ".." left out, a folder's path with its trailing "/"."""
    paths: list[str] = []
    names = 0
    parents: list[tuple[int, str]] = []
    for line in output.splitlines():
        name = listing_entry(line)
        if name is None:
            continue
        names += 1
        indent = 0 if _LONG_LISTING.match(line) else len(line) - len(_TREE_GLYPHS.sub("", line))
        while parents and parents[-1][0] >= indent:
            parents.pop()
        bare = name.rstrip("/")
        if parents and not name.startswith("/"):
            joined = posixpath.normpath(posixpath.join(parents[-1][1], bare))
        else:
            joined = bare or "/"
        parents.append((indent, joined))
        if bare not in (".", ".."):
            paths.append(joined + ("/" if name.endswith("/") and joined != "/" else ""))
    return paths, names


def listed_folder(call: Call) -> str | None:
    """The folder a call lists: a listing program's first argument that is no option nor
    an option's value ("." when it names none), under the folder a `cd` before it changed
    to; a listing tool's path; None when the call lists nothing."""
    if call.command:
        words = command_words(call.command)
        if not words or words[0].rsplit("/", 1)[-1] not in LISTING_PROGRAMS:
            return None
        folders: list[str] = []
        for before, word in itertools.pairwise(words):
            if before not in OPTION_VALUES and not word.startswith(("-", "(", "!", "\\")):
                folders.append(word.strip("'\""))
        # An option's number (`tree -L 2`) or a pattern (`*.py`) names no folder.
        folder = next(
            (w for w in folders if w and not w.isdigit() and not any(c in w for c in "*?[")), "."
        )
        changed_to = _changed_to(call.command)
        if changed_to and not folder.startswith("/"):
            folder = posixpath.normpath(posixpath.join(changed_to, folder))
    elif call.name in LISTING_TOOLS:
        tool_input = call.block.get("input")
        given = tool_input if isinstance(tool_input, Mapping) else {}
        pattern = str(given.get("pattern") or "")
        # A pattern's folders before its first wildcard: `tests/*.py` lists `tests`.
        fixed = "/".join(p for p in pattern.split("/")[:-1] if p).split("*", 1)[0]
        under = "/".join(p for p in fixed.split("/") if p and not any(c in p for c in "*?[{"))
        folder = str(given.get("path") or given.get("directory") or ".")
        folder = posixpath.join(folder, under) if under else folder
    else:
        return None
    folder = folder.rstrip("/") or "/"
    return folder[2:] if folder.startswith("./") else folder


def _changed_to(command: str) -> str:
    """The folder the `cd`s before a command line's first program change to ("" for none)."""
    folder = ""
    for segment in command_segments(command):
        words = segment.split()
        if not words or words[0] != "cd":
            break
        target = words[1].strip("'\"") if len(words) > 1 else ""
        if not target or target.startswith(("~", "-", "$")):
            return ""
        folder = posixpath.normpath(posixpath.join(folder, target)) if folder else target
    return folder


def removed_paths(command: str) -> list[str]:
    """The paths a command line removes (`rm -rf build`, `git rm a.py`), as written."""
    removed: list[str] = []
    for segment in command_segments(command):
        words = segment.split()
        start = 1 if words[:1] == ["rm"] else 2 if words[:2] == ["git", "rm"] else 0
        if start:
            removed += [w.strip("'\"").rstrip("/") for w in words[start:] if not w.startswith("-")]
    return [path for path in removed if path]


def _ls_sections(folder: str, output: str) -> list[tuple[str, str]]:
    """A listing's output by folder: `ls a b` prints each folder's names under an `a:`
    heading; any other output is the one folder's."""
    sections: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        heading = _LS_HEADING.match(line.rstrip())
        if heading:
            sections.append((heading.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            sections.append((folder, [line]))
    if len(sections) < 2:
        return [(folder, output)]
    return [(name, "\n".join(lines)) for name, lines in sections]


def _listings(handover: Handover) -> None:
    latest: dict[str, Listing] = {}
    for call in handover.calls:
        if call.failed or call.is_error is None:
            continue
        for path in removed_paths(call.command or ""):
            gone = posixpath.normpath(path)
            for folder in [f for f in latest if f == gone or f.startswith(gone + "/")]:
                del latest[folder]
        listed = listed_folder(call)
        if listed is None:
            continue
        for folder, output in _ls_sections(listed, call.result):
            lines = [line for line in output.splitlines() if line.strip()]
            entries, names = listing_paths(output)
            # Mostly names, else the output is something else (a search's matching lines).
            if not entries or 2 * names < len(lines):
                continue
            latest.pop(folder, None)
            latest[folder] = Listing(call, folder, tuple(entries))
    handover.listings = list(latest.values())


def _status_files(handover: Handover) -> None:
    latest: dict[str, StatusFile] = {}
    for call in handover.calls:
        paths = [p for p in call.paths_read if STATUS_FILE.search(p)]
        # Only a call showing one file: the lines of several would be mixed in its output.
        if len(paths) != 1 or call.failed:
            continue
        path = paths[0]
        items = open_items(call.result)
        latest.pop(path, None)
        if items:
            latest[path] = StatusFile(path, call.position, items)
    handover.status_files = list(latest.values())


def read_handover(messages: Sequence[Mapping[str, Any]]) -> Handover:
    """Read a conversation (plain API messages) for a hand-over (see the module docstring)."""
    plain, previous = _without_previous_summaries(messages)
    handover = Handover(facts=extract_facts(_only_requests(plain)), previous_summaries=previous)
    results: dict[str, tuple[bool, str, int]] = {}
    raw_calls: list[Call] = []
    position = 0
    last_is_answer = False
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
                    last_is_answer = True
            elif role == "assistant" and kind == "tool_use":
                raw_calls.append(
                    Call(position, str(block.get("id", "")), str(block.get("name", "")), block)
                )
                last_is_answer = False
            elif kind == "tool_result":
                text = text_of(block.get("content")).strip()
                tool_id = str(block.get("tool_use_id", ""))
                results[tool_id] = (bool(block.get("is_error")), text, position)
                last_is_answer = False
            elif role == "user" and kind == "text":
                sorted_text = next(sorted_texts, None)
                if sorted_text is None:
                    continue
                if sorted_text.is_request and sorted_text.request:
                    handover.requests.append(Request(position, sorted_text.request))
                    last_is_answer = False
                elif sorted_text.kind == "notification":
                    handover.notifications.append(sorted_text)
                else:
                    for match in _INSTRUCTION_FILE.finditer(str(block.get("text", ""))):
                        path = match.group(1) or match.group(2)
                        if path not in handover.instruction_files:
                            handover.instruction_files.append(path)
    handover.positions = position
    for call in raw_calls:
        if call.tool_id not in results:
            handover.calls.append(call)
            continue
        flagged, text, at = results[call.tool_id]
        failure = failure_excerpt(text, flagged=flagged, command=call.command)
        # Read and quoted as the agent saw it, not as Codex or mini-swe-agent wrapped it.
        output = unwrap_output(text)[0]
        handover.calls.append(
            Call(call.position, call.tool_id, call.name, call.block, flagged, output, at, failure)
        )
    handover.last_event_is_answer = last_is_answer
    handover.tokens = sum(content_tokens(m.get("content")) for m in messages)
    handover.messages = len(messages)
    # Rules from every earlier part: those a summary carries as such, and those in the user
    # messages it lists (a model's summary lists the messages but has no rules block).
    carried = [rule for summary in previous for rule in carried_standing(summary)]
    earlier = [m for summary in previous for m in carried_user_messages(summary)]
    handover.standing = standing_instructions(
        [*earlier, *(r.text for r in handover.requests)], carried
    )
    if previous:
        handover.carried_latest = carried_latest(previous[-1])
    _task_state(handover)
    _changes(handover)
    _status_files(handover)
    _made(handover)
    _listings(handover)
    _env_keys(handover)
    _git_and_checks(handover)
    _own_words(handover)
    handover.plan = _plan(handover)
    handover.errors = _resolve_errors(handover)
    _answered(handover)
    _drop_stale_findings(handover)
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


__all__ = [
    "DONE_TODO_STATUSES",
    "IN_PROGRESS",
    "LISTING_PROGRAMS",
    "LISTING_TOOLS",
    "OPEN_TODO_STATUSES",
    "TRACKER_COMMAND",
    "Call",
    "CheckRun",
    "ErrorRecord",
    "FileChange",
    "Handover",
    "Listing",
    "Plan",
    "PlanItem",
    "ReadyItem",
    "Request",
    "RequestStep",
    "TrackerItem",
    "approves",
    "defined_name",
    "definition_lines",
    "env_file_read",
    "is_env_file",
    "listed_folder",
    "listing_entry",
    "listing_paths",
    "mentioned_paths",
    "proposes",
    "push_target",
    "read_handover",
    "ready_items",
    "removed_paths",
    "replaced_code",
    "request_steps",
    "writes_whole_file",
    "written_code",
]
