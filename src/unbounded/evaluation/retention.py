"""Retention figures of ../shared/RETENTION.md, tallied over compaction points and sessions.

The facts and the scoring are `unbounded.compaction.facts` (`extract_facts`,
`retention_scores`); this module only names the fact types as reports print them, renders the
text a model sees after a compaction, and adds scores up (summed numerators and
denominators).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from unbounded.compaction.facts import add_scores, extract_facts, retention_scores, text_of
from unbounded.model.entries import Entry

FACT_TYPES: tuple[str, ...] = (
    "user_prompts",
    "modified_files",
    "read_files",
    "errors",
    "commands",
)
"""Fact types as reports name them, in RETENTION.md's order."""

_FACTS_KIND = {
    "user_prompts": "user_prompts",
    "modified_files": "files_modified",
    "read_files": "files_read",
    "errors": "errors",
    "commands": "commands",
}

Scores = dict[str, tuple[int, int]]
"""(kept, total) per fact type."""


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        payload = orjson.dumps(block.get("input", {}), default=str).decode()
        return f"{block.get('name', '')} {payload}"
    if kind == "tool_result":
        return text_of(block.get("content"))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    return ""


def messages_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Everything a model reads in these messages, as one text (tool calls as name + JSON)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(_block_text(b) for b in content if isinstance(b, Mapping))
    return "\n".join(part for part in parts if part)


def _renamed(scores: Mapping[str, tuple[int, int]]) -> Scores:
    return {name: scores.get(kind, (0, 0)) for name, kind in _FACTS_KIND.items()}


def score_text(facts_from: Sequence[Entry | Mapping[str, Any]], kept_text: str) -> Scores:
    """(kept, total) per fact type: facts of `facts_from` found in `kept_text`."""
    return _renamed(retention_scores(extract_facts(facts_from), kept_text))


def fraction(score: tuple[int, int]) -> float | None:
    """kept / total, or None when there was nothing to keep."""
    kept, total = score
    return round(kept / total, 4) if total else None


@dataclass(slots=True)
class RetentionTally:
    """Scores summed over compaction points (corpus aggregate: numerators and denominators)."""

    scores: Scores = field(default_factory=dict)
    points: int = 0

    def add(self, scores: Mapping[str, tuple[int, int]]) -> None:
        """Add one compaction point's scores."""
        self.scores = {name: value for name, value in add_scores(self.scores, scores).items()}
        self.points += 1

    def fractions(self) -> dict[str, float | None]:
        """kept / total per fact type (None for a type with no facts, or with no points)."""
        return {name: fraction(self.scores.get(name, (0, 0))) for name in FACT_TYPES}

    def to_dict(self) -> dict[str, Any]:
        """Fractions and raw counts per fact type."""
        return {
            name: {
                "fraction": fraction(self.scores.get(name, (0, 0))),
                "kept": self.scores.get(name, (0, 0))[0],
                "total": self.scores.get(name, (0, 0))[1],
            }
            for name in FACT_TYPES
        }
