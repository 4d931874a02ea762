"""One events module: every event class of the package is defined in `unbounded.events`, and
no module re-exports one (a consumer imports each from there and matches on classes)."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import unbounded
from unbounded import events

_SKIPPED = {"unbounded.__main__"}  # importing it runs the CLI


def _modules() -> list[ModuleType]:
    """Every module of the package that imports without optional extras."""
    found = []
    for info in pkgutil.walk_packages(unbounded.__path__, "unbounded."):
        if info.name in _SKIPPED:
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:
            continue  # an optional dependency (langchain, psycopg) is missing
    return found


def _event_classes_outside(modules: list[ModuleType]) -> dict[str, list[str]]:
    """Module -> the Event subclasses it defines (its own, not imported)."""
    outside: dict[str, list[str]] = {}
    for module in modules:
        own = [
            name
            for name, value in vars(module).items()
            if isinstance(value, type)
            and issubclass(value, events.Event)
            and value.__module__ == module.__name__
            and module is not events
        ]
        if own:
            outside[module.__name__] = sorted(own)
    return outside


def test_every_event_class_is_defined_in_the_events_module() -> None:
    modules = _modules()
    assert len(modules) > 100  # the walk really saw the package
    assert _event_classes_outside(modules) == {}, "define these in unbounded/events.py"


def test_the_check_sees_an_event_class_defined_outside() -> None:
    stray = ModuleType("unbounded.stray")
    exec("from unbounded.events import Event\nclass StrayHappened(Event):\n    pass\n", vars(stray))
    assert _event_classes_outside([stray]) == {"unbounded.stray": ["StrayHappened"]}


def test_no_package_lists_an_event_in_its_public_names() -> None:
    listed = {
        module.__name__: sorted(
            name
            for name in getattr(module, "__all__", ())
            if isinstance(getattr(module, name, None), type)
            and issubclass(getattr(module, name), events.Event)
        )
        for module in _modules()
        if module is not events
    }
    assert {name: names for name, names in listed.items() if names} == {}, "list them in events"
