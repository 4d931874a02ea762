"""The probe exam: could an agent that sees only a hand-over go on with the work?

At each recorded compaction point three roles, each a model that sees only what its step
needs, put every hand-over of that point (ours, the summary the session recorded, a naive
"summarize this conversation" baseline) to the same test:

1. **The examiner** reads the conversation before the point and what the agent did in the
   ~40 turns after it (`AFTER_TURNS`), never a summary, and writes probes: questions a
   continuing agent must be able to answer, each with its reference answer, in six
   categories (`CATEGORIES`): what the user wants, where the work stands, the next concrete
   action, the files and code concerned, the errors met and how they were handled, the
   decisions and standing instructions. What the agent did next shows what it needed.
2. **The answerer** gets one hand-over and the questions, and answers from that hand-over
   alone: one request per hand-over, so no request ever holds two hand-overs of a point.
3. **The grader** gets, per question, the reference and the answers under letters in an
   order shuffled with a seeded generator (`seed`), never the hand-overs or their names,
   and scores each answer 0 (wrong or missing), 1 (partly right) or 2 (right and specific).

Points are summed per hand-over, per category (mean points out of 2) and overall (the share
of the points there were to earn). Every prompt is this module's own; everything goes
through `Provider`s, so tests script the three roles, in-process or behind the local API
server, and nothing here reads a key or the network by itself. The naive baseline is
written by the answerer's model from the conversation before the point.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from unbounded.errors import ConfigError
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, normalize_plain_messages
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Provider

CATEGORIES: tuple[str, ...] = (
    "intent",
    "work_state",
    "next_step",
    "files_code",
    "errors",
    "decisions",
)
"""The probe categories, in the order reports list them."""
CATEGORY_LABELS: dict[str, str] = {
    "intent": "intent",
    "work_state": "work state",
    "next_step": "next step",
    "files_code": "files & code",
    "errors": "errors",
    "decisions": "decisions & instructions",
}
MAX_POINTS = 2
"""Points for a right and specific answer (1: partly right, 0: wrong or missing)."""
DEFAULT_PROBES = 10
"""Probes the examiner writes per compaction point."""
AFTER_TURNS = 40
"""Recorded turns after the point the examiner reads (a turn is one model response)."""
BEFORE_CHARS = 300_000
"""The conversation before the point is cut to this many characters (its middle first)."""
AFTER_CHARS = 120_000
"""The turns after it, likewise."""
RESULT_CHARS = 1_500
"""Each tool result is cut to this many characters in what the examiner reads."""
NAIVE_PROMPT = "Summarize this conversation."
"""The naive baseline's whole prompt."""
NAIVE = "naive"
"""The name of the naive baseline among the hand-overs."""

EXAMINER_SYSTEM = """\
You prepare an exam for a coding agent that is about to take over a piece of work after its \
memory of the conversation is wiped. The agent will get only a short hand-over note, not the \
conversation. You get the conversation up to that moment, and what the agent actually did in \
the turns right after it: use those later turns to see what it really needed to know.

Write {count} questions a continuing agent must be able to answer to carry on without asking \
and without redoing work, each with the answer the conversation supports. Cover all of these \
categories, at least one question each, more for work_state and next_step:
- intent: what the user wants, in their terms, and what the work is for;
- work_state: what is done, committed or pushed, what is still open;
- next_step: the next concrete action, with its file, function or command;
- files_code: which files and functions were changed or matter, and how;
- errors: which errors happened, their cause, and what fixed them (or that nothing did yet);
- decisions: decisions taken and why, and instructions from the user that still hold.

Ask about specifics (names, paths, commands, numbers, states), never about the wording of \
the conversation. Each answer must follow from the conversation before the handover; the \
later turns only tell you what mattered. Reply with a JSON array only, one object per \
question: {{"category": "...", "question": "...", "answer": "..."}}."""
ANSWERER_SYSTEM = """\
You are a coding agent taking over a piece of work. All you know about it is the hand-over \
note below: you cannot see the conversation it came from. Answer each question from the note \
alone, briefly and specifically. When the note does not say, answer "not in the note" rather \
than guessing. Reply with a JSON object only, mapping each question's number to your answer, \
for example {"1": "...", "2": "..."}."""
GRADER_SYSTEM = """\
You grade a coding agent's answers about the work it is taking over. For each question you \
get the reference answer and several candidate answers, each under a letter. Score every \
candidate against the reference: 2 when it is right and specific enough to act on, 1 when it \
is partly right or too vague to act on, 0 when it is wrong, missing or says it does not know. \
Judge each candidate on its own; do not compare them with each other. Reply with a JSON \
object only, mapping each question's number to the scores by letter, for example \
{"1": {"A": 2, "B": 0}, "2": {"A": 1, "B": 1}}."""


# -- what each role reads ----------------------------------------------------------------------


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        payload = orjson.dumps(block.get("input", {}), default=str).decode()
        return f"[tool call {block.get('name')}] {payload}"
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(part.get("text", "")) for part in content if isinstance(part, Mapping)
            )
        text = str(content or "")
        if len(text) > RESULT_CHARS:
            text = text[:RESULT_CHARS] + " […]"
        marker = " (error)" if block.get("is_error") else ""
        return f"[tool result{marker}] {text}"
    return ""


def conversation_text(messages: Sequence[Mapping[str, Any]], max_chars: int) -> str:
    """Messages as readable text (tool results cut to `RESULT_CHARS`), the middle left out
    when it is longer than `max_chars`."""
    lines: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            body = content
        else:
            parts = (_block_text(b) for b in content or [] if isinstance(b, Mapping))
            body = "\n".join(part for part in parts if part)
        if body:
            lines.append(f"[{message.get('role')}]\n{body}")
    text = "\n\n".join(lines)
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + "\n\n[… middle of the conversation left out …]\n\n" + text[-half:]


def conversation_before(before: Sequence[Entry]) -> list[MessageParam]:
    """The conversation up to a point as messages, an earlier compaction's summary left out:
    the examiner never reads a summary."""
    view = messages_after_compact_boundary(list(before))
    return normalize_messages(e for e in view if not e.is_compact_summary)


def first_turns(after: Sequence[Entry], turns: int = AFTER_TURNS) -> list[Entry]:
    """The records of the first `turns` model responses in `after` (their tool results
    included), up to the next compaction."""
    kept: list[Entry] = []
    responses: list[str] = []
    for entry in after:
        if entry.is_compact_boundary:
            break
        if entry.type == "assistant":
            response = entry.message_id or entry.uuid or str(len(responses))
            if not responses or responses[-1] != response:
                if len(responses) >= turns:
                    break
                responses.append(response)
        kept.append(entry)
    return kept


# -- reading the replies -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """One exam question, its category and the reference answer."""

    category: str
    question: str
    reference: str


def _json_values(reply: str, opener: str) -> list[Any]:
    """The first JSON value in `reply` that starts with `opener` ("[" or "{") and parses
    (prose or a code fence around it is skipped), as a one-item list; empty when none does."""
    decoder = json.JSONDecoder()
    for match in re.finditer(re.escape(opener), reply):
        try:
            value, _ = decoder.raw_decode(reply, match.start())
        except ValueError:
            continue
        return [value]
    return []


def parse_probes(reply: str) -> list[Probe]:
    """The examiner's probes: objects with a known category, a question and an answer."""
    for value in _json_values(reply, "["):
        if not isinstance(value, list):
            continue
        probes = []
        for item in value:
            if not isinstance(item, Mapping):
                continue
            category = str(item.get("category", "")).strip().lower().replace(" ", "_")
            question = str(item.get("question", "")).strip()
            answer = str(item.get("answer", "")).strip()
            if category in CATEGORIES and question and answer:
                probes.append(Probe(category, question, answer))
        if probes:
            return probes
    return []


def parse_answers(reply: str, count: int) -> list[str]:
    """The answerer's answers by question number (1-based), "" for each one missing."""
    values = _json_values(reply, "{")
    data = values[0] if values and isinstance(values[0], Mapping) else {}
    return [str(data.get(str(n), "")).strip() for n in range(1, count + 1)]


def parse_grades(reply: str, count: int, labels: Sequence[str]) -> list[dict[str, int]]:
    """The grader's scores per question (1-based) and letter, clamped to 0..2; a score the
    reply lacks is 0 (an unreadable grade earns nothing)."""
    values = _json_values(reply, "{")
    data = values[0] if values and isinstance(values[0], Mapping) else {}
    grades: list[dict[str, int]] = []
    for number in range(1, count + 1):
        given = data.get(str(number))
        row = given if isinstance(given, Mapping) else {}
        scores: dict[str, int] = {}
        for label in labels:
            value = row.get(label)
            points = value if isinstance(value, int) and not isinstance(value, bool) else 0
            scores[label] = min(MAX_POINTS, max(0, points))
        grades.append(scores)
    return grades


# -- results -----------------------------------------------------------------------------------


@dataclass(slots=True)
class HandoverScore:
    """Points one hand-over earned, per category and overall."""

    points: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    questions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))

    def add(self, category: str, points: int) -> None:
        """Count one graded answer."""
        self.points[category] += points
        self.questions[category] += 1

    def to_dict(self) -> dict[str, Any]:
        """Share of the points there were (overall) and mean points per category (of 2)."""
        earned, asked = sum(self.points.values()), sum(self.questions.values())
        return {
            "score": round(earned / (MAX_POINTS * asked), 4) if asked else None,
            "points": earned,
            "max_points": MAX_POINTS * asked,
            "questions": asked,
            "categories": {
                category: round(self.points[category] / self.questions[category], 3)
                if self.questions[category]
                else None
                for category in CATEGORIES
            },
        }


@dataclass(frozen=True, slots=True)
class PointExam:
    """One compaction point's exam: the probes, and each hand-over's answers and points."""

    label: str
    probes: tuple[Probe, ...]
    answers: dict[str, tuple[str, ...]]
    points: dict[str, tuple[int, ...]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the probes are yardsticks: kept in the report, not the code)."""
        return {
            "point": self.label,
            "probes": [
                {"category": p.category, "question": p.question, "reference": p.reference}
                for p in self.probes
            ],
            "answers": {name: list(answers) for name, answers in self.answers.items()},
            "points": {name: list(points) for name, points in self.points.items()},
        }


@dataclass(slots=True)
class ExamReport:
    """The exam over every point: per hand-over scores, and each point's details."""

    model: str
    examiner_model: str
    grader_model: str
    seed: int
    handovers: dict[str, HandoverScore] = field(default_factory=dict)
    points: list[PointExam] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Points left out, with why (no recorded turns after them, no probe written)."""

    def add(self, exam: PointExam) -> None:
        """Count one point's points."""
        self.points.append(exam)
        for name, points in exam.points.items():
            score = self.handovers.setdefault(name, HandoverScore())
            for probe, earned in zip(exam.probes, points, strict=True):
                score.add(probe.category, earned)

    def to_dict(self) -> dict[str, Any]:
        """The `llm` object of `eval --json`."""
        return {
            "model": self.model,
            "examiner_model": self.examiner_model,
            "grader_model": self.grader_model,
            "seed": self.seed,
            "categories": list(CATEGORIES),
            "max_points": MAX_POINTS,
            "points_examined": len(self.points),
            "handovers": {
                name: self.handovers[name].to_dict() for name in _report_order(self.handovers)
            },
            "per_point": [exam.to_dict() for exam in self.points],
            "skipped": list(self.skipped),
        }


def _report_order(names: Iterable[str]) -> list[str]:
    """Ours first, the naive baseline last, the others by name in between."""
    return sorted(names, key=lambda name: (name == NAIVE, name != "ours", name))


# -- the exam ------------------------------------------------------------------------------------


LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class ProbeExam:
    """Runs the exam (see the module docstring) with a provider per role."""

    def __init__(
        self,
        examiner: Provider,
        answerer: Provider,
        grader: Provider,
        *,
        model: str,
        examiner_model: str | None = None,
        grader_model: str | None = None,
        probes: int = DEFAULT_PROBES,
        seed: int = 0,
        max_tokens: int = 4_096,
    ) -> None:
        if probes < len(CATEGORIES):
            raise ConfigError(f"the exam needs at least {len(CATEGORIES)} probes, not {probes}")
        if max_tokens <= 0:
            raise ConfigError(f"max_tokens must be > 0, not {max_tokens}")
        self.examiner = examiner
        self.answerer = answerer
        self.grader = grader
        self.model = model
        self.examiner_model = examiner_model or model
        self.grader_model = grader_model or model
        self.probes = probes
        self.seed = seed
        self.max_tokens = max_tokens
        self.report = ExamReport(model, self.examiner_model, self.grader_model, seed)

    async def _ask(
        self, provider: Provider, model: str, system: str | None, text: str
    ) -> str:
        request: ProviderRequest = {
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": text}],
        }
        if system:
            request["system"] = system
        reply = await provider.create(request)
        return reply.text

    async def naive_handover(self, before: Sequence[Entry]) -> str:
        """The baseline: the answerer's model asked to "Summarize this conversation."."""
        conversation = conversation_before(before)
        messages = normalize_plain_messages(
            [*conversation, {"role": "user", "content": NAIVE_PROMPT}]
        )
        request: ProviderRequest = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        reply = await self.answerer.create(request)
        return reply.text

    async def write_probes(self, before: Sequence[Entry], after: Sequence[Entry]) -> list[Probe]:
        """The examiner's probes for one point (it reads no summary)."""
        earlier = conversation_text(conversation_before(before), BEFORE_CHARS)
        later = conversation_text(normalize_messages(first_turns(after)), AFTER_CHARS)
        text = (
            f"<conversation_before_handover>\n{earlier}\n</conversation_before_handover>\n\n"
            f"<what_the_agent_did_next>\n{later}\n</what_the_agent_did_next>\n\n"
            f"Write the {self.probes} questions and their answers as a JSON array."
        )
        system = EXAMINER_SYSTEM.format(count=self.probes)
        reply = await self._ask(self.examiner, self.examiner_model, system, text)
        return parse_probes(reply)[: self.probes]

    async def answer(self, handover: str, probes: Sequence[Probe]) -> list[str]:
        """One hand-over's answers: the only hand-over in its request."""
        questions = "\n".join(f"{n}. {p.question}" for n, p in enumerate(probes, 1))
        text = (
            f"<handover_note>\n{handover}\n</handover_note>\n\n<questions>\n{questions}\n"
            "</questions>\n\nAnswer as a JSON object."
        )
        reply = await self._ask(self.answerer, self.model, ANSWERER_SYSTEM, text)
        return parse_answers(reply, len(probes))

    async def grade(
        self, label: str, probes: Sequence[Probe], answers: Mapping[str, Sequence[str]]
    ) -> dict[str, list[int]]:
        """Each hand-over's points per probe; the grader sees the answers under letters in a
        seeded shuffled order, never the hand-overs or their names."""
        names = sorted(answers)
        if len(names) > len(LABELS):
            raise ConfigError(f"the grader can tell at most {len(LABELS)} hand-overs apart")
        blocks: list[str] = []
        letters_of: list[dict[str, str]] = []  # per probe: letter -> hand-over name
        for number, probe in enumerate(probes, 1):
            order = list(names)
            random.Random(f"{self.seed}:{label}:{number}").shuffle(order)
            letters = {LABELS[i]: name for i, name in enumerate(order)}
            letters_of.append(letters)
            candidates = "\n".join(
                f"{letter}: {answers[name][number - 1] or '(no answer)'}"
                for letter, name in letters.items()
            )
            blocks.append(
                f"<question number=\"{number}\">\n{probe.question}\n<reference>\n"
                f"{probe.reference}\n</reference>\n<candidates>\n{candidates}\n</candidates>\n"
                "</question>"
            )
        text = "\n\n".join(blocks) + "\n\nGrade every candidate of every question as JSON."
        reply = await self._ask(self.grader, self.grader_model, GRADER_SYSTEM, text)
        grades = parse_grades(reply, len(probes), LABELS[: len(names)])
        points: dict[str, list[int]] = {name: [] for name in names}
        for letters, scores in zip(letters_of, grades, strict=True):
            for letter, name in letters.items():
                points[name].append(scores[letter])
        return points

    async def examine(
        self,
        label: str,
        before: Sequence[Entry],
        after: Sequence[Entry],
        handovers: Mapping[str, str],
    ) -> PointExam | None:
        """The exam at one point, added to `report` (None when it cannot be held: no turns
        after the point to write probes from, or no probe the examiner wrote could be read).
        The naive baseline is added to `handovers`."""
        if not first_turns(after):
            self.report.skipped.append(f"{label}: no recorded turns after it")
            return None
        probes = await self.write_probes(before, after)
        if not probes:
            self.report.skipped.append(f"{label}: the examiner's reply held no probe")
            return None
        all_handovers = {**handovers, NAIVE: await self.naive_handover(before)}
        answers = {
            name: tuple(await self.answer(text, probes))
            for name, text in sorted(all_handovers.items())
        }
        points = await self.grade(label, probes, answers)
        exam = PointExam(
            label,
            tuple(probes),
            answers,
            {name: tuple(points[name]) for name in sorted(points)},
        )
        self.report.add(exam)
        return exam


__all__ = [
    "AFTER_TURNS",
    "ANSWERER_SYSTEM",
    "CATEGORIES",
    "CATEGORY_LABELS",
    "DEFAULT_PROBES",
    "EXAMINER_SYSTEM",
    "GRADER_SYSTEM",
    "MAX_POINTS",
    "NAIVE",
    "NAIVE_PROMPT",
    "ExamReport",
    "HandoverScore",
    "PointExam",
    "Probe",
    "ProbeExam",
    "conversation_before",
    "conversation_text",
    "first_turns",
    "parse_answers",
    "parse_grades",
    "parse_probes",
]
