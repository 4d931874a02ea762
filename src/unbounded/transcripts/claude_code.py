"""Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`), 1.0.x and 2.1.x.

Every record type is read: user, assistant, system (compact_boundary, local_command,
stop_hook_summary, turn_duration…), progress, attachment, summary, file-history-snapshot,
queue-operation, custom-title. A newer type (2.1.9x writes `permission-mode`, `last-prompt`,
`ai-title`…) is kept as it is, written back unchanged, counted in
`meta["unknown_record_types"]` and otherwise passed over. Known fields are type-checked so a
damaged file fails with its line number; unknown fields are kept and written back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from unbounded.errors import TranscriptError
from unbounded.fileio import append_private, atomic_write_chunks, write_output_chunks
from unbounded.model.entries import Entry
from unbounded.model.record_checks import (
    MICROCOMPACT_RECEIPT_FIELD,
    MICROCOMPACT_RECEIPT_SUBTYPE,
    RECEIPT_KEY,
    count_problem,
    receipt_problem,
    usage_problem,
)
from unbounded.model.transcript import Transcript
from unbounded.transcripts.importing import count_unknown
from unbounded.transcripts.jsonl import ReadReport, dumps_line, iter_json_lines
from unbounded.transcripts.shapes import RECORD_TYPES as RECORD_TYPES
from unbounded.transcripts.shapes import looks_like_claude_code as looks_like_claude_code
from unbounded.transcripts.shapes import refuse_other_format

FORMAT = "claude-code"

_OPTIONAL_STR = ("uuid", "parentUuid", "logicalParentUuid", "sessionId", "subtype", "timestamp")
_OPTIONAL_BOOL = ("isMeta", "isSidechain", "isCompactSummary", "isVisibleInTranscriptOnly")


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
            problem = count_problem(
                metadata.get("preTokens"), "compactMetadata.preTokens"
            ) or receipt_problem(metadata.get(RECEIPT_KEY), f"compactMetadata.{RECEIPT_KEY}")
            if problem is not None:
                _fail(path, line, problem)
    elif kind == "system" and record.get("subtype") == MICROCOMPACT_RECEIPT_SUBTYPE:
        problem = receipt_problem(
            record.get(MICROCOMPACT_RECEIPT_FIELD), MICROCOMPACT_RECEIPT_FIELD
        )
        if problem is not None:
            _fail(path, line, problem)


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
            _validate_block(block, f"message.content[{position}]", path, line)
    problem = usage_problem(message.get("usage"))
    if problem is not None:
        _fail(path, line, problem)
    message_id = message.get("id")
    if message_id is not None and not isinstance(message_id, str):
        _fail(path, line, "field 'message.id' should be a string")


def iter_claude_code(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    report: ReadReport | None = None,
    max_line_bytes: int | None = None,
    max_depth: int | None = None,
) -> Iterator[Entry]:
    """Stream a Claude Code JSONL file one entry at a time (memory bounded by the longest line).

    Same checks as `read_claude_code`; warnings and skipped lines go to `report`.
    """
    source = Path(path)
    for line, record in iter_json_lines(
        source,
        skip_invalid=skip_invalid,
        report=report if report is not None else ReadReport(),
        validate=validate_record,
        max_line_bytes=max_line_bytes,
        max_depth=max_depth,
    ):
        yield Entry(record, line)


_BLOCK_FIELDS: dict[str, tuple[tuple[str, tuple[type, ...], bool], ...]] = {
    "text": (("text", (str,), True),),
    "tool_use": (("id", (str,), True), ("name", (str,), True), ("input", (dict,), False)),
    "tool_result": (
        ("tool_use_id", (str,), True),
        ("content", (str, list), False),
        ("is_error", (bool,), False),
    ),
    "thinking": (("thinking", (str,), True), ("signature", (str,), False)),
    "redacted_thinking": (("data", (str,), True),),
    "image": (("source", (dict,), True),),
    "document": (("source", (dict,), True),),
}
"""Fields of the content blocks unbounded reads: (name, allowed types, required)."""
_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", bool: "true or false"}


def _validate_block(block: dict[str, Any], where: str, path: Path, line: int) -> None:
    """Type-check the fields unbounded reads in one content block (nested results too)."""
    for name, kinds, required in _BLOCK_FIELDS.get(block["type"], ()):
        value = block.get(name)
        if value is None and not required:
            continue
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            expected = " or ".join(_TYPE_NAMES[kind] for kind in kinds)
            found = "missing" if value is None else f"found {type(value).__name__}"
            _fail(path, line, f"field '{where}.{name}' should be {expected} ({found})")
    if block["type"] == "tool_result" and isinstance(block.get("content"), list):
        for position, inner in enumerate(block["content"]):
            inner_where = f"{where}.content[{position}]"
            if not isinstance(inner, dict) or not isinstance(inner.get("type"), str):
                _fail(path, line, f"{inner_where} should be an object with a 'type'")
            _validate_block(inner, inner_where, path, line)


def read_claude_code(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    max_line_bytes: int | None = None,
    max_depth: int | None = None,
) -> Transcript:
    """Read a Claude Code JSONL session file (streamed line by line, every entry kept)."""
    source = Path(path)
    report = ReadReport()
    entries = list(
        iter_claude_code(
            source,
            skip_invalid=skip_invalid,
            report=report,
            max_line_bytes=max_line_bytes,
            max_depth=max_depth,
        )
    )
    versions = sorted(
        {str(e.data["version"]) for e in entries if isinstance(e.data.get("version"), str)}
    )
    if not any(e.type in RECORD_TYPES for e in entries):
        refuse_other_format(source, FORMAT)  # nothing of Claude Code's: another agent's file?
    meta: dict[str, Any] = {"versions": versions, "provider": "anthropic"}
    count_unknown(meta, (e.type for e in entries if e.type not in RECORD_TYPES))
    return Transcript(
        entries=entries,
        format=FORMAT,
        path=source,
        warnings=report.warnings,
        skipped_lines=report.skipped_lines,
        meta=meta,
    )


def write_claude_code(
    entries: Iterable[Entry], path: str | Path, *, keep_mode: bool = False
) -> None:
    """Write entries as a Claude Code JSONL file, atomically and owner-only (0600).

    A crash leaves either the old file or the complete new one, never half of it. With
    `keep_mode` (a file the user named), a file being replaced keeps its permissions, a link
    is followed and a pipe or device written directly (see `write_output_chunks`).
    """
    lines = (dumps_line(entry.data) for entry in entries)
    if keep_mode:
        write_output_chunks(path, lines)
    else:
        atomic_write_chunks(path, lines, mode=0o600)


def append_claude_code(entries: Sequence[Entry], path: str | Path, *, fsync: bool = True) -> None:
    """Append entries to a JSONL transcript in one write, flushed (and fsynced by default)."""
    payload = b"".join(dumps_line(entry.data) for entry in entries)
    if payload:
        append_private(path, payload, fsync=fsync)
