"""The LangChain v1 middleware, with scripted fake chat models (no network)."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import Field
from summaries import nine_section_summary
from typing_extensions import NotRequired, TypedDict

from unbounded.compaction.tools_registry import cleared_stub
from unbounded.errors import ConfigError
from unbounded.events import Event
from unbounded.integrations import UnboundedMiddleware
from unbounded.integrations.langchain import (
    ChatModelSummarizer,
    FunctionSummarizer,
    UnboundedAgentState,
    is_summary_message,
    message_to_entry,
    usage_from_metadata,
)
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"


class ScriptedChat(GenericFakeChatModel):
    """Answers with scripted messages; reports a usage sized like its input; records inputs.
    Asked for a compaction summary (the middleware's summarizer is the agent's own model), it
    writes one, recorded in `summaries`, without taking a scripted message."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    summaries: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if messages and "<summary>" in str(messages[-1].content):
            self.summaries.append(list(messages))
            written = AIMessage(content=nine_section_summary(f"summary {len(self.summaries)} by the agent's model"))
            return ChatResult(generations=[ChatGeneration(message=written)])
        self.seen.append(list(messages))
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        size = sum(len(str(m.content)) + len(str(getattr(m, "tool_calls", ""))) for m in messages) // 4 + 1_500
        reply = result.generations[0].message
        reply.usage_metadata = {
            "input_tokens": size,
            "output_tokens": 30,
            "total_tokens": size + 30,
            "input_token_details": {"cache_read": size - 200},
        }
        return result


def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + "x = compute(value)\n" * 450  # about 2,000 tokens


def tool_round(n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"mod{n}.py"}, "id": f"call_{n}"}])


def assert_tool_pairs_valid(messages: list[BaseMessage]) -> None:
    """Every ToolMessage answers a tool call of the AI message before its run of results."""
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            j = index - 1
            while j >= 0 and isinstance(messages[j], ToolMessage):
                j -= 1
            assert j >= 0 and isinstance(messages[j], AIMessage), f"orphan tool result at {index}"
            assert message.tool_call_id in {c["id"] for c in messages[j].tool_calls}
        if isinstance(message, AIMessage) and message.tool_calls and index + 1 < len(messages):
            answered = set()
            k = index + 1
            while k < len(messages) and isinstance(messages[k], ToolMessage):
                answered.add(messages[k].tool_call_id)
                k += 1
            assert answered == {c["id"] for c in message.tool_calls}, f"unanswered call at {index}"


def test_compacts_a_long_agent_run_and_keeps_tool_pairs() -> None:
    rounds = 16
    model = ScriptedChat(messages=iter([*(tool_round(n) for n in range(rounds)), AIMessage(content="All modules read.")]))
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(small_window_reference=0), events=events.append)
    agent = create_agent(model, tools=[read_file], system_prompt="You read code.", middleware=[middleware])
    result = agent.invoke({"messages": [HumanMessage("Read every module and report.")]}, {"recursion_limit": 200})

    assert result["messages"][-1].content == "All modules read."
    compacted = [call for call in model.seen if any(is_summary_message(m) for m in call)]
    assert compacted, "no model call saw a summary"
    for call in model.seen:
        conversation = [m for m in call if not isinstance(m, SystemMessage)]
        assert_tool_pairs_valid(conversation)
        entries = [e for e in (message_to_entry(m) for m in conversation) if e is not None]
        validate_request(normalize_messages(entries))
    first = compacted[0]
    summary = next(m for m in first if is_summary_message(m))
    assert "Read every module and report." in summary.content  # the user's words survive (ledger)
    assert "summary 1 by the agent's model" in summary.content  # the agent's own model wrote it
    assert summary.additional_kwargs["lc_data"]["by"] == "unbounded"
    assert summary.additional_kwargs["lc_data"]["fallback"] is None
    before = model.seen[model.seen.index(first) - 1]
    assert len(first) < len(before)
    assert any(e.kind == "compaction_finished" for e in events)
    # The largest context any call saw stays under the window.
    assert max(c.usage_metadata["input_tokens"] for c in result["messages"] if isinstance(c, AIMessage) and c.usage_metadata) < 60_000


def conversation_with_results(count: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(count):
        messages.append(AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}"))
        messages.append(ToolMessage(content=read_file(f"m{n}.py"), tool_call_id=f"call_{n}", id=f"tool_{n}"))
    return messages


def test_microcompaction_holds_count_clears_while_the_cache_is_warm_below_the_warning_level() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    policy = Policy(microcompact_protect_recent_tokens=6_000, microcompact_min_savings=5_000)
    turn = {"last_model_at": (now - timedelta(minutes=1)).isoformat()}
    messages = conversation_with_results(8)
    warm = UnboundedMiddleware(MODEL, policy=policy, exclude_tools=("write_file",), clock=lambda: now)
    assert warm.before_model({"messages": messages, "unbounded_turn": turn}, None) is None  # type: ignore[arg-type]
    # The same conversation at the warning level: clearing now pays for the rewrite.
    at_warning = policy.with_changes(warning_buffer=10**9)
    busy = UnboundedMiddleware(MODEL, policy=at_warning, exclude_tools=("write_file",), clock=lambda: now)
    update = busy.before_model({"messages": messages, "unbounded_turn": turn}, None)  # type: ignore[arg-type]
    assert update is not None and any(isinstance(m, ToolMessage) for m in update["messages"])


def test_microcompaction_clears_in_batches_and_keeps_the_recent_results() -> None:
    # At the warning level (a huge buffer), where clearing may rewrite a warm cache.
    policy = Policy(microcompact_protect_recent_tokens=6_000, microcompact_min_savings=5_000, warning_buffer=10**9)
    middleware = UnboundedMiddleware(MODEL, policy=policy, exclude_tools=("write_file",))
    messages = conversation_with_results(8)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    cleared = update["messages"]
    assert all(isinstance(m, ToolMessage) and m.content == cleared_stub(m.tool_call_id) for m in cleared)
    assert cleared[0].response_metadata["context_editing"]["cleared"] is True
    ids = {m.tool_call_id for m in cleared}
    assert "call_7" not in ids and "call_6" not in ids and "call_5" not in ids  # the 3 most recent
    assert len(ids) >= 3  # a batch, not one at a time

    # Applied to the state (add_messages replaces by id), the next turn clears nothing new
    # until another batch is worth it: the prefix the model sees stays the same.
    by_id = {m.id: m for m in cleared}
    state = [by_id.get(m.id, m) for m in messages]
    state += conversation_with_results(9)[-2:]
    assert middleware.before_model({"messages": state}, None) is None  # type: ignore[arg-type]


def test_time_based_tier_after_an_idle_gap() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    middleware = UnboundedMiddleware(MODEL, policy=Policy(), clock=lambda: now)
    messages = conversation_with_results(8)
    recent = {"messages": messages, "unbounded_turn": {"last_model_at": (now - timedelta(minutes=5)).isoformat()}}
    assert middleware.before_model(recent, None) is None  # type: ignore[arg-type]
    idle = {"messages": messages, "unbounded_turn": {"last_model_at": (now - timedelta(hours=2)).isoformat()}}
    update = middleware.before_model(idle, None)  # type: ignore[arg-type]
    assert update is not None
    assert sorted(m.tool_call_id for m in update["messages"]) == ["call_0", "call_1", "call_2"]  # 5 kept
    # Only the small turn key: the `unbounded` key (the archive) is not written again.
    answered = middleware.after_model({"messages": messages, "unbounded": {"archive": {"cleared": {"x": {}}}}}, None)  # type: ignore[arg-type]
    assert answered is not None and set(answered) == {"unbounded_turn"}
    assert answered["unbounded_turn"]["last_model_at"].startswith("2026-01-01T12:00")


def test_the_turn_key_is_read_before_the_time_a_thread_saved_earlier_kept() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    middleware = UnboundedMiddleware(MODEL, policy=Policy(), clock=lambda: now)
    messages = conversation_with_results(8)
    idle = {"last_model_at": (now - timedelta(hours=2)).isoformat()}
    recent = {"last_model_at": (now - timedelta(minutes=5)).isoformat()}
    # A thread saved before the turn key kept the time in `unbounded`: still read.
    update = middleware.before_model({"messages": messages, "unbounded": idle}, None)  # type: ignore[arg-type]
    assert update is not None and len(update["messages"]) == 3
    # Once the turn key is written, its time is the one that counts.
    both = {"messages": messages, "unbounded": idle, "unbounded_turn": recent}
    assert middleware.before_model(both, None) is None  # type: ignore[arg-type]


def test_the_time_a_thread_saved_earlier_kept_is_dropped_by_the_next_write_of_the_key() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    middleware = UnboundedMiddleware(MODEL, policy=Policy(), clock=lambda: now)
    messages = conversation_with_results(8)
    # A graph that drops the turn key (a state class declaring only `unbounded`), on a thread
    # saved when the time was kept in `unbounded` two hours ago.
    earlier = {"last_model_at": (now - timedelta(hours=2)).isoformat()}
    update = middleware.before_model({"messages": messages, "unbounded": earlier}, None)  # type: ignore[arg-type]
    assert update is not None and len(update["messages"]) == 3  # the idle gap clears once
    assert "last_model_at" not in update["unbounded"]
    # Applied, with two more results: no idle gap is read again, so nothing more is cleared
    # (the old time carried along would clear down to the newest 5 on every call).
    by_id = {m.id: m for m in update["messages"]}
    state = [by_id.get(m.id, m) for m in messages] + conversation_with_results(10)[-4:]
    assert middleware.before_model({"messages": state, "unbounded": update["unbounded"]}, None) is None  # type: ignore[arg-type]


def test_a_compaction_drops_the_time_a_thread_saved_earlier_kept() -> None:
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(small_window_reference=0), keep_messages=4, keep_tokens=5_000)
    earlier = {"last_model_at": "2026-01-01T10:00:00+00:00", "compactions": 0}
    update = middleware.before_model({"messages": conversation_with_results(20), "unbounded": earlier}, None)  # type: ignore[arg-type]
    assert update is not None and update["unbounded"]["compactions"] == 1
    assert "last_model_at" not in update["unbounded"]


class _OnlyTheArchiveKey(TypedDict):
    """A custom graph's state class as the docs once told: no `unbounded_turn` key."""

    messages: Annotated[list[BaseMessage], add_messages]
    unbounded: NotRequired[dict[str, Any]]


def _custom_graph(middleware: UnboundedMiddleware, model: ScriptedChat, schema: Any) -> Any:
    """before_model, the model, after_model as plain nodes, with a tool loop."""
    graph = StateGraph(schema)
    graph.add_node("manage", lambda s: middleware.before_model(s, None))
    graph.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    graph.add_node("answered", lambda s: middleware.after_model(s, None))
    graph.add_node("tools", ToolNode([read_file]))
    graph.add_edge(START, "manage")
    graph.add_edge("manage", "model")
    graph.add_edge("model", "answered")
    graph.add_conditional_edges("answered", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "manage")
    return graph.compile(checkpointer=InMemorySaver())


def _dropped_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "dropped the 'unbounded_turn' key" in r.getMessage()]


def test_a_graph_that_drops_the_turn_key_is_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    answers = [tool_round(0), tool_round(1), AIMessage(content="done"), tool_round(2), AIMessage(content="again")]
    middleware = UnboundedMiddleware(MODEL)
    app = _custom_graph(middleware, ScriptedChat(messages=iter(answers)), _OnlyTheArchiveKey)
    config: Any = {"configurable": {"thread_id": "custom"}}
    with caplog.at_level(logging.WARNING, logger="unbounded.integrations.langchain"):
        app.invoke({"messages": [HumanMessage("go")]}, config)
        app.invoke({"messages": [HumanMessage("go on")]}, config)
    assert "unbounded_turn" not in app.get_state(config).values  # LangGraph dropped the write
    warnings = _dropped_warnings(caplog)
    assert len(warnings) == 1  # once per middleware, not once per call
    assert "NotRequired[TurnState]" in warnings[0]


def test_a_graph_that_keeps_the_turn_key_or_a_new_invoke_is_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    answers = [tool_round(0), tool_round(1), AIMessage(content="done")]
    app = _custom_graph(UnboundedMiddleware(MODEL), ScriptedChat(messages=iter(answers)), UnboundedAgentState)
    with caplog.at_level(logging.WARNING, logger="unbounded.integrations.langchain"):
        app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "kept"}})
        # No checkpointer: each invoke starts from the messages given (no private key at all).
        model = ScriptedChat(messages=iter([AIMessage(content="done"), AIMessage(content="again")]))
        agent = create_agent(model, tools=[read_file], middleware=[UnboundedMiddleware(MODEL)])
        result = agent.invoke({"messages": [HumanMessage("go")]})
        agent.invoke({"messages": [*result["messages"], HumanMessage("and again")]})
    assert _dropped_warnings(caplog) == []


def _stored_versions(saver: InMemorySaver, channel: str) -> int:
    """How many values of one channel the checkpointer has stored (each is a whole copy)."""
    return sum(1 for key in saver.blobs if key[2] == channel)


def test_a_call_that_clears_nothing_does_not_store_the_archive_again() -> None:
    answers = [tool_round(n) for n in range(6)] + [AIMessage(content="done")]
    model = ScriptedChat(messages=iter(answers))
    # Everything settled is cleared at once (small protected tail), so later calls are quiet.
    policy = Policy(warning_buffer=10**9, microcompact_protect_recent_tokens=3_000, microcompact_min_savings=1_000)
    saver = InMemorySaver()
    agent = create_agent(model, tools=[read_file], middleware=[UnboundedMiddleware(MODEL, policy=policy)], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "quiet"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    history = [snapshot.values.get("unbounded") for snapshot in agent.get_state_history(config)]
    archives = [dict((context or {}).get("archive", {}).get("cleared", {})) for context in reversed(history)]
    changes = sum(1 for before, after in zip([{}, *archives], archives, strict=False) if after != before)
    assert archives and archives[-1]  # results were cleared (and archived)
    # One stored `unbounded` value per call that changed it, not one per model call (7).
    assert _stored_versions(saver, "unbounded") == changes < 7
    assert _stored_versions(saver, "unbounded_turn") == 7  # every model call's answer time


class _EarlierLayout(UnboundedMiddleware):
    """The middleware as it saved a thread before the turn key: the answer time inside the
    `unbounded` key (with the archive), written after every model call."""

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        context = dict(state.get("unbounded") or {})
        context["last_model_at"] = self._clock().astimezone(timezone.utc).isoformat()
        return {"unbounded": context}


def test_a_thread_saved_before_the_turn_key_resumes() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "earlier"}}
    # Saved by the earlier layout two hours ago, with results cleared (and archived) then.
    answers = [tool_round(n) for n in range(8)] + [AIMessage(content="done")]
    policy = Policy(warning_buffer=10**9, microcompact_protect_recent_tokens=12_000, microcompact_min_savings=3_000)
    earlier = _EarlierLayout(MODEL, policy=policy, clock=lambda: now - timedelta(hours=2))
    agent = create_agent(ScriptedChat(messages=iter(answers)), tools=[read_file], middleware=[earlier], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    saved = agent.get_state(config).values
    assert "unbounded_turn" not in saved and "last_model_at" in saved["unbounded"]
    archived = set(saved["unbounded"]["archive"]["cleared"])
    assert archived and archived < {"call_0", "call_1", "call_2"}

    # The upgraded middleware resumes the thread (a warm cache would hold the time tier back).
    model = ScriptedChat(messages=iter([AIMessage(content="back")]))
    later = UnboundedMiddleware(MODEL, policy=Policy(), clock=lambda: now)
    agent = create_agent(model, tools=[read_file], middleware=[later], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("go on")]}, config)
    state = agent.get_state(config).values
    # The idle gap read from the earlier layout's time cleared all but the newest 5 results.
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    cleared = {m.tool_call_id for m in results if m.content == cleared_stub(m.tool_call_id)}
    assert len(results) == 8 and cleared == {m.tool_call_id for m in results[:3]}
    # The earlier archive is kept next to the new originals; the answer time is in the turn key.
    assert archived | cleared <= set(state["unbounded"]["archive"]["cleared"])
    assert state["unbounded_turn"]["last_model_at"].startswith("2026-01-01T12:00")


def test_compaction_update_replaces_the_state() -> None:
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(small_window_reference=0), keep_messages=4, keep_tokens=5_000)
    messages: list[BaseMessage] = [SystemMessage("rules", id="s0"), *conversation_with_results(12)]
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    new = update["messages"]
    assert isinstance(new[0], RemoveMessage)
    assert isinstance(new[1], SystemMessage) and is_summary_message(new[2])
    kept = new[3:]
    assert 0 < len(kept) <= 4 and isinstance(kept[0], AIMessage)  # cut before a tool round
    assert_tool_pairs_valid(new[2:])
    assert update["unbounded"]["stale_usage_ids"] == [m.id for m in kept if isinstance(m, AIMessage)]
    assert "Summary:" in new[2].content and "m0.py" in new[2].content


def test_a_chat_model_can_write_the_summary_async() -> None:
    summary_model = ScriptedChat(messages=iter([]))
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(small_window_reference=0), summarizer=summary_model)
    assert isinstance(getattr(middleware.summarizer, "inner", None), ChatModelSummarizer)  # retried
    update = asyncio.run(middleware.abefore_model({"messages": conversation_with_results(12)}, None))  # type: ignore[arg-type]
    assert update is not None and "summary 1 by the agent's model" in update["messages"][1].content
    prompt = summary_model.summaries[0]
    assert any("[tool call read_file" in str(m.content) for m in prompt)  # tool rounds as text


def test_a_failing_summarizer_leaves_the_messages_and_trips_the_breaker() -> None:
    class Broken:
        name = "broken"
        supports_cache_edits = False
        profile = MODEL_PROFILE

        async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
            from unbounded.providers.base import ServerError

            raise ServerError("down")

    events: list[Any] = []
    breaker_only = Policy(small_window_reference=0, compact_max_summary_requests=100)
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, policy=breaker_only, summarizer=Broken(), summary_retries=0, events=events.append)
    state: dict[str, Any] = {"messages": conversation_with_results(12)}
    for failures in (1, 2):
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        assert update is not None and "messages" not in update  # the history is untouched
        state["unbounded"] = update["unbounded"]
        assert state["unbounded"]["failures"] == failures
        assert not [e for e in events if e.kind == "circuit_breaker_tripped"]
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    assert [e.failures for e in events if e.kind == "circuit_breaker_tripped"] == [3]  # the third
    assert update is not None and isinstance(update["messages"][0], RemoveMessage)  # offline, at once
    assert update["unbounded"]["failures"] == 0
    assert update["unbounded"]["last_summary"] == {"summarizer": "extractive", "fallback": "breaker_open", "summary_requests": 6}


def test_state_survives_between_invocations_with_a_checkpointer() -> None:
    model = ScriptedChat(messages=iter([tool_round(0), AIMessage(content="done"), AIMessage(content="again")]))
    agent = create_agent(model, tools=[read_file], middleware=[UnboundedMiddleware(MODEL)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    state = agent.get_state(config).values
    assert "last_model_at" in state["unbounded_turn"]
    assert "last_model_at" not in state.get("unbounded", {})
    agent.invoke({"messages": [HumanMessage("and again")]}, config)
    assert agent.get_state(config).values["messages"][-1].content == "again"


def test_conversions() -> None:
    ai = AIMessage(
        content=[{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "reading"}],
        tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": "c1"}],
        usage_metadata={"input_tokens": 1_000, "output_tokens": 20, "total_tokens": 1_020, "input_token_details": {"cache_read": 700, "cache_creation": 100}},
        id="ai1",
    )
    entry = message_to_entry(ai)
    assert entry is not None and [b["type"] for b in entry.content] == ["thinking", "text", "tool_use"]
    assert entry.usage == {"input_tokens": 200, "cache_read_input_tokens": 700, "cache_creation_input_tokens": 100, "output_tokens": 20}
    assert message_to_entry(ai, anchor_usage=False).usage is None  # type: ignore[union-attr]
    error = message_to_entry(ToolMessage(content="failed", tool_call_id="c1", status="error"))
    assert error is not None and error.content[0]["is_error"] is True
    image = message_to_entry(HumanMessage(content=[{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]))
    assert image is not None and image.content[1]["type"] == "image"
    assert usage_from_metadata(None) is None
    with pytest.raises(ConfigError, match="unknown model"):
        UnboundedMiddleware("no-such-model")
    with pytest.raises(ConfigError, match="cannot tell the context window"):
        UnboundedMiddleware(object())
    assert UnboundedMiddleware(object(), context_window=32_000).model_info.context_window == 32_000


def test_reusing_the_last_calls_work_changes_nothing() -> None:
    """Call after call on a growing conversation (with clearing and a compaction on the way),
    the middleware that reuses what it converted and counted decides what a new one would."""
    reusing = UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(microcompact_min_savings=3_000, microcompact_protect_recent_tokens=4_000))
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    state: dict[str, Any] = {"messages": messages}
    decisions = 0
    for n in range(14):
        ai = AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}")
        ai.usage_metadata = {"input_tokens": 2_000 * n, "output_tokens": 10, "total_tokens": 2_000 * n + 10}
        state["messages"] = [*state["messages"], ai, ToolMessage(content=read_file(f"m{n}.py"), tool_call_id=f"call_{n}", id=f"tool_{n}")]
        fresh = UnboundedMiddleware(MODEL, context_window=40_000, policy=reusing.policy)
        ours, theirs = reusing._plan(state), fresh._plan(state)  # type: ignore[arg-type]
        assert (ours.tokens, ours.compact_at, ours.cleared) == (theirs.tokens, theirs.compact_at, theirs.cleared), n
        update = reusing.before_model(state, None)  # type: ignore[arg-type]
        if update and "messages" in update:
            decisions += 1
            new = update["messages"]
            if isinstance(new[0], RemoveMessage):
                state["messages"] = new[1:]
            else:
                by_id = {m.id: m for m in new}
                state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
    assert decisions >= 2  # it cleared and compacted on the way


def test_close_closes_the_loops_the_sync_hooks_kept() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def summarize(messages: list[BaseMessage]) -> str:
        loops.append(asyncio.get_running_loop())
        return nine_section_summary("reading modules")

    summarizer = FunctionSummarizer(summarize)
    with UnboundedMiddleware(MODEL, context_window=40_000, policy=Policy(small_window_reference=0), summarizer=summarizer) as middleware:
        middleware.before_model({"messages": conversation_with_results(12)}, None)  # type: ignore[arg-type]
        worker = threading.Thread(target=middleware.before_model, args=({"messages": conversation_with_results(12)}, None))
        worker.start()
        worker.join()
        assert len(loops) == 2 and loops[0] is not loops[1]  # a loop per thread
        assert not any(loop.is_closed() for loop in loops)
    assert all(loop.is_closed() for loop in loops)
