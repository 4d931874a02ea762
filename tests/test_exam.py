"""The probe exam of `unbounded eval --llm MODEL`: three roles, each blind to what it must not
see, scripted in-process and behind the local API server through the real SDK."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apiserver import RecordedRequest, message, start_server
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.cli.eval_command import run_eval
from unbounded.errors import ConfigError
from unbounded.evaluation.probes import (
    ANSWERER_SYSTEM,
    CATEGORIES,
    EXAMINER_SYSTEM,
    GRADER_SYSTEM,
    NAIVE_PROMPT,
    Probe,
    ProbeExam,
    first_turns,
    parse_answers,
    parse_grades,
    parse_probes,
)
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import ModelResponse
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.transcripts.loader import load_transcript

runner = CliRunner()
NAIVE_TEXT = "We talked about a flag for the command line."
FILE = re.compile(r"[\w/]+\.py")


def text_of(request: ProviderRequest) -> str:
    """The request's user text (every message)."""
    parts = []
    for sent in request["messages"]:
        content = sent["content"]
        parts.append(content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict)))
    return "\n".join(parts)


class Roles:
    """One scripted model playing the three roles (and the naive summarizer), told apart by
    their system prompts; it records every request per role."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.requests: dict[str, list[ProviderRequest]] = {"examiner": [], "answerer": [], "grader": [], "naive": []}

    def reply(self, request: ProviderRequest) -> str:
        system = str(request.get("system") or "")
        text = text_of(request)
        if system.startswith(EXAMINER_SYSTEM[:40]):
            self.requests["examiner"].append(request)
            files = sorted({path.rsplit("/", 1)[-1] for path in FILE.findall(text)})
            key = files[0] if files else "nothing"
            probes = [{"category": c, "question": f"For {c}: which file?", "answer": f"the file {key}"} for c in CATEGORIES]
            probes.append({"category": "bogus", "question": "dropped", "answer": "dropped"})
            return "Here they are:\n```json\n" + json.dumps(probes) + "\n```"
        if system.startswith(ANSWERER_SYSTEM[:40]):
            self.requests["answerer"].append(request)
            note = text.split("</handover_note>", 1)[0]
            files = sorted(set(FILE.findall(note)))
            count = len(re.findall(r"^\d+\. ", text, re.M))
            answer = ", ".join(files) if files else "not in the note"
            return json.dumps({str(n): answer for n in range(1, count + 1)})
        if system.startswith(GRADER_SYSTEM[:40]):
            self.requests["grader"].append(request)
            grades: dict[str, dict[str, int]] = {}
            for number, block in re.findall(r'<question number="(\d+)">(.*?)</question>', text, re.S):
                reference = re.search(r"<reference>\n(.*?)\n</reference>", block, re.S)
                key = FILE.search(reference.group(1)) if reference else None
                candidates = re.findall(r"^([A-Z]): (.*)$", block, re.M)
                grades[number] = {letter: (2 if key and key.group(0) in answer else 0) for letter, answer in candidates}
            return json.dumps(grades)
        assert text.endswith(NAIVE_PROMPT), "an unexpected request"
        self.requests["naive"].append(request)
        return NAIVE_TEXT

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        return ModelResponse([{"type": "text", "text": self.reply(request)}], "end_turn", {"input_tokens": 10, "output_tokens": 5}, "m")


def examine(session_2_1: Path, seed: int = 0) -> tuple[dict[str, Any], Roles, dict[str, str]]:
    """The exam at the fixture's recorded compaction point: the report, the roles, and the
    hand-overs' texts by name."""
    roles = Roles()
    exam = ProbeExam(roles, roles, roles, model="scripted-model", seed=seed)
    report = asyncio.run(run_eval([("s", load_transcript(session_2_1))], [ExtractiveSummarizer()], model=None, exam=exam))
    (point,) = report.points
    handovers = {"ours": point.ours["extractive"].summary_text, "recorded": point.recorded_summary, "naive": NAIVE_TEXT}
    assert report.llm is not None
    return report.llm, roles, handovers


def letter_of_naive(grader_request: ProviderRequest) -> list[str]:
    """Per question, the letter the naive answer ("not in the note") stands under."""
    text = text_of(grader_request)
    return [re.search(r"^([A-Z]): not in the note$", block, re.M).group(1) for block in re.findall(r"<candidates>\n(.*?)\n</candidates>", text, re.S)]  # type: ignore[union-attr]


def test_the_exam_end_to_end_with_scripted_roles(session_2_1: Path) -> None:
    llm, roles, handovers = examine(session_2_1)
    assert llm["points_examined"] == 1 and llm["categories"] == list(CATEGORIES)
    scores = llm["handovers"]
    assert set(scores) == {"ours", "recorded", "naive"}
    # Ours and the recorded summary name cli.py; the naive summary does not.
    assert scores["ours"]["score"] == 1.0 and scores["recorded"]["score"] == 1.0
    assert scores["naive"]["score"] == 0.0 and scores["naive"]["points"] == 0
    assert scores["ours"]["max_points"] == 2 * len(CATEGORIES)  # the bogus category was dropped
    assert all(scores["ours"]["categories"][c] == 2.0 for c in CATEGORIES)
    (point,) = llm["per_point"]
    assert [p["category"] for p in point["probes"]] == list(CATEGORIES)

    # The examiner read the conversation and the turns after the point, never a summary.
    (examiner,) = roles.requests["examiner"]
    assert "cli.py" in text_of(examiner) and "<what_the_agent_did_next>" in text_of(examiner)
    assert all(text[:200] not in text_of(examiner) for text in handovers.values())
    # Each answer request held exactly one hand-over, and every hand-over was asked once.
    held = [[name for name, text in handovers.items() if text in text_of(r)] for r in roles.requests["answerer"]]
    assert sorted(h[0] for h in held) == ["naive", "ours", "recorded"] and all(len(h) == 1 for h in held)
    # The grader saw neither the hand-overs nor their names.
    (grader,) = roles.requests["grader"]
    graded = text_of(grader) + str(grader.get("system"))
    assert not re.search(r"\b(ours|recorded|naive)\b", graded)
    assert all(text[:200] not in graded for text in handovers.values())


def test_the_grader_sees_a_seeded_shuffle(session_2_1: Path) -> None:
    _, first, _ = examine(session_2_1, seed=0)
    _, again, _ = examine(session_2_1, seed=0)
    _, other, _ = examine(session_2_1, seed=7)
    order = letter_of_naive(first.requests["grader"][0])
    assert len(set(order)) > 1  # the letters move from question to question
    assert text_of(again.requests["grader"][0]) == text_of(first.requests["grader"][0])  # reproducible
    assert letter_of_naive(other.requests["grader"][0]) != order  # another seed, another order


def test_a_point_without_turns_after_it_is_not_examined(session_1_0: Path) -> None:
    roles = Roles()
    exam = ProbeExam(roles, roles, roles, model="m")
    report = asyncio.run(run_eval([("s", load_transcript(session_1_0))], [ExtractiveSummarizer()], model=None, exam=exam))
    assert report.llm is not None and report.llm["points_examined"] == 0
    assert report.llm["skipped"] == ["s end: no recorded turns after it"]
    assert not any(roles.requests.values())


def test_reading_the_roles_replies() -> None:
    fenced = '```json\n[{"category": "Next Step", "question": "What next?", "answer": "Run pytest."}, {"category": "x", "question": "q", "answer": "a"}, {"category": "errors", "question": "", "answer": "a"}]\n```'
    assert parse_probes(fenced) == [Probe("next_step", "What next?", "Run pytest.")]
    assert parse_probes("[tool call] then no JSON") == []
    assert parse_answers('Sure: {"1": "cli.py", "3": "none"}', 3) == ["cli.py", "", "none"]
    assert parse_answers("no json", 2) == ["", ""]
    grades = parse_grades('{"1": {"A": 5, "B": -1, "C": true}, "2": "bad"}', 2, "ABC")
    assert grades == [{"A": 2, "B": 0, "C": 0}, {"A": 0, "B": 0, "C": 0}]
    turns = [
        Entry.assistant([{"type": "text", "text": "one"}], message_id="m1"),
        Entry.assistant([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], message_id="m1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        Entry.assistant([{"type": "text", "text": "two"}], message_id="m2"),
    ]
    assert first_turns(turns, 1) == turns[:3] and first_turns(turns, 2) == turns
    with pytest.raises(ConfigError, match="at least 6 probes"):
        ProbeExam(Roles(), Roles(), Roles(), model="m", probes=3)


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "gpt-5"])
def test_the_exam_through_the_cli_and_the_local_api_server(session_2_1: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    """`eval --llm MODEL` against tests/apiserver.py: the real Anthropic or OpenAI SDK, the
    server answering the three roles deterministically."""
    from unbounded.cli import eval_command  # noqa: F401

    roles = Roles()

    def reply(request: RecordedRequest) -> Any:
        body = request.json
        if "/chat/completions" in request.path:  # OpenAI: the system prompt is a message
            system = "".join(m.get("content") or "" for m in body["messages"] if m["role"] == "system")
            messages = [{"role": m["role"], "content": m.get("content") or ""} for m in body["messages"] if m["role"] != "system"]
        else:
            system = body.get("system") or ""
            if isinstance(system, list):
                system = "".join(block.get("text", "") for block in system)
            messages = body["messages"]
        return message(roles.reply({"model": body["model"], "max_tokens": 1, "system": system, "messages": messages}))

    def run(*extra: str) -> Any:
        return runner.invoke(app, ["eval", str(session_2_1), "--llm", model, *extra], env={"COLUMNS": "220"})

    with start_server() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", api.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        queue = api.openai if model.startswith("gpt") else api.anthropic
        queue.push(*([reply] * 6))
        result = run("--json")
        assert result.exit_code == 0, result.stderr + result.stdout
        assert len(api.requests) == 6  # examiner, naive, three answerers, grader
        assert {r.json["model"] for r in api.requests} == {model}
        queue.push(*([reply] * 6))
        table = run()
        assert table.exit_code == 0, table.stderr + table.stdout
    llm = json.loads(result.stdout)["llm"]
    assert llm["model"] == llm["grader_model"] == model
    assert llm["handovers"]["ours"]["score"] == 1.0 and llm["handovers"]["naive"]["score"] == 0.0
    assert "Probe exam at 1 compaction point(s)" in table.stdout
    assert re.search(r"ours\s*│\s*100%", table.stdout) and re.search(r"naive\s*│\s*0%", table.stdout)
    assert "diagnostic" in table.stdout  # the deterministic figures say what they are


def test_the_cli_refuses_what_it_cannot_run(session_2_1: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.cli import eval_command  # noqa: F401

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    unknown = runner.invoke(app, ["eval", str(session_2_1), "--llm", "anthropic"])
    assert unknown.exit_code == 2 and "unknown model" in unknown.stderr
    lonely = runner.invoke(app, ["eval", str(session_2_1), "--grader-model", "claude-sonnet-4-6"])
    assert lonely.exit_code == 2 and "--llm" in lonely.stderr
