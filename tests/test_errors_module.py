"""One errors module: every exception class of the package is defined in `unbounded.errors`,
drawn in its docstring's tree, importable from `unbounded`, and listed by no other module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import unbounded
from unbounded import errors

PACKAGE = Path(unbounded.__file__).resolve().parent
_SKIPPED = {"unbounded.__main__"}  # importing it runs the CLI
PROVIDER_REEXPORTS = {"unbounded.providers", "unbounded.providers.base"}
"""Their re-exports of the provider errors are the provider package's change to remove."""


def _modules() -> dict[str, ast.Module]:
    """Dotted module name -> its parsed source, for every module of the package."""
    found: dict[str, ast.Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if name not in _SKIPPED:
            found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def _exception_classes_defined_in(name: str, tree: ast.Module) -> list[str]:
    """The exception classes a module's own source defines, anywhere in it."""
    module = importlib.import_module(name)
    defined: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        value = getattr(module, node.name, None)
        if isinstance(value, type) and value.__module__ == name:
            if issubclass(value, BaseException):
                defined.append(node.name)
        elif any(ast.unparse(base).endswith(("Error", "Exception")) for base in node.bases):
            defined.append(node.name)  # nested in a function: not importable, still counted
    return defined


def _public_errors() -> list[type[BaseException]]:
    return [
        value
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
        and not name.startswith("_")
    ]


def test_every_exception_class_is_defined_in_the_errors_module() -> None:
    elsewhere = {
        name: classes
        for name, tree in _modules().items()
        if name != errors.__name__ and (classes := _exception_classes_defined_in(name, tree))
    }
    assert elsewhere == {}, "define these in unbounded/errors.py and re-export them"


def test_the_check_sees_a_class_defined_outside() -> None:
    tree = ast.parse("class StrayError(ValueError):\n    pass\n")
    assert _exception_classes_defined_in("unbounded.errors", tree) == ["StrayError"]
    assert _exception_classes_defined_in("unbounded.errors", ast.parse("class A:\n    x = 1\n")) == []


def test_every_public_error_is_importable_from_the_package_and_drawn_in_the_tree() -> None:
    public = _public_errors()
    assert len(public) == 20  # the tree drawn in the docstring
    tree = (errors.__doc__ or "").split("\n\n")[1]
    for error in public:
        assert getattr(unbounded, error.__name__) is error
        assert error.__name__ in unbounded.__all__
        assert error is errors.UnboundedError or issubclass(error, errors.UnboundedError)
        assert f"── {error.__name__}" in tree or error is errors.UnboundedError, error.__name__


def test_no_other_module_lists_an_error_among_its_public_names() -> None:
    """One home: `unbounded` and `unbounded.errors` list the errors, no other module does
    (the old homes re-exported them)."""
    public = set(map(id, _public_errors()))
    listed = {
        name: sorted(n for n in getattr(module, "__all__", ()) if id(getattr(module, n, None)) in public)
        for name in _modules()
        if name not in ("unbounded", errors.__name__)
        and name not in PROVIDER_REEXPORTS
        for module in [importlib.import_module(name)]
    }
    assert {name: names for name, names in listed.items() if names} == {}


def test_tool_argument_errors_are_still_value_errors() -> None:
    with pytest.raises(ValueError, match="count"):
        raise errors.ToolArgumentError("count: not an integer")
    assert issubclass(errors.ToolArgumentError, errors.UnboundedError)
