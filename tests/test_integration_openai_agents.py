"""The Agents SDK session: a real Agents SDK agent (Chat Completions model) against the local server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI

from apiserver import (
    ApiServer,
    Message,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.events import Event
from unbounded.integrations.openai_agents import UnboundedSession
from unbounded.policy import Policy

MODEL = "gpt-4o"


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + f"value_{path} = compute(value)\n" * 400  # about 3,000 tokens


def agent_for(api: ApiServer, session: UnboundedSession) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(MODEL, openai_client=AsyncOpenAI(base_url=api.openai_base_url, api_key="test-key"))
    return Agent(name="reader", instructions="You read code and report.", model=model, tools=[read_file, session.recall_tool()])


def run_config(session: UnboundedSession) -> RunConfig:
    return RunConfig(call_model_input_filter=session.model_input, tracing_disabled=True)


def chat_request_problems(body: dict[str, Any]) -> list[str]:
    """What Chat Completions refuses about a request's messages: a tool call left without its
    tool message before the next non-tool message, a tool message answering no call."""
    problems: list[str] = []
    waiting: set[str] = set()
    for index, sent in enumerate(body["messages"]):
        role = sent["role"]
        if role == "tool":
            if sent.get("tool_call_id") not in waiting:
                problems.append(f"messages[{index}]: a tool message answering no call")
            waiting.discard(sent.get("tool_call_id"))
            continue
        if waiting:
            problems.append(f"messages[{index}]: calls {sorted(waiting)} left unanswered")
            waiting = set()
        if role == "assistant":
            waiting = {call["id"] for call in sent.get("tool_calls") or []}
    return problems


class Script:
    """A read per turn, a recall of the first read once the session compacted, text to end a run."""

    def __init__(self, session: UnboundedSession, rounds_per_run: int) -> None:
        self.session = session
        self.rounds_per_run = rounds_per_run
        self.turn = 0
        self.in_run = 0
        self.recalled = False

    def reply(self, request: RecordedRequest) -> Message:
        self.turn += 1
        if not self.recalled and self.session.session.status().compactions:
            self.recalled = True
            return message(tool_use_block("recall", {"path": "mod1.py"}, id="call_recall"), id=f"msg_{self.turn}")
        if self.in_run == self.rounds_per_run:
            self.in_run = 0
            return message("All modules read.", id=f"msg_{self.turn}")
        self.in_run += 1
        n = self.turn
        return message(tool_use_block("read_file", {"path": f"mod{n}.py"}, id=f"call_{n}"), id=f"msg_{n}")


def test_a_sixty_turn_agent_compacts_recalls_and_survives_a_restart(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    session = UnboundedSession("user-1", model=MODEL, folder=tmp_path, context_window=40_000, policy=Policy(), events=events.append)
    script = Script(session, rounds_per_run=20)
    api_server.openai.push(*[script.reply] * 200)
    agent = agent_for(api_server, session)
    for prompt in ("Read the first modules.", "Read the next ones.", "And the last ones."):
        result = Runner.run_sync(agent, prompt, session=session, run_config=run_config(session), max_turns=100)
        assert result.final_output == "All modules read."

    requests = [r for r in api_server.requests if r.api == "openai"]
    assert len(requests) >= 60
    assert session.session.status().compactions >= 2
    for request in requests:
        assert chat_request_problems(request.json) == [], request.json["messages"]
        assert len(request.body) // 4 < 40_000
    served = [e for e in events if e.kind == "recall_served"]
    assert served and served[0].found
    after_recall = next(r for r in requests if any(m.get("tool_call_id") == "call_recall" for m in r.json["messages"]))
    answer = next(m for m in after_recall.json["messages"] if m.get("tool_call_id") == "call_recall")
    assert "value_mod1.py = compute" in json.dumps(answer)

    # Killed and reopened: the same folder and id give the same conversation back.
    while len(api_server.openai):  # the script's unused replies
        api_server.openai.pop()
    held = len(session.session.entries)
    session.close()
    reopened = UnboundedSession("user-1", model=MODEL, folder=tmp_path, context_window=40_000, policy=Policy())
    assert len(reopened.session.entries) == held
    api_server.openai.push(message("Still here."))
    result = Runner.run_sync(agent_for(api_server, reopened), "Are you there?", session=reopened, run_config=run_config(reopened))
    assert result.final_output == "Still here."
    last = api_server.last.json["messages"]
    assert "All modules read." in json.dumps(last) and "Are you there?" in json.dumps(last[-1])
    reopened.close()


def test_an_anthropic_summarizers_requests_declare_the_tools_they_hold(api_server: ApiServer, tmp_path: Path) -> None:
    """The summary request over a tool-using conversation, sent to the Messages API by an
    unbounded provider, declares the tools its history calls, none to be called."""
    from summaries import nine_section_summary

    from unbounded.providers.anthropic import AnthropicProvider

    summarizer = AnthropicProvider(base_url=api_server.anthropic_base_url, api_key="test-key")
    session = UnboundedSession("user-1", model=MODEL, folder=tmp_path, context_window=40_000, policy=Policy(), summarizer=summarizer)
    script = Script(session, rounds_per_run=24)
    api_server.openai.push(*[script.reply] * 60)
    api_server.anthropic.push(*[message(nine_section_summary(f"reading, summary {n}"), id=f"msg_s{n}") for n in range(5)])
    result = Runner.run_sync(agent_for(api_server, session), "Read the modules.", session=session, run_config=run_config(session), max_turns=100)
    assert result.final_output == "All modules read."
    summaries = [r.json for r in api_server.requests if r.api == "anthropic"]
    assert summaries and api_server.rejected == []
    for sent in summaries:
        assert "read_file" in [tool["name"] for tool in sent["tools"]]
        assert sent["tool_choice"] == {"type": "none"}
    while len(api_server.openai):
        api_server.openai.pop()
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    session.close()


def test_get_items_pop_item_and_clear_session(tmp_path: Path) -> None:
    import asyncio

    async def main() -> None:
        session = UnboundedSession("s", model=MODEL, folder=tmp_path)
        assert await session.get_items() == []
        await session.add_items([
            {"role": "user", "content": "Hi."},
            {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "a.py"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "print(1)"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "It prints 1."}]},
        ])
        items = await session.get_items()
        assert [i.get("type", "message") for i in items] == ["message", "function_call", "function_call_output", "message"]
        assert items[1]["call_id"] == "call_1" and items[2]["output"] == "print(1)"
        assert await session.get_items(limit=1) == items[-1:]
        popped = await session.pop_item()
        assert popped is not None and "It prints 1." in json.dumps(popped)
        assert len(await session.get_items()) == 3
        with pytest.raises(ConfigError, match="append-only"):
            await session.pop_item()  # the last item is the tool output: not a reply
        await session.clear_session()
        assert await session.get_items() == []
        assert any(p.name.startswith("s.cleared-") for p in tmp_path.iterdir())
        session.close()

    asyncio.run(main())


def test_wrong_parameters_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="session_id"):
        UnboundedSession("a/b", model=MODEL)
    with pytest.raises(ConfigError, match="folder or a store"):
        from unbounded.storage import MemoryStore

        UnboundedSession("a", model=MODEL, folder=tmp_path, store=MemoryStore())
    with pytest.raises(ConfigError, match="summarizer"):
        UnboundedSession("a", model=MODEL, summarizer="extractive")  # type: ignore[arg-type]


@pytest.mark.postgres
def test_a_postgres_store_keeps_the_session_across_workers(postgres_url: str) -> None:
    import asyncio

    from unbounded.postgres import PostgresStore

    async def main() -> None:
        first = UnboundedSession("w1", model=MODEL, store=PostgresStore(postgres_url, "w1"))
        await first.add_items([{"role": "user", "content": "Hi."}, {"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]}])
        first.close()
        second = UnboundedSession("w1", model=MODEL, store=PostgresStore(postgres_url, "w1"))
        items = await second.get_items()
        assert "Hi." in json.dumps(items[0]) and "Hello." in json.dumps(items[1])
        with pytest.raises(ConfigError, match="store you gave"):
            await second.clear_session()
        second.close()

    asyncio.run(main())
