"""Could an agent go on from this summary? The continuation measure of `unbounded eval`.

Retention (RETENTION.md) asks whether the facts of the past survive a compaction. This asks
the question a user choosing a summarizer cares about: of what the agent went on to use in
the turns right after a recorded compaction, and could have known before it, how much does
the compacted context still hold? An item the agent needed but the context lost is one it
has to rediscover (read the file again, search for the function again, ask again).

At a compaction point with recorded turns after it:

- **used**: what the agent's tool calls in the next N turns (N = 10, 30, or all up to the
  next compaction; a turn is one recorded model response) name:
  - files: the paths of reads and writes (`file_read_path` / `file_write_path`);
  - commands: shell commands, compared on their first 40 normalized characters;
  - identifiers: names in the calls' inputs (edited code, search patterns, commands) that
    look like code rather than prose: `snake_case`, `camelCase` / `PascalCase`, dotted
    names (`Module.function`, `pkg.mod`, not file names), `kebab-case` (CSS classes, task
    ids such as `spotter-dov`), and hexadecimal ids with letters and digits (`b7636e2`).
- **knowable**: an item counts only if the records before the point mention it anywhere
  (prompts, tool inputs, tool results, replies): nothing can keep what was never seen.
- **kept**: the item appears in the compacted context (a file by its path or base name, a
  command by its 40-character prefix, an identifier as written).

The score is kept / (used and knowable), per kind and horizon; corpus figures add
numerators and denominators. It is computed for our summary alone, our full post-compaction
context, and the summary the session recorded, so the three are comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from unbounded.compaction.facts import COMMAND_SCORE_CHARS, normalize_text, text_of
from unbounded.model.entries import Entry
from unbounded.model.names import identifiers_in, strings_in
from unbounded.model.tools import file_read_path, file_write_path, shell_command

HORIZONS: tuple[int | None, ...] = (10, 30, None)
"""Turns after the point that are looked at (None: all, up to the next compaction)."""
KINDS: tuple[str, ...] = ("files", "identifiers", "commands")

@dataclass(slots=True)
class UsedItems:
    """Files, commands and identifiers named by the tool calls of some turns."""

    files: set[str] = field(default_factory=set)
    identifiers: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)

    def of(self, kind: str) -> set[str]:
        """The items of one kind."""
        return {"files": self.files, "identifiers": self.identifiers, "commands": self.commands}[
            kind
        ]


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
        content = entry.content
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            for path in (file_read_path(block), file_write_path(block)):
                if path:
                    used.files.add(path)
            command = shell_command(block)
            if command and command.strip():
                used.commands.add(command)
            for text in strings_in(block.get("input")):
                used.identifiers.update(identifiers_in(text))
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
    """A text to look items up in: raw for identifiers, normalized for commands and paths."""

    def __init__(self, text: str) -> None:
        self.raw = text
        self.normalized = normalize_text(text)

    @classmethod
    def of_entries(cls, entries: Iterable[Entry]) -> TextIndex:
        """The text of every record."""
        return cls("\n".join(_entry_text(entry) for entry in entries))

    def holds(self, kind: str, item: str) -> bool:
        """Whether this text keeps an item of this kind (see the module docstring)."""
        if kind == "identifiers":
            return item in self.raw
        if kind == "commands":
            return normalize_text(item)[:COMMAND_SCORE_CHARS] in self.normalized
        path = normalize_text(item)
        base = path.rstrip("/").rsplit("/", 1)[-1]
        return path in self.normalized or (bool(base) and base in self.normalized)


Scores = dict[str, tuple[int, int]]
"""kind -> (kept, total)."""


def continuation_scores(
    before: TextIndex, after: Sequence[Entry], kept: TextIndex, turns: int | None
) -> Scores:
    """(kept, used and knowable) per kind for one compacted context and one horizon."""
    used = used_in_turns(after, turns)
    scores: Scores = {}
    for kind in KINDS:
        relevant = [item for item in sorted(used.of(kind)) if before.holds(kind, item)]
        scores[kind] = (sum(1 for item in relevant if kept.holds(kind, item)), len(relevant))
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
        if entry.is_compact_summary or entry.type == "attachment" or entry.is_meta:
            continue
        after.append(entry)
    return after


__all__ = [
    "HORIZONS",
    "KINDS",
    "Scores",
    "TextIndex",
    "UsedItems",
    "after_point",
    "continuation_scores",
    "horizon_label",
    "identifiers_in",
    "used_in_turns",
]
