"""One errors module: every exception class of the package is defined in `unbounded.errors`,
drawn in its docstring's tree, importable from `unbounded`, and from where it used to live."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import unbounded
from unbounded import errors

PACKAGE = Path(unbounded.__file__).resolve().parent
_SKIPPED = {"unbounded.__main__"}  # importing it runs the CLI


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
    assert len(public) == 19  # the tree drawn in the docstring
    tree = (errors.__doc__ or "").split("\n\n")[1]
    for error in public:
        assert getattr(unbounded, error.__name__) is error
        assert error.__name__ in unbounded.__all__
        assert error is errors.UnboundedError or issubclass(error, errors.UnboundedError)
        assert f"── {error.__name__}" in tree or error is errors.UnboundedError, error.__name__


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("unbounded.compaction.summary_text", "CompactionError"),
        ("unbounded.compaction", "CompactionError"),
        ("unbounded.session", "SessionClosedError"),
        ("unbounded.storage", "SessionLockedError"),
        ("unbounded.storage", "StoreDamagedError"),
        ("unbounded.hooks", "HookBlockingError"),
        ("unbounded.recall.schema", "RecallArgumentError"),
        ("unbounded.recall", "RecallArgumentError"),
        ("unbounded.integrations.agent_loop", "ToolArgumentError"),
        ("unbounded.providers.base", "PromptTooLongError"),
        ("unbounded.providers.base", "RateLimitedError"),
    ],
)
def test_the_old_import_paths_still_work(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_tool_argument_errors_are_still_value_errors() -> None:
    with pytest.raises(ValueError, match="count"):
        raise errors.ToolArgumentError("count: not an integer")
    assert issubclass(errors.ToolArgumentError, errors.UnboundedError)
