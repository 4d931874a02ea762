"""A ledger of the tool calls in a conversation, kept up to date one turn at a time.

Microcompaction needs, for every tool call, its name, its position, whether its tool may be
cleared, and the estimated tokens of its result (seed 002 `countToolResultTokens`: text
length / 4, 2,000 per image or document). Re-deriving that from the whole history every turn
would cost O(history); the ledger registers tool uses and results as they appear instead.

`ToolLedger.observe(messages)` takes the API message list (`normalize_messages` /
`MessageNormalizer.messages`) and scans only what may have changed since the last call: the
new messages and the last two old ones (normalization merges a response's later lines and
their results into the last assistant/user pair, never further back). A list that got shorter,
or whose earlier tool calls are no longer where the ledger saw them (a compaction replaced the
history, or another conversation was passed), is rescanned from the start (`generation` then
counts one more). The ledger never modifies the messages.

It also keeps, as calls arrive, what count-based clearing chooses from each turn: the results
still in the context (compactable, not already a placeholder, not marked cleared with
`mark_cleared`) and the reads a later read or write of the same file superseded. A turn then
costs what it added, not a walk over every call of the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unbounded.compaction.tools_registry import CompactableTools, is_cleared_text
from unbounded.deferred_release import DeferredRelease
from unbounded.model.tools import file_write_path
from unbounded.tokens.estimate import tool_result_tokens

_TAIL = 2
"""Old messages rescanned on every observe: normalization only merges into the last pair."""


@dataclass(slots=True)
class ToolRecord:
    """One tool call: where its use and result sit, and what clearing its result would save."""

    tool_use_id: str
    name: str
    order: int
    """Position among all tool calls of the conversation (0-based, in message order)."""
    compactable: bool
    use_index: int
    """Index of the assistant message holding the tool_use."""
    read_path: str | None
    """The file this call read, when it is a read (for the caller's read-file state)."""
    result_index: int | None = None
    """Index of the user message holding the tool_result (None until it arrives)."""
    tokens: int = 0
    """Estimated tokens of the result's content."""
    precleared: bool = False
    """The result already reads `[Old tool result content cleared]` in the input."""
    write_path: str | None = None
    """The file this call wrote or edited, if any (a later write supersedes earlier reads)."""


def is_cleared_content(content: Any) -> bool:
    """Whether a tool_result's content is already a cleared placeholder."""
    if isinstance(content, str):
        return is_cleared_text(content)
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        return (
            isinstance(block, dict)
            and block.get("type") == "text"
            and is_cleared_text(block.get("text"))
        )
    return False


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


class ToolLedger:
    """Tool calls of one conversation, registered incrementally (see the module docstring)."""

    __slots__ = (
        "_open",
        "_reads",
        "_records",
        "_release",
        "_scanned",
        "_stale",
        "generation",
        "tools",
    )

    def __init__(self, tools: CompactableTools | None = None) -> None:
        self.tools = tools if tools is not None else CompactableTools.default()
        self._records: dict[str, ToolRecord] = {}
        self._scanned = 0
        self._open: dict[str, ToolRecord] = {}
        """Compactable calls whose result is in the context and not cleared (any order)."""
        self._reads: dict[str, list[str]] = {}
        """File path -> ids of the reads of it no later call has superseded yet."""
        self._stale: set[str] = set()
        """Ids of reads a later read or write of the same file superseded."""
        self.generation = 0
        """How many times the ledger started over (marks made before then are gone)."""
        self._release = DeferredRelease()
        """The records a start-over let go of, freed over the calls after it."""

    def reset(self) -> None:
        """Forget every record (the next observe rescans from the start)."""
        # ~10,000 records after a long run: freed over the next observes, not in this call.
        self._release.drop(self._records)
        self._records = {}
        self._scanned = 0
        self._open = {}
        self._reads = {}
        self._stale = set()
        self.generation += 1

    @property
    def scanned(self) -> int:
        """How many messages the last observe saw."""
        return self._scanned

    def observe(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Register the tool uses and results that appeared since the last call."""
        self._release.step()
        start = max(0, self._scanned - _TAIL)
        if len(messages) < self._scanned or not self._still_matches(messages, start):
            self.reset()
            start = 0
        records = self._records
        tools = self.tools
        for index in range(start, len(messages)):
            message = messages[index]
            for block in _blocks(message):
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_use":
                    tool_id = block.get("id")
                    if not isinstance(tool_id, str) or tool_id in records:
                        continue
                    name = str(block.get("name", ""))
                    compactable = tools.is_compactable(name)
                    new = ToolRecord(
                        tool_use_id=tool_id,
                        name=name,
                        order=len(records),
                        compactable=compactable,
                        use_index=index,
                        read_path=tools.read_path(block) if compactable else None,
                        write_path=file_write_path(block),
                    )
                    records[tool_id] = new
                    self._supersede(new)
                elif kind == "tool_result":
                    record = records.get(str(block.get("tool_use_id")))
                    if record is None or record.use_index >= index:
                        continue  # an orphan result: nothing the ledger can clear safely
                    if record.result_index is not None and record.result_index != index:
                        continue  # a second result for one call: keep the first
                    arrived = record.result_index is None  # else the tail seen again
                    record.result_index = index
                    record.precleared = is_cleared_content(block.get("content"))
                    record.tokens = tool_result_tokens(block)
                    if record.precleared:
                        self._open.pop(record.tool_use_id, None)
                    elif arrived and record.compactable:
                        self._open[record.tool_use_id] = record
        self._scanned = len(messages)

    def _supersede(self, record: ToolRecord) -> None:
        """A new call reads or writes a file: earlier reads of it are stale from now on."""
        for path in {record.read_path, record.write_path}:
            if path:
                earlier = self._reads.pop(path, None)
                if earlier:
                    self._stale.update(earlier)
        if record.read_path:
            self._reads[record.read_path] = [record.tool_use_id]

    def mark_cleared(self, tool_use_ids: Iterable[str]) -> None:
        """These results are cleared: no longer among `open_results`."""
        for tool_id in tool_use_ids:
            self._open.pop(tool_id, None)

    def open_results(self) -> list[ToolRecord]:
        """Compactable calls whose result is in the context, neither a placeholder already nor
        marked cleared, in call order: what count-based clearing chooses from."""
        return sorted(self._open.values(), key=lambda record: record.order)

    def superseded_reads(self) -> set[str]:
        """Ids of reads whose file a later call read or wrote (the agent works from the newer
        copy); see `micro.superseded_reads`, their from-scratch definition."""
        return set(self._stale)

    def _still_matches(self, messages: Sequence[Mapping[str, Any]], start: int) -> bool:
        """The first and the last tool call before `start` are still where they were seen."""
        if not self._records or start == 0:
            return True
        first: ToolRecord | None = next(iter(self._records.values()))
        last: ToolRecord | None = None
        for candidate in reversed(self._records.values()):
            if candidate.use_index < start:
                last = candidate
                break
        for record in (first, last):
            if record is None or record.use_index >= start:
                continue
            if record.use_index >= len(messages):
                return False
            ids = {
                b.get("id")
                for b in _blocks(messages[record.use_index])
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            if record.tool_use_id not in ids:
                return False
        return True

    def get(self, tool_use_id: str) -> ToolRecord | None:
        """The record of one tool call, if seen."""
        return self._records.get(tool_use_id)

    def __contains__(self, tool_use_id: object) -> bool:
        return tool_use_id in self._records

    def __iter__(self) -> Iterator[ToolRecord]:
        return iter(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

    def records(self) -> list[ToolRecord]:
        """Every tool call seen, in call order."""
        return list(self._records.values())

    def compactable_results(self) -> list[ToolRecord]:
        """Calls of compactable tools whose result is in the messages, in call order."""
        return [r for r in self._records.values() if r.compactable and r.result_index is not None]
