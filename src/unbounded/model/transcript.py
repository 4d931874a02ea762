"""A loaded transcript: its entries, the main thread, sub-agent threads and recorded API calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unbounded.model.content import Usage, usage_context_total, usage_prompt_total
from unbounded.model.entries import Entry, messages_after_compact_boundary


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One recorded model response: the lines that share its message id, and its usage.

    `first` and `last` index the main thread. Claude Code writes one response as several
    assistant lines whose usage repeats (output grows as it streams), so `usage` is the last
    line's.
    """

    message_id: str
    first: int
    last: int
    usage: Usage
    model: str | None
    timestamp: str | None

    @property
    def context_tokens(self) -> int:
        """Input + cache creation + cache read + output."""
        return usage_context_total(self.usage)

    @property
    def prompt_tokens(self) -> int:
        """Input + cache creation + cache read: what the request itself held."""
        return usage_prompt_total(self.usage)


@dataclass(slots=True)
class Transcript:
    """Entries read from one file, in file order, with what the reader noticed on the way."""

    entries: list[Entry]
    format: str
    path: Path | None = None
    warnings: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """How many records were read."""
        return len(self.entries)

    @property
    def is_subagent_file(self) -> bool:
        """Every conversation record is a sidechain: a sub-agent's own transcript file."""
        conversation = [e for e in self.entries if e.is_conversation]
        return bool(conversation) and all(e.is_sidechain for e in conversation)

    def main_thread(self) -> list[Entry]:
        """Conversation records of the main agent, in file order.

        Inline sub-agent records (`isSidechain`, Claude Code 1.0.x) are left out, unless the
        whole file is a sub-agent's, in which case its records are the thread. File order is
        used rather than the parentUuid chain: progress records and parallel tool calls branch
        that chain, so walking it from the leaf drops real messages.
        """
        keep_sidechains = self.is_subagent_file
        return [
            e for e in self.entries if e.is_conversation and (keep_sidechains or not e.is_sidechain)
        ]

    def sidechains(self) -> dict[str, list[Entry]]:
        """Inline sub-agent conversations, keyed by the uuid of each one's first record."""
        if self.is_subagent_file:
            return {}
        roots: dict[str, list[Entry]] = {}
        owner: dict[str, str] = {}
        for entry in self.entries:
            if not (entry.is_conversation and entry.is_sidechain) or entry.uuid is None:
                continue
            parent = entry.parent_uuid
            root = owner.get(parent) if parent is not None else None
            if root is None:
                root = entry.uuid
                roots[root] = []
            owner[entry.uuid] = root
            roots[root].append(entry)
        return roots

    def boundaries(self) -> list[Entry]:
        """Compact boundaries of the main thread, oldest first."""
        return [e for e in self.main_thread() if e.is_compact_boundary]

    def view_entries(self) -> list[Entry]:
        """Main-thread entries from the last compact boundary on: what the model sees next."""
        return messages_after_compact_boundary(self.main_thread())

    def api_calls(self) -> list[ApiCall]:
        """Recorded model responses of the main thread, in order."""
        return api_calls(self.main_thread())

    @property
    def model(self) -> str | None:
        """The model of the last real response in the main thread."""
        for entry in reversed(self.main_thread()):
            model = entry.model
            if entry.type == "assistant" and model and not entry.is_synthetic_api_error:
                return model
        return None


def api_calls(entries: Sequence[Entry]) -> list[ApiCall]:
    """Group assistant lines by message id into recorded API calls (usage from the last line)."""
    calls: dict[str, ApiCall] = {}
    for index, entry in enumerate(entries):
        usage = entry.usage
        message_id = entry.message_id
        if usage is None or message_id is None:
            continue
        previous = calls.get(message_id)
        calls[message_id] = ApiCall(
            message_id=message_id,
            first=previous.first if previous else index,
            last=index,
            usage=usage,
            model=entry.model,
            timestamp=previous.timestamp if previous else entry.timestamp,
        )
    return sorted(calls.values(), key=lambda call: call.first)
