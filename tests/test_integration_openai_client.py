"""The OpenAI client drop-in (Chat Completions and Responses), through the real `openai` SDK
against the scripted local server, which refuses what the real APIs refuse."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    prompt_too_long,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.events import Event
from unbounded.integrations import wrap
from unbounded.integrations.openai_client import (
    AsyncUnboundedOpenAI,
    UnboundedOpenAI,
    is_reasoning_model,
)
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig

openai = pytest.importorskip("openai")

MODEL = "gpt-5.4"
WINDOW = 60_000
SYSTEM = "You are a careful coding agent."
TASK = "Read every log and fix the parser."
SUMMARY = nine_section_summary("fix the parser")
BASH = {
    "name": "Bash",
    "description": "Run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}
CHAT_TOOLS = [{"type": "function", "function": BASH}]
RESPONSES_TOOLS = [{"type": "function", **BASH}]
TURNS = 60
RECALL_TURN = 45


def conversation_of(request: RecordedRequest) -> list[Any]:
    body = request.json
    items = body.get("messages") if "messages" in body else body.get("input")
    return items if isinstance(items, list) else [items]


def is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(conversation_of(request)[-1])


def offers(request: RecordedRequest, name: str) -> bool:
    for tool in request.json.get("tools") or []:
        function = tool.get("function", tool)
        if function.get("name") == name:
            return True
    return False


def big_output(n: int) -> str:
    return f"== big_{n}.log ==\n" + "".join(f"line {i} of log {n}: value={i * n}\n" for i in range(300))


class ScriptedAgent:
    """The model: a Bash call per turn reading a large log (with a reasoning item first on the
    Responses API), one `recall` call once recall is offered late in the run, and a summary
    whenever one is asked for."""

    def __init__(self, responses: bool) -> None:
        self.responses = responses
        self.turn = 0
        self.recalled = False
        self.summaries = 0

    def __call__(self, request: RecordedRequest) -> Any:
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 60}
        if is_summary_request(request):
            self.summaries += 1
            return message(SUMMARY, id=f"msg_summary_{self.summaries}", usage=usage)
        if self.turn >= RECALL_TURN and not self.recalled and offers(request, "recall"):
            self.recalled = True
            call = tool_use_block("recall", {"command": "cat big_1.log"}, id="call_recall_1")
            return message(call, id="msg_recall", usage=usage)
        self.turn += 1
        n = self.turn
        blocks: list[dict[str, Any]] = []
        if self.responses:
            blocks.append({"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"enc-{n}=="})
        if n >= TURNS:
            blocks.append({"type": "text", "text": "All logs read; the parser is fixed."})
        else:
            blocks.append(tool_use_block("Bash", {"command": f"cat big_{n}.log"}, id=f"call_{n}"))
        return message(*blocks, id=f"msg_{n}", usage=usage)


def checked_run(api_server: ApiServer, client: Any, agent: ScriptedAgent) -> None:
    """What every long run must show: two compactions or more, the recall served inside the
    call, every request valid (the server refused none), the cache key the same throughout."""
    assert agent.turn == TURNS
    assert client.status().compactions >= 2
    assert agent.summaries >= 2
    assert agent.recalled
    assert not api_server.rejected
    main = [r for r in api_server.requests if not is_summary_request(r)]
    keys = {r.json.get("prompt_cache_key") for r in api_server.requests}
    assert len(keys) == 1 and None not in keys
    answered = [r for r in main if "call_recall_1" in r.body.decode()]
    assert answered and "line 16 of log 1" in answered[0].body.decode()  # the recall answer
    assert "error: no tool named" not in "".join(r.body.decode() for r in answered)
    assert all(len(r.body) // 4 < WINDOW for r in api_server.requests)
    summary_models = {r.json["model"] for r in api_server.requests if is_summary_request(r)}
    assert summary_models == {MODEL}  # the client's own model summarizes


def chat_loop(client: Any, agent: ScriptedAgent, api_server: ApiServer, *, stream: bool) -> None:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for _ in range(TURNS + 2):  # a streamed recall call is one more turn of the caller's
        api_server.openai.push(agent, agent, agent)
        if stream:
            text, calls = "", {}
            with client.chat.completions.create(
                model=MODEL, messages=messages, tools=CHAT_TOOLS, max_completion_tokens=1024, stream=True
            ) as chunks:
                for chunk in chunks:
                    for choice in chunk.choices:
                        text += choice.delta.content or ""
                        for call in choice.delta.tool_calls or []:
                            slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                            slot["id"] = call.id or slot["id"]
                            slot["name"] += call.function.name or ""
                            slot["arguments"] += call.function.arguments or ""
            tool_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]
            reply: Any = {"role": "assistant", "content": text or None}
            if tool_calls:
                reply["tool_calls"] = tool_calls
            messages.append(reply)
        else:
            completion = client.chat.completions.create(
                model=MODEL, messages=messages, tools=CHAT_TOOLS, max_completion_tokens=1024
            )
            reply = completion.choices[0].message
            messages.append(reply)
            tool_calls = [{"id": c.id, "function": {"name": c.function.name}} for c in reply.tool_calls or []]
        for call in tool_calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call["function"]["name"], call["id"])})
        drain(api_server)
        if not tool_calls:
            return


def run_tool(name: str, call_id: str) -> str:
    """The caller's tools: Bash reads a log; a tool it does not have (the session's `recall`,
    seen in a streamed reply) gets an error the wrapper replaces with the session's answer."""
    if name != "Bash":
        return f"error: no tool named {name}"
    return big_output(int(call_id.removeprefix("call_")))


def drain(api_server: ApiServer) -> None:
    for queue in (api_server.openai, api_server.responses):
        while len(queue):
            queue.pop()


@pytest.mark.parametrize("stream", [False, True])
def test_a_60_turn_chat_completions_agent_compacts_recalls_and_stays_valid(api_server: ApiServer, stream: bool) -> None:
    api_server.context_window = WINDOW
    agent = ScriptedAgent(responses=False)
    client = wrap(api_server.openai_client(sync=True), context_window=WINDOW, policy=Policy())
    assert isinstance(client, UnboundedOpenAI)
    chat_loop(client, agent, api_server, stream=stream)
    checked_run(api_server, client, agent)
    first = api_server.requests[0].json
    assert first["max_completion_tokens"] == 1024 and "max_tokens" not in first
    assert first["messages"][0] == {"role": "system", "content": SYSTEM}


def responses_loop(client: Any, agent: ScriptedAgent, api_server: ApiServer, *, stream: bool) -> list[Any]:
    items: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(TURNS + 2):
        api_server.responses.push(agent, agent, agent)
        if stream:
            output: list[Any] = []
            for event in client.responses.create(
                model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS, max_output_tokens=1024, stream=True
            ):
                if event.type == "response.output_item.done":
                    output.append(event.item)
        else:
            output = client.responses.create(
                model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS, max_output_tokens=1024
            ).output
        items += output
        for item in output:
            if item.type == "function_call":
                items.append({"type": "function_call_output", "call_id": item.call_id, "output": run_tool(item.name, item.call_id)})
        drain(api_server)
        if not any(item.type == "function_call" for item in output):
            break
    return items


@pytest.mark.parametrize("stream", [False, True])
def test_a_60_turn_responses_agent_compacts_recalls_and_stays_valid(api_server: ApiServer, stream: bool) -> None:
    api_server.context_window = WINDOW
    agent = ScriptedAgent(responses=True)
    client = wrap(api_server.openai_client(sync=True), context_window=WINDOW, policy=Policy())
    responses_loop(client, agent, api_server, stream=stream)
    checked_run(api_server, client, agent)
    first = api_server.requests[0].json
    assert first["instructions"] == SYSTEM and first["max_output_tokens"] == 1024
    # the last reasoning item the model sent went back as it came
    last = [r for r in api_server.requests if not is_summary_request(r)][-1]
    assert {"type": "reasoning", "id": "rs_59", "summary": [], "encrypted_content": "enc-59=="} in last.json["input"]


def test_the_async_client_runs_both_apis(api_server: ApiServer) -> None:
    async def run() -> None:
        client = wrap(api_server.openai_client(), policy=Policy(), summarizer="extractive")
        assert isinstance(client, AsyncUnboundedOpenAI)
        api_server.responses.push(message(tool_use_block("Bash", {"command": "ls"}, id="call_1")), message("Done."))
        items: list[Any] = [{"role": "user", "content": "List."}]
        reply = await client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS)
        items += reply.output
        items.append({"type": "function_call_output", "call_id": "call_1", "output": "a.py"})
        stream = await client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS, stream=True)
        kinds = [event.type async for event in stream]
        assert kinds[-1] == "response.completed"
        assert [m["role"] for m in client.session.messages] == ["user", "assistant", "user", "assistant"]
        with pytest.raises(ConfigError, match="runs on the responses API"):
            await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        await client.close()

    asyncio.run(run())


@pytest.mark.parametrize("sync", [True, False])
def test_a_copy_of_the_wrapped_client_stays_in_the_session(api_server: ApiServer, sync: bool) -> None:
    """`copy(...)`, like `with_options(...)`, is the SDK's copy on the same conversation: its
    calls are recorded, and the copy keeps its own options."""
    api_server.responses.push(message("One."), message("Two."))

    async def run() -> None:
        client = wrap(api_server.openai_client(sync=sync), policy=Policy(), summarizer="extractive")
        quick = client.copy(timeout=30, max_retries=0)
        assert type(quick) is type(client)
        assert (quick.client.max_retries, quick.client.timeout) == (0, 30)
        items: list[Any] = [{"role": "user", "content": "First."}]
        create = quick.responses.create
        reply = create(model=MODEL, input=items)
        reply = await reply if not sync else reply
        assert quick.session is client.session
        items += [*reply.output, {"role": "user", "content": "Second."}]
        again = client.copy().responses.create(model=MODEL, input=items)
        await again if not sync else again
        assert [m["role"] for m in client.session.messages] == ["user", "assistant", "user", "assistant"]
        assert len(api_server.requests[1].json["input"]) == 3

    asyncio.run(run())


def test_an_async_chat_stream_is_recorded_once_read(api_server: ApiServer) -> None:
    async def run() -> None:
        client = wrap(api_server.openai_client(), policy=Policy(), summarizer="extractive")
        api_server.openai.push(message("Hello there."))
        stream = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == "Hello there."
        assert client.session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
        assert api_server.last.json["stream_options"] == {"include_usage": True}
        await client.close()

    asyncio.run(run())


COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "c2VydmVyLXNpZGUgc3VtbWFyeQ=="}


def test_a_compaction_item_and_encrypted_reasoning_go_back_byte_for_byte(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAAB-opaque=="}
    api_server.responses.push(message(COMPACTION, reasoning, "Compacted; going on."), message("Next."))
    items: list[Any] = [{"role": "user", "content": "Go."}]
    reply = client.responses.create(model=MODEL, input=items, context_management=[{"type": "compaction", "compact_threshold": 1000}])
    items += reply.output
    items.append({"role": "user", "content": "And now?"})
    client.responses.create(model=MODEL, input=items)
    sent = api_server.last.json["input"]
    raw_reply = json.loads(api_server.requests[0].body)  # what the SDK sent the first time
    assert raw_reply["context_management"] == [{"type": "compaction", "compact_threshold": 1000}]
    first_out = [i for i in sent if i.get("type") in ("compaction", "reasoning")]
    assert first_out == [COMPACTION, reasoning]
    sent_text = api_server.last.body.decode()
    assert json.dumps(COMPACTION["encrypted_content"]) in sent_text and "gAAAAB-opaque==" in sent_text
    assert sent.index(COMPACTION) < sent.index(reasoning)  # in the order the API gave them


def test_prompt_too_long_compacts_and_retries_once(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), summarizer="extractive", policy=Policy(), events=events.append)
    api_server.openai.push(message(tool_use_block("Bash", {"command": "pytest"}, id="call_1")))
    messages: list[Any] = [{"role": "user", "content": "Run the tests."}]
    reply = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    messages += [reply.choices[0].message, {"role": "tool", "tool_call_id": "call_1", "content": "3 failed\n" * 200}]
    api_server.openai.push(prompt_too_long(), message("Recovered."))
    reply = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    assert reply.choices[0].message.content == "Recovered."
    assert client.status().compactions == 1
    assert any(e.kind == "reactive_compaction" for e in events)
    messages += [reply.choices[0].message, {"role": "user", "content": "More."}]
    api_server.openai.push(prompt_too_long(), prompt_too_long())
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)


def test_side_calls_and_regenerates_are_told_apart(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]
    api_server.openai.push(message("First answer."), message("A title"), message("Second answer."))
    client.chat.completions.create(model=MODEL, messages=messages)
    title = client.chat.completions.create(model=MODEL, messages=[{"role": "system", "content": "Write a title."}, {"role": "user", "content": "Hi"}])
    assert title.choices[0].message.content == "A title"
    assert api_server.last.json["messages"][0]["content"] == "Write a title."  # sent as given
    assert "prompt_cache_key" not in api_server.last.json
    again = client.chat.completions.create(model=MODEL, messages=messages)  # the same list: regenerate
    assert again.choices[0].message.content == "Second answer."
    assert [m["role"] for m in client.session.messages] == ["user", "assistant"]
    assert client.session.messages[-1]["content"] == [{"type": "text", "text": "Second answer."}]


def test_reasoning_models_get_max_completion_tokens_and_the_callers_cache_key_is_kept(api_server: ApiServer) -> None:
    assert is_reasoning_model("o3-mini") and is_reasoning_model("gpt-5.4") and not is_reasoning_model("gpt-4o")
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("ok"))
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], max_tokens=50, prompt_cache_key="mine", temperature=0.2)
    sent = api_server.last.json
    assert sent["max_tokens"] == 50 and sent["prompt_cache_key"] == "mine" and sent["temperature"] == 0.2
    assert "max_completion_tokens" not in sent


def test_without_a_limit_given_a_reasoning_model_never_gets_max_tokens(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("ok"), message("ok"))
    client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert "max_tokens" not in api_server.last.json and api_server.last.json["max_completion_tokens"] > 0
    other = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    other.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert "max_completion_tokens" not in api_server.last.json and api_server.last.json["max_tokens"] > 0


def test_usage_cached_tokens_are_read_as_cache_reads(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.responses.push(message("ok", usage={"input_tokens": 300, "cache_read_input_tokens": 700}))
    client.responses.create(model=MODEL, input="Hi")
    usage = client.session.entries[-1].usage
    assert usage is not None
    assert (usage["input_tokens"], usage["cache_read_input_tokens"]) == (300, 700)


def test_an_unknown_model_needs_a_window_and_takes_prices_from_arguments(api_server: ApiServer, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match=r"'my-llama' is not in the model table.*context_window"):
        wrap(api_server.openai_client(sync=True), model="my-llama")
    with caplog.at_level(logging.WARNING, logger="unbounded"):
        bare = wrap(api_server.openai_client(sync=True), model="my-llama", context_window=32_768)
    assert bare.session.model_info.input_per_mtok == 0.0
    assert "costs are counted as 0" in caplog.text
    priced = wrap(
        api_server.openai_client(sync=True), model="my-llama", context_window=32_768,
        prices={"input_per_mtok": 0.2, "output_per_mtok": 0.6},
    )
    info = priced.session.model_info
    assert (info.context_window, info.input_per_mtok, info.output_per_mtok) == (32_768, 0.2, 0.6)
    api_server.openai.push(message("hi"))
    priced.chat.completions.create(model="my-llama", messages=[{"role": "user", "content": "Hi"}])
    assert api_server.last.json["max_tokens"] > 0
    with pytest.raises(ConfigError, match="prices: unknown key 'input'"):
        wrap(api_server.openai_client(sync=True), model="my-llama", context_window=32_768, prices={"input": 1.0})


def test_calls_that_would_bypass_the_session_are_refused(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy())
    with pytest.raises(ConfigError, match="previous_response_id"):
        client.responses.create(model=MODEL, input="Hi", previous_response_id="resp_1")
    with pytest.raises(ConfigError, match="past the session"):
        getattr(client.responses, "parse")  # noqa: B009  (the attribute access is what is refused)
    with pytest.raises(ConfigError, match="past the session"):
        getattr(client, "with_raw_response")  # noqa: B009


def test_fields_an_sdk_method_does_not_name_go_in_extra_body() -> None:
    from unbounded.providers.openai import fit_body_fields

    def old_create(*, model: str, input: list[Any], extra_body: Any = None) -> None: ...

    def mid_create(*, model: str, input: list[Any], prompt_cache_key: str = "", extra_body: Any = None) -> None: ...

    def new_create(*, model: str, input: list[Any], prompt_cache_key: str = "", context_management: Any = None) -> None: ...

    def any_create(**kwargs: Any) -> None: ...

    management = [{"type": "compaction", "compact_threshold": 1000}]
    given = {"model": "m", "prompt_cache_key": "k", "context_management": management}
    kwargs: dict[str, Any] = {**given, "extra_body": {"x": 1}}
    fit_body_fields(kwargs, old_create)
    assert kwargs == {"model": "m", "extra_body": {"x": 1, "prompt_cache_key": "k", "context_management": management}}
    kwargs = dict(given)
    fit_body_fields(kwargs, mid_create)
    assert kwargs == {"model": "m", "prompt_cache_key": "k", "extra_body": {"context_management": management}}
    for create in (new_create, any_create):
        kwargs = dict(given)
        fit_body_fields(kwargs, create)
        assert kwargs == given


def test_the_sdk_stream_helpers_run_the_pipeline_and_record_the_reply(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc=="}
    api_server.responses.push(message(reasoning, tool_use_block("Bash", {"command": "ls"}, id="call_1")), message("Two files."))
    items: list[Any] = [{"role": "user", "content": "List."}]
    with client.responses.stream(model=MODEL, input=items, tools=RESPONSES_TOOLS) as stream:
        final = stream.get_final_response()
    assert api_server.last.json["prompt_cache_key"].startswith("unbounded-")
    items += final.output
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "a.py b.py"})
    with client.responses.stream(model=MODEL, input=items, tools=RESPONSES_TOOLS) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.completed"
    assert reasoning in api_server.last.json["input"]
    assert client.session.messages[-1]["content"] == [{"type": "text", "text": "Two files."}]
    assert len(client.session.messages) == 4


def test_an_async_chat_stream_helper_records_once_read(api_server: ApiServer) -> None:
    async def run() -> None:
        client = wrap(api_server.openai_client(), policy=Policy(), summarizer="extractive")
        api_server.openai.push(message("Hello there."))
        async with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "Hi"}]) as stream:
            completion = await stream.get_final_completion()
        assert completion.choices[0].message.content == "Hello there."
        assert client.session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
        await client.close()

    asyncio.run(run())


def test_a_resumed_folder_keeps_its_prompt_cache_key(api_server: ApiServer, tmp_path: Any) -> None:
    folder = tmp_path / "session"
    api_server.responses.push(message("One."), message("Two."))
    with wrap(api_server.openai_client(sync=True), session_folder=folder, policy=Policy(), summarizer="extractive") as client:
        first = client.responses.create(model=MODEL, input="Hi")
    key = api_server.last.json["prompt_cache_key"]
    with wrap(api_server.openai_client(sync=True), session_folder=folder, policy=Policy(), summarizer="extractive") as again:
        again.responses.create(model=MODEL, input=[{"role": "user", "content": "Hi"}, *first.output, {"role": "user", "content": "More."}])
        assert [m["role"] for m in again.session.messages] == ["user", "assistant", "user", "assistant"]
    assert api_server.last.json["prompt_cache_key"] == key


def test_a_responses_prompt_too_long_compacts_and_retries_once(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), summarizer="extractive", policy=Policy())
    api_server.responses.push(message(tool_use_block("Bash", {"command": "pytest"}, id="call_1")))
    items: list[Any] = [{"role": "user", "content": "Run the tests."}]
    items += client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS).output
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "3 failed\n" * 200})
    api_server.responses.push(prompt_too_long(), message("Recovered."))
    reply = client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS)
    assert reply.output_text == "Recovered."
    assert client.status().compactions == 1
    refused, retried = api_server.requests[-2:]
    assert "This session continues" in json.dumps(retried.json["input"][0])
    assert len(retried.json["input"]) < len(refused.json["input"]) + 1


def test_a_60_turn_async_streamed_responses_agent(api_server: ApiServer) -> None:
    api_server.context_window = WINDOW
    agent = ScriptedAgent(responses=True)

    async def run() -> AsyncUnboundedOpenAI:
        client = wrap(api_server.openai_client(), context_window=WINDOW, policy=Policy())
        items: list[Any] = [{"role": "user", "content": TASK}]
        for _ in range(TURNS + 2):
            api_server.responses.push(agent, agent, agent)
            output: list[Any] = []
            stream = await client.responses.create(model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS, stream=True)
            async for event in stream:
                if event.type == "response.output_item.done":
                    output.append(event.item)
            items += output
            calls = [item for item in output if item.type == "function_call"]
            items += [{"type": "function_call_output", "call_id": c.call_id, "output": run_tool(c.name, c.call_id)} for c in calls]
            drain(api_server)
            if not calls:
                break
        return client

    client = asyncio.run(run())
    checked_run(api_server, client, agent)


def test_built_in_tools_and_strict_functions_go_out_as_given(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    tools = [{"type": "web_search"}, {"type": "function", "name": "ls", "parameters": {"type": "object", "properties": {}}, "strict": True}]
    api_server.responses.push(message("ok"))
    client.responses.create(model=MODEL, input="Hi", tools=tools)
    assert api_server.last.json["tools"] == tools
    chat_tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}, "strict": False}}]
    other = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("ok"))
    other.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], tools=chat_tools)
    assert api_server.last.json["tools"] == chat_tools


def test_a_responses_conversation_is_summarized_on_the_responses_api(api_server: ApiServer) -> None:
    # given a session, the client's summarizer is built before the first call names the API
    session = Session(SessionConfig(model=MODEL), summarizer=ExtractiveSummarizer())
    client = wrap(api_server.openai_client(sync=True), session=session, summarizer="client", policy=Policy())
    api_server.responses.push(message("Read it."))
    client.responses.create(model=MODEL, input="Read the log.")
    api_server.responses.push(message(SUMMARY))
    api_server.openai.push(message(SUMMARY))
    asyncio.run(client.session.compact())
    summaries = [r.path for r in api_server.requests if is_summary_request(r)]
    assert summaries == ["/v1/responses"]



def test_a_given_sessions_own_summarizer_is_kept_when_the_api_is_bound(api_server: ApiServer) -> None:
    own = ExtractiveSummarizer()
    session = Session(SessionConfig(model=MODEL), summarizer=own)
    client = wrap(api_server.openai_client(sync=True), session=session, policy=Policy())
    api_server.responses.push(message("Read it."))
    client.responses.create(model=MODEL, input="Read the log.")
    assert client.session.summarizer is own


def test_the_package_exports_the_openai_drop_in_without_importing_an_sdk() -> None:
    code = (
        "import sys, unbounded.integrations as i, unbounded.integrations.openai_client as o; "
        "assert (i.UnboundedOpenAI, i.AsyncUnboundedOpenAI) == (o.UnboundedOpenAI, o.AsyncUnboundedOpenAI); "
        "print(sorted(m for m in ('anthropic', 'openai', 'langchain', 'pydantic_ai', 'agents') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


# ------------------------------------------------------------------ a chat stream's chunks


def test_a_chat_stream_left_at_its_finish_reason_is_recorded_with_its_usage(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("Hello there."))
    seen: list[Any] = []
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True)
    for chunk in stream:
        seen.append(chunk)
        if chunk.choices[0].finish_reason:
            break  # the usual loop: the usage chunk after the finish is never asked for
    stream.close()
    assert all(chunk.choices for chunk in seen)
    assert api_server.last.json["stream_options"] == {"include_usage": True}
    assert client.session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
    assert client.session.entries[-1].usage is not None and client.session.entries[-1].usage["output_tokens"] > 0


def test_a_chat_stream_whose_caller_asks_for_usage_gets_the_usage_chunk(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("Hello there."))
    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert client.session.entries[-1].usage is not None


def test_an_async_chat_stream_left_at_its_finish_reason_is_recorded(api_server: ApiServer) -> None:
    async def run() -> None:
        client = wrap(api_server.openai_client(), policy=Policy(), summarizer="extractive")
        api_server.openai.push(message("Hello there."))
        stream = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True)
        seen: list[Any] = []
        async for chunk in stream:
            seen.append(chunk)
            if chunk.choices[0].finish_reason:
                break
        await stream.close()
        assert all(chunk.choices for chunk in seen)
        assert client.session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
        assert client.session.entries[-1].usage is not None
        await client.close()

    asyncio.run(run())


def test_chat_n_above_one_is_refused_before_anything_is_sent(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    with pytest.raises(ConfigError, match=r"n=3.*n=1"):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=3)
    assert api_server.requests == []
    api_server.openai.push(message("one"))
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=1)
    assert client.session.messages[-1]["role"] == "assistant"


def test_a_system_reminder_inside_a_chat_conversation_is_sent_where_it_was(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive", events=events.append)
    api_server.openai.push(message("a0"), message(tool_use_block("Bash", {"command": "ls"}, id="call_1")), message("a2"))
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "u0"}]
    messages.append(client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message)
    reminder = {"role": "developer", "content": [{"type": "text", "text": "Reminder: be brief."}]}
    messages += [reminder, {"role": "user", "content": "u1"}]
    messages.append(client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message)
    messages += [{"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}]
    client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    sent = api_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "developer", "user", "assistant", "tool"]
    assert sent[0]["content"] == SYSTEM and sent[3] == reminder
    assert [e.kind for e in events if e.kind in ("side_call_passed", "cache_params_changed")] == []
    assert len(client.session.entries) == 6


def test_new_responses_instructions_on_the_whole_conversation_continue_it(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive", events=events.append)
    api_server.responses.push(message("One."), message("Two."), message("Three."))
    items: list[Any] = [{"role": "user", "content": "u0"}]
    items += client.responses.create(model=MODEL, instructions="You are A.", input=items).output
    items.append({"role": "user", "content": "u1"})
    items += client.responses.create(model=MODEL, instructions="You are B.", input=items).output
    assert [e.kind for e in events if e.kind == "side_call_passed"] == ["side_call_passed"]  # a title request looks the same
    items.append({"role": "user", "content": "u2"})
    client.responses.create(model=MODEL, instructions="You are B.", input=items)
    assert [e.kind for e in events if e.kind == "side_call_passed"] == ["side_call_passed"]
    assert [getattr(e, "fields", None) for e in events if e.kind == "cache_params_changed"] == [("system",)]
    assert len(client.session.entries) == 6 and api_server.last.json["instructions"] == "You are B."


def test_a_chat_stream_helper_records_the_usage_without_handing_over_its_chunk(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
    api_server.openai.push(message("Hello there."))
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "Hi"}]) as stream:
        events = list(stream)
    assert api_server.last.json["stream_options"] == {"include_usage": True}
    assert all(event.chunk.choices for event in events if event.type == "chunk")
    assert client.session.entries[-1].usage is not None and client.session.entries[-1].usage["output_tokens"] > 0


@pytest.mark.parametrize("sync", [True, False])
def test_a_chat_stream_left_at_its_finish_is_recorded_while_the_server_keeps_the_connection(api_server: ApiServer, sync: bool) -> None:
    """Reading past the finish chunk ends at `[DONE]`, with the server still holding the
    connection open (it lets it go only once the test is done)."""
    import threading

    api_server.hold_streams = threading.Event()
    try:
        api_server.openai.push(message("Hello there."))
        prompt = [{"role": "user", "content": "Hi"}]
        if sync:
            client = wrap(api_server.openai_client(sync=True), policy=Policy(), summarizer="extractive")
            for chunk in client.chat.completions.create(model=MODEL, messages=prompt, stream=True):
                if chunk.choices[0].finish_reason:
                    break
        else:
            client = wrap(api_server.openai_client(), policy=Policy(), summarizer="extractive")

            async def run() -> None:
                async for chunk in await client.chat.completions.create(model=MODEL, messages=prompt, stream=True):
                    if chunk.choices[0].finish_reason:
                        break

            asyncio.run(run())
        assert client.session.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hello there."}]}
    finally:
        api_server.hold_streams.set()
