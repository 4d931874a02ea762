"""The main thread rebuilt on a `RecordTable`'s rows: `rebuilt_main_thread`, `rebuilt_branch`.

The rules are `unbounded.model.thread.rebuild_thread`'s (its module docstring), and so is the
result on the loaded records; only the bookkeeping differs. Records are row numbers, a uuid is
looked up in an open-addressing table of numbers (`_NumberTable`) that compares the rows'
16-byte uuid keys, and a set of records is a byte per record. Rebuilding then holds about 80
bytes a record at its peak, where stand-in entries, dicts of uuid strings and sets of content
tuples held about 340 (a 100,000-call session has half a million records).

Contents are not read: two records' contents count as the same when their stand-ins
(`_standin_content`, built from the row's digest of content and time, its content's shape,
its tool ids and how a user message classifies) are the same.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from unbounded.model.thread import LeftOutBranch, LeftOutReason, ThreadReport
from unbounded.record_table import RecordInfo, RecordTable, UuidKey

_NONE = -1
"""A missing parent or number in the arrays below (4-byte signed: up to 2**31 records)."""


@dataclass(slots=True)
class SelectedThread:
    """The main thread as row numbers (file order), and notes on what was left out."""

    indexes: Sequence[int]
    warnings: list[str]


class _NumberTable:
    """Numbers in an open-addressing hash table, found by their hash and a test the caller
    gives: 8 to 16 bytes a number (the table stays at most half full)."""

    __slots__ = ("_mask", "_slots")

    def __init__(self, capacity: int) -> None:
        """Room for `capacity` numbers."""
        size = 8
        while size < 2 * capacity:
            size *= 2
        self._slots = array("i", [_NONE]) * size
        self._mask = size - 1

    def find(self, hashed: int, same: Callable[[int], bool]) -> int:
        """The number added under `hashed` for which `same` holds, or -1."""
        slots, mask = self._slots, self._mask
        slot = hashed & mask
        while (number := slots[slot]) != _NONE:
            if same(number):
                return number
            slot = (slot + 1) & mask
        return _NONE

    def add(self, hashed: int, number: int) -> None:
        """Add a number (not negative) under a hash."""
        slots, mask = self._slots, self._mask
        slot = hashed & mask
        while slots[slot] != _NONE:
            slot = (slot + 1) & mask
        slots[slot] = number


# What a user message of each kind can say so that `classify_user_content` sorts it the same
# way; `{}` takes the digest, so that records stay told apart when they are compared.
_KIND_WITNESS = {
    "prompt": "p{}",
    "command": "<command-name>c</command-name>{}",
    "command_output": "<local-command-stdout>{}",
    "caveat": "<local-command-caveat>{}",
    "notification": "<task-notification>{}",
    "interrupt": "[Request interrupted{}",
    "hook": "<hook-output>{}",
    "system_reminder": "<system-reminder>{}</system-reminder>",
    "skill": "Base directory for this skill:{}",
    "meta": "m{}",
    "compact_summary": "s{}",
    "tool_results": "r{}",
    "empty": "",
}


def _standin_content(record: RecordInfo) -> Any:
    """Content whose JSON is equal exactly when the real content (and time) is, as far as
    the row's digest tells (64 bits), and which a user-message classifier sorts as the real
    one."""
    digest = f"{record.digest:016x}"
    if record.content_shape == "none":
        return []
    witness = _KIND_WITNESS.get(record.user_kind or "prompt", "p{}").format(digest)
    if record.content_shape == "str":
        return witness
    blocks: list[dict[str, Any]] = [
        {"type": "tool_use", "id": tool_id} for tool_id in record.tool_use_ids
    ]
    blocks += [{"type": "tool_result", "tool_use_id": i} for i in record.tool_result_ids]
    if record.has_other_blocks:
        blocks.append({"type": "text", "text": witness})
    if blocks:
        blocks[0] = {**blocks[0], "digest": digest}
    return blocks


def _content_bytes(record: RecordInfo) -> bytes:
    return orjson.dumps(_standin_content(record))


def _only_tool_results(record: RecordInfo) -> bool:
    """The stand-in content is a non-empty list of tool results alone."""
    return (
        record.content_shape == "list"
        and not record.tool_use_ids
        and bool(record.tool_result_ids)
        and not record.has_other_blocks
    )


def _is_conversation_turn(record: RecordInfo) -> bool:
    """A response, or a prompt the user typed (`model.thread`'s rule)."""
    if record.type == "assistant":
        return not record.is_synthetic_api_error
    return record.type == "user" and record.user_kind in ("prompt", "tool_results")


def _sessions(table: RecordTable, rows: Iterator[int]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        session = table.session_ids.get(row)
        if session is not None:
            seen.setdefault(session)
    return list(seen)


def is_subagent_file(records: Sequence[RecordInfo]) -> bool:
    """`Transcript.is_subagent_file` on summaries: every conversation record is a sidechain."""
    conversation = False
    for record in records:
        if record.is_conversation:
            if not record.is_sidechain:
                return False
            conversation = True
    return conversation


class _Rebuild:
    """One rebuilding of a table's thread (`rebuild_rows`), its state in arrays."""

    def __init__(self, table: RecordTable, include_sidechains: bool) -> None:
        self.table = table
        self.report = ThreadReport()
        listed = array(
            "q",
            (
                row
                for row, record in enumerate(table)
                if record.is_conversation and (include_sidechains or not record.is_sidechain)
            ),
        )
        self.report.file_sessions = _sessions(table, iter(listed))
        # The first record of each uuid (copies counted), and where each uuid is among them.
        self.position = _NumberTable(len(listed))
        self.candidates = array("i")
        for row in listed:
            key = table.uuid_key(row)
            if key is not None:
                hashed = key.slot_hash()
                if self.position.find(hashed, self._matches(key)) != _NONE:
                    self.report.copies += 1
                    continue
                self.position.add(hashed, len(self.candidates))
            self.candidates.append(row)

    def _matches(self, key: UuidKey) -> Callable[[int], bool]:
        candidates, table = self.candidates, self.table
        return lambda index: table.same_uuid(candidates[index], key)

    def locate(self, key: UuidKey | None) -> int | None:
        """The position among the candidates of the record with this uuid."""
        if key is None:
            return None
        found = self.position.find(key.slot_hash(), self._matches(key))
        return None if found == _NONE else found

    def record(self, index: int) -> RecordInfo:
        """The candidate at a position."""
        return RecordInfo(self.table, self.candidates[index])

    def resolve_parents(self) -> array[int]:
        """`model.thread._resolve_parents` on positions (-1 for a root)."""
        parents = array("i")
        last_message: int | None = None
        for index in range(len(self.candidates)):
            record = self.record(index)
            parent = self.named_parent(index, record)
            if (
                parent is not None
                and parent < index
                and record.type != "progress"
                and self.record(parent).type == "progress"
            ):
                parent = self.past_progress(parents, parent, last_message)
            parents.append(_NONE if parent is None else parent)
            if record.type != "progress":
                last_message = index
        return parents

    def named_parent(self, index: int, record: RecordInfo) -> int | None:
        """`model.thread._named_parent` on positions."""
        named = self.table.parent_key(record.index)
        if named is None and record.is_compact_boundary:
            named = UuidKey.of(record.logical_parent_uuid or "")
        if named is None:
            if index == 0:
                return None
            session = record.session_id
            if session is not None and session != self.record(index - 1).session_id:
                return None
            return index - 1
        found = self.locate(named)
        if found is not None and found != index:
            return found
        return index - 1 if index > 0 else None

    def past_progress(self, parents: array[int], progress: int, last_message: int | None) -> int:
        """`model.thread._past_progress` on positions."""
        anchor = progress
        climbed: set[int] = set()
        while anchor != _NONE and self.record(anchor).type == "progress":
            if anchor in climbed or anchor >= len(parents):
                return progress
            climbed.add(anchor)
            anchor = parents[anchor]
        if anchor == _NONE or last_message is None:
            return progress
        node = last_message
        walked: set[int] = set()
        # As in `_past_progress`: a forward parent (a row not resolved yet) ends the walk.
        while node != _NONE and node >= anchor and node not in walked and node < len(parents):
            if node == anchor:
                return last_message
            walked.add(node)
            node = parents[node]
        return progress

    def leaf(self, summary_leaves: Sequence[str]) -> int | None:
        """`model.thread._leaf` on positions."""
        best: int | None = None
        for index in range(len(self.candidates) - 1, -1, -1):
            record = self.record(index)
            if record.type in ("user", "assistant") and self.table.has_uuid(record.index):
                best = index
                break
        for uuid in summary_leaves:
            found = self.locate(UuidKey.of(uuid))
            if found is not None and (best is None or found > best):
                best = found
        return best

    def rescue_siblings(self, parents: array[int], keep: bytearray) -> int:
        """`model.thread._rescue_siblings` on positions; returns how many were added."""
        first_child = array("i", [_NONE]) * len(parents)
        next_sibling = array("i", [_NONE]) * len(parents)
        for index in range(len(parents) - 1, -1, -1):
            parent = parents[index]
            if parent != _NONE:
                next_sibling[index] = first_child[parent]
                first_child[parent] = index

        def children(node: int) -> Iterator[int]:
            child = first_child[node]
            while child != _NONE:
                yield child
                child = next_sibling[child]

        response_ids: set[str] = set()
        called: set[str] = set()
        answered: set[str] = set()
        kept = array("i", (index for index in range(len(keep)) if keep[index]))
        for index in kept:
            record = self.record(index)
            if record.type == "assistant":
                if record.message_id:
                    response_ids.add(record.message_id)
                called.update(record.tool_use_ids)
            elif record.type == "user":
                answered.update(record.tool_result_ids)

        def belongs(record: RecordInfo) -> bool:
            kind = record.type
            if kind in ("progress", "attachment"):
                return True
            if kind == "system":
                return not record.is_compact_boundary
            if kind == "assistant":
                return record.message_id is not None and record.message_id in response_ids
            if kind == "user" and _only_tool_results(record):
                return all(i in called and i not in answered for i in record.tool_result_ids)
            return False

        rescued = 0
        stack = [child for node in kept for child in children(node) if not keep[child]]
        del kept
        while stack:
            index = stack.pop()
            if keep[index]:
                continue
            record = self.record(index)
            if not belongs(record):
                continue
            keep[index] = 1
            rescued += 1
            if record.type == "user":
                answered.update(record.tool_result_ids)
            elif record.type == "assistant":
                called.update(record.tool_use_ids)
            stack.extend(child for child in children(index) if not keep[child])
        return rescued

    def left_out_branches(
        self, parents: array[int], keep: bytearray, thread_sessions: Sequence[str]
    ) -> list[LeftOutBranch]:
        """`model.thread._left_out_branches` on positions."""
        root_of: dict[int, int] = {}
        members: dict[int, list[int]] = {}
        for index in range(len(self.candidates)):
            if keep[index] or not _is_conversation_turn(self.record(index)):
                continue
            node = index
            climbed: list[int] = []
            while True:
                if node in root_of:
                    node = root_of[node]
                    break
                parent = parents[node]
                if parent in (_NONE, node) or keep[parent] or parent in climbed:
                    break
                climbed.append(node)
                node = parent
            for visited in climbed:
                root_of[visited] = node
            root_of[index] = node
            members.setdefault(node, []).append(index)
        if not members:
            return []
        kept_responses = {self.record(i).message_id for i in range(len(keep)) if keep[i]} - {None}
        branches: list[LeftOutBranch] = []
        for root in sorted(members):
            fork = parents[root]
            root_record = self.record(root)
            session = root_record.session_id
            records = [self.record(i) for i in members[root]]
            responses = {
                r.message_id or r.uuid or str(i)
                for i, r in zip(members[root], records, strict=True)
                if r.type == "assistant"
            }
            fork_line: int | None = None
            if responses and responses <= kept_responses:
                reason: LeftOutReason = "copied"
            elif fork != _NONE and keep[fork]:
                reason = "rewound"
                fork_line = self.record(fork).line
            elif session is not None and session not in thread_sessions:
                reason = "other_session"
            else:
                reason = "detached"
            kinds = [r.user_kind for r in records if r.type == "user"]
            branches.append(
                LeftOutBranch(
                    reason=reason,
                    first_line=root_record.line,
                    fork_line=fork_line,
                    session=session if session not in thread_sessions else None,
                    prompts=kinds.count("prompt"),
                    responses=len(responses),
                    tool_results=kinds.count("tool_results"),
                )
            )
        return branches

    def dedupe(self, positions: Sequence[int]) -> array[int]:
        """`model.thread._dedupe` on positions: the rows kept."""
        kept = array("i")
        seen = _NumberTable(len(positions))
        calls: set[str] = set()
        results: set[str] = set()
        for index in positions:
            record = self.record(index)
            kind = record.type
            if kind == "assistant":
                key = self._content_key(record)
                hashed = hash(key)
                ids = record.tool_use_ids
                if seen.find(hashed, self._same_content(key)) != _NONE or (
                    ids and all(i in calls for i in ids)
                ):
                    self.report.duplicates += 1
                    continue
                seen.add(hashed, record.index)
                calls.update(ids)
            elif kind == "user":
                ids = record.tool_result_ids
                if ids and _only_tool_results(record):
                    if all(i in results for i in ids):
                        self.report.duplicates += 1
                        continue
                    results.update(ids)
                elif not record.is_compact_summary:
                    key = self._content_key(record)
                    hashed = hash(key)
                    if seen.find(hashed, self._same_content(key)) != _NONE:
                        self.report.duplicates += 1
                        continue
                    seen.add(hashed, record.index)
            kept.append(record.index)
        return kept

    def _content_key(self, record: RecordInfo) -> tuple[str, str, bytes]:
        """What `model.thread._dedupe` keys a record by: a response by its id (its uuid
        without one) and content, another record by its content (its time is in the
        digest)."""
        if record.type == "assistant":
            response = record.message_id or f"{record.uuid}@t"
            return ("a", response, _content_bytes(record))
        return ("u", "t", _content_bytes(record))

    def _same_content(self, key: tuple[str, str, bytes]) -> Callable[[int], bool]:
        table = self.table
        return lambda row: self._content_key(RecordInfo(table, row)) == key


def rebuild_rows(
    table: RecordTable,
    *,
    include_sidechains: bool = False,
    summary_leaves: Sequence[str] = (),
    leaf_uuid: str | None = None,
) -> tuple[array[int], ThreadReport]:
    """`rebuild_thread` on a table: the thread's rows in file order, and the report."""
    rebuild = _Rebuild(table, include_sidechains)
    report = rebuild.report
    candidates = rebuild.candidates
    if not candidates:
        return array("i"), report
    parents = rebuild.resolve_parents()
    leaf = rebuild.locate(UuidKey.of(leaf_uuid)) if leaf_uuid is not None else None
    if leaf is None:
        leaf = rebuild.leaf(summary_leaves)
    del rebuild.position  # the size of the file, not needed past here (the peak comes later)
    if leaf is None:
        return rebuild.dedupe(range(len(candidates))), report
    report.leaf_uuid = rebuild.record(leaf).uuid
    keep = bytearray(len(candidates))
    node = leaf
    while node != _NONE and not keep[node]:
        keep[node] = 1
        node = parents[node]
    report.rescued = rebuild.rescue_siblings(parents, keep)
    for index, row in enumerate(candidates):
        if not table.has_uuid(row):
            keep[index] = 1
    thread = array("i", (index for index in range(len(keep)) if keep[index]))
    report.thread_sessions = _sessions(table, (candidates[i] for i in thread))
    report.branches = rebuild.left_out_branches(parents, keep, report.thread_sessions)
    report.abandoned = sum(
        1
        for index in range(len(keep))
        if not keep[index] and _is_conversation_turn(rebuild.record(index))
    )
    del parents, keep
    rows = rebuild.dedupe(thread)
    report.thread_sessions = _sessions(table, iter(rows))
    return rows, report


def rebuilt_branch(records: RecordTable, leaf_uuid: str) -> array[int]:
    """`Transcript.branch_thread` on a table: the conversation ending at the record with
    this uuid, as rows."""
    rows, _ = rebuild_rows(
        records, include_sidechains=is_subagent_file(records), leaf_uuid=leaf_uuid
    )
    return rows


def rebuilt_main_thread(records: RecordTable, summary_leaves: Sequence[str] = ()) -> SelectedThread:
    """The thread `Transcript.main_thread` rebuilds from parent links, on a table."""
    rows, report = rebuild_rows(
        records, include_sidechains=is_subagent_file(records), summary_leaves=summary_leaves
    )
    return SelectedThread(rows, report.warnings())


__all__ = [
    "SelectedThread",
    "is_subagent_file",
    "rebuild_rows",
    "rebuilt_branch",
    "rebuilt_main_thread",
]
