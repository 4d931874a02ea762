"""`replay --report FILE.html`: one self-contained page with the charts and the timeline."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.evaluation.report import render_report_html
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

runner = CliRunner()


def test_report_is_self_contained_with_the_charts(session_2_1: Path, tmp_path: Path) -> None:
    from unbounded.cli import replay_command  # noqa: F401

    target = tmp_path / "report.html"
    result = runner.invoke(
        app,
        ["replay", str(session_2_1), "--window", "19000", "--report", str(target)],
        env={"UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE": "80"},
    )
    assert result.exit_code == 0, result.stderr
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # Works offline: no http(s) URL, no script, no external stylesheet or image.
    assert not re.search(r"https?://", page)
    assert "<script" not in page and "<link" not in page and "<img" not in page
    # Three inline SVG charts: context with thresholds and marks, cache, cumulative cost.
    assert page.count("<svg") == 3
    assert "auto-compact" in page and "context tokens per call" in page
    assert "cache read" in page and "cumulative cost" in page
    for strategy in (
        "unbounded",
        "recorded",
        "none",
        "truncate",
        "summarize_no_cache",
        "clear_every_turn",
    ):
        assert strategy in page
    assert "Timeline" in page and "compaction" in page
    assert "report written to" in result.stdout


def test_report_renders_without_usage_or_events(tmp_path: Path) -> None:
    from unbounded.transcripts.loader import load_transcript as load

    fixture = Path(__file__).resolve().parent / "fixtures" / "swe_agent_v1.traj"
    report = replay_session(load(fixture), ReplayOptions(policy=Policy()))
    page = render_report_html(report)
    assert "recorded cost" not in page and page.count("<svg") == 3


def test_report_marks_compactions(session_2_1: Path) -> None:
    report = replay_session(
        load_transcript(session_2_1), ReplayOptions(window=19_000, policy=Policy(autocompact_pct_override=80))
    )
    assert report.compactions >= 1
    page = render_report_html(report)
    assert page.count("compaction</title>") == report.compactions
