"""Where the part of a LangChain conversation that no call can change ends.

A middleware that meets a long conversation for the first time (a new process on a
checkpointed thread) needs, to clear old tool results, only what clearing may still choose
from: the results that do not read the cleared placeholder yet. Everything before the oldest
of them is settled: clearing never chooses a placeholder again (the history only grows; a
compaction replaces it and starts over), the time-based tier's kept results that fall in it
are placeholders it would not clear either, and the count is anchored after it.
`settled_prefix` finds where that part ends, in one pass over the messages that reads ids
and contents but converts nothing, so the view converts, normalizes and counts only what
follows.

The split falls at the first line of a response (never between a tool call and its result,
nor between lines of one response), so the messages after it normalize into the same tool
calls and results, and count the same, as they do in the whole conversation. A result after
the split that answers a call before it is an orphan either way (the normalizer turns it into
text in the whole conversation too).

The split only moves forward (the history grows, results are cleared, never restored), so a
split found once bounds every later one from below. The middleware keeps the last one it
found in its private state (`SettledMark`, written by each call that clears), and a new
middleware on that state checks in O(1) that it still fits (the message at the split carries
the id kept for it) and scans only from there (`scan_calls(start=)`); when it does not fit
(messages taken out or inserted before the split, another clearing configuration) the whole
conversation is scanned. The check cannot see a message before the split replaced in place
under the same id (LangGraph's `add_messages` replacing by id, `graph.update_state`): seeing
it would mean reading every message again. Such an edit is never cleared while the mark
stands, so a caller rewriting earlier messages drops `state["unbounded"]["settled"]` with it
(the next call then reads the whole conversation). A tool call
id used again after the split, whose first use lies before it, is not seen as repeated then,
as a view that starts at the split would not see it either.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from typing_extensions import TypedDict

from unbounded.compaction.ledger import is_cleared_content


class SettledMark(TypedDict):
    """Where the settled part of a conversation ended when a call last cleared (kept in the
    middleware's private state; module docstring)."""

    count: int
    """How many leading messages (after the leading system messages) were settled."""
    id: str
    """The id of the first message not settled (the first line of a response)."""
    tools: str
    """A digest of which tools' results may be cleared (another configuration's split is
    not this one's)."""


@dataclass(slots=True)
class CallScan:
    """What one pass over a conversation's ids and contents found (`scan_calls`)."""

    names: dict[str, None]
    """The tools the AI messages call, in order of first call."""
    anchor: int
    """Index of the last AI message whose usage anchors the count (-1: none)."""
    uncleared: list[tuple[int, str]]
    """(index of the call, tool name) of each result that does not read the placeholder."""
    repeated: bool
    """Some tool call id is used twice (the normalizer renames the later one)."""


def scan_calls(
    messages: Sequence[BaseMessage],
    stale: frozenset[str],
    *,
    start: int = 0,
    cleared: Collection[str] = (),
) -> CallScan:
    """One pass over the messages from `start` on (ids, tool calls, result contents; nothing
    converted); indices are those of `messages`. The results of the tool call ids in `cleared`
    count as cleared (this call clears them)."""
    names: dict[str, None] = {}
    call_at: dict[str, tuple[int, str]] = {}
    uncleared: list[tuple[int, str]] = []
    repeated = False
    kinds: dict[type, int] = {}  # (an isinstance check per message is a large share of it)
    for index in range(start, len(messages)):
        message = messages[index]
        kind = kinds.get(type(message))
        if kind is None:
            kind = kinds[type(message)] = _kind(message)
        if kind == _RESULT:
            tool_id = message.tool_call_id  # type: ignore[attr-defined]
            call = call_at.get(tool_id)
            if (
                call is not None
                and tool_id not in cleared
                and not is_cleared_content(message.content)
            ):
                uncleared.append(call)
        elif kind == _REPLY:
            for valid in message.tool_calls:  # type: ignore[attr-defined]
                name = valid["name"]
                names[name] = None
                tool_id = valid.get("id") or ""
                if tool_id in call_at:
                    repeated = True
                call_at[tool_id] = (index, name)
            for invalid in message.invalid_tool_calls:  # type: ignore[attr-defined]
                tool_id = invalid.get("id") or ""
                if tool_id in call_at:
                    repeated = True
                call_at[tool_id] = (index, str(invalid.get("name") or "unknown"))
    return CallScan(names, _anchor(messages, stale, start), uncleared, repeated)


_OTHER, _RESULT, _REPLY = 0, 1, 2


def _kind(message: BaseMessage) -> int:
    if isinstance(message, ToolMessage):
        return _RESULT
    return _REPLY if isinstance(message, AIMessage) else _OTHER


def _anchor(messages: Sequence[BaseMessage], stale: frozenset[str], start: int) -> int:
    """Index of the last AI message from `start` on whose usage anchors the count (-1:
    none)."""
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if (
            isinstance(message, AIMessage)
            and message.usage_metadata
            and (message.id or "") not in stale
        ):
            return index
    return -1


def settled_prefix(
    messages: Sequence[BaseMessage],
    scan: CallScan,
    compactable: Callable[[str], bool],
    start: int = 0,
) -> int:
    """How many leading messages are settled (module docstring): 0 when none may be left out.

    `scan`: `scan_calls` of the messages from `start` on, a split found before (0: the whole
    conversation); `compactable(name)`: whether that tool's results may be cleared."""
    if scan.repeated or scan.anchor < start:
        # A repeated call id is renamed by the normalizer only when it reads the first use;
        # without a usage anchoring it, the count estimates every message.
        return 0
    split = scan.anchor
    for at, name in scan.uncleared:
        if at < split and compactable(name):
            split = at
    return _response_start(messages, split)


def _response_start(messages: Sequence[BaseMessage], index: int) -> int:
    """The first line of the response the AI message at `index` belongs to: a later line
    (an AI message with the id of the one before it, across tool results) is counted and
    normalized with the lines before it."""
    while index > 0:
        message = messages[index]
        if isinstance(message, AIMessage):
            earlier = _previous_response(messages, index)
            if earlier is None or message.id is None or earlier.id != message.id:
                return index
        index -= 1
    return 0


def _previous_response(messages: Sequence[BaseMessage], index: int) -> AIMessage | None:
    """The AI message before `index` across tool results only (the one the normalizer would
    merge a line of the same response into), else None."""
    for earlier_index in range(index - 1, -1, -1):
        earlier = messages[earlier_index]
        if isinstance(earlier, AIMessage):
            return earlier
        if not isinstance(earlier, ToolMessage):
            return None
    return None


def settled_split(
    messages: Sequence[BaseMessage],
    stale: frozenset[str],
    compactable: Callable[[str], bool],
    *,
    start: int = 0,
    cleared: Collection[str] = (),
) -> tuple[CallScan, int]:
    """The scan and the settled prefix of `messages`, scanning from `start` (a split found
    before; 0: none) and again from 0 when that part cannot tell (no anchoring usage after
    `start`, or a repeated call id in it)."""
    scan = scan_calls(messages, stale, start=start, cleared=cleared)
    settled = settled_prefix(messages, scan, compactable, start)
    if start and settled == 0:
        scan = scan_calls(messages, stale, cleared=cleared)
        settled = settled_prefix(messages, scan, compactable)
    return scan, settled


def mark_start(messages: Sequence[BaseMessage], mark: SettledMark | None, tools: str) -> int:
    """Where a kept split lets the scan start: its count when the message there still carries
    the id kept for it and the clearing configuration is the same, else 0."""
    if not mark or mark.get("tools") != tools:
        return 0
    count = mark.get("count", 0)
    if not isinstance(count, int) or not 0 < count < len(messages):
        return 0
    boundary = messages[count].id
    return count if boundary is not None and boundary == mark.get("id") else 0


__all__ = [
    "CallScan",
    "SettledMark",
    "mark_start",
    "scan_calls",
    "settled_prefix",
    "settled_split",
]
