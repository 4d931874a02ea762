"""Address parsing: file paths and postgresql:// URLs with a session, in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from unbounded.addresses import (
    DatabaseAddress,
    FileAddress,
    is_database_address,
    parse_address,
    redact_url,
)
from unbounded.errors import ConfigError


def test_paths_stay_paths() -> None:
    for text in ("session.jsonl", "/abs/x.traj", "postgresql.jsonl", "dir/postgresql:/x"):
        assert parse_address(text) == FileAddress(Path(text))
    assert parse_address(Path("a.jsonl")) == FileAddress(Path("a.jsonl"))


def test_the_session_parameter_is_taken_out_and_the_rest_kept() -> None:
    address = parse_address(
        "postgresql://me:secret@db.example:5433/app?sslmode=require&session=abc-1&options=-csearch_path%3Dx"
    )
    assert address == DatabaseAddress(
        "postgresql://me:secret@db.example:5433/app?sslmode=require&options=-csearch_path%3Dx",
        "abc-1",
    )
    assert isinstance(address, DatabaseAddress)
    assert "secret" not in address.display and "me:***@db.example:5433" in address.display
    assert address.display.endswith("session=abc-1")
    assert parse_address("postgres://h/db") == DatabaseAddress("postgres://h/db", None)
    assert is_database_address("POSTGRESQL://h/db") and not is_database_address("file.jsonl")


def test_session_ids_with_reserved_characters_round_trip() -> None:
    address = parse_address("postgresql:///db?session=a%2Fb%20c%26d")
    assert isinstance(address, DatabaseAddress) and address.session == "a/b c&d"
    assert parse_address(address.display) == address


def test_bad_session_parameters_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="once"):
        parse_address("postgresql:///db?session=a&session=b")
    with pytest.raises(ConfigError, match="empty"):
        parse_address("postgresql:///db?session=")
    with pytest.raises(ConfigError, match=r"\?session=ID") as bare:
        DatabaseAddress("postgresql:///db", None).require_session()
    assert "--session" not in str(bare.value)  # most commands have no such option
    with pytest.raises(ConfigError, match="pass --session ID"):  # export has it
        DatabaseAddress("postgresql:///db", None).require_session("--session")


def test_redaction_keeps_everything_but_the_password() -> None:
    assert redact_url("postgresql://u:p@h/db?x=1") == "postgresql://u:***@h/db?x=1"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_a_password_holding_a_question_mark_is_read_as_libpq_reads_it() -> None:
    """libpq takes the user:password up to the first @ before any / (a ? in it is the
    password's), and so does the address: the query starts after it."""
    address = parse_address("postgresql://u:pa?ss@h/db?sslmode=disable&session=abc")
    assert address == DatabaseAddress("postgresql://u:pa?ss@h/db?sslmode=disable", "abc")
    assert "pa?ss" not in address.display
    conninfo = pytest.importorskip("psycopg.conninfo")
    parsed = conninfo.conninfo_to_dict(address.url)
    assert (parsed["password"], parsed["host"], parsed["sslmode"]) == ("pa?ss", "h", "disable")


def test_a_question_mark_libpq_cannot_read_in_a_password_says_to_percent_encode_it() -> None:
    """With a / after it, libpq ends the user part at the / and reads the rest as a query:
    the address is refused with what to do, the password not shown."""
    with pytest.raises(ConfigError, match=r"percent-encode \? in the password as %3F") as bad:
        parse_address("postgresql://u:pa?s/s@h/db?session=abc")
    assert "pa?s" not in str(bad.value) and "s/s" not in str(bad.value)
