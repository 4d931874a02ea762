"""Pass 1's summary of a Claude Code file's records, one row per record: `RecordTable`.

A row keeps what choosing the main thread and planning a replay read again, no message
content: where the record is (line, byte offset), its type, links, flags, response id, model,
usage total, tool ids, how a user message classifies, and a 64-bit digest of the content and
time. It is stored by column, numbers in arrays and repeated strings as codes, so that half a
million records (1 GiB of real sessions, or a 100,000-call session) cost tens of megabytes.

Uuids (a record's and its parent's) are kept as 16 bytes each: a canonical uuid (36
characters, lowercase hex in 8-4-4-4-12 groups) is its own 16 bytes, given back exactly; any
other string is kept whole on the side and stood for by a 128-bit digest. Two keys are equal
exactly when their strings are (`UuidKey`), so nothing rests on digests not colliding.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, cast, overload

import orjson

from unbounded.model.content import usage_context_total
from unbounded.model.entries import COMPACT_BOUNDARY_SUBTYPE, CONVERSATION_TYPES, Entry
from unbounded.model.user_messages import classify_user_entry

_UUID_BYTES = 16
_RECENT_CALLS = 256
"""Tool call ids kept to share their strings with the results that answer them."""
_HAS_UUID, _ODD_UUID, _HAS_PARENT, _ODD_PARENT = (1 << bit for bit in range(4))


class UuidKey(NamedTuple):
    """A uuid as a row stores it: 16 bytes, and the string itself when it is not a canonical
    uuid (`odd`); equal exactly when the strings are."""

    raw: bytes
    odd: str | None

    @classmethod
    def of(cls, value: str) -> UuidKey:
        """The key of a uuid string."""
        if len(value) == 36 and value[8] == value[13] == value[18] == value[23] == "-":
            hexa = value[:8] + value[9:13] + value[14:18] + value[19:23] + value[24:]
            try:
                raw = bytes.fromhex(hexa)
            except ValueError:
                raw = b""
            # fromhex takes upper case and spaces too: only the exact canonical text is kept
            # as bytes alone, so that the string comes back the same.
            if len(raw) == _UUID_BYTES and raw.hex() == hexa:
                return cls(raw, None)
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=_UUID_BYTES)
        return cls(digest.digest(), value)

    def text(self) -> str:
        """The uuid string back."""
        if self.odd is not None:
            return self.odd
        hexa = self.raw.hex()
        return f"{hexa[:8]}-{hexa[8:12]}-{hexa[12:16]}-{hexa[16:20]}-{hexa[20:]}"

    def slot_hash(self) -> int:
        """Where the key goes in a hash table (`RecordTable.uuid_hash` of its row)."""
        return hash(self.raw)


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
        key = self.table.uuid_key(self.index)
        return None if key is None else key.text()

    @property
    def parent_uuid(self) -> str | None:
        """`parentUuid`."""
        key = self.table.parent_key(self.index)
        return None if key is None else key.text()

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
        return self.table.tool_use_ids.get(self.index)

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls the content's tool results answer."""
        return self.table.tool_result_ids.get(self.index)

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
    """A column of few distinct strings (types, sessions, models): a code per row, one byte
    while there are fewer than 256 values, four after."""

    __slots__ = ("codes", "index", "values")

    def __init__(self) -> None:
        self.codes = array("B")
        self.values: list[str | None] = [None]
        self.index: dict[str | None, int] = {None: 0}

    def append(self, value: str | None) -> None:
        """Add a row."""
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.values)
            self.values.append(value)
            if code == 256:
                self.codes = array("I", self.codes)
        self.codes.append(code)

    def get(self, row: int) -> str | None:
        """The value of a row."""
        return self.values[self.codes[row]]


class _IdsColumn:
    """A column of tuples of strings (a record's tool ids), kept flat: the strings in one
    list, and where each row's start in an array (most rows have none)."""

    __slots__ = ("starts", "values")

    def __init__(self) -> None:
        self.values: list[str] = []
        self.starts = array("I", [0])
        """Row i's strings are `values[starts[i]:starts[i + 1]]`."""

    def append(self, ids: tuple[str, ...]) -> None:
        """Add a row."""
        self.values.extend(ids)
        self.starts.append(len(self.values))

    def get(self, row: int) -> tuple[str, ...]:
        """The strings of a row."""
        start, end = self.starts[row], self.starts[row + 1]
        return tuple(self.values[start:end]) if end > start else ()


class RecordTable(Sequence[RecordInfo]):
    """Pass 1's summaries of a file's records, stored by column.

    Numbers sit in arrays, repeated strings in code columns and uuids as 16-byte keys (module
    docstring), so a row costs about 130 bytes plus its response and tool ids (a record
    object per row cost 400, strings for the uuids 190 more): at 1 GiB of real sessions,
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
        self.uuid_keys = bytearray()
        """16 bytes a row: the uuid's key (`UuidKey.raw`), zeros where there is none."""
        self.parent_keys = bytearray()
        """16 bytes a row: the parentUuid's key, zeros where there is none."""
        self.links = bytearray()
        """A row's uuid and parent: present, and not canonical (kept whole in `odd`)."""
        self.odd: dict[tuple[int, int], str] = {}
        """Uuids that are not canonical, by (row, 0 for the uuid or 1 for the parent)."""
        self.message_ids: list[str | None] = []
        self.tool_use_ids = _IdsColumn()
        self.tool_result_ids = _IdsColumn()
        self._recent_calls: dict[str, str] = {}
        """The last tool call ids met, so that their results share the strings."""
        self.logical_parent_uuids: dict[int, str] = {}
        """Only compact boundaries have one: by row."""

    def __len__(self) -> int:
        return len(self.lines)

    def uuid_key(self, row: int) -> UuidKey | None:
        """The key of a row's uuid."""
        return self._key(row, self.uuid_keys, _HAS_UUID, _ODD_UUID, 0)

    def parent_key(self, row: int) -> UuidKey | None:
        """The key of a row's parentUuid."""
        return self._key(row, self.parent_keys, _HAS_PARENT, _ODD_PARENT, 1)

    def has_uuid(self, row: int) -> bool:
        """Whether a row has a uuid."""
        return bool(self.links[row] & _HAS_UUID)

    def uuid_hash(self, row: int) -> int:
        """`UuidKey.slot_hash` of a row's uuid, without making the key."""
        start = row * _UUID_BYTES
        return hash(bytes(self.uuid_keys[start : start + _UUID_BYTES]))

    def same_uuid(self, row: int, key: UuidKey) -> bool:
        """Whether a row's uuid is the one this key stands for."""
        start = row * _UUID_BYTES
        links = self.links[row]
        return (
            bool(links & _HAS_UUID)
            and self.uuid_keys[start : start + _UUID_BYTES] == key.raw
            and (self.odd.get((row, 0)) if links & _ODD_UUID else None) == key.odd
        )

    def _key(
        self, row: int, column: bytearray, present: int, odd: int, side: int
    ) -> UuidKey | None:
        links = self.links[row]
        if not links & present:
            return None
        start = row * _UUID_BYTES
        raw = bytes(column[start : start + _UUID_BYTES])
        return UuidKey(raw, self.odd[(row, side)] if links & odd else None)

    def _add_uuid(
        self, row: int, value: str | None, column: bytearray, present: int, odd: int, side: int
    ) -> int:
        """Append a uuid's key to a column; the row's link bits for it."""
        if value is None:
            column.extend(bytes(_UUID_BYTES))
            return 0
        key = UuidKey.of(value)
        column.extend(key.raw)
        if key.odd is None:
            return present
        self.odd[(row, side)] = key.odd
        return present | odd

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
        # A response id equal to the row before's shares its string (a response's lines come
        # in a run), and so does a tool result id with a recent tool call's.
        message_id = entry.message_id
        if row:
            previous_id = self.message_ids[-1]
            if message_id is not None and message_id == previous_id:
                message_id = previous_id
        calls = _ids(content, "tool_use", "id")
        recent = self._recent_calls
        if calls:
            if len(recent) >= _RECENT_CALLS:
                recent.clear()
            recent.update((tool_id, tool_id) for tool_id in calls)
        results = tuple(recent.get(i, i) for i in _ids(content, "tool_result", "tool_use_id"))
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
        own = self._add_uuid(row, entry.uuid, self.uuid_keys, _HAS_UUID, _ODD_UUID, 0)
        parent = self._add_uuid(
            row, entry.parent_uuid, self.parent_keys, _HAS_PARENT, _ODD_PARENT, 1
        )
        self.links.append(own | parent)
        self.message_ids.append(message_id)
        self.tool_use_ids.append(calls)
        self.tool_result_ids.append(results)
        if entry.logical_parent_uuid is not None:
            self.logical_parent_uuids[row] = entry.logical_parent_uuid


def _ids(content: Any, kind: str, key: str) -> tuple[str, ...]:
    if not isinstance(content, list):
        return ()
    return tuple(
        str(block.get(key))
        for block in content
        if isinstance(block, dict) and block.get("type") == kind
    )


def _digest(entry: Entry) -> int:
    # The time folded in the way thread deduplication keys records (see `inspection_thread`):
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


__all__ = ["RecordInfo", "RecordTable", "UuidKey"]
