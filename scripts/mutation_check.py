"""Mutation check: does a test fail when a rule of the code is flipped, removed or off by one?

For each module listed in `scripts/mutation_targets.toml`, every small mutation below is
applied to a copy of the source, one at a time, and only the test files mapped to that module
are run (`pytest -x`, with a timeout per mutant). A mutant is *killed* when the tests fail
(or time out), and *survives* when they pass: then no test holds the rule it changed.

Mutations (each at one place in the code):

- a comparison flipped: `<` / `>=`, `>` / `<=`, `==` / `!=`, `in` / `not in`, `is` / `is not`;
- an integer constant off by one (`n` -> `n + 1`);
- `x[-1]` <-> `x[0]`;
- `and` <-> `or`;
- a condition negated (`if`, `while`, `... if ... else ...`);
- the body of an `if` dropped (a branch, or an early `return` / `continue` / `raise`).

Docstrings, `assert` statements, type annotations and the `__all__` list are left alone.

    python scripts/mutation_check.py                      # every module in the map
    python scripts/mutation_check.py --module redaction.py --jobs 2
    python scripts/mutation_check.py --module recall/lookup.py --list   # the mutants only
    python scripts/mutation_check.py --module compaction/extractive.py --lines 1-400  # a part
    python scripts/mutation_check.py --module compaction/handover.py --lines 801-end
    python scripts/mutation_check.py --module redaction.py --fresh-imports  # no swapped code

A module whose run takes hours can be run in parts with `--lines` (the mutants on those lines
only); the parts' figures add up to the module's.

A mutant of a function body runs in a child forked from one collected pytest session, its
functions given the mutated code (`mutation_swap.py`); a mutant of code run at import or
collection runs in a fresh pytest, as every mutant does with `--fresh-imports`.

It prints each survivor as `path:line: mutation`, then killed / total per module and overall.
Mutants the map argues are equivalent (they change no behaviour) are printed apart and still
count as survivors in the figure. Run it from the repository root with the project installed
(`pip install -e ".[test]"`); it never edits the working tree (it mutates a copy of `src/`).
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import functools
import json
import os
import py_compile
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mutation_swap  # scripts/mutation_swap.py, beside this file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "unbounded"
TARGETS = Path(__file__).with_name("mutation_targets.toml")

_FLIPPED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    """One mutation of one module: where, what, and the whole mutated source."""

    module: str
    line: int
    description: str
    source: str
    first_line: int
    """The first and last line of the statement it changes (for choosing its tests)."""
    last_line: int


@dataclass
class Target:
    """A module, the tests that should hold it, and its argued equivalent mutants."""

    module: str
    tests: list[str]
    equivalent: dict[tuple[int, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """How one mutant fared."""

    mutant: Mutant
    killed: bool
    detail: str


# -- finding mutants ------------------------------------------------------------------------------


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """Docstrings, asserts, annotations and `__all__`: nothing there is a rule to test."""
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(inner) for inner in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip(first)
        if isinstance(node, ast.Assert):
            skip(node)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip(node.returns)
            for argument in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                skip(argument.annotation)
        elif (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        ) or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            skip(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip(node)  # a bare string: a field's docstring
    return skipped


def _offsets(data: bytes) -> list[int]:
    """Where each line starts in the UTF-8 source: ast's column offsets count bytes, not
    characters, so a line holding `×` or `…` must be cut in bytes."""
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _splice(data: bytes, begin: int, end: int, text: str) -> str:
    return (data[:begin] + text.encode("utf-8") + data[end:]).decode("utf-8")


def _replace(data: bytes, starts: list[int], node: ast.AST, text: str) -> str:
    begin = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
    end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
    return _splice(data, begin, end, text)


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    return " ".join(text.split())[:70]


def mutants(module: str, source: str | None = None) -> Iterator[Mutant]:
    """Every mutant of one module (path relative to src/unbounded; its text read from there
    unless `source` is given), in source order."""
    if source is None:
        source = (PACKAGE / module).read_text(encoding="utf-8")
    tree = ast.parse(source)
    skipped = _skipped_nodes(tree)
    data = source.encode("utf-8")
    starts = _offsets(data)
    found: list[tuple[int, int, str, str, int, int]] = []
    enclosing: dict[int, ast.stmt] = {}

    def enclose(node: ast.AST, statement: ast.stmt | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                enclosing[id(child)] = child
                enclose(child, child)
            else:
                if statement is not None:
                    enclosing[id(child)] = statement
                enclose(child, statement)

    enclose(tree, None)

    def span(node: ast.AST) -> tuple[int, int]:
        statement = enclosing.get(id(node))
        if statement is None:
            return node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        return statement.lineno, statement.end_lineno or statement.lineno

    def add(node: ast.AST, replacement: ast.AST | str, what: str) -> None:
        text = replacement if isinstance(replacement, str) else ast.unparse(replacement)
        mutated = _replace(data, starts, node, text)
        try:
            ast.parse(mutated)
        except SyntaxError:
            return
        line = node.lineno  # type: ignore[attr-defined]
        found.append((line, node.col_offset, what, mutated, *span(node)))  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Compare):
            for position, op in enumerate(node.ops):
                flipped = _FLIPPED.get(type(op))
                if flipped is None:
                    continue
                ops = list(node.ops)
                ops[position] = flipped()
                changed = ast.Compare(node.left, ops, node.comparators)
                shown = f"`{_segment(source, node)}` -> `{ast.unparse(changed)[:70]}`"
                add(node, changed, shown)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            add(node, repr(node.value + 1), f"constant {node.value} -> {node.value + 1}")
        elif isinstance(node, ast.Subscript):
            index = node.slice
            value = None
            if isinstance(index, ast.Constant) and index.value == 0:
                value = "-1"
            elif (
                isinstance(index, ast.UnaryOp)
                and isinstance(index.op, ast.USub)
                and isinstance(index.operand, ast.Constant)
                and index.operand.value == 1
            ):
                value = "0"
            if value is not None:
                add(index, value, f"`{_segment(source, node)}`: index -> [{value}]")
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            swapped = ast.BoolOp(other, node.values)
            word = "and -> or" if isinstance(node.op, ast.And) else "or -> and"
            add(node, f"({ast.unparse(swapped)})", f"`{_segment(source, node)}`: {word}")
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            negated = f"condition negated: `{_segment(source, test)}`"
            add(test, f"not ({ast.unparse(test)})", negated)
            if isinstance(node, ast.If):
                first, last = node.body[0], node.body[-1]
                begin = starts[first.lineno - 1] + first.col_offset
                end = starts[last.end_lineno - 1] + last.end_col_offset  # type: ignore[operator]
                mutated = _splice(data, begin, end, "pass")
                try:
                    ast.parse(mutated)
                except SyntaxError:
                    continue
                kinds = {type(s).__name__ for s in node.body}
                exits = {"Return", "Continue", "Break", "Raise"}
                what = "early exit" if kinds & exits else "branch"
                head = f"`if {_segment(source, test)}:`"
                dropped = f"{what} dropped: {head} body"
                found.append((node.lineno, node.col_offset, dropped, mutated, *span(node)))
    for line, _, what, mutated, begin, end in sorted(found, key=lambda i: (i[0], i[1], i[2])):
        yield Mutant(module, line, what, mutated, begin, end)


# -- running the tests ----------------------------------------------------------------------------
#
# Starting pytest and importing the SDKs costs far more than most mapped tests: so the checker
# imports them once and forks a child per mutant. Most mutants run in a collected session (see
# below); the others in a child that forgets every `unbounded` module, puts the mutated copy of
# `src/` first on sys.path and runs pytest in-process. A baseline run of the mapped tests on the
# unmutated copy, with a line tracer on the module, tells which tests execute each statement: a
# mutant runs only those (a mutant no test reaches survives unrun).


def load_targets(path: Path = TARGETS) -> list[Target]:
    """The module -> tests map (and argued equivalents) from the data file."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    targets = []
    for entry in data["module"]:
        equivalent = {
            (int(item["line"]), str(item["mutation"])): str(item["why"])
            for item in entry.get("equivalent", [])
        }
        targets.append(Target(entry["path"], list(entry["tests"]), equivalent))
    return targets


def _copy_of_src(into: Path) -> Path:
    """A copy of src/, compiled to hash-checked bytecode: a child loads every module it did
    not mutate from bytecode, and a mutated source never matches its old bytecode (a hash,
    unlike a timestamp, cannot be fooled by two writes within one second)."""
    shutil.copytree(
        ROOT / "src", into / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    compileall.compile_dir(
        into / "src",
        quiet=1,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    return into / "src"


def _warm_imports() -> None:
    """Import what every child would import again: pytest, the plugins it loads from entry
    points (some take seconds), the SDKs."""
    from importlib.metadata import entry_points

    for name in ("pytest", "hypothesis", "anthropic", "openai", "httpx", "orjson", "rich", "typer"):
        with contextlib.suppress(ImportError):
            __import__(name)
    for plugin in entry_points(group="pytest11"):
        with contextlib.suppress(Exception):
            plugin.load()


def _in_child(src: Path, args: list[str], plugins: list[object]) -> int:
    """Run pytest on `args` against the copy at `src` (called in a forked child)."""
    import pytest

    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p
    )
    sys.path.insert(0, str(src))
    for name in [m for m in sys.modules if m == "unbounded" or m.startswith("unbounded.")]:
        del sys.modules[name]
    return int(pytest.main(["-q", "-p", "no:cacheprovider", *args], plugins=plugins))


def _fork(run: Callable[[], int], log: Path | None) -> int:
    """Start `run` in a child process of its own group; returns the child's pid."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 70
        try:
            os.setpgid(0, 0)
            target = os.open(log if log is not None else os.devnull, os.O_WRONLY | os.O_CREAT)
            os.dup2(target, 1)
            os.dup2(target, 2)
            code = run()
        except BaseException:  # a child reports through its exit code only
            code = 71
        finally:
            os._exit(code)
    return pid


def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


class _LineTracer:
    """Which lines of one file each test runs (a pytest plugin plus a trace function)."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.current = "<import>"
        self.lines: dict[str, set[int]] = {}
        self.seconds: dict[str, float] = {}

    def trace(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self.filename:
            return None
        lines = self.lines.setdefault(self.current, set())
        lines.add(frame.f_lineno)

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            return local

        return local

    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> None:
        """Each line traced from now on belongs to this test."""
        self.current = item.nodeid
        self.seconds[item.nodeid] = time.monotonic()
        # A test may take the trace function over and not give it back (hypothesis does, to
        # explain a failure): without it later tests would seem to reach nothing, and the
        # mutants they kill would not be run against them.
        sys.settrace(self.trace)
        threading.settrace(self.trace)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        """The test is over: its time, and lines run between tests belong to none."""
        self.seconds[nodeid] = time.monotonic() - self.seconds.get(nodeid, time.monotonic())
        self.current = "<between>"


def _covering(mutant: Mutant, lines: dict[str, set[int]]) -> list[str] | None:
    """The tests that run the mutant's statement; None when module-level code holds it (run
    every mapped test); [] when no test reaches it."""
    span = set(range(mutant.first_line, mutant.last_line + 1))
    if lines.get("<import>", set()) & span:
        return None
    return [test for test, seen in lines.items() if test.startswith("tests/") and seen & span]


def _baseline_tests(seconds: dict[str, float]) -> list[str]:
    """The id of every test the baseline ran: a mutant of code run at import may change what
    any of them sees, even one that runs no line of the module (it may read a constant)."""
    return sorted(test for test in seconds if test.startswith("tests/"))


@dataclass
class _Odds:
    """Which tests killed mutants so far: they run first on the next mutants."""

    kills: dict[str, int] = field(default_factory=dict)
    by_statement: dict[tuple[int, int], str] = field(default_factory=dict)

    def order(self, mutant: Mutant, tests: list[str], seconds: dict[str, float]) -> list[str]:
        """The test that killed a mutant of the same statement first, then the tests that
        killed most, then the quickest (with -x, the first failure ends the run)."""
        last = self.by_statement.get((mutant.first_line, mutant.last_line))
        return sorted(
            tests,
            key=lambda t: (t != last, -self.kills.get(t, 0), seconds.get(t, 1.0), t),
        )

    def killed(self, mutant: Mutant, test: str) -> None:
        """`test` killed `mutant`."""
        self.kills[test] = self.kills.get(test, 0) + 1
        self.by_statement[(mutant.first_line, mutant.last_line)] = test


@dataclass(frozen=True)
class _Job:
    """A mutant waiting to run: the ids of the tests to run on it, and its time limit."""

    index: int
    mutant: Mutant
    tests: list[str]
    limit: float


def _limit(tests: list[str], seconds: dict[str, float], timeout: float | None) -> float:
    budget = sum(seconds.get(t, 1.0) for t in tests)
    return timeout if timeout is not None else max(60.0, 5 * budget + 30)


def _run_queue(
    queue: list[_Job],
    free: list[Path],
    start: Callable[[_Job, Path, int], int],
    finish: Callable[[_Job, bool, str, str], None],
) -> None:
    """Run each job in a child `start` forks (given a copy of src/ of its own, with the
    mutant written into it, and a pipe to name the test that failed), as many at once as
    there are copies, until done; `finish` gets each outcome."""
    running: dict[int, tuple[_Job, Path, float, int]] = {}
    try:
        while queue or running:
            while queue and free:
                job = queue.pop(0)
                src = free.pop()
                (src / "unbounded" / job.mutant.module).write_text(job.mutant.source, "utf-8")
                read, write = os.pipe()
                pid = start(job, src, write)
                os.close(write)
                running[pid] = (job, src, time.monotonic() + job.limit, read)
            time.sleep(0.02)
            for pid, (job, src, deadline, read) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done == 0 and time.monotonic() < deadline:
                    continue
                if done == 0:
                    _stop(pid)
                    killed, detail = True, "timed out"
                else:
                    code = os.waitstatus_to_exitcode(status)
                    killed, detail = code != 0, f"exit {code}"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # anything a test left running
                with os.fdopen(read, "rb") as pipe:
                    test = pipe.read().decode("utf-8", "replace")
                original = (PACKAGE / job.mutant.module).read_text(encoding="utf-8")
                (src / "unbounded" / job.mutant.module).write_text(original, encoding="utf-8")
                del running[pid]
                free.append(src)
                finish(job, killed, detail, test)
    finally:
        for pid, (*_, read) in running.items():  # interrupted: no child outlives the checker
            _stop(pid)
            os.close(read)


# -- one collected session for the mutants of function bodies ------------------------------------
#
# Most mutants change only a function's body. For them a process imports the package and the
# mapped test files once, from an unmutated copy, and has pytest collect them (with the line
# tracer on: what runs during import and collection is "<import>"). A first child runs every
# test traced: the baseline. Then each mutant runs in a child forked from that collected
# session, which gives the changed functions their mutated code (mutation_swap.py) and runs the
# covering test items in process: no import, no collection per mutant. Mutants of code run at
# import or collection, and any mutant the swap cannot apply exactly, are left to the slower
# path (a fresh pytest per mutant), as are all mutants with --fresh-imports.


@dataclass
class _Results:
    """What the collected session found: the baseline, outcomes, and the mutants it left."""

    lines: dict[str, set[int]]
    seconds: dict[str, float]
    outcomes: dict[int, tuple[bool, str]]
    left: list[int]
    odds: _Odds


class _SessionDriver:
    """A pytest plugin that takes over the test loop of the collected session."""

    def __init__(
        self,
        target: Target,
        found: list[Mutant],
        sources: list[Path],
        timeout: float | None,
        tracer: _LineTracer,
        options: tuple[Path, int, bool],
    ) -> None:
        self.target, self.found, self.sources, self.timeout = target, found, sources, timeout
        self.tracer = tracer
        self.result, self.progress, self.swapping = options

    def _baseline(self, session: Any) -> tuple[dict[str, set[int]], dict[str, float]] | str:
        """Every item traced in a child; the lines each test runs, or why the tests fail."""
        read, write = os.pipe()
        tracer = self.tracer

        def run() -> int:
            code = _run_items(session, list(session.items), write)
            sys.settrace(None)
            payload = {
                "lines": {k: sorted(v) for k, v in tracer.lines.items()},
                "seconds": tracer.seconds,
            }
            os.write(write, b"\0" + json.dumps(payload).encode())
            return code

        pid = _fork(run, None)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            failed, _, data = pipe.read().partition(b"\0")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not data:
            return failed.decode("utf-8", "replace") or f"exit {status}"
        loaded = json.loads(data)
        lines = {k: set(v) for k, v in loaded["lines"].items()}
        return lines, {k: float(v) for k, v in loaded["seconds"].items()}

    def pytest_runtestloop(self, session: Any) -> bool:
        """Baseline, then every swappable mutant; the outcomes go to the result file."""
        sys.settrace(None)
        threading.settrace(None)
        baseline = self._baseline(session)
        if isinstance(baseline, str):
            self.result.write_text(json.dumps({"error": baseline}), encoding="utf-8")
            return True
        lines, seconds = baseline
        session.config.pluginmanager.unregister(self.tracer)
        filename = str(self.sources[0] / "unbounded" / self.target.module)
        live = mutation_swap.live_functions(filename)
        original = (PACKAGE / self.target.module).read_text(encoding="utf-8")
        items = {item.nodeid: item for item in session.items}
        odds = _Odds()
        outcomes: dict[int, tuple[bool, str]] = {}
        left: list[int] = []
        swaps: dict[int, mutation_swap.Swap] = {}
        queue: list[_Job] = []
        for index, mutant in enumerate(self.found):
            tests = _covering(mutant, lines)
            if tests == []:
                outcomes[index] = (False, "no mapped test reaches it")
                continue
            swap = None
            if self.swapping and tests is not None:
                swap = mutation_swap.plan(original, mutant.source, filename, live)
            if swap is None or tests is None:
                left.append(index)
                continue
            swaps[index] = swap
            queue.append(_Job(index, mutant, tests, _limit(tests, seconds, self.timeout)))

        def start(job: _Job, src: Path, write: int) -> int:
            chosen = [items[t] for t in odds.order(job.mutant, job.tests, seconds)]
            return _fork(
                functools.partial(_swapped, session, swaps[job.index], chosen, src, write), None
            )

        def finish(job: _Job, killed: bool, detail: str, test: str) -> None:
            if detail == f"exit {_UNSWAPPABLE}":
                left.append(job.index)  # the swap failed: a fresh pytest will run it
                return
            if killed and test:
                odds.killed(job.mutant, test)
            outcomes[job.index] = (killed, detail)
            os.write(self.progress, b"." if killed else b"S")

        def stop(*_: object) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        _run_queue(queue, list(self.sources), start, finish)
        payload = {
            "lines": {k: sorted(v) for k, v in lines.items()},
            "seconds": seconds,
            "outcomes": {str(k): v for k, v in outcomes.items()},
            "left": sorted(left),
            "kills": odds.kills,
            "by_statement": [[*k, v] for k, v in odds.by_statement.items()],
        }
        self.result.write_text(json.dumps(payload), encoding="utf-8")
        return True


_UNSWAPPABLE = 72
"""A swap child's exit code when the mutated code could not be put in place."""


def _run_items(session: Any, items: list[Any], write: int) -> int:
    """Run `items` in order, stopping at the first failure (whose id goes to `write`)."""
    failed = session.testsfailed
    for position, item in enumerate(items):
        following = items[position + 1] if position + 1 < len(items) else None
        item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
        if session.testsfailed > failed or session.shouldstop:
            os.write(write, item.nodeid.encode("utf-8"))
            return 1
    return 0


def _swapped(
    session: Any, swap: mutation_swap.Swap, items: list[Any], src: Path, write: int
) -> int:
    """In a forked child of the collected session: put the mutant in place, run `items`."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(src), _PYTHONPATH) if p
    )  # subprocesses the tests start import the mutated copy from disk
    try:
        swap.apply()
    except (TypeError, ValueError):
        return _UNSWAPPABLE
    return _run_items(session, items, write)


_PYTHONPATH = os.environ.get("PYTHONPATH", "")


def _collected_session(
    target: Target,
    found: list[Mutant],
    sources: list[Path],
    timeout: float | None,
    work: Path,
    swapping: bool,
) -> _Results:
    """Run the baseline and the swappable mutants in one collected session (a child)."""
    result = work / "session.json"
    progress = os.dup(2)

    def run() -> int:
        src = sources[0]
        tracer = _LineTracer(str(src / "unbounded" / target.module))
        driver = _SessionDriver(
            target, found, sources, timeout, tracer, (result, progress, swapping)
        )
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), _PYTHONPATH) if p)
        sys.path.insert(0, str(src))
        for name in [m for m in sys.modules if m == "unbounded" or m.startswith("unbounded.")]:
            del sys.modules[name]
        sys.settrace(tracer.trace)
        threading.settrace(tracer.trace)
        import pytest

        args = ["-q", "-p", "no:cacheprovider", *target.tests]
        return int(pytest.main(args, plugins=[tracer, driver]))

    pid = _fork(run, work / "session.log")
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # interrupted: it stops its children on the way out
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(progress)
    data = json.loads(result.read_text(encoding="utf-8")) if result.exists() else None
    if data is None or "error" in data:
        log = (work / "session.log").read_text(errors="replace").strip().splitlines()[-3:]
        why = data["error"] if data else " | ".join(log) or f"exit {status}"
        raise SystemExit(f"{target.module}: the mapped tests fail without any mutation: {why}")
    odds = _Odds(dict(data["kills"]), {(a, b): t for a, b, t in data["by_statement"]})
    return _Results(
        {k: set(v) for k, v in data["lines"].items()},
        {k: float(v) for k, v in data["seconds"].items()},
        {int(k): (bool(v[0]), str(v[1])) for k, v in data["outcomes"].items()},
        [int(i) for i in data["left"]],
        odds,
    )


def check_module(
    target: Target,
    jobs: int,
    timeout: float | None,
    work: Path,
    on_lines: tuple[int, int] | None = None,
    swapping: bool = True,
) -> list[Outcome]:
    """Run every mutant of one module (on `on_lines`, first and last, when given) against the
    tests that reach it; progress to stderr."""
    found = [
        m
        for m in mutants(target.module)
        if on_lines is None or on_lines[0] <= m.line <= on_lines[1]
    ]
    sources = [_copy_of_src(work / f"job{n}") for n in range(jobs)]
    started = time.monotonic()
    print(f"{target.module}: {len(found)} mutants", file=sys.stderr, flush=True)
    results = _collected_session(target, found, sources, timeout, work, swapping)
    outcomes = dict(results.outcomes)
    queue = []
    for index in results.left:
        tests = _covering(found[index], results.lines)
        if tests is None:  # code run at import: every test of the baseline, by their ids
            tests = _baseline_tests(results.seconds)
        queue.append(_Job(index, found[index], tests, _limit(tests, results.seconds, timeout)))

    def start(job: _Job, src: Path, write: int) -> int:
        chosen = results.odds.order(job.mutant, job.tests, results.seconds)
        return _fork(
            functools.partial(_in_child, src, ["-x", *chosen], [_NameFailure(write)]), None
        )

    def finish(job: _Job, killed: bool, detail: str, test: str) -> None:
        if killed and test:
            results.odds.killed(job.mutant, test)
        outcomes[job.index] = (killed, detail)
        print("." if killed else "S", end="", file=sys.stderr, flush=True)

    fresh_count, fresh_started = len(queue), time.monotonic()
    _run_queue(queue, list(sources), start, finish)  # it empties the queue
    fresh = (time.monotonic() - fresh_started) / max(1, fresh_count)
    elapsed = time.monotonic() - started
    print(
        f"\n{target.module}: {len(found)} mutants in {elapsed:.0f} s "
        f"({elapsed / max(1, len(found)):.1f} s a mutant; {fresh_count} in a fresh pytest, "
        f"{fresh:.1f} s each)",
        file=sys.stderr,
        flush=True,
    )
    return sorted(
        (Outcome(found[i], *outcomes[i]) for i in outcomes),
        key=lambda o: (o.mutant.line, o.mutant.description),
    )


class _NameFailure:
    """A pytest plugin: the first failing test's id goes to a pipe."""

    def __init__(self, write: int) -> None:
        self.write = write
        self.named = False

    def pytest_runtest_logreport(self, report: Any) -> None:
        """Name the test of the first failed report."""
        if report.failed and not self.named:
            os.write(self.write, report.nodeid.encode("utf-8"))
            self.named = True


def _line_range(text: str) -> tuple[int, int]:
    """`FIRST-LAST` (line numbers, FIRST <= LAST; LAST may be `end`) as a pair; argparse
    reports a bad one."""
    first, _, last = text.partition("-")
    try:
        pair = (int(first), sys.maxsize if last == "end" else int(last))
    except ValueError:
        example = "e.g. 1-400 or 801-end"
        raise argparse.ArgumentTypeError(f"{text!r} is not FIRST-LAST, {example}") from None
    if not 1 <= pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: FIRST must be at least 1 and at most LAST")
    return pair


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--module", action="append", help="a module of the map (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--lines", type=_line_range, help="only the mutants on lines FIRST-LAST (a run in parts)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 4x baseline)")
    parser.add_argument(
        "--fresh-imports",
        action="store_true",
        help="run every mutant in a fresh pytest, none in the collected session (slower)",
    )
    parser.add_argument("--json", type=Path, help="also write the outcomes to this file")
    parser.add_argument("--fail-under", type=float, help="exit 1 below this percentage killed")
    options = parser.parse_args(argv)
    targets = load_targets()
    if options.module:
        known = {t.module: t for t in targets}
        unknown = [m for m in options.module if m not in known]
        if unknown:
            parser.error(f"not in {TARGETS.name}: {', '.join(unknown)}")
        targets = [known[m] for m in options.module]
    if options.list:
        for target in targets:
            for mutant in mutants(target.module):
                if options.lines and not options.lines[0] <= mutant.line <= options.lines[1]:
                    continue
                print(f"src/unbounded/{mutant.module}:{mutant.line}: {mutant.description}")
        return 0
    _warm_imports()
    # A SIGTERM unwinds like Ctrl-C, so the children are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict[str, list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="mutation-") as work:
        for target in targets:
            folder = Path(work) / target.module.replace("/", "_")
            folder.mkdir()
            results[target.module] = check_module(
                target,
                max(1, options.jobs),
                options.timeout,
                folder,
                options.lines,
                swapping=not options.fresh_imports,
            )
    total = killed = 0
    report: dict[str, object] = {}
    for target in targets:
        outcomes = results[target.module]
        module_killed = sum(o.killed for o in outcomes)
        total += len(outcomes)
        killed += module_killed
        survivors = [o for o in outcomes if not o.killed]
        argued = [
            o for o in survivors if (o.mutant.line, o.mutant.description) in target.equivalent
        ]
        for outcome in survivors:
            if outcome not in argued:
                where = f"src/unbounded/{target.module}:{outcome.mutant.line}"
                print(f"{where}: {outcome.mutant.description}")
        for outcome in argued:
            why = target.equivalent[(outcome.mutant.line, outcome.mutant.description)]
            print(
                f"src/unbounded/{target.module}:{outcome.mutant.line}: "
                f"{outcome.mutant.description}  [equivalent: {why}]"
            )
        share = 100 * module_killed / len(outcomes) if outcomes else 100.0
        print(f"{target.module}: {module_killed} of {len(outcomes)} killed ({share:.1f}%)")
        report[target.module] = {
            "killed": module_killed,
            "total": len(outcomes),
            "survivors": [
                {"line": o.mutant.line, "mutation": o.mutant.description} for o in survivors
            ],
        }
    share = 100 * killed / total if total else 100.0
    print(f"overall: {killed} of {total} mutants killed ({share:.1f}%)")
    if options.json is not None:
        options.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    if options.fail_under is not None and share < options.fail_under:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
