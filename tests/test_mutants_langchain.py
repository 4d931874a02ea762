"""Rules of the LangChain middleware (`integrations/langchain.py`) that the mutation check
found no test holding: a model error that is not a too-long refusal, or one nothing can be
compacted for, reaches the agent as it was raised; a conversation that starts with a summary
may have the message after it summarized; a settled mark is kept only by a message's id."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents.middleware.types import ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from test_langchain_settled import _after_a_clearing_call, _middleware
from unbounded.events import Event
from unbounded.integrations import UnboundedMiddleware
from unbounded.integrations import langchain as langchain_module
from unbounded.integrations.langchain import STATE_KEY, is_summary_message
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
TOO_LONG = "prompt is too long: 212345 tokens > 200000 maximum"


def _rounds(count: int) -> list[BaseMessage]:
    """A prompt and `count` tool rounds of large results (a compaction has rounds to cut)."""
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(count):
        call = {"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}
        messages.append(AIMessage(content="", tool_calls=[call], id=f"ai_{n}"))
        messages.append(ToolMessage(content="x = 1\n" * 300, tool_call_id=f"call_{n}", id=f"t_{n}"))
    return [*messages, HumanMessage("Go on.", id="h_last")]


class _Request:
    """What `wrap_model_call` reads of LangChain's model request."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.model = None
        self.tools: list[Any] = []
        self.state: dict[str, Any] = {"messages": messages}
        self.messages = messages

    def override(self, **changes: Any) -> _Request:
        copy = _Request(self.messages)
        copy.__dict__.update(changes)
        return copy


def _call(middleware: UnboundedMiddleware, request: _Request, handler: Any, run: str) -> Any:
    if run == "sync":
        return middleware.wrap_model_call(request, handler)

    async def ahandler(offered: Any) -> Any:
        return handler(offered)

    return asyncio.run(middleware.awrap_model_call(request, ahandler))


def _failing(error: Exception) -> tuple[list[Any], Any]:
    sent: list[Any] = []

    def handler(offered: Any) -> Any:
        sent.append(offered)
        raise error

    return sent, handler


@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_error_that_is_not_a_too_long_refusal_is_raised_without_compacting(run: str) -> None:
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", events=events.append)
    error = RuntimeError("connection reset by peer")
    sent, handler = _failing(error)
    with pytest.raises(RuntimeError) as raised:
        _call(middleware, _Request(_rounds(8)), handler, run)
    assert raised.value is error and len(sent) == 1
    assert [e.kind for e in events] == []


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_too_long_refusal_with_nothing_to_cut_is_raised_as_it_came(run: str) -> None:
    """One message: no round to summarize, so no reactive compaction is even tried."""
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", events=events.append)
    error = RuntimeError(TOO_LONG)
    sent, handler = _failing(error)
    with pytest.raises(RuntimeError) as raised:
        _call(middleware, _Request([HumanMessage("x " * 5_000, id="h0")]), handler, run)
    assert raised.value is error and len(sent) == 1
    assert "reactive_compaction" not in [e.kind for e in events]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_too_long_refusal_with_compaction_off_is_raised_as_it_came(run: str) -> None:
    events: list[Event] = []
    policy = Policy(compact_enabled=False)
    middleware = UnboundedMiddleware(MODEL, policy=policy, summarizer="extractive", events=events.append)
    error = RuntimeError(TOO_LONG)
    sent, handler = _failing(error)
    with pytest.raises(RuntimeError) as raised:
        _call(middleware, _Request(_rounds(8)), handler, run)
    assert raised.value is error and len(sent) == 1
    assert [e.kind for e in events].count("reactive_compaction") == 1


def test_the_message_after_an_earlier_summary_may_be_summarized() -> None:
    """A summary already first is never summarized alone, but the cut may fall right after
    the message that follows it."""
    first = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 3), keep_messages=0)
    opening = [HumanMessage("Task one.", id="h0"), AIMessage("Done.", id="a0"), HumanMessage("Task two.", id="h1")]
    compacted = first.before_model({"messages": opening}, None)  # type: ignore[arg-type]
    assert compacted is not None
    summary = compacted["messages"][1]
    assert is_summary_message(summary)
    notes = [HumanMessage(f"Note {c}.", id=f"n{c}") for c in "ABC"]
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 4), keep_messages=2)
    state = {"messages": [summary, *notes], STATE_KEY: compacted[STATE_KEY]}
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None
    assert [m.id for m in update["messages"][2:]] == ["nB", "nC"]
    lc_data = update["messages"][1].additional_kwargs["lc_data"]
    assert lc_data["messages_summarized"] == 2
    assert lc_data["fallback"] == "asked_for"  # the offline hand-over was chosen, not fallen back to
    assert update[STATE_KEY]["summary_requests"] == 0  # the next compaction has a budget of its own


CLEARING = Policy(microcompact_protect_recent_tokens=6_000, microcompact_min_savings=5_000, warning_buffer=10**9)
"""Clearing due at once (the warning level), five of eight large results a batch."""


def _results(ids: bool) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0" if ids else None)]
    for n in range(8):
        call = {"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}
        messages.append(AIMessage(content="", tool_calls=[call], id=f"ai_{n}" if ids else None))
        result = ToolMessage(content="x = compute(value)\n" * 450, tool_call_id=f"call_{n}", id=f"t_{n}" if ids else None)
        messages.append(result)
    return messages


def test_clears_that_settle_nothing_leave_no_settled_mark() -> None:
    """The settled mark names the message where the settled part ends: with none settled
    after this call's clears there is no message to name, and the state holds no mark."""
    update = UnboundedMiddleware(MODEL, policy=CLEARING).before_model({"messages": _results(True)}, None)  # type: ignore[arg-type]
    assert update is not None and len(update["messages"]) == 5  # five results cleared
    assert "archive" in update[STATE_KEY] and "settled" not in update[STATE_KEY]


@pytest.mark.parametrize(
    "error",
    [ContextOverflowError("input exceeds the context window"), RuntimeError("prompt is too long")],
    ids=["overflow-class", "text-without-counts"],
)
def test_a_too_long_refusal_compacts_once_and_the_answer_follows_the_compacted_messages(
    error: Exception,
) -> None:
    """LangChain's own overflow error (its text need not say "prompt is too long"), or that
    text without token counts, is a too-long refusal; the answer to the send after compacting
    is listed after the compacted messages, with an id of its own, so the update's removal
    does not take it out."""
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", events=events.append)
    sent: list[Any] = []
    answer = AIMessage("Done.")  # a model's answer has no id until the state gives it one

    def handler(offered: Any) -> Any:
        sent.append(offered)
        if len(sent) == 1:
            raise error
        return ModelResponse(result=[answer])

    response = middleware.wrap_model_call(_Request(_rounds(8)), handler)
    assert len(sent) == 2 and is_summary_message(sent[1].messages[0])
    assert [e.kind for e in events].count("reactive_compaction") == 1
    listed = response.command.update["messages"]
    assert isinstance(listed[0], RemoveMessage) and is_summary_message(listed[1])
    assert listed[-1] is answer and answer.id


def test_clears_of_messages_without_ids_rewrite_the_whole_list() -> None:
    """add_messages replaces by id: results without one are cleared by sending every message
    again after a removal of all."""
    messages = _results(False)
    update = UnboundedMiddleware(MODEL, policy=CLEARING).before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    rewritten = update["messages"]
    assert isinstance(rewritten[0], RemoveMessage) and len(rewritten) == len(messages) + 1
    cleared = [m for m in rewritten[1:] if isinstance(m, ToolMessage) and m.content != messages[2].content]
    assert [m.tool_call_id for m in cleared] == [f"call_{n}" for n in range(5)]


def test_a_failed_compaction_archives_only_the_results_it_cleared() -> None:
    """The summary failed, so nothing was summarized: the recall archive keeps the cleared
    results' originals and no summarized messages."""

    def failing(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("summary service down")

    middleware = UnboundedMiddleware(
        MODEL, policy=CLEARING, summarizer=failing, trigger=("messages", 5), keep_messages=0, summary_retries=0
    )
    update = middleware.before_model({"messages": _results(True)}, None)  # type: ignore[arg-type]
    assert update is not None and update[STATE_KEY]["failures"] == 1
    assert all(isinstance(m, ToolMessage) for m in update["messages"])  # the list is not cut
    archive = update[STATE_KEY]["archive"]
    assert sorted(archive["cleared"]) == [f"call_{n}" for n in range(5)]
    assert archive["messages"] == []


def test_a_settled_prefix_summarized_is_stamped_with_the_call_s_timestamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new middleware converts the settled messages only when a compaction reads them: they
    take the timestamp the rest of the call's messages took, not a later clock reading."""
    state = _after_a_clearing_call(120, 30, 10)
    assert state[STATE_KEY]["settled"]["count"] > 0
    later = "1999-01-01T00:00:00.000Z"
    monkeypatch.setattr(langchain_module, "now_iso", lambda: later)
    update = _middleware(("messages", 100)).before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and update[STATE_KEY]["compactions"] == 1
    archived = update[STATE_KEY]["archive"]["messages"]
    assert len(archived) > 200 and all(entry["timestamp"] != later for entry in archived)


def test_summarized_messages_of_every_content_shape_are_archived_in_anthropic_shape() -> None:
    """What a compaction takes out is archived for recall as the API's blocks: LangChain's
    string and text blocks, its image and file forms, unknown blocks as their JSON, a tool
    result's list, a later system message's text, and the usage without its cache reads."""
    human = HumanMessage(
        content=[
            "plain",
            {"type": "text", "text": "t"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
            {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
            {"type": "image_url", "image_url": "https://x/b.png"},
            {"type": "file", "base64": "QUJD", "mime_type": "application/pdf"},
            {"type": "image", "url": "https://x/c.png"},
            {"type": "custom", "x": 1},
        ],
        id="h0",
    )
    usage: Any = {"input_tokens": 900, "output_tokens": 5, "total_tokens": 905, "input_token_details": {"cache_read": 300}}
    call = {"name": "read_file", "args": {"path": "a"}, "id": "c1"}
    messages = [
        human,
        HumanMessage("Read a.", id="h1"),
        AIMessage(content="", tool_calls=[call], id="a1", usage_metadata=usage),
        ToolMessage(content=[{"type": "text", "text": "r"}, "s", {"type": "custom"}], tool_call_id="c1", id="t1"),
        SystemMessage(content=["a", {"type": "text", "text": "b"}, {"type": "other"}], id="s1"),
        HumanMessage("last", id="h9"),
    ]
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 6), keep_messages=0)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    user, plain, reply, result, system = (e["message"] for e in update[STATE_KEY]["archive"]["messages"])
    assert user["content"] == [
        {"type": "text", "text": "plain"},
        {"type": "text", "text": "t"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/b.png"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "QUJD"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/c.png"}},
        {"type": "text", "text": '{"type": "custom", "x": 1}'},
    ]
    assert plain["content"] == "Read a."
    assert reply["content"] == [{"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}}]
    assert reply["usage"] == {
        "input_tokens": 600,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 0,
        "output_tokens": 5,
    }
    assert result["content"][0]["content"] == [
        {"type": "text", "text": "r"},
        {"type": "text", "text": "s"},
        {"type": "text", "text": '{"type": "custom"}'},
    ]
    assert system["content"] == "[system]\nab"


def test_ai_messages_are_archived_with_their_thinking_invalid_calls_and_usage() -> None:
    """An AI message's thinking (signed or not), redacted thinking and text blocks, a call
    LangChain could not parse (no name, no id: its raw arguments kept), and its usage, cache
    reads apart and never below zero."""
    thinking = AIMessage(
        content=[
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "thinking", "thinking": "more"},
            {"type": "redacted_thinking", "data": "xx"},
            "str",
            {"type": "text", "text": "tx"},
        ],
        invalid_tool_calls=[{"name": None, "args": "{bad", "id": None, "error": None, "type": "invalid_tool_call"}],
        id="a2",
        usage_metadata={"input_tokens": 300, "output_tokens": 0, "total_tokens": 300, "input_token_details": {"cache_read": 300}},
    )
    unused = AIMessage("ok", id="a3", usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
    messages = [HumanMessage("go", id="h0"), thinking, HumanMessage("more", id="h1"), unused, HumanMessage("last", id="h9")]
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 5), keep_messages=0)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    _, first, _, second = (e["message"] for e in update[STATE_KEY]["archive"]["messages"])
    assert first["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "thinking", "thinking": "more"},
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "text", "text": "str"},
        {"type": "text", "text": "tx"},
        {"type": "tool_use", "id": "", "name": "unknown", "input": {"raw": "{bad"}},
    ]
    zero = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 0}
    assert first["usage"] == {**zero, "cache_read_input_tokens": 300}
    assert second["usage"] == zero
