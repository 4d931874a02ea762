"""Rules of the LangChain middleware (`integrations/langchain.py`) that the mutation check
found no test holding: a model error that is not a too-long refusal, or one nothing can be
compacted for, reaches the agent as it was raised; a conversation that starts with a summary
may have the message after it summarized; a settled mark is kept only by a message's id;
what messages are archived as and what a summarizer is sent; a compaction reads its facts
ledger and media from the view's fold only while the view holds the whole conversation; how the summarizer adapters
class a model's failures, size an overflow and read a reply; what the constructor takes,
refuses and defaults to."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents.middleware.types import ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import Field
from summaries import nine_section_summary

from test_langchain_settled import _after_a_clearing_call, _middleware
from unbounded.catalog import ModelInfo
from unbounded.compaction.facts import PrefixFacts
from unbounded.errors import (
    ConfigError,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from unbounded.events import CompactionRetried, Event
from unbounded.integrations import UnboundedMiddleware
from unbounded.integrations import langchain as langchain_module
from unbounded.integrations.langchain import (
    STATE_KEY,
    ChatModelSummarizer,
    FunctionSummarizer,
    is_summary_message,
)
from unbounded.model.response import ModelResponse as UnboundedResponse
from unbounded.policy import Policy
from unbounded.providers.base import MODEL_PROFILE
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.providers.retry import RetryingProvider
from unbounded.tokens.estimate import estimate_messages_tokens

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


LONG_SUMMARY = nine_section_summary("read the modules", analysis=False)
"""A summary the guard takes for the conversations below."""


def test_a_summary_function_is_sent_tool_calls_results_and_media_as_text() -> None:
    """A function summarizer gets the conversation as text: each tool result under its own
    heading (flagged when it failed, a list of blocks joined as text), an image as its
    placeholder."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    calls = [{"name": "read", "args": {"p": p}, "id": f"c_{p}"} for p in "abc"]
    messages: list[BaseMessage] = [
        HumanMessage(["Look:", image], id="h0"),
        AIMessage("", tool_calls=calls, id="a1"),
        ToolMessage("plain result", tool_call_id="c_a", id="t1"),
        ToolMessage("boom", tool_call_id="c_b", status="error", id="t2"),
        ToolMessage([{"type": "text", "text": "listed "}, {"type": "text", "text": "result"}], tool_call_id="c_c", id="t3"),
        AIMessage("done", id="a2"),
        HumanMessage("next", id="h1"),
    ]
    sent: list[list[BaseMessage]] = []

    def summarize(given: list[BaseMessage]) -> str:
        sent.append(given)
        return LONG_SUMMARY

    middleware = UnboundedMiddleware(MODEL, summarizer=summarize, trigger=("messages", 5), keep_messages=0)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None and update[STATE_KEY]["compactions"] == 1
    assert [m.content for m in sent[0]] == [
        "Look:\n\n[image]",
        '[tool call read {"p": "a"}]\n\n[tool call read {"p": "b"}]\n\n[tool call read {"p": "c"}]',
        "[tool result]\nplain result\n\n[tool result (error)]\nboom\n\n[tool result]\nlisted result",
        "done",
    ]


def test_only_text_blocks_of_a_summary_reply_are_its_text() -> None:
    """A block of another type is left out even when it has a `text` field."""
    # Without its tags: the function's text is tagged as the summary whole.
    bare = LONG_SUMMARY.replace("<summary>", "").replace("</summary>", "").strip()
    reply = AIMessage([{"type": "reasoning", "text": "Thinking it over."}, {"type": "text", "text": bare}])
    middleware = UnboundedMiddleware(MODEL, summarizer=lambda given: reply, trigger=("messages", 3), keep_messages=0)
    opening = [HumanMessage("Task one.", id="h0"), AIMessage("Done.", id="a0"), HumanMessage("Task two.", id="h1")]
    update = middleware.before_model({"messages": opening}, None)  # type: ignore[arg-type]
    assert update is not None and is_summary_message(update["messages"][1])
    text = update["messages"][1].content
    assert "Primary Request and Intent: read the modules" in text and "Thinking it over." not in text


def test_archived_ai_messages_keep_their_model_and_a_stable_uuid() -> None:
    """An AI message is archived with the model that wrote it ("langchain" when it does not
    say), its id (a fresh `msg_` id of 24 hex digits without one), and a uuid of its id and a
    16-digit digest of its blocks: the same every time and in every release, so an archive a
    checkpoint kept matches the messages converted again."""
    named = AIMessage("Done.", id="a0", response_metadata={"model_name": "claude-haiku-4-5"})
    opening = [HumanMessage("Task one.", id="h0"), named, AIMessage("Also."), HumanMessage("Task two.", id="h1")]
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 3), keep_messages=0)
    update = middleware.before_model({"messages": opening}, None)  # type: ignore[arg-type]
    assert update is not None
    _, first, second = update[STATE_KEY]["archive"]["messages"]
    assert first["message"]["model"] == "claude-haiku-4-5" and first["message"]["id"] == "a0"
    blocks = json.dumps([{"type": "text", "text": "Done."}], sort_keys=True)
    assert first["uuid"] == "a0#" + hashlib.sha256(blocks.encode()).hexdigest()[:16]
    assert second["message"]["model"] == "langchain"
    assert re.fullmatch(r"msg_[0-9a-f]{24}", second["message"]["id"])


@pytest.mark.parametrize("content", ["Earlier: the task was X.", ""], ids=["text", "empty"])
def test_an_earlier_summary_summarized_again_is_archived_as_a_summary(content: str) -> None:
    """Its text (a placeholder when it has none), flagged as a compaction's summary."""
    summary = HumanMessage(content, id="s0", additional_kwargs={"lc_source": "summarization"})
    assert is_summary_message(summary)
    messages = [summary, HumanMessage("Note A.", id="nA"), AIMessage("ok", id="aA"), HumanMessage("Note B.", id="nB")]
    middleware = UnboundedMiddleware(MODEL, summarizer="extractive", trigger=("messages", 4), keep_messages=0)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    first = update[STATE_KEY]["archive"]["messages"][0]
    assert first["uuid"] == "s0" and first.get("isCompactSummary") is True
    assert first["message"]["content"] == (content or "(summary)")


def test_a_settled_prefix_summarized_keeps_no_usage_of_an_ai_message_kept_by_a_compaction() -> None:
    """The usage of an AI message a compaction kept was counted before the summary: when a
    new middleware converts the settled messages for the next compaction, that message is
    archived without it, and the others with theirs."""
    state = _after_a_clearing_call(120, 30, 10)
    state[STATE_KEY] = {**state[STATE_KEY], "stale_usage_ids": ["ai-5"]}
    update = _middleware(("messages", 100)).before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and update[STATE_KEY]["compactions"] == 1
    usage = {e["uuid"].split("#")[0]: e["message"].get("usage") for e in update[STATE_KEY]["archive"]["messages"]}
    assert usage["ai-5"] is None and usage["ai-6"] is not None


class _Scripted(BaseChatModel):
    """A chat model answering from a script (a message, or an error to raise); records what
    it is sent."""

    script: list[Any] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return ChatResult(generations=[ChatGeneration(message=step)])


class APIStatusError(Exception):
    """An SDK's HTTP error: the status on the error."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class _Response:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code


class HTTPError(Exception):
    """An HTTP client's error: the status on its response."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.response = _Response(status_code)


class RateLimitError(Exception):
    pass


class OverloadedAPIError(Exception):
    pass


class APIConnectionError(Exception):
    pass


REQUEST: Any = {"model": "m", "messages": [{"role": "user", "content": "Read the modules. " * 40}], "max_tokens": 1_000}


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        (APIStatusError(429), RateLimitedError, 429),
        (HTTPError(429), RateLimitedError, 429),
        (RateLimitError("slow down"), RateLimitedError, None),
        (APIStatusError(503), OverloadedError, 503),
        (APIStatusError(529), OverloadedError, 529),
        (OverloadedAPIError("busy"), OverloadedError, None),
        (APIStatusError(500), ServerError, 500),
        (APIConnectionError("reset"), ServerError, None),
        (APIStatusError(499), ProviderError, 499),
        (RuntimeError("bad input"), ProviderError, None),
    ],
    ids=["429", "429-on-response", "rate-limit-name", "503", "529", "overloaded-name", "500", "connection-name", "499", "other"],
)
def test_a_summary_model_s_failure_is_classed_for_retrying_with_its_status(error: Exception, kind: type[ProviderError], status: int | None) -> None:
    """Rate limits, overloads, server errors and lost connections (by status, on the error or
    its response, or by the error's class name) are the retryable errors; anything else is a
    plain provider error. The status travels with it."""
    summarizer = ChatModelSummarizer(_Scripted(script=[error]))
    with pytest.raises(ProviderError) as raised:
        asyncio.run(summarizer.create(REQUEST))
    assert type(raised.value) is kind and raised.value.status == status
    assert raised.value.__cause__ is error


def _too_long(summarizer: ChatModelSummarizer, request: Any, error: Exception) -> PromptTooLongError:
    summarizer.model.script = [error]
    with pytest.raises(PromptTooLongError) as raised:
        asyncio.run(summarizer.create(request))
    return raised.value


def test_a_summary_model_s_overflow_is_sized_by_the_server_s_counts_else_by_the_estimate() -> None:
    """The server's counts when its message has them; else the request's estimate against
    three quarters of it, or against the window's room beside the answer when that is less
    (at least 1), so the retry drops enough at once."""
    estimate = estimate_messages_tokens(REQUEST["messages"])
    assert estimate > 100
    summarizer = ChatModelSummarizer(_Scripted())
    counted = _too_long(summarizer, REQUEST, ContextOverflowError("prompt is too long: 212345 tokens > 200000 maximum"))
    assert (counted.actual_tokens, counted.limit_tokens) == (212_345, 200_000)
    uncounted = ContextOverflowError("input exceeds the context window")
    plain = _too_long(summarizer, REQUEST, uncounted)
    assert (plain.actual_tokens, plain.limit_tokens) == (estimate, estimate * 3 // 4)
    small = ChatModelSummarizer(_Scripted(), context_window=1_010)
    assert _too_long(small, REQUEST, uncounted).limit_tokens == 10
    no_room = ChatModelSummarizer(_Scripted(), context_window=1_000)
    assert _too_long(no_room, REQUEST, uncounted).limit_tokens == 1
    tiny = ChatModelSummarizer(_Scripted(), context_window=100)
    assert _too_long(tiny, {**REQUEST, "max_tokens": None}, uncounted).limit_tokens == 100


def test_a_summary_model_s_reply_gives_its_stop_reason_usage_and_model() -> None:
    usage: Any = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940, "input_token_details": {"cache_read": 300}}
    cut = AIMessage("Half a summ", response_metadata={"stop_reason": "max_tokens", "model_name": "claude-haiku-4-5"}, usage_metadata=usage)
    length = AIMessage("Half a summ", response_metadata={"finish_reason": "length"})
    done = AIMessage("A summary.", response_metadata={"finish_reason": "stop"})
    summarizer = ChatModelSummarizer(_Scripted(script=[cut, length, done]))
    first, second, third = (asyncio.run(summarizer.create(REQUEST)) for _ in range(3))
    assert (first.stop_reason, first.model, first.text) == ("max_tokens", "claude-haiku-4-5", "Half a summ")
    assert first.usage == {"input_tokens": 600, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0, "output_tokens": 40}
    assert (second.stop_reason, second.model, second.usage) == ("max_tokens", "langchain", {})
    assert third.stop_reason == "end_turn"


def test_a_summary_model_is_sent_the_system_prompt_first() -> None:
    """A string, or the text of its blocks joined."""
    messages = [{"role": "user", "content": "Sum up."}]
    for system in ("Write a summary.", [{"type": "text", "text": "Write a"}, {"type": "text", "text": "summary."}]):
        sent = ChatModelSummarizer.to_langchain({"system": system, "messages": messages})  # type: ignore[typeddict-item]
        assert isinstance(sent[0], SystemMessage) and "Write a" in sent[0].content and sent[1].content == "Sum up."
    assert [type(m) for m in ChatModelSummarizer.to_langchain({"system": "", "messages": messages})] == [HumanMessage]  # type: ignore[typeddict-item]


def test_a_summary_model_is_sent_images_and_documents_as_placeholders() -> None:
    """The summary call offers the model text only: a medium is named (with its URL when it
    has one)."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    document = {"type": "document", "source": {"type": "url", "url": "https://x/d.pdf"}}
    content = [{"type": "text", "text": "See"}, image, document]
    sent = ChatModelSummarizer.to_langchain({"messages": [{"role": "user", "content": content}]})  # type: ignore[typeddict-item]
    assert [m.content for m in sent] == ["See\n\n[image]\n\n[document: https://x/d.pdf]"]


def test_summarizers_refuse_what_they_cannot_call() -> None:
    with pytest.raises(ConfigError, match="chat model"):
        ChatModelSummarizer(object())
    with pytest.raises(ConfigError, match="function or a LangChain Runnable"):
        FunctionSummarizer(42)


def _compact(summarizer: Any, events: list[Event] | None = None, **options: Any) -> tuple[UnboundedMiddleware, dict[str, Any] | None]:
    messages = [HumanMessage(f"Note {n}: " + "the module reads its input. " * 30, id=f"n{n}") for n in range(6)]
    middleware = UnboundedMiddleware(MODEL, summarizer=summarizer, trigger=("messages", 5), keep_messages=1, events=None if events is None else events.append, **options)
    return middleware, middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]


def _summary_text(update: dict[str, Any] | None) -> str:
    assert update is not None and is_summary_message(update["messages"][1])
    return str(update["messages"][1].content)


def test_a_runnable_or_a_function_returning_an_awaitable_writes_the_summary() -> None:
    assert "read the modules" in _summary_text(_compact(RunnableLambda(lambda messages: LONG_SUMMARY))[1])

    async def write(messages: list[BaseMessage]) -> str:
        return LONG_SUMMARY

    assert "read the modules" in _summary_text(_compact(lambda messages: write(messages))[1])


def test_a_summary_function_s_overflow_drops_the_oldest_messages_and_asks_again() -> None:
    sent: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        sent.append(messages)
        if len(sent) == 1:
            raise ContextOverflowError("input exceeds the context window")
        return LONG_SUMMARY

    events: list[Event] = []
    _, update = _compact(summarize, events)
    assert "read the modules" in _summary_text(update)
    assert len(sent) == 2 and "Note 0" in str(sent[0][0].content) and "Note 0" not in str(sent[1][0].content)
    assert [type(e) for e in events].count(CompactionRetried) == 1


class _Failing:
    """A provider whose every call fails as the server being down."""

    name = "failing"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> UnboundedResponse:
        self.calls += 1
        raise ServerError("down", status=500)


async def _no_wait(seconds: float) -> None:
    return None


def test_summary_retries_wrap_a_model_once_and_none_wrap_nothing() -> None:
    """A retrying provider given is used as it is (not wrapped in another), the offline
    hand-over is never retried, `summary_retries` 0 sends each summary request once and 1
    twice."""
    given = RetryingProvider(_Failing(), max_retries=1, sleep=_no_wait)
    assert UnboundedMiddleware(MODEL, summarizer=given, summary_retries=2).summarizer is given
    assert isinstance(UnboundedMiddleware(MODEL, summarizer="extractive").summarizer, ExtractiveSummarizer)
    once, twice = _Failing(), _Failing()
    unretried = UnboundedMiddleware(MODEL, summarizer=once, trigger=("messages", 5), keep_messages=1, summary_retries=0)
    assert unretried.summarizer is once
    retried = UnboundedMiddleware(MODEL, summarizer=twice, trigger=("messages", 5), keep_messages=1, summary_retries=1)
    assert isinstance(retried.summarizer, RetryingProvider) and retried.summarizer.inner is twice
    retried.summarizer.sleep = _no_wait
    for middleware in (unretried, retried):
        messages = [HumanMessage(f"Note {n}: " + "the module reads its input. " * 30, id=f"n{n}") for n in range(6)]
        middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert once.calls > 0 and twice.calls == 2 * once.calls


class _Named:
    """A chat model seen only by its attributes (not a LangChain model)."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def test_the_model_s_window_from_a_model_info_a_model_s_name_or_its_profile() -> None:
    info = ModelInfo(name="house-model", provider="other", context_window=64_000, max_output=4_000, input_per_mtok=1.0, output_per_mtok=2.0)
    assert UnboundedMiddleware(info).model_info == info
    assert UnboundedMiddleware(_Named(model_name=MODEL)).model_info.name == MODEL
    assert UnboundedMiddleware(_Named(model=MODEL)).model_info.name == MODEL
    profiled = UnboundedMiddleware(_Named(profile={"max_input_tokens": 120_000})).model_info
    assert (profiled.name, profiled.context_window, profiled.max_output) == ("langchain-model", 120_000, 8_192)
    with pytest.raises(ConfigError, match="context_window must be > 0"):
        UnboundedMiddleware(_Named(profile={"max_input_tokens": 0}))  # no window, not a 1-token one
    for output, kept in ((4_096, 4_096), (1, 1), (0, 8_192)):
        profile = {"max_input_tokens": 120_000, "max_output_tokens": output}
        assert UnboundedMiddleware(_Named(profile=profile)).model_info.max_output == kept


def test_the_settled_mark_names_the_clearable_tools_by_a_key_every_release_reads() -> None:
    """A checkpoint's mark stays valid across releases: its key for "every tool but `kept`"
    is this digest, whatever version wrote it."""
    state = _after_a_clearing_call(120, 30, 10)
    assert state[STATE_KEY]["settled"]["tools"] == "4a6af3ba4c4977a7"


def test_the_constructor_refuses_negative_sizes_and_keeps_its_defaults() -> None:
    for options in ({"keep_messages": -1}, {"keep_tokens": -1}, {"summary_retries": -1}):
        with pytest.raises(ConfigError, match=">= 0"):
            UnboundedMiddleware(MODEL, **options)
    nothing_kept = UnboundedMiddleware(MODEL, keep_messages=0, keep_tokens=0)
    assert (nothing_kept.keep_messages, nothing_kept.keep_tokens) == (0, 0)
    default = UnboundedMiddleware(MODEL)
    assert (default.keep_messages, default.keep_tokens, default.summary_retries) == (10, 20_000, 2)
    retried = UnboundedMiddleware(MODEL, summarizer=_Failing()).summarizer
    assert isinstance(retried, RetryingProvider) and retried.max_retries == 2
    assert UnboundedMiddleware(MODEL, trigger=("tokens", 50_000)).keep_tokens == 10_000


def test_a_chat_model_given_as_the_model_writes_the_summaries_once_learned() -> None:
    """Made a summarizer once per model object; a model call's model that is not a chat
    model leaves it as it is; a summarizer given, or a model named, leaves none."""
    chat = _Scripted()
    middleware = UnboundedMiddleware(chat, context_window=200_000)
    learned = middleware.agent_summarizer
    assert isinstance(learned, RetryingProvider) and isinstance(learned.inner, ChatModelSummarizer)
    assert learned.inner.model is chat and middleware.model_provider() is learned

    request = _Request([HumanMessage("hi", id="h0")])
    request.model = chat
    middleware.wrap_model_call(request, lambda offered: AIMessage("ok"))
    assert middleware.agent_summarizer is learned
    request.model = RunnableLambda(lambda messages: "not a chat model")
    middleware.wrap_model_call(request, lambda offered: AIMessage("ok"))
    assert middleware.agent_summarizer is learned
    assert UnboundedMiddleware(chat, context_window=200_000, summarizer="extractive").agent_summarizer is None
    assert UnboundedMiddleware(MODEL).agent_summarizer is None


def _fold_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The facts fold's answers a compaction asks for, listed as they are asked."""
    asked: list[str] = []
    real_ledger_of, real_rewrites = PrefixFacts.ledger_of, PrefixFacts.rewrites

    def ledger_of(self: PrefixFacts, head: Any, records: Any) -> Any:
        asked.append("ledger")
        return real_ledger_of(self, head, records)

    def rewrites(self: PrefixFacts, head: Any, records: Any) -> bool | None:
        asked.append("media")
        return real_rewrites(self, head, records)

    monkeypatch.setattr(PrefixFacts, "ledger_of", ledger_of)
    monkeypatch.setattr(PrefixFacts, "rewrites", rewrites)
    return asked


def test_a_compaction_of_the_whole_view_takes_its_ledger_and_media_from_the_fold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view holding every message folded them: the ledger and whether a summarized record
    holds media come from the fold, not from reading the summarized records again."""
    asked = _fold_reads(monkeypatch)
    middleware, update = _compact("extractive")
    assert update is not None and middleware._view.base == 0
    assert asked == ["ledger", "media"]


def test_a_compaction_of_a_view_leaving_a_settled_prefix_out_reads_the_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view leaving the settled prefix out holds no fold of it: the ledger reads the
    summarized records and the summary request is looked through for media."""
    state = _after_a_clearing_call(120, 30, 10)
    asked = _fold_reads(monkeypatch)
    middleware = _middleware(("messages", 100))
    update = middleware.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and update[STATE_KEY]["compactions"] == 1
    assert middleware._view.base > 0
    assert asked == []
