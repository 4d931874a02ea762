"""Many worker processes driving many sessions through one shared store (test and benchmark).

A worker (`python store_workers.py worker ...`) repeats: pick a random session, open its store
with `wait=inf` (the session lock), open a `Session` over it, answer a tool call a killed
worker left unanswered, add a user message carrying a unique marker, then a tool call, its
result and a final answer (prepare() before each response, so auto-compaction runs with the
offline extractive summarizer). It logs `pending MARKER` before and `done MARKER` after each
step (fsynced), and the time each step spent in the store. With a holders URL it records
when it took and released each session's lock in a table, to check that no two writers were
ever inside one session.

`run_fleet` starts the workers, SIGKILLs random ones (starting a replacement for each), waits,
and returns the logs; `check_fleet` compares the logs with what the store holds.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore, SessionStore

CONFIG = SessionConfig(model="claude-sonnet-5-5", system="worker", context_window=60_000)
MARKER_PREFIX = "marker "
TOOL_OUTPUT = "".join(f"src/module_{i:03d}.py: ok, {i * 7} lines checked\n" for i in range(300))

HOLDERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_holders (
    session_id text NOT NULL, worker text NOT NULL,
    acquired timestamptz NOT NULL, released timestamptz
);
CREATE TABLE IF NOT EXISTS fleet_kills (worker text NOT NULL, killed timestamptz NOT NULL);
"""


def session_ids(count: int) -> list[str]:
    """The sessions the fleet shares."""
    return [f"session-{index:03d}" for index in range(count)]


def open_store(kind: str, target: str, session_id: str, *, lock: bool = True) -> SessionStore:
    """A store of `kind` on one session; writers wait for the lock.

    `folder` and `postgres` are the real stores; `postgres-unlocked` is the negative control
    of the test: a read-only store that takes no lock (so its writes are never kept).
    """
    wait = math.inf if lock else None
    if kind == "folder":
        return FolderStore(Path(target) / session_id, lock=lock, wait=wait)
    from unbounded.postgres import PostgresStore

    if kind == "postgres-unlocked":
        return PostgresStore(target, session_id, lock=False)
    return PostgresStore(target, session_id, lock=lock, wait=wait)


class TimedStore:
    """A store that adds the time spent in its methods to `seconds`."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.store, name)
        if not callable(value):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


def answer_dangling_tool_calls(session: Session) -> None:
    """What an agent does on resume: a tool call a crash left unanswered gets an error result."""
    messages = session.messages
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = messages[-1]["content"]
    ids = [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    if ids:
        session.add_tool_results(
            [
                {"type": "tool_result", "tool_use_id": i, "content": "interrupted", "is_error": True}
                for i in ids
            ]
        )


async def _step(session: Session, marker: str, step: int) -> None:
    session.add_user(marker)
    await session.prepare()
    tool_id = f"toolu_{uuid.uuid4().hex[:20]}"
    session.record(
        ModelResponse(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "check"}}],
            "tool_use",
            {"input_tokens": session.status().tokens, "output_tokens": 40},
            CONFIG.model,
            id=f"msg_{uuid.uuid4().hex[:20]}",
        )
    )
    session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": TOOL_OUTPUT}])
    await session.prepare()
    session.record(
        ModelResponse(
            [{"type": "text", "text": f"step {step} checked"}],
            "end_turn",
            {"input_tokens": session.status().tokens, "output_tokens": 20},
            CONFIG.model,
            id=f"msg_{uuid.uuid4().hex[:20]}",
        )
    )


def _wait_for_the_start(log: Path) -> None:
    """Say this worker is ready, then wait for the parent's go (a replacement finds it there).

    Workers start their steps together: on a loaded machine, one that spent a second importing
    would otherwise begin after the others had finished, and unlocked writers would never meet.
    """
    log.with_suffix(".ready").touch()
    go = log.parent / "go"
    while not go.exists():
        time.sleep(0.01)


def worker(
    kind: str, target: str, name: str, steps: int, sessions: int, log: Path, holders: str | None
) -> None:
    """One worker process's loop (see the module docstring)."""
    rng = random.Random(f"{name}-{os.getpid()}")
    ids = session_ids(sessions)
    holders_connection: Any = None
    if holders:
        import psycopg

        holders_connection = psycopg.connect(holders, autocommit=True)
    _wait_for_the_start(log)
    with log.open("a", encoding="utf-8") as out:

        def note(line: str) -> None:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())

        for step in range(steps):
            session_id = rng.choice(ids)
            marker = f"{MARKER_PREFIX}{name}-{step}-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            store = TimedStore(open_store(kind, target, session_id))
            opened = time.perf_counter() - started
            if holders_connection is not None:
                holders_connection.execute(
                    "INSERT INTO fleet_holders VALUES (%s, %s, clock_timestamp(), NULL)",
                    (session_id, name),
                )
            session = Session(CONFIG, store=store, policy=Policy())  # type: ignore[arg-type]
            answer_dangling_tool_calls(session)
            note(f"pending {session_id} {marker}")
            compactions = session.micro.stats.compactions
            asyncio.run(_step(session, marker, step))
            note(f"done {session_id} {marker}")
            if holders_connection is not None:
                holders_connection.execute(
                    "UPDATE fleet_holders SET released = clock_timestamp() "
                    "WHERE session_id = %s AND worker = %s AND released IS NULL",
                    (session_id, name),
                )
            closing = time.perf_counter()
            store.close()
            store_seconds = store.seconds + opened + (time.perf_counter() - closing)
            note(
                "time "
                + json.dumps(
                    {
                        "store": store_seconds,
                        "turn": time.perf_counter() - started,
                        "compacted": session.micro.stats.compactions - compactions,
                    }
                )
            )


# -- the parent --------------------------------------------------------------------------------


@dataclass
class FleetRun:
    """What a fleet run did: logs per worker, kills, wall time."""

    logs: dict[str, Path] = field(default_factory=dict)
    killed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def _spawn(
    kind: str, target: str, name: str, steps: int, sessions: int, folder: Path, holders: str | None
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        __file__,
        "worker",
        kind,
        target,
        name,
        str(steps),
        str(sessions),
        str(folder / f"{name}.log"),
        holders or "",
    ]
    # The child holds its own copy of the descriptor: ours is closed once it has started.
    with (folder / f"{name}.err").open("wb") as stderr:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)


def run_fleet(
    kind: str,
    target: str,
    folder: Path,
    *,
    workers: int = 8,
    steps: int = 40,
    sessions: int = 40,
    kills: int = 0,
    holders: str | None = None,
    seed: int = 7,
    timeout: float = 600.0,
) -> FleetRun:
    """Run `workers` processes of `steps` steps each, SIGKILLing `kills` of them at random."""
    rng = random.Random(seed)
    run = FleetRun()
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [folder / "go", *folder.glob("*.ready")]:  # a folder used for an earlier run
        stale.unlink(missing_ok=True)
    holders_connection: Any = None
    if holders:
        import psycopg

        holders_connection = psycopg.connect(holders, autocommit=True)
        holders_connection.execute(HOLDERS_SCHEMA)
    running: dict[str, subprocess.Popen[bytes]] = {}
    serial = 0

    def start() -> None:
        nonlocal serial
        name = f"w{serial:02d}"
        serial += 1
        running[name] = _spawn(kind, target, name, steps, sessions, folder, holders)
        run.logs[name] = folder / f"{name}.log"

    for _ in range(workers):
        start()
    _start_together(run, running, folder, timeout)
    started = time.monotonic()
    # Kills are spread over the run by progress (steps done), so they land mid-run on a slow
    # machine and a fast one alike; each lands a random moment into some worker's step.
    total = workers * steps
    marks = sorted(rng.uniform(0.1, 0.8) * total for _ in range(kills))
    while running:
        if time.monotonic() - started > timeout:
            for process in running.values():
                process.kill()
            raise TimeoutError(f"the fleet did not finish in {timeout:g} s")
        time.sleep(0.05)
        for name, process in list(running.items()):
            if process.poll() is not None:
                del running[name]
                if process.returncode != 0 and name not in run.killed:
                    run.failures.append(
                        f"{name} exited {process.returncode}: "
                        + (folder / f"{name}.err").read_text(errors="replace")[-3000:]
                    )
        if len(run.killed) < kills and running and _steps_done(run) >= marks[len(run.killed)]:
            time.sleep(rng.uniform(0.0, 0.02))
            name = rng.choice(sorted(running))
            if holders_connection is not None:
                holders_connection.execute(
                    "INSERT INTO fleet_kills VALUES (%s, clock_timestamp())", (name,)
                )
            os.kill(running[name].pid, signal.SIGKILL)
            running[name].wait()
            del running[name]
            run.killed.append(name)
            start()
    run.seconds = time.monotonic() - started
    if holders_connection is not None:
        holders_connection.close()
    return run


def _start_together(
    run: FleetRun, running: dict[str, subprocess.Popen[bytes]], folder: Path, timeout: float
) -> None:
    """Let the workers begin once each is ready, or has exited (its failure is read later)."""
    waited = time.monotonic()
    while not all(
        run.logs[name].with_suffix(".ready").exists() or process.poll() is not None
        for name, process in running.items()
    ):
        if time.monotonic() - waited > timeout:
            for process in running.values():
                process.kill()
            raise TimeoutError(f"the workers were not ready in {timeout:g} s")
        time.sleep(0.01)
    (folder / "go").touch()


def _steps_done(run: FleetRun) -> int:
    """Steps logged done so far (a log starts with `pending`, so each `done` follows a newline)."""
    return sum(path.read_bytes().count(b"\ndone ") for path in run.logs.values() if path.exists())


@dataclass
class FleetCheck:
    """The comparison of the logs with the store."""

    committed: int
    lost: list[str]
    duplicated: list[str]
    unlogged: list[str]
    """Markers in the store a killed worker had not yet logged as done (allowed if pending)."""
    unfinished: list[str]
    """Markers logged as pending and never as done (their worker was killed)."""
    overlaps: list[str]
    invalid: list[str]
    compactions: int
    store_seconds: list[float]
    turns: int


def _log_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines


def check_fleet(
    kind: str, target: str, run: FleetRun, *, sessions: int, holders: str | None = None
) -> FleetCheck:
    """Compare what the workers logged with what the store holds (see the module docstring)."""
    pending: dict[str, str] = {}
    done: dict[str, str] = {}
    store_seconds: list[float] = []
    compactions = 0
    for path in run.logs.values():
        for line in _log_lines(path):
            kind_of, _, rest = line.partition(" ")
            if kind_of == "time":
                figures = json.loads(rest)
                store_seconds.append(figures["store"])
                compactions += figures["compacted"]
                continue
            session_id, _, marker = rest.partition(" ")
            (pending if kind_of == "pending" else done)[marker] = session_id
    found: Counter[str] = Counter()
    where: dict[str, str] = {}
    invalid: list[str] = []
    for session_id in session_ids(sessions):
        store = open_store(kind, target, session_id)
        try:
            for entry in store.load().entries:
                content = entry.content
                if (
                    entry.type == "user"
                    and not entry.is_compact_summary
                    and isinstance(content, str)
                    and content.startswith(MARKER_PREFIX)
                ):
                    found[content] += 1
                    where[content] = session_id
            session = Session(CONFIG, store=store, policy=Policy())
            answer_dangling_tool_calls(session)
            if session.view:
                try:
                    validate_request([dict(m) for m in normalize_messages(session.view)])
                except Exception as error:
                    invalid.append(f"{session_id}: {error}")
        finally:
            store.close()
    lost = sorted(m for m, s in done.items() if found[m] == 0 or where.get(m) != s)
    duplicated = sorted(m for m, count in found.items() if count > 1)
    unlogged = sorted(m for m in found if m not in done)
    return FleetCheck(
        committed=len(done),
        lost=lost,
        duplicated=duplicated,
        unlogged=unlogged,
        unfinished=sorted(set(pending) - set(done)),
        overlaps=_overlaps(holders) if holders else [],
        invalid=invalid,
        compactions=compactions,
        store_seconds=store_seconds,
        turns=len(done),
    )


def _overlaps(holders: str) -> list[str]:
    """Lock intervals of one session that overlap (a killed holder ends at its kill)."""
    import psycopg

    with psycopg.connect(holders, autocommit=True) as connection:
        kills = dict(connection.execute("SELECT worker, killed FROM fleet_kills").fetchall())
        rows = connection.execute(
            "SELECT session_id, worker, acquired, released FROM fleet_holders "
            "ORDER BY session_id, acquired"
        ).fetchall()
    problems: list[str] = []
    previous: dict[str, tuple[str, Any]] = {}
    for session_id, worker_name, acquired, released in rows:
        if released is None:
            released = kills.get(worker_name)
            if released is None:
                problems.append(f"{session_id}: {worker_name} never released and was not killed")
                continue
        if session_id in previous:
            other, other_end = previous[session_id]
            if acquired < other_end:
                problems.append(
                    f"{session_id}: {worker_name} took the lock at {acquired} before {other} "
                    f"let go at {other_end}"
                )
        previous[session_id] = (worker_name, released)
    return problems


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "worker":
        _, _, kind_arg, target_arg, name_arg, steps_arg, sessions_arg, log_arg, holders_arg = sys.argv
        worker(
            kind_arg,
            target_arg,
            name_arg,
            int(steps_arg),
            int(sessions_arg),
            Path(log_arg),
            holders_arg or None,
        )
    else:
        raise SystemExit("usage: store_workers.py worker KIND TARGET NAME STEPS SESSIONS LOG HOLDERS")
