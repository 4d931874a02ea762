"""`replay --report FILE.html`: one self-contained page with the charts and the timeline."""

from __future__ import annotations

import html
import re
from pathlib import Path

from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.evaluation.report import (
    NARROW,
    STRATEGIES,
    WIDE,
    cache_chart,
    context_chart,
    render_report_html,
)
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
    # Three inline SVG charts (context with thresholds and marks, cache, cumulative cost),
    # each drawn for a desktop and for a phone.
    assert page.count("<svg") == 6
    assert page.count("class='chart wide'") == page.count("class='chart narrow'") == 3
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
    assert "recorded cost" not in page and page.count("<svg") == 6


def test_report_marks_compactions(session_2_1: Path) -> None:
    report = replay_session(
        load_transcript(session_2_1), ReplayOptions(window=19_000, policy=Policy(autocompact_pct_override=80))
    )
    assert report.compactions >= 1
    page = render_report_html(report)
    assert page.count("compaction</title>") == 2 * report.compactions  # wide and narrow charts
    assert "What our compactions kept" in page and "RETENTION.md" not in page
    assert "What the next turns needed" in page  # the continuation measure
    for kind in report.continuation():
        assert f"<td>{kind}</td>" in page


# -- the page's edges ---------------------------------------------------------------------------


def _session(tmp_path: Path, calls: int, *, zero_usage_of: int | None = None) -> Path:
    """A session of `calls` calls (one of them with an all-zero usage when asked, as Claude
    Code records for a call that reported none)."""
    import importlib.util
    import json

    from conftest import FIXTURES

    spec = importlib.util.spec_from_file_location("build_sessions", FIXTURES / "build_sessions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder = module.SessionBuilder("5e55107a-0000-4000-8000-000000000077", tag=77)
    builder.prompt("Look around.")
    for number in range(calls - 1):
        builder.round("Bash", {"command": f"ls {number}"}, "a.py\nb.py\n" * 50)
    builder.say("Done.")
    records = builder.records
    if zero_usage_of is not None:
        ids = list(dict.fromkeys(r["message"]["id"] for r in records if r["type"] == "assistant"))
        for record in records:
            if record["type"] == "assistant" and record["message"]["id"] == ids[zero_usage_of]:
                record["message"]["usage"] = {key: 0 for key in record["message"]["usage"]}
    path = tmp_path / f"calls-{calls}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _numbers(element: str, name: str) -> float:
    match = re.search(rf'{name}="([-0-9.]+)"', element)
    assert match, element
    return float(match.group(1))


def test_a_one_call_session_draws_a_dot_and_a_bar_inside_the_axes(tmp_path: Path) -> None:
    report = replay_session(load_transcript(_session(tmp_path, 1)), ReplayOptions(policy=Policy()))
    assert report.calls == 1
    for frame in (WIDE, NARROW):
        context = context_chart(report, frame)
        assert "<circle" in context  # one point: a dot, not an invisible line
        cache = cache_chart(report, frame)
        bars = re.findall(r"<rect x=[^>]*><title>call 0:", cache)
        assert bars
        for bar in bars:
            left, width = _numbers(bar, "x"), _numbers(bar, "width")
            assert frame.left < left and left + width < frame.plot_right
            assert width <= 40
        # the axis labels sit left of the axis, where no bar reaches
        labels = re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end">([^<]+)<', cache)
        ticks = [float(x) for x, text in labels if text != "call"]
        assert ticks and all(x < frame.left for x in ticks)


def test_a_call_without_usage_breaks_the_recorded_line(tmp_path: Path) -> None:
    path = _session(tmp_path, 6, zero_usage_of=3)
    report = replay_session(load_transcript(path), ReplayOptions(policy=Policy()))
    assert [p.recorded_context_tokens for p in report.points].count(0) == 1
    chart = context_chart(report, WIDE)
    recorded = re.search(r"<g><title>recorded</title>(.*?)</g>", chart)
    assert recorded
    segments = re.findall(r"<polyline|<circle", recorded.group(1))
    assert len(segments) == 2  # calls 0-2, then 4-5: a gap, not a drop to 0
    assert not re.search(rf',{WIDE.plot_bottom}\.0( |")', recorded.group(1))


def test_the_page_explains_the_strategies_and_fits_a_phone(session_2_1: Path) -> None:
    page = render_report_html(replay_session(load_transcript(session_2_1), ReplayOptions()))
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    assert "@media (max-width: 700px)" in page
    for name, text in STRATEGIES.items():
        assert f"<dt>{name}</dt>" in page and html.escape(text) in page
    assert "../shared" not in page and "seed" not in page.lower()
    # every chart scales to the page width; the narrow ones are 360 units wide
    assert page.count('viewBox="0 0 360 ') == 3 and page.count('viewBox="0 0 1100 ') == 3
