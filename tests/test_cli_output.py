"""What a user reads at 80 columns: `replay`, `inspect`, `compact` and `eval` print every
strategy and column name whole, paths are cut in the middle with the file name kept, counts
read as English, and help shows flags without a value type."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.cli import app
from unbounded.cli.app import console, error_console
from unbounded.cli.text import plural, shorten_middle, times
from unbounded.evaluation.baselines import BASELINES

runner = CliRunner()
UUID_NAME = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
LONG_DIR = "/home/someone/projects/spotter-worktrees/spotter-feature-branch/lib/spotter_web"


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI's consoles at 80 columns, as in a default terminal."""
    monkeypatch.setattr(console, "width", 80)
    monkeypatch.setattr(error_console, "width", 80)
    monkeypatch.setenv("HOME", "/nonexistent-home")  # no session of the machine's own
    yield


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide
    return result.stdout


def flat(out: str) -> str:
    """The output's words with box drawing and line breaks gone (a wrapped line joined)."""
    return " ".join(re.sub(r"[│╭╮╰╯─┃━┏┓┗┛┡┩┣┫┳┻╇╋┠┨]", " ", out).split())


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location(
        "build_sessions", FIXTURES / "build_sessions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def long_session(tmp_path: Path) -> Path:
    """A session under a UUID file name that reads files with long paths, some twice."""
    module = _builder()
    builder = module.SessionBuilder("5e55107a-0000-4000-8000-000000000042", tag=42)
    builder.prompt("Tidy the live views.")
    for round_number in range(2):
        for name in ("subagent_live.ex", "waiting_summary.ex"):
            builder.round(
                "Read",
                {"file_path": f"{LONG_DIR}/live/{name}"},
                f"defmodule X{round_number} do\n" + "  def f, do: :ok\n" * 200,
            )
    builder.round("Bash", {"command": "mix test"}, "12 tests, 0 failures")
    builder.say("Done.")
    path = tmp_path / UUID_NAME
    path.write_text("".join(json.dumps(r) + "\n" for r in builder.records), encoding="utf-8")
    return path


# -- the words --------------------------------------------------------------------------------


def test_counts_read_as_english() -> None:
    assert plural(1, "compaction") == "1 compaction"
    assert plural(2, "compaction") == "2 compactions"
    assert plural(1_200, "call") == "1,200 calls"
    assert [times(n) for n in (0, 1, 2, 20)] == ["0 times", "once", "twice", "20 times"]


@pytest.mark.parametrize("width", [12, 20, 40, 60])
def test_paths_are_cut_in_the_middle_keeping_the_file_name(width: int) -> None:
    path = f"{LONG_DIR}/live/waiting_summary/slice_builder.ex"
    short = shorten_middle(path, width)
    assert len(short) == width
    assert short.count("…") == 1
    assert short.endswith("slice_builder.ex") or width < len("slice_builder.ex") + 1
    if width >= 20:
        assert short.startswith("/")
    assert shorten_middle("short.py", width) == "short.py"


# -- the commands at 80 columns ---------------------------------------------------------------


def test_replay_prints_every_strategy_and_heading_whole(long_session: Path) -> None:
    out = run("replay", str(long_session))
    for name in ("recorded", "unbounded", *BASELINES):
        assert re.search(rf"^{name}\s", out, re.M), name
    cost = out[out.index("Cost of this session") :]
    for word in ("strategy", "cost", "vs", "unbounded", "summary", "calls", "overflows",
                 "cache", "reads", "peak", "context"):
        assert re.search(rf"(^|\s){word}(\s|$)", cost), word
    assert "…" not in cost
    # the UUID file name is cut in the middle: its end stays
    header = next(line for line in out.splitlines() if "session" in line and ".jsonl" in line)
    assert "5122611a9569.jsonl" in header
    assert "1 call " not in out and "calls" in out


def test_replay_reads_as_english_and_skips_an_empty_timeline(session_2_1: Path) -> None:
    out = run("replay", str(session_2_1))
    words = flat(out)
    assert "5 calls · 0 compactions (0 from session memory; notes updated 0 times)" in words
    assert "0 microcompactions · 0 cache breaks · 0 invalid requests" in words
    assert "Timeline: no compaction" in out and "┃ call ┃" not in out


def test_the_demo_replay_at_80_columns() -> None:
    out = run("replay")  # no session on this machine: the built-in demo
    assert "demo session" in out
    timeline = out[out.index("Timeline") : out.index("Cost of this session")]
    for kind in ("cache_break", "compaction"):  # (early free compactions: nothing cleared)
        assert kind in timeline
    assert "error level" not in out
    words = flat(out)
    assert re.search(r"\b\d+ compactions \(\d+ from session memory; notes updated \d+ times\)", words)
    assert not re.search(r"\b1 tool results\b", words)
    # where the cost goes, and a line per strategy
    assert "Where the cost goes" in out
    for name in ("unbounded:", "none:", "truncate:", "summarize_no_cache:", "clear_every_turn:"):
        assert name in out


def test_inspect_rows_and_paths_at_80_columns(long_session: Path) -> None:
    out = run("inspect", str(long_session))
    assert "…" in out  # something had to be cut at 80 columns: the paths, in the middle
    for name in ("subagent_live.ex", "waiting_summary.ex"):
        row = next(line for line in out.splitlines() if name in line)
        assert row.lstrip("│ ").startswith("/home/"), row
    for word in ("category", "tokens", "reported", "estimated", "system prompt + tools",
                 "tool results", "total"):
        assert word in out
    assert "5122611a9569.jsonl" in out


def test_compact_text_output_at_80_columns(session_2_1: Path) -> None:
    out = run("compact", str(session_2_1))
    assert not re.search(r"output\s+│?\s*None", out)
    assert "not written (-o FILE writes it)" in out
    for label in ("summarizer", "pre tokens", "post tokens", "compression", "boundary uuid"):
        assert label in out


def test_eval_tables_at_80_columns(session_2_1: Path, long_session: Path) -> None:
    out = run("eval", str(session_2_1), str(long_session))
    for heading in ("fact type", "facts", "ours: summary", "recorded summary", "session",
                    "points", "compression", "ours", "recorded"):
        assert heading in out
    assert "2 sessions evaluated" in out


# -- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["replay", "eval", "inspect", "compact"])
def test_help_shows_flags_without_a_value_and_paths_plainly(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    text = result.stdout
    assert "<bool>" not in text
    assert "{" not in text.splitlines()[1] if len(text.splitlines()) > 1 else True
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "PATH" in usage


def test_a_flag_given_a_value_is_refused_plainly(session_2_1: Path) -> None:
    result = runner.invoke(app, ["replay", str(session_2_1), "--series"])
    assert result.exit_code == 2
    assert "--series adds the per-call figures to the JSON output: add --json" in result.stderr


def test_compact_refuses_an_unknown_model_like_inspect_and_replay(session_2_1: Path) -> None:
    for command in ("compact", "inspect", "replay"):
        result = runner.invoke(app, [command, str(session_2_1), "--model", "nonexistent"])
        assert result.exit_code == 2, command
        assert "unknown model 'nonexistent'" in result.stderr


def test_eval_llm_errors_name_the_llm_option(
    session_2_1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = runner.invoke(app, ["eval", str(session_2_1), "--llm", "claude-sonnet-4-6"])
    assert result.exit_code == 2
    assert (
        "--llm claude-sonnet-4-6 (an Anthropic model) needs ANTHROPIC_API_KEY in the environment: "
        "export ANTHROPIC_API_KEY=<your key>" in result.stderr
    )
    assert "--summarizer" not in result.stderr


def test_a_summarizer_without_its_key_says_how_to_go_on_offline(
    session_2_1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = runner.invoke(app, ["compact", str(session_2_1), "--summarizer", "openai"])
    assert result.exit_code == 2
    assert (
        "--summarizer openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) in the environment: "
        "export OPENAI_API_KEY=<your key>, or --summarizer extractive to summarize offline"
    ) in " ".join(result.stderr.split())


def test_the_top_level_help_shows_its_flags_without_a_value() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--version" in result.stdout and "<bool>" not in result.stdout


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"unbounded {version('unbounded')}"
