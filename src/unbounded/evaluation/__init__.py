"""Replay recorded sessions under a policy, measure what compaction keeps, report it.

See docs/replay.md. `replay_session` / `replay_transcript` (replay.py) run a recorded session
through the `Session` pipeline and the baselines (baselines.py); `evaluate_transcripts`
(evaluate.py) scores retention at compaction points; `ProbeExam` (probes.py) examines the
hand-overs of each compaction point with models; `render_report_html` (report.py) writes
the HTML report.
"""

from unbounded.evaluation.evaluate import EvalReport, evaluate_sync, evaluate_transcripts
from unbounded.evaluation.probes import ProbeExam
from unbounded.evaluation.replay import (
    ReplayOptions,
    ReplayReport,
    replay_session,
    replay_transcript,
)
from unbounded.evaluation.report import render_report_html

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
