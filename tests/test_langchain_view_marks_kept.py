"""A view built again leaving a settled prefix out follows no messages for a summary's cache
markers (`ConversationView.marks`: the normalizer's messages are taken only while no prefix
is left out). The planner must then not hold the messages of the view it had before: they
are the whole earlier history, results not cleared, kept alive until the next compaction."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import unbounded.integrations.langchain as middleware_module
from test_langchain_compaction_incremental import cleared_copy, compacted, parallel_rounds
from unbounded.integrations._langchain_view import ConversationView


def renamed(message: BaseMessage) -> BaseMessage:
    """The message with its ids (and its calls' ids) prefixed, to follow a compaction."""
    if isinstance(message, ToolMessage):
        return message.model_copy(
            update={"id": f"x{message.id}", "tool_call_id": f"x{message.tool_call_id}"}
        )
    if isinstance(message, AIMessage):
        calls = [{**call, "id": f"x{call['id']}"} for call in message.tool_calls]
        return message.model_copy(update={"id": f"x{message.id}", "tool_calls": calls})
    return message.model_copy(update={"id": f"x{message.id}"})


def test_a_view_built_again_with_a_settled_prefix_keeps_no_earlier_messages() -> None:
    view = ConversationView(middleware_module._convert, lambda called: tuple(called))
    messages = parallel_rounds(6)[:-1]
    view.sync(messages, frozenset())
    left = compacted(messages)
    view.rebase(left)
    later = [*left, HumanMessage("Go on.", id="go"), *map(renamed, parallel_rounds(40)[1:])]
    view.sync(later, frozenset())
    assert view.base == 0  # built whole after the compaction: its messages are followed
    earlier = list(view.normalizer.borrowed_messages())
    assert view.marks.reusable_prefix(earlier) == len(earlier) > 80
    # The agent cleared most results, then removed a message: the view is built again and
    # leaves the settled prefix out.
    cleared = [
        cleared_copy(m) if isinstance(m, ToolMessage) and i < len(later) - 10 else m
        for i, m in enumerate(later)
    ]
    del cleared[len(later) - 5]
    view.sync(cleared, frozenset())
    assert view.base > 0
    assert view.marks.reusable_prefix(earlier) == 0  # none of them is held any more
