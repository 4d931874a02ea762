"""What a LangChain user expects of a summarization middleware, checked on UnboundedMiddleware.

The behaviours LangChain's own tests check for `SummarizationMiddleware`, written again for
this middleware: a real `create_agent` on `ChatAnthropic` (langchain-anthropic) pointed at the
scripted local server, which refuses what the API refuses (an unanswered tool call, too many
cache markers, a prompt over the window), so a wrong request cannot pass unnoticed. Where the
middleware differs on purpose (docs/integrations.md has the table), the test says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")
pytest.importorskip("langchain_anthropic")

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    bad_request,
    message,
    overloaded,
    prompt_too_long,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.events import Event
from unbounded.integrations import UnboundedMiddleware
from unbounded.integrations.langchain import is_summary_message, messages_to_entries
from unbounded.tokens.estimate import entry_tokens, pad_estimate

MODEL = "claude-sonnet-4-6"
SUMMARY = nine_section_summary("read the modules", analysis=False)


def chat(api: ApiServer, model: str = MODEL, **options: Any) -> ChatAnthropic:
    """ChatAnthropic talking to the local server, without the SDK's own retries."""
    return ChatAnthropic(model=model, base_url=api.base_url, api_key="test-key", max_retries=0, max_tokens=1024, **options)


def read_module(path: str) -> str:
    """Read a module."""
    return f"# {path}\n" + "value = compute(value)\n" * 60


def history(rounds: int, *, output: str = "x = 1\n" * 300, usage: int | None = None) -> list[BaseMessage]:
    """A prompt and `rounds` tool rounds; the last AI message reports `usage` input tokens."""
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(rounds):
        ai = AIMessage(content="", tool_calls=[{"name": "read_module", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}")
        if usage is not None and n == rounds - 1:
            ai.usage_metadata = {"input_tokens": usage, "output_tokens": 20, "total_tokens": usage + 20}
        messages += [ai, ToolMessage(content=output, tool_call_id=f"call_{n}", id=f"t_{n}")]
    return messages


def sent_text(request: RecordedRequest) -> str:
    return json.dumps(request.json["messages"])


def is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in sent_text(request) and "tools" not in request.json


# --------------------------------------------------------------------------- what is kept


def test_a_new_human_message_larger_than_the_keep_budget_is_kept_whole(api_server: ApiServer) -> None:
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, keep_tokens=1_000)
    big = "Here is the spec. " + " ".join(f"rule{i} applies" for i in range(900))  # ~3,000 tokens
    api_server.anthropic.push(message("Understood.", id="msg_1"))
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[middleware])
    state = agent.invoke({"messages": [*history(6, usage=30_000), HumanMessage(big, id="h_new")]})
    sent = api_server.last.json["messages"]
    assert big in sent_text(api_server.last)  # sent whole, not only inside the summary
    assert "This session continues" in json.dumps(sent[0])
    kept = [m for m in state["messages"] if not is_summary_message(m)]
    assert kept[0].content == big and is_summary_message(state["messages"][0])


def test_the_newest_tool_round_is_kept_whole(api_server: ApiServer) -> None:
    """The tool results the next call answers are never summarized away, however large."""
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, keep_tokens=100)  # < the round
    api_server.anthropic.push(
        message(tool_use_block("read_module", {"path": "big.py"}, id="toolu_big"), id="msg_1", usage={"input_tokens": 29_000}),
        message(SUMMARY, id="msg_s"),  # the agent's own model writes the summary
        message("Read it.", id="msg_2"),
    )
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[middleware])
    agent.invoke({"messages": [*history(4), HumanMessage("Now read big.py.", id="h1")]})
    after = api_server.last.json["messages"]
    assert "This session continues" in json.dumps(after[0])
    assert after[-2]["role"] == "assistant" and after[-2]["content"][-1]["id"] == "toolu_big"
    assert after[-1]["content"][0]["tool_use_id"] == "toolu_big"
    assert "value = compute(value)" in json.dumps(after[-1])  # the result itself, verbatim


def test_keep_tokens_is_measured_like_the_trigger(api_server: ApiServer) -> None:
    """The kept tail's padded estimate stays within keep_tokens (beyond the newest round)."""
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, keep_tokens=4_000, keep_messages=100)
    messages = [*history(12, usage=30_000), HumanMessage("Go on.", id="h1")]
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    kept = update["messages"][2:]
    tail = [e for e in messages_to_entries(kept) if e is not None]
    assert pad_estimate(sum(entry_tokens(e) for e in tail)) <= 4_000
    assert sum(entry_tokens(e) for e in tail) > 4_000 * 0.75 - 1_000  # not far below either
    assert isinstance(kept[0], AIMessage)  # cut before a round, never inside one


# --------------------------------------------------------------------------- windows


def test_a_16k_window_from_the_profile_does_not_compact_every_call(api_server: ApiServer) -> None:
    api_server.context_window = 16_384  # the server refuses anything over it

    def reply(request: RecordedRequest) -> Any:
        if is_summary_request(request):  # the agent's own model writes the summaries
            return message(SUMMARY, id=f"msg_s{len(api_server.requests)}")
        n = sum(1 for r in api_server.requests if not is_summary_request(r))
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 30}
        if n > 14:
            return message("All read.", id="msg_end", usage=usage)
        return message(tool_use_block("read_chapter", {"number": n}, id=f"toolu_{n}"), id=f"msg_{n}", usage=usage)

    def read_chapter(number: int) -> str:
        """Read a chapter."""
        return f"Chapter {number}\n" + f"finding {number} holds. " * 300  # ~1,500 tokens

    model = chat(api_server, model="local-16k", profile={"max_input_tokens": 16_384, "max_output_tokens": 4_096})
    events: list[Event] = []
    # Results never cleared, so the window fills and compaction must do the work.
    middleware = UnboundedMiddleware(model, events=events.append, exclude_tools=("read_chapter",))
    assert middleware.model_info.context_window == 16_384
    api_server.anthropic.push(*([reply] * 25))
    agent = create_agent(model, tools=[read_chapter], middleware=[middleware])
    result = agent.invoke({"messages": [HumanMessage("Read chapters 1 to 14.")]}, {"recursion_limit": 100})
    assert result["messages"][-1].content == "All read."
    compactions = [e for e in events if e.kind == "langchain_compacted"]
    assert 1 <= len(compactions) <= 4, len(compactions)  # 15 calls
    assert not any(e.kind == "generic_event" for e in events)  # every event has its own type
    calls = [r for r in api_server.requests if not is_summary_request(r)]
    assert max(len(r.body) // 4 for r in calls) < 16_384


def test_model_names_in_langchains_form() -> None:
    assert UnboundedMiddleware("anthropic:claude-sonnet-4-6").model_info.name == "claude-sonnet-4-6"
    with pytest.raises(ConfigError, match="unknown model"):
        UnboundedMiddleware("anthropic:no-such-model")


# --------------------------------------------------------------------------- the summary


def test_image_urls_reach_the_summary(api_server: ApiServer) -> None:
    url = "https://example.com/diagram.png"
    picture = HumanMessage(content=[{"type": "text", "text": "Here is the design."}, {"type": "image_url", "image_url": {"url": url}}], id="h_img")
    messages = [picture, AIMessage("Noted the design.", id="a_img"), *history(8, usage=30_000)[1:], HumanMessage("Continue.", id="h2")]
    extractive = UnboundedMiddleware(MODEL, context_window=40_000)
    update = extractive.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None and url in update["messages"][1].content  # in the summary itself
    api_server.anthropic.push(message(nine_section_summary(f"design at {url}"), id="msg_s"))
    by_model = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server))
    by_model.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert f"[image: {url}]" in sent_text(api_server.last)  # the summary model sees the link


def test_a_transient_summary_error_is_retried_with_backoff(api_server: ApiServer) -> None:
    events: list[Event] = []
    api_server.anthropic.push(overloaded(), message(SUMMARY, id="msg_s"))
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server), events=events.append)
    update = middleware.before_model({"messages": [*history(8, usage=30_000), HumanMessage("Go on.")]}, None)  # type: ignore[arg-type]
    assert update is not None and "read the modules" in update["messages"][1].content  # this turn
    retried = [e for e in events if e.kind == "provider_retried"]
    assert len(retried) == 1 and retried[0].delay > 0  # type: ignore[attr-defined]
    assert update["unbounded"]["failures"] == 0


@pytest.mark.parametrize("counted", [True, False])
def test_a_too_long_summary_request_of_human_messages_is_retried(api_server: ApiServer, counted: bool) -> None:
    """All human messages (one API message) and an error with or without a token count: the
    retry drops enough of the oldest at once."""
    too_long = prompt_too_long(42_000, 40_000) if counted else bad_request("prompt is too long")
    api_server.anthropic.push(too_long, message(SUMMARY, id="msg_s"))
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server), summary_retries=0)
    notes = [HumanMessage(f"Note {i}: " + "detail " * 400, id=f"n{i}") for i in range(12)]
    notes[-2] = AIMessage("Noted all of it.", id="a1", usage_metadata={"input_tokens": 30_000, "output_tokens": 5, "total_tokens": 30_005})
    update = middleware.before_model({"messages": notes}, None)  # type: ignore[arg-type]
    assert update is not None and any(is_summary_message(m) for m in update["messages"])
    first, second = api_server.requests
    assert len(second.body) < len(first.body) * 0.8
    assert "Note 0:" in sent_text(first) and "Note 0:" not in sent_text(second)
    assert "[earlier conversation truncated for compaction retry]" in sent_text(second)


def test_summarizer_as_a_function_or_a_model_string(api_server: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return nine_section_summary(f"The user asked to read modules; {len(messages)} messages so far.")

    state = {"messages": [*history(8, usage=30_000), HumanMessage("Go on.")]}
    update = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=summarize).before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and "The user asked to read modules" in update["messages"][1].content
    assert not any("summary" in str(m.content).lower() for m in seen[0][-1:])  # no summary prompt

    async def asummarize(messages: list[BaseMessage]) -> str:
        return nine_section_summary("Async summary of the reading.")

    update = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=asummarize).before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and "Async summary of the reading." in update["messages"][1].content

    monkeypatch.setenv("ANTHROPIC_BASE_URL", api_server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    api_server.anthropic.push(message(SUMMARY, id="msg_s"))
    by_name = UnboundedMiddleware(MODEL, context_window=40_000, summarizer="anthropic:claude-haiku-4-5")
    update = by_name.before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and api_server.last.json["model"] == "claude-haiku-4-5"
    with pytest.raises(ConfigError, match="provider:model"):
        UnboundedMiddleware(MODEL, summarizer="no-such-provider:model-x")


def test_a_plain_text_summary_from_the_model_is_accepted(api_server: ApiServer) -> None:
    """A summary model that answers without <summary> tags still wrote a summary: the tags
    are not checked, the sections and the size are (the compaction guard)."""
    plain = nine_section_summary("every module read; modules 0 to 7 are read").split("<summary>\n", 1)[1]
    plain = plain.replace("</summary>", "")
    api_server.anthropic.push(message(plain, id="msg_s"))
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server), summary_retries=0)
    update = middleware.before_model({"messages": [*history(8, usage=30_000), HumanMessage("Go on.")]}, None)  # type: ignore[arg-type]
    assert update is not None and "modules 0 to 7 are read" in update["messages"][1].content
    assert len(api_server.requests) == 1  # one call, no refusals and retries


def test_a_two_line_summary_is_refused_by_the_guard(api_server: ApiServer) -> None:
    """Differs from SummarizationMiddleware on purpose: prose that cannot carry the task is
    not written over the history; the offline summary is used instead."""
    api_server.anthropic.push(
        message("The user wants every module read; modules 0 to 7 are read.", id="msg_s"),
        message("Still just one line.", id="msg_s2"),
    )
    events: list[Any] = []
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server), summary_retries=0, events=events.append)
    middleware.before_model({"messages": [*history(8, usage=30_000), HumanMessage("Go on.")]}, None)  # type: ignore[arg-type]
    assert any(e.kind == "summary_rejected" for e in events)


def test_a_failed_summary_leaves_the_messages_and_does_not_raise(api_server: ApiServer) -> None:
    """Differs from SummarizationMiddleware on purpose: the agent goes on uncompacted."""
    api_server.anthropic.push(bad_request("invalid model"), bad_request("invalid model"))
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, summarizer=chat(api_server), summary_retries=0)
    update = middleware.before_model({"messages": [*history(8, usage=30_000), HumanMessage("Go on.")]}, None)  # type: ignore[arg-type]
    assert update is not None and "messages" not in update and update["unbounded"]["failures"] == 1
