"""The probe-and-judge evaluation of ../shared/RETENTION.md, for a user who supplies a model.

At each compaction point, four probes are put to a model that sees only a post-compaction
context: recall (an exact fact, such as the original error), artifact (which files were
modified and how), continuation (what to do next) and decision (what was decided and why). A
judge model scores each answer 0-5 on six criteria, with the full pre-compaction conversation
as the reference. The contexts compared:

- `ours`: the full context after our compaction (summary, re-injected attachments);
- `naive`: the same model's answer to a plain "Summarize this conversation." prompt, as one
  user message (always included: it is the baseline every figure is read against);
- `recorded`: the summary the transcript recorded, when it has one.

Everything goes through `Provider`s, so tests script them in-process; nothing here reads a
key or the network by itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from unbounded.compaction.facts import Facts, extract_facts
from unbounded.model.content import MessageParam
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, normalize_plain_messages
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import Provider

PROBES: tuple[str, ...] = ("recall", "artifact", "continuation", "decision")
"""The four probes, in RETENTION.md's order."""
CRITERIA: tuple[str, ...] = (
    "accuracy",
    "context_awareness",
    "artifact_trail",
    "completeness",
    "continuity",
    "instruction_following",
)
"""What the judge scores, 0-5 each."""
NAIVE_PROMPT = "Summarize this conversation."
"""The naive summary prompt every evaluation compares against."""
ANSWER_SYSTEM = (
    "You are an AI coding agent resuming a session. Answer the question using only the "
    "conversation you are given. If it does not tell you, say that you do not know."
)
JUDGE_SYSTEM = (
    "You grade answers given by an AI coding agent after its conversation history was "
    "compacted. You see the full conversation before compaction (the reference), a question "
    "and the agent's answer. Score the answer from 0 (wrong or missing) to 5 (fully correct "
    "and specific) on each criterion: accuracy (facts match the reference), "
    "context_awareness (it knows where the work stands), artifact_trail (files and changes "
    "named correctly), completeness (nothing important missing), continuity (it could carry "
    "on the work from here), instruction_following (it answers what was asked, as asked). "
    'Reply with one JSON object only, for example {"accuracy": 4, "context_awareness": 3, '
    '"artifact_trail": 5, "completeness": 3, "continuity": 4, "instruction_following": 5}.'
)
REFERENCE_RESULT_CHARS = 1_500
"""Each tool result is cut to this many characters in the judge's reference."""
DEFAULT_REFERENCE_CHARS = 400_000
"""The judge's reference is cut (middle first) to this many characters."""


def probe_questions(facts: Facts) -> dict[str, str]:
    """The four probe questions for a compaction point, the recall one built from its facts."""
    if facts.errors:
        error = facts.errors[0]
        recall = (
            f"Earlier in this session the {error.tool} tool failed. What was the exact error "
            "message, and what was done about it?"
        )
    elif facts.commands:
        recall = "What was the first shell command run in this session, exactly, and why?"
    else:
        recall = "What exactly did the user first ask for, in their words?"
    return {
        "recall": recall,
        "artifact": "Which files were modified in this session, and how was each one changed?",
        "continuation": "What should be done next to continue the task? Be specific.",
        "decision": "What were the key decisions taken in this session, and why?",
    }


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
        if len(text) > REFERENCE_RESULT_CHARS:
            text = text[:REFERENCE_RESULT_CHARS] + " […]"
        marker = " (error)" if block.get("is_error") else ""
        return f"[tool result{marker}] {text}"
    return ""


def conversation_text(messages: Sequence[Mapping[str, Any]], max_chars: int) -> str:
    """The conversation as readable text for the judge, cut in the middle when too long."""
    lines: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            body = content
        else:
            body = "\n".join(
                _block_text(b) for b in content or [] if isinstance(b, Mapping) and _block_text(b)
            )
        if body:
            lines.append(f"[{message.get('role')}]\n{body}")
    text = "\n\n".join(lines)
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + "\n\n[… middle of the conversation left out …]\n\n" + text[-half:]


def parse_scores(reply: str) -> dict[str, float] | None:
    """The judge's scores (clamped to 0-5), or None when the reply holds no usable JSON."""
    for match in re.finditer(r"\{[^{}]*\}", reply, re.S):
        try:
            data = orjson.loads(match.group(0))
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        scores: dict[str, float] = {}
        for criterion in CRITERIA:
            value = data.get(criterion)
            if isinstance(value, int | float) and not isinstance(value, bool):
                scores[criterion] = float(min(5.0, max(0.0, value)))
        if len(scores) == len(CRITERIA):
            return scores
    return None


def _with_question(context: Sequence[MessageParam], question: str) -> list[MessageParam]:
    messages: list[MessageParam] = [*context, {"role": "user", "content": question}]
    return normalize_plain_messages(messages)


@dataclass(slots=True)
class ProbeScores:
    """Judge scores of one context, summed over probes and compaction points."""

    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CRITERIA, 0.0))
    by_probe: dict[str, list[float]] = field(default_factory=dict)
    graded: int = 0
    unparsed: int = 0

    def add(self, probe: str, scores: dict[str, float] | None) -> None:
        """Add one graded answer (None: the judge's reply could not be read)."""
        if scores is None:
            self.unparsed += 1
            return
        self.graded += 1
        for criterion, value in scores.items():
            self.totals[criterion] += value
        self.by_probe.setdefault(probe, []).append(sum(scores.values()) / len(scores))

    def to_dict(self) -> dict[str, Any]:
        """Mean score per criterion, per probe and overall (0-5)."""
        count = self.graded
        criteria = {k: round(v / count, 3) if count else None for k, v in self.totals.items()}
        probes = {k: round(sum(v) / len(v), 3) for k, v in self.by_probe.items() if v}
        values = [v for v in criteria.values() if v is not None]
        return {
            "overall": round(sum(values) / len(values), 3) if values else None,
            "criteria": criteria,
            "probes": probes,
            "graded": count,
            "unparsed": self.unparsed,
        }


@dataclass(slots=True)
class ProbeEvaluation:
    """Probe-and-judge results per context kind (ours, naive, recorded)."""

    model: str
    judge_model: str
    contexts: dict[str, ProbeScores] = field(default_factory=dict)
    answers: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "model": self.model,
            "judge_model": self.judge_model,
            "probes": list(PROBES),
            "criteria": list(CRITERIA),
            "contexts": {name: scores.to_dict() for name, scores in self.contexts.items()},
        }


class ProbeRunner:
    """Runs the probes and the judge with the given providers."""

    def __init__(
        self,
        answerer: Provider,
        judge: Provider,
        *,
        model: str,
        judge_model: str | None = None,
        max_tokens: int = 1_024,
        reference_chars: int = DEFAULT_REFERENCE_CHARS,
    ) -> None:
        self.answerer = answerer
        self.judge = judge
        self.model = model
        self.judge_model = judge_model or model
        self.max_tokens = max_tokens
        self.reference_chars = reference_chars
        self.result = ProbeEvaluation(model, self.judge_model)

    async def naive_context(self, conversation: list[MessageParam]) -> list[MessageParam]:
        """The naive baseline: the model's answer to "Summarize this conversation."."""
        request: ProviderRequest = {
            "model": self.model,
            "max_tokens": 8_192,
            "messages": _with_question(conversation, NAIVE_PROMPT),
        }
        reply = await self.answerer.create(request)
        return [{"role": "user", "content": f"Summary of the conversation so far:\n{reply.text}"}]

    async def evaluate_point(
        self,
        before: Sequence[Entry],
        contexts: Mapping[str, list[MessageParam]],
    ) -> None:
        """Probe each context (plus the naive one) at one compaction point and judge."""
        conversation = normalize_messages(messages_after_compact_boundary(list(before)))
        all_contexts = dict(contexts)
        all_contexts["naive"] = await self.naive_context(conversation)
        reference = conversation_text(conversation, self.reference_chars)
        questions = probe_questions(extract_facts(before))
        for name, context in all_contexts.items():
            scores = self.result.contexts.setdefault(name, ProbeScores())
            for probe, question in questions.items():
                answer = await self.answerer.create(
                    {
                        "model": self.model,
                        "max_tokens": self.max_tokens,
                        "system": ANSWER_SYSTEM,
                        "messages": _with_question(context, question),
                    }
                )
                grade = await self.judge.create(
                    {
                        "model": self.judge_model,
                        "max_tokens": 512,
                        "system": JUDGE_SYSTEM,
                        "messages": [
                            {
                                "role": "user",
                                "content": (
                                    f"<reference>\n{reference}\n</reference>\n\n"
                                    f"<question>\n{question}\n</question>\n\n"
                                    f"<answer>\n{answer.text}\n</answer>\n\n"
                                    "Score the answer. Reply with the JSON object only."
                                ),
                            }
                        ],
                    }
                )
                parsed = parse_scores(grade.text)
                scores.add(probe, parsed)
                self.result.answers.append(
                    {"context": name, "probe": probe, "answer": answer.text, "scores": parsed}
                )
