"""What an object holds: the objects reachable from it by reference, and their bytes (the
memory tests compare these between two call counts)."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Collection, Iterable

CODE = (type, types.ModuleType, types.FunctionType)
"""Never followed: a class, a module or a function reaches every module's state (and what
other tests left there), not the data a test measures."""


def reachable(
    roots: Iterable[object], stop: Collection[int] = frozenset(), skip: tuple[type, ...] = ()
) -> list[object]:
    """Every object reachable from `roots` (themselves included), each once, not entering
    code (`CODE`), an object whose id is in `stop`, nor an instance of `skip`."""
    seen: dict[int, object] = {}
    todo = list(roots)
    while todo:
        item = todo.pop()
        if id(item) in seen or id(item) in stop or isinstance(item, (*CODE, *skip)):
            continue
        seen[id(item)] = item
        todo.extend(gc.get_referents(item))
    return list(seen.values())


def bytes_held(
    roots: Iterable[object], stop: Collection[int] = frozenset(), skip: tuple[type, ...] = ()
) -> int:
    """`sys.getsizeof` summed over `reachable(roots, stop, skip)`."""
    return sum(sys.getsizeof(item) for item in reachable(roots, stop, skip))
