"""Opening a process's pool for an address (postgres/connect.py `connection_pool`): waiting for
one server to start up holds up no other address's pool, and threads asking for the same
address at once still share one pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.postgres


def _variant(url: str, name: str) -> str:
    """Another URL for the same server (its own pool): a distinct application_name."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


@pytest.fixture
def urls(postgres_server: str) -> Iterator[tuple[str, str]]:
    from unbounded.postgres.connect import close_pool

    slow, fast = _variant(postgres_server, "slow"), _variant(postgres_server, "fast")
    yield slow, fast
    close_pool(slow)
    close_pool(fast)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run `work` in a started thread; its result (or error) lands in the returned list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as error:  # the test reads it
            out.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_server_starting_up_holds_up_no_other_address(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from unbounded.postgres import connect

    slow, fast = urls
    original = connect._try_connecting
    waiting, go_on = threading.Event(), threading.Event()

    def starting_up_for_slow(url: str, timeout: float) -> None:
        if url == slow:  # this server "starts up" until the test lets it go
            waiting.set()
            go_on.wait(20)
        original(url, timeout)

    monkeypatch.setattr(connect, "_try_connecting", starting_up_for_slow)
    slow_thread, slow_pool = _in_thread(lambda: connect.connection_pool(slow))
    try:
        assert waiting.wait(10)
        fast_thread, fast_pool = _in_thread(lambda: connect.connection_pool(fast))
        fast_thread.join(8)
        assert not fast_thread.is_alive(), "the other address waited for the starting server"
        assert fast_pool and fast_pool[0] is connect.connection_pool(fast)
    finally:
        go_on.set()
        slow_thread.join(20)
    assert slow_pool and slow_pool[0] is connect.connection_pool(slow)


def test_threads_opening_the_same_address_at_once_share_one_pool(
    urls: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from unbounded.postgres import connect

    slow, _ = urls
    original = connect._try_connecting
    attempts: list[str] = []

    def slowly(url: str, timeout: float) -> None:
        attempts.append(url)
        time.sleep(0.3)  # both threads are past the pool lookup before either pool exists
        original(url, timeout)

    monkeypatch.setattr(connect, "_try_connecting", slowly)
    start = threading.Barrier(2)

    def open_pool() -> Any:
        start.wait(10)
        return connect.connection_pool(slow)

    threads = [_in_thread(open_pool) for _ in range(2)]
    for thread, _ in threads:
        thread.join(30)
    pools = [out[0] for _, out in threads]
    assert attempts == [slow]
    assert pools[0] is pools[1] is connect.connection_pool(slow)
