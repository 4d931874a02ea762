"""Every module of the package compiles with warnings as errors: no invalid escape, no
`1if`-style literal, nothing a newer Python turns into a SyntaxError."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import unbounded

PACKAGE = Path(unbounded.__file__).resolve().parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_its_modules() -> None:
    names = {path.relative_to(PACKAGE).as_posix() for path in MODULES}
    assert {"__init__.py", "compaction/extractive.py", "compaction/handover.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_a_module_compiles_without_a_warning(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(source, str(path), "exec", dont_inherit=True)


def test_a_warning_while_compiling_fails() -> None:
    # The check above is only worth anything if a SyntaxWarning does surface as an error.
    with warnings.catch_warnings(), pytest.raises(SyntaxError):
        warnings.simplefilter("error")
        compile('x = "\\d"\n', "bad.py", "exec", dont_inherit=True)
