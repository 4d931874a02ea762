"""benchmarks/run.py --json prints the replay figures (run quickly here, never timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "run.py"
README_BENCHMARKS = [
    "benchmarks/run.py",
    "benchmarks/core_speed.py",
    "benchmarks/estimation_accuracy.py",
    "benchmarks/cache_fidelity.py",
]
"""The benchmarks the README lists; each runs below as in a fresh clone (no corpus)."""


def test_benchmark_prints_its_figures(tmp_path: Path) -> None:
    # An empty corpus folder: the benchmark falls back to the demo session.
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--quick", "--corpus", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    for key in (
        "per_turn_us_median",
        "json_dumps_us_median",
        "per_turn_ratio",
        "replay_calls_per_s",
        "peak_rss_mb",
    ):
        assert isinstance(figures[key], (int, float)) and figures[key] > 0
    assert figures["session"] == "demo session (built in)"
    try:
        import langchain  # noqa: F401
    except ImportError:
        assert "langchain_per_call_us_median" not in figures
        assert "unbounded_middleware_per_call_us_median" not in figures
    else:
        for key in (
            "langchain_per_call_us_median",
            "langchain_summarization_per_call_us_median",
            "unbounded_middleware_per_call_us_median",
            "unbounded_middleware_first_call_us_median",
            "middleware_speedup_vs_langchain",
        ):
            assert figures[key] > 0, key
