"""The pydantic-ai capability: a real pydantic-ai Agent with AnthropicModel against the local server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from typing import Any

from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    Message,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    text_block,
    tool_use_block,
)
from unbounded.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    OverloadedError,
    PromptTooLongError,
    RateLimitedError,
    RetryableError,
    ServerError,
)
from unbounded.events import Event
from unbounded.integrations._pydantic_ai_messages import (
    MessageMap,
    anthropic_usage,
    pydantic_usage,
    request_blocks,
    response_blocks,
)
from unbounded.integrations.pydantic_ai import (
    UnboundedCapability,
    UnboundedHistory,
    _provider_error,
)
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
SYSTEM = "You read code and report."


def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + f"value_{path} = compute(value)\n" * 400  # about 3,000 tokens


def is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json["messages"][-1])


def model_for(api: ApiServer) -> AnthropicModel:
    return AnthropicModel(MODEL, provider=AnthropicProvider(base_url=api.anthropic_base_url, api_key="test-key"))


class Script:
    """The server's side of a long tool-using run: a read per turn, a recall of the first
    read once the conversation was summarized, a text reply to end each run."""

    def __init__(self, rounds_per_run: int) -> None:
        self.rounds_per_run = rounds_per_run
        self.turn = 0
        self.in_run = 0
        self.recalled: str | None = None
        self.summaries = 0

    def reply(self, request: RecordedRequest) -> Message:
        size = len(request.body) // 4
        usage = {"input_tokens": 300, "cache_read_input_tokens": max(0, size - 300), "output_tokens": 40}
        if is_summary_request(request):
            self.summaries += 1
            return message(nine_section_summary(f"reading modules, summary {self.summaries}"), id=f"msg_s{self.summaries}", usage=usage)
        self.turn += 1
        names = [tool.get("name") or tool["function"]["name"] for tool in request.json.get("tools", [])]
        if self.recalled is None and "recall" in names:
            self.recalled = "asked"
            return message(tool_use_block("recall", {"id": "toolu_1"}, id="toolu_recall"), id=f"msg_{self.turn}", usage=usage)
        if self.in_run == self.rounds_per_run:
            self.in_run = 0
            return message("All modules read.", id=f"msg_{self.turn}", usage=usage)
        self.in_run += 1
        n = self.turn
        return message(tool_use_block("read_file", {"path": f"mod{n}.py"}, id=f"toolu_{n}"), id=f"msg_{n}", usage=usage)


def test_a_sixty_turn_agent_compacts_recalls_and_sends_only_valid_requests(api_server: ApiServer) -> None:
    script = Script(rounds_per_run=20)
    api_server.anthropic.push(*[script.reply] * 200)
    events: list[Event] = []
    capability = UnboundedCapability(context_window=40_000, policy=Policy(), events=events.append)
    agent = Agent(model_for(api_server), system_prompt=SYSTEM, tools=[read_file], capabilities=[capability])

    history: list[pai.ModelMessage] = []
    for prompt in ("Read the first modules.", "Read the next ones.", "And the last ones."):
        result = agent.run_sync(prompt, message_history=history)
        assert result.output == "All modules read."
        history = result.all_messages()

    main = [r for r in api_server.requests if not is_summary_request(r)]
    assert len(main) >= 60
    assert capability.session.status().compactions >= 2
    assert api_server.rejected == []  # the server's own Messages API checks
    for request in main:
        validate_request(request.json["messages"])
        assert len(request.body) // 4 < 40_000
    # The agent's own history stays whole; the requests were the managed ones.
    assert sum(isinstance(m, pai.ModelResponse) for m in history) >= 60
    assert len(main[-1].json["messages"]) < len(history)
    # The summaries came from the agent's own model, with the conversation's system prompt.
    summaries = [r for r in api_server.requests if is_summary_request(r)]
    assert summaries and all(r.json["model"] == MODEL for r in summaries)
    # The recall was answered from the transcript: the first read's output came back.
    served = [e for e in events if e.kind == "recall_served"]
    assert served and served[0].found
    after_recall = next(r for r in main if "toolu_recall" in json.dumps(r.json["messages"][-1]))
    assert "value_mod1.py = compute" in json.dumps(after_recall.json["messages"][-1])
    # Anthropic cache markers: tools, system, last message.
    last = main[-1].json
    assert any("cache_control" in tool for tool in last["tools"])
    assert "cache_control" in last["system"][-1]
    assert any("cache_control" in block for block in last["messages"][-1]["content"])


def test_recall_is_offered_only_once_something_left_the_context(api_server: ApiServer) -> None:
    api_server.anthropic.push(message(tool_use_block("read_file", {"path": "a.py"}, id="toolu_1")), message("done"))
    agent = Agent(model_for(api_server), tools=[read_file], capabilities=[UnboundedCapability()])
    agent.run_sync("Read a.py")
    assert all("recall" not in [t["name"] for t in r.json["tools"]] for r in api_server.requests)


def test_conversion_keeps_ids_thinking_retries_and_usage() -> None:
    response = pai.ModelResponse(
        parts=[
            pai.ThinkingPart(content="Let me look.", signature="sig_1"),
            pai.TextPart(content="Reading."),
            pai.ToolCallPart(tool_name="read_file", args={"path": "a.py"}, tool_call_id="toolu_7"),
            pai.ToolCallPart(tool_name="read_file", args='{"path": "b.py"}', tool_call_id="toolu_8"),
        ],
        usage=pydantic_usage({"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50, "output_tokens": 5}),
    )
    assert response_blocks(response) == [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig_1"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_7", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_8", "name": "read_file", "input": {"path": "b.py"}},
    ]
    assert anthropic_usage(response.usage) == {"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50, "output_tokens": 5}
    request = pai.ModelRequest(
        parts=[
            pai.ToolReturnPart(tool_name="read_file", content="print(1)", tool_call_id="toolu_7"),
            pai.ToolReturnPart(tool_name="read_file", content="path must exist", tool_call_id="toolu_8", outcome="retried"),
        ]
    )
    blocks = request_blocks(request)
    assert blocks[0] == {"type": "tool_result", "tool_use_id": "toolu_7", "content": "print(1)"}
    assert blocks[1]["is_error"] is True and blocks[1]["tool_use_id"] == "toolu_8" and "path must exist" in blocks[1]["content"]

    mapping = MessageMap()
    mapping.remember("assistant", response_blocks(response), response)
    cleared = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": "[cleared]"}, {**blocks[1]}]}
    back = mapping.to_pydantic([{"role": "assistant", "content": response_blocks(response)}, cleared])
    assert back[0] is response  # unchanged: the agent's own object
    rebuilt = back[1]
    assert isinstance(rebuilt, pai.ModelRequest)
    first, second = rebuilt.parts
    assert isinstance(first, pai.ToolReturnPart) and (first.tool_name, first.tool_call_id, first.content) == ("read_file", "toolu_7", "[cleared]")
    assert isinstance(second, pai.ToolReturnPart) and second.outcome == "failed"
    assert (second.tool_call_id, second.tool_name) == ("toolu_8", "read_file")
    built = MessageMap.build_response(response_blocks(response))
    assert response_blocks(built) == response_blocks(response)


def test_a_resumed_folder_continues_with_the_new_prompt_only(api_server: ApiServer, tmp_path: Path) -> None:
    folder = tmp_path / "session"
    api_server.anthropic.push(message("First answer."), message("Second answer."))
    first = UnboundedCapability(session_folder=folder)
    result = Agent(model_for(api_server), system_prompt=SYSTEM, capabilities=[first]).run_sync("Hello.")
    first.history.close()
    second = UnboundedCapability(session_folder=folder)
    agent = Agent(model_for(api_server), system_prompt=SYSTEM, capabilities=[second])
    agent.run_sync("Go on.")
    sent = api_server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "First answer." in json.dumps(sent[1]) and "Go on." in json.dumps(sent[2])
    # Passing the history as well would send it twice: refused with the way out.
    third = UnboundedCapability(session_folder=tmp_path / "other")
    third_agent = Agent(model_for(api_server), capabilities=[third])
    api_server.anthropic.push(message("x"))
    third_agent.run_sync("Hi.")
    third.history.close()
    again = Agent(model_for(api_server), capabilities=[UnboundedCapability(session_folder=tmp_path / "other")])
    with pytest.raises(ConfigError, match="new prompt only"):
        again.run_sync("More.", message_history=result.all_messages())


def test_a_second_run_without_history_continues_the_conversation(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("First answer."), message("Second answer."))
    agent = Agent(model_for(api_server), system_prompt=SYSTEM, capabilities=[UnboundedCapability()])
    agent.run_sync("Hello.")
    assert agent.run_sync("Go on.").output == "Second answer."
    sent = api_server.requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "Hello." in json.dumps(sent[0]) and "First answer." in json.dumps(sent[1]) and "Go on." in json.dumps(sent[2])


def test_an_edited_history_is_refused(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("One."), message("Two."))
    agent = Agent(model_for(api_server), capabilities=[UnboundedCapability()])
    result = agent.run_sync("First.")
    edited = [pai.ModelRequest(parts=[pai.UserPromptPart(content="Something else.")]), *result.all_messages()[1:]]
    with pytest.raises(ConfigError, match="append-only"):
        agent.run_sync("Second.", message_history=edited)


def test_the_history_processor_replaces_the_history_and_continues(api_server: ApiServer) -> None:
    script = Script(rounds_per_run=30)
    api_server.anthropic.push(*[script.reply] * 100)
    history = UnboundedHistory(context_window=40_000, policy=Policy())
    # ProcessHistory runs a history processor as `history_processors=[...]` did before capabilities.
    agent = Agent(model_for(api_server), system_prompt=SYSTEM, tools=[read_file, history.recall_tool()], capabilities=[ProcessHistory(history.processor)])
    result = agent.run_sync("Read the modules.")
    assert result.output == "All modules read."
    assert history.session.status().compactions >= 1
    assert api_server.rejected == []
    # The agent's history is the managed one: it starts with the summary, the system prompt kept.
    first = result.all_messages()[0]
    assert isinstance(first, pai.ModelRequest)
    assert any(isinstance(p, pai.SystemPromptPart) for p in first.parts)
    assert "reading modules, summary" in json.dumps([str(p) for p in first.parts])
    # The summary request holds the history's tool blocks: it declares the tools they call,
    # none of them to be called.
    summaries = [r.json for r in api_server.requests if is_summary_request(r)]
    assert summaries
    for sent in summaries:
        assert {tool["name"] for tool in sent["tools"]} >= {"read_file"}
        assert sent["tool_choice"] == {"type": "none"}


def test_the_history_processor_on_an_openai_model_sends_valid_summary_requests(api_server: ApiServer) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    script = Script(rounds_per_run=30)
    api_server.openai.push(*[script.reply] * 100)
    history = UnboundedHistory(context_window=40_000, policy=Policy())
    model = OpenAIChatModel("gpt-5.4", provider=OpenAIProvider(base_url=api_server.openai_base_url, api_key="test-key"))
    agent = Agent(model, system_prompt=SYSTEM, tools=[read_file, history.recall_tool()], capabilities=[ProcessHistory(history.processor)])
    assert agent.run_sync("Read the modules.").output == "All modules read."
    assert history.session.status().compactions >= 1
    assert api_server.rejected == []
    summaries = [r.json for r in api_server.requests if is_summary_request(r)]
    assert summaries
    for sent in summaries:  # the tool calls it holds are declared, not callable
        assert "read_file" in [tool["function"]["name"] for tool in sent["tools"]]
        assert sent["tool_choice"] == "none"


def test_wrong_parameters_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="summarizer"):
        UnboundedCapability(summarizer="client")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="summarizer"):
        UnboundedCapability(summarizer=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="context_window"):
        UnboundedCapability(context_window=0)


def test_the_async_agent_works_too(api_server: ApiServer) -> None:
    api_server.anthropic.push(message(text_block("Async answer.")))
    agent = Agent(model_for(api_server), capabilities=[UnboundedCapability()])
    result = asyncio.run(agent.run("Hello."))
    assert result.output == "Async answer."


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, {"error": "slow down"}, RateLimitedError),
        (529, None, OverloadedError),
        (503, None, OverloadedError),
        (500, None, ServerError),
        (401, None, AuthenticationError),
        (400, {"message": "prompt is too long: 212345 tokens > 200000 maximum"}, PromptTooLongError),
        (400, {"message": "messages.0: bad"}, BadRequestError),
    ],
)
def test_the_summarizers_http_errors_are_the_projects(status: int, body: Any, expected: type[Exception]) -> None:
    error = _provider_error(ModelHTTPError(status, MODEL, body, retry_after=7.0))
    assert type(error) is expected and error.status == status
    if isinstance(error, RetryableError):
        assert error.retry_after == 7.0
    if isinstance(error, PromptTooLongError):
        assert error.token_gap == 12_345


def test_an_offline_summarizer_sends_no_summary_request(api_server: ApiServer) -> None:
    script = Script(rounds_per_run=24)
    api_server.anthropic.push(*[script.reply] * 60)
    capability = UnboundedCapability(context_window=40_000, policy=Policy(), summarizer="extractive")
    agent = Agent(model_for(api_server), system_prompt=SYSTEM, tools=[read_file], capabilities=[capability])
    assert agent.run_sync("Read the modules.").output == "All modules read."
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    assert capability.session.status().compactions >= 1
    assert script.summaries == 0 and capability.session.status().last_summary is not None
