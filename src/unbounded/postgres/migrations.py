"""The schema as numbered plain SQL files shipped in this package, and the runner applying them.

`migrations/NNNN_name.sql` are applied in order, each once; the versions applied are recorded
in `unbounded_schema_migrations` (version, name, applied_at). `migrate` applies what is
missing in one transaction under a transaction-level advisory lock, so workers starting
together never race; a database newer than this package is refused rather than guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from unbounded.errors import ConfigError

if TYPE_CHECKING:
    import psycopg

VERSION_TABLE = "unbounded_schema_migrations"
MIGRATION_LOCK_KEY = 0x756E_626F_756E_6401
"""`pg_advisory_xact_lock` key taken while migrating ("unbound" + 1)."""
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file: its version, name and text."""

    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """The migrations shipped with this package, oldest first."""
    found: list[Migration] = []
    for item in resources.files("unbounded.postgres").joinpath("migrations").iterdir():
        match = _FILE_NAME.match(item.name)
        if match:
            found.append(Migration(int(match[1]), match[2], item.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ConfigError(f"unbounded's migrations are not numbered 1..n: {versions}")
    return found


LATEST_VERSION = len(available_migrations())
"""The schema version this package writes."""


def schema_version(connection: psycopg.Connection[Any]) -> int:
    """The highest migration applied to the connection's schema (0 when none)."""
    exists = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (VERSION_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return 0
    row = connection.execute(f"SELECT coalesce(max(version), 0) FROM {VERSION_TABLE}").fetchone()
    return int(row[0]) if row else 0


def migrate(connection: psycopg.Connection[Any]) -> list[int]:
    """Apply the missing migrations in one transaction; returns the versions applied. A schema
    that does not exist, or that the role may not create in, is a one-line `ConfigError`."""
    import psycopg

    try:
        return _apply_missing(connection)
    except (psycopg.errors.InvalidSchemaName, psycopg.errors.InsufficientPrivilege) as error:
        row = connection.execute("SHOW search_path").fetchone()
        where = row[0] if row else "?"
        raise ConfigError(
            f"cannot create unbounded's tables ({_first_line(error)}) in search_path {where}: "
            "create the schema first (CREATE SCHEMA ... AUTHORIZATION the owner role) and run "
            "`unbounded migrate` as a role with CREATE on it (docs/storage.md)"
        ) from None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _apply_missing(connection: psycopg.Connection[Any]) -> list[int]:
    applied: list[int] = []
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} ("
            "version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        current = schema_version(connection)
        _refuse_newer(current)
        for migration in available_migrations():
            if migration.version <= current:
                continue
            connection.execute(migration.sql.encode("utf-8"))
            connection.execute(
                f"INSERT INTO {VERSION_TABLE} (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied.append(migration.version)
    return applied


def ensure_schema(connection: psycopg.Connection[Any], *, allow_migrate: bool) -> None:
    """Check the schema is this package's version; migrate it first when allowed."""
    current = schema_version(connection)
    _refuse_newer(current)
    if current == LATEST_VERSION:
        return
    if not allow_migrate:
        raise ConfigError(
            f"the database schema is at version {current}, this unbounded needs "
            f"{LATEST_VERSION}: run `unbounded migrate URL` (needs CREATE on the schema)"
        )
    migrate(connection)


def _refuse_newer(current: int) -> None:
    if current > LATEST_VERSION:
        raise ConfigError(
            f"the database schema is at version {current}, newer than this unbounded knows "
            f"({LATEST_VERSION}): upgrade unbounded"
        )
