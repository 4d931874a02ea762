"""Connections to PostgreSQL: one pool per connection URL and process, errors made readable.

Every store of a process that uses the same URL shares one `psycopg_pool.ConnectionPool`
(created on first use; pools are per process, since a pool does not survive `fork`). A
writing store keeps one pooled connection for its whole life (it holds the session lock), so
the pool's `max_size` bounds how many sessions one process can have open for writing at once.
"""

from __future__ import annotations

import atexit
import itertools
import math
import os
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from unbounded.errors import ConfigError
from unbounded.redaction import redact_address_secrets, redact_url

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 20
"""Default pool bounds: up to 20 connections per URL and process."""
CONNECT_TIMEOUT_SECONDS = 10.0
"""How long to wait for a connection (a new one, or a free one from the pool)."""

_pools: dict[tuple[int, str], ConnectionPool[Any]] = {}
_pools_guard = threading.Lock()
_opening: dict[tuple[int, str], threading.Lock] = {}
"""One lock per address, held by the thread opening its pool (taken under `_pools_guard`)."""


def require_psycopg() -> None:
    """Fail with the install command when the `postgres` extra is missing."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigError(
            "PostgreSQL sessions need the postgres extra: pip install 'unbounded[postgres]'"
        ) from None


def _configure(connection: psycopg.Connection[Any]) -> None:
    connection.autocommit = True


_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def check_store_url(url: str) -> None:
    """Refuse, by what is wrong, an address a store cannot take: another scheme than
    postgresql://, or the commands' `?session=ID` (a store takes the id as an argument).
    Everything else (a password with brackets, a keyword string) libpq judges."""
    if not isinstance(url, str):
        raise ConfigError(f"a PostgreSQL URL is text (postgresql://user@host/db), not {url!r}")
    # A URL only when it starts with a scheme, as libpq reads it: a keyword string
    # ("host=... password=a://b") may hold "://" in a value.
    scheme = _URL_SCHEME.match(url)
    if scheme is None:
        return
    if scheme.group(1) not in ("postgresql", "postgres"):
        raise ConfigError(
            f"{redact_url(url)} is not a PostgreSQL URL: the scheme must be postgresql:// "
            f"(or postgres://), not {scheme.group(1)}://"
        )
    # Split by hand (urlsplit refuses a password with a bracket): the query is after the
    # user:password@ libpq reads (its first @ before any /).
    rest = url[scheme.end() :]
    at, slash = rest.find("@"), rest.find("/")
    if at >= 0 and (slash < 0 or at < slash):
        rest = rest[at + 1 :]
    if "session" in parse_qs(rest.partition("?")[2]):
        raise ConfigError(
            f"{redact_url(url)}: session= is the commands' form of the address; give the store "
            "the URL without it and the session id as its second argument, "
            "PostgresStore(url, session_id)"
        )


def connection_pool(
    url: str,
    *,
    min_size: int = DEFAULT_MIN_SIZE,
    max_size: int | None = None,
    timeout: float = CONNECT_TIMEOUT_SECONDS,
) -> ConnectionPool[Any]:
    """The shared pool of this process for `url`, created (and opened) on first use.

    `max_size` defaults to `DEFAULT_MAX_SIZE`. Later calls return the same pool; one giving a
    larger `max_size` grows it first (a smaller one is ignored: open stores hold connections).
    """
    require_psycopg()
    largest = DEFAULT_MAX_SIZE if max_size is None else max_size
    if min_size < 0 or largest < 1 or min_size > largest:
        raise ConfigError("pool sizes need 0 <= min_size <= max_size and max_size >= 1")
    check_store_url(url)
    key = (os.getpid(), url)
    with _pools_guard:
        pool = _pools.get(key)
        opening = _opening.setdefault(key, threading.Lock())
    if pool is None:
        # Connect (and wait out a server's start-up) outside the guard, so other addresses'
        # pools stay at hand meanwhile; the address's own lock lets one thread open its pool
        # while the others wait for that one.
        with opening:
            with _pools_guard:
                pool = _pools.get(key)
            if pool is None:
                pool = _open_pool(url, min_size, largest, timeout)
                with _pools_guard:
                    _pools[key] = pool
                return pool
    with _pools_guard:
        if max_size is not None and max_size > pool.max_size:
            pool.resize(min_size=pool.min_size, max_size=max_size)
    return pool


def _open_pool(url: str, min_size: int, max_size: int, timeout: float) -> ConnectionPool[Any]:
    """A new pool for `url`, opened, after one connection of our own tells why it cannot be."""
    from psycopg_pool import ConnectionPool

    _try_connecting(url, timeout)
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        configure=_configure,
        check=ConnectionPool.check_connection,
        open=False,
        name=f"unbounded:{redact_url(url)}",
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as error:
        pool.close()
        raise ConfigError(
            f"cannot connect to {redact_url(url)} ({_reason(error, url)}); check the "
            "address, that the server runs and that the role may log in"
        ) from None
    return pool


def close_pool(url: str) -> None:
    """Close this process's pool for `url`, if it has one (its stores must be closed first)."""
    with _pools_guard:
        pool = _pools.pop((os.getpid(), url), None)
    if pool is not None:
        pool.close()


def close_pools() -> None:
    """Close every pool this process opened (done at exit)."""
    with _pools_guard:
        pools = [pool for (pid, _), pool in _pools.items() if pid == os.getpid()]
        _pools.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)


def get_connection(pool: ConnectionPool[Any], url: str) -> psycopg.Connection[Any]:
    """A connection from the pool, or a clear error when none can be had in time: the
    server's reason when it refuses a new one (too many connections for the role), else a
    full pool."""
    from psycopg_pool import PoolTimeout

    try:
        connection: psycopg.Connection[Any] = pool.getconn()
    except PoolTimeout:
        # The pool tells only that it waited: a server refusing its new connections (SQLSTATE
        # 53300, a role's or database's limit) looks the same as a pool whose connections
        # are all in use. One connection of our own tells them apart.
        refused = _refusal(url, pool.timeout)
        if refused is not None:
            raise ConfigError(
                f"{redact_url(url)}: the server refused a new connection ({refused}): close "
                "stores and other sessions holding connections, or raise the server's limit "
                "(a larger pool cannot help)"
            ) from None
        raise ConfigError(
            f"{redact_url(url)}: no database connection free after {pool.timeout:g} s (the pool "
            f"holds at most {pool.max_size}; every open writing store keeps one): close stores "
            "you no longer use or give a larger pool (connection_pool(url, max_size=...))"
        ) from None
    return connection


def _refusal(url: str, timeout: float) -> str | None:
    """Why the server refuses a new connection to `url` now (its reason, passwords hidden),
    or None when it takes one."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=max(1, math.ceil(timeout))).close()
    except psycopg.Error as error:
        return _reason(error, url)
    return None


STARTUP_RETRY_SECONDS = (0.1, 0.2, 0.5, 1.0)
"""The waits between connection attempts to a server that is starting up (the last repeats)."""
_STARTING_UP = (
    "the database system is starting up",
    "the database system is in recovery mode",  # crash recovery: it opens when replay ends
    # A hot standby before it reaches a consistent state (then it takes connections).
    "the database system is not yet accepting connections",
    "das Datenbanksystem startet",  # the server's German catalogue (lc_messages=de_DE)
)
"""Reasons of a 57P03 refusal that passes on its own: asked again until the timeout."""
_NOT_STARTING = (
    "the database system is shutting down",  # 57P03 too, but it will not come back soon
    # 57P03 of a standby with hot_standby=off: refused until it is promoted or reconfigured.
    "the database system is not accepting connections",
    "password authentication failed",
    "Connection refused",
)
"""Reasons known not to be a start-up: no probe is sent for them."""
PING_TIMEOUT_SECONDS = 2
"""How long the start-up probe waits: a server that has just answered answers it at once."""


def _refuses_connections_now(url: str, timeout: int) -> bool:
    """Whether the server at `url` refuses connections for now (libpq's PQping says
    PQPING_REJECT exactly when the server answered SQLSTATE 57P03, in any language)."""
    from psycopg import pq
    from psycopg.conninfo import make_conninfo

    try:
        conninfo = make_conninfo(url, connect_timeout=timeout)
    except Exception:  # libpq cannot read the address: the connect error says so already
        return False
    return bool(pq.PGconn.ping(conninfo.encode()) == pq.Ping.REJECT)


def _starting_up(error: BaseException, url: str, ping: Callable[[str, int], bool]) -> bool:
    """Whether the server refused for a while only: SQLSTATE 57P03 while it starts up (as a
    container started with it does at first), recovers from a crash, or, a hot standby,
    replays up to a consistent state. libpq gives a refused connection no SQLSTATE, and the
    server words it in its own language: a reason known in English (or the German
    catalogue's) tells at once, any other is asked of the server with `ping` (57P03 also
    means shutting down, or a standby without hot standby, which are not retried when their
    English reasons show them)."""
    text = str(error)
    if any(known in text for known in _NOT_STARTING):
        return False
    state = getattr(error, "sqlstate", None)
    if state == "57P03" or any(known in text for known in _STARTING_UP):
        return state in (None, "57P03")
    return state is None and ping(url, PING_TIMEOUT_SECONDS)


def _try_connecting(
    url: str,
    timeout: float,
    *,
    connect: Callable[..., Any] | None = None,
    ping: Callable[[str, int], bool] = _refuses_connections_now,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Connect once before the pool does: a wrong address or a server that is down fails at
    once with the server's reason (the pool would retry for `timeout` seconds, logging each
    attempt, and then name only its own timeout). A server that is starting up is asked
    again until `timeout` has passed. `connect`: psycopg.connect, `ping`: the start-up
    probe (a test's fakes)."""
    import psycopg

    attempt = psycopg.connect if connect is None else connect
    deadline = clock() + timeout
    for tries in itertools.count():
        left = deadline - clock()
        try:
            attempt(url, connect_timeout=max(1, math.ceil(left))).close()
            return
        except psycopg.Error as error:
            wait = STARTUP_RETRY_SECONDS[min(tries, len(STARTUP_RETRY_SECONDS) - 1)]
            starting = _starting_up(error, url, ping)
            if not starting or clock() + wait > deadline:
                still = f", still after {timeout:g} s" if starting else ""
                raise ConfigError(
                    f"cannot connect to {redact_url(url)} ({_reason(error, url)}{still}); "
                    "check the address, that the server runs and that the role may log in"
                ) from None
            sleep(wait)


def _reason(error: BaseException, url: str) -> str:
    """The first line of a connection error, with any password of `url` hidden (libpq quotes
    a value it cannot parse, such as a badly percent-encoded password)."""
    text = str(error).strip().splitlines()
    return redact_address_secrets(text[0], url) if text else type(error).__name__
