"""`scripts/mutation_check.py`: the covering tests of a mutant run likeliest killer first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutation_check.py"


def _script() -> ModuleType:
    if str(SCRIPT.parent) not in sys.path:  # it imports mutation_swap.py from beside it
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("mutation_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_check", module)
    spec.loader.exec_module(module)
    return module


def _mutant(script: ModuleType, first: int, last: int) -> object:
    return script.Mutant("m.py", first, "constant 1 -> 2", "", first, last)


def test_with_no_kills_yet_the_quickest_test_runs_first() -> None:
    script = _script()
    seconds = {"t/slow": 2.0, "t/quick": 0.1, "t/mid": 0.5}
    order = script._Odds().order(_mutant(script, 3, 4), ["t/slow", "t/quick", "t/mid"], seconds)
    assert order == ["t/quick", "t/mid", "t/slow"]


def test_a_test_that_killed_more_runs_before_a_quicker_one() -> None:
    script = _script()
    odds = script._Odds()
    seconds = {"t/slow": 2.0, "t/quick": 0.1, "t/mid": 0.5}
    odds.killed(_mutant(script, 10, 10), "t/slow")
    odds.killed(_mutant(script, 20, 20), "t/slow")
    odds.killed(_mutant(script, 30, 30), "t/mid")
    order = odds.order(_mutant(script, 3, 4), ["t/quick", "t/mid", "t/slow"], seconds)
    assert order == ["t/slow", "t/mid", "t/quick"]


def test_the_killer_of_the_same_statement_runs_first_of_all() -> None:
    script = _script()
    odds = script._Odds()
    seconds = {"t/a": 0.1, "t/b": 0.2, "t/c": 3.0}
    for line in (10, 20):
        odds.killed(_mutant(script, line, line), "t/a")
    odds.killed(_mutant(script, 3, 4), "t/c")
    assert odds.order(_mutant(script, 3, 4), ["t/a", "t/b", "t/c"], seconds) == [
        "t/c",
        "t/a",
        "t/b",
    ]
    # Another statement, even one sharing a line, does not count as the same.
    assert odds.order(_mutant(script, 3, 5), ["t/a", "t/b", "t/c"], seconds) == [
        "t/a",
        "t/c",
        "t/b",
    ]


def test_a_mutant_of_code_run_at_import_runs_every_test_of_the_baseline() -> None:
    # A test that runs no line of the module still counts: it may read a constant directly.
    script = _script()
    seconds = {"tests/b.py::reads_a_constant": 0.5, "tests/a.py::t[x]": 2.0, "tests/a.py::q": 0.1}
    every = script._baseline_tests(seconds)
    assert every == ["tests/a.py::q", "tests/a.py::t[x]", "tests/b.py::reads_a_constant"]
    odds = script._Odds()
    odds.killed(_mutant(script, 100, 160), "tests/a.py::t[x]")
    assert odds.order(_mutant(script, 100, 160), every, seconds) == [
        "tests/a.py::t[x]",
        "tests/a.py::q",
        "tests/b.py::reads_a_constant",
    ]
