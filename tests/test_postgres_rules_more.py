"""More rules of `unbounded.postgres.store` the mutation check found unheld: waiting in the
server for a lock (and finding the session deleted meanwhile), `create=False` on a session that
exists, closing lets go of the lock, the byte count, a state that is not an object, and outputs
kept under the names earlier versions gave them."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from unbounded.errors import ConfigError, SessionLockedError, StoreDamagedError
from unbounded.model.entries import Entry
from unbounded.side_outputs import legacy_side_output_name, side_output_name

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(postgres_url: str) -> Any:
    from unbounded import postgres

    return postgres


def _queued(url: str, waiter: threading.Thread) -> bool:
    """Whether a session lock is waited for in the server (False once the waiter gave up)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        deadline = time.monotonic() + 60
        while waiter.is_alive() and time.monotonic() < deadline:
            row = connection.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
            if row is not None and row[0] > 0:
                return True
            time.sleep(0.005)
    return False


def _open_in_thread(pg: Any, url: str, session: str, **options: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            pg.PostgresStore(url, session, **options).close()
            outcome["result"] = "opened"
        except Exception as error:  # the test reads it
            outcome["result"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_waiter_waits_in_the_server_and_finds_a_session_deleted_meanwhile_gone(postgres_url: str, pg: Any) -> None:
    import psycopg

    holder = pg.PostgresStore(postgres_url, "contested")
    waiter, outcome = _open_in_thread(pg, postgres_url, "contested", wait=math.inf, create=False)
    assert _queued(postgres_url, waiter)  # wait=inf blocks in the server, no timeout
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM unbounded_sessions WHERE session_id = 'contested'")
    holder.close()
    waiter.join(60)
    assert isinstance(outcome["result"], ConfigError) and "no such session" in str(outcome["result"])


def test_a_finite_wait_waits_in_the_server(postgres_url: str, pg: Any) -> None:
    holder = pg.PostgresStore(postgres_url, "short-wait")
    # Any finite wait above 0 (not just a long one) waits in the server; 30 s, not 1, so a
    # loaded machine cannot let it run out before the queue is looked at.
    waiter, _ = _open_in_thread(pg, postgres_url, "short-wait", wait=30)
    queued = _queued(postgres_url, waiter)
    holder.close()
    waiter.join(60)
    assert queued  # a wait above 0 is a wait, not one try


def test_a_wait_under_a_second_is_waited_out_not_tried_once(postgres_url: str, pg: Any) -> None:
    holder = pg.PostgresStore(postgres_url, "half-second")
    started = time.monotonic()
    waiter, outcome = _open_in_thread(pg, postgres_url, "half-second", wait=0.5)
    waiter.join(60)
    waited = time.monotonic() - started
    holder.close()
    assert isinstance(outcome["result"], SessionLockedError)
    # One try answers at once; a load can only make the wait longer, never shorter.
    assert waited >= 0.5


def test_create_false_opens_a_session_that_exists_and_close_lets_go(postgres_url: str, pg: Any) -> None:
    pg.PostgresStore(postgres_url, "exists").close()
    store = pg.PostgresStore(postgres_url, "exists", create=False, wait=0)
    assert store.locked and store.created is False
    store.close()
    assert not store.locked
    again = pg.PostgresStore(postgres_url, "exists", wait=0)  # the lock was let go
    again.close()
    with pytest.raises(ConfigError, match="no such session"):
        pg.PostgresStore(postgres_url, "never-made", create=False)


def test_closing_gives_the_connection_back_to_the_pool(postgres_url: str, pg: Any) -> None:
    from psycopg_pool import ConnectionPool

    from unbounded.postgres.connect import _configure

    with ConnectionPool(postgres_url, min_size=1, max_size=1, timeout=5, configure=_configure) as pool:
        store = pg.PostgresStore(postgres_url, "pooled", pool=pool)
        store.close()
        connection = pool.getconn(timeout=5)  # the only connection is free again
        pool.putconn(connection)


def test_an_empty_append_writes_nothing_even_on_a_closed_store(postgres_url: str, pg: Any) -> None:
    store = pg.PostgresStore(postgres_url, "empty-append")
    store.close()
    store.append([])
    with pytest.raises(StoreDamagedError, match="the store was closed"):
        store.append([Entry.user("x")])


def test_the_session_counts_the_bytes_of_its_lines(postgres_url: str, pg: Any) -> None:
    from unbounded.postgres.store import record_line

    entries = [Entry.user("héllo"), Entry.user("two")]
    with pg.PostgresStore(postgres_url, "sized") as store:
        store.append(entries)
    info = {s.session_id: s for s in pg.list_sessions(postgres_url)}["sized"]
    assert info.records == 2 and info.bytes == sum(len(record_line(e).encode("utf-8")) + 1 for e in entries)


def test_a_state_that_is_not_an_object_is_refused(postgres_url: str, pg: Any) -> None:
    import psycopg

    pg.PostgresStore(postgres_url, "odd-state").close()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("INSERT INTO unbounded_states (session_id, name, data) VALUES ('odd-state', 'session', '[1, 2]'::jsonb)")
    with pytest.raises(ConfigError, match="state 'session' is not a JSON object"):
        pg.PostgresStore(postgres_url, "odd-state", lock=False).load_state("session")


def test_outputs_kept_under_an_earlier_name_are_found(postgres_url: str, pg: Any) -> None:
    import psycopg

    key = side_output_name("call.1")
    legacy = legacy_side_output_name(key)
    assert legacy == "call_1"
    pg.PostgresStore(postgres_url, "legacy").close()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("INSERT INTO unbounded_tool_outputs (session_id, key, body) VALUES ('legacy', %s, %s)", (legacy, b"old output"))
    reader = pg.PostgresStore(postgres_url, "legacy", lock=False)
    assert reader.load_tool_output(key) == "old output"
    with pg.PostgresStore(postgres_url, "legacy") as writer:
        writer.save_tool_output(key, "new output")
        assert writer.load_tool_output(key) == "new output"  # the new name first
        hashed = side_output_name("x" * 400)
        assert legacy_side_output_name(hashed) is None
        writer.save_tool_output(hashed, "long id")
        assert writer.load_tool_output(hashed) == "long id"


class _CanceledOnce:
    """The store's lock connection, whose next query is canceled (a statement timeout, or
    pg_cancel_backend): an OperationalError that leaves the connection open and working."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.cancel_next = True

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        import psycopg

        if self.cancel_next:
            self.cancel_next = False
            raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        return self.connection.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


def test_after_a_failed_read_on_the_lock_connection_nothing_is_written_even_if_it_still_works(postgres_url: str, pg: Any) -> None:
    store = pg.PostgresStore(postgres_url, "canceled")
    store.append([Entry.user("kept")])
    held = store._connection
    store._connection = _CanceledOnce(held)
    with pytest.raises(StoreDamagedError, match="lock is lost"):
        store.load_state("session")
    with pytest.raises(StoreDamagedError, match="lock is lost"):
        store.append([Entry.user("not written")])  # the connection would take it
    with pytest.raises(StoreDamagedError, match="lock is lost"):
        store.save_state("session", {"n": 1})
    store._connection = held
    store.close()
    with pg.PostgresStore(postgres_url, "canceled", wait=2) as again:
        assert [entry.content for entry in again.load().entries] == ["kept"]
        assert again.load_state("session") is None
