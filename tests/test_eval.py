"""`unbounded eval`: the deterministic diagnostics (retention, continuation); the exam is tests/test_exam.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, corpus_files
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.compaction.facts import compaction_points, extract_facts, retention_scores
from unbounded.evaluation.evaluate import evaluate_sync, evaluation_points
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.transcripts.loader import load_transcript

runner = CliRunner()
FACT_TYPES = ("user_prompts", "modified_files", "read_files", "errors", "commands")
COMPACTED = [
    p
    for p in corpus_files("marot-spotter_*.jsonl")
    if "agent-" not in p.name and load_transcript(p).boundaries()
]


def eval_json(*args: str) -> dict[str, Any]:
    from unbounded.cli import eval_command  # noqa: F401

    result = runner.invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.stderr + result.stdout
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_eval_json_shape_on_the_fixture(session_2_1: Path) -> None:
    data = eval_json(str(session_2_1))
    assert data["sessions"] == 1 and data["points"] == 1
    for name in FACT_TYPES:
        assert set(data[name]) >= {"ours_summary", "ours_full", "recorded"}
    assert isinstance(data["compression"], float) and data["compression"] < 1  # tiny: may be < 0
    # The fixture records a compaction: its summary is scored too.
    assert data["recorded_points"] == 1
    point = data["per_session"][0]["points"][0]
    assert point["point"] == "boundary 1" and point["recorded"] is not None


def test_eval_matches_the_facts_module(session_2_1: Path) -> None:
    """Scores are exactly compaction/facts.py's on the records before the boundary."""
    transcript = load_transcript(session_2_1)
    (point,) = compaction_points(transcript.main_thread())
    expected = retention_scores(extract_facts(point.before), point.recorded_summary)
    report = evaluate_sync([("s", transcript)], [ExtractiveSummarizer()])
    (evaluated,) = report.points
    assert evaluated.recorded_scores == {
        "user_prompts": expected["user_prompts"],
        "modified_files": expected["files_modified"],
        "read_files": expected["files_read"],
        "errors": expected["errors"],
        "commands": expected["commands"],
    }


def test_a_transcript_without_boundary_is_evaluated_at_its_end(session_1_0: Path) -> None:
    transcript = load_transcript(session_1_0)
    (point,) = evaluation_points(transcript)
    assert point.label == "end" and point.recorded_summary == "" and point.before
    assert point.recorded_pre_tokens is None
    data = eval_json(str(session_1_0))
    assert data["recorded_points"] == 0
    assert all(data[name]["recorded"] is None for name in FACT_TYPES)


def test_several_summarizers_and_a_bad_one(session_2_1: Path) -> None:
    from unbounded.cli import eval_command  # noqa: F401

    result = runner.invoke(app, ["eval", str(session_2_1), "-s", "nope"])
    assert result.exit_code == 2 and "nope" in result.stderr


@pytest.mark.corpus
def test_eval_on_the_corpus() -> None:
    if len(COMPACTED) != 2:
        pytest.skip("../shared/corpus/raw is not present")
    data = eval_json(*(str(p) for p in COMPACTED))
    assert data["sessions"] == 2 and data["points"] == 2 and data["recorded_points"] == 2
    # Our offline hand-over keeps every request, every file changed and every file read at
    # both recorded compaction points, and names more errors and commands than the recorded
    # summaries (it shows commands by the checks they ran, not as a list of every one).
    for name in ("user_prompts", "modified_files", "read_files"):
        assert data[name]["ours_summary"] == 1.0
        assert data[name]["ours_full"] == 1.0
    for name in ("errors", "commands"):
        assert data[name]["ours_summary"] >= data[name]["recorded"]
    # Claude Code's own summaries (docs/summaries.md): 13/14, 20/26, 0/3, 11/49, 3/3. Files
    # read count shell reads too (`tail` of a task's output file: RETENTION.md's "cat-like
    # actions"), two of which the recorded summaries do not name.
    assert data["modified_files"]["recorded"] == pytest.approx(13 / 14, abs=1e-3)
    assert data["read_files"]["recorded"] == pytest.approx(20 / 26, abs=1e-3)
    assert data["errors"]["recorded"] == 0.0
    assert data["commands"]["recorded"] == pytest.approx(11 / 49, abs=1e-3)
    assert data["user_prompts"]["recorded"] == 1.0
    assert data["compression"] > 0.9 and data["recorded_compression"] > 0.9


@pytest.mark.corpus
def test_eval_on_every_corpus_file() -> None:
    paths = [p for p in corpus_files() if p.suffix in (".jsonl", ".traj")]
    if not paths:
        pytest.skip("../shared/corpus/raw is not present")
    data = eval_json(*(str(p) for p in paths))
    assert data["sessions"] == len(paths)
    assert data["user_prompts"]["ours_summary"] == 1.0
    # Files changed: every one on the sessions whose summaries Claude Code recorded, and at
    # least 0.8 on each other session. Two fall short of all: the Codex rollout changed 75
    # files over 54 requests, and within its 4,000-token summary the hand-over keeps every
    # request and lists the newest files ("(N more)"); on claude-code-log_37f83ec9 the last
    # steps shown verbatim leave one of five files unnamed (a known loss, to be won back).
    for path in paths:
        one = eval_json(str(path))
        modified = one["modified_files"]
        if modified.get("ours_summary") is None:
            continue
        if modified.get("recorded") is not None:
            assert modified["ours_summary"] >= max(0.98, modified["recorded"]), path.name
        elif not path.name.startswith("OpenPrintKit_codex"):
            assert modified["ours_summary"] >= 0.8, path.name
    for name in ("read_files", "errors", "commands"):
        assert data[name]["ours_summary"] >= data[name]["recorded"]


# -- the probe exam: tests/test_exam.py ---------------------------------------------------------


def test_corpus_root_is_the_shared_folder() -> None:
    assert Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw" == CORPUS
