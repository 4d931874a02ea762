"""The rules of `unbounded.postgres.store`, each held by a test that fails when the rule is
flipped, dropped or off by one (the mutation check runs these with the store's other tests)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from unbounded.errors import ConfigError, StoreDamagedError, TranscriptError
from unbounded.model.entries import Entry
from unbounded.side_outputs import side_output_name

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(postgres_url: str) -> Any:
    from unbounded import postgres

    return postgres


def test_session_ids_and_lock_keys() -> None:
    from unbounded.postgres.store import (
        MAX_SESSION_ID,
        check_session_id,
        jsonb_can_hold,
        record_line,
        session_lock_key,
    )

    assert check_session_id("s" * MAX_SESSION_ID) == "s" * MAX_SESSION_ID and check_session_id("a") == "a"
    for bad in ("", "s" * (MAX_SESSION_ID + 1), 5, None):
        with pytest.raises(ConfigError, match="a session id is 1 to 512 characters"):
            check_session_id(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot contain NUL"):
        check_session_id("a\x00b")
    key = session_lock_key("s")
    assert key == session_lock_key("s") != session_lock_key("t") and -(2**63) <= key < 2**63
    assert any(session_lock_key(f"s{n}") < 0 for n in range(20))  # signed, as bigint
    assert jsonb_can_hold('{"a": "x"}') and not jsonb_can_hold('{"a": "\\u0000"}')
    assert record_line(Entry.user("hi")).startswith('{"') and not record_line(Entry.user("hi")).endswith("\n")


def test_wait_values_are_checked_before_connecting(postgres_url: str, pg: Any) -> None:
    for wait in (-0.001, math.nan):
        with pytest.raises(ConfigError, match="wait must be a number of seconds >= 0"):
            pg.PostgresStore(postgres_url, "w", wait=wait)
    with pg.PostgresStore(postgres_url, "w", wait=0) as store:
        assert store.locked and not store.read_only and store.created


def test_a_store_opened_on_an_existing_session_did_not_create_it(postgres_url: str, pg: Any) -> None:
    pg.PostgresStore(postgres_url, "there").close()
    with pg.PostgresStore(postgres_url, "there") as again:
        assert again.created is False
    reader = pg.PostgresStore(postgres_url, "there", lock=False)
    assert reader.created is False and reader.read_only and not reader.locked


def test_a_read_only_store_keeps_writes_in_memory(postgres_url: str, pg: Any) -> None:
    with pg.PostgresStore(postgres_url, "ro") as writer:
        writer.append([Entry.user("stored")])
        writer.save_state("session", {"a": 1})
        writer.write_memory("notes on disk")
        writer.save_tool_output(side_output_name("t"), "kept in the database")
    reader = pg.PostgresStore(postgres_url, "ro", lock=False)
    assert reader.transcript_path is None and reader.memory_path is None
    assert reader.read_memory() == "notes on disk" and reader.load_state("session") == {"a": 1}
    reader.append([Entry.user("only in memory")])
    reader.save_state("session", {"a": 2})
    reader.write_memory("notes in memory")
    assert reader.save_tool_output(side_output_name("t"), "memory copy") is None
    assert [e.content for e in reader.load().entries] == ["stored", "only in memory"]
    assert reader.load_state("session") == {"a": 2} and reader.load_state("other") is None
    assert reader.read_memory() == "notes in memory"
    assert reader.load_tool_output(side_output_name("t")) == "memory copy"
    assert reader.load_tool_output(side_output_name("u")) is None
    reader.close()
    with pg.PostgresStore(postgres_url, "ro") as again:  # nothing the reader did reached the database
        assert [e.content for e in again.load().entries] == ["stored"] and again.read_memory() == "notes on disk"
        assert again.load_tool_output(side_output_name("t")) == "kept in the database"


def test_records_keep_their_order_and_numbers(postgres_url: str, pg: Any) -> None:
    from unbounded.postgres.store import LOAD_BATCH_ROWS

    with pg.PostgresStore(postgres_url, "many") as store:
        store.append([])
        store.append([Entry.user(f"m{n}") for n in range(LOAD_BATCH_ROWS + 3)])
        store.append([Entry.user("last \x00 with NUL")])
        loaded = store.load()
    assert [e.content for e in loaded.entries][: LOAD_BATCH_ROWS + 3] == [f"m{n}" for n in range(LOAD_BATCH_ROWS + 3)]
    assert loaded.entries[-1].content == "last \x00 with NUL" and [e.line for e in loaded.entries][:2] == [1, 2]
    assert loaded.meta["session"] == "many" and loaded.format == "claude-code"
    sessions = {s.session_id: s for s in pg.list_sessions(postgres_url)}
    assert sessions["many"].records == LOAD_BATCH_ROWS + 4


def test_notes_nul_and_state_names(postgres_url: str, pg: Any) -> None:
    with pg.PostgresStore(postgres_url, "notes") as store:
        assert store.read_memory() is None
        store.write_memory("a\x00b")
        assert store.read_memory() == "a\ufffdb"
        for bad in ("a b", "", "x/y"):
            with pytest.raises(ConfigError, match="must be letters, digits, - or _"):
                store.save_state(bad, {})
            with pytest.raises(ConfigError, match="must be letters, digits, - or _"):
                store.load_state(bad)
        store.save_state("ok-name_1", {"x": [1, "é"]})
        assert store.load_state("ok-name_1") == {"x": [1, "é"]}


def test_a_damaged_record_is_a_transcript_error(postgres_url: str, pg: Any) -> None:
    import psycopg

    with pg.PostgresStore(postgres_url, "bad") as store:
        store.append([Entry.user("fine")])
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE unbounded_records SET line = '{broken' WHERE session_id = 'bad'")
    with pytest.raises(TranscriptError, match="record 1 is not JSON"):
        pg.PostgresStore(postgres_url, "bad", lock=False).load()


def test_a_deleted_session_row_stops_appends(postgres_url: str, pg: Any) -> None:
    import psycopg

    store = pg.PostgresStore(postgres_url, "vanish")
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM unbounded_sessions WHERE session_id = 'vanish'")
    with pytest.raises(StoreDamagedError, match="the session row is missing"):
        store.append([Entry.user("x"), Entry.user("y")])
    store.close()
    store.close()  # twice is fine
