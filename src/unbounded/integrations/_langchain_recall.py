"""The `recall` tool of the LangChain middleware, and the archive it reads.

A LangChain agent's state holds only the messages the model sees: a cleared `ToolMessage`
holds the placeholder, and a compaction removes the summarized messages. The middleware
therefore keeps what it takes out in its private state (`ContextState["archive"]`): the
original result of every cleared tool message (`cleared`, by tool call id) and the records of
every summarized message (`messages`), as unbounded entries. The tool, registered by the
middleware, reads that archive and the current messages through LangChain's `ToolRuntime`
and answers with `unbounded.recall.answer_recall`, its result read as every integration's
recall answer (`_support.recall_answer`); it never reads anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any, cast

from langchain.tools import ToolRuntime
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from unbounded.integrations._support import recall_answer
from unbounded.model.entries import Entry
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.lookup import RecallContext
from unbounded.recall.offer import recall_tool_result
from unbounded.recall.schema import RECALL_DESCRIPTION, RECALL_TOOL_NAME

ARCHIVE_KEY = "archive"
"""The key of the archive in the middleware's private state."""

Convert = Callable[[BaseMessage], Entry | None]


def archive_of(context: Mapping[str, Any]) -> dict[str, Any]:
    """The archive in a middleware state (a copy to update: messages and cleared results)."""
    stored = context.get(ARCHIVE_KEY)
    archive = dict(stored) if isinstance(stored, Mapping) else {}
    archive["messages"] = list(archive.get("messages") or [])
    archive["cleared"] = dict(archive.get("cleared") or {})
    return archive


def keep_cleared(archive: dict[str, Any], entries: Mapping[str, Entry]) -> None:
    """Keep the original records of results being cleared now (tool call id -> entry)."""
    for tool_id, entry in entries.items():
        archive["cleared"].setdefault(tool_id, entry.data)


def keep_summarized(archive: dict[str, Any], entries: Sequence[Entry | None]) -> None:
    """Keep the records of messages a compaction takes out of the state."""
    # (at C speed: a compaction hands over thousands of them)
    present = compress(entries, map(is_not, entries, repeat(None)))
    archive["messages"].extend(map(_DATA, cast(Iterable[Entry], present)))


_DATA = attrgetter("data")


def recall_context(
    state: Mapping[str, Any], state_key: str, convert: Convert, budget_tokens: int
) -> RecallContext:
    """What the tool may read: the archive, then the current messages (cleared results with
    their originals)."""
    context = state.get(state_key) or {}
    archive = archive_of(context if isinstance(context, Mapping) else {})
    cleared: dict[str, Any] = archive["cleared"]
    earlier = [Entry(dict(_original(data, cleared))) for data in archive["messages"]]
    view: list[Entry] = []
    whole: list[Entry] = list(earlier)
    for message in state.get("messages") or []:
        if isinstance(message, SystemMessage):
            continue
        entry = convert(message)
        if entry is None:
            continue
        view.append(entry)
        original = cleared.get(message.tool_call_id) if isinstance(message, ToolMessage) else None
        whole.append(Entry(dict(original)) if isinstance(original, Mapping) else entry)
    present = {m.tool_call_id for m in state.get("messages") or [] if isinstance(m, ToolMessage)}
    return RecallContext(
        entries=whole,
        view=view,
        cleared_ids=frozenset(tool_id for tool_id in cleared if tool_id in present),
        index=TranscriptIndex().update(whole),
        budget_tokens=budget_tokens,
    )


def _original(data: Mapping[str, Any], cleared: Mapping[str, Any]) -> Mapping[str, Any]:
    """A summarized tool-result record with its original content, when it had been cleared."""
    message = data.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        kept = cleared.get(str(content[0].get("tool_use_id")))
        if isinstance(kept, Mapping):
            return kept
    return data


def tool_name(tool: Any) -> str | None:
    """The name of a tool as a model request lists it (a LangChain tool or a dict)."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        return str(name) if name is not None else None
    name = getattr(tool, "name", None)
    return str(name) if name is not None else None


def without_lone_recall(tools: Sequence[Any]) -> list[Any] | None:
    """The tools with `recall` left out when it is the only one (a conversation without
    tools never offers it); None when the list stays as it is."""
    if tools and all(tool_name(tool) == RECALL_TOOL_NAME for tool in tools):
        return []
    return None


def build_recall_tool(state_key: str, convert: Convert, budget_tokens: int) -> BaseTool:
    """The `recall` tool for the agent (answers from the state it is given at run time)."""

    def recall(
        runtime: ToolRuntime,
        id: str | None = None,
        path: str | None = None,
        command: str | None = None,
        query: str | None = None,
        start_line: int | None = None,
    ) -> str:
        """Bring back cleared or summarized text of this conversation.

        Args:
            id: The tool call id whose result to bring back.
            path: A file path: the latest tool output that read this file.
            command: A shell command: the latest output of this command.
            query: Words to search for in the summarized part of the conversation.
            start_line: First line to return of a long output (default 1).
        """
        given = {"id": id, "path": path, "command": command, "query": query}
        arguments: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if start_line is not None:
            arguments["start_line"] = start_line
        context = recall_context(runtime.state, state_key, convert, budget_tokens)
        call = {"type": "tool_use", "id": runtime.tool_call_id or "", "input": arguments}
        answer = recall_answer(recall_tool_result(call, context)[0])
        if answer.is_error:
            # The agent's ToolMessage then has status="error" (is_error on the wire).
            raise ToolException(answer.text)
        return answer.text

    return StructuredTool.from_function(
        recall,
        name=RECALL_TOOL_NAME,
        description=RECALL_DESCRIPTION,
        parse_docstring=True,
        handle_tool_error=True,
    )
