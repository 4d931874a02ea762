"""What a LangChain user expects of a summarization middleware, checked on UnboundedMiddleware.

The behaviours LangChain's own tests check for `SummarizationMiddleware`, written again for
this middleware: a real `create_agent` on `ChatAnthropic` (langchain-anthropic) pointed at the
scripted local server, which refuses what the API refuses (an unanswered tool call, too many
cache markers, a prompt over the window), so a wrong request cannot pass unnoticed. Where the
middleware differs on purpose (docs/integrations.md has the table), the test says so.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")
pytest.importorskip("langchain_anthropic")

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
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
from unbounded.policy import Policy
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
    # The summary requests, sent by the agent's model without tools, carry the tool rounds as
    # text (the API refuses tool blocks in a request declaring no tools).
    summaries = [r for r in api_server.requests if is_summary_request(r)]
    assert summaries and api_server.rejected == []
    assert all('"tool_use"' not in sent_text(r) and '"tool_result"' not in sent_text(r) for r in summaries)


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


# ------------------------------------------------ LangChain's own scenarios, rewritten
#
# SummarizationMiddleware's and ContextEditingMiddleware's tests (langchain 1.4.7,
# libs/langchain_v1/tests/unit_tests/agents/middleware/) asked of UnboundedMiddleware with the
# triggers and `keep` those users set. Where the behaviour differs on purpose the test checks
# ours and says so; docs/integrations.md has the table.


def said(n: int, words: int = 800) -> BaseMessage:
    """A message of about `words` * 5 characters (~1,300 tokens, padded, for 800 words)."""
    text = f"message {n} " + "word " * words
    return HumanMessage(text, id=f"h{n}") if n % 2 == 0 else AIMessage(text, id=f"a{n}")


def summarize(messages: list[BaseMessage]) -> str:
    """A summarizer function in the shape LangChain users give one."""
    return nine_section_summary(f"{len(messages)} messages summarized")


def kept_contents(update: dict[str, Any] | None) -> list[str]:
    """The kept messages' first words after a compaction (RemoveMessage, summary, kept...)."""
    assert update is not None and "messages" in update
    removal, summary, *kept = update["messages"]
    assert removal.id == REMOVE_ALL_MESSAGES and is_summary_message(summary)
    return [str(m.content).split(" word")[0] for m in kept]


def profile_model(window: int = 1_000) -> Any:
    """A chat model whose profile gives only an input window (as LangChain's tests use)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    return GenericFakeChatModel(messages=iter([AIMessage("Summary")]), profile={"max_input_tokens": window})


def test_triggers_and_keep_in_summarization_middlewares_shapes() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 1_000), keep=("messages", 10))
    assert middleware.trigger_level() == 1_000
    assert (middleware.keep_messages, middleware.keep_tokens) == (10, None)
    by_tokens = UnboundedMiddleware(MODEL, trigger=("messages", 5), keep=("tokens", 400))
    assert (by_tokens.keep_messages, by_tokens.keep_tokens) == (None, 400)
    by_fraction = UnboundedMiddleware(MODEL, trigger=("fraction", 0.5), keep=("fraction", 0.1))
    assert by_fraction.trigger_level() == 100_000 and by_fraction.keep_tokens == 20_000


@pytest.mark.parametrize(
    ("parameter", "value", "error"),
    [
        ("trigger", ("fraction", 0.0), "fraction must be in"),
        ("trigger", ("fraction", 1.5), "fraction must be in"),
        ("keep", ("fraction", -0.1), "fraction must be in"),
        ("trigger", ("tokens", 0), "tokens must be a whole number > 0"),
        ("trigger", ("messages", -5), "messages must be a whole number > 0"),
        ("keep", ("tokens", 0), "tokens must be a whole number > 0"),
        ("trigger", ("invalid", 100), "unknown size kind"),
        ("keep", ("invalid", 100), "unknown size kind"),
        ("trigger", {"invalid_metric": 100}, "unknown size kind"),
        ("trigger", {"fraction": "invalid"}, "must be a number"),
        ("trigger", {"tokens": 1000.5}, "whole number"),
        ("trigger", {"messages": "10"}, "must be a number"),
        ("trigger", {"messages": True}, "must be a number"),
        ("trigger", ["invalid"], "pair"),
        ("trigger", "foo", "pair"),
        ("trigger", {}, "at least one level"),
        ("trigger", [{"tokens": 1000}, {}], "at least one level"),
    ],
)
def test_a_wrong_trigger_or_keep_fails_at_construction(parameter: str, value: Any, error: str) -> None:
    """Theirs raises ValueError or TypeError; ours ConfigError, a ValueError, for all."""
    with pytest.raises(ConfigError, match=error):
        UnboundedMiddleware(MODEL, **{parameter: value})


def test_keep_and_keep_messages_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        UnboundedMiddleware(MODEL, keep=("messages", 2), keep_messages=3)


def test_below_the_token_trigger_nothing_happens() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 20_000), summarizer=summarize)
    assert middleware.before_model({"messages": [said(i) for i in range(5)]}, None) is None  # type: ignore[arg-type]


def test_a_small_token_trigger_compacts_whatever_the_window() -> None:
    """The regression: a trigger of 2,019 tokens on a 200K model (and of 1 token) compacts."""
    for level in (2_019, 1):
        middleware = UnboundedMiddleware(MODEL, trigger=("tokens", level), keep=("messages", 2), summarizer=summarize)
        update = middleware.before_model({"messages": [said(i) for i in range(5)]}, None)  # type: ignore[arg-type]
        assert kept_contents(update) == ["message 3", "message 4"]


def test_a_messages_trigger_with_keep_messages() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("messages", 5), keep=("messages", 2), summarizer=summarize)
    assert middleware.before_model({"messages": [said(i, 3) for i in range(4)]}, None) is None  # type: ignore[arg-type]
    at = middleware.before_model({"messages": [said(i, 3) for i in range(5)]}, None)  # type: ignore[arg-type]
    assert kept_contents(at) == ["message 3", "message 4"]
    above = middleware.before_model({"messages": [said(i, 3) for i in range(1, 7)]}, None)  # type: ignore[arg-type]
    assert kept_contents(above) == ["message 5", "message 6"]


def test_an_empty_trigger_list_never_compacts() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=[], summarizer=summarize)
    assert middleware.before_model({"messages": [said(i) for i in range(50)]}, None) is None  # type: ignore[arg-type]


def test_no_trigger_means_the_models_threshold() -> None:
    """Differs on purpose: theirs with trigger=None never summarizes; ours then compacts at the
    model's auto-compact threshold (167,000 tokens for a 200K model), as a Session does."""
    middleware = UnboundedMiddleware(MODEL, summarizer=summarize)
    assert middleware.trigger_level() == middleware.thresholds.autocompact == 167_000
    assert middleware.before_model({"messages": [said(i) for i in range(50)]}, None) is None  # type: ignore[arg-type]
    update = middleware.before_model({"messages": [said(i, 700) for i in range(200, 360)]}, None)  # type: ignore[arg-type]
    assert update is not None and "messages" in update


def test_any_of_a_list_of_triggers() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=[("messages", 10), ("tokens", 5_000)], keep=("messages", 2), summarizer=summarize)
    assert middleware.before_model({"messages": [said(i, 3) for i in range(5)]}, None) is None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i, 3) for i in range(10, 20)]}, None) is not None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i) for i in range(20, 25)]}, None) is not None  # type: ignore[arg-type]


def test_all_of_a_dict_trigger() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger={"tokens": 5_000, "messages": 5}, keep=("messages", 2), summarizer=summarize)
    assert middleware.before_model({"messages": [said(i) for i in range(4)]}, None) is None  # type: ignore[arg-type]  # tokens only
    assert middleware.before_model({"messages": [said(i, 3) for i in range(10, 16)]}, None) is None  # type: ignore[arg-type]  # messages only
    assert middleware.before_model({"messages": [said(i) for i in range(20, 26)]}, None) is not None  # type: ignore[arg-type]


def test_any_of_all_of_clauses() -> None:
    middleware = UnboundedMiddleware(
        MODEL, trigger=[{"tokens": 6_000, "messages": 3}, {"tokens": 4_000, "messages": 6}], keep=("messages", 2), summarizer=summarize
    )
    assert middleware.before_model({"messages": [said(i) for i in range(5)]}, None) is not None  # type: ignore[arg-type]  # first
    assert middleware.before_model({"messages": [said(i, 500) for i in range(10, 17)]}, None) is not None  # type: ignore[arg-type]  # second
    assert middleware.before_model({"messages": [said(i) for i in range(20, 24)]}, None) is None  # type: ignore[arg-type]  # ~5,300: neither


def test_a_dict_mixed_with_a_tuple() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=[{"tokens": 4_000, "messages": 10}, ("messages", 50)], keep=("messages", 5), summarizer=summarize)
    assert middleware.before_model({"messages": [said(i, 500) for i in range(12)]}, None) is not None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i, 3) for i in range(100, 155)]}, None) is not None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i, 3) for i in range(200, 208)]}, None) is None  # type: ignore[arg-type]


def test_the_trigger_is_copied_from_the_callers_list() -> None:
    clause: dict[str, int] = {"tokens": 20_000}
    trigger: list[Any] = [clause]
    middleware = UnboundedMiddleware(MODEL, trigger=trigger, keep=("messages", 2), summarizer=summarize)
    clause["messages"] = 1
    trigger.append(("messages", 1))
    assert middleware.before_model({"messages": [said(0, 3), said(1, 3)]}, None) is None  # type: ignore[arg-type]


def test_fractions_of_a_1000_token_profile_window() -> None:
    """The regression: a model whose profile gives 1,000 input tokens took a ConfigError
    ("window too small"); with a trigger the window only sizes the fraction."""
    with pytest.raises(ConfigError, match="too small"):
        UnboundedMiddleware(profile_model())  # no trigger: the window plans everything
    messages = [HumanMessage("m1 " + "x" * 600, id="m1"), AIMessage("m2 " + "x" * 600, id="m2"), HumanMessage("m3 " + "x" * 600, id="m3"), AIMessage("m4 " + "x" * 600, id="m4")]
    not_yet = UnboundedMiddleware(profile_model(), trigger=("fraction", 0.9), keep=("fraction", 0.5), summarizer=summarize)
    assert not_yet.before_model({"messages": messages}, None) is None  # type: ignore[arg-type]  # ~800 < 900
    middleware = UnboundedMiddleware(profile_model(), trigger=("fraction", 0.6), keep=("fraction", 0.5), summarizer=summarize)
    assert [m.split(" ")[0] for m in kept_contents(middleware.before_model({"messages": messages}, None))] == ["m3", "m4"]  # type: ignore[arg-type]
    wider = UnboundedMiddleware(profile_model(), trigger=("fraction", 0.6), keep=("tokens", 650), summarizer=summarize)
    assert [m.split(" ")[0] for m in kept_contents(wider.before_model({"messages": messages}, None))] == ["m2", "m3", "m4"]  # type: ignore[arg-type]


def test_a_fraction_and_messages_clause() -> None:
    middleware = UnboundedMiddleware(profile_model(), trigger={"fraction": 0.8, "messages": 5}, keep=("messages", 2), summarizer=summarize)
    five = [said(i, 100) for i in range(5)]  # ~170 tokens each
    assert middleware.before_model({"messages": five}, None) is not None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i, 100) for i in range(10, 13)]}, None) is None  # type: ignore[arg-type]
    assert middleware.before_model({"messages": [said(i, 200) for i in range(20, 24)]}, None) is None  # type: ignore[arg-type]


def test_a_tiny_fraction_still_triggers() -> None:
    middleware = UnboundedMiddleware(profile_model(), trigger=("fraction", 0.0001), keep=("messages", 1), summarizer=summarize)
    assert middleware.trigger_level() == 1
    assert middleware.before_model({"messages": [said(0, 3), said(1, 3)]}, None) is not None  # type: ignore[arg-type]


def test_token_retention_keeps_tool_calls_with_their_results() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("H" * 1_200, id="h0"),
        AIMessage("A" * 800, tool_calls=[{"name": "test", "args": {}, "id": "call-1"}], id="a1"),
        ToolMessage("T" * 200, tool_call_id="call-1", id="t1"),
        HumanMessage("H" * 720, id="h2"),
        HumanMessage("H" * 640, id="h3"),
    ]
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 100), keep=("tokens", 800), summarizer=summarize)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    kept = update["messages"][2:]
    assert [m.id for m in kept] == ["a1", "t1", "h2", "h3"]


def test_many_parallel_tool_calls_stay_with_their_results() -> None:
    calls = [{"name": f"tool_{i}", "args": {}, "id": f"call_{i}"} for i in range(10)]
    messages: list[BaseMessage] = [
        HumanMessage("calling 10 tools " + "word " * 400, id="h0"),
        AIMessage("calling 10 tools", tool_calls=calls, id="a0"),
        *(ToolMessage(f"result_{i}", tool_call_id=f"call_{i}", id=f"t{i}") for i in range(10)),
    ]
    middleware = UnboundedMiddleware(MODEL, trigger=("messages", 12), keep=("messages", 5), summarizer=summarize)
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    assert [m.id for m in update["messages"][2:]] == ["a0", *(f"t{i}" for i in range(10))]


def test_a_lone_request_is_never_summarized() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 10), keep=("messages", 1), summarizer=summarize)
    assert middleware.before_model({"messages": [HumanMessage("Current request " * 300, id="h0")]}, None) is None  # type: ignore[arg-type]


def test_the_async_hook_compacts_the_same_way() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 1_000), keep=("messages", 2), summarizer=summarize)
    update = asyncio.run(middleware.abefore_model({"messages": [said(i) for i in range(5)]}, None))  # type: ignore[arg-type]
    assert [m.type for m in update["messages"]] == ["remove", "human", "ai", "human"]  # type: ignore[index]
    assert kept_contents(update) == ["message 3", "message 4"]
    assert "3 messages summarized" in update["messages"][1].content  # type: ignore[index]


def test_the_summary_message_is_the_one_langchain_writes() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 1_000), keep=("messages", 2), summarizer=summarize)
    update = middleware.before_model({"messages": [said(i) for i in range(5)]}, None)  # type: ignore[arg-type]
    assert update is not None
    summary = update["messages"][1]
    assert isinstance(summary, HumanMessage) and summary.additional_kwargs["lc_source"] == "summarization"
    assert "3 messages summarized" in summary.content


def test_reported_usage_counts_towards_the_token_trigger() -> None:
    """Both count what the model reported (usage_metadata) over an estimate."""
    reply = AIMessage("hi", id="a1", usage_metadata={"input_tokens": 9_000, "output_tokens": 1_001, "total_tokens": 10_001})
    middleware = UnboundedMiddleware(MODEL, trigger={"tokens": 10_000, "messages": 2}, keep=("messages", 1), summarizer=summarize)
    assert middleware.before_model({"messages": [HumanMessage("hello", id="h0"), reply, HumanMessage("go on", id="h1")]}, None) is not None  # type: ignore[arg-type]
    low = AIMessage("hi", id="a2", usage_metadata={"input_tokens": 50, "output_tokens": 50, "total_tokens": 100})
    fresh = UnboundedMiddleware(MODEL, trigger={"tokens": 10_000, "messages": 2}, keep=("messages", 1), summarizer=summarize)
    assert fresh.before_model({"messages": [HumanMessage("hello", id="h2"), low, HumanMessage("go on", id="h3")]}, None) is None  # type: ignore[arg-type]


def test_a_short_summary_that_fits_a_small_window_is_accepted() -> None:
    """The regression: at a 9,000-token window a 232-token nine-section summary of 5,000
    tokens was refused 12 times (the guard's 300-token minimum is a 200K-window number)."""
    headings = ["Primary Request and Intent", "Key Technical Concepts", "Files and Code Sections", "Errors and fixes", "Problem Solving", "All user messages", "Pending Tasks", "Current Work", "Next Step"]
    short = "<summary>\n" + "\n".join(f"{i + 1}. {h}:\n   - the agent read modules m0 to m9 and noted their functions" for i, h in enumerate(headings)) + "\n</summary>"
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, context_window=9_000, summarizer=lambda messages: short.removeprefix("<summary>\n").removesuffix("\n</summary>"), events=events.append, summary_retries=0)
    messages = [*history(14, output="def f(x):\n    return x\n" * 40, usage=6_500), HumanMessage("Go on.", id="h1")]
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert not [e for e in events if e.kind == "summary_rejected"]
    assert update is not None and "modules m0 to m9" in update["messages"][1].content


# --------------------------------------------------- ContextEditingMiddleware's scenarios


def clearing(**policy: Any) -> UnboundedMiddleware:
    """ClearToolUsesEdit(trigger=50, keep=..., clear_at_least=0) in our terms: clearing from 50
    tokens (the trigger's level is the clearing level too), no compaction."""
    settings = {"auto_compact_enabled": False, "microcompact_min_savings": 0, "microcompact_protect_recent_tokens": 0, **policy}
    return UnboundedMiddleware(MODEL, trigger=("tokens", 50), policy=Policy(**settings))


def tool_rounds(*calls: tuple[str, str, str]) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Look these up.", id="h0")]
    for call_id, name, output in calls:
        messages += [AIMessage("", tool_calls=[{"id": call_id, "name": name, "args": {"q": call_id}}], id=f"a-{call_id}"), ToolMessage(output, tool_call_id=call_id, id=f"t-{call_id}")]
    return messages


def test_below_the_clearing_level_nothing_is_cleared() -> None:
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 5_000), policy=Policy(auto_compact_enabled=False, microcompact_min_savings=0, microcompact_protect_recent_tokens=0, microcompact_keep_recent=0))
    assert middleware.before_model({"messages": tool_rounds(("call-1", "search", "12345"))}, None) is None  # type: ignore[arg-type]


def test_the_most_recent_results_are_kept() -> None:
    messages = tool_rounds(*((f"call-{c}", "tool", f"tool-output-{c}" * 20) for c in "abc"))
    update = clearing(microcompact_keep_recent=1).before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    cleared = {m.tool_call_id for m in update["messages"] if isinstance(m, ToolMessage)}
    assert cleared == {"call-a", "call-b"}
    assert all(m.response_metadata["context_editing"]["cleared"] is True for m in update["messages"])
    assert messages[-1].content == "tool-output-c" * 20 and messages[2].content == "tool-output-a" * 20  # the state given is not edited


def test_excluded_tools_are_never_cleared() -> None:
    messages = tool_rounds(("call-search", "search", "search-results" * 20), ("call-calc", "calculator", "42" * 40), ("call-last", "calculator", "7"))
    middleware = UnboundedMiddleware(
        MODEL, trigger=("tokens", 50), exclude_tools=("search",), policy=Policy(auto_compact_enabled=False, microcompact_min_savings=0, microcompact_protect_recent_tokens=0, microcompact_keep_recent=1)
    )
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    assert [m.tool_call_id for m in update["messages"]] == ["call-calc"]


def test_a_cleared_result_keeps_its_call_and_says_how_to_get_it_back() -> None:
    """Differs on purpose: the placeholder names the recall id (theirs: "[cleared]", set by
    `placeholder=`), and tool inputs are never cleared (theirs: `clear_tool_inputs=True`)."""
    messages = tool_rounds(("call-2", "search", "x" * 800), ("call-3", "search", "y"))
    update = clearing(microcompact_keep_recent=1).before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    (cleared,) = update["messages"]
    assert cleared.tool_call_id == "call-2" and cleared.content == "[Old tool result content cleared — recall id=call-2]"
    assert isinstance(messages[1], AIMessage) and messages[1].tool_calls[0]["args"] == {"q": "call-2"}


def test_the_async_hook_clears_the_same_way() -> None:
    messages = tool_rounds(*((f"call-{c}", "tool", f"tool-output-{c}" * 20) for c in "abc"))
    update = asyncio.run(clearing(microcompact_keep_recent=1).abefore_model({"messages": messages}, None))  # type: ignore[arg-type]
    assert update is not None and {m.tool_call_id for m in update["messages"]} == {"call-a", "call-b"}


# --------------------------------------------------------------------------- recall


def test_recall_is_not_offered_to_an_agent_without_tools(api_server: ApiServer) -> None:
    """docs/recall.md: never offered in a conversation without tools."""
    api_server.anthropic.push(message("Hello.", id="msg_1"))
    agent = create_agent(chat(api_server), tools=[], middleware=[UnboundedMiddleware(MODEL)])
    agent.invoke({"messages": [HumanMessage("Hi.")]})
    assert "recall" not in json.dumps(api_server.last.json.get("tools", []))
    api_server.anthropic.push(message("Read.", id="msg_2"))
    with_tools = create_agent(chat(api_server), tools=[read_module], middleware=[UnboundedMiddleware(MODEL)])
    with_tools.invoke({"messages": [HumanMessage("Hi.")]})
    assert sorted(t["name"] for t in api_server.last.json["tools"]) == ["read_module", "recall"]


def test_a_recall_error_goes_out_as_an_error_result(api_server: ApiServer) -> None:
    api_server.anthropic.push(
        message(tool_use_block("recall", {}, id="toolu_recall"), id="msg_1"),  # names nothing
        message("I will ask properly.", id="msg_2"),
    )
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[UnboundedMiddleware(MODEL)])
    state = agent.invoke({"messages": [HumanMessage("Bring back the old output.")]})
    answer = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error"
    (result,) = [b for b in api_server.last.json["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert result["is_error"] is True and result["tool_use_id"] == "toolu_recall"


# ------------------------------------------------------------------ a long tool-using run


def test_a_60_turn_agent_with_large_tool_outputs(api_server: ApiServer) -> None:
    """create_agent on ChatAnthropic against the local server, which refuses every request the
    API would (unanswered tool calls, too many cache markers, over the window): 60 turns of
    ~3,000-token tool outputs under a 30,000-token trigger compact at least twice, and a
    recall of a summarized-away output is answered with that output."""
    summaries = 0

    def reply(request: RecordedRequest) -> Any:
        nonlocal summaries
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 30}
        if is_summary_request(request):  # the agent's own model writes the summaries
            summaries += 1
            return message(nine_section_summary(f"chapters read so far (summary {summaries})"), id=f"msg_s{summaries}", usage=usage)
        turn = sum(1 for r in api_server.requests if not is_summary_request(r))
        if turn == 50:
            return message(tool_use_block("recall", {"id": "toolu_3"}, id="toolu_recall"), id=f"msg_{turn}", usage=usage)
        if turn >= 60:
            return message("All chapters read.", id="msg_end", usage=usage)
        return message(tool_use_block("read_chapter", {"number": turn}, id=f"toolu_{turn}"), id=f"msg_{turn}", usage=usage)

    def read_chapter(number: int) -> str:
        """Read a chapter."""
        return f"Chapter {number} begins.\n" + f"finding {number} holds in section {number}. " * 300

    events: list[Event] = []
    # Results never cleared (clearing alone would keep this run under the trigger), so
    # compaction does the work.
    middleware = UnboundedMiddleware(MODEL, trigger=("tokens", 30_000), keep=("messages", 6), exclude_tools=("read_chapter",), events=events.append)
    api_server.anthropic.push(*([reply] * 80))
    agent = create_agent(chat(api_server), tools=[read_chapter], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Read chapters 1 to 59, one at a time.")]}, {"recursion_limit": 400})

    assert state["messages"][-1].content == "All chapters read."
    calls = [r for r in api_server.requests if not is_summary_request(r)]
    assert len(calls) == 60  # 59 tool turns (a recall among them) and the final answer
    compactions = [e for e in events if e.kind == "langchain_compacted"]
    assert len(compactions) >= 2 and summaries >= 2
    (recalled,) = [b for b in calls[50].json["messages"][-1]["content"] if b.get("tool_use_id") == "toolu_recall"]
    assert not recalled.get("is_error") and "Chapter 3 begins." in json.dumps(recalled)  # summarized away before
    assert "Chapter 3 begins." not in sent_text(calls[49])
    assert not [e for e in events if e.kind in ("provider_retried", "compaction_failed")]  # no dead connections
    assert max(len(r.body) // 4 for r in calls) < 60_000  # kept near the trigger, far below the window
    assert not api_server.rejected  # every request valid by the API's rules


# ----------------------------------------------------- the model refuses the prompt as too long


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_prompt_too_long_from_the_model_compacts_once_and_sends_again(api_server: ApiServer, run: str) -> None:
    """The engine's reactive compaction (one per send), below the trigger: the model's own
    refusal is what says the context is over."""
    api_server.anthropic.push(
        prompt_too_long(212_345, 200_000),
        message(SUMMARY, id="msg_s"),  # the agent's own model writes the summary
        message("Done.", id="msg_2"),
    )
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, events=events.append)
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[middleware])
    given = {"messages": [*history(8), HumanMessage("Go on.", id="h_last")]}
    state = agent.invoke(given) if run == "sync" else asyncio.run(agent.ainvoke(given))
    refused, summary_request, retried = api_server.requests
    assert is_summary_request(summary_request) and not is_summary_request(retried)
    assert "This session continues" in json.dumps(retried.json["messages"][0])
    assert len(retried.body) < len(refused.body) / 2
    assert is_summary_message(state["messages"][0]) and state["messages"][-1].content == "Done."
    assert [m.id for m in state["messages"]].count("h_last") == 1
    assert [e.kind for e in events].count("reactive_compaction") == 1


def test_a_prompt_too_long_on_a_new_middleware_reading_only_the_tail_compacts_once(api_server: ApiServer) -> None:
    """A new middleware (another process) below the warning level counts from the last usage
    without reading the history; the model's refusal still makes it read all and cut."""
    api_server.anthropic.push(prompt_too_long(212_345, 200_000), message(SUMMARY, id="msg_s"), message("Done.", id="msg_2"))
    events: list[Event] = []
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[UnboundedMiddleware(MODEL, events=events.append)])
    state = agent.invoke({"messages": [*history(8, usage=20_000), HumanMessage("Go on.", id="h_last")]})
    refused, summary_request, retried = api_server.requests
    assert is_summary_request(summary_request) and not is_summary_request(retried)
    assert "This session continues" in json.dumps(retried.json["messages"][0])
    assert len(retried.body) < len(refused.body) / 2
    assert is_summary_message(state["messages"][0]) and state["messages"][-1].content == "Done."
    assert [e.kind for e in events].count("reactive_compaction") == 1


def test_a_second_prompt_too_long_is_raised(api_server: ApiServer) -> None:
    api_server.anthropic.push(prompt_too_long(212_345, 200_000), message(SUMMARY, id="msg_s"), prompt_too_long(205_000, 200_000))
    agent = create_agent(chat(api_server), tools=[read_module], middleware=[UnboundedMiddleware(MODEL)])
    with pytest.raises(Exception, match="prompt is too long"):
        agent.invoke({"messages": [*history(8), HumanMessage("Go on.", id="h_last")]})
    assert len(api_server.requests) == 3
