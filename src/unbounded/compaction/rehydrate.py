"""Post-compaction rehydration: the attachments that restore working context (seed 004).

After a compaction the model sees only the summary. Seed 004 ("Re-Injected Attachments") and
seed 002 (`restoreFileReads`, `restoreTodoList`, `restorePlanFile`) re-inject what the
summary may have compressed too far, as attachment records after the summary:

- **Recently read files**, re-read from disk *now* (the file may have changed since it was
  read): the `rehydrate_max_files` (5) most recently read, each cut at
  `rehydrate_tokens_per_file` (5,000 tokens) with a marker saying it can be read again, and
  `rehydrate_total_file_tokens` (50,000) in all, counted on the attachment's JSON like
  Claude Code's `approximateTokenCount(JSON.stringify(attachment))`. A read is a file tool's
  (Read, an editor's view…), and for an agent that reads through its shell only (Codex,
  SWE-agent, mini-swe-agent, OpenHands: `SHELL_AGENT_TOOLS`) a file its command shows
  (`cat f`, `sed -n '1,80p' f`); Claude Code's own Bash reads are not restored, as Claude
  Code does not restore them. Skipped: the plan file
  and memory files (CLAUDE.md, AGENTS.md…: they have their own injection paths), files whose
  last read was an "unchanged" stub, files a kept message already reads (partial
  compaction), files that no longer exist, and anything that does not resolve (symlinks
  followed) inside the roots the caller allows.
- **Todo list** (`todo`), **plan file** (`plan_file_reference`) and **plan mode**
  (`plan_mode`).
- **Invoked skills**, newest first, `rehydrate_tokens_per_skill` (5,000) each with a
  truncation marker, `rehydrate_total_skill_tokens` (25,000) in all (`invoked_skills`).
- **Background agents** still running, or finished without the model having seen the result
  (`agent_status`), so the model does not start them again.
- **Tool and MCP-instruction deltas** (`tool_delta`, `mcp_instructions_delta`): the tool set
  re-announced, since its earlier announcements were summarized away.

Choices. Candidates are filtered before the five most recent are taken (Claude Code's later
behaviour), so a skipped plan file does not cost a slot; a file that then fails to read is
reported, not replaced. A file larger than `max_file_bytes` (default 1 MiB) is skipped
without being read: re-reading the head of a huge file rarely restores what the model read
from it, and reading it whole to truncate it would be waste. Files are reported in the order
they are restored (most recent first). Everything is deterministic: ties in read time are
broken by path.

Renderers for the attachment types this module introduces are registered in
`unbounded.model.attachments.RENDERERS` when it is imported.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from unbounded.compaction.facts import text_of, todo_list_from_tool
from unbounded.compaction.read_mark import ReadMark
from unbounded.compaction.recorded_files import UNCHANGED_STUB_PREFIX
from unbounded.compaction.tools_registry import (
    CODEX_ALIASES,
    OPENHANDS_ALIASES,
    SWE_AGENT_ALIASES,
)
from unbounded.model.attachments import RENDERERS
from unbounded.model.entries import Entry
from unbounded.model.tools import file_read_path, file_read_paths, file_write_path
from unbounded.policy import Policy
from unbounded.tokens.estimate import CHARS_PER_TOKEN, rough_token_count

DEFAULT_MEMORY_FILE_NAMES: tuple[str, ...] = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md")
"""Instruction files never re-injected as files (they return through the system prompt)."""
DEFAULT_MAX_FILE_BYTES = 1 << 20
"""Files larger than this are skipped without being read."""
RUNNING_AGENT_STATUSES = frozenset({"running", "pending", "in_progress", "queued"})
"""Agent statuses that always get a status attachment."""

FILE_TRUNCATION_MARKER = (
    "[File truncated after compaction: only the first {tokens:,} tokens are shown. "
    "Read {path} again to see the rest.]"
)
SKILL_TRUNCATION_MARKER = (
    "[Skill truncated after compaction: only the first {tokens:,} tokens are shown. "
    "Invoke the skill or read its file again for the full text.]"
)


@dataclass(slots=True)
class FileReadState:
    """When a file was last read, and whether that read returned the "unchanged" stub."""

    read_at: float
    """Any increasing clock (epoch seconds, a turn counter): larger is more recent."""
    unchanged_stub: bool = False
    uses: int = 1
    """Reads and writes of the file so far (how much the work revolves around it)."""
    modified: bool = False
    """The agent wrote or edited the file."""


@dataclass(slots=True)
class SkillState:
    """A skill invoked during the session: its content and when it was invoked."""

    content: str
    invoked_at: float
    path: str | None = None


@dataclass(slots=True)
class AgentState:
    """A background agent the session started."""

    status: str
    description: str
    result: str | None = None
    """A short result or last output, when it finished."""
    result_seen: bool = False
    """True once the model has seen the final result (then it is not re-announced)."""


@dataclass(slots=True)
class WorkingState:
    """What the host knows about the session's working context, kept up to date as it runs."""

    files_read: dict[str, FileReadState] = field(default_factory=dict)
    plan_file_path: str | None = None
    plan_content: str | None = None
    plan_mode: bool = False
    todos: list[dict[str, Any]] = field(default_factory=list)
    invoked_skills: dict[str, SkillState] = field(default_factory=dict)
    background_agents: dict[str, AgentState] = field(default_factory=dict)
    tool_delta: str | None = None
    """Text announcing the tools now available (after compaction, all of them)."""
    mcp_instructions_delta: str | None = None
    """MCP servers' instructions for deferred tools."""

    def record_read(
        self, path: str, read_at: float, *, unchanged_stub: bool = False, write: bool = False
    ) -> None:
        """Note that `path` was read (or, with `write`, written) at `read_at`; a stub read
        marks it as unchanged. Uses accumulate."""
        known = self.files_read.get(path)
        self.files_read[path] = FileReadState(
            read_at=read_at,
            unchanged_stub=unchanged_stub,
            uses=(known.uses + 1) if known is not None else 1,
            modified=write or (known is not None and known.modified),
        )

    def record_stub(self, path: str, read_at: float) -> None:
        """Note that the latest read of `path` returned the "unchanged" stub (not a new use)."""
        known = self.files_read.get(path)
        if known is None:
            self.record_read(path, read_at, unchanged_stub=True)
        else:
            # A new record, not an edit of the old one: `copy` shares records between copies.
            self.files_read[path] = replace(known, read_at=read_at, unchanged_stub=True)

    def record_skill(
        self, name: str, content: str, invoked_at: float, path: str | None = None
    ) -> None:
        """Note that skill `name` was invoked with this content."""
        self.invoked_skills[name] = SkillState(content=content, invoked_at=invoked_at, path=path)

    def copy(self) -> WorkingState:
        """A copy that later `record_*` calls on this state leave as it is. Its dicts and
        lists are new; the records in them are shared, since `record_*` replace records
        rather than edit them (no deep copy: `files_read` grows with the session)."""
        return WorkingState(
            files_read=dict(self.files_read),
            plan_file_path=self.plan_file_path,
            plan_content=self.plan_content,
            plan_mode=self.plan_mode,
            todos=list(self.todos),
            invoked_skills=dict(self.invoked_skills),
            background_agents=dict(self.background_agents),
            tool_delta=self.tool_delta,
            mcp_instructions_delta=self.mcp_instructions_delta,
        )


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something not re-injected, and why."""

    kind: str
    """"file" or "skill"."""
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Rehydration:
    """The attachments to append after the summary, and what was left out."""

    attachments: list[dict[str, Any]]
    skipped: list[Skipped]
    file_tokens: int
    skill_tokens: int

    def skipped_reasons(self) -> dict[str, str]:
        """name -> reason, for reports and tests."""
        return {item.name: item.reason for item in self.skipped}

    def skipped_lines(self) -> list[str]:
        """One line per skip ("file /a.py: no longer exists"), for a result or a log."""
        return [f"{item.kind} {item.name}: {item.reason}" for item in self.skipped]


# -- file access (the only I/O, injectable) --------------------------------------------------


def regular_file_size(path: str) -> int | None:
    """Size in bytes of a regular file, None when it is missing or not a regular file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def read_utf8(path: str, max_bytes: int | None = None) -> str:
    """A file's text as UTF-8 (undecodable bytes replaced), at most `max_bytes` read."""
    with open(path, "rb") as handle:
        data = handle.read() if max_bytes is None else handle.read(max_bytes)
    return data.decode("utf-8", errors="replace")


def _plain(path: str) -> bool:
    """An absolute POSIX path `commonpath` reads as written: no empty or "." component."""
    if path == "/":
        return True
    return (
        path.startswith("/")
        and "//" not in path
        and "/./" not in path
        and not path.endswith(("/", "/."))
    )


def _inside(path: str, roots: Sequence[str]) -> bool:
    # Plain paths (as resolved paths are) need no `commonpath` (microseconds each, for the
    # hundreds of files a long session read): the root is the path or a prefix ending at "/".
    plain = os.path is posixpath and _plain(path)
    for root in roots:
        if plain and _plain(root):
            if root == "/" or path == root or path.startswith(root + "/"):
                return True
            continue
        try:
            common = os.path.commonpath([path, root])
        except ValueError:
            continue
        if common == root:
            return True
    return False


# -- attachments -----------------------------------------------------------------------------


def attachment_tokens(attachment: Mapping[str, Any]) -> int:
    """Rough tokens of an attachment's JSON (as Claude Code counts restored files)."""
    return rough_token_count(orjson.dumps(attachment).decode())


def truncate_to_tokens(text: str, max_tokens: int, marker: str) -> tuple[str, bool]:
    """`text` cut at `max_tokens` rough tokens (at a line end when one is near) plus `marker`."""
    if rough_token_count(text) <= max_tokens:
        return text, False
    limit = max(0, max_tokens * CHARS_PER_TOKEN - len(marker) - 2)
    cut = text[:limit]
    newline = cut.rfind("\n")
    if newline >= limit // 2:
        cut = cut[: newline + 1]
    return cut.rstrip("\n") + "\n\n" + marker, True


SHELL_AGENT_TOOLS = frozenset(
    name
    for aliases in (SWE_AGENT_ALIASES, OPENHANDS_ALIASES, CODEX_ALIASES)
    for name, canonical in aliases.items()
    if canonical == "Bash"
)
"""The shell tools of agents that read files only through their shell (Codex, SWE-agent,
mini-swe-agent, OpenHands): what their commands show (`cat f`, `sed -n '1,80p' f`…) are their
reads, restored like a Read. Claude Code's own Bash is not among them: it restores only what
its Read tool read."""


def read_paths(block: Mapping[str, Any]) -> tuple[str, ...]:
    """The files a tool_use reads as rehydration counts reads: a file tool's, and for a
    shell-driven agent's shell tool (`SHELL_AGENT_TOOLS`) those its command shows."""
    path = file_read_path(block)
    if path is not None:
        return (path,)
    if block.get("name") in SHELL_AGENT_TOOLS:
        return file_read_paths(block)
    return ()


def _kept_read_paths(kept_messages: Iterable[Entry | Mapping[str, Any]]) -> set[str]:
    paths: set[str] = set()
    for item in kept_messages:
        if isinstance(item, Entry):
            if item.type != "assistant":
                continue
            content: Any = item.content
        elif isinstance(item, Mapping):
            if item.get("role") != "assistant":
                continue
            content = item.get("content")
        else:
            continue
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                paths.update(read_paths(block))
    return paths


def _absolute(path: str, cwd: str | None) -> str | None:
    if os.path.isabs(path):
        return path
    return os.path.join(cwd, path) if cwd else None


def _posix_name(path: str) -> str:
    """`posixpath.basename` of a str, without its generic steps (hundreds of paths a call)."""
    return path[path.rfind("/") + 1 :]


def _realpath_by_directory() -> Callable[[str], str]:
    """`os.path.realpath` for the many paths of one compaction, each directory resolved once.

    `realpath` checks every component of a path for a link; the paths read in a session share
    a few directories. An absolute path whose last component is a name (not "", "." or "..")
    resolves to its directory's real path joined with that name unless the name is itself a
    link there (then it is resolved whole, as `realpath` would). A name in a directory that
    does not exist (paths recorded on another machine) cannot be a link: not looked up."""
    if os.path is not posixpath:  # the rule is posixpath's walk; elsewhere, the call itself
        return os.path.realpath
    directories: dict[str, tuple[str, bool]] = {}
    """Directory -> (its real path, whether that is a directory: no name in it exists else)."""

    def resolve(path: str) -> str:
        directory, _, name = path.rpartition("/")
        if not directory or not path.startswith("/") or name in ("", ".", ".."):
            return os.path.realpath(path)
        known = directories.get(directory)
        if known is None:
            real = os.path.realpath(directory)
            known = directories[directory] = (real, os.path.isdir(real))
        real, listed = known
        joined = real + "/" + name if real != "/" else "/" + name  # os.path.join's result
        if not listed:
            return joined  # nothing in it can be a link: realpath keeps the missing name
        try:
            mode = os.lstat(joined).st_mode
        except OSError:
            return joined  # realpath keeps a missing name as it is
        return os.path.realpath(path) if stat.S_ISLNK(mode) else joined

    return resolve


def rehydrate_files(
    state: WorkingState,
    *,
    allowed_roots: Sequence[str | Path] | None,
    kept_messages: Iterable[Entry | Mapping[str, Any]] = (),
    policy: Policy | None = None,
    read_file: Callable[[str], str] | None = None,
    file_size: Callable[[str], int | None] = regular_file_size,
    resolve_path: Callable[[str], str] = os.path.realpath,
    memory_file_names: Iterable[str] = DEFAULT_MEMORY_FILE_NAMES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    cwd: str | None = None,
) -> tuple[list[dict[str, Any]], list[Skipped], int]:
    """File attachments for the most recently read files, the skips, and their tokens."""
    policy = policy or Policy()
    reader = read_file or (lambda path: read_utf8(path, max_file_bytes + 1))
    by_directory = resolve_path is os.path.realpath and os.path is posixpath
    if by_directory:
        resolve_path = _realpath_by_directory()
    # None: the text does not come from this machine's disk (see recorded_files), no roots.
    roots = None if allowed_roots is None else [resolve_path(str(r)) for r in allowed_roots]
    memory_names = set(memory_file_names)
    plan = resolve_path(state.plan_file_path) if state.plan_file_path else None
    kept: set[str] = set()
    for kept_path in _kept_read_paths(kept_messages):
        absolute_kept = _absolute(kept_path, cwd)
        if absolute_kept is not None:
            kept.add(resolve_path(absolute_kept))
    skipped: list[Skipped] = []
    candidates: list[tuple[str, str]] = []
    ordered = sorted(state.files_read.items(), key=lambda item: (-item[1].read_at, item[0]))
    # A caller's resolver may give a `Path`: only our own gives a str a slice can take apart.
    name_of = _posix_name if by_directory else os.path.basename
    for path, read_state in ordered:
        absolute = _absolute(path, cwd)
        if absolute is None:
            skipped.append(Skipped("file", path, "relative path and no cwd given"))
            continue
        resolved = resolve_path(absolute)
        if name_of(path) in memory_names or name_of(resolved) in memory_names:
            skipped.append(Skipped("file", path, "memory file (restored with the instructions)"))
        elif plan is not None and resolved == plan:
            skipped.append(Skipped("file", path, "plan file (restored as the plan)"))
        elif read_state.unchanged_stub:
            skipped.append(Skipped("file", path, "last read was an unchanged-file stub"))
        elif resolved in kept:
            skipped.append(Skipped("file", path, "already read in a kept message"))
        elif roots is not None and not _inside(resolved, roots):
            skipped.append(Skipped("file", path, "resolves outside the allowed roots"))
        else:
            candidates.append((path, resolved))
    # A file read once and never touched again was most likely a look around: the summary
    # names it, and restoring it would be carried (and paid for) on every call until the next
    # compaction. The newest candidate is always restored: the agent was in the middle of it.
    used: list[tuple[str, str]] = []
    for rank, (path, resolved) in enumerate(candidates):
        read_state = state.files_read[path]
        if rank and not read_state.modified and read_state.uses < policy.rehydrate_min_uses:
            skipped.append(
                Skipped(
                    "file",
                    path,
                    f"used {read_state.uses} time(s), under rehydrate_min_uses "
                    f"({policy.rehydrate_min_uses}), and never modified",
                )
            )
        else:
            used.append((path, resolved))
    candidates = used
    for path, _ in candidates[policy.rehydrate_max_files :]:
        skipped.append(
            Skipped("file", path, f"not among the {policy.rehydrate_max_files} most recent")
        )
    attachments: list[dict[str, Any]] = []
    total = 0
    for path, resolved in candidates[: policy.rehydrate_max_files]:
        size = file_size(resolved)
        if size is None:
            skipped.append(Skipped("file", path, "no longer exists"))
            continue
        if size > max_file_bytes:
            skipped.append(Skipped("file", path, f"too large to re-read ({size:,} bytes)"))
            continue
        try:
            text = reader(resolved)
        except (OSError, UnicodeError) as error:
            skipped.append(Skipped("file", path, f"unreadable: {error}"))
            continue
        marker = FILE_TRUNCATION_MARKER.format(tokens=policy.rehydrate_tokens_per_file, path=path)
        content, truncated = truncate_to_tokens(text, policy.rehydrate_tokens_per_file, marker)
        attachment: dict[str, Any] = {
            "type": "file",
            "filename": path,
            "content": content,
            "truncated": truncated,
        }
        tokens = attachment_tokens(attachment)
        if total + tokens > policy.rehydrate_total_file_tokens:
            skipped.append(Skipped("file", path, "over the total file budget"))
            continue
        total += tokens
        attachments.append(attachment)
    return attachments, skipped, total


def rehydrate_skills(
    state: WorkingState, *, policy: Policy | None = None
) -> tuple[dict[str, Any] | None, list[Skipped], int]:
    """The `invoked_skills` attachment (newest first, capped), the skips, and its tokens."""
    policy = policy or Policy()
    ordered = sorted(state.invoked_skills.items(), key=lambda item: (-item[1].invoked_at, item[0]))
    skills: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    total = 0
    for name, skill in ordered:
        content, truncated = truncate_to_tokens(
            skill.content,
            policy.rehydrate_tokens_per_skill,
            SKILL_TRUNCATION_MARKER.format(tokens=policy.rehydrate_tokens_per_skill),
        )
        item: dict[str, Any] = {"name": name, "path": skill.path, "content": content}
        if truncated:
            item["truncated"] = True
        tokens = attachment_tokens(item)
        if total + tokens > policy.rehydrate_total_skill_tokens:
            skipped.append(Skipped("skill", name, "over the total skill budget"))
            continue
        total += tokens
        skills.append(item)
    if not skills:
        return None, skipped, 0
    return {"type": "invoked_skills", "skills": skills}, skipped, total


def rehydrate(
    state: WorkingState,
    *,
    allowed_roots: Sequence[str | Path] | None,
    kept_messages: Iterable[Entry | Mapping[str, Any]] = (),
    policy: Policy | None = None,
    read_file: Callable[[str], str] | None = None,
    file_size: Callable[[str], int | None] = regular_file_size,
    resolve_path: Callable[[str], str] = os.path.realpath,
    memory_file_names: Iterable[str] = DEFAULT_MEMORY_FILE_NAMES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    cwd: str | None = None,
) -> Rehydration:
    """Every post-compaction attachment for `state`, in seed 002's order, with the skips.

    Order: files (most recent first), todo list, plan file, plan mode, invoked skills,
    background agents, tool delta, MCP instructions delta. File access goes through
    `read_file`, `file_size` and `resolve_path` (defaults: the local disk), so the function
    is testable without touching it. Only `allowed_roots` (resolved) may be read.
    """
    policy = policy or Policy()
    attachments, skipped, file_tokens = rehydrate_files(
        state,
        allowed_roots=allowed_roots,
        kept_messages=kept_messages,
        policy=policy,
        read_file=read_file,
        file_size=file_size,
        resolve_path=resolve_path,
        memory_file_names=memory_file_names,
        max_file_bytes=max_file_bytes,
        cwd=cwd,
    )
    if state.todos:
        attachments.append(
            {
                "type": "todo",
                "content": [dict(item) for item in state.todos],
                "itemCount": len(state.todos),
                "context": "post-compact",
            }
        )
    if state.plan_file_path and state.plan_content:
        attachments.append(
            {
                "type": "plan_file_reference",
                "planFilePath": state.plan_file_path,
                "planContent": state.plan_content,
            }
        )
    if state.plan_mode:
        attachments.append({"type": "plan_mode", "planFilePath": state.plan_file_path})
    skills, skill_skips, skill_tokens = rehydrate_skills(state, policy=policy)
    skipped.extend(skill_skips)
    if skills:
        attachments.append(skills)
    for agent_id, agent in sorted(state.background_agents.items()):
        if agent.status in RUNNING_AGENT_STATUSES or not agent.result_seen:
            attachment: dict[str, Any] = {
                "type": "agent_status",
                "agentId": agent_id,
                "status": agent.status,
                "description": agent.description,
            }
            if agent.result:
                attachment["result"] = agent.result
            attachments.append(attachment)
    if state.tool_delta and state.tool_delta.strip():
        attachments.append({"type": "tool_delta", "content": state.tool_delta})
    if state.mcp_instructions_delta and state.mcp_instructions_delta.strip():
        attachments.append(
            {"type": "mcp_instructions_delta", "content": state.mcp_instructions_delta}
        )
    return Rehydration(
        attachments=attachments,
        skipped=skipped,
        file_tokens=file_tokens,
        skill_tokens=skill_tokens,
    )


def make_rehydrator(
    state: WorkingState,
    *,
    allowed_roots: Sequence[str | Path] | None,
    **options: Any,
) -> Callable[[list[Entry]], tuple[list[dict[str, Any]], list[str]]]:
    """`rehydrate` as the orchestrator's callback: kept entries in, (attachments, skips) out.

    `options` are passed to `rehydrate` (policy, read_file, memory_file_names, cwd…).
    """

    def rehydrator(kept: list[Entry]) -> tuple[list[dict[str, Any]], list[str]]:
        result = rehydrate(state, allowed_roots=allowed_roots, kept_messages=kept, **options)
        return result.attachments, result.skipped_lines()

    return rehydrator


# -- the working state of a recorded session -------------------------------------------------

PLAN_DIRECTORY_MARKER = "/.claude/plans/"
"""Files written under a folder like this are plan files."""
SKILL_TOOLS = frozenset({"Skill"})
"""Tools that invoke a skill (input `skill` or `name`)."""


def _entry_time(entry: Entry, index: int) -> float:
    moment = entry.time
    return moment.timestamp() if moment is not None else float(index)


def working_state_from_entries(entries: Sequence[Entry]) -> WorkingState:
    """The working state a host would have kept, rebuilt from recorded entries.

    Files read or written (Claude Code's read-file state records both) with the time of the
    call, reads answered by the unchanged stub, the latest todo list, the plan file (written
    under `.claude/plans/`, or the plan of ExitPlanMode) and plan mode (Enter/ExitPlanMode),
    and skills whose content followed their Skill call as a meta message. Background agents
    and tool deltas are not recorded in transcripts; the host adds them.
    """
    return WorkingStateReader().read(entries)


class WorkingStateReader:
    """`working_state_from_entries` over a transcript that only grows: each call reads the
    entries added since the last one (a session compacting again and again would otherwise
    read its whole transcript at every compaction). A list that is not the last one grown is
    read from the start. `read` returns a copy: the reader's own state goes on."""

    def __init__(self) -> None:
        # Kept across resets: it has just seen the list a reset starts reading.
        self._mark = ReadMark()
        self._reset()

    def _reset(self) -> None:
        self.state = WorkingState()
        self._call_paths: dict[str, str] = {}
        self._pending_skill: str | None = None

    def read(self, entries: Sequence[Entry]) -> WorkingState:
        """The working state of these entries."""
        self.advance(entries)
        return self.state.copy()

    def advance(self, entries: Sequence[Entry], limit: int | None = None) -> bool:
        """Read what `entries` added since the last call, at most `limit` entries (None: all),
        without copying the state out: a session calls it on every turn, so that its
        compaction reads only that turn's entries. True when all of them are read."""
        restart, start, end = self._mark.span(entries, limit)
        if restart:
            self._reset()
        for index in range(start, end):
            self._feed(index, entries[index])
        return end == len(entries)

    def _feed(self, index: int, entry: Entry) -> None:
        # The entry's time is parsed only for what records it (most entries record nothing).
        if entry.type == "attachment":
            attachment = entry.attachment or {}
            if attachment.get("type") == "todo" and isinstance(attachment.get("content"), list):
                self.state.todos = [
                    dict(item) for item in attachment["content"] if isinstance(item, dict)
                ]
            return
        content = entry.content
        if not isinstance(content, list):
            if (
                self._pending_skill
                and entry.type == "user"
                and entry.is_meta
                and isinstance(content, str)
            ):
                self.state.record_skill(self._pending_skill, content, _entry_time(entry, index))
                self._pending_skill = None
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use" and entry.type == "assistant":
                name = block.get("name")
                raw_input = block.get("input")
                tool_input: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
                written = file_write_path(block)
                path = file_read_path(block) or written
                if path:
                    self._call_paths[str(block.get("id", ""))] = path
                    self.state.record_read(path, _entry_time(entry, index), write=path == written)
                elif name in SHELL_AGENT_TOOLS:
                    for read in file_read_paths(block):
                        self.state.record_read(read, _entry_time(entry, index), write=False)
                if written and PLAN_DIRECTORY_MARKER in written.replace("\\", "/"):
                    self.state.plan_file_path = written
                    text = tool_input.get("content")
                    if isinstance(text, str):
                        self.state.plan_content = text
                todos = todo_list_from_tool(block)
                if todos is not None:
                    self.state.todos = [dict(item) for item in todos if isinstance(item, dict)]
                if name == "EnterPlanMode":
                    self.state.plan_mode = True
                elif name == "ExitPlanMode":
                    self.state.plan_mode = False
                    plan = tool_input.get("plan")
                    if isinstance(plan, str) and plan.strip():
                        self.state.plan_content = plan
                elif name in SKILL_TOOLS:
                    skill = tool_input.get("skill") or tool_input.get("name")
                    self._pending_skill = str(skill) if skill else None
            elif kind == "tool_result":
                # Its result settles a call: the id is not looked up again, and the map
                # would otherwise hold every call of the session.
                path = self._call_paths.pop(str(block.get("tool_use_id", "")), None)
                if path and text_of(block.get("content")).lstrip().startswith(
                    UNCHANGED_STUB_PREFIX
                ):
                    self.state.record_stub(path, _entry_time(entry, index))
            elif kind == "text" and self._pending_skill and entry.type == "user" and entry.is_meta:
                text = str(block.get("text", ""))
                self.state.record_skill(self._pending_skill, text, _entry_time(entry, index))
                self._pending_skill = None


# -- renderers for the attachment types introduced here --------------------------------------


def _skills_text(attachment: dict[str, Any]) -> str | None:
    skills = attachment.get("skills")
    if not isinstance(skills, list) or not skills:
        return None
    parts = ["Skills invoked earlier in this session; keep following their instructions:"]
    for skill in skills:
        if not isinstance(skill, dict):
            continue
        header = f"### Skill: {skill.get('name', '?')}"
        if skill.get("path"):
            header += f"\nPath: {skill['path']}"
        parts.append(f"{header}\n\n{skill.get('content', '')}")
    return "\n\n".join(parts)


def _agent_text(attachment: dict[str, Any]) -> str | None:
    agent_id = attachment.get("agentId") or "?"
    status = attachment.get("status") or "unknown"
    text = (
        f"Background agent {agent_id} ({attachment.get('description') or 'no description'}) "
        f"is {status}. Do not start it again."
    )
    if attachment.get("result"):
        text += f"\nResult: {attachment['result']}"
    return text


def _tool_delta_text(attachment: dict[str, Any]) -> str | None:
    content = attachment.get("content")
    return f"Tools available now:\n{content}" if isinstance(content, str) and content else None


def _mcp_text(attachment: dict[str, Any]) -> str | None:
    content = attachment.get("content")
    if not isinstance(content, str) or not content:
        return None
    return f"Instructions from MCP servers:\n{content}"


RENDERERS.setdefault("invoked_skills", _skills_text)
RENDERERS.setdefault("agent_status", _agent_text)
RENDERERS.setdefault("tool_delta", _tool_delta_text)
RENDERERS.setdefault("mcp_instructions_delta", _mcp_text)
