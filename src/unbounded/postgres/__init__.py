"""Sessions kept in PostgreSQL, for many workers sharing one database (`unbounded[postgres]`).

`PostgresStore` implements `SessionStore`; `migrate` creates and upgrades the schema;
`list_sessions`, `export_session` and `import_session` move sessions between a JSONL file
and the database. See docs/storage.md.
"""

from __future__ import annotations

from unbounded.postgres.connect import connection_pool, require_psycopg
from unbounded.postgres.migrations import LATEST_VERSION, migrate, schema_version
from unbounded.postgres.store import PostgresStore
from unbounded.postgres.transfer import (
    SessionInfo,
    export_session,
    import_session,
    list_sessions,
)

__all__ = [
    "LATEST_VERSION",
    "PostgresStore",
    "SessionInfo",
    "connection_pool",
    "export_session",
    "import_session",
    "list_sessions",
    "migrate",
    "require_psycopg",
    "schema_version",
]
