"""A PostgreSQL address's password is never shown: in a URL (user:password@ or ?password=),
in libpq's keyword form, or quoted back by libpq in its reason for refusing the address."""

from __future__ import annotations

import pytest

from unbounded.errors import ConfigError
from unbounded.redaction import address_passwords, redact_address_secrets, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pa]ss@h:1/db", "postgresql://u:***@h:1/db"),
        ("postgresql://u:se@cret@h:1/db", "postgresql://u:***@h:1/db"),
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa?ss@h/db?x=1", "postgresql://u:***@h/db?x=1"),
        ("postgresql://u@h/db?password=hunter2", "postgresql://u@h/db?password=***"),
        (
            "postgresql://u@h/db?sslmode=require&Password=x%41y&a=b",
            "postgresql://u@h/db?sslmode=require&Password=***&a=b",
        ),
        ("postgresql://u:p@h/db?password=q", "postgresql://u:***@h/db?password=***"),
        (
            "host=h port=1 dbname=db user=u password=pa://ss",
            "host=h port=1 dbname=db user=u password=***",
        ),
        ("password=hunter2 host=h", "password=*** host=h"),
        ("host=h password = 'a b\\' c' user=u", "host=h password = *** user=u"),
        ("host=h password=a\\ b user=u", "host=h password=*** user=u"),
        ("host=h password='never closed user=u", "host=h password=***"),
        ("host=h user=u", "host=h user=u"),
        ("host=h mypassword=x", "host=h mypassword=x"),
    ],
)
def test_redact_url_hides_every_form_of_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_address_passwords_are_read_as_written_and_as_libpq_reads_them() -> None:
    assert address_passwords("postgresql://u:p%40ss@h/db?password=q%41q") == [
        "p%40ss",
        "q%41q",
        "p@ss",
        "qAq",
    ]
    assert address_passwords("host=h password='a\\'b' user=u") == ["'a\\'b'", "a'b"]
    assert address_passwords("postgresql://u@h/db") == []


def test_a_reason_quoting_a_password_or_a_piece_of_one_is_redacted() -> None:
    assert (
        redact_address_secrets(
            'invalid percent-encoded token: "hunter%2"', "postgresql://u:hunter%2@h/db"
        )
        == 'invalid percent-encoded token: "***"'
    )
    # libpq stops at the first @: the rest of the password is read as the host.
    assert (
        redact_address_secrets(
            "failed to resolve host 'cret@127.0.0.1': unknown",
            "postgresql://u:se@cret@127.0.0.1/db",
        )
        == "failed to resolve host '***': unknown"
    )
    assert (
        redact_address_secrets("bad value seekrit9 here", "host=h password=seekrit9")
        == "bad value *** here"
    )


def test_a_short_password_is_hidden_only_where_quoted_whole() -> None:
    reason = 'connection to server at "h", port 1 failed: "on"'
    assert (
        redact_address_secrets(reason, "postgresql://u:on@h:1/db")
        == 'connection to server at "h", port 1 failed: "***"'
    )


def test_a_store_url_with_a_bracket_or_a_keyword_value_with_a_scheme_is_libpqs_to_judge() -> None:
    pytest.importorskip("psycopg")
    from unbounded.postgres.connect import check_store_url

    check_store_url("postgresql://u:pa[s]s@h/db")
    check_store_url("host=h password=pa://ss")
    with pytest.raises(ConfigError, match=r"not mysql://"):
        check_store_url("mysql://u:pa]ss@h/db")
    # ?session= is found after a password holding a ?, and never shows the password.
    with pytest.raises(ConfigError, match="session= is the commands' form") as refused:
        check_store_url("postgresql://u:pa?ss@h/db?session=s1")
    assert "pa?ss" not in str(refused.value)


def test_a_refused_keyword_address_hides_its_password_in_the_error() -> None:
    pytest.importorskip("psycopg")
    from unbounded.postgres.store import PostgresStore

    with pytest.raises(ConfigError) as refused:
        PostgresStore("host=127.0.0.1 port=1 dbname=db user=u password='hunter 2'", "s")
    assert "cannot connect" in str(refused.value) and "hunter" not in str(refused.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # a user name opening with `@`: the credentials still end at the host's last `@`
        ("postgresql://@u:pw@h/db", "postgresql://@u:***@h/db"),
        # a password ending in `@` (two in a row): both are the password's or the host's
        ("postgresql://u:p@@h/db", "postgresql://u:***@h/db"),
        # no host: an `@` in the database name is the path's, not the password's
        ("postgresql://u:pw@/db@x", "postgresql://u:***@/db@x"),
    ],
)
def test_the_credentials_end_at_the_last_at_sign_before_the_host_ends(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_keyword_quotes_are_taken_off_only_where_they_are() -> None:
    assert address_passwords("host=h password='secret") == ["'secret", "secret"]
    assert address_passwords("host=h password=''") == ["''"]
    # a port is not a password: without credentials nothing is read before the `@`
    assert address_passwords("postgresql://h:5432/db") == []


def test_a_quoted_token_is_hidden_only_when_it_is_a_long_piece_of_a_password() -> None:
    address = "postgresql://u:hunter2x@dbhost/db"
    assert redact_address_secrets('bad token "unte"', address) == 'bad token "***"'
    assert redact_address_secrets('bad token "un"', address) == 'bad token "un"'
    assert (
        redact_address_secrets('could not connect to "dbhost"', address)
        == 'could not connect to "dbhost"'
    )
