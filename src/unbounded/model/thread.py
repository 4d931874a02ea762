"""The conversation thread as Claude Code rebuilds it from `parentUuid` links.

A Claude Code file is append-only, so it holds more than the conversation the model saw last:
a rewound (or edited) message starts a new branch and the abandoned one stays in the file; a
resumed session can write the earlier history again under new uuids; a client can append
records it already wrote again under the same uuids (the VS Code extension on reopening a
session); one file may hold several sessions. Taking records in file order sends all of it.
The thread is rebuilt instead:

1. **Leaf.** The newest user or assistant record in the file (a `summary` record's
   `leafUuid` also names a leaf; the one written last wins).
2. **Path.** From the leaf, follow `parentUuid` back to a root. A compact boundary has a null
   `parentUuid`: its `logicalParentUuid` is followed. A parent that is not in the file (a
   fragment of a longer session, or a boundary pointing at a record never written) is taken
   to be the record just before in the file, and so is a missing parent, unless the record
   opens another session (a resume writing the history again starts its own chain).
3. **Progress records are side notes.** A hook's progress records hang off the tool call they
   report on and chain among themselves; some versions (2.1.7x) then hang the next message
   off the last of them, although the turn went on below the tool call meanwhile. A message
   whose parent is a progress record therefore follows the latest message written before it
   that descends from the record the progress chain hangs off (the turn's real end), and
   keeps its named parent when no such message exists.
4. **Siblings that belong.** In 2.1.x files, progress records and parallel tool calls branch
   the chain: the results of two parallel calls hang off two different assistant lines, and
   the conversation continues from only one of them. A side branch is brought back while it
   holds only records that belong to the same turn: progress and system records,
   attachments, lines of an assistant response already on the path (same `message.id`), and
   tool results answering tool calls on the path that the path leaves unanswered. A branch
   that starts with anything else (a new prompt, another response) is left out whole, and
   reported with why: the conversation went back to an earlier record (a rewind), or it
   belongs to another session, or it never joins the thread.
5. **One copy.** A record whose uuid was already read is the same record written again, and
   is read once. A record repeated under a new uuid (the same response id and content, or the
   same prompt at the same time) is kept once, and so is a tool call (by `tool_use` id) and
   its result: tool ids are unique per call, and the API refuses a request that repeats one.

Records keep their file order. Records without a uuid (importers of other formats always set
one) are kept where they are. `file_order_thread` is the old behaviour, kept for debugging.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson

from unbounded.model.entries import Entry
from unbounded.model.user_messages import classify_user_entry

ThreadOrder = Literal["thread", "file"]
"""How the main thread is taken: rebuilt from parent links (default) or in file order."""

LeftOutReason = Literal["copied", "rewound", "other_session", "detached"]
"""Why a branch is not in the thread: its responses are all in the thread already (history a
resume wrote again, the copy followed); the conversation went back to an earlier record and
on from there; the branch is another session's; or it never joins the thread."""

_REASON_WORDS: dict[LeftOutReason, tuple[str, str]] = {
    "copied": (
        "copied",
        "a resume wrote this history again and the thread follows the copy",
    ),
    "rewound": (
        "rewound",
        "the conversation went back to an earlier message and went on from there",
    ),
    "other_session": ("", "another session written in the same file"),
    "detached": ("detached", "their parent chain never reaches the thread"),
}
"""Per reason: the adjective for the branches, and why they are not in the thread."""


@dataclass(frozen=True, slots=True)
class LeftOutBranch:
    """Conversation records the thread does not follow that hang together, and why."""

    reason: LeftOutReason
    first_line: int | None
    """File line of the branch's first record."""
    fork_line: int | None
    """File line of the thread record the branch hangs off (a rewind's point), if any."""
    session: str | None
    """The branch's session id when the thread holds none of its records' session."""
    prompts: int
    responses: int
    """Responses: distinct response ids (a record without one counts alone)."""
    tool_results: int

    def contents(self) -> str:
        """What the branch holds, in words ("1 prompt, 3 responses, 2 tool results")."""
        parts = [
            f"{count} {word}{'' if count == 1 else 's'}"
            for count, word in (
                (self.prompts, "prompt"),
                (self.responses, "response"),
                (self.tool_results, "tool result"),
            )
            if count
        ]
        return ", ".join(parts) or "no messages"


@dataclass(slots=True)
class ThreadReport:
    """What rebuilding the thread found: the leaf, sessions, and what it left out."""

    leaf_uuid: str | None = None
    file_sessions: list[str] = field(default_factory=list)
    thread_sessions: list[str] = field(default_factory=list)
    abandoned: int = 0
    """Prompts, responses and tool results on branches the thread does not follow (rewinds,
    other sessions); progress records and local-command echoes are not counted."""
    branches: list[LeftOutBranch] = field(default_factory=list)
    """The left-out records grouped by branch, in file order, with why each was left out."""
    duplicates: int = 0
    """Records dropped because the thread already held a copy under another uuid."""
    copies: int = 0
    """Records written again under a uuid already read (read once)."""
    rescued: int = 0
    """Side-branch records brought back (parallel tool results, progress, response lines)."""

    def warnings(self) -> list[str]:
        """Human-readable notes for what was left out (empty when nothing was)."""
        notes: list[str] = []
        if self.branches:
            notes.append(_branch_note(self.branches))
        if self.copies:
            notes.append(
                f"{self.copies} record(s) written again under uuids already in the file (a "
                "client appending history it had written, as the VS Code extension does on "
                "reopening a session) were read once"
            )
        if self.duplicates:
            notes.append(
                f"{self.duplicates} repeated record(s) (history written again under new uuids "
                "on resume) were kept once"
            )
        return notes


def _branch_note(branches: Sequence[LeftOutBranch]) -> str:
    """One sentence on the left-out branches: per reason, where each starts, what it holds."""
    parts: list[str] = []
    reason: LeftOutReason
    for reason in ("copied", "rewound", "other_session", "detached"):
        group = [b for b in branches if b.reason == reason]
        if not group:
            continue
        adjective, why = _REASON_WORDS[reason]
        places = "; ".join(
            f"line {b.first_line}"
            + (f", branching from line {b.fork_line}" if b.fork_line is not None else "")
            + (f", session {b.session}" if b.session else "")
            + f": {b.contents()}"
            for b in group[:3]
        )
        more = f"; {len(group) - 3} more" if len(group) > 3 else ""
        noun = "branch" if len(group) == 1 else "branches"
        label = f"{len(group)} {adjective} {noun}" if adjective else f"{len(group)} {noun}"
        parts.append(f"{label} ({places}{more}): {why}")
    billed = any(b.reason != "copied" and b.responses for b in branches)
    return (
        "left out of the thread: "
        + "; ".join(parts)
        + (
            ". Their responses were billed all the same and count in the recorded calls and "
            "cost"
            if billed
            else ""
        )
        + "; --file-order reads every record in file order"
    )


def file_order_thread(entries: Sequence[Entry], *, include_sidechains: bool) -> list[Entry]:
    """Conversation records in file order (inline sub-agent records left out unless asked)."""
    return [e for e in entries if e.is_conversation and (include_sidechains or not e.is_sidechain)]


# The same rules on a RecordTable's rows: unbounded.inspection_thread (`_Rebuild`). Change both;
# tests/test_inspection_thread.py checks they agree.
def rebuild_thread(
    entries: Sequence[Entry],
    *,
    include_sidechains: bool = False,
    summary_leaves: Sequence[str] = (),
    leaf_uuid: str | None = None,
) -> tuple[list[Entry], ThreadReport]:
    """The main thread (see the module docstring) and a report of what it left out.

    `leaf_uuid` rebuilds the conversation that ends at that record instead (a left-out
    branch's own history, as its calls sent it); the newest leaf when it is not in the file.
    """
    listed = file_order_thread(entries, include_sidechains=include_sidechains)
    report = ThreadReport(file_sessions=_sessions(listed))
    candidates = _first_copies(listed, report)
    if not candidates:
        return [], report
    position: dict[str, int] = {}
    for index, entry in enumerate(candidates):
        uuid = entry.uuid
        if uuid is not None:
            position[uuid] = index
    parents = _resolve_parents(candidates, position)
    leaf = position.get(leaf_uuid) if leaf_uuid is not None else None
    if leaf is None:
        leaf = _leaf(candidates, position, summary_leaves)
    del position  # a dict the size of the file, not needed past here (the peak comes later)
    if leaf is None:
        return _dedupe(candidates, report), report
    report.leaf_uuid = candidates[leaf].uuid
    on_path = _path(leaf, parents)
    keep = set(on_path)
    report.rescued = _rescue_siblings(candidates, parents, keep)
    for index, entry in enumerate(candidates):
        if entry.uuid is None:
            keep.add(index)
    thread = [candidates[i] for i in sorted(keep)]
    report.thread_sessions = _sessions(thread)
    report.branches = _left_out_branches(candidates, parents, keep, report.thread_sessions)
    report.abandoned = sum(
        1 for i, e in enumerate(candidates) if i not in keep and _is_conversation_turn(e)
    )
    thread = _dedupe(thread, report)
    report.thread_sessions = _sessions(thread)
    return thread, report


def _first_copies(entries: Sequence[Entry], report: ThreadReport) -> list[Entry]:
    """The entries without the ones whose uuid was read before (counted in `report.copies`)."""
    seen: set[str] = set()
    kept: list[Entry] = []
    for entry in entries:
        uuid = entry.uuid
        if uuid is not None:
            if uuid in seen:
                report.copies += 1
                continue
            seen.add(uuid)
        kept.append(entry)
    return kept


def _is_conversation_turn(entry: Entry) -> bool:
    """A response, or a prompt the user typed: what makes a left-out branch worth a warning
    (a local command's echo on a side branch is not)."""
    if entry.type == "assistant":
        return not entry.is_synthetic_api_error
    if entry.type != "user":
        return False
    return classify_user_entry(entry).kind in ("prompt", "tool_results")


def _sessions(entries: Sequence[Entry]) -> list[str]:
    seen: dict[str, None] = {}
    for entry in entries:
        session = entry.data.get("sessionId")
        if isinstance(session, str):
            seen.setdefault(session)
    return list(seen)


def _resolve_parents(candidates: Sequence[Entry], position: dict[str, int]) -> list[int | None]:
    """Each record's parent index: parentUuid, else logicalParentUuid, else the record before
    it when the named parent is not in the file; None for a true root. A message named after
    a progress record follows the turn's real end instead (rule 3 of the module docstring)."""
    parents: list[int | None] = []
    last_message: int | None = None  # the latest record before this one that is not progress
    for index, entry in enumerate(candidates):
        parent = _named_parent(candidates, position, index)
        if (
            parent is not None
            and parent < index
            and entry.type != "progress"
            and candidates[parent].type == "progress"
        ):
            parent = _past_progress(candidates, parents, parent, last_message)
        parents.append(parent)
        if entry.type != "progress":
            last_message = index
    return parents


def _named_parent(candidates: Sequence[Entry], position: dict[str, int], index: int) -> int | None:
    """The parent a record names (rule 2 of the module docstring), as an index."""
    entry = candidates[index]
    named = entry.parent_uuid
    if named is None and entry.is_compact_boundary:
        named = entry.logical_parent_uuid or ""
    if named is None:
        # A record without a parent opens a chain when it opens another session (a resumed
        # session writing its history again); otherwise it was written unlinked after the
        # record before it (a hand-built transcript), and follows it.
        previous = candidates[index - 1] if index > 0 else None
        session = entry.data.get("sessionId")
        if previous is None or (session is not None and session != previous.data.get("sessionId")):
            return None
        return index - 1
    found = position.get(named)
    if found is not None and found != index:
        return found
    return index - 1 if index > 0 else None


def _past_progress(
    candidates: Sequence[Entry],
    parents: Sequence[int | None],
    progress: int,
    last_message: int | None,
) -> int:
    """The parent of a message named after a progress record: the latest earlier message
    that descends from the record the progress chain hangs off, else the progress record."""
    anchor: int | None = progress
    climbed: set[int] = set()
    while anchor is not None and candidates[anchor].type == "progress":
        if anchor in climbed or anchor >= len(parents):
            return progress
        climbed.add(anchor)
        anchor = parents[anchor]
    if anchor is None or last_message is None:
        return progress
    node: int | None = last_message
    walked: set[int] = set()
    # A parent can point forward (a uuid written again later maps to its last row), to a row
    # not resolved yet: the walk ends there as at a missing parent.
    while node is not None and node >= anchor and node not in walked and node < len(parents):
        if node == anchor:
            return last_message
        walked.add(node)
        node = parents[node]
    return progress


def _leaf(
    candidates: Sequence[Entry], position: dict[str, int], summary_leaves: Sequence[str]
) -> int | None:
    best: int | None = None
    for index in range(len(candidates) - 1, -1, -1):
        entry = candidates[index]
        if entry.type in ("user", "assistant") and entry.uuid is not None:
            best = index
            break
    for uuid in summary_leaves:
        found = position.get(uuid)
        if found is not None and (best is None or found > best):
            best = found
    return best


def _path(leaf: int, parents: Sequence[int | None]) -> list[int]:
    path: list[int] = []
    seen: set[int] = set()
    current: int | None = leaf
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        current = parents[current]
    return path


def _tool_ids(entry: Entry, kind: str, key: str) -> list[str]:
    content = entry.content
    if not isinstance(content, list):
        return []
    return [
        str(block.get(key))
        for block in content
        if isinstance(block, dict) and block.get("type") == kind
    ]


def _only_tool_results(entry: Entry) -> bool:
    content = entry.content
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _rescue_siblings(
    candidates: Sequence[Entry], parents: Sequence[int | None], keep: set[int]
) -> int:
    """Add side-branch records that belong to turns on the path; returns how many."""
    # Each record's children in file order, as linked lists in two arrays (16 bytes a
    # record, where a dict of lists took ~100: this is the peak of a streamed inspect).
    first_child = array("q", [-1]) * len(parents)
    next_sibling = array("q", [-1]) * len(parents)
    for index in range(len(parents) - 1, -1, -1):
        parent = parents[index]
        if parent is not None:
            next_sibling[index] = first_child[parent]
            first_child[parent] = index

    def children(node: int) -> Iterator[int]:
        child = first_child[node]
        while child >= 0:
            yield child
            child = next_sibling[child]

    response_ids: set[str] = set()
    called: set[str] = set()
    answered: set[str] = set()
    for index in keep:
        entry = candidates[index]
        if entry.type == "assistant":
            if entry.message_id:
                response_ids.add(entry.message_id)
            called.update(_tool_ids(entry, "tool_use", "id"))
        elif entry.type == "user":
            answered.update(_tool_ids(entry, "tool_result", "tool_use_id"))

    def belongs(entry: Entry) -> bool:
        kind = entry.type
        if kind in ("progress", "attachment"):
            return True
        if kind == "system":
            return not entry.is_compact_boundary
        if kind == "assistant":
            return entry.message_id is not None and entry.message_id in response_ids
        if kind == "user" and _only_tool_results(entry):
            ids = _tool_ids(entry, "tool_result", "tool_use_id")
            return all(i in called and i not in answered for i in ids)
        return False

    rescued = 0
    # The kept records in file order, not the set's order: which of two competing siblings is
    # brought back (two results answering one call) must not depend on hashing.
    stack = [child for node in sorted(keep) for child in children(node) if child not in keep]
    while stack:
        index = stack.pop()
        if index in keep:
            continue
        entry = candidates[index]
        if not belongs(entry):
            continue
        keep.add(index)
        rescued += 1
        if entry.type == "user":
            answered.update(_tool_ids(entry, "tool_result", "tool_use_id"))
        elif entry.type == "assistant":
            called.update(_tool_ids(entry, "tool_use", "id"))
        stack.extend(child for child in children(index) if child not in keep)
    return rescued


def _left_out_branches(
    candidates: Sequence[Entry],
    parents: Sequence[int | None],
    keep: set[int],
    thread_sessions: Sequence[str],
) -> list[LeftOutBranch]:
    """Group the left-out conversation turns by the branch they sit on, and say why each
    branch was left out: it hangs off a thread record (rewound), or it is another session's,
    or its chain never reaches the thread."""
    root_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for index, entry in enumerate(candidates):
        if index in keep or not _is_conversation_turn(entry):
            continue
        node = index
        climbed: list[int] = []
        while True:
            if node in root_of:
                node = root_of[node]
                break
            parent = parents[node]
            if parent is None or parent in keep or parent in climbed or parent == node:
                break
            climbed.append(node)
            node = parent
        for visited in climbed:
            root_of[visited] = node
        root_of[index] = node
        members.setdefault(node, []).append(index)
    kept_responses = {candidates[i].message_id for i in keep} - {None}
    branches: list[LeftOutBranch] = []
    for root in sorted(members):
        fork = parents[root]
        session = candidates[root].data.get("sessionId")
        session = session if isinstance(session, str) else None
        responses = {
            e.message_id or e.uuid or str(i)
            for i, e in ((i, candidates[i]) for i in members[root])
            if e.type == "assistant"
        }
        fork_line: int | None = None
        if responses and responses <= kept_responses:
            reason: LeftOutReason = "copied"
        elif fork is not None and fork in keep:
            reason = "rewound"
            fork_line = candidates[fork].line
        elif session is not None and session not in thread_sessions:
            reason = "other_session"
        else:
            reason = "detached"
        records = [candidates[i] for i in members[root]]
        kinds = [classify_user_entry(e).kind for e in records if e.type == "user"]
        branches.append(
            LeftOutBranch(
                reason=reason,
                first_line=candidates[root].line,
                fork_line=fork_line,
                session=session if session not in thread_sessions else None,
                prompts=kinds.count("prompt"),
                responses=len(responses),
                tool_results=kinds.count("tool_results"),
            )
        )
    return branches


def _content_key(entry: Entry) -> bytes:
    # A 128-bit digest, not the JSON itself: every key is kept for the whole thread, and
    # orjson returns each bytes object with ~4 KB allocated whatever its length.
    try:
        text = orjson.dumps(entry.content)
    except TypeError:
        text = repr(entry.content).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def _dedupe(thread: Sequence[Entry], report: ThreadReport) -> list[Entry]:
    """Keep one copy of repeated records and of each tool call and result."""
    kept: list[Entry] = []
    seen: set[tuple[str, str, bytes]] = set()
    calls: set[str] = set()
    results: set[str] = set()
    for entry in thread:
        kind = entry.type
        if kind == "assistant":
            # A response id with the same content is the same line, whenever it was written.
            response = entry.message_id or f"{entry.uuid}@{entry.timestamp}"
            key = ("a", response, _content_key(entry))
            ids = _tool_ids(entry, "tool_use", "id")
            if key in seen or (ids and all(i in calls for i in ids)):
                report.duplicates += 1
                continue
            seen.add(key)
            calls.update(ids)
        elif kind == "user":
            ids = _tool_ids(entry, "tool_result", "tool_use_id")
            if ids and _only_tool_results(entry):
                if all(i in results for i in ids):
                    report.duplicates += 1
                    continue
                results.update(ids)
            elif not entry.is_compact_summary:
                key = ("u", entry.timestamp or entry.uuid or "", _content_key(entry))
                if key in seen:
                    report.duplicates += 1
                    continue
                seen.add(key)
        kept.append(entry)
    return kept
