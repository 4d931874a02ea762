"""Review of the fixes merged in session 16 (f0a5812..main): reproducers, each fixed since.

Each test states what should happen. The store
tests that need no server use a closed port (127.0.0.1:1): the address is judged, or the
connection refused at once, before any pool is opened.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from unbounded.errors import ConfigError
from unbounded.session import Session, SessionConfig


def test_add_user_takes_blocks_given_by_a_generator_as_before() -> None:
    session = Session(SessionConfig(model="claude-sonnet-4-5"))
    # Taken and sent before check_user_content (f0a5812); add_user now takes any iterable.
    blocks = (block for block in [{"type": "text", "text": "from a generator"}])
    session.add_user(blocks)
    request = asyncio.run(session.prepare())
    assert "from a generator" in json.dumps(request["messages"])


def _store_error(url: str) -> BaseException:
    """What opening a store of `url` raises (each url here cannot connect)."""
    pytest.importorskip("psycopg")
    from unbounded.postgres.store import PostgresStore

    with pytest.raises(Exception) as raised:
        PostgresStore(url, "s")
    return raised.value


def test_a_password_with_a_bracket_is_passed_to_libpq() -> None:
    error = _store_error("postgresql://u:pa]ss@127.0.0.1:1/db")
    assert isinstance(error, ConfigError) and "cannot connect" in str(error)


def test_a_keyword_address_with_a_url_like_value_is_passed_to_libpq() -> None:
    error = _store_error("host=127.0.0.1 port=1 dbname=db user=u password=pa://ss")
    assert isinstance(error, ConfigError) and "cannot connect" in str(error)


def test_a_badly_encoded_password_is_never_shown() -> None:
    error = _store_error("postgresql://u:hunter%2@127.0.0.1:1/db")
    assert isinstance(error, ConfigError)
    assert "hunter" not in str(error)


def test_a_keyword_address_password_is_never_shown() -> None:
    error = _store_error("host=127.0.0.1 port=1 dbname=db user=u password=hunter2")
    assert isinstance(error, ConfigError)
    assert "hunter2" not in str(error)


def test_a_password_given_as_a_query_parameter_is_never_shown() -> None:
    error = _store_error("postgresql://u@127.0.0.1:1/db?password=hunter2")
    assert isinstance(error, ConfigError)
    assert "hunter2" not in str(error)


def test_a_bedrock_claude_id_with_a_window_is_planned_as_claude() -> None:
    session = Session(
        SessionConfig(model="anthropic.claude-sonnet-4-5-20250929-v1:0", context_window=200_000)
    )
    assert session.model_info.provider == "anthropic"
    assert session.model_info.input_per_mtok > 0


def test_middleware_plans_a_prefixed_unknown_claude_name_as_the_bare_name() -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations.langchain import UnboundedMiddleware

    bare = UnboundedMiddleware(model="claude-sonnet-9-9", context_window=200_000).model_info
    prefixed = UnboundedMiddleware(
        model="anthropic:claude-sonnet-9-9", context_window=200_000
    ).model_info
    assert (prefixed.provider, prefixed.input_per_mtok, prefixed.max_output) == (
        bare.provider,
        bare.input_per_mtok,
        bare.max_output,
    )


def test_a_connection_the_server_refuses_is_not_reported_as_a_full_pool(
    postgres_url: str,
) -> None:
    import uuid

    import psycopg

    from unbounded.postgres.connect import close_pool, connection_pool
    from unbounded.postgres.store import PostgresStore

    PostgresStore(postgres_url, "tables", create=True).close()
    role = f"r16_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")
        admin.execute(f"GRANT ALL ON SCHEMA {schema} TO {role}")
        admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}")
        admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    url = postgres_url.replace("postgres:@", f"{role}:@", 1)
    try:
        connection_pool(url, max_size=3, timeout=1)
        # Two stores hold the two connections the role may have (a limit of 2, not 1, so
        # the check connection's backend still exiting cannot refuse the pool's first).
        with (
            PostgresStore(url, "first", create=True),
            PostgresStore(url, "second", create=True),
            pytest.raises(ConfigError) as refused,
        ):
            PostgresStore(url, "third", create=True)
        assert "too many connections" in str(refused.value)
    finally:
        close_pool(url)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")
