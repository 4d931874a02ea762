"""A path with brackets is shown as it is: rich reads `[x]` as markup, so every name the
command prints (errors, warnings, table cells, the batch's repeat line) is escaped first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.app import console, error_console
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.cli.text import markup_safe

FIXTURE = Path(__file__).parent / "fixtures" / "sessions" / "interrupted.jsonl"


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)
    monkeypatch.setattr(error_console, "width", 200)


def test_an_error_names_a_bracketed_file_whole(tmp_path: Path) -> None:
    bad = tmp_path / "a[red]b.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["inspect", str(bad)])
    assert result.exit_code == 2
    assert "a[red]b.jsonl:1" in result.stderr


def test_a_batch_names_bracketed_files_in_errors_rows_and_repeats(tmp_path: Path) -> None:
    (tmp_path / "c[x].jsonl").write_text("not json\n", encoding="utf-8")
    shutil.copy(FIXTURE, tmp_path / "s[red]x.jsonl")
    shutil.copy(FIXTURE, tmp_path / "t[x].jsonl")
    result = CliRunner().invoke(app, ["replay", str(tmp_path)])
    assert result.exit_code == 2  # the file that is not a session
    assert "c[x].jsonl:1" in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith(str(tmp_path))]
    assert [line.split()[0] for line in rows[:2]] == [
        str(tmp_path / "s[red]x.jsonl"),
        str(tmp_path / "t[x].jsonl"),
    ]
    repeat = rows[-1]
    assert repeat.startswith(f"{tmp_path / 't[x].jsonl'} repeats ")
    assert str(tmp_path / "s[red]x.jsonl") in repeat


@given(st.text(alphabet="ab[]/\\ #@x", max_size=30))
def test_markup_safe_text_renders_as_it_is(text: str) -> None:
    """Whatever brackets and backslashes a name holds, rich shows it unchanged."""
    shown = Console(width=200, force_terminal=False, highlight=False)
    with shown.capture() as captured:
        shown.print(markup_safe(text), end="", soft_wrap=True)
    assert captured.get() == text
