"""Review rev18p of i38p's integration changes: a managed side call fitted to its model's
window (`fit_side_view`), summary requests without the caller's trace headers. Each bug was a
strict xfail for the bug's reason; i38p2 fixed them and took the marks off. Driven through
the real SDKs against the local API server. The cut is detected by its marker text, so the file also runs against the
code before i38p (where the regressions pass)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.catalog import ModelInfo, ModelTable, load_model_table
from unbounded.integrations import wrap
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore

anthropic = pytest.importorskip("anthropic")

CLAUDE = "claude-sonnet-4-6"
CUT = "left out of this request"
"""Part of the cut's marker text (`SIDE_CUT_MARKER`)."""
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]


def _model(name: str, window: int, **fields: Any) -> ModelInfo:
    return ModelInfo(name=name, provider="anthropic", context_window=window, max_output=8_000,
                     input_per_mtok=0.0, output_per_mtok=0.0, **fields)


def _table(*models: ModelInfo) -> ModelTable:
    table = load_model_table()
    for info in models:
        table = table.with_model(info)
    return table


def _script_tool_rounds(api_server: ApiServer, count: int) -> None:
    """A tool call per request, its usage the server's own size estimate (bytes / 4)."""
    ids = itertools.count()

    def reply(request: RecordedRequest) -> Any:
        n = next(ids)
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 30}
        call = tool_use_block("Read", {"path": f"f{n}"}, id=f"toolu_{n}")
        return message(f"reading f{n}", call, id=f"msg_{n}", usage=usage)

    api_server.anthropic.push(*[reply] * count)


def _tool_round(reply: Any, words: int) -> list[Any]:
    call = next(b for b in reply.content if b.type == "tool_use")
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "lorem ipsum " * words}
    return [{"role": "assistant", "content": reply.content}, {"role": "user", "content": [result]}]


def _conversation(api_server: ApiServer, client: Any, model: str, rounds: int, words: int,
                  **options: Any) -> list[Any]:
    """`rounds` tool rounds on one system prompt; the caller's list, its last call answered."""
    _script_tool_rounds(api_server, rounds)
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    for _ in range(rounds):
        reply = client.messages.create(model=model, max_tokens=1_000, system="You are an agent.",
                                       tools=READ, messages=messages, **options)
        messages += _tool_round(reply, words)
    return messages


def _asking(messages: list[Any], text: str) -> list[Any]:
    last = messages[-1]
    return [*messages[:-1], {"role": "user", "content": [*last["content"], {"type": "text", "text": text}]}]


def _sent_whole(api_server: ApiServer, messages: list[Any]) -> bool:
    """The last request holds the caller's whole conversation, no cut marker."""
    sent = api_server.last
    return CUT not in sent.body.decode() and len(sent.json["messages"]) == len(messages)


def test_a_side_call_on_an_alias_of_the_sessions_model_keeps_the_sessions_window(
    api_server: ApiServer,
) -> None:
    table = _table(_model("agent-m", 8_192, aliases=("agent-m-2026",)))
    client = wrap(api_server.anthropic_client(sync=True), context_window=30_000,
                  summarizer="extractive", model_table=table)
    messages = _conversation(api_server, client, "agent-m", 12, 600)
    assert client.status().compactions == 0
    api_server.anthropic.push(message("A title"))
    asked = _asking(messages, "A title for this?")
    client.messages.create(model="agent-m-2026", max_tokens=500, system="Write a title.",
                           messages=asked)
    assert _sent_whole(api_server, asked)


def test_a_side_call_on_a_model_with_a_larger_window_is_not_cut_to_the_conversations(
    api_server: ApiServer,
) -> None:
    table = _table(_model("agent-m", 20_000), _model("judge-big", 200_000))
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive",
                  model_table=table)
    messages = _conversation(api_server, client, "agent-m", 12, 300)
    assert client.status().compactions == 0
    document = "the document says " + "words of the document " * 3_000  # ~16,500 tokens
    api_server.anthropic.push(message("Judged"))
    asked = _asking(messages, document)
    client.messages.create(model="judge-big", max_tokens=500, system="You judge.", messages=asked)
    assert len(api_server.last.body) // 4 < 200_000  # it fits the judge's own window whole
    assert _sent_whole(api_server, asked)


def test_a_side_call_asking_for_the_long_context_beta_gets_the_long_window(
    api_server: ApiServer,
) -> None:
    beta = {"anthropic-beta": "context-1m-2025-08-07"}
    table = _table(_model("judge-m", 8_192, long_context_window=60_000))
    client = wrap(api_server.anthropic_client(sync=True), context_window=30_000,
                  summarizer="extractive", model_table=table)
    messages = _conversation(api_server, client, CLAUDE, 12, 600, extra_headers=beta)
    assert client.status().compactions == 0
    api_server.anthropic.push(message("A title"))
    asked = _asking(messages, "A title for this?")
    client.messages.create(model="judge-m", max_tokens=500, system="Write a title.",
                           messages=asked, extra_headers=beta)
    assert _sent_whole(api_server, asked)


def test_a_given_sessions_model_table_fits_a_side_call_to_the_small_models_window(
    api_server: ApiServer,
) -> None:
    small = 8_192
    table = _table(_model("small-judge", small))
    config = SessionConfig(model=CLAUDE, system="You are an agent.", tools=READ,
                           context_window=30_000)
    session = Session(config, store=MemoryStore(), model_table=table)
    client = wrap(api_server.anthropic_client(sync=True), session)
    messages = _conversation(api_server, client, CLAUDE, 12, 600)
    assert len(api_server.last.body) // 4 > small  # the view alone is past the judge's window
    api_server.anthropic.push(message("A title"))
    client.messages.create(model="small-judge", max_tokens=500, system="Write a title.",
                           messages=_asking(messages, "A title for this?"))
    assert len(api_server.last.body) // 4 + 500 <= small


WINDOW = 20_000
MAX_TOKENS = 8_000  # the model's max_output is 64,000: 8,000 is 40% of this scaled window


def test_a_side_call_with_the_turns_max_tokens_below_the_compaction_threshold_is_sent_whole(
    api_server: ApiServer,
) -> None:
    api_server.context_window = WINDOW
    client = wrap(api_server.anthropic_client(sync=True), context_window=WINDOW,
                  summarizer="extractive")
    _script_tool_rounds(api_server, 60)
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    while not messages[1:] or client.status().tokens <= WINDOW - MAX_TOKENS + 300:
        reply = client.messages.create(model=CLAUDE, max_tokens=MAX_TOKENS,
                                       system="You are an agent.", tools=READ, messages=messages)
        messages += _tool_round(reply, 100)
    assert client.status().compactions == 0
    side = _asking(messages, "Go on.")
    client.messages.create(model=CLAUDE, max_tokens=MAX_TOKENS,
                           system="You are an agent. It is 9 o'clock.", tools=READ, messages=side)
    side_whole = _sent_whole(api_server, side)
    # The same request as a turn (the conversation's own system) is sent whole, uncompacted.
    client.messages.create(model=CLAUDE, max_tokens=MAX_TOKENS, system="You are an agent.",
                           tools=READ, messages=side)
    assert client.status().compactions == 0 and _sent_whole(api_server, side)
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    assert side_whole


def test_a_max_tokens_as_large_as_the_window_does_not_gut_the_view(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), context_window=40_000,
                  summarizer="extractive")
    messages = _conversation(api_server, client, CLAUDE, 12, 60)
    assert client.status().tokens < 20_000
    api_server.anthropic.push(message("A title"))
    asked = _asking(messages, "A title for this?")
    client.messages.create(model=CLAUDE, max_tokens=40_000, system="Write a title.",
                           messages=asked, timeout=60)
    assert _sent_whole(api_server, asked)


def _is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json.get("messages"))


@pytest.mark.parametrize("name", ["newrelic", "Helicone-Request-Id", "X-Correlation-Id"])
def test_the_summary_requests_do_not_repeat_other_per_request_headers(
    api_server: ApiServer, name: str
) -> None:
    from summaries import nine_section_summary

    def reply(request: RecordedRequest) -> Any:
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 40}
        if _is_summary_request(request):
            return message(nine_section_summary("t"), id="msg_s", usage=usage)
        return message("ok", id="msg_t", usage=usage)

    api_server.anthropic.push(*[reply] * 40)
    headers = {name: "turn-7f3a", "Helicone-Auth": "Bearer proxy-key"}
    client = wrap(api_server.anthropic_client(sync=True), context_window=40_000)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(20):
        said = client.messages.create(model=CLAUDE, max_tokens=1_000, messages=messages,
                                      extra_headers=headers).content
        messages += [{"role": "assistant", "content": said},
                     {"role": "user", "content": f"u{n + 1} " + "word " * 1_500}]
        if client.status().compactions:
            break
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    summaries = [r for r in api_server.requests if _is_summary_request(r)]
    assert summaries
    assert all(r.headers.get("helicone-auth") == "Bearer proxy-key" for r in summaries)
    assert all(r.headers.get(name.lower()) != "turn-7f3a" for r in summaries)


def test_the_cut_counts_each_message_a_bounded_number_of_times() -> None:
    from unbounded.integrations._side_calls import fit_side_view
    from unbounded.tokens.estimate import content_tokens

    view: list[Any] = [{"role": "user", "content": "the task"}]
    for n in range(300):
        call = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 1_800}
        view += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    fresh: list[Any] = [{"role": "user", "content": "judge"}]
    counted = 0

    def count(messages: list[Any]) -> int:
        nonlocal counted
        counted += len(messages)
        return sum(content_tokens(m.get("content")) for m in messages)

    whole = sum(content_tokens(m.get("content")) for m in [*view, *fresh])
    _, left_out = fit_side_view(view, fresh, whole // 5, count)
    assert left_out > 0
    assert counted <= 4 * (len(view) + len(fresh))


def test_a_pydantic_ai_agent_with_a_structured_output_runs_a_third_time() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from apiserver import start_server
    from unbounded.integrations.pydantic_ai import UnboundedCapability

    class Report(BaseModel):
        text: str

    def read_file(path: str) -> str:
        """Read a file."""
        return f"# {path}\n" + "value = compute(value)\n" * 40

    turns = itertools.count(1)

    def reply(request: RecordedRequest) -> Any:
        n = next(turns)
        if n % 3 == 0:  # each run: two reads, then the structured answer
            return message(tool_use_block("final_result", {"text": f"done {n}"}, id=f"toolu_f{n}"))
        return message(tool_use_block("read_file", {"path": f"mod{n}.py"}, id=f"toolu_{n}"))

    with start_server() as api:
        api.anthropic.push(*[reply] * 9)
        model = AnthropicModel(CLAUDE, provider=AnthropicProvider(base_url=api.anthropic_base_url,
                                                                  api_key="test-key"))
        capability = UnboundedCapability(context_window=400_000)
        agent = Agent(model, system_prompt="You read code.", tools=[read_file],
                      output_type=Report, capabilities=[capability])
        history: list[Any] = []
        outputs = []
        for prompt in ("Read the first modules.", "Read the next ones.", "And the last ones."):
            result = agent.run_sync(prompt, message_history=history)
            outputs.append(result.output.text)
            history = result.all_messages()
        assert outputs == ["done 3", "done 6", "done 9"]
        assert api.rejected == []


def test_a_structured_output_agents_summary_request_repeats_the_turns_tools() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from summaries import nine_section_summary

    from apiserver import start_server
    from unbounded.integrations.pydantic_ai import UnboundedCapability
    from unbounded.policy import Policy

    class Report(BaseModel):
        text: str

    def read_file(path: str) -> str:
        """Read a file."""
        return f"# {path}\n" + f"value_{path} = compute(value)\n" * 400  # ~3,000 tokens

    def summary(request: RecordedRequest) -> bool:
        return "<summary>" in json.dumps(request.json["messages"][-1])

    turns = itertools.count(1)

    def reply(request: RecordedRequest) -> Any:
        size = len(request.body) // 4
        usage = {"input_tokens": 300, "cache_read_input_tokens": max(0, size - 300), "output_tokens": 40}
        if summary(request):
            return message(nine_section_summary("reading modules"), usage=usage)
        n = next(turns)
        if n % 16 == 0:
            return message(tool_use_block("final_result", {"text": "done"}, id=f"toolu_f{n}"), usage=usage)
        return message(tool_use_block("read_file", {"path": f"mod{n}.py"}, id=f"toolu_{n}"), usage=usage)

    with start_server() as api:
        api.anthropic.push(*[reply] * 60)
        model = AnthropicModel(CLAUDE, provider=AnthropicProvider(base_url=api.anthropic_base_url,
                                                                  api_key="test-key"))
        capability = UnboundedCapability(context_window=40_000, policy=Policy())
        agent = Agent(model, system_prompt="You read code.", tools=[read_file],
                      output_type=Report, capabilities=[capability])
        first = agent.run_sync("Read the first modules.")
        agent.run_sync("Read the next ones.", message_history=first.all_messages())
        while len(api.anthropic):
            api.anthropic.pop()
        assert capability.session.status().compactions >= 1
        checked = 0
        for before, sent in itertools.pairwise(api.requests):
            if summary(sent) and not summary(before):  # the last turn, then the summary it shares a cache with
                turn_tools = [t["name"] for t in before.json["tools"]]
                assert "final_result" in turn_tools
                assert [t["name"] for t in sent.json["tools"]] == turn_tools
                # i38p2: the same definitions, deferred newcomer and cache marker: its prefix.
                assert sent.json["tools"] == before.json["tools"]
                checked += 1
        assert checked
