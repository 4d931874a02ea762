"""Child processes of the reliability tests.

`hold_lock(folder, conn)` holds a session folder's lock until the parent says "release" (or
is killed): the second process of the concurrency tests.

The child of the crash-consistency test drives a folder-backed Session until it is killed.

`run(folder, round_no, mode, target, conn)` opens the session (repairing what the last
crash left), then loops: add a user message or tool results, prepare (auto-compaction with
the extractive summarizer), record a scripted answer. It tells the parent, through `conn`:

- ("opened", warnings) once the session is open;
- ("step", n, what) before each step, so the parent can kill it at a chosen step;
- ("acked", uuid) after each append returned (the record is durable from then on);
- ("torn", payload_prefix) in mode "torn": the `target`-th append (or, with mode
  "torn-batch", the first compaction batch from that append on) writes only part of its
  bytes, fsyncs them, and waits to be killed: a crash in the middle of a write.

The parent kills it with SIGKILL; it never exits on its own before `MAX_STEPS`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from multiprocessing.connection import Connection
from pathlib import Path

from unbounded import storage
from unbounded.events import CompactionFinished, CompactionStarted, Event
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

MAX_STEPS = 100_000
CONFIG = SessionConfig(
    model="claude-sonnet-5-5",
    system="You are a crash-test agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=40_000,
    validate_requests=True,
)
FILLER = "result line\n" * 350


def _tear_appends(conn: Connection, mode: str, target: int) -> None:
    """Make one append write only part of its payload, then wait for the kill."""
    real = storage.append_private
    count = [0]

    def torn_append(path: str | Path, payload: bytes, *, fsync: bool = True) -> None:
        count[0] += 1
        is_batch = payload.count(b"\n") > 1
        if count[0] >= target and (mode == "torn" or is_batch):
            cut = random.Random(target * 7919 + count[0]).randrange(1, len(payload))
            descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(descriptor, payload[:cut])
            os.fsync(descriptor)
            conn.send(("torn", payload[:cut]))
            while True:
                time.sleep(1)
        real(path, payload, fsync=fsync)

    storage.append_private = torn_append  # type: ignore[assignment]


def run(folder: str, round_no: int, mode: str, target: int, conn: Connection) -> None:
    """Drive the session in `folder` until killed (see the module docstring)."""
    if mode in ("torn", "torn-batch"):
        _tear_appends(conn, mode, target)
    step = [0]

    def announce(what: str) -> None:
        step[0] += 1
        conn.send(("step", step[0], what))

    def sink(event: Event) -> None:
        if isinstance(event, CompactionStarted):
            announce("compaction-started")
        elif isinstance(event, CompactionFinished):
            announce("compaction-finished")

    session = Session.open(folder, CONFIG, policy=Policy(), events=sink, allowed_roots=[folder])
    conn.send(("opened", list(session.warnings)))

    async def drive() -> None:
        turn = 0
        while step[0] < MAX_STEPS:
            last = session.entries[-1] if session.entries else None
            content = last.content if last is not None and last.type == "assistant" else None
            blocks = content if isinstance(content, list) else []
            pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if pending:
                announce("append-tool-results")
                entry = session.add_tool_results(
                    [{"type": "tool_result", "tool_use_id": tool_id, "content": f"r{round_no} t{turn}\n{FILLER}"} for tool_id in pending]
                )
                conn.send(("acked", entry.uuid))
            if last is None or last.type == "assistant" or turn % 4 == 0:
                announce("append-user")
                entry = session.add_user(f"round {round_no} turn {turn}: carry on")
                conn.send(("acked", entry.uuid))
            announce("prepare")
            request = await session.prepare()
            announce("record")
            entry = session.record(
                {
                    "content": [
                        {"type": "text", "text": f"turn {turn}"},
                        {"type": "tool_use", "id": f"toolu_r{round_no}_t{turn}", "name": "Bash", "input": {"command": f"make {turn}"}},
                    ],
                    "usage": {"input_tokens": len(str(request["messages"])) // 4, "output_tokens": 20},
                    "stop_reason": "tool_use",
                    "id": f"msg_r{round_no}_t{turn}",
                }
            )
            conn.send(("acked", entry.uuid))
            turn += 1

    asyncio.run(drive())


def hold_lock(folder: str, conn: Connection) -> None:
    """Lock `folder`, say "locked", wait for "release", unlock, say "released" with the time
    taken just before unlocking (after it, the waiter may already hold the lock and have read
    the clock while this process waited for the CPU)."""
    store = storage.FolderStore(folder)
    conn.send(("locked", os.getpid()))
    while conn.recv() != "release":
        pass
    releasing = time.monotonic()
    store.close()
    conn.send(("released", releasing))


def child(folder: str, round_no: int, mode: str, target: int, conn: Connection) -> None:
    """Process entry point: report an unexpected exception to the parent, then exit 3."""
    try:
        run(folder, round_no, mode, target, conn)
    except BaseException as error:  # the parent reports it
        conn.send(("error", f"{type(error).__name__}: {error}"))
        os._exit(3)


__all__ = ["child", "hold_lock", "run"]
