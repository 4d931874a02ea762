"""What the integrations share: blocking runs of the async pipeline, reactive compaction,
session coercion and tool registration for microcompaction."""

from __future__ import annotations

import asyncio
import concurrent.futures
import weakref
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from unbounded.errors import ConfigError
from unbounded.events import ReactiveCompaction, emit
from unbounded.session import Session, SyncSession

T = TypeVar("T")


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from blocking code.

    Without a running event loop in this thread it gets its own (`asyncio.run`); inside one
    (a notebook, an async web framework calling sync code) it runs on a worker thread with a
    loop of its own, so blocking APIs keep working there.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class BlockingRunner:
    """`run_blocking` for a blocking client called turn after turn: one event loop kept for
    all its calls (starting a loop per call costs more than a turn's whole pipeline), closed
    by `close()` or when the runner is collected. Inside a running loop it does what
    `run_blocking` does."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to completion from blocking code."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return run_blocking(coroutine)
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.new_event_loop()
            weakref.finalize(self, _close_loop, loop)
        return loop.run_until_complete(coroutine)

    def close(self) -> None:
        """Finish what is left on the loop (tasks cancelled) and close it."""
        if self._loop is not None:
            _close_loop(self._loop)
            self._loop = None


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    if loop.is_closed():
        return
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()


def as_session(value: Session | SyncSession) -> Session:
    """The async `Session` behind a `Session` or a `SyncSession`."""
    if isinstance(value, SyncSession):
        return value.session
    if isinstance(value, Session):
        return value
    raise ConfigError(f"expected a Session or a SyncSession, not {type(value).__name__}")


async def compact_after_prompt_too_long(session: Session, error: BaseException) -> bool:
    """One reactive compaction after a prompt-too-long answer, as `Session.call` does.

    True when the conversation was compacted (retry the call once); False when compaction is
    off or failed (give the error to the caller).
    """
    emit(session.events_sink(), ReactiveCompaction(str(error)))
    if not session.policy.compact_enabled:
        return False
    return await session.auto_compact() is not None


def register_compactable_tools(session: Session, names: Iterable[str]) -> None:
    """Let microcompaction clear the results of these tools (their output can be reproduced)."""
    registry = session.micro.tools
    missing = [name for name in dict.fromkeys(names) if not registry.is_compactable(name)]
    if not missing:
        return
    session.micro.ledger.tools = registry.with_tools(*missing)
    session.micro.ledger.reset()
