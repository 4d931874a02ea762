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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from unbounded.compaction.ledger import is_cleared_content


def called_tools(messages: Sequence[BaseMessage]) -> dict[str, None]:
    """The tools the AI messages call, in order of first call."""
    names: dict[str, None] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                names[call["name"]] = None
    return names


def settled_prefix(
    messages: Sequence[BaseMessage],
    stale: frozenset[str],
    compactable: Callable[[str], bool],
) -> int:
    """How many leading messages are settled (module docstring): 0 when none may be left out.

    `compactable(name)`: whether that tool's results may be cleared; `stale`: ids of AI
    messages whose usage does not anchor the count."""
    call_at: dict[str, int] = {}
    name_of: dict[str, str] = {}
    anchor = -1
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        calls = [(str(c.get("id") or ""), c["name"]) for c in message.tool_calls]
        calls += [
            (str(c.get("id") or ""), str(c.get("name") or "unknown"))
            for c in message.invalid_tool_calls
        ]
        for tool_id, name in calls:
            if tool_id in call_at:
                return 0  # a repeated call id is renamed by the normalizer: read it all
            call_at[tool_id] = index
            name_of[tool_id] = name
        if message.usage_metadata and (message.id or "") not in stale:
            anchor = index
    if anchor < 0:
        return 0  # no usage anchors the count: every message is estimated
    start = anchor
    for message in messages:
        if isinstance(message, ToolMessage):
            at = call_at.get(message.tool_call_id)
            if (
                at is not None
                and at < start
                and compactable(name_of[message.tool_call_id])
                and not is_cleared_content(message.content)
            ):
                start = at
    return _response_start(messages, start)


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


__all__ = ["called_tools", "settled_prefix"]
