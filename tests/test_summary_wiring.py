"""Who writes a compaction's summary and the session notes, and what a summary may cost.

The model an agent already talks to writes its summaries and notes: the provider given to
`Session.call` (and so `run_agent`'s), the Anthropic drop-in's client, the LangChain agent's
own model. The offline hand-over is the fallback: no model, the offline summarizer chosen,
the breaker open, or the compaction's summary requests spent. Every path says who wrote the
summary and why a fallback did, in its events and its status, and no compaction sends more
summary requests than `Policy.compact_max_summary_requests`, retries included.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from summaries import asks_for_notes, asks_for_summary, nine_section_summary

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    overloaded,
    server_error,
    tool_use_block,
)
from unbounded.compaction.conversation import SummaryAuthor
from unbounded.compaction.notes import session_memory_template
from unbounded.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Event,
    SessionMemoryUpdated,
)
from unbounded.extensions.session_memory import SessionMemory
from unbounded.integrations import Tool, run_agent, wrap
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.base import ModelResponse, ServerError
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.providers.retry import RetryingProvider
from unbounded.session import Session, SessionConfig
from unbounded.tokens.estimate import estimate_messages_tokens

MODEL = "claude-sonnet-4-6"
NOTES_POLICY = Policy(
    session_memory_init_tokens=4_000,
    session_memory_min_tokens_between_updates=2_500,
    session_memory_tool_calls_between_updates=2,
)
"""Notes updated early and often, so a short run updates them several times."""
MODEL_NOTES = session_memory_template().replace(
    "_What is being worked on right now, what is still open, and the very next step._",
    "Reading the files one by one; the model wrote these notes.",
)


def notes_updates(events: list[Event]) -> list[SessionMemoryUpdated]:
    """Every notes update the session reported."""
    return [e for e in events if isinstance(e, SessionMemoryUpdated)]


# -- Session.call with an in-process model ------------------------------------------------------


class Model:
    """A scripted model: main turns call `read_file`; asked for a summary or the notes it
    writes them, or fails with a server error when told to."""

    name = "scripted-model"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, *, summaries_fail: bool = False, notes_fail: bool = False) -> None:
        self.summaries_fail = summaries_fail
        self.notes_fail = notes_fail
        self.kinds: Counter[str] = Counter()

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        messages = [dict(m) for m in request["messages"]]
        usage = {"input_tokens": estimate_messages_tokens(request["messages"]) + 200, "output_tokens": 20}
        if asks_for_summary(messages):
            self.kinds["summary"] += 1
            if self.summaries_fail:
                raise ServerError("the summary model is down", status=500)
            return ModelResponse([{"type": "text", "text": nine_section_summary("read every file")}], "end_turn", usage, "m")
        if asks_for_notes(messages):
            self.kinds["notes"] += 1
            if self.notes_fail:
                raise ServerError("the notes model is down", status=500)
            edit = {"type": "tool_use", "id": f"toolu_notes_{self.kinds['notes']}", "name": "edit_session_notes", "input": {"content": MODEL_NOTES}}
            return ModelResponse([edit], "tool_use", usage, "m")
        self.kinds["main"] += 1
        n = self.kinds["main"]
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"path": f"f{n}.py"}}
        return ModelResponse([call], "tool_use", usage, "m", id=f"msg_{n}")


CONFIG = SessionConfig(
    model=MODEL,
    system="You read files.",
    tools=[{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}],
    context_window=40_000,
)


async def converse(session: Session, model: Model, turns: int) -> None:
    """`turns` calls of `session.call(model)`, each answered with a large file."""
    for _ in range(turns):
        reply = await session.call(model)
        (call,) = reply.tool_uses
        session.add_tool_results([{"type": "tool_result", "tool_use_id": call["id"], "content": f"{call['input']['path']}\n" + "line of code\n" * 500}])


def test_session_call_gives_its_provider_the_summaries() -> None:
    events: list[Event] = []
    model = Model()
    session = Session(CONFIG, policy=Policy(), events=events.append)
    session.add_user("Read every file.")
    asyncio.run(converse(session, model, 14))
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished and all(e.summarizer == "scripted-model" and e.fallback is None for e in finished)
    assert model.kinds["summary"] == len(finished) and all(e.summary_requests == 1 for e in finished)
    assert session.status().last_summary == SummaryAuthor("scripted-model", None, 1)


def test_a_failing_model_falls_back_to_the_offline_hand_over_within_the_request_budget() -> None:
    events: list[Event] = []
    model = Model(summaries_fail=True)
    session = Session(CONFIG, policy=Policy(), events=events.append)
    session.add_user("Read every file.")
    asyncio.run(converse(session, model, 24))
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    limit = Policy().compact_max_summary_requests
    assert finished and all(e.summarizer == "extractive" and e.fallback == "request_budget" for e in finished)
    assert all(e.summary_requests == limit for e in finished)
    assert model.kinds["summary"] == limit * len(finished)  # never more, whatever the failures
    failed = [e for e in events if isinstance(e, CompactionFailed)]
    assert [e.summary_requests for e in failed][:2] == [2, 4]  # counted as they are spent
    assert session.status().last_summary == SummaryAuthor("extractive", "request_budget", limit)


def test_a_failed_run_leaves_its_spent_requests_in_the_status() -> None:
    """Between a failed summary and the next try, status() says what was spent already."""
    session = Session(CONFIG, policy=Policy(), summarizer=Model(summaries_fail=True))
    session.add_user("Read every file.")
    session.record({"content": [{"type": "text", "text": "on it"}], "usage": {"input_tokens": 10}})
    session.add_user("and now?")
    assert asyncio.run(session.auto_compact()) is None
    assert session.status().summary_requests == 2 and session.status().consecutive_failures == 1
    assert session.status().last_summary is None
    result = asyncio.run(session.auto_compact())
    assert result is not None and result.author == SummaryAuthor("extractive", "request_budget", 4)
    assert session.status().summary_requests == 0


def test_without_a_model_or_with_the_offline_one_chosen_the_reason_says_so() -> None:
    for summarizer, reason in ((None, "no_model"), (ExtractiveSummarizer(), "asked_for")):
        session = Session(CONFIG, policy=Policy(), summarizer=summarizer)
        session.add_user("Read every file.")
        session.record({"content": [{"type": "text", "text": "on it"}], "usage": {"input_tokens": 10}})
        session.add_user("and now?")
        result = asyncio.run(session.auto_compact())
        assert result is not None and result.author == SummaryAuthor("extractive", reason, 0)
        assert session.model_provider() is None


def test_an_explicit_summarizer_wins_over_the_call_provider() -> None:
    chosen = Model()
    chosen.name = "chosen"
    session = Session(CONFIG, policy=Policy(), summarizer=chosen)
    caller = Model()
    session.add_user("Read every file.")
    asyncio.run(converse(session, caller, 14))
    assert chosen.kinds["summary"] >= 1 and caller.kinds["summary"] == 0
    assert session.model_provider() is chosen


def test_session_call_gives_its_provider_the_notes_and_falls_back_offline() -> None:
    for notes_fail, writer, fallback in ((False, "model", None), (True, "offline", "model_failed")):
        events: list[Event] = []
        model = Model(notes_fail=notes_fail)
        session = Session(CONFIG, policy=NOTES_POLICY, events=events.append, extensions=[SessionMemory(background=False)])
        session.add_user("Read every file.")
        asyncio.run(converse(session, model, 6))
        updates = notes_updates(events)
        assert updates and all(u.updater == writer and u.fallback == fallback for u in updates)
        assert model.kinds["notes"] == len(updates)  # each update asked the model once
        notes = session.store.read_memory() or ""
        assert ("the model wrote these notes" in notes) is (not notes_fail)
        assert "Read every file." in notes or not notes_fail  # the offline notes carry the request


def test_without_a_model_the_notes_are_offline() -> None:
    events: list[Event] = []
    session = Session(CONFIG, policy=NOTES_POLICY, events=events.append, extensions=[SessionMemory(background=False)])
    session.add_user("Read every file.")
    for n in range(6):
        request = asyncio.run(session.prepare())
        usage = {"input_tokens": estimate_messages_tokens(request["messages"]) + 200}
        session.record({"content": [{"type": "tool_use", "id": f"t{n}", "name": "read_file", "input": {"path": f"f{n}.py"}}], "usage": usage})
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{n}", "content": "line of code\n" * 500}])
    updates = notes_updates(events)
    assert updates and all(u.updater == "offline" and u.fallback == "no_model" for u in updates)


# -- run_agent and the drop-in against the local server, with the real SDK -----------------------


def serve(api: ApiServer, *, summaries: str = "ok", notes: str = "ok", turns: int = 14) -> list[str]:
    """Script the server as one model that reads files for `turns` turns, writes summaries
    and notes ("ok"), or fails them ("error": a 500; "overloaded": a 529); returns the log
    of request kinds."""
    log: list[str] = []

    def reply(request: RecordedRequest) -> Any:
        messages = request.json["messages"]
        if asks_for_summary(messages):
            log.append("summary")
            if summaries == "ok":
                return message(nine_section_summary("read every file"), id=f"msg_s{len(log)}")
            return overloaded() if summaries == "overloaded" else server_error(500)
        if asks_for_notes(messages):
            log.append("notes")
            if notes == "ok":
                return message(tool_use_block("edit_session_notes", {"content": MODEL_NOTES}, id=f"toolu_n{len(log)}"), id=f"msg_n{len(log)}")
            return server_error(500)
        log.append("main")
        n = log.count("main")
        size = len(request.body) // 4
        usage = {"input_tokens": 100, "cache_read_input_tokens": size, "output_tokens": 30}
        if n > turns:
            return message("All read.", id=f"msg_{n}", usage=usage)
        return message(tool_use_block("read_file", {"path": f"f{n}.py"}, id=f"toolu_{n}"), id=f"msg_{n}", usage=usage)

    api.anthropic.push(*([reply] * 400))
    return log


def read_file(path: str) -> str:
    """Read a file."""
    return f"{path}\n" + "line of code\n" * 500


def test_run_agent_gives_its_provider_the_summaries_and_notes(api_server: ApiServer) -> None:
    log = serve(api_server)
    events: list[Event] = []
    session = Session(CONFIG, policy=NOTES_POLICY, events=events.append, extensions=[SessionMemory(background=False)])
    provider = AnthropicProvider(api_server.anthropic_client())
    result = run_agent(session, provider, tools=[Tool.from_function(read_file)], prompt="Read every file.", max_turns=20, stream=False)
    assert result.text == "All read."
    updates = notes_updates(events)
    assert updates and all(u.updater == "model" for u in updates)
    assert log.count("notes") == len(updates)
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished  # from the model's notes, or by the model's summary
    assert all(e.summarizer in ("session_memory", "anthropic") and e.fallback is None for e in finished)


def test_run_agent_summaries_by_its_provider_then_the_fallback(api_server: ApiServer) -> None:
    for summaries, summarizer, fallback in (("ok", "anthropic", None), ("error", "extractive", "request_budget")):
        api_server.requests.clear()
        log = serve(api_server, summaries=summaries, turns=30)
        events: list[Event] = []
        session = Session(CONFIG, policy=Policy(), events=events.append)
        provider = AnthropicProvider(api_server.anthropic_client())
        run_agent(session, provider, tools=[Tool.from_function(read_file)], prompt="Read every file.", max_turns=31, stream=False)
        finished = [e for e in events if isinstance(e, CompactionFinished)]
        assert finished and all((e.summarizer, e.fallback) == (summarizer, fallback) for e in finished)
        assert session.status().last_summary is not None and session.status().last_summary.summarizer == summarizer
        # Every request is accounted for: the landed compactions' and the one in progress.
        assert log.count("summary") == sum(e.summary_requests for e in finished) + session.status().summary_requests
        assert all(e.summary_requests <= Policy().compact_max_summary_requests for e in finished)
        while len(api_server.anthropic):
            api_server.anthropic.pop()


def test_the_drop_in_gives_its_client_the_summaries_and_notes(api_server: ApiServer) -> None:
    for summaries, notes in (("ok", "ok"), ("error", "error")):
        api_server.requests.clear()
        log = serve(api_server, summaries=summaries, notes=notes, turns=40)
        events: list[Event] = []
        client = wrap(
            api_server.anthropic_client(sync=True),
            model=MODEL,
            context_window=40_000,
            policy=NOTES_POLICY,
            events=events.append,
            extensions=[SessionMemory(background=False)],
        )
        messages: list[Any] = [{"role": "user", "content": "Read every file."}]
        tools = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}]
        for _ in range(30):
            reply = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
            messages.append({"role": "assistant", "content": reply.content})
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[0].id, "content": read_file("x")}]})
        updates = notes_updates(events)
        assert updates and all(u.updater == ("model" if notes == "ok" else "offline") for u in updates)
        finished = [e for e in events if isinstance(e, CompactionFinished)]
        summarized = [e for e in finished if e.summarizer != "session_memory"]
        if summaries == "ok":
            assert all(e.summarizer == "anthropic" and e.fallback is None for e in summarized)
        else:
            assert all(e.summarizer == "extractive" and e.fallback == "request_budget" for e in summarized)
        pending = client.status().summary_requests
        assert log.count("summary") == sum(e.summary_requests for e in finished) + pending
        assert all(e.summary_requests <= Policy().compact_max_summary_requests for e in finished)
        client.close()
        while len(api_server.anthropic):
            api_server.anthropic.pop()


def test_the_drop_in_counts_its_clients_retries(api_server: ApiServer) -> None:
    """The client's own retries (max_retries=2) are made by unbounded for a summary, each one
    counted: an overloaded model gets the budget's 4 requests, not 3 x (1 + 2)."""
    log = serve(api_server, summaries="overloaded", turns=40)
    events: list[Event] = []
    sdk = api_server.anthropic_client(sync=True, max_retries=2)
    client = wrap(sdk, model=MODEL, context_window=40_000, policy=Policy(), events=events.append)
    summarizer = client.session.summarizer
    assert isinstance(summarizer, RetryingProvider) and summarizer.max_retries == 2
    summarizer.sleep = lambda delay: asyncio.sleep(0)  # no waiting in a test
    messages: list[Any] = [{"role": "user", "content": "Read every file."}]
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}]
    for _ in range(30):
        reply = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[0].id, "content": read_file("x")}]})
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished and all(e.fallback == "request_budget" and e.summary_requests == 4 for e in finished)
    assert log.count("summary") == 4 * len(finished) and client.status().summary_requests == 0
    # Each compaction: the cache-sharing request and its 2 retries, then the direct request,
    # whose retry the budget refuses; the offline hand-over lands it in that same run.
    assert [e.kind for e in events].count("provider_retried") == 2 * len(finished)
    assert sum(1 for e in events if isinstance(e, CompactionStarted)) == 2 * len(finished)
    client.close()


def test_the_drop_in_can_be_told_to_summarize_offline(api_server: ApiServer) -> None:
    log = serve(api_server, turns=40)
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, context_window=40_000, policy=Policy(), summarizer="extractive", events=events.append)
    messages: list[Any] = [{"role": "user", "content": "Read every file."}]
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}]
    for _ in range(30):
        reply = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[0].id, "content": read_file("x")}]})
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished and all((e.summarizer, e.fallback) == ("extractive", "asked_for") for e in finished)
    assert "summary" not in log
    client.close()


# -- the 60-turn run that once sent 30 summary requests for 5 compactions ----------------------------


def test_sixty_turns_with_a_failing_summary_model_stay_within_the_request_budget(api_server: ApiServer) -> None:
    """A model that cannot write summaries (every summary request overloaded, retried by the
    provider) used to cost 6 summary requests per compaction before the breaker let the
    offline hand-over in, each resending the whole conversation (30 for 5 compactions), and
    more with transport retries. Now every request and retry is counted against
    `Policy.compact_max_summary_requests`, and the offline hand-over lands the compaction
    as soon as they are spent."""
    log = serve(api_server, summaries="overloaded", turns=60)
    events: list[Event] = []
    retrying = RetryingProvider(AnthropicProvider(api_server.anthropic_client()), max_retries=2, sleep=lambda delay: asyncio.sleep(0))
    session = Session(CONFIG, policy=Policy(), events=events.append)

    def read_long_file(path: str) -> str:
        """Read a long file."""
        return f"{path}\n" + "line of code\n" * 700

    tools = [Tool.from_function(read_long_file, name="read_file")]
    result = run_agent(session, retrying, tools=tools, prompt="Read every file.", max_turns=61, stream=False)
    assert result.text == "All read." and log.count("main") == 61
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    limit = Policy().compact_max_summary_requests
    assert len(finished) >= 5
    pending = session.status().summary_requests
    assert log.count("summary") == limit * len(finished) + pending  # was 6 per compaction, retries aside
    assert pending < limit
    assert all(e.summary_requests == limit and e.fallback == "request_budget" for e in finished)
    assert json.dumps(session.status().last_summary.to_dict() if session.status().last_summary else None) == json.dumps(
        {"summarizer": "extractive", "fallback": "request_budget", "summary_requests": limit}
    )


# -- the LangChain middleware: the agent's own model ------------------------------------------------

def history(rounds: int) -> list[Any]:
    """A request and `rounds` file reads, the last AI message reporting 30,000 input tokens."""
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages: list[Any] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(rounds):
        ai = AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}], id=f"ai_{n}")
        if n == rounds - 1:
            ai.usage_metadata = {"input_tokens": 30_000, "output_tokens": 20, "total_tokens": 30_020}
        messages += [ai, ToolMessage(content="x = 1\n" * 300, tool_call_id=f"call_{n}", id=f"t_{n}")]
    return messages


def chat(api: ApiServer, **options: Any) -> Any:
    """ChatAnthropic on the local server, without the SDK's own retries."""
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    return langchain_anthropic.ChatAnthropic(model=MODEL, base_url=api.base_url, api_key="test-key", max_retries=0, max_tokens=1024, **options)


def test_the_middleware_summarizes_with_the_agents_own_model(api_server: ApiServer) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from unbounded.integrations import UnboundedMiddleware

    log = serve(api_server, turns=0)  # the agent's next call answers "All read."
    events: list[Event] = []
    middleware = UnboundedMiddleware(MODEL, context_window=40_000, events=events.append)
    assert middleware.model_provider() is None  # not known before the first model call
    agent = create_agent(chat(api_server), tools=[read_file], middleware=[middleware])
    state = agent.invoke({"messages": [*history(8), HumanMessage("Go on.", id="h1")]})
    # before_model runs before the first model call: that compaction cannot know the model
    # yet; wrap_model_call then learns it.
    assert state["messages"][-1].content == "All read."
    compacted = [e for e in events if e.kind == "langchain_compacted"]
    assert [(e.summarizer, e.fallback) for e in compacted] == [("extractive", "no_model")]  # type: ignore[attr-defined]
    assert middleware.model_provider() is not None and "summary" not in log
    # From now on the agent's own model writes the summaries.
    api_server.requests.clear()
    state = agent.invoke({"messages": [*history(8), HumanMessage("Once more.", id="h2")]})
    compacted = [e for e in events if e.kind == "langchain_compacted"]
    assert compacted[-1].summarizer == "langchain" and compacted[-1].fallback is None  # type: ignore[attr-defined]
    summary_requests = [r for r in api_server.requests if asks_for_summary(r.json["messages"])]
    assert len(summary_requests) == 1 and summary_requests[0].json["model"] == MODEL
    assert compacted[-1].summary_requests == 1  # type: ignore[attr-defined]


def test_the_middleware_uses_a_chat_model_given_as_its_model(api_server: ApiServer) -> None:
    from unbounded.integrations import UnboundedMiddleware

    serve(api_server)
    middleware = UnboundedMiddleware(chat(api_server), context_window=40_000)
    update = middleware.before_model({"messages": [*history(8)]}, None)  # type: ignore[arg-type]
    assert update is not None and update["unbounded"]["last_summary"]["summarizer"] == "langchain"


def test_the_middleware_falls_back_at_once_when_the_agents_model_fails(api_server: ApiServer) -> None:
    """Overloaded summaries: the first run spends the budget (the request and 2 retries, the
    direct request) and the offline hand-over lands the compaction in that same call."""
    from unbounded.integrations import UnboundedMiddleware

    log = serve(api_server, summaries="overloaded")
    events: list[Event] = []
    middleware = UnboundedMiddleware(chat(api_server), context_window=40_000, events=events.append)
    middleware.agent_summarizer.sleep = lambda delay: asyncio.sleep(0)  # type: ignore[union-attr]
    update = middleware.before_model({"messages": [*history(8)]}, None)  # type: ignore[arg-type]
    assert update is not None and "messages" in update
    assert update["unbounded"]["last_summary"] == {"summarizer": "extractive", "fallback": "request_budget", "summary_requests": 4}
    assert log.count("summary") == 4 and [e.kind for e in events].count("summary_requests_spent") == 1


def test_the_guard_never_refuses_the_offline_summary_that_fits_its_room() -> None:
    """A model whose output is small (256 tokens) gives every summary request a small room:
    the offline hand-over, cut to fit it, was refused as implausibly small for the ~36,000
    tokens it replaced, on every call, so that agent never compacted."""
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from unbounded.catalog import ModelInfo
    from unbounded.integrations import UnboundedMiddleware

    small = ModelInfo(name="small-output", provider="other", context_window=40_000, max_output=256, input_per_mtok=0.0, output_per_mtok=0.0)
    events: list[Event] = []
    middleware = UnboundedMiddleware(small, summarizer="extractive", events=events.append)
    messages: list[Any] = [HumanMessage("Fix every failing test.", id="h0")]
    for n in range(60):  # many facts: the leanest offline summary is far over 256 tokens
        call = {"name": "bash", "args": {"command": f"pytest tests/test_mod_{n}.py -k case_{n}"}, "id": f"call_{n}"}
        messages += [AIMessage(content="", tool_calls=[call], id=f"ai_{n}"), ToolMessage(content=f"FAILED tests/test_mod_{n}.py::case_{n} " + "trace\n" * 60, tool_call_id=f"call_{n}", id=f"t_{n}", status="error")]
    # The usage of a round the summary replaces: the ~36,000 tokens it replaces.
    messages[101].usage_metadata = {"input_tokens": 36_000, "output_tokens": 20, "total_tokens": 36_020}
    messages.append(HumanMessage("Go on.", id="h1"))
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert not [e for e in events if e.kind == "summary_rejected"]
    assert update is not None and "messages" in update  # it lands on the first call
