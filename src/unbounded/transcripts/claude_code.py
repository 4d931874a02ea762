"""Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`), 1.0.x and 2.1.x.

Every record type is read: user, assistant, system (compact_boundary, local_command,
stop_hook_summary, turn_duration…), progress, attachment, summary, file-history-snapshot,
queue-operation, and any newer type, which is kept as it is. Known fields are type-checked so
a damaged file fails with its line number; unknown fields are kept and written back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from unbounded.errors import TranscriptError
from unbounded.fileio import append_private, atomic_write_chunks
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript
from unbounded.transcripts.jsonl import ReadReport, dumps_line, iter_json_lines

FORMAT = "claude-code"

RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "attachment",
        "progress",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
    }
)
"""Record types seen in Claude Code files; a line with one of these marks the format."""

_OPTIONAL_STR = ("uuid", "parentUuid", "logicalParentUuid", "sessionId", "subtype", "timestamp")
_OPTIONAL_BOOL = ("isMeta", "isSidechain", "isCompactSummary", "isVisibleInTranscriptOnly")
_USAGE_INTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _fail(path: Path, line: int, reason: str) -> None:
    raise TranscriptError(
        reason, path=path, line=line, hint="fix or remove the line, or use --skip-invalid"
    )


def validate_record(record: dict[str, Any], path: Path, line: int) -> None:
    """Type-check the fields unbounded relies on; unknown fields are never an error."""
    kind = record.get("type")
    if not isinstance(kind, str):
        _fail(path, line, "field 'type' is missing or not a string")
    for name in _OPTIONAL_STR:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            _fail(path, line, f"field '{name}' should be a string, found {type(value).__name__}")
    for name in _OPTIONAL_BOOL:
        value = record.get(name)
        if value is not None and not isinstance(value, bool):
            _fail(path, line, f"field '{name}' should be true or false, found {value!r}")
    if kind in ("user", "assistant"):
        _validate_message(record.get("message"), kind, path, line)
    elif kind == "attachment":
        attachment = record.get("attachment")
        if not isinstance(attachment, dict) or not isinstance(attachment.get("type"), str):
            _fail(path, line, "an attachment record needs an 'attachment' object with a 'type'")
    elif kind == "system" and record.get("subtype") == "compact_boundary":
        metadata = record.get("compactMetadata")
        if metadata is not None:
            if not isinstance(metadata, dict):
                _fail(path, line, "field 'compactMetadata' should be an object")
            pre = metadata.get("preTokens")
            if pre is not None and (not isinstance(pre, int) or isinstance(pre, bool)):
                _fail(
                    path,
                    line,
                    f"field 'compactMetadata.preTokens' should be an integer, found {pre!r}",
                )


def _validate_message(message: Any, kind: str, path: Path, line: int) -> None:
    if not isinstance(message, dict):
        _fail(path, line, f"a {kind} record needs a 'message' object")
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        _fail(
            path,
            line,
            f"field 'message.content' should be a string or a list, found {type(content).__name__}",
        )
    if isinstance(content, list):
        for position, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                _fail(path, line, f"message.content[{position}] should be an object with a 'type'")
    usage = message.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            _fail(path, line, "field 'message.usage' should be an object")
        for name in _USAGE_INTS:
            value = usage.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                _fail(
                    path,
                    line,
                    f"field 'message.usage.{name}' should be an integer, found {value!r}",
                )
    message_id = message.get("id")
    if message_id is not None and not isinstance(message_id, str):
        _fail(path, line, "field 'message.id' should be a string")


def read_claude_code(path: str | Path, *, skip_invalid: bool = False) -> Transcript:
    """Read a Claude Code JSONL session file (streamed line by line)."""
    source = Path(path)
    report = ReadReport()
    entries = [
        Entry(record, line)
        for line, record in iter_json_lines(
            source, skip_invalid=skip_invalid, report=report, validate=validate_record
        )
    ]
    versions = sorted(
        {str(e.data["version"]) for e in entries if isinstance(e.data.get("version"), str)}
    )
    return Transcript(
        entries=entries,
        format=FORMAT,
        path=source,
        warnings=report.warnings,
        skipped_lines=report.skipped_lines,
        meta={"versions": versions},
    )


def write_claude_code(entries: Iterable[Entry], path: str | Path) -> None:
    """Write entries as a Claude Code JSONL file, atomically and owner-only (0600).

    A crash leaves either the old file or the complete new one, never half of it.
    """
    atomic_write_chunks(path, (dumps_line(entry.data) for entry in entries))


def append_claude_code(entries: Sequence[Entry], path: str | Path, *, fsync: bool = True) -> None:
    """Append entries to a JSONL transcript in one write, flushed (and fsynced by default)."""
    payload = b"".join(dumps_line(entry.data) for entry in entries)
    if payload:
        append_private(path, payload, fsync=fsync)


def looks_like_claude_code(record: dict[str, Any]) -> bool:
    """Whether a first JSON record has the shape of a Claude Code line."""
    kind = record.get("type")
    if kind not in RECORD_TYPES:
        return False
    return any(key in record for key in ("uuid", "sessionId", "leafUuid", "messageId", "operation"))
