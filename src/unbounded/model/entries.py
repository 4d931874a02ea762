"""Transcript entries: one record of an agent's append-only log, with the API message inside.

An entry keeps the record exactly as stored (`data`), so fields unbounded does not know are
written back untouched; typed accessors read the fields the pipeline needs.
"""

from __future__ import annotations

import sys
import uuid as uuid_module
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import attrgetter, methodcaller
from typing import Any, Literal

from unbounded.model.content import ContentBlock, Usage

ConversationType = Literal["user", "assistant", "system", "attachment", "progress"]
CONVERSATION_TYPES: frozenset[str] = frozenset(
    {"user", "assistant", "system", "attachment", "progress"}
)
"""Record types that belong to the conversation; others (summary, snapshots…) are metadata."""

COMPACT_BOUNDARY_SUBTYPE = "compact_boundary"
SYNTHETIC_MODEL = "<synthetic>"
UNNAMED_MODEL = "unknown"
"""The model an assistant entry names when its recording names none (`Entry.assistant`)."""


def new_uuid() -> str:
    """A fresh random UUID string, as Claude Code writes them."""
    return str(uuid_module.uuid4())


def now_iso() -> str:
    """The current UTC time in Claude Code's timestamp format (ISO 8601, milliseconds, Z)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: str | None) -> datetime | None:
    """Parse an ISO 8601 timestamp (with `Z` or an offset); None when absent or unparseable."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


# Weak references let a spilled transcript hand back the very object a reader still holds
# (model/spilled_entries.py); Python 3.10 has no `weakref_slot`.
_WEAKREF_SLOT: dict[str, bool] = {"weakref_slot": True} if sys.version_info >= (3, 11) else {}


@dataclass(slots=True, eq=False, **_WEAKREF_SLOT)
class Entry:
    """One transcript record. `data` is the record as stored; `line` is its 1-based file line."""

    data: dict[str, Any]
    line: int | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and self.data == other.data

    def __hash__(self) -> int:
        return hash(self.data.get("uuid") or id(self))

    def __repr__(self) -> str:
        return f"Entry(type={self.type!r}, uuid={self.uuid!r}, line={self.line})"

    # -- identity -------------------------------------------------------------------------
    @property
    def type(self) -> str:
        """The record type: user, assistant, system, attachment, progress, or a metadata type."""
        value = self.data.get("type", "")
        # Read for every record by every walk of a long transcript: no str() of a str.
        return value if type(value) is str else str(value)

    @property
    def subtype(self) -> str | None:
        """The system subtype (compact_boundary, local_command, …), if any."""
        value = self.data.get("subtype")
        return value if isinstance(value, str) else None

    @property
    def uuid(self) -> str | None:
        """This record's uuid."""
        return self.data.get("uuid")

    @property
    def parent_uuid(self) -> str | None:
        """The uuid of the record this one follows."""
        return self.data.get("parentUuid")

    @property
    def logical_parent_uuid(self) -> str | None:
        """On a compact boundary: the last record before it (its parentUuid is null)."""
        return self.data.get("logicalParentUuid")

    @property
    def timestamp(self) -> str | None:
        """The ISO timestamp as stored."""
        return self.data.get("timestamp")

    @property
    def time(self) -> datetime | None:
        """The timestamp parsed, timezone-aware."""
        return parse_timestamp(self.timestamp)

    # -- flags -------------------------------------------------------------------------------
    @property
    def is_meta(self) -> bool:
        """Internal message the user did not type (`isMeta`)."""
        return bool(self.data.get("isMeta"))

    @property
    def is_compact_summary(self) -> bool:
        """The summary message written after a compact boundary."""
        return bool(self.data.get("isCompactSummary"))

    @property
    def is_visible_in_transcript_only(self) -> bool:
        """Shown in the transcript view only (`isVisibleInTranscriptOnly`)."""
        return bool(self.data.get("isVisibleInTranscriptOnly"))

    @property
    def is_sidechain(self) -> bool:
        """Belongs to a sub-agent's conversation, not the main thread."""
        return bool(self.data.get("isSidechain"))

    @property
    def is_conversation(self) -> bool:
        """A conversation record (user, assistant, system, attachment, progress)."""
        return self.type in CONVERSATION_TYPES

    @property
    def is_compact_boundary(self) -> bool:
        """A `system` record with subtype `compact_boundary`."""
        return self.type == "system" and self.subtype == COMPACT_BOUNDARY_SUBTYPE

    @property
    def is_synthetic(self) -> bool:
        """An assistant message Claude Code wrote itself (model `<synthetic>`: an API error's
        placeholder, "No response requested."…): never a response the API billed."""
        return self.type == "assistant" and self.model == SYNTHETIC_MODEL

    @property
    def is_synthetic_api_error(self) -> bool:
        """A placeholder assistant message written for an API error, not a real response."""
        if self.type != "assistant" or not self.data.get("isApiErrorMessage"):
            return False
        return self.model == SYNTHETIC_MODEL

    # -- message ---------------------------------------------------------------------------
    @property
    def message(self) -> dict[str, Any] | None:
        """The API message of a user or assistant record."""
        value = self.data.get("message")
        return value if isinstance(value, dict) else None

    @property
    def role(self) -> str | None:
        """user or assistant, for message records."""
        message = self.message
        return message.get("role") if message else None

    @property
    def content(self) -> str | list[ContentBlock]:
        """The message content (a string or a list of blocks); empty when there is none."""
        message = self.data.get("message")  # `message`, read without a second property call
        if not message or not isinstance(message, dict):
            return []
        content = message.get("content")
        if content is None:
            return []
        return content  # type: ignore[no-any-return]

    @property
    def message_id(self) -> str | None:
        """The API response id shared by every line Claude Code wrote for one response.

        A line with usage but no `message.id` was billed all the same: it stands for its
        request (`request:<requestId>`, shared by the lines of one streamed response), else
        for itself (`line:<uuid>`, else `line:<line number>`): it counts once, never dropped.
        """
        message = self.message
        if self.type != "assistant" or not message:
            return None
        value = message.get("id")
        if isinstance(value, str):
            return value
        if not isinstance(message.get("usage"), dict):
            return None
        request = self.data.get("requestId")
        if isinstance(request, str) and request:
            return f"request:{request}"
        uuid = self.data.get("uuid")
        if isinstance(uuid, str) and uuid:
            return f"line:{uuid}"
        return f"line:{self.line}" if self.line is not None else None

    @property
    def model(self) -> str | None:
        """The model that produced an assistant message."""
        message = self.message
        value = message.get("model") if message else None
        return value if isinstance(value, str) else None

    @property
    def usage(self) -> Usage | None:
        """API usage of an assistant response (None for user records and synthetic messages,
        whose all-zero usage was never billed and must not anchor a token count)."""
        message = self.message
        if self.type != "assistant" or not message or self.is_synthetic:
            return None
        usage = message.get("usage")
        return usage if isinstance(usage, dict) else None  # type: ignore[return-value]

    @property
    def attachment(self) -> dict[str, Any] | None:
        """The payload of an `attachment` record."""
        value = self.data.get("attachment")
        return value if isinstance(value, dict) else None

    @property
    def compact_metadata(self) -> dict[str, Any]:
        """A boundary's metadata (trigger, preTokens, …); empty for other records."""
        value = self.data.get("compactMetadata")
        return value if isinstance(value, dict) else {}

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def user(
        cls,
        content: str | Sequence[ContentBlock] | Sequence[dict[str, Any]],
        *,
        parent_uuid: str | None = None,
        timestamp: str | None = None,
        is_meta: bool = False,
        is_compact_summary: bool = False,
        is_visible_in_transcript_only: bool = False,
        extra: dict[str, Any] | None = None,
        uuid: str | None = None,
    ) -> Entry:
        """A user record (a prompt, tool results, or a meta message); `uuid`: the record's
        own (a fresh one when None)."""
        data: dict[str, Any] = {
            "parentUuid": parent_uuid,
            "isSidechain": False,
            "type": "user",
            "message": {
                "role": "user",
                "content": content if isinstance(content, str) else list(content),
            },
            "uuid": uuid or new_uuid(),
            "timestamp": timestamp or now_iso(),
        }
        if is_meta:
            data["isMeta"] = True
        if is_compact_summary:
            data["isCompactSummary"] = True
        if is_visible_in_transcript_only:
            data["isVisibleInTranscriptOnly"] = True
        if extra:
            data.update(extra)
        return cls(data)

    @classmethod
    def assistant(
        cls,
        content: Sequence[ContentBlock] | Sequence[dict[str, Any]],
        *,
        message_id: str | None = None,
        model: str | None = None,
        usage: Usage | dict[str, Any] | None = None,
        stop_reason: str | None = None,
        parent_uuid: str | None = None,
        timestamp: str | None = None,
        extra: dict[str, Any] | None = None,
        uuid: str | None = None,
    ) -> Entry:
        """An assistant record holding one API response (or one block of it); `uuid`: the
        record's own (a fresh one when None)."""
        message: dict[str, Any] = {
            "id": message_id or f"msg_{uuid_module.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model or UNNAMED_MODEL,
            "content": list(content),
            "stop_reason": stop_reason,
            "stop_sequence": None,
        }
        if usage is not None:
            message["usage"] = dict(usage)
        data: dict[str, Any] = {
            "parentUuid": parent_uuid,
            "isSidechain": False,
            "type": "assistant",
            "message": message,
            "uuid": uuid or new_uuid(),
            "timestamp": timestamp or now_iso(),
        }
        if extra:
            data.update(extra)
        return cls(data)

    @classmethod
    def attachment_record(
        cls,
        attachment: dict[str, Any],
        *,
        parent_uuid: str | None = None,
        timestamp: str | None = None,
    ) -> Entry:
        """An attachment record (file, todo list, plan, …) turned into user content on send."""
        if not isinstance(attachment.get("type"), str):
            raise ValueError("an attachment needs a string 'type' field")
        return cls(
            {
                "parentUuid": parent_uuid,
                "isSidechain": False,
                "type": "attachment",
                "attachment": dict(attachment),
                "uuid": new_uuid(),
                "timestamp": timestamp or now_iso(),
            }
        )


CompactTrigger = Literal["auto", "manual"]


def create_compact_boundary(
    trigger: CompactTrigger,
    pre_tokens: int,
    *,
    logical_parent_uuid: str | None = None,
    messages_summarized: int | None = None,
    pre_compact_discovered_tools: Iterable[str] = (),
    preserved_segment: dict[str, str | None] | None = None,
    session_id: str | None = None,
    timestamp: str | None = None,
    extra_metadata: dict[str, Any] | None = None,
) -> Entry:
    """The `compact_boundary` system record that marks where a compaction replaced history.

    `parentUuid` is null and `logicalParentUuid` points at the last record before it, as in
    Claude Code 2.1. `preserved_segment` holds headUuid/anchorUuid/tailUuid for partial
    compaction, so kept messages can be relinked when the transcript is loaded again.
    """
    if trigger not in ("auto", "manual"):
        raise ValueError(f"trigger must be 'auto' or 'manual', not {trigger!r}")
    if pre_tokens < 0:
        raise ValueError(f"pre_tokens must be >= 0, not {pre_tokens}")
    metadata: dict[str, Any] = {"trigger": trigger, "preTokens": int(pre_tokens)}
    if messages_summarized is not None:
        metadata["messagesSummarized"] = int(messages_summarized)
    tools = sorted(set(pre_compact_discovered_tools))
    if tools:
        metadata["preCompactDiscoveredTools"] = tools
    if preserved_segment is not None:
        unknown = set(preserved_segment) - {"headUuid", "anchorUuid", "tailUuid"}
        if unknown:
            raise ValueError(f"preserved_segment has unknown keys: {sorted(unknown)}")
        metadata["preservedSegment"] = dict(preserved_segment)
    if extra_metadata:
        metadata.update(extra_metadata)
    data: dict[str, Any] = {
        "parentUuid": None,
        "logicalParentUuid": logical_parent_uuid,
        "isSidechain": False,
        "type": "system",
        "subtype": COMPACT_BOUNDARY_SUBTYPE,
        "content": "Conversation compacted",
        "isMeta": False,
        "timestamp": timestamp or now_iso(),
        "uuid": new_uuid(),
        "level": "info",
        "compactMetadata": metadata,
    }
    if session_id is not None:
        data["sessionId"] = session_id
    return Entry(data)


def last_compact_boundary_index(entries: Sequence[Entry]) -> int:
    """Index of the last compact boundary, or -1 when the conversation was never compacted."""
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        # The subtype first: one dict read rules out nearly every record of a long history.
        if entry.data.get("subtype") == COMPACT_BOUNDARY_SUBTYPE and entry.is_compact_boundary:
            return index
    return -1


def messages_after_compact_boundary(
    entries: Sequence[Entry], *, unique_uuids: bool = False
) -> list[Entry]:
    """The entries from the last compact boundary on (boundary included), or all of them.

    The boundary is kept so callers can read its metadata; normalization drops it (it is a
    system record). The summary message after it is included, so a later compaction
    summarizes the previous summary too and summaries chain (seed 002 `nk`).

    A partial compaction keeps some messages verbatim without writing them again: its
    boundary's `preservedSegment` names the first and last kept entries (`headUuid`,
    `tailUuid`, both before the boundary in the file) and the entry after which they belong
    in the view (`anchorUuid`: the boundary for `from`, the summary for `up_to`). They are
    spliced back in there, with their recorded usage removed: it described a larger context
    and must not anchor the token count of the compacted one. A segment whose uuids cannot be
    found is left out.

    `unique_uuids`: the caller's word that no two entries share a uuid (a session's
    transcript keeps track): the segment, near the boundary, is then looked for from it
    backwards instead of in the whole history.
    """
    index = last_compact_boundary_index(entries)
    if index < 0:
        return list(entries)
    view = list(entries[index:])
    segment = entries[index].compact_metadata.get("preservedSegment")
    if not isinstance(segment, dict):
        return view
    if unique_uuids:
        kept = _preserved_unique(entries, index, segment)
    else:
        kept = _preserved_entries(entries[:index], segment)
    anchor = segment.get("anchorUuid")
    positions = [i for i, entry in enumerate(view) if entry.uuid == anchor]
    if not kept or not positions:
        return view
    at = positions[0] + 1
    return view[:at] + kept + view[at:]


_DATA = attrgetter("data")
_UUID = methodcaller("get", "uuid")


def _preserved_entries(before: Sequence[Entry], segment: dict[str, Any]) -> list[Entry]:
    # `Entry.uuid` of each record, read at C speed (the whole history before the boundary).
    uuids = list(map(_UUID, map(_DATA, before)))
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if head not in uuids or tail not in uuids:
        return []
    start, end = uuids.index(head), uuids.index(tail)
    if end < start:
        return []
    return [_without_usage(entry) for entry in before[start : end + 1]]


def _preserved_unique(entries: Sequence[Entry], index: int, segment: dict[str, Any]) -> list[Entry]:
    """`_preserved_entries(entries[:index], segment)` when no two entries share a uuid: each
    uuid's only occurrence is its first, found from `index` backwards."""
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if not isinstance(head, str) or not isinstance(tail, str):
        return _preserved_entries(entries[:index], segment)
    end = -1  # no tail after the head: an empty run, as the whole history's walk finds
    for position in range(index - 1, -1, -1):
        uuid = entries[position].data.get("uuid")
        if uuid == tail:
            end = position
        if uuid == head:
            return [_without_usage(entry) for entry in entries[position : end + 1]]
    return []


def _without_usage(entry: Entry) -> Entry:
    message = entry.message
    if message is None or "usage" not in message:
        return entry
    data = dict(entry.data)
    data["message"] = {key: value for key, value in message.items() if key != "usage"}
    return Entry(data, entry.line)
