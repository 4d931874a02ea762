"""The LangChain middleware reads only what a call adds: checkpointed copies and its own
cleared results are matched by id, not converted or compared again, and what it keeps agrees
with a new middleware reading the same state."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import unbounded.integrations.langchain as middleware_module
from test_integration_langchain import ScriptedChat, read_file, tool_round
from unbounded.integrations import UnboundedMiddleware
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
# At the warning level from the first token (a huge buffer), where a warm cache may be rewritten.
SMALL_BATCHES = Policy(microcompact_min_savings=3_000, microcompact_protect_recent_tokens=4_000, warning_buffer=10**9)
# At the warning level with the default batches: clearing may run, so the view is built (a call
# that needs only the count reads the tail instead).
AT_WARNING = Policy(warning_buffer=10**9)


def history(rounds: int, *, usage: bool = True) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(rounds):
        ai = AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}")
        if usage:
            ai.usage_metadata = {"input_tokens": 1_000 + 600 * n, "output_tokens": 10, "total_tokens": 1_010 + 600 * n}
        messages += [ai, ToolMessage(content=read_file(f"m{n}.py"), tool_call_id=f"call_{n}", id=f"tool_{n}")]
    return messages


def apply(state: dict[str, Any], update: dict[str, Any] | None) -> None:
    """What the agent does with a before_model update (add_messages replaces by id)."""
    if update and "messages" in update:
        by_id = {m.id: m for m in update["messages"]}
        state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
    if update and "unbounded" in update:
        state["unbounded"] = update["unbounded"]


def test_a_clearing_batch_does_not_convert_the_history_again(monkeypatch: pytest.MonkeyPatch) -> None:
    middleware = UnboundedMiddleware(MODEL, context_window=200_000, policy=SMALL_BATCHES)
    state: dict[str, Any] = {"messages": history(30)}
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and update.get("messages")  # a batch was cleared
    apply(state, update)
    converted: list[BaseMessage] = []
    real = middleware_module.message_to_entry

    def counting(message: BaseMessage, **options: Any) -> Any:
        converted.append(message)
        return real(message, **options)

    monkeypatch.setattr(middleware_module, "message_to_entry", counting)
    state["messages"] = [*state["messages"], *history(31)[-2:]]
    middleware.before_model(state, None)  # type: ignore[arg-type]
    # The two new messages only: the cleared copies keep their ids and are not read again.
    assert [m.id for m in converted] == ["ai_30", "tool_30"]


def test_checkpointed_copies_are_matched_by_id_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedChat(messages=iter([tool_round(0), AIMessage(content="done"), tool_round(1), AIMessage(content="again")]))
    agent = create_agent(model, tools=[read_file], middleware=[UnboundedMiddleware(MODEL)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": history(40)}, config)
    compared: list[int] = []
    real_eq = BaseMessage.__eq__

    def counting_eq(self: BaseMessage, other: object) -> bool:
        compared.append(1)
        return bool(real_eq(self, other))

    monkeypatch.setattr(BaseMessage, "__eq__", counting_eq)
    agent.invoke({"messages": [HumanMessage("and again", id="h_again")]}, config)
    # The reloaded messages are copies: comparing them one by one would cost O(history).
    assert len(compared) < 10
    assert agent.get_state(config).values["messages"][-1].content == "again"


def test_the_previous_invokes_copies_are_not_kept_alive() -> None:
    """Each invoke of a checkpointed agent hands the middleware new copies of the history:
    holding the last ones kept two histories alive, and freeing them fell on the next call
    (~20 ms at 10,000 messages). The view keeps ids, so the copies die with the agent's state."""
    middleware = UnboundedMiddleware(MODEL, context_window=200_000, policy=AT_WARNING)
    copies = [message.model_copy() for message in history(20)]
    middleware.before_model({"messages": copies}, None)  # type: ignore[arg-type]
    watched = [weakref.ref(message) for message in copies]
    del copies
    gc.collect()
    assert [ref() for ref in watched if ref() is not None] == []
    # The next call with fresh copies and one more round still reads only the new messages.
    converted: list[BaseMessage] = []
    real = middleware_module.message_to_entry

    def counting(message: BaseMessage, **options: Any) -> Any:
        converted.append(message)
        return real(message, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware_module, "message_to_entry", counting)
        again = [message.model_copy() for message in history(21)]
        middleware.before_model({"messages": again}, None)  # type: ignore[arg-type]
    assert [m.id for m in converted] == ["ai_20", "tool_20"]


def test_messages_without_ids_are_still_matched_by_equality() -> None:
    middleware = UnboundedMiddleware(MODEL, context_window=200_000, policy=AT_WARNING)
    plain = history(5)
    for message in plain:
        message.id = None
    middleware.before_model({"messages": plain}, None)  # type: ignore[arg-type]
    converted: list[BaseMessage] = []
    real = middleware_module.message_to_entry

    def counting(message: BaseMessage, **options: Any) -> Any:
        converted.append(message)
        return real(message, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware_module, "message_to_entry", counting)
        more = [*(m.model_copy() for m in plain), HumanMessage("next")]
        middleware.before_model({"messages": more}, None)  # type: ignore[arg-type]
    assert [m.content for m in converted] == ["next"]


def test_clears_the_agent_did_not_apply_are_read_from_the_messages() -> None:
    """The same state planned twice (the first update dropped) decides as a new middleware."""
    reusing = UnboundedMiddleware(MODEL, context_window=200_000, policy=SMALL_BATCHES)
    state: dict[str, Any] = {"messages": history(30)}
    first = reusing._plan(state)  # type: ignore[arg-type]
    assert first.cleared
    again = reusing._plan(state)  # type: ignore[arg-type]
    fresh = UnboundedMiddleware(MODEL, context_window=200_000, policy=SMALL_BATCHES)._plan(state)  # type: ignore[arg-type]
    assert (again.tokens, again.cleared) == (fresh.tokens, fresh.cleared) == (first.tokens, first.cleared)


def test_without_usage_a_cleared_result_is_counted_as_its_placeholder() -> None:
    """No usage anchors the count: the clears this middleware made follow in it."""
    reusing = UnboundedMiddleware(MODEL, context_window=200_000, policy=SMALL_BATCHES)
    state: dict[str, Any] = {"messages": history(30, usage=False)}
    update = reusing.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and update.get("messages")
    apply(state, update)
    ours = reusing._plan(state)  # type: ignore[arg-type]
    fresh = UnboundedMiddleware(MODEL, context_window=200_000, policy=SMALL_BATCHES)._plan(state)  # type: ignore[arg-type]
    assert ours.tokens == fresh.tokens < first_count(state)


def first_count(state: dict[str, Any]) -> int:
    """The count of the same conversation with nothing cleared."""
    middleware = UnboundedMiddleware(MODEL, context_window=200_000, policy=Policy(microcompact_enabled=False))
    return middleware._plan({"messages": history(30, usage=False)}).tokens  # type: ignore[arg-type]


def test_two_lines_of_one_response_convert_to_distinct_uuids_a_compaction_keeps_apart() -> None:
    from unbounded.integrations.langchain import messages_to_entries
    from unbounded.model.entries import (
        Entry,
        create_compact_boundary,
        messages_after_compact_boundary,
    )

    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "call_1"}
    messages: list[BaseMessage] = [
        HumanMessage("read a.py", id="h1"),
        AIMessage("", tool_calls=[call], id="resp_1"),  # two lines of one response
        ToolMessage("print(1)", tool_call_id="call_1", id="t1"),
        AIMessage("a.py prints one", id="resp_1"),
    ]
    first = messages_to_entries(messages, timestamp="2026-02-01T09:00:00Z")
    again = messages_to_entries(messages, timestamp="2026-02-01T09:00:00Z")
    entries = [entry for entry in first if entry is not None]
    assert [e.uuid for e in entries] == [e.uuid for e in again if e is not None]  # stable
    assert len({e.uuid for e in entries}) == 4
    assert entries[1].message_id == entries[3].message_id == "resp_1"
    # A partial compaction that keeps only the second line keeps that line, not the first.
    boundary = create_compact_boundary("auto", 100)
    boundary.compact_metadata["preservedSegment"] = {
        "headUuid": entries[3].uuid,
        "tailUuid": entries[3].uuid,
        "anchorUuid": "summary",
    }
    summary = Entry.user("summary", is_compact_summary=True, uuid="summary")
    view = messages_after_compact_boundary([*entries, boundary, summary])
    kept = [e for e in view if e.type == "assistant"]
    assert [block["text"] for e in kept for block in e.content] == ["a.py prints one"]
