"""The `unbounded` command: inspect output, JSON shape, and clean failures on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import corpus_files
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)

runner = CliRunner()
REQUIRED_KEYS = {
    "format",
    "records",
    "messages",
    "api_calls",
    "context_tokens",
    "threshold",
    "percent_left",
    "boundaries",
    "accounting",
}


def invoke(*args: str) -> tuple[int, str, str]:
    from unbounded.cli import inspect_command  # noqa: F401

    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_inspect_json(session_2_1: Path) -> None:
    code, out, _ = invoke("inspect", str(session_2_1), "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) >= REQUIRED_KEYS
    assert data["format"] == "claude-code"
    assert data["records"] == 25
    assert data["api_calls"] == 5
    assert data["model"] == "claude-sonnet-4-5"
    assert data["threshold"] == {
        "effective_window": 180_000,
        "autocompact": 167_000,
        "warning": 147_000,
        "error": 147_000,
        "blocking": 197_000,
    }
    assert (
        data["boundaries"][0]["trigger"] == "auto"
        and data["boundaries"][0]["pre_tokens"] == 171_500
    )
    assert data["context_tokens"] == 5_000 + 200 + 20 + 3
    assert set(data["accounting"]["categories"]) >= {"tool_results", "user_messages"}


def test_inspect_model_and_window_overrides(session_2_1: Path) -> None:
    code, out, _ = invoke(
        "inspect", str(session_2_1), "--json", "--model", "gpt-4o", "--window", "100000"
    )
    data = json.loads(out)
    assert code == 0 and data["model"] == "gpt-4o" and data["context_window"] == 100_000
    assert data["threshold"]["autocompact"] == 100_000 - 16_384 - 13_000


def test_inspect_rich_output(session_2_1: Path) -> None:
    code, out, _ = invoke("inspect", str(session_2_1))
    assert code == 0
    for needle in (
        "unbounded inspect",
        "auto-compact",
        "Where the tokens go",
        "Top tools",
        "Compaction boundaries",
    ):
        assert needle in out


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"type":"user","uuid":"a","message":{"role":"user","content":"x"}}\n{oops\n')
    code, out, err = invoke("inspect", str(bad))
    assert code == 2
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "broken.jsonl:2" in lines[0] and "Traceback" not in err


def test_skip_invalid_reports_the_count(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"type":"user","uuid":"a","message":{"role":"user","content":"x"}}\n{oops\n')
    code, out, err = invoke("inspect", str(bad), "--json", "--skip-invalid")
    assert code == 0
    assert json.loads(out)["skipped_lines"] == 1
    assert "skipped 1 invalid line" in err


def test_torn_last_line_warns(tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_text(
        '{"type":"user","uuid":"a","message":{"role":"user","content":"x"}}\n{"type":"assis'
    )
    code, _out, err = invoke("inspect", str(torn), "--json")
    assert code == 0
    assert "torn last line" in err and "torn.jsonl:2" in err


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02binary", b"plain words\n"])
def test_empty_binary_unknown_exit_2(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.jsonl"
    path.write_bytes(content)
    code, _, err = invoke("inspect", str(path))
    assert code == 2 and "input.jsonl" in err and "Traceback" not in err


def test_unknown_model_exits_2(session_2_1: Path) -> None:
    code, _, err = invoke("inspect", str(session_2_1), "--model", "claude-nonexistent-9")
    assert code == 2 and "unknown model" in err


def test_console_script_runs(session_2_1: Path) -> None:
    """The installed entry point works as a subprocess (python -m unbounded)."""
    result = subprocess.run(
        [sys.executable, "-m", "unbounded", "inspect", str(session_2_1), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records"] == 25


@pytest.mark.parametrize("path", corpus_files() or [None], ids=lambda p: p.name if p else "absent")
def test_inspect_every_corpus_file(path: Path | None) -> None:
    if path is None:
        pytest.skip("../shared/corpus/raw is not present")
    code, out, err = invoke("inspect", str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= REQUIRED_KEYS
    assert data["context_tokens"] > 0
