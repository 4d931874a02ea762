"""`PostgresStore`: one session kept in PostgreSQL, written by one worker at a time.

Tables (docs/storage.md): `unbounded_sessions` (one row per session with its record count,
size and last update), `unbounded_records` (the append-only transcript: one row per record,
numbered, with its exact JSON Lines text and a jsonb copy), `unbounded_states`,
`unbounded_notes` and `unbounded_tool_outputs`.

One writer per session, across machines: a writing store takes a session-level advisory lock
(`pg_try_advisory_lock`, keyed on the session id) on a connection it keeps for its whole life,
and does every write on that connection. The lock goes with the connection: `close()`
releases it, and a worker that dies (or whose connection drops) releases it when the server
sees the connection end; a store that lost its connection refuses further writes instead of
writing without the lock. `wait=` behaves as in `FolderStore`; a waiting store waits in the
server, so the lock passes to it the moment its holder lets go.

Each `append()` is one statement, so a compaction's boundary, summary and attachments land
together or not at all; `load()` returns the records exactly as the JSONL writer writes them.

Session calls its store synchronously (from async code too): each call here is one short
round trip on the held connection, so the store is synchronous, and there is no async twin
(see docs/storage.md, "Sync and async").
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from unbounded.errors import ConfigError, SessionLockedError, StoreDamagedError, TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.text import repair_surrogates
from unbounded.model.transcript import Transcript
from unbounded.postgres.connect import (
    check_store_url,
    connection_pool,
    get_connection,
    require_psycopg,
)
from unbounded.postgres.migrations import ensure_schema
from unbounded.redaction import redact_url
from unbounded.side_outputs import check_side_output_name, legacy_side_output_name
from unbounded.storage import MemoryStore
from unbounded.transcripts.jsonl import dumps_line

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

MAX_SESSION_ID = 512
LOAD_BATCH_ROWS = 500
"""Rows fetched per round trip when loading a transcript."""
_schema_checked: set[tuple[int, str]] = set()
"""(process, URL) pairs whose schema was found current: checked once per process."""
_NUL_ESCAPE = b"\\u0000"
_APPEND = """
WITH head AS (
    UPDATE unbounded_sessions
       SET records = records + %(count)s, bytes = bytes + %(bytes)s, updated_at = now()
     WHERE session_id = %(session)s
 RETURNING records - %(count)s AS base
)
INSERT INTO unbounded_records (session_id, seq, line, record)
SELECT %(session)s, head.base + item.position, item.line,
       CASE WHEN item.as_json THEN item.line::jsonb END
  FROM head, unnest(%(lines)s::text[], %(as_json)s::boolean[])
       WITH ORDINALITY AS item(line, as_json, position)
"""


def session_lock_key(session_id: str) -> int:
    """The advisory lock key of a session: 64 bits of a hash of its id (signed, as bigint)."""
    digest = hashlib.blake2b(f"unbounded-session:{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def check_session_id(session_id: str) -> str:
    """A session id: 1 to 512 characters, no NUL."""
    if not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_SESSION_ID:
        raise ConfigError(f"a session id is 1 to {MAX_SESSION_ID} characters, not {session_id!r}")
    if "\x00" in session_id:
        raise ConfigError("a session id cannot contain NUL")
    return session_id


def record_line(entry: Entry) -> str:
    """An entry as its JSON Lines text without the newline (what `FolderStore` writes)."""
    return dumps_line(entry.data)[:-1].decode("utf-8")


def jsonb_can_hold(line: str) -> bool:
    """Whether jsonb can store this record: it refuses the \\u0000 escape."""
    return _NUL_ESCAPE.decode() not in line


def _number_text(value: object) -> bool:
    """Whether `value` is a number written as text ("5"), to suggest the number."""
    try:
        return isinstance(value, str) and float(value) >= 0
    except ValueError:
        return False


class PostgresStore:
    """A session kept in PostgreSQL (see the module docstring).

    `url` is a libpq connection URL (`postgresql://user@host/db`); `session_id` names the
    session. `lock=True` (the default) takes the session's advisory lock for this object's
    life, creating the session when new (`create=False` refuses a session that does not
    exist); `wait` is how many seconds to wait for a lock another worker holds (default: none,
    `math.inf`: until it is free) before raising `SessionLockedError`. With `lock=False` the
    store only reads: appends, state, notes and tool outputs are kept in memory for this
    object's life. `pool` is the connection pool to use (default: the process's shared pool
    for `url`, see `connection_pool`). `migrate=True` creates or upgrades the schema when it
    is older than this package; with `migrate=False` an old schema is an error.
    """

    def __init__(
        self,
        url: str,
        session_id: str,
        *,
        lock: bool = True,
        wait: float | None = None,
        create: bool = True,
        migrate: bool = True,
        pool: ConnectionPool[Any] | None = None,
    ) -> None:
        require_psycopg()
        if wait is not None and (
            isinstance(wait, bool)
            or not isinstance(wait, (int, float))
            or math.isnan(wait)
            or wait < 0
        ):
            raise ConfigError(
                f"PostgresStore wait must be a number of seconds >= 0, not {wait!r}"
                + (f": pass wait={float(wait):g}" if _number_text(wait) else "")
            )
        check_store_url(url)
        self.session_id = check_session_id(session_id)
        self.url = url
        self._connection: psycopg.Connection[Any] | None = None
        self._broken: str | None = None
        self._read_only = not lock
        self.created = False
        """Whether opening this store created the session (its row did not exist)."""
        self._overlay = MemoryStore() if self._read_only else None
        self._pool = pool if pool is not None else connection_pool(url)
        with self._borrow() as connection:
            if (os.getpid(), url) not in _schema_checked:
                ensure_schema(connection, allow_migrate=migrate)
                _schema_checked.add((os.getpid(), url))
            if not create and not self._exists(connection):
                raise ConfigError(
                    f"{self.where}: no such session (`unbounded sessions URL` lists them)"
                )
        if not self._read_only:
            self._acquire(wait or 0.0, create)

    # -- the lock --------------------------------------------------------------------------
    def _acquire(self, wait: float, create: bool) -> None:
        connection = get_connection(self._pool, self.url)
        try:
            if not self._take_lock(connection, wait):
                waited = f" after waiting {wait:g} s" if wait else ""
                raise SessionLockedError(
                    f"{self.where} is in use by another worker{waited}; close it there "
                    "first, pass wait= to wait for it, or open this store with lock=False "
                    "to read it"
                )
            if create:
                inserted = connection.execute(
                    "INSERT INTO unbounded_sessions (session_id) VALUES (%s) "
                    "ON CONFLICT (session_id) DO NOTHING RETURNING 1",
                    (self.session_id,),
                ).fetchone()
                self.created = inserted is not None
            elif not self._exists(connection):
                raise ConfigError(f"{self.where}: no such session")
        except BaseException:
            with contextlib.suppress(Exception):
                connection.execute(
                    "SELECT pg_advisory_unlock(%s)", (session_lock_key(self.session_id),)
                )
            self._pool.putconn(connection)
            raise
        self._connection = connection

    def _take_lock(self, connection: psycopg.Connection[Any], wait: float) -> bool:
        """Take the session lock, waiting up to `wait` seconds; False when it stayed taken.

        A wait blocks in the server (`pg_advisory_lock` under `lock_timeout`), so the lock
        passes to a waiter the moment its holder lets go, as `flock` does for folders.
        """
        import psycopg

        key = session_lock_key(self.session_id)
        if wait <= 0:
            row = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            return bool(row and row[0])
        timeout_ms = 0 if math.isinf(wait) else max(1, math.ceil(wait * 1000))
        connection.execute(f"SET lock_timeout = {timeout_ms}")
        try:
            connection.execute("SELECT pg_advisory_lock(%s)", (key,))
        except psycopg.errors.LockNotAvailable:
            return False
        finally:
            connection.execute("RESET lock_timeout")
        return True

    def _exists(self, connection: psycopg.Connection[Any]) -> bool:
        row = connection.execute(
            "SELECT 1 FROM unbounded_sessions WHERE session_id = %s", (self.session_id,)
        ).fetchone()
        return row is not None

    @property
    def where(self) -> str:
        """The session's address for messages (password hidden)."""
        return f"session {self.session_id!r} in {redact_url(self.url)}"

    @property
    def locked(self) -> bool:
        """Whether this store holds the session lock (and may write)."""
        return self._connection is not None

    @property
    def read_only(self) -> bool:
        """True when opened with `lock=False`: nothing is ever written."""
        return self._read_only

    def close(self) -> None:
        """Release the session lock and give the connection back (safe to call twice)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.execute(
                "SELECT pg_advisory_unlock(%s)", (session_lock_key(self.session_id),)
            )
        except Exception:
            # The connection is gone, and the lock with it; the pool drops a broken one.
            with contextlib.suppress(Exception):
                connection.close()
        with contextlib.suppress(Exception):
            self._pool.putconn(connection)

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Last resort for a store nobody closed: free the lock and the connection.
        with contextlib.suppress(Exception):
            self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The lock's connection inside one transaction, for a write of several statements."""
        connection = self._writer()
        with connection.transaction():
            yield connection

    # -- connections -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _borrow(self) -> Iterator[psycopg.Connection[Any]]:
        """The held connection of a writer, else one from the pool for this call. A lost
        connection is a StoreDamagedError, as for writes (a writer's lock is lost with it)."""
        import psycopg

        held = self._connection
        try:
            if held is not None:
                yield held
                return
            connection = get_connection(self._pool, self.url)
            try:
                yield connection
            finally:
                self._pool.putconn(connection)
        except psycopg.OperationalError as error:
            if held is not None:
                self._broken = (
                    f"{self.where}: the connection holding the session lock failed ({error}); "
                    "the lock is lost, so nothing more is written: reopen the store"
                )
                raise StoreDamagedError(self._broken) from None
            raise StoreDamagedError(
                f"{self.where}: reading failed, the connection to the server was lost "
                f"({error}); try again, or check the server"
            ) from None

    def _writer(self) -> psycopg.Connection[Any]:
        if self._broken is not None:
            raise StoreDamagedError(self._broken)
        if self._connection is None:
            raise StoreDamagedError(f"{self.where}: the store was closed; reopen it to write")
        return self._connection

    def _write(self, query: str, params: dict[str, Any] | Sequence[Any]) -> int:
        """Run one write on the lock's connection; a lost connection stops further writes."""
        import psycopg

        connection = self._writer()
        try:
            cursor = connection.execute(query, params)
        except psycopg.OperationalError as error:
            self._broken = (
                f"{self.where}: the connection holding the session lock failed ({error}); the "
                "lock is lost, so nothing more is written: reopen the store"
            )
            raise StoreDamagedError(self._broken) from None
        return cursor.rowcount

    # -- transcript ------------------------------------------------------------------------
    @property
    def transcript_path(self) -> str | None:
        """None: the transcript is in the database, not in a file a model could read."""
        return None

    @property
    def memory_path(self) -> str | None:
        """None: the notes are in the database."""
        return None

    def load(self) -> Transcript:
        """The transcript: every record in append order, exactly as appended."""
        entries: list[Entry] = []
        with self._borrow() as connection:
            cursor = connection.cursor()
            for seq, line in cursor.stream(
                "SELECT seq, line FROM unbounded_records WHERE session_id = %s ORDER BY seq",
                (self.session_id,),
                size=LOAD_BATCH_ROWS,
            ):
                try:
                    data = orjson.loads(line)
                except orjson.JSONDecodeError as error:
                    raise TranscriptError(
                        f"{self.where}: record {seq} is not JSON ({error})",
                        hint="export the session and repair the record",
                    ) from None
                entries.append(Entry(data, seq))
        transcript = Transcript(
            entries=entries,
            format="claude-code",
            meta={"session": self.session_id, "address": redact_url(self.url)},
        )
        if self._overlay is not None:
            transcript.entries.extend(self._overlay.entries)
        return transcript

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries in one statement: they all land, or none does."""
        if self._overlay is not None:
            self._overlay.append(entries)
            return
        if not entries:
            return
        lines = [record_line(entry) for entry in entries]
        count = self._write(
            _APPEND,
            {
                "session": self.session_id,
                "count": len(lines),
                "bytes": sum(len(line.encode("utf-8")) + 1 for line in lines),
                "lines": lines,
                "as_json": [jsonb_can_hold(line) for line in lines],
            },
        )
        if count != len(lines):
            raise StoreDamagedError(
                f"{self.where}: the session row is missing (deleted while open?); "
                f"{count} of {len(lines)} records written"
            )

    # -- state, notes, tool outputs ----------------------------------------------------------
    def load_state(self, name: str) -> dict[str, Any] | None:
        """A state document, or None."""
        _check_state_name(name)
        if self._overlay is not None and name in self._overlay.states:
            return self._overlay.load_state(name)
        with self._borrow() as connection:
            row = connection.execute(
                "SELECT data FROM unbounded_states WHERE session_id = %s AND name = %s",
                (self.session_id, name),
            ).fetchone()
        if row is None:
            return None
        data = row[0]
        if not isinstance(data, dict):
            raise ConfigError(f"{self.where}: state {name!r} is not a JSON object")
        return data

    def save_state(self, name: str, data: dict[str, Any]) -> None:
        """Replace a state document (one statement)."""
        from psycopg.types.json import Jsonb

        _check_state_name(name)
        if self._overlay is not None:
            self._overlay.save_state(name, data)
            return
        self._write(
            "INSERT INTO unbounded_states (session_id, name, data) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id, name) DO UPDATE SET data = EXCLUDED.data, "
            "updated_at = now()",
            (self.session_id, name, Jsonb(data, dumps=_dumps_json)),
        )

    def read_memory(self) -> str | None:
        """The notes, or None."""
        if self._overlay is not None and self._overlay.memory is not None:
            return self._overlay.memory
        with self._borrow() as connection:
            row = connection.execute(
                "SELECT body FROM unbounded_notes WHERE session_id = %s", (self.session_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def write_memory(self, text: str) -> None:
        """Replace the notes (NUL, which PostgreSQL text cannot hold, becomes U+FFFD)."""
        if self._overlay is not None:
            self._overlay.write_memory(text)
            return
        body = repair_surrogates(text).replace("\x00", "\ufffd")
        self._write(
            "INSERT INTO unbounded_notes (session_id, body) VALUES (%s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET body = EXCLUDED.body, updated_at = now()",
            (self.session_id, body),
        )

    def save_tool_output(self, key: str, text: str) -> str | None:
        """Keep a large tool output in the database under `key` (a `side_output_name`);
        None, as no file holds it."""
        check_side_output_name(key)
        if self._overlay is not None:
            return self._overlay.save_tool_output(key, text)
        self._write(
            "INSERT INTO unbounded_tool_outputs (session_id, key, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id, key) DO UPDATE SET body = EXCLUDED.body",
            (self.session_id, key, repair_surrogates(text).encode("utf-8")),
        )
        return None

    def load_tool_output(self, key: str) -> str | None:
        """A kept tool output, or None; one an earlier version kept under its old key is
        returned too (check it against the transcript, as `FolderStore.load_tool_output`
        says)."""
        check_side_output_name(key)
        if self._overlay is not None:
            kept = self._overlay.load_tool_output(key)
            if kept is not None:
                return kept
        legacy = legacy_side_output_name(key)
        keys = [key] if legacy is None else [key, legacy]
        with self._borrow() as connection:
            rows = connection.execute(
                "SELECT key, body FROM unbounded_tool_outputs WHERE session_id = %s "
                "AND key = ANY(%s)",
                (self.session_id, keys),
            ).fetchall()
        bodies = {str(row[0]): bytes(row[1]) for row in rows}
        for wanted in keys:
            if wanted in bodies:
                return bodies[wanted].decode("utf-8", errors="replace")
        return None


def _check_state_name(name: str) -> None:
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"state name {name!r} must be letters, digits, - or _")


def _dumps_json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")
