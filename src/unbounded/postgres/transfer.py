"""Sessions in and out of PostgreSQL: list them, export one to JSONL, import a JSONL file.

Export writes each record's stored line text followed by a newline, streamed (bounded
memory), atomically and owner-only; import stores each record's exact line text, streamed
with `COPY` in one transaction under the session's lock, so a file written by the JSONL
writer (or by Claude Code) comes back byte for byte. Blank lines are not records and are not
kept; a torn last line is left out with a warning, as when reading the file; a line the
reader had to repair (a byte order mark, bytes that are not UTF-8) is stored as the repaired
record, with a warning.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from unbounded.errors import ConfigError, TranscriptError
from unbounded.fileio import FILE_MODE, write_output_chunks
from unbounded.postgres.connect import connection_pool, get_connection
from unbounded.postgres.migrations import ensure_schema
from unbounded.postgres.store import PostgresStore, jsonb_can_hold
from unbounded.transcripts.claude_code import validate_record
from unbounded.transcripts.jsonl import ReadReport, dumps_line, iter_json_records

EXPORT_BATCH_ROWS = 1_000


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as `unbounded sessions` lists it."""

    session_id: str
    records: int
    bytes: int
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "session": self.session_id,
            "records": self.records,
            "bytes": self.bytes,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def list_sessions(url: str, *, migrate: bool = False) -> list[SessionInfo]:
    """Every session in the database, most recently updated first."""
    pool = connection_pool(url)
    connection = get_connection(pool, url)
    try:
        ensure_schema(connection, allow_migrate=migrate)
        rows = connection.execute(
            "SELECT session_id, records, bytes, created_at, updated_at FROM unbounded_sessions "
            "ORDER BY updated_at DESC, session_id"
        ).fetchall()
    finally:
        pool.putconn(connection)
    return [SessionInfo(row[0], int(row[1]), int(row[2]), row[3], row[4]) for row in rows]


def iter_session_lines(url: str, session_id: str) -> Iterator[bytes]:
    """The session's records as JSONL lines (newline included), streamed in append order."""
    pool = connection_pool(url)
    connection = get_connection(pool, url)
    try:
        ensure_schema(connection, allow_migrate=False)
        exists = connection.execute(
            "SELECT 1 FROM unbounded_sessions WHERE session_id = %s", (session_id,)
        ).fetchone()
        if exists is None:
            raise ConfigError(f"no session {session_id!r} in the database")
        cursor = connection.cursor()
        for (line,) in cursor.stream(
            "SELECT line FROM unbounded_records WHERE session_id = %s ORDER BY seq",
            (session_id,),
            size=EXPORT_BATCH_ROWS,
        ):
            yield line.encode("utf-8") + b"\n"
    finally:
        pool.putconn(connection)


def export_session(url: str, session_id: str, output: str | Path) -> int:
    """Write a session as a JSONL file (atomically, 0600; a link followed, a pipe written
    directly); returns the bytes written."""
    written = 0

    def counted() -> Iterator[bytes]:
        nonlocal written
        for line in iter_session_lines(url, session_id):
            written += len(line)
            yield line

    write_output_chunks(output, counted(), mode=FILE_MODE)
    return written


def _stored_line(raw: bytes, value: dict[str, Any]) -> str | None:
    """The line's exact text, or None when it needed repairs to read (BOM, bad UTF-8)."""
    try:
        orjson.loads(raw)
        return raw.rstrip(b"\n").decode("utf-8")
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import stored."""

    session_id: str
    records: int
    bytes: int
    warnings: list[str]
    skipped_lines: int


def import_session(
    path: str | Path,
    url: str,
    session_id: str,
    *,
    skip_invalid: bool = False,
    wait: float | None = None,
) -> ImportResult:
    """Store a Claude Code JSONL file as a new session (refused when it already has records)."""
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"{source}: no such file")
    _refuse_other_formats(source)
    report = ReadReport()
    with PostgresStore(url, session_id, wait=wait) as store:
        try:
            records, size = _copy_records(store, source, session_id, skip_invalid, report)
        except BaseException:
            # A failed import leaves no empty session behind (unless the server is gone too).
            if store.created:
                with contextlib.suppress(Exception), store.transaction() as connection:
                    connection.execute(
                        "DELETE FROM unbounded_sessions WHERE session_id = %s AND records = 0",
                        (session_id,),
                    )
            raise
    return ImportResult(session_id, records, size, report.warnings, report.skipped_lines)


def _refuse_other_formats(source: Path) -> None:
    """A database session is read back as Claude Code's format: a file another agent wrote
    (a Codex rollout) would read back as an empty conversation, so it is refused. A file no
    reader recognises is left to the import's own checks."""
    from unbounded.transcripts.loader import detect_format

    try:
        found = detect_format(source)
    except TranscriptError:
        return
    if found != "claude-code":
        raise ConfigError(
            f"{source}: not a Claude Code session (its format is '{found}'): the database "
            "keeps Claude Code sessions only (inspect, replay and eval read the file as it is)"
        )


def _copy_records(
    store: PostgresStore, source: Path, session_id: str, skip_invalid: bool, report: ReadReport
) -> tuple[int, int]:
    """COPY the file's records into the session and set its count, in one transaction
    (refused when the session has records already, or the file holds none)."""
    with store.transaction() as connection:
        row = connection.execute(
            "SELECT records FROM unbounded_sessions WHERE session_id = %s FOR UPDATE",
            (session_id,),
        ).fetchone()
        if row is not None and int(row[0]) > 0:
            raise ConfigError(
                f"{store.where} already holds {int(row[0]):,} records: import into a new "
                "session (--session ID)"
            )
        records = size = 0
        with connection.cursor().copy(
            "COPY unbounded_records (session_id, seq, line, record) FROM STDIN"
        ) as copy:
            for item in iter_json_records(
                source, skip_invalid=skip_invalid, report=report, validate=validate_record
            ):
                line = _stored_line(item.raw, item.value)
                if line is None:
                    line = dumps_line(item.value)[:-1].decode("utf-8")
                    report.warnings.append(
                        f"{source}:{item.number}: stored as repaired JSON (the line needed "
                        "repairs to read), so it will not export byte for byte"
                    )
                records += 1
                size += len(line.encode("utf-8")) + 1
                copy.write_row(
                    (session_id, records, line, line if jsonb_can_hold(line) else None)
                )
        if records == 0:
            raise TranscriptError(
                "no records to import (an empty file, or nothing in it is a JSON record)",
                path=source,
                line=1,
                hint="import a Claude Code session file (.jsonl)",
            )
        connection.execute(
            "UPDATE unbounded_sessions SET records = %s, bytes = %s, updated_at = now() "
            "WHERE session_id = %s",
            (records, size, session_id),
        )
    return records, size
