"""When session memory updates its notes: what the notes do not cover yet, and the rule.

`progress_since(view, updated_through)` measures the view past the last message the notes
cover (their pointer): padded tokens, tool calls, the tool calls of the last response and the
uuid an update started now would cover. `should_update` is the trigger:

tokens added since the covered message >= `Policy.session_memory_min_tokens_between_updates`
(5,000) AND (tool calls since then >= `session_memory_tool_calls_between_updates` (3) OR the
last response made no tool call). The first update also waits for the context to hold
`session_memory_init_tokens` (10,000). Why these numbers: 5,000 tokens is two to four agent
steps of tool output; an update is a full-context forked call (cheap when it reads the shared
cache, never free), so updating every turn would cost more than the compactions it saves,
while updating rarely leaves more uncovered messages that compaction must keep verbatim.
5,000 is half of the 10,000 tokens a session-memory compaction keeps anyway, so the uncovered
tail normally fits in what is kept. Three tool calls is one read-edit-check cycle, a unit
worth a note; a response without tool calls ends the agent's turn, a natural moment to write
things down even after fewer calls.

The trigger is checked every turn, so `ProgressTracker` keeps `progress_since`'s figures up
to date instead of walking the view from the pointer each time: it remembers how many
entries it has seen (a watermark) and adds only the entries appended since. A view that grows
by appending keeps its first entry and the entry under the watermark as the same objects;
when either changed or the view got shorter (a compaction or a rewind rebuilt it), or the
pointer moved (an update, a post-compact reset), it scans again from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from unbounded.compaction.notes import first_message_index
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.tokens.estimate import entry_tokens, pad_estimate


@dataclass(frozen=True, slots=True)
class UpdateProgress:
    """What happened since the last message the notes cover."""

    start: int
    """Index in the view of the first message the notes do not cover."""
    pointer_found: bool
    """Whether the covered message is still in the view (False: nothing is covered)."""
    tokens_since: int
    """Estimated tokens (padded) of the view from `start` on."""
    tool_calls_since: int
    """tool_use blocks in responses from `start` on."""
    last_turn_tool_calls: int | None
    """tool_use blocks of the last response in the view (None: there is none)."""
    last_uuid: str | None
    """The last entry of the view an update started now would cover."""


def tool_use_count(entry: Entry) -> int:
    """tool_use blocks in an assistant entry (0 for anything else)."""
    content = entry.content
    if entry.type != "assistant" or not isinstance(content, list):
        return 0
    return sum(1 for block in content if block.get("type") == "tool_use")


@dataclass(slots=True)
class _Scan:
    """`progress_since`'s figures before padding, and the last response's message id."""

    start: int
    found: bool
    raw_tokens: int
    tool_calls: int
    last_turn_tool_calls: int | None
    last_response_id: str | None
    last_uuid: str | None

    def progress(self) -> UpdateProgress:
        """The figures as `UpdateProgress` (tokens padded)."""
        return UpdateProgress(
            start=self.start,
            pointer_found=self.found,
            tokens_since=pad_estimate(self.raw_tokens),
            tool_calls_since=self.tool_calls,
            last_turn_tool_calls=self.last_turn_tool_calls,
            last_uuid=self.last_uuid,
        )


def _scan(view: Sequence[Entry], updated_through: str | None) -> _Scan:
    """The from-scratch walk: the pointer searched from the end, then everything after it."""
    floor = first_message_index(view)
    start = floor
    found = False
    if updated_through is not None:
        for index in range(len(view) - 1, floor - 1, -1):
            if view[index].uuid == updated_through:
                start, found = index + 1, True
                break
    raw = 0
    calls = 0
    for entry in view[start:]:
        raw += entry_tokens(entry)
        calls += tool_use_count(entry)
    # The last response: its lines share a message id; user lines may sit between them.
    last_turn: int | None = None
    last_id: str | None = None
    for entry in reversed(view):
        if entry.type != "assistant" or entry.is_synthetic_api_error:
            continue
        if last_turn is None:
            last_turn, last_id = 0, entry.message_id
        elif entry.message_id is None or entry.message_id != last_id:
            break
        last_turn += tool_use_count(entry)
        if last_id is None:
            break
    last_uuid = next((e.uuid for e in reversed(view) if e.uuid and e.is_conversation), None)
    return _Scan(start, found, raw, calls, last_turn, last_id, last_uuid)


def progress_since(view: Sequence[Entry], updated_through: str | None) -> UpdateProgress:
    """Tokens and tool calls in the view after the message the notes cover (pure)."""
    return _scan(view, updated_through).progress()


_NEVER = object()
"""The pointer of a tracker that has not scanned yet (None is a valid pointer)."""


class ProgressTracker:
    """`progress_since`, advanced by the entries appended since the last call (module
    docstring): O(new entries) per call while the view only grows."""

    __slots__ = ("_first", "_last", "_pointer", "_scan", "_scanned", "rescans")

    def __init__(self) -> None:
        self._scan = _Scan(0, False, 0, 0, None, None, None)
        self._pointer: object = _NEVER
        self._scanned = 0
        self._first: Entry | None = None
        self._last: Entry | None = None
        self.rescans = 0
        """How many calls scanned the view from scratch (the rest added only new entries)."""

    def progress(self, view: Sequence[Entry], updated_through: str | None) -> UpdateProgress:
        """What the notes do not cover yet; equal to `progress_since(view, updated_through)`."""
        if self._rewritten(view) or updated_through != self._pointer:
            self._scan = _scan(view, updated_through)
            self._pointer = updated_through
            self.rescans += 1
        else:
            self._advance(view, updated_through)
        self._scanned = len(view)
        self._first = view[0] if view else None
        self._last = view[-1] if view else None
        return self._scan.progress()

    def _rewritten(self, view: Sequence[Entry]) -> bool:
        """Whether the view is no longer the one seen plus appended entries."""
        seen = self._scanned
        if seen == 0 or len(view) < seen:
            return True
        return view[0] is not self._first or view[seen - 1] is not self._last

    def _advance(self, view: Sequence[Entry], updated_through: str | None) -> None:
        """Fold the entries past the watermark into the figures."""
        scan = self._scan
        for index in range(self._scanned, len(view)):
            entry = view[index]
            uuid = entry.uuid
            calls = tool_use_count(entry)
            if updated_through is not None and uuid == updated_through:
                # The pointer's uuid again, later: the search from the end finds this one.
                scan.start, scan.found, scan.raw_tokens, scan.tool_calls = index + 1, True, 0, 0
            else:
                scan.raw_tokens += entry_tokens(entry)
                scan.tool_calls += calls
            if entry.type == "assistant" and not entry.is_synthetic_api_error:
                response_id = entry.message_id
                if response_id is None or response_id != scan.last_response_id:
                    scan.last_turn_tool_calls, scan.last_response_id = calls, response_id
                else:
                    assert scan.last_turn_tool_calls is not None
                    scan.last_turn_tool_calls += calls
            if uuid and entry.is_conversation:
                scan.last_uuid = uuid


def should_update(
    progress: UpdateProgress, policy: Policy, *, context_tokens: int, initialized: bool
) -> bool:
    """The trigger (module docstring): enough new tokens and calls, or a quiet turn."""
    if not policy.session_memory_enabled:
        return False
    if not initialized and context_tokens < policy.session_memory_init_tokens:
        return False
    if progress.tokens_since < policy.session_memory_min_tokens_between_updates:
        return False
    if progress.tool_calls_since >= policy.session_memory_tool_calls_between_updates:
        return True
    return progress.last_turn_tool_calls == 0


__all__ = ["ProgressTracker", "UpdateProgress", "progress_since", "should_update", "tool_use_count"]
