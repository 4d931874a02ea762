"""Running unbounded's async pipeline from blocking code, under one event-loop rule.

The rule: a blocking call runs its coroutine to completion on an event loop of its own. With
no loop running in the calling thread, that loop runs in the calling thread. With one running
there (a notebook cell, an async web framework calling sync code, a framework's sync hook
inside an async app), the call runs the coroutine on a worker thread with its own loop, and
blocks the caller until it is done — as any blocking SDK call blocks the loop it is made on.

Why not refuse inside a running loop? The blocking entry points include drop-ins
(`UnboundedAnthropic`, the LangChain middleware's sync hooks) whose originals work there; a
refusal would break code that works without unbounded, while running elsewhere only makes
calls work that used to fail. The async twin (`await session.prepare()`, `await
provider.create()`, `await runner.arun_pre_compact()`, `await arun_agent()`) stays the better
choice inside a loop: it does not block it.

What the coroutine awaits must not be bound to the caller's loop (a task or future started
there): that loop is blocked until the call returns, so such an await would never finish.
Provider clients are safe: an SDK client built on one loop is replaced by a fresh copy on
another (see `unbounded.providers.anthropic`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from unbounded.errors import ConfigError

if TYPE_CHECKING:
    from unbounded.policy import Policy

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BlockingDriver:
    """A blocking entry point that drives a session: its name, and its async twin (what the
    refusal of `Policy.background_summary` tells the caller to use instead)."""

    entry_point: str
    instead: str

    def refuse_background_summary(self, policy: Policy) -> None:
        """ConfigError when `policy` runs `Policy.background_summary`: this entry point runs its
        event loop only inside each blocking call, so the summary's task would be frozen
        between turns and the turn at the threshold would wait for it anyway."""
        if policy.background_summary:
            raise ConfigError(
                f"Policy.background_summary needs an event loop running between turns; "
                f"{self.entry_point} runs its loop only inside each blocking call, so the "
                f"summary would never be written off the turn's path: {self.instead}, or set "
                f"background_summary=False"
            )


class BlockingHold:
    """One blocking entry point's hold on a session (`Session.drive_blocking` returns it):
    released by identity, at most once, so two holds of the same driver stay apart."""

    __slots__ = ("__weakref__", "driver")

    def __init__(self, driver: BlockingDriver) -> None:
        self.driver = driver


SYNC_SESSION = BlockingDriver("a SyncSession", "use the async Session")
"""`SyncSession`'s name and advice in the refusal."""


def loop_running_here() -> bool:
    """Whether an event loop is running in the calling thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(awaitable: Awaitable[T]) -> T:
    """Run a coroutine (or any awaitable) to completion from blocking code (see the rule)."""
    coroutine = _as_coroutine(awaitable)
    if not loop_running_here():
        return asyncio.run(coroutine)
    return _on_worker_thread(asyncio.run, coroutine)


class BlockingRunner:
    """`run_blocking` for a blocking client called again and again: one event loop kept for
    all its calls (starting a loop per call costs more than a turn's whole pipeline), closed
    by `close()` or when the runner is collected. The same rule: the loop runs in the calling
    thread, or on a worker thread when a loop already runs in the calling thread. Successive
    calls share the loop either way, so an async generator can be stepped call by call."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine (or any awaitable) to completion on the runner's loop."""
        coroutine = _as_coroutine(awaitable)
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.new_event_loop()
            weakref.finalize(self, _close_collected_loop, loop)
        if not loop_running_here():
            return loop.run_until_complete(coroutine)
        if loop.is_running():  # called from a coroutine on this very loop: it cannot nest
            return run_blocking(coroutine)
        return _on_worker_thread(loop.run_until_complete, coroutine)

    def close(self) -> None:
        """Finish what is left on the loop (tasks cancelled) and close it."""
        if self._loop is not None:
            _close_loop(self._loop)
            self._loop = None

    def __enter__(self) -> BlockingRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _on_worker_thread(
    function: Callable[[Coroutine[Any, Any, T]], T], coroutine: Coroutine[Any, Any, T]
) -> T:
    """`function(coroutine)` on a new thread, in a copy of the caller's context variables."""
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="unbounded-blocking") as pool:
        return pool.submit(context.run, function, coroutine).result()


def _as_coroutine(awaitable: Awaitable[T]) -> Coroutine[Any, Any, T]:
    if asyncio.iscoroutine(awaitable):
        return awaitable
    return _await(awaitable)


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _close_collected_loop(loop: asyncio.AbstractEventLoop) -> None:
    """`_close_loop` for a runner the garbage collector took: a collection can run at any
    point, even inside a thread pool's submit holding its lock, so the closing is handed to
    a thread of its own and never waited for here when a loop runs in this thread."""
    if loop.is_closed():
        return
    if loop_running_here():
        threading.Thread(target=_close_loop, args=(loop,), daemon=True).start()
        return
    _close_loop(loop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the loop's tasks, let them finish, close it (by the rule, on a worker thread
    when another loop runs in this thread)."""
    if loop.is_closed():
        return
    if loop_running_here():
        context = contextvars.copy_context()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(context.run, _close_loop, loop).result()
        return
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


__all__ = [
    "SYNC_SESSION",
    "BlockingDriver",
    "BlockingHold",
    "BlockingRunner",
    "loop_running_here",
    "run_blocking",
]
