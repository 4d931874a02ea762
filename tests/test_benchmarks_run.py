"""The README's benchmarks run in a fresh clone (no corpus: the built-in demo session) and print
figures that make sense. Nothing here is timed: the bounds are on what the runs compute
(deterministic for the demo session), and on times only that they are consistent."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "run.py"
README_BENCHMARKS = [
    "benchmarks/run.py",
    "benchmarks/core_speed.py",
    "benchmarks/estimation_accuracy.py",
    "benchmarks/cache_fidelity.py",
    "benchmarks/turn_speed.py",
    "benchmarks/long_session.py",
    "benchmarks/big_transcript.py",
    "benchmarks/memory_trigger.py",
]
"""The benchmarks the README lists; each runs below as in a fresh clone (no corpus), but
turn_speed.py (tests/test_turn_pipeline.py), memory_trigger.py (tests/test_memory_trigger.py)
and long_session.py, which read no corpus, and big_transcript.py, whose gigabyte is not for
a test run."""


def run_benchmark(script: str, *args: str, corpus: Path) -> tuple[dict[str, Any], str]:
    """Run a README benchmark with --json (when it takes it); its JSON and its stderr."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS.parent / script), *args, "--corpus", str(corpus)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def test_benchmark_prints_its_figures(tmp_path: Path) -> None:
    # An empty corpus folder: the benchmark falls back to the demo session.
    figures, _ = run_benchmark("benchmarks/run.py", "--json", "--quick", corpus=tmp_path)
    assert figures["session"] == "demo session (built in)"
    for key in (
        "replay_turn_us_median",
        "json_dumps_us_median",
        "per_turn_ratio",
        "replay_calls_per_s",
        "peak_rss_mb",
    ):
        assert isinstance(figures[key], (int, float)) and math.isfinite(figures[key]), key
        assert figures[key] > 0, key
    # The ratio is the two medians' quotient; the replay speed is calls over seconds.
    ratio = figures["replay_turn_us_median"] / figures["json_dumps_us_median"]
    assert figures["per_turn_ratio"] == pytest.approx(ratio, rel=0.02, abs=0.002)
    assert figures["replay_calls"] == 117  # --quick: the demo's first third, every call of it
    assert figures["replay_calls_per_s"] == pytest.approx(
        figures["replay_calls"] / figures["replay_cli_seconds"], rel=0.05
    )
    # The longest timed turn is the fullest context of that third: under the 200k window.
    assert 20_000 < figures["replay_turn_context_tokens"] < 200_000
    assert figures["replay_turn_messages"] > 30  # early compactions keep it under ~80
    assert figures["peak_rss_mb"] < 2_000  # a process of the demo's size, not a leak
    # Every entry point at the same two history sizes (--quick), LangChain's beside ours.
    entry_points = ["session", "dropin"]
    try:
        import langchain  # noqa: F401
    except ImportError:
        assert "langchain_us_at_20" not in figures
    else:
        entry_points += ["middleware", "langchain"]
        for mark in (20, 60):
            speedup = figures[f"langchain_us_at_{mark}"] / figures[f"middleware_us_at_{mark}"]
            assert figures[f"middleware_speedup_vs_langchain_at_{mark}"] == pytest.approx(
                speedup, rel=0.02
            )
    for name in entry_points:
        for mark in (20, 60):
            assert 0 < figures[f"{name}_us_at_{mark}"] <= figures[f"{name}_max_us_at_{mark}"], (
                name,
                mark,
            )
        assert figures[f"{name}_growth"] == pytest.approx(
            figures[f"{name}_us_at_60"] / figures[f"{name}_us_at_20"], rel=0.02, abs=0.01
        )
        assert figures[f"{name}_ratio_60_to_20"] == figures[f"{name}_growth"], name


def test_fresh_clone_estimation_accuracy(tmp_path: Path) -> None:
    report, stderr = run_benchmark(
        "benchmarks/estimation_accuracy.py", "--json", corpus=tmp_path / "absent"
    )
    assert "--corpus" in stderr and "demo session" in stderr
    overall = report["overall"]
    assert overall["length/4"]["calls"] == 356
    # Anchored counting decides on the last reported usage: within half a percent at the
    # median on the demo session (0.06 %), and far closer than a from-scratch estimate.
    assert overall["anchored"]["median_error_pct"] < 0.5
    assert overall["anchored"]["p90_error_pct"] < 2
    assert overall["anchored"]["median_error_pct"] < overall["length/4"]["median_error_pct"] / 10


def test_fresh_clone_cache_fidelity(tmp_path: Path) -> None:
    report, stderr = run_benchmark(
        "benchmarks/cache_fidelity.py", "--json", corpus=tmp_path / "absent"
    )
    assert "--corpus" in stderr
    (row,) = report["fidelity"]
    assert row["calls"] == 356 and row["compactions"] == 4
    assert abs(row["error_pp"]) < 3  # -2.39 points on the demo session
    bridges = {item["blocks_per_turn"]: item for item in report["lookback_bridge"]}
    # Up to 20 blocks a turn the API's lookback finds the previous marker: the bridge
    # changes nothing. Past 20 Claude Code's placement misses every turn; the bridge reads.
    assert bridges[20]["claude_code"] == bridges[20]["bridge"]
    assert bridges[22]["claude_code"]["cache_read_share"] < 0.1
    assert bridges[22]["bridge"]["cache_read_share"] > 0.9


def test_fresh_clone_core_speed(tmp_path: Path) -> None:
    report, _ = run_benchmark("benchmarks/core_speed.py", corpus=tmp_path / "absent")
    assert "largest_session" not in report  # a generated conversation, no corpus file
    grown = report["at_2000_messages"]
    assert grown["messages"] >= 2_000
    assert grown["per_turn_ratio"] == pytest.approx(
        grown["per_turn_us_median"] / grown["json_dumps_us_median"], rel=0.05, abs=0.0002
    )


def test_benchmarks_take_odd_sessions(tmp_path: Path) -> None:
    """A model the table does not know, and a session without usage, are skipped by name."""
    source = (FIXTURES / "session_2_1.jsonl").read_text().splitlines()
    unknown, no_usage = [], []
    for line in source:
        record = json.loads(line)
        if record.get("type") == "assistant":
            record["message"]["model"] = "acme-coder-7b"
        unknown.append(json.dumps(record))
        usage = (
            record.get("message", {}).get("usage")
            if isinstance(record.get("message"), dict)
            else None
        )
        if isinstance(usage, dict):
            for key, value in usage.items():
                if isinstance(value, int):
                    usage[key] = 0
        no_usage.append(json.dumps(record))
    (tmp_path / "unknown_model.jsonl").write_text("\n".join(unknown) + "\n")
    (tmp_path / "no_usage.jsonl").write_text("\n".join(no_usage) + "\n")
    report, stderr = run_benchmark("benchmarks/cache_fidelity.py", "--json", corpus=tmp_path)
    assert report["fidelity"] == []
    assert "skipped unknown_model.jsonl: unknown model 'acme-coder-7b'" in stderr
    assert "skipped no_usage.jsonl: fewer than two calls with recorded usage" in stderr
    report, stderr = run_benchmark("benchmarks/estimation_accuracy.py", "--json", corpus=tmp_path)
    assert list(report["sessions"]) == ["unknown_model.jsonl"]
    assert "skipped no_usage.jsonl" in stderr


def test_long_session_benchmark_reports_time_per_call_and_memory() -> None:
    """`benchmarks/long_session.py` at tiny sizes: every size replayed, its figures given."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "long_session.py"), "--calls", "30,60", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert sorted(figures["sizes"]) == ["30", "60"]
    for calls, row in figures["sizes"].items():
        assert row["calls"] == int(calls) and row["invalid_requests"] == 0
        assert row["records"] > 4 * int(calls)  # progress lines and results: many small records
        assert row["us_per_call"] == pytest.approx(row["seconds"] / row["calls"] * 1e6, rel=0.01)
        assert 0 < row["peak_rss_mib"] < 2_000
        # The replay's own CPU time: no more than its wall time, counted per call.
        assert 0 < row["cpu_seconds"] <= row["seconds"]
        assert row["cpu_us_per_call"] == pytest.approx(
            row["cpu_seconds"] / row["calls"] * 1e6, rel=0.01
        )
    assert figures["per_call_growth"] == pytest.approx(
        figures["sizes"]["60"]["us_per_call"] / figures["sizes"]["30"]["us_per_call"], rel=0.02
    )
    assert figures["cpu_per_call_growth"] == pytest.approx(
        figures["sizes"]["60"]["cpu_us_per_call"] / figures["sizes"]["30"]["cpu_us_per_call"],
        rel=0.02,
    )
    # Each size's row also went to stderr as it was measured (kept if a later size is stopped).
    rows = [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"calls"')]
    assert rows == [{"calls": int(calls), **row} for calls, row in figures["sizes"].items()]


def test_long_session_benchmark_replays_a_kept_file_again_as_it_is(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / "long_session.py"), "--calls", "20"]
    command += ["--keep", str(tmp_path), "--json"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert first.returncode == 0, first.stderr
    kept = tmp_path / "long-20.jsonl"
    kept.write_bytes(kept.read_bytes() + b"\n")  # marked: a new file would not end so
    again = subprocess.run(
        [*command, "--reuse"], capture_output=True, text=True, timeout=600, check=False
    )
    assert again.returncode == 0, again.stderr
    assert kept.read_bytes().endswith(b"\n\n")  # replayed as it was, not written again
    before, after = (json.loads(run.stdout)["sizes"]["20"] for run in (first, again))
    assert after["calls"] == before["calls"] == 20
    assert (after["records"], after["recorded_compactions"]) == (
        before["records"],
        before["recorded_compactions"],
    )
    assert after["file_mib"] >= before["file_mib"]
