"""Apply a mutant to a module already imported, by giving its functions the mutated code.

Re-importing the package and the test files for every mutant costs seconds; most mutants
change only the body of a function, and a function object's code can be replaced in place.
Every reference to the function (other modules' imports, decorators, methods, registries)
then runs the mutated code, as if the mutated source had been imported.

A mutant is swappable only when that is exactly true: the module's and each class's body
code is unchanged (no constant, default, decorator or class attribute differs), no code
object appears or disappears, and each changed function is alive in the process with the
original code and a closure of the same size. Anything else is refused (`plan` answers
None) and the caller imports the mutated module afresh instead.
"""

from __future__ import annotations

import gc
import inspect
import types
from collections import defaultdict
from dataclasses import dataclass

Key = tuple[str, int]
"""A code object's name and first line in the original source."""


@dataclass(frozen=True)
class Swap:
    """The functions whose code a mutant changes, and the code each gets."""

    functions: tuple[tuple[types.FunctionType, types.CodeType], ...]

    def apply(self) -> None:
        """Give each function its mutated code (in this process, for good)."""
        for function, code in self.functions:
            function.__code__ = code


def live_functions(filename: str) -> dict[Key, list[types.FunctionType]]:
    """Every function object in this process whose code comes from `filename`."""
    found: dict[Key, list[types.FunctionType]] = defaultdict(list)
    for thing in gc.get_objects():
        if isinstance(thing, types.FunctionType) and thing.__code__.co_filename == filename:
            found[(thing.__code__.co_name, thing.__code__.co_firstlineno)].append(thing)
    return dict(found)


def _is_function(code: types.CodeType) -> bool:
    # Functions (comprehensions included) get fresh locals; a module or class body does not.
    return bool(code.co_flags & inspect.CO_NEWLOCALS)


def _nested(code: types.CodeType) -> list[types.CodeType]:
    return [c for c in code.co_consts if isinstance(c, types.CodeType)]


def _shape(code: types.CodeType, deep: bool) -> tuple[object, ...]:
    """What the code does, without its line numbers (a dropped body shifts later lines);
    nested code by its own shape when `deep`, else by name only."""
    consts = tuple(
        (_shape(c, deep) if deep else ("code", c.co_name))
        if isinstance(c, types.CodeType)
        else (type(c).__name__, c)
        for c in code.co_consts
    )
    return (
        code.co_name,
        code.co_flags,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        consts,
    )


def plan(
    original: str,
    mutated: str,
    filename: str,
    live: dict[Key, list[types.FunctionType]],
) -> Swap | None:
    """The swap that turns the imported `original` module into `mutated`, or None when
    the mutant changes code run at import, or a function that is not alive here."""
    before = compile(original, filename, "exec", dont_inherit=True)
    after = compile(mutated, filename, "exec", dont_inherit=True)
    changed: list[tuple[types.CodeType, types.CodeType]] = []

    def walk(old: types.CodeType, new: types.CodeType) -> bool:
        """Compare a module or class body and what it defines; False when a body differs."""
        if _shape(old, deep=False) != _shape(new, deep=False):
            return False
        # Same names in the same order (the shallow shapes compare them), so zip pairs them.
        for old_inner, new_inner in zip(_nested(old), _nested(new), strict=True):
            if not _is_function(old_inner):
                if not walk(old_inner, new_inner):
                    return False
            elif _shape(old_inner, deep=True) != _shape(new_inner, deep=True):
                changed.append((old_inner, new_inner))
        return True

    if not walk(before, after):
        return None
    functions: list[tuple[types.FunctionType, types.CodeType]] = []

    def alive(old: types.CodeType) -> list[types.FunctionType]:
        return [f for f in live.get((old.co_name, old.co_firstlineno), []) if f.__code__ == old]

    def swap_nested(old: types.CodeType, new: types.CodeType) -> bool:
        """Closures made before the fork (at import) keep their own code: swap theirs too."""
        olds, news = _nested(old), _nested(new)
        if [c.co_name for c in olds] != [c.co_name for c in news]:
            # A dropped body took a nested function with it: fine unless one is alive.
            return not any(alive(c) or not swap_nested(c, c) for c in olds)
        for old_inner, new_inner in zip(olds, news, strict=True):
            if _shape(old_inner, deep=True) != _shape(new_inner, deep=True):
                functions.extend((f, new_inner) for f in alive(old_inner))
            if not swap_nested(old_inner, new_inner):
                return False
        return True

    for old, new in changed:
        found = alive(old)
        if not found or not swap_nested(old, new):
            return None  # e.g. a comprehension run at import: no function holds it
        functions.extend((function, new) for function in found)
    if any(len(f.__closure__ or ()) != len(code.co_freevars) for f, code in functions):
        return None
    return Swap(tuple(functions))
