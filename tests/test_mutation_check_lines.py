"""`scripts/mutation_check.py --lines`: a module's mutants run in parts by line range."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


def test_a_line_range_is_first_to_last_inclusive() -> None:
    script = _script()
    assert script._line_range("1-400") == (1, 400) and script._line_range("7-7") == (7, 7)
    assert script._line_range("801-end") == (801, sys.maxsize)
    for bad in ("0-3", "5-4", "12", "a-b", "end-9", "9-ending"):
        with pytest.raises(argparse.ArgumentTypeError):
            script._line_range(bad)


def test_listing_a_part_lists_only_the_mutants_on_its_lines(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    every = [m.line for m in script.mutants("compaction/handover.py")]
    first, last = sorted(set(every))[1], sorted(set(every))[3]
    assert script.main(["--module", "compaction/handover.py", "--list", "--lines", f"{first}-{last}"]) == 0
    listed = [int(line.split(":")[1]) for line in capsys.readouterr().out.splitlines()]
    assert listed == [n for n in every if first <= n <= last] and min(every) < first
