"""The connection tried before a pool opens (postgres/connect.py `_try_connecting`): a server
that is starting up (SQLSTATE 57P03) is asked again within the pool's timeout; any other
refusal fails at once with its reason."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.errors import ConfigError

psycopg = pytest.importorskip("psycopg")

URL = "postgresql://app@db:5432/app"
STARTING = 'connection to server at "db" (172.18.0.2), port 5432 failed: FATAL:  the database system is starting up'
NOT_YET = (
    'connection to server at "db", port 5432 failed: FATAL:  the database system is not yet '
    "accepting connections"
)
PASSWORD = 'connection to server at "db", port 5432 failed: FATAL:  password authentication failed for user "app"'
CLOSED = 'connection to server at "db", port 5432 failed: Connection refused'
SHUTTING = (
    'connection to server at "db", port 5432 failed: FATAL:  the database system is shutting down'
)
# The server's other 57P03 refusals (PostgreSQL's backend start-up): crash recovery, and a hot
# standby replaying WAL up to a consistent state, both pass; a standby with hot_standby=off
# refuses until it is promoted or reconfigured, which no retry waits out.
RECOVERY = (
    'connection to server at "db", port 5432 failed: FATAL:  the database system is in '
    "recovery mode"
)
NOT_CONSISTENT = (
    'connection to server on socket "/run/postgresql/.s.PGSQL.5432" failed: FATAL:  the '
    "database system is not yet accepting connections\nDETAIL:  Consistent recovery state has "
    "not been yet reached."
)
NO_HOT_STANDBY = (
    'connection to server at "db", port 5432 failed: FATAL:  the database system is not '
    "accepting connections\nDETAIL:  Hot standby mode is disabled."
)


class FakeServer:
    """psycopg.connect's stand-in: refuses with `errors` in turn, then connects."""

    def __init__(self, *errors: str) -> None:
        self.errors = list(errors)
        self.now = 0.0
        self.calls: list[tuple[float, int]] = []

    def connect(self, url: str, *, connect_timeout: int) -> Any:
        self.calls.append((self.now, connect_timeout))
        if self.errors:
            raise psycopg.OperationalError(self.errors.pop(0))
        return self

    def close(self) -> None:
        """The connection given back."""

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def try_connecting(
    server: FakeServer,
    timeout: float = 10.0,
    probes: list[str] | None = None,
    *,
    refusing: bool = False,
) -> None:
    """Connect through `server`; a probe (PQping) is recorded in `probes` and answers
    `refusing` (a real server answers "rejected" for every 57P03)."""
    from unbounded.postgres.connect import _try_connecting

    def ping(url: str, timeout: int) -> bool:
        (probes if probes is not None else []).append(url)
        return refusing

    _try_connecting(
        URL, timeout, connect=server.connect, ping=ping, clock=server.clock, sleep=server.sleep
    )


def test_a_server_starting_up_is_asked_again_until_it_takes_the_connection() -> None:
    server = FakeServer(STARTING, STARTING, NOT_YET)
    try_connecting(server)
    assert len(server.calls) == 4
    assert server.now == pytest.approx(0.1 + 0.2 + 0.5)


@pytest.mark.parametrize("reason", [RECOVERY, NOT_CONSISTENT])
def test_a_server_in_recovery_is_asked_again_without_a_probe(reason: str) -> None:
    server, probes = FakeServer(reason, reason, STARTING), []
    try_connecting(server, probes=probes)
    assert len(server.calls) == 4 and probes == []
    assert server.now == pytest.approx(0.1 + 0.2 + 0.5)


def test_a_server_in_recovery_past_the_timeout_fails_saying_how_long() -> None:
    server = FakeServer(*[RECOVERY] * 100)
    with pytest.raises(ConfigError, match=r"in recovery mode, still after 3 s\)"):
        try_connecting(server, timeout=3.0)
    assert len(server.calls) == 6


@pytest.mark.parametrize("reason", [PASSWORD, CLOSED, SHUTTING, NO_HOT_STANDBY])
def test_any_other_refusal_fails_at_once(reason: str) -> None:
    server, probes = FakeServer(reason, STARTING), []
    with pytest.raises(ConfigError, match="cannot connect to") as refused:
        try_connecting(server, probes=probes, refusing=True)
    assert len(server.calls) == 1 and server.now == 0 and probes == []
    first_line = reason.splitlines()[0]
    assert first_line.split("FATAL:  ")[-1].split("failed: ")[-1] in str(refused.value)


def test_a_server_still_starting_after_the_timeout_fails_saying_so() -> None:
    server = FakeServer(*[STARTING] * 100)
    with pytest.raises(ConfigError, match=r"starting up, still after 3 s\)") as late:
        try_connecting(server, timeout=3.0)
    assert server.now <= 3.0 and len(server.calls) == 6  # 0, .1, .3, .8, 1.8, 2.8
    assert "app@db" in str(late.value)
    # Each attempt waits no longer than the time left (at least libpq's 1 s).
    assert [timeout for _, timeout in server.calls] == [3, 3, 3, 3, 2, 1]
