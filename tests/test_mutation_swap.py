"""`scripts/mutation_swap.py`: a mutant put into a module already imported, or refused."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import mutation_swap  # noqa: E402  (a script beside mutation_check.py, not a package)

SOURCE = textwrap.dedent(
    '''
    """A module to mutate."""
    import functools

    LIMIT = 3
    HANDLERS = {}


    def over(n):
        return n > LIMIT


    def register(name):
        def keep(function):
            HANDLERS[name] = function
            return function

        return keep


    @register("small")
    def small(n):
        return n < 2


    def logged(function):
        @functools.wraps(function)
        def wrapper(n):
            return function(n) and True

        return wrapper


    @logged
    def even(n):
        return n % 2 == 0


    class Box:
        size = 4

        def fits(self, n, extra=0):
            return n + extra <= self.size

        @property
        def empty(self):
            return self.size == 0

        @staticmethod
        def double(n):
            return [n * k for k in (1, 2)][-1]
    '''
)


def _load(tmp_path: Path, name: str) -> tuple[ModuleType, str]:
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


def _plan(module_file: str, old: str, new: str) -> mutation_swap.Swap | None:
    assert SOURCE.count(old) == 1, old
    live = mutation_swap.live_functions(module_file)
    return mutation_swap.plan(SOURCE, SOURCE.replace(old, new), module_file, live)


def test_a_mutated_function_body_runs_through_every_reference(tmp_path: Path) -> None:
    module, path = _load(tmp_path, "swap_body")
    held = module.over  # as another module's `from ... import over` would hold it
    swap = _plan(path, "return n > LIMIT", "return n <= LIMIT")
    assert swap is not None and held(4) is True
    swap.apply()
    assert held(4) is False and module.over(1) is True


@pytest.mark.parametrize(
    ("old", "new", "call", "before", "after"),
    [
        ("return n < 2", "return n >= 2", lambda m: m.HANDLERS["small"](1), True, False),
        ("return n % 2 == 0", "return n % 2 != 0", lambda m: m.even(2), True, False),
        (
            "return function(n) and True",
            "return function(n) or True",
            lambda m: m.even(3),
            False,
            True,
        ),
        (
            "return n + extra <= self.size",
            "return n + extra > self.size",
            lambda m: m.Box().fits(1),
            True,
            False,
        ),
        ("return self.size == 0", "return self.size != 0", lambda m: m.Box().empty, False, True),
        ("for k in (1, 2)][-1]", "for k in (1, 2)][0]", lambda m: m.Box.double(5), 10, 5),
    ],
    ids=["registered", "decorated", "closure-made-at-import", "method", "property", "staticmethod"],
)
def test_functions_held_by_decorators_classes_and_registries_are_swapped(
    tmp_path: Path, old: str, new: str, call: object, before: object, after: object
) -> None:
    module, path = _load(tmp_path, f"swap_{abs(hash(old))}")
    swap = _plan(path, old, new)
    assert swap is not None and call(module) == before  # type: ignore[operator]
    swap.apply()
    assert call(module) == after  # type: ignore[operator]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("LIMIT = 3", "LIMIT = 4"),  # a module constant
        ("size = 4", "size = 5"),  # a class attribute
        ("extra=0", "extra=1"),  # a default, evaluated at import
        ('@register("small")', '@register("big")'),  # a decorator's argument
    ],
)
def test_a_mutant_of_code_run_at_import_is_refused(tmp_path: Path, old: str, new: str) -> None:
    _, path = _load(tmp_path, f"refuse_{abs(hash(old))}")
    assert _plan(path, old, new) is None


def test_a_function_not_alive_in_the_process_is_refused(tmp_path: Path) -> None:
    _, path = _load(tmp_path, "swap_gone")
    live = mutation_swap.live_functions(path)
    del live[next(key for key in live if key[0] == "over")]
    mutated = SOURCE.replace("return n > LIMIT", "return n <= LIMIT")
    assert mutation_swap.plan(SOURCE, mutated, path, live) is None


def test_a_dropped_body_shifts_later_lines_without_changing_their_functions(tmp_path: Path) -> None:
    module, path = _load(tmp_path, "swap_shift")
    dropped = "if n:\n        m = n\n        return m > LIMIT\n    return False"
    source = SOURCE.replace("return n > LIMIT", dropped)
    module_path = Path(path)
    module_path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("swap_shift_2", module_path)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    live = mutation_swap.live_functions(path)
    mutated = source.replace(dropped, "if n:\n        pass\n    return False")
    swap = mutation_swap.plan(source, mutated, path, live)
    assert swap is not None
    assert [f.__qualname__ for f, _ in swap.functions] == ["over"]
    swap.apply()
    assert fresh.over(5) is False and module.over(5) is True
