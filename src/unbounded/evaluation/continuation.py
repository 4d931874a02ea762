"""What the next turns used, and what a compacted context holds of it: a diagnostic.

This is not the measure of a hand-over: the probe exam (`unbounded.evaluation.probes`) is.
A figure a summary can be built to satisfy stops measuring (a summary padded with every
name it had seen used to score best), so these figures are read as diagnostics, they are
not targets: for someone choosing a summarizer they say, offline and in a second, which of
the files, commands and code names the recorded agent went on to use a compacted context
still holds, and how much of what it lists the agent never touched.

At a compaction point with recorded turns after it, per kind:

- **used**: what the agent's tool calls in the next N turns (N = 10, 30, or all up to the
  next compaction; a turn is one recorded model response) used, among what the records
  before the point hold (nothing can keep what was never seen):
  - files: the paths of reads and writes (`file_read_path` / `file_write_path`);
  - commands: shell commands, compared on their first 40 normalized characters;
  - code tokens: every identifier-shaped string in the calls' inputs (`parse_header`,
    `parseHeader`, `config.load`, `spotter-dov`, `b7636e2`: one with `_`, `.`, `-`, an
    inner capital or a digit) split into its lower-cased parts of 4 characters or more
    (`parse`, `header`, `config`, `load`, `spotter`, `b7636e2`). This extraction is the
    diagnostic's own (no summarizer chooses names with it) and it scores per token, so a
    name counts whether the context gives it in code or in prose ("the header parser"
    holds `header`).
- **listed**: what the context holds of the items of that kind the records before the
  point show (files read or written, commands run, code tokens): what it hands over.
- **held**: what is both used and listed.

Recall is held / used, precision held / listed, and the score their harmonic mean (F1):
what a context lists that the agent never used costs it reading time and tokens, so a bag
of every name and path seen earns a high recall and a low score. Corpus figures add the
counts of every point before dividing. It is computed for our summary alone, our full
post-compaction context and the summary the session recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.facts import COMMAND_SCORE_CHARS, normalize_text, text_of
from unbounded.model.entries import Entry
from unbounded.model.names import strings_in
from unbounded.model.tools import file_read_path, file_write_path, shell_command

HORIZONS: tuple[int | None, ...] = (10, 30, None)
"""Turns after the point that are looked at (None: all, up to the next compaction)."""
KINDS: tuple[str, ...] = ("files", "identifiers", "commands")
MIN_TOKEN_CHARS = 4
"""Shorter parts (`id`, `get`, `src`) are too common to tell anything."""

_WORD = re.compile(r"[A-Za-z0-9_]+(?:[.\-][A-Za-z0-9_]+)*")
_SEPARATORS = re.compile(r"[._\-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LONG_RUN = re.compile(r"\S{200,}")
"""Runs this long are data (base64, minified code), not names: left out."""


def _parts(word: str) -> Iterable[str]:
    for piece in _SEPARATORS.split(word):
        for part in _CAMEL.split(piece):
            if len(part) >= MIN_TOKEN_CHARS and not part.isdigit():
                yield part.lower()


def _is_code_shaped(word: str) -> bool:
    """`_`, `.` or `-` inside, an inner capital, or letters with digits."""
    if any(separator in word for separator in "_.-"):
        return True
    if any(c.isupper() for c in word[1:]) and any(c.islower() for c in word):
        return True
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


def code_tokens(text: str) -> set[str]:
    """The parts of the identifier-shaped strings in `text` (see the module docstring)."""
    text = _LONG_RUN.sub(" ", text)
    # Each distinct word once: a long text repeats its names thousands of times.
    return {
        part
        for word in set(_WORD.findall(text))
        if _is_code_shaped(word.strip(".-"))
        for part in _parts(word)
    }


def word_tokens(text: str) -> set[str]:
    """The parts of every word in `text`, prose words included: what a context holds."""
    text = _LONG_RUN.sub(" ", text)
    return {part for word in set(_WORD.findall(text)) for part in _parts(word)}


@dataclass(frozen=True, slots=True)
class Counts:
    """Items used next, items a context lists, and the items both (see the module doc)."""

    held: int = 0
    used: int = 0
    listed: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.held + other.held, self.used + other.used, self.listed + other.listed)

    @property
    def recall(self) -> float | None:
        """Held / used (None when nothing was used)."""
        return self.held / self.used if self.used else None

    @property
    def precision(self) -> float | None:
        """Held / listed (None when the context lists nothing)."""
        return self.held / self.listed if self.listed else None

    @property
    def score(self) -> float | None:
        """The harmonic mean of recall and precision (None when nothing was used)."""
        if not self.used:
            return None
        if not self.held:
            return 0.0
        return 2 * self.held / (self.used + self.listed)

    def to_list(self) -> list[int]:
        """[held, used, listed], the form JSON reports keep per point."""
        return [self.held, self.used, self.listed]

    def figures(self) -> dict[str, float | None]:
        """recall, precision and score, rounded."""

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "recall": rounded(self.recall),
            "precision": rounded(self.precision),
            "score": rounded(self.score),
        }


Scores = dict[str, Counts]
"""kind -> counts."""


@dataclass(slots=True)
class UsedItems:
    """Files, commands and code tokens named by some tool calls."""

    files: set[str] = field(default_factory=set)
    identifiers: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)

    def of(self, kind: str) -> set[str]:
        """The items of one kind."""
        return {"files": self.files, "identifiers": self.identifiers, "commands": self.commands}[
            kind
        ]

    def add_call(self, block: dict[str, Any]) -> None:
        """Add what one tool_use block names."""
        for path in (file_read_path(block), file_write_path(block)):
            if path:
                self.files.add(path)
        command = shell_command(block)
        if command and command.strip():
            self.commands.add(command)
        for text in strings_in(block.get("input")):
            self.identifiers.update(code_tokens(text))


def _tool_uses(entry: Entry) -> list[dict[str, Any]]:
    content = entry.content
    if entry.type != "assistant" or not isinstance(content, list):
        return []
    return [dict(b) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def used_in_turns(after: Sequence[Entry], turns: int | None) -> UsedItems:
    """What the tool calls of the first `turns` responses in `after` name (all when None)."""
    used = UsedItems()
    responses: list[str] = []
    for entry in after:
        if entry.is_compact_boundary:
            break
        if entry.type != "assistant" or entry.is_synthetic_api_error:
            continue
        response = entry.message_id or entry.uuid or str(len(responses))
        if not responses or responses[-1] != response:
            if turns is not None and len(responses) >= turns:
                break
            responses.append(response)
        for block in _tool_uses(entry):
            used.add_call(block)
    return used


def _entry_text(entry: Entry) -> str:
    """All text of a record a model could have seen: content, tool inputs and results."""
    content = entry.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.extend(strings_in(block.get("input")))
        elif kind == "tool_result":
            parts.append(text_of(block.get("content")))
        elif kind == "thinking":
            parts.append(str(block.get("thinking", "")))
    attachment = entry.attachment
    if attachment is not None:
        parts.extend(strings_in(attachment))
    return "\n".join(parts)


class TextIndex:
    """A text to look items up in: normalized for commands and paths, word parts for code
    tokens (computed when first asked)."""

    def __init__(self, text: str) -> None:
        self.raw = text
        self.normalized = normalize_text(text)
        self._words: set[str] | None = None

    @property
    def words(self) -> set[str]:
        """The text's word parts (`word_tokens`)."""
        if self._words is None:
            self._words = word_tokens(self.raw)
        return self._words

    def holds(self, kind: str, item: str) -> bool:
        """Whether this text holds an item of this kind (see the module docstring)."""
        if kind == "identifiers":
            return item in self.words
        if kind == "commands":
            return normalize_text(item)[:COMMAND_SCORE_CHARS] in self.normalized
        path = normalize_text(item)
        base = path.rstrip("/").rsplit("/", 1)[-1]
        return path in self.normalized or (bool(base) and base in self.normalized)


class KnownItems:
    """What the records before a point hold: their text, and the items of each kind they
    show (files read or written, commands run, code tokens)."""

    def __init__(self, text: TextIndex, shown: UsedItems) -> None:
        self.text = text
        self.shown = shown

    @classmethod
    def of_entries(cls, entries: Iterable[Entry]) -> KnownItems:
        """The records' text and items."""
        records = list(entries)
        shown = UsedItems()
        for entry in records:
            for block in _tool_uses(entry):
                for path in (file_read_path(block), file_write_path(block)):
                    if path:
                        shown.files.add(path)
                command = shell_command(block)
                if command and command.strip():
                    shown.commands.add(command)
        text = TextIndex("\n".join(_entry_text(entry) for entry in records))
        shown.identifiers = code_tokens(text.raw)
        return cls(text, shown)

    def knows(self, kind: str, item: str) -> bool:
        """Whether the records before the point mention this item."""
        if kind == "identifiers":
            return item in self.shown.identifiers
        return self.text.holds(kind, item)


def continuation_scores(
    known: KnownItems, after: Sequence[Entry], context: TextIndex, turns: int | None
) -> Scores:
    """Counts per kind for one compacted context and one horizon."""
    used = used_in_turns(after, turns)
    scores: Scores = {}
    for kind in KINDS:
        relevant = {item for item in used.of(kind) if known.knows(kind, item)}
        offered = known.shown.of(kind) | relevant
        listed = {item for item in offered if context.holds(kind, item)}
        scores[kind] = Counts(len(relevant & listed), len(relevant), len(listed))
    return scores


def horizon_label(turns: int | None) -> str:
    """`next_10`, `next_30` or `all`."""
    return "all" if turns is None else f"next_{turns}"


def after_point(main_thread: Sequence[Entry], boundary_index: int) -> list[Entry]:
    """The records after a boundary that the agent produced (summary and re-injected
    context left out), up to the next boundary."""
    after: list[Entry] = []
    for entry in main_thread[boundary_index + 1 :]:
        if entry.is_compact_boundary:
            break
        if is_agent_record(entry):
            after.append(entry)
    return after


def is_agent_record(entry: Entry) -> bool:
    """A record the agent produced: not a compaction's summary or re-injected context."""
    return not (entry.is_compact_summary or entry.type == "attachment" or entry.is_meta)


__all__ = [
    "HORIZONS",
    "KINDS",
    "MIN_TOKEN_CHARS",
    "Counts",
    "KnownItems",
    "Scores",
    "TextIndex",
    "UsedItems",
    "after_point",
    "code_tokens",
    "continuation_scores",
    "horizon_label",
    "is_agent_record",
    "used_in_turns",
    "word_tokens",
]
