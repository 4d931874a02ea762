"""Many sessions in one command: folders and globs expanded, each file run on its own (in
worker processes with `--jobs`), a bad file reported while the others still run (a session
that crashes with an unexpected exception too: it is failed, its traceback logged)."""

from __future__ import annotations

import glob
import logging
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

import typer

from unbounded.errors import ConfigError, UnboundedError

T = TypeVar("T")
logger = logging.getLogger(__name__)

SESSION_SUFFIXES = (".jsonl", ".traj", ".traj.json")
"""The files a folder is searched for: JSONL transcripts, SWE-agent and mini-swe-agent
trajectories (an OpenHands SDK conversation folder is a session of its own)."""
_GLOB_CHARACTERS = frozenset("*?[")

JobsOption = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="Run this many sessions at once, each in its own process.",
    ),
]


def expand_paths(arguments: Sequence[str]) -> list[str]:
    """The sessions the arguments name, in order and without repeats: a file or a database
    address as given, a folder's `*.jsonl`, `*.traj` and `*.traj.json` files and OpenHands SDK
    conversation folders (every level down, sorted; an SDK conversation folder given itself is
    one session), a glob's matches (`**` included, sorted). A folder or glob that names no
    session, and a path that does not exist, are errors (a mistyped name should not pass for an
    empty run)."""
    found: dict[str, str] = {}  # the file itself -> the path as first named
    for argument in arguments:
        for path in _expand_one(argument):
            # `.` and `./s.jsonl` (or a link to it) name one file: it runs once.
            found.setdefault(_same_file_key(path), path)
    return list(found.values())


def _same_file_key(path: str) -> str:
    """What tells two names of one file apart from two files: its resolved path (a database
    address as it is)."""
    from unbounded.addresses import DatabaseAddress, parse_address

    if isinstance(parse_address(path), DatabaseAddress):
        return path
    return os.path.realpath(path)


def _expand_one(argument: str) -> list[str]:
    # Imported here: the readers are an engine `--help` does not load.
    from unbounded.addresses import DatabaseAddress, parse_address
    from unbounded.transcripts.openhands_sdk import conversation_folder

    if isinstance(parse_address(argument), DatabaseAddress):
        return [argument]
    path = Path(argument).expanduser()
    if path.is_dir():
        if conversation_folder(path) is not None:
            return [argument]
        folders = sorted(
            candidate
            for candidate in path.rglob("*")
            if candidate.is_dir() and conversation_folder(candidate) is not None
        )
        inside = {*folders, *(folder / "events" for folder in folders)}
        files = sorted(
            str(candidate)
            for candidate in path.rglob("*")
            if candidate.name.endswith(SESSION_SUFFIXES)
            and candidate.is_file()
            and candidate.parent not in inside
        )
        sessions = sorted([*files, *(str(f) for f in folders if f.name != "events")])
        if not sessions:
            raise ConfigError(
                f"{argument}: the folder holds no session (.jsonl, .traj or .traj.json file, "
                "or OpenHands conversation folder)"
            )
        return sessions
    if path.exists() or not _GLOB_CHARACTERS & set(argument):
        return [argument]  # a missing file is reported by the reader, with its usual message
    matches = sorted(
        match for match in glob.glob(str(path), recursive=True) if Path(match).is_file()
    )
    if not matches:
        raise ConfigError(f"{argument}: no file matches (quote the pattern to pass it as is)")
    return matches


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """One session of a batch: its result, or why it failed."""

    path: str
    result: T | None = None
    error: str | None = None
    trace: str | None = None
    """The traceback of an unexpected exception (a bug), logged by `run_each`."""


def _guarded(work: Callable[[str], T], path: str, *, contain: bool = False) -> Outcome[T]:
    """`work(path)` with unbounded's errors (bad input, a missing file) kept as a message;
    with `contain` (a batch), any other exception too, with its traceback."""
    try:
        return Outcome(path, result=work(path))
    except UnboundedError as exc:
        return Outcome(path, error=str(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return Outcome(path, error=f"{where}{exc.strerror or exc}")
    except Exception as exc:
        if not contain:
            raise  # one session: the traceback as it is
        # A bug met on one session must not cost the batch the others.
        error = (
            f"{path}: unexpected {type(exc).__name__}: {exc} (a bug in unbounded: please "
            "report it; the traceback is logged)"
        )
        return Outcome(path, error=error, trace=traceback.format_exc())


def _logged(outcome: Outcome[T]) -> Outcome[T]:
    """The outcome, its traceback (if any) logged here: a worker process's log is not seen."""
    if outcome.trace is not None:
        logger.error("%s failed with an unexpected exception:\n%s", outcome.path, outcome.trace)
    return outcome


def run_each(work: Callable[[str], T], paths: Sequence[str], jobs: int) -> Iterator[Outcome[T]]:
    """`work` on every path, yielding outcomes in the paths' order as they finish. With
    `jobs` > 1 the paths run in that many worker processes (`work` must be a module-level
    function, and its result picklable); a session whose worker process dies (an
    out-of-memory kill, a crash in C) is failed, the others still run."""
    contain = len(paths) > 1
    if jobs <= 1 or len(paths) <= 1:
        for path in paths:
            yield _logged(_guarded(work, path, contain=contain))
        return
    done: dict[int, Outcome[T]] = {}
    following = 0
    for index, outcome in _run_in_pools(work, paths, jobs, contain):
        done[index] = outcome
        while following in done:
            yield _logged(done.pop(following))
            following += 1


_started: Any = None
"""In a worker process: one flag per session of the batch, set as the worker starts it."""


def _mark_started(flags: Any) -> None:
    global _started
    _started = flags


def _guarded_started(
    work: Callable[[str], T], index: int, path: str, contain: bool
) -> Outcome[T]:
    _started[index] = 1  # shared memory: seen by the parent even if this process dies next
    return _guarded(work, path, contain=contain)


def _run_in_pools(
    work: Callable[[str], T], paths: Sequence[str], jobs: int, contain: bool
) -> Iterator[tuple[int, Outcome[T]]]:
    """(index, outcome) of every path, run in worker processes. When a worker dies the pool
    breaks and every unfinished session with it: those the dead pool had not started run again
    in a fresh pool, those it had started run again each alone, to tell which one died."""
    # Only for --jobs: a fast --help.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    rounds: list[tuple[list[int], int]] = [(list(range(len(paths))), jobs)]
    while rounds:
        indexes, workers = rounds.pop(0)
        flags = multiprocessing.RawArray("b", len(paths))
        unfinished: list[int] = []
        pool = ProcessPoolExecutor(
            max_workers=min(workers, len(indexes)), initializer=_mark_started, initargs=(flags,)
        )
        try:
            futures = [
                (index, pool.submit(_guarded_started, work, index, paths[index], contain))
                for index in indexes
            ]
            for index, future in futures:
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    unfinished.append(index)
                    continue
                yield index, outcome
        except BaseException:
            # Ctrl-C, or the caller stopping early (GeneratorExit here): the sessions not
            # started are dropped, not run first as a plain shutdown would, nor waited for.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        if not unfinished:
            continue
        if len(indexes) == 1:
            path = paths[indexes[0]]
            yield indexes[0], Outcome(
                path,
                error=f"{path}: the worker process running it died: out of memory? run it "
                "alone (without --jobs) to see why",
            )
            continue
        started = [index for index in unfinished if flags[index]]
        waiting = [index for index in unfinished if not flags[index]]
        if not started:  # died before starting any (cannot tell which): each alone
            started, waiting = unfinished, []
        rounds.extend(([index], 1) for index in started)
        if waiting:
            rounds.append((waiting, jobs))


def located(path: str, warning: str) -> str:
    """A reader's warning naming its file (some already start with it); a database address
    is named with its password hidden."""
    from unbounded.redaction import redact_url

    shown = redact_url(path)
    warning = warning.replace(path, shown) if shown != path else warning
    return warning if warning.startswith(shown) else f"{shown}: {warning}"
