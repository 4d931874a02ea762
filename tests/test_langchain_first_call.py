"""A new `UnboundedMiddleware` on a long state (a new process, another thread's conversation)
decides as the middleware that saw the conversation grow, and when the call needs only the
count it reads the messages from the last reported usage on, not the history."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import unbounded.integrations.langchain as middleware_module
from test_langchain_view import apply, history
from unbounded.integrations import UnboundedMiddleware
from unbounded.integrations._langchain_view import ConversationView, tail_count
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
CLEARED = "[Old tool result content cleared]"


def clock() -> datetime:
    return NOW


def usage(tokens: int) -> dict[str, Any]:
    return {"input_tokens": tokens, "output_tokens": 10, "total_tokens": tokens + 10}


def converted_by(middleware: UnboundedMiddleware, state: dict[str, Any]) -> list[str | None]:
    """The ids of the messages the middleware's call converts."""
    converted: list[BaseMessage] = []
    real = middleware_module.message_to_entry

    def counting(message: BaseMessage, **options: Any) -> Any:
        converted.append(message)
        return real(message, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware_module, "message_to_entry", counting)
        middleware.before_model(state, None)  # type: ignore[arg-type]
    return [message.id for message in converted]


def test_a_new_middleware_below_the_warning_level_reads_only_the_tail() -> None:
    state: dict[str, Any] = {"messages": [*history(300), HumanMessage("Go on.", id="go")]}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000)
    assert converted_by(middleware, state) == ["ai_299", "tool_299", "go"]


def test_a_stale_usage_does_not_anchor_the_tail() -> None:
    """Usage reported before a compaction is not an anchor: the count starts at an older one."""
    state: dict[str, Any] = {"messages": history(300), "unbounded": {"stale_usage_ids": ["ai_299"]}}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000)
    assert converted_by(middleware, state) == ["ai_298", "tool_298", "ai_299", "tool_299"]
    view = ConversationView(middleware_module._convert)
    view.sync(state["messages"], frozenset(["ai_299"]))
    assert middleware._plan(state).tokens == view.counter.total  # type: ignore[arg-type]


@pytest.mark.parametrize("tools", [{}, {"compactable_tools": ("read_file",)}])
def test_a_call_that_may_clear_builds_the_view(tools: dict[str, Any]) -> None:
    """At the warning level the microcompaction policy may clear: every message from the
    oldest result not cleared yet on is read (here the first call: all but the prompt)."""
    state: dict[str, Any] = {"messages": history(40)}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000, policy=Policy(warning_buffer=10**9), **tools)
    assert set(converted_by(middleware, state)) == {m.id for m in state["messages"]} - {"h0"}


def test_a_call_whose_every_called_tool_is_excluded_reads_only_the_tail() -> None:
    """Nothing may be cleared when every tool called is excluded: the count is all it needs."""
    state: dict[str, Any] = {"messages": history(40)}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000, policy=Policy(warning_buffer=10**9), exclude_tools=("read_file",))
    assert converted_by(middleware, state) == ["ai_39", "tool_39"]


def test_a_due_compaction_builds_the_view() -> None:
    state: dict[str, Any] = {"messages": history(40)}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000, trigger=("messages", 81), summarizer="extractive")
    assert set(converted_by(middleware, state)) == {m.id for m in state["messages"]}


def test_a_cold_cache_builds_the_view() -> None:
    """An hour after the last reply the cache has expired: clearing runs, so the view is built
    from the oldest result not cleared yet (the first call) on."""
    last = (NOW - timedelta(minutes=61)).isoformat()
    state: dict[str, Any] = {"messages": history(40), "unbounded": {"last_model_at": last}}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000, clock=clock)
    assert set(converted_by(middleware, state)) == {m.id for m in state["messages"]} - {"h0"}


def test_without_reported_usage_the_whole_history_is_counted() -> None:
    state: dict[str, Any] = {"messages": history(40, usage=False)}
    middleware = UnboundedMiddleware(MODEL, context_window=1_000_000)
    assert set(converted_by(middleware, state)) == {m.id for m in state["messages"]}


def test_lines_of_one_response_count_what_came_between() -> None:
    """Two AI messages with one id are lines of one response: the results between them are
    not in its usage (the count is then the view's, read from every message)."""
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "call_a"}
    messages: list[BaseMessage] = [
        HumanMessage("Read.", id="h0"),
        AIMessage(content="", tool_calls=[call], id="reply"),
        ToolMessage(content="x" * 4_000, tool_call_id="call_a", id="tool_a"),
        AIMessage(content="done", id="reply", usage_metadata=usage(5_000)),  # type: ignore[arg-type]
    ]
    view = ConversationView(middleware_module._convert)
    view.sync(messages, frozenset())
    assert view.counter.total > 5_000 + 10
    assert tail_count(messages, frozenset(), middleware_module._convert) is None


# -- a new middleware decides as a warm one -------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[BaseMessage], list[int]]:
    """An agent's messages (tool rounds, some results already cleared, some replies without
    usage) and the index after each round."""
    messages: list[BaseMessage] = [HumanMessage("Work through the modules.", id="h0")]
    ends: list[int] = []
    prompt = 2_000
    for n in range(draw(st.integers(1, 24))):
        calls = draw(st.integers(0, 2))
        tool_calls = [
            {
                "name": draw(st.sampled_from(["read_file", "bash"])),
                "args": {"path": f"m{draw(st.integers(0, 4))}.py"},
                "id": f"call_{n}_{k}",
            }
            for k in range(calls)
        ]
        ai = AIMessage(content=f"Step {n}.", tool_calls=tool_calls, id=f"ai_{n}")
        prompt += draw(st.integers(0, 30_000))
        if draw(st.integers(0, 3)):
            ai.usage_metadata = usage(prompt)  # type: ignore[assignment]
        messages.append(ai)
        for call in tool_calls:
            size = draw(st.integers(0, 16_000))
            content = CLEARED if draw(st.integers(0, 4)) == 0 else "y" * size
            messages.append(ToolMessage(content=content, tool_call_id=call["id"], id=f"tool_{call['id']}"))
        if not calls or draw(st.booleans()):
            messages.append(HumanMessage(f"And then {n}?", id=f"h{n + 1}"))
        ends.append(len(messages))
    return messages, ends


def comparable(update: dict[str, Any] | None) -> Any:
    """An update without the fresh uuids and times its archived records carry."""
    if not update:
        return update
    context = dict(update.get("unbounded") or {})
    archive = context.get("archive")
    if archive:
        cleared = {
            tool_id: {key: value for key, value in data.items() if key not in ("uuid", "timestamp")}
            for tool_id, data in archive["cleared"].items()
        }
        context["archive"] = {**archive, "cleared": cleared}
    return {**update, "unbounded": context}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=conversations(),
    stale_share=st.integers(0, 3),
    idle=st.sampled_from([None, 1, 4, 30, 90]),
    warning_buffer=st.sampled_from([20_000, 150_000, 10**9]),
    trigger=st.sampled_from([None, 60_000, 200_000]),
)
def test_a_new_middleware_decides_as_the_one_that_saw_the_conversation_grow(
    conversation: tuple[list[BaseMessage], list[int]],
    stale_share: int,
    idle: int | None,
    warning_buffer: int,
    trigger: int | None,
) -> None:
    messages, ends = conversation
    policy = Policy(
        microcompact_min_savings=3_000,
        microcompact_protect_recent_tokens=4_000,
        warning_buffer=warning_buffer,
    )
    options: dict[str, Any] = {"context_window": 250_000, "policy": policy, "clock": clock}
    if trigger is not None:
        options["trigger"] = ("tokens", trigger)
    context: dict[str, Any] = {}
    if idle is not None:
        context["last_model_at"] = (NOW - timedelta(minutes=idle)).isoformat()
    ai_ids = [m.id for m in messages if isinstance(m, AIMessage) and m.id]
    if stale_share:
        context["stale_usage_ids"] = ai_ids[:: 4 - stale_share] if stale_share < 3 else ai_ids
    warm = UnboundedMiddleware(MODEL, **options)
    state: dict[str, Any] = {"messages": [], "unbounded": context}
    for end in ends:
        state["messages"] = [*state["messages"], *messages[len(state["messages"]) : end]]
        if end == ends[-1]:
            break
        plan = warm._plan(state)  # type: ignore[arg-type]
        apply(state, plan.update())  # clears only: a compaction's summary is not the point here
    fresh = UnboundedMiddleware(MODEL, **options)
    theirs = fresh._plan(state)  # type: ignore[arg-type]
    ours = warm._plan(state)  # type: ignore[arg-type]
    assert (theirs.tokens, theirs.cleared, theirs.compact_at) == (ours.tokens, ours.cleared, ours.compact_at)
    assert comparable(theirs.update()) == comparable(ours.update())
