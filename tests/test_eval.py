"""`unbounded eval`: deterministic retention (RETENTION.md) and the probe-and-judge evaluation."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apiserver import message, start_server
from conftest import CORPUS, corpus_files
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.cli.eval_command import run_eval
from unbounded.compaction.facts import compaction_points, extract_facts, retention_scores
from unbounded.evaluation.evaluate import evaluate_sync, evaluation_points
from unbounded.evaluation.probes import (
    CRITERIA,
    NAIVE_PROMPT,
    PROBES,
    ProbeRunner,
    conversation_text,
    parse_scores,
    probe_questions,
)
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import ModelResponse
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
    ((label, before, recorded, _after),) = evaluation_points(transcript)
    assert label == "end" and recorded == "" and before
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
    # Claude Code's own summaries (docs/summaries.md): 13/14, 20/24, 0/3, 11/49, 3/3.
    assert data["modified_files"]["recorded"] == pytest.approx(13 / 14, abs=1e-3)
    assert data["read_files"]["recorded"] == pytest.approx(20 / 24, abs=1e-3)
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
    # a file whose only write failed (the user declined it) is not reported as changed
    assert data["modified_files"]["ours_summary"] >= 0.98
    assert all(data[name]["ours_summary"] >= data[name]["recorded"] for name in FACT_TYPES)


# -- probe and judge ---------------------------------------------------------------------------


def last_text(request: ProviderRequest) -> str:
    last = request["messages"][-1]["content"]
    if isinstance(last, str):
        return last
    return "\n".join(str(b.get("text", "")) for b in last if isinstance(b, dict))


class Scripted:
    """An in-process model: answers probes, summarizes naively, and judges."""

    name = "scripted"
    supports_cache_edits = False

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        self.requests.append(request)
        system = str(request.get("system") or "")
        text = last_text(request)
        if "You grade answers" in system:
            # The judge: full marks when the answer names a file, else 1s.
            answer = re.search(r"<answer>\n(.*)\n</answer>", text, re.S)
            good = answer is not None and ".py" in answer.group(1)
            score = 5 if good else 1
            reply = "Scores: " + json.dumps({c: score for c in CRITERIA})
        elif text.endswith(NAIVE_PROMPT):
            reply = "We talked about a CLI flag."
        else:
            context = json.dumps(request["messages"])
            files = sorted(set(re.findall(r"[\w/]+\.py", context)))
            reply = "Files: " + ", ".join(files) if files else "I do not know."
        return ModelResponse(
            [{"type": "text", "text": reply}],
            "end_turn",
            {"input_tokens": 10, "output_tokens": 5},
            "m",
        )


def test_probe_questions_and_parsing() -> None:
    questions = probe_questions(extract_facts([]))
    assert set(questions) == set(PROBES)
    assert parse_scores(
        'x {"accuracy": 9, "context_awareness": 3, "artifact_trail": 2, '
        '"completeness": 1, "continuity": 0, "instruction_following": -2} y'
    ) == {
        "accuracy": 5.0,
        "context_awareness": 3.0,
        "artifact_trail": 2.0,
        "completeness": 1.0,
        "continuity": 0.0,
        "instruction_following": 0.0,
    }
    assert parse_scores("no json here") is None
    assert parse_scores('{"accuracy": 3}') is None
    long = [{"role": "user", "content": "a" * 1000}, {"role": "assistant", "content": "b" * 1000}]
    text = conversation_text(long, 500)
    assert len(text) < 600 and "left out" in text


def test_probe_and_judge_with_a_scripted_model(session_2_1: Path) -> None:
    model = Scripted()
    probe_runner = ProbeRunner(model, model, model="scripted-model")
    transcript = load_transcript(session_2_1)
    report = asyncio.run(
        run_eval([("s", transcript)], [ExtractiveSummarizer()], model=None, runner=probe_runner)
    )
    llm = report.to_dict()["llm"]
    assert set(llm["contexts"]) == {"ours", "naive", "recorded"}
    ours, naive = llm["contexts"]["ours"], llm["contexts"]["naive"]
    assert ours["graded"] == len(PROBES) and ours["unparsed"] == 0
    assert set(ours["criteria"]) == set(CRITERIA) and set(ours["probes"]) == set(PROBES)
    # Our context names the files (the facts ledger lists them); the naive summary does not.
    assert ours["overall"] == 5.0 and naive["overall"] == 1.0
    # The judge saw the full pre-compaction conversation as its reference.
    judged = [r for r in model.requests if "You grade answers" in str(r.get("system"))]
    assert judged and all("<reference>" in str(r["messages"][0]["content"]) for r in judged)
    # Probes were answered from the post-compaction context, never from the full history.
    naive_requests = [r for r in model.requests if last_text(r).endswith(NAIVE_PROMPT)]
    assert len(naive_requests) == 1


def test_eval_llm_through_the_local_api_server(
    session_2_1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--llm openai` against tests/apiserver.py: the whole path, SDK included."""
    scripted = Scripted()

    def reply(request: Any) -> Any:
        body = request.json
        messages = [
            {"role": m["role"], "content": m.get("content") or ""}
            for m in body["messages"]
            if m["role"] != "system"
        ]
        system = " ".join(m.get("content") or "" for m in body["messages"] if m["role"] == "system")
        answer = asyncio.run(
            scripted.create({"model": "m", "max_tokens": 1, "system": system, "messages": messages})
        )  # type: ignore[typeddict-item]
        return message(answer.text)

    with start_server() as api:
        api.openai.push(*([reply] * 40))
        monkeypatch.setenv("OPENAI_BASE_URL", api.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        data = eval_json(str(session_2_1), "--llm", "openai", "--model", "gpt-5")
        assert len(api.requests) == 1 + 3 * len(PROBES) * 2
    contexts = data["llm"]["contexts"]
    assert contexts["ours"]["overall"] == 5.0 and contexts["naive"]["overall"] == 1.0
    assert data["llm"]["model"] == "gpt-5"


def test_corpus_root_is_the_shared_folder() -> None:
    assert Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw" == CORPUS
