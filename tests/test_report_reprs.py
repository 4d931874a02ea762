"""Eval's and replay's reports have short reprs however large they grow: `asyncio.run`
formats the finished task's result (3.11, restoring the SIGINT handler), and a full repr of
a 1 GiB file's eval report was an 80 MB string at the end of `unbounded eval`."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path
from typing import Any

from unbounded.evaluation.evaluate import EvalReport
from unbounded.evaluation.replay import replay_session
from unbounded.transcripts.loader import load_transcript

SESSION = Path(__file__).parent / "fixtures" / "sessions" / "resumed.jsonl"


class _HugeRepr:
    """A point whose repr is a megabyte, as a long summary's is."""

    def __repr__(self) -> str:
        return "x" * 1_000_000


def _report() -> EvalReport:
    points: list[Any] = [_HugeRepr() for _ in range(5)]
    return EvalReport(summarizers=["extractive"], points=points, sessions=["s"])


def test_the_repr_names_its_size_not_its_points() -> None:
    text = repr(_report())
    assert text == "EvalReport(summarizers=['extractive'], sessions=1, points=5)"


def test_asyncio_run_returns_a_report_without_formatting_it() -> None:
    async def evaluate() -> EvalReport:
        return _report()

    tracemalloc.start()
    try:
        report = asyncio.run(evaluate())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(report.points) == 5
    assert peak < 1_000_000  # one point's repr alone would be a megabyte


def test_a_replay_report_names_its_size_not_its_contents() -> None:
    report = replay_session(load_transcript(SESSION))
    report.timeline.extend(report.timeline * 1000)  # as long as a long replay's
    text = repr(report)
    assert text.startswith("ReplayReport(") and f"calls={len(report.points)}" in text
    assert len(text) < 200
