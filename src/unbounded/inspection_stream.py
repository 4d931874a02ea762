"""`unbounded inspect` on a Claude Code file of any size, in bounded memory.

Two passes over the file, neither holding message contents:

1. `scan_records` streams every line and keeps a small summary per record (a row of a
   `RecordTable`, read through `RecordInfo`): where it is (line, byte offset), its type,
   uuid and parent, flags, response id, model and usage total. A boundary's metadata is
   kept too (there are few).
2. The main thread is chosen from those summaries by a `ThreadSelector`: by default
   `rebuilt_main_thread`, which runs `unbounded.model.thread.rebuild_thread` (what
   `Transcript.main_thread` does) over light stand-ins built from the summaries; or
   `file_order_main_thread` (`--file-order`). The view (the main thread from its last
   compact boundary on) is then read again record by record, by offset, and counted in one
   pass (`tally_view`): the anchored token count, the token breakdown, and the API messages
   (the normalizer holds the view's messages while they are counted).

A summary keeps what thread rebuilding reads: the links, the session id, the tool ids, how a
user message classifies, and a 64-bit digest of the content and time (to tell repeated
records apart) instead of the content.

A compact boundary's `counted_pre_tokens` reads the records since the boundary before it
again, one view at a time.

Memory: O(records) small summaries (about 230 bytes each, kept by column) + the longest
line + what rebuilding the thread holds while it runs + the current view's API messages:
what the model would be sent next, which a session that compacts keeps within its context
window (a file that never compacted has its whole main thread as view).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, overload

import orjson

from unbounded.catalog import ModelTable, load_model_table
from unbounded.errors import TranscriptError
from unbounded.inspection import (
    BoundaryInfo,
    CallCounts,
    InspectReport,
    SourceSummary,
    resolve_model_name,
    unknown_records_note,
)
from unbounded.model.content import usage_context_total
from unbounded.model.entries import (
    COMPACT_BOUNDARY_SUBTYPE,
    CONVERSATION_TYPES,
    Entry,
    messages_after_compact_boundary,
)
from unbounded.model.normalize import MessageNormalizer
from unbounded.model.thread import rebuild_thread
from unbounded.model.transcript import calls_per_model
from unbounded.model.user_messages import classify_user_entry
from unbounded.policy import Policy, compute_thresholds
from unbounded.recall.receipts import Receipt
from unbounded.tokens.breakdown import ContextBreakdown
from unbounded.tokens.estimate import pre_compaction_tokens
from unbounded.transcripts.claude_code import FORMAT, RECORD_TYPES, validate_record
from unbounded.transcripts.importing import UNKNOWN_RECORDS, count_unknown
from unbounded.transcripts.jsonl import ReadReport, iter_json_records, parse_lenient

_SIDECHAIN, _META, _COMPACT_SUMMARY, _SYNTHETIC, _OTHER_BLOCKS, _STR, _LIST = (
    1 << bit for bit in range(7)
)


class RecordInfo:
    """What pass 1 keeps of one record, no message content: a view of one row of a
    `RecordTable`.

    The fields: `line` and `offset` (where the record's line starts, for pass 2), `type`,
    `subtype`, `uuid`, `parent_uuid`, `logical_parent_uuid`, `session_id`, `flags`,
    `message_id` (an assistant record's response id), `usage_total` (input + cache creation +
    cache read + output of a real response's usage), `model`, `tool_use_ids`,
    `tool_result_ids`, `user_kind` (how a user message classifies, `classify_user_entry`) and
    `digest` (64 bits of the content and the time, standing for them when records are
    compared).
    """

    __slots__ = ("index", "table")

    def __init__(self, table: RecordTable, index: int) -> None:
        self.table = table
        self.index = index

    @property
    def line(self) -> int:
        """The record's 1-based line in the file."""
        return self.table.lines[self.index]

    @property
    def offset(self) -> int:
        """Where the record's line starts in the file (pass 2 reads it again from there)."""
        return self.table.offsets[self.index]

    @property
    def type(self) -> str:
        """The record type."""
        return cast(str, self.table.types.get(self.index))

    @property
    def subtype(self) -> str | None:
        """A system record's subtype."""
        return self.table.subtypes.get(self.index)

    @property
    def uuid(self) -> str | None:
        """The record's uuid."""
        return self.table.uuids[self.index]

    @property
    def parent_uuid(self) -> str | None:
        """`parentUuid`."""
        return self.table.parent_uuids[self.index]

    @property
    def logical_parent_uuid(self) -> str | None:
        """`logicalParentUuid` (a compact boundary's)."""
        return self.table.logical_parent_uuids.get(self.index)

    @property
    def session_id(self) -> str | None:
        """`sessionId`."""
        return self.table.session_ids.get(self.index)

    @property
    def flags(self) -> int:
        """The record's flags, packed (see the `is_*` properties)."""
        return self.table.flags[self.index]

    @property
    def message_id(self) -> str | None:
        """The response id of an assistant record."""
        return self.table.message_ids[self.index]

    @property
    def usage_total(self) -> int | None:
        """input + cache creation + cache read + output of a real response's usage."""
        total = self.table.usage_totals[self.index]
        return None if total < 0 else total

    @property
    def model(self) -> str | None:
        """The model of an assistant record."""
        return self.table.models.get(self.index)

    @property
    def tool_use_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls in the content."""
        return self.table.tool_use_ids[self.index]

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls the content's tool results answer."""
        return self.table.tool_result_ids[self.index]

    @property
    def user_kind(self) -> str | None:
        """How a user message classifies (`classify_user_entry`)."""
        return self.table.user_kinds.get(self.index)

    @property
    def digest(self) -> int:
        """64-bit digest of the content and the time."""
        return self.table.digests[self.index]

    @property
    def is_conversation(self) -> bool:
        """user, assistant, system, attachment or progress."""
        return self.type in CONVERSATION_TYPES

    @property
    def is_compact_boundary(self) -> bool:
        """A `system` record with subtype `compact_boundary`."""
        return self.type == "system" and self.subtype == COMPACT_BOUNDARY_SUBTYPE

    @property
    def is_sidechain(self) -> bool:
        """An inline sub-agent record."""
        return bool(self.flags & _SIDECHAIN)

    @property
    def is_meta(self) -> bool:
        """`isMeta`."""
        return bool(self.flags & _META)

    @property
    def is_compact_summary(self) -> bool:
        """The summary after a compact boundary."""
        return bool(self.flags & _COMPACT_SUMMARY)

    @property
    def is_synthetic_api_error(self) -> bool:
        """A placeholder for an API error, not a real response."""
        return bool(self.flags & _SYNTHETIC)

    @property
    def has_other_blocks(self) -> bool:
        """The content list holds blocks other than tool calls and results."""
        return bool(self.flags & _OTHER_BLOCKS)

    @property
    def content_shape(self) -> str:
        """`str`, `list` or `none`: the type of the message content."""
        return "str" if self.flags & _STR else "list" if self.flags & _LIST else "none"


class _Codes:
    """A column of few distinct strings (types, sessions, models): a 4-byte code per row."""

    __slots__ = ("codes", "index", "values")

    def __init__(self) -> None:
        self.codes = array("I")
        self.values: list[str | None] = [None]
        self.index: dict[str | None, int] = {None: 0}

    def append(self, value: str | None) -> None:
        """Add a row."""
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.values)
            self.values.append(value)
        self.codes.append(code)

    def get(self, row: int) -> str | None:
        """The value of a row."""
        return self.values[self.codes[row]]


class RecordTable(Sequence[RecordInfo]):
    """Pass 1's summaries of a file's records, stored by column.

    Numbers sit in arrays and repeated strings in code columns, so a row costs about 90 bytes
    plus its uuid and ids (a record object per row cost 400): at 1 GiB of real sessions,
    half a million records, that is what decides inspect's and eval's peak memory. A
    `RecordInfo` is made on access.
    """

    def __init__(self) -> None:
        self.lines = array("q")
        self.offsets = array("q")
        self.digests = array("Q")
        self.usage_totals = array("q")
        """-1 where a record has no usage."""
        self.flags = bytearray()
        self.types, self.subtypes, self.session_ids = _Codes(), _Codes(), _Codes()
        self.models, self.user_kinds = _Codes(), _Codes()
        self.uuids: list[str | None] = []
        self.parent_uuids: list[str | None] = []
        self.message_ids: list[str | None] = []
        self.tool_use_ids: list[tuple[str, ...]] = []
        self.tool_result_ids: list[tuple[str, ...]] = []
        self.logical_parent_uuids: dict[int, str] = {}
        """Only compact boundaries have one: by row."""

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, index: int) -> RecordInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[RecordInfo]: ...

    def __getitem__(self, index: int | slice) -> RecordInfo | list[RecordInfo]:
        if isinstance(index, slice):
            return [RecordInfo(self, row) for row in range(len(self))[index]]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return RecordInfo(self, index % len(self))

    def __iter__(self) -> Iterator[RecordInfo]:
        return (RecordInfo(self, row) for row in range(len(self)))

    def append(self, entry: Entry, offset: int) -> None:
        """Summarize one entry as the next row (its line starts at `offset`)."""
        row = len(self)
        usage = entry.usage
        message = entry.message
        content = message.get("content") if message else None
        flags = (
            (_SIDECHAIN if entry.is_sidechain else 0)
            | (_META if entry.is_meta else 0)
            | (_COMPACT_SUMMARY if entry.is_compact_summary else 0)
            | (_SYNTHETIC if entry.is_synthetic_api_error else 0)
            | (_STR if isinstance(content, str) else _LIST if isinstance(content, list) else 0)
        )
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") not in ("tool_use", "tool_result")
            for b in content
        ):
            flags |= _OTHER_BLOCKS
        # A parent uuid, response id or tool result id equal to the row before's uuid,
        # response id or tool call id shares its string (a response's lines come in a run).
        parent = entry.parent_uuid
        message_id = entry.message_id
        results = _ids(content, "tool_result", "tool_use_id")
        if row:
            previous_uuid = self.uuids[-1]
            if parent is not None and parent == previous_uuid:
                parent = previous_uuid
            previous_id = self.message_ids[-1]
            if message_id is not None and message_id == previous_id:
                message_id = previous_id
            calls = {tool_id: tool_id for tool_id in self.tool_use_ids[-1]}
            results = tuple(calls.get(tool_id, tool_id) for tool_id in results)
        self.lines.append(entry.line or 0)
        self.offsets.append(offset)
        self.digests.append(_digest(entry))
        self.usage_totals.append(usage_context_total(usage) if usage is not None else -1)
        self.flags.append(flags)
        self.types.append(entry.type)
        self.subtypes.append(entry.subtype)
        session = entry.data.get("sessionId")
        self.session_ids.append(session if isinstance(session, str) else None)
        self.models.append(entry.model)
        self.user_kinds.append(classify_user_entry(entry).kind if entry.type == "user" else None)
        self.uuids.append(entry.uuid)
        self.parent_uuids.append(parent)
        self.message_ids.append(message_id)
        self.tool_use_ids.append(_ids(content, "tool_use", "id"))
        self.tool_result_ids.append(results)
        if entry.logical_parent_uuid is not None:
            self.logical_parent_uuids[row] = entry.logical_parent_uuid


ThreadSelector = Callable[[Sequence[RecordInfo], Sequence[str]], "SelectedThread"]
"""Picks the main thread from the record summaries and the summary records' leaf uuids."""


@dataclass(slots=True)
class SelectedThread:
    """The main thread as indexes into the records (file order), and notes on what was left out."""

    indexes: list[int]
    warnings: list[str]


def is_subagent_file(records: Sequence[RecordInfo]) -> bool:
    """`Transcript.is_subagent_file` on summaries: every conversation record is a sidechain."""
    conversation = [r for r in records if r.is_conversation]
    return bool(conversation) and all(r.is_sidechain for r in conversation)


def file_order_main_thread(
    records: Sequence[RecordInfo], summary_leaves: Sequence[str] = ()
) -> SelectedThread:
    """Conversation records in file order, inline sub-agent records left out unless every
    conversation record is one (`--file-order`)."""
    keep_sidechains = is_subagent_file(records)
    return SelectedThread(
        [
            index
            for index, r in enumerate(records)
            if r.is_conversation and (keep_sidechains or not r.is_sidechain)
        ],
        [],
    )


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


class _Standin(RecordInfo):
    """An `Entry` look-alike built from a summary, for `rebuild_thread`.

    It answers what thread rebuilding asks of an entry: links, flags, tool ids, the session,
    and content whose JSON is equal exactly when the real content (and time) is, and which a
    user-message classifier sorts as the real one. The timestamp is a constant: the real one
    is folded into the digest.
    """

    __slots__ = ()

    @property
    def timestamp(self) -> str:
        """A constant (the real time is in the content's digest)."""
        return "t"

    @property
    def data(self) -> dict[str, Any]:
        """The raw fields thread rebuilding reads."""
        return {"sessionId": self.session_id}

    @property
    def content(self) -> Any:
        """Content standing for the real one (see the class docstring)."""
        record = self
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


def rebuilt_branch(records: Sequence[RecordInfo], leaf_uuid: str) -> list[int]:
    """`Transcript.branch_thread` on summaries: the conversation ending at the record with
    this uuid, as indexes into the records."""
    standins = [_Standin(record.table, record.index) for record in records]
    thread, _ = rebuild_thread(
        cast(Sequence[Entry], standins),
        include_sidechains=is_subagent_file(records),
        leaf_uuid=leaf_uuid,
    )
    return [cast(_Standin, entry).index for entry in thread]


def rebuilt_main_thread(
    records: Sequence[RecordInfo], summary_leaves: Sequence[str] = ()
) -> SelectedThread:
    """The thread `Transcript.main_thread` rebuilds from parent links, on summaries."""
    standins = [_Standin(record.table, record.index) for record in records]
    thread, report = rebuild_thread(
        cast(Sequence[Entry], standins),
        include_sidechains=is_subagent_file(records),
        summary_leaves=summary_leaves,
    )
    return SelectedThread(
        [cast(_Standin, entry).index for entry in thread], report.warnings()
    )


def _ids(content: Any, kind: str, key: str) -> tuple[str, ...]:
    if not isinstance(content, list):
        return ()
    return tuple(
        str(block.get(key))
        for block in content
        if isinstance(block, dict) and block.get("type") == kind
    )


def _digest(entry: Entry) -> int:
    # The time folded in the way thread deduplication keys records (see _Standin.timestamp):
    # a response line by its response id and content alone, other records with their time.
    if entry.type == "assistant":
        moment = "" if entry.message_id else entry.timestamp
    else:
        moment = entry.timestamp or entry.uuid
    try:
        content = orjson.dumps(entry.content)
    except TypeError:
        content = repr(entry.content).encode()
    hasher = hashlib.blake2b(digest_size=8)
    hasher.update(str(moment).encode("utf-8", "replace") + b"\x00")
    hasher.update(content)
    return int.from_bytes(hasher.digest(), "big")


@dataclass(slots=True)
class FileScan:
    """Pass 1's result: a summary per record, the boundaries' metadata, what the reader saw."""

    path: Path
    records: RecordTable
    boundaries: dict[int, dict[str, Any]]
    """compactMetadata of each boundary, by record index."""
    summary_leaves: list[str]
    """`leafUuid` of each `summary` record, in file order."""
    report: ReadReport
    receipts: dict[int, Receipt] = field(default_factory=dict)
    """Receipts of compactions and microcompactions, by record index (there are few)."""
    unknown_record_types: dict[str, int] = field(default_factory=dict)
    """Record types the reader does not know, with their counts, in the order first met."""


def scan_records(path: str | Path, *, skip_invalid: bool = False) -> FileScan:
    """Pass 1: stream the file and keep a summary per record (see the module docstring)."""
    source = Path(path)
    report = ReadReport()
    records = RecordTable()
    boundaries: dict[int, dict[str, Any]] = {}
    leaves: list[str] = []
    receipts: dict[int, Receipt] = {}
    unknown: dict[str, Any] = {}
    for item in iter_json_records(
        source, skip_invalid=skip_invalid, report=report, validate=validate_record
    ):
        entry = Entry(item.value, item.number)
        if entry.is_compact_boundary:
            boundaries[len(records)] = dict(entry.compact_metadata)
            boundaries[len(records)]["timestamp"] = entry.timestamp
        receipt = Receipt.from_entry(entry) if entry.type == "system" else None
        if receipt is not None:
            receipts[len(records)] = receipt
        if entry.type == "summary" and isinstance(entry.data.get("leafUuid"), str):
            leaves.append(entry.data["leafUuid"])
        if entry.type not in RECORD_TYPES:
            count_unknown(unknown, [entry.type])
        records.append(entry, item.offset)
    return FileScan(
        source, records, boundaries, leaves, report, receipts, unknown.get(UNKNOWN_RECORDS, {})
    )


def read_records(path: Path, records: Iterable[RecordInfo]) -> Iterator[Entry]:
    """Pass 2: read these records again by offset (in the order given), one at a time."""
    return read_at(path, ((record.offset, record.line) for record in records))


def read_at(path: Path, places: Iterable[tuple[int, int]]) -> Iterator[Entry]:
    """Read the records whose lines start at these (byte offset, line number) places, in the
    order given, one at a time."""
    with path.open("rb") as handle:
        for offset, line in places:
            handle.seek(offset)
            raw = handle.readline()
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                # Pass 1 repaired it the same way (BOM, invalid UTF-8, lone surrogates).
                lenient = parse_lenient(raw)
                value = lenient[0] if lenient is not None else None
            if not isinstance(value, dict):
                raise TranscriptError(
                    "the file changed while it was being inspected",
                    path=path,
                    line=line,
                    hint="read it again once the agent stopped writing, or read a copy",
                )
            yield Entry(value, line)


# -- counting a view ------------------------------------------------------------------------


@dataclass(slots=True)
class ViewTally:
    """What inspect reports about a view, counted in one pass."""

    messages: int
    tokens: ContextBreakdown


def tally_view(entries: Iterable[Entry]) -> ViewTally:
    """Messages, the anchored token count and the breakdown of a view, in one pass.

    The entries are dropped as they go; the API messages they make are held (by the
    normalizer, whose repairs decide how many there are) until they are counted.
    """
    tokens = ContextBreakdown()
    normalizer = MessageNormalizer()
    for entry in entries:
        tokens.append(entry)
        normalizer.append(entry)
    return ViewTally(len(normalizer.messages), tokens)


# -- the report ------------------------------------------------------------------------------------


def _sidechain_threads(records: Sequence[RecordInfo]) -> int:
    """`len(Transcript.sidechains())` on summaries."""
    conversation = [r for r in records if r.is_conversation]
    if conversation and all(r.is_sidechain for r in conversation):
        return 0
    roots = 0
    owner: dict[str, str] = {}
    for record in conversation:
        if not record.is_sidechain or record.uuid is None:
            continue
        parent = record.parent_uuid
        root = owner.get(parent) if parent is not None else None
        if root is None:
            root = record.uuid
            roots += 1
        owner[record.uuid] = root
    return roots


def _view_records(scan: FileScan, main: Sequence[int]) -> tuple[list[RecordInfo], bool]:
    """The records of the view, and whether it must be built in memory (partial compaction)."""
    records = scan.records
    position = next(
        (i for i in range(len(main) - 1, -1, -1) if records[main[i]].is_compact_boundary), -1
    )
    if position < 0:
        return [records[i] for i in main], False
    segment = scan.boundaries.get(main[position], {}).get("preservedSegment")
    view = [records[i] for i in main[position:]]
    if not isinstance(segment, dict):
        return view, False
    before = [records[i] for i in main[:position]]
    uuids = [record.uuid for record in before]
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if head not in uuids or tail not in uuids:
        return view, False
    start, end = uuids.index(head), uuids.index(tail)
    return [*before[start : end + 1], *view], True


def recorded_models(records: Sequence[RecordInfo], main: Sequence[int]) -> dict[str, int]:
    """`Transcript.models` on summaries: recorded calls per model, the main model first."""
    calls: dict[str, tuple[int, str | None]] = {}  # response id -> (first position, model)
    for position, index in enumerate(main):
        record = records[index]
        if record.usage_total is None or record.message_id is None:
            continue
        first = calls.get(record.message_id, (position, None))[0]
        calls[record.message_id] = (first, record.model)
    if calls:
        named = [(rid, model) for rid, (_, model) in sorted(calls.items(), key=lambda kv: kv[1][0])]
    else:
        named = [
            (records[i].message_id or records[i].uuid or str(position), records[i].model)
            for position, i in enumerate(main)
            if records[i].type == "assistant" and not records[i].is_synthetic_api_error
        ]
    return calls_per_model(named)


def billed_call_counts(records: Sequence[RecordInfo], main: Sequence[int]) -> CallCounts:
    """`CallCounts.of` on summaries: each response id with usage once, on the thread or on a
    branch; inline sub-agents' apart."""
    keep_sidechains = is_subagent_file(records)
    on_thread = {
        records[i].message_id for i in main if records[i].usage_total is not None
    }
    agent: set[str] = set()
    subagent: set[str] = set()
    for record in records:
        if record.usage_total is None or record.message_id is None:
            continue
        if record.is_sidechain and not keep_sidechains:
            subagent.add(record.message_id)
        else:
            agent.add(record.message_id)
    thread = len(agent & on_thread)
    return CallCounts(thread=thread, branch=len(agent) - thread, subagent=len(subagent))


def inspect_file(
    path: str | Path,
    *,
    model: str | None = None,
    window: int | None = None,
    policy: Policy | None = None,
    table: ModelTable | None = None,
    skip_invalid: bool = False,
    select_thread: ThreadSelector = rebuilt_main_thread,
) -> InspectReport:
    """`inspect_transcript` for a Claude Code file, streamed (see the module docstring)."""
    scan = scan_records(path, skip_invalid=skip_invalid)
    records = scan.records
    selected = select_thread(records, scan.summary_leaves)
    main = selected.indexes
    models_called = recorded_models(records, main)
    models = table or load_model_table()
    info, source, notes = resolve_model_name(
        next(iter(models_called), None), model, models, provider="anthropic"
    )
    if window is not None:
        info = info.with_window(window)
    thresholds = compute_thresholds(info, policy or Policy.from_env())
    view_records, in_memory = _view_records(scan, main)
    entries: Iterable[Entry] = read_records(scan.path, view_records)
    if in_memory:
        entries = messages_after_compact_boundary(list(entries))
    tally = tally_view(entries)
    calls = billed_call_counts(records, main)
    unknown = unknown_records_note(scan.unknown_record_types)
    if unknown is not None:
        notes.append(unknown)
    boundaries: list[BoundaryInfo] = []
    since = 0  # position in `main` of the boundary before (the start of the view it ends)
    for position, i in enumerate(main):
        if not records[i].is_compact_boundary:
            continue
        before = list(read_records(scan.path, [records[j] for j in main[since:position]]))
        boundaries.append(
            BoundaryInfo(
                trigger=scan.boundaries[i].get("trigger"),
                pre_tokens=scan.boundaries[i].get("preTokens"),
                uuid=records[i].uuid,
                timestamp=scan.boundaries[i].get("timestamp"),
                line=records[i].line,
                counted_pre_tokens=pre_compaction_tokens(before),
            )
        )
        since = position
    return InspectReport(
        source=SourceSummary(
            path=str(scan.path),
            format=FORMAT,
            records=len(records),
            skipped_lines=scan.report.skipped_lines,
            warnings=[*scan.report.warnings, *selected.warnings],
            models=models_called,
            unknown_record_types=dict(scan.unknown_record_types),
        ),
        model=info,
        model_source=source,
        thresholds=thresholds,
        messages=tally.messages,
        api_calls=calls.billed,
        context_tokens=tally.tokens.counter.total,
        anchored_tokens=tally.tokens.counter.anchor_tokens,
        estimated_tokens=tally.tokens.counter.estimated_tokens,
        boundaries=boundaries,
        accounting=tally.tokens.accounting,
        breakdown=tally.tokens.breakdown(),
        sidechains=_sidechain_threads(records),
        notes=notes,
        receipts=[scan.receipts[i] for i in main if i in scan.receipts],
        calls=calls,
    )
