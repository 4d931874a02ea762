"""A pool with no free connection says so (and how to grow it) only when the server would
take another connection; a server refusing one is reported with its reason."""

from __future__ import annotations

import pytest

from unbounded.errors import ConfigError


def test_a_full_pool_is_reported_as_full_when_the_server_takes_more(postgres_url: str) -> None:
    from unbounded.postgres.connect import close_pool, connection_pool
    from unbounded.postgres.store import PostgresStore

    connection_pool(postgres_url, max_size=1, timeout=0.5)
    try:
        with PostgresStore(postgres_url, "first", create=True), pytest.raises(ConfigError) as full:
            PostgresStore(postgres_url, "second", create=True)
        message = str(full.value)
        assert "no database connection free" in message
        assert "connection_pool(url, max_size=...)" in message
        assert "refused" not in message
    finally:
        close_pool(postgres_url)
