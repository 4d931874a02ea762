"""When a session offers `recall`, and how one call becomes a tool_result block.

The tool is offered in conversations that use tools (the host runs a tool loop, so one more
tool is answered like the others), when `Policy.recall_enabled` is on and no tool of the
host's is called `recall` already. It is added after the host's tools; a `Session` adds it
from the first request that takes something out of the context (`Session.offers_recall`,
`Policy.recall_from_start`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.errors import RecallArgumentError
from unbounded.policy import Policy
from unbounded.recall.lookup import RecallAnswer, RecallContext, answer_recall
from unbounded.recall.schema import (
    RECALL_TOOL_NAME,
    RecallRequest,
    recall_tool_schema,
)
from unbounded.tokens.estimate import rough_token_count


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    if isinstance(function, Mapping):
        return function.get("name")
    return tool.get("name")


def offers_recall(tools: Sequence[Mapping[str, Any]], policy: Policy) -> bool:
    """Whether a conversation with these tools is offered `recall` (module docstring)."""
    if not policy.recall_enabled or not tools:
        return False
    return not any(_tool_name(tool) == RECALL_TOOL_NAME for tool in tools)


def with_recall_tool(
    tools: Sequence[Mapping[str, Any]], policy: Policy
) -> list[dict[str, Any]]:
    """The tools of a request: the host's, then `recall` when it is offered."""
    out = [dict(tool) for tool in tools]
    if offers_recall(tools, policy):
        out.append(recall_tool_schema("anthropic"))
    return out


def is_recall_call(block: Mapping[str, Any]) -> bool:
    """Whether a tool_use block calls `recall`."""
    return block.get("type", "tool_use") == "tool_use" and block.get("name") == RECALL_TOOL_NAME


def recall_tool_result(
    tool_use: Mapping[str, Any], context: RecallContext
) -> tuple[dict[str, Any], RecallAnswer | None]:
    """The tool_result block answering a recall call (an `is_error` result when its arguments
    are wrong), and the answer (None for wrong arguments)."""
    tool_id = str(tool_use.get("id") or "")
    try:
        request = RecallRequest.from_input(tool_use.get("input"))
    except RecallArgumentError as error:
        return (
            {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": f"Error: {error}",
                "is_error": True,
            },
            None,
        )
    answer = answer_recall(request, context)
    return {"type": "tool_result", "tool_use_id": tool_id, "content": answer.text}, answer


def answer_tokens(result: Mapping[str, Any]) -> int:
    """Estimated tokens of a recall's tool_result text."""
    content = result.get("content")
    return rough_token_count(content) if isinstance(content, str) else 0
