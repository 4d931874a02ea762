"""Replay recorded sessions under a policy, measure what compaction keeps, report it.

See docs/replay.md. `replay_session` / `replay_transcript` (replay.py) run a recorded session
through the `Session` pipeline and the baselines (baselines.py); `evaluate_transcripts`
(evaluate.py) scores retention at compaction points; `ProbeExam` (probes.py) examines the
hand-overs of each compaction point with models; `render_report_html` (report.py) writes
the HTML report.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unbounded.evaluation.evaluate import EvalReport, evaluate_sync, evaluate_transcripts
    from unbounded.evaluation.probes import ProbeExam
    from unbounded.evaluation.replay import (
        ReplayOptions,
        ReplayReport,
        replay_session,
        replay_transcript,
    )
    from unbounded.evaluation.report import render_report_html

_EXPORTS: dict[str, str] = {
    "EvalReport": "unbounded.evaluation.evaluate",
    "ProbeExam": "unbounded.evaluation.probes",
    "ReplayOptions": "unbounded.evaluation.replay",
    "ReplayReport": "unbounded.evaluation.replay",
    "evaluate_sync": "unbounded.evaluation.evaluate",
    "evaluate_transcripts": "unbounded.evaluation.evaluate",
    "render_report_html": "unbounded.evaluation.report",
    "replay_session": "unbounded.evaluation.replay",
    "replay_transcript": "unbounded.evaluation.replay",
}
"""Public name -> its module, imported on first use (a command that needs one part of the
package does not import the others)."""


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is used."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'unbounded.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "EvalReport",
    "ProbeExam",
    "ReplayOptions",
    "ReplayReport",
    "evaluate_sync",
    "evaluate_transcripts",
    "render_report_html",
    "replay_session",
    "replay_transcript",
]
