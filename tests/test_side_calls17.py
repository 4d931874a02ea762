"""Side calls over the conversation (session 17): an agent whose system prompt changes at every
call (the time in it), a title or judge request over a long conversation. Driven through the
real SDKs against the scripted local server, which refuses a request over its window."""

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
from unbounded.events import Event
from unbounded.integrations import wrap

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5.4"
WINDOW = 20_000
TURNS = 64
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def _result_text(n: int) -> str:
    """A tool result of 1 to 3 KB, different at every turn."""
    return f"file {n}: " + "lorem ipsum dolor sit amet " * (40 + (n * 37) % 80)


def _replies(api_server: ApiServer, queue: Any) -> None:
    """A reply to every request: a tool call, usage counting the request's size (the
    server's own estimate, bytes / 4)."""
    ids = itertools.count()

    def reply(request: RecordedRequest) -> Any:
        n = next(ids)
        size = len(request.body) // 4
        usage = {"input_tokens": size, "output_tokens": 30}
        call = tool_use_block("Read", {"path": f"f{n}"}, id=f"toolu_{n}")
        return message(f"reading f{n}", call, id=f"msg_{n}", usage=usage)

    queue.push(*[reply] * (3 * TURNS))


def _check_server(api_server: ApiServer, calls: int) -> None:
    """Every request the server received was valid and within its window (it refuses the
    others and counts them in `rejected`), one per call."""
    assert api_server.rejected == []
    assert len(api_server.requests) == calls
    assert all(len(r.body) // 4 <= WINDOW for r in api_server.requests)


def _check_session(client: Any, events: list[Event]) -> None:
    """The whole conversation recorded (every reply adopted but the last side call's), and
    compacted more than once."""
    session = client.session
    assistants = [e for e in session.entries if e.role == "assistant"]
    assert len(assistants) >= TURNS - 1
    assert client.status().compactions >= 2
    assert "side_call_passed" in [e.kind for e in events]


def test_an_anthropic_agent_with_the_time_in_its_system_stays_in_the_window(
    api_server: ApiServer,
) -> None:
    api_server.context_window = WINDOW
    _replies(api_server, api_server.anthropic)
    events: list[Event] = []
    client = wrap(
        api_server.anthropic_client(sync=True),
        context_window=WINDOW,
        summarizer="extractive",
        events=events.append,
    )
    tools = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(TURNS):
        reply = client.messages.create(
            model=CLAUDE,
            max_tokens=1000,
            system=f"You are an agent. It is {n} o'clock.",
            tools=tools,
            messages=messages,
        )
        call = next(b for b in reply.content if b.type == "tool_use")
        answer = {"type": "tool_result", "tool_use_id": call.id, "content": _result_text(n)}
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [answer]},
        ]
    _check_server(api_server, TURNS)
    _check_session(client, events)


def test_an_openai_chat_agent_with_the_time_in_its_system_stays_in_the_window(
    api_server: ApiServer,
) -> None:
    api_server.context_window = WINDOW
    _replies(api_server, api_server.openai)
    events: list[Event] = []
    client = wrap(
        api_server.openai_client(sync=True),
        context_window=WINDOW,
        summarizer="extractive",
        events=events.append,
    )
    tools = [
        {
            "type": "function",
            "function": {"name": "Read", "description": "read a file", "parameters": SCHEMA},
        }
    ]
    history: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(TURNS):
        system = {"role": "system", "content": f"You are an agent. It is {n} o'clock."}
        reply = client.chat.completions.create(
            model=GPT, max_completion_tokens=1000, tools=tools, messages=[system, *history]
        )
        said = reply.choices[0].message
        call = said.tool_calls[0]
        history += [
            said.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": _result_text(n)},
        ]
    _check_server(api_server, TURNS)
    _check_session(client, events)


def test_an_openai_responses_agent_with_the_time_in_its_instructions_stays_in_the_window(
    api_server: ApiServer,
) -> None:
    api_server.context_window = WINDOW
    _replies(api_server, api_server.responses)
    events: list[Event] = []
    client = wrap(
        api_server.openai_client(sync=True),
        context_window=WINDOW,
        summarizer="extractive",
        events=events.append,
    )
    tools = [{"type": "function", "name": "Read", "description": "read", "parameters": SCHEMA}]
    items: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(TURNS):
        reply = client.responses.create(
            model=GPT,
            max_output_tokens=1000,
            instructions=f"You are an agent. It is {n} o'clock.",
            tools=tools,
            input=items,
        )
        output = [item.model_dump(exclude_none=True) for item in reply.output]
        call = next(item for item in output if item["type"] == "function_call")
        items += [
            *output,
            {"type": "function_call_output", "call_id": call["call_id"], "output": _result_text(n)},
        ]
    _check_server(api_server, TURNS)
    _check_session(client, events)


def _long_conversation(api_server: ApiServer, client: Any) -> list[Any]:
    """A conversation that compacted, on one system prompt; returns the caller's whole list,
    ending with the last reply's tool call answered."""
    tools = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(TURNS):
        reply = client.messages.create(
            model=CLAUDE, max_tokens=1000, system="You are an agent.", tools=tools,
            messages=messages,
        )
        call = next(b for b in reply.content if b.type == "tool_use")
        answer = {"type": "tool_result", "tool_use_id": call.id, "content": _result_text(n)}
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [answer]},
        ]
    return messages


def test_a_title_request_over_a_long_conversation_is_sent_managed(api_server: ApiServer) -> None:
    """A title request (its own system, no tools) continuing a compacted conversation goes
    out as the session's view plus its own messages: it fits; nothing is recorded."""
    api_server.context_window = WINDOW
    _replies(api_server, api_server.anthropic)
    client = wrap(api_server.anthropic_client(sync=True), context_window=WINDOW,
                  summarizer="extractive")
    messages = _long_conversation(api_server, client)
    assert client.status().compactions >= 1
    entries = len(client.session.entries)
    last = messages[-1]["content"][0]
    title = [*messages[:-1], {"role": "user", "content": [
        {**last, "content": "(omitted)"}, {"type": "text", "text": "A title for this?"}]}]
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    api_server.anthropic.push(message("A title", id="msg_title"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=50, system="Write a title.", messages=title
    )
    assert reply.content[0].text == "A title"
    sent = api_server.requests[-1].json
    assert [b["text"] for b in sent["system"]] == ["Write a title."]  # its own, marked
    # its history holds tool calls: the conversation's tools declared, none to be called
    assert [t["name"] for t in sent["tools"]] == ["Read"]
    assert sent["tool_choice"] == {"type": "none"}
    assert len(api_server.requests[-1].body) // 4 <= WINDOW
    assert api_server.rejected == []
    assert sent["messages"][-1]["content"][-1]["text"] == "A title for this?"
    assert len(sent["messages"]) < len(title)  # the compacted view, not the caller's list
    assert len(client.session.entries) == entries


def test_an_openai_side_call_keeps_its_cache_key_to_itself(api_server: ApiServer) -> None:
    """A side call's own `prompt_cache_key` goes with it, and does not become the session's
    (the next turn sends the session's key); a managed side call without one sends none."""
    client = wrap(api_server.openai_client(sync=True), summarizer="extractive")
    api_server.openai.push(message("a0"), message("a title"), message("a1"), message("t2"))
    history: list[Any] = [{"role": "user", "content": "hi"}]
    system = {"role": "system", "content": "You help."}
    reply = client.chat.completions.create(model=GPT, messages=[system, *history])
    session_key = api_server.last.json["prompt_cache_key"]
    history += [reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": "more"}]
    title = {"role": "system", "content": "Write a title."}
    client.chat.completions.create(
        model=GPT, messages=[title, *history], prompt_cache_key="titles"
    )
    assert api_server.last.json["prompt_cache_key"] == "titles"
    assert len(api_server.last.json["messages"]) == 4  # managed: its system, the view, its own
    client.chat.completions.create(model=GPT, messages=[system, *history])
    assert api_server.last.json["prompt_cache_key"] == session_key
    client.chat.completions.create(model=GPT, messages=[title, *history])
    assert "prompt_cache_key" not in api_server.last.json


def test_a_streamed_side_call_over_the_conversation_is_managed(api_server: ApiServer) -> None:
    """`messages.stream(...)` of a side call continuing the conversation goes over the view
    too, its reply not recorded."""
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive")
    api_server.anthropic.push(message("a0", id="msg_0"), message("judged", id="msg_j"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    messages += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": "Was that right?"}]
    with client.messages.stream(
        model=CLAUDE, max_tokens=30, system="You judge.", messages=messages
    ) as stream:
        assert stream.get_final_text() == "judged"
    sent = api_server.last.json
    assert [b["text"] for b in sent["system"]] == ["You judge."]
    assert "cache_control" in json.dumps(sent["messages"])  # the session's markers
    assert len(client.session.entries) == 2


def _is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json.get("messages") or request.json.get("input"))


def _summary_requests(api_server: ApiServer, kind: str, headers: dict[str, str]) -> list[Any]:
    """The summary requests of a conversation whose every turn sends `headers`."""
    from summaries import nine_section_summary

    def reply(request: RecordedRequest) -> Any:
        size = len(request.body) // 4
        usage = {"input_tokens": size, "output_tokens": 40}
        if _is_summary_request(request):
            return message(nine_section_summary("t"), id="msg_s", usage=usage)
        return message("ok", id="msg_t", usage=usage)

    queue = api_server.anthropic if kind == "anthropic" else api_server.openai
    queue.push(*[reply] * 40)
    sdk = api_server.anthropic_client(sync=True) if kind == "anthropic" else (
        api_server.openai_client(sync=True)
    )
    client = wrap(sdk, context_window=40_000)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(20):
        if kind == "anthropic":
            said: Any = client.messages.create(
                model=CLAUDE, max_tokens=1000, messages=messages, extra_headers=headers
            ).content
        else:
            said = client.chat.completions.create(
                model=GPT, max_completion_tokens=1000, messages=messages, extra_headers=headers
            ).choices[0].message.content
        messages += [
            {"role": "assistant", "content": said},
            {"role": "user", "content": f"u{n + 1} " + "word " * 1500},
        ]
        if client.status().compactions:
            break
    while len(queue):
        queue.pop()
    summaries = [r for r in api_server.requests if _is_summary_request(r)]
    assert summaries
    return summaries


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_the_summary_requests_carry_the_callers_headers(api_server: ApiServer, kind: str) -> None:
    """The caller's `extra_headers` (a proxy's auth or routing header) go on the compaction's
    summary requests too; an idempotency key, naming one request, does not."""
    headers = {"Helicone-Auth": "Bearer proxy-key", "Idempotency-Key": "once"}
    summaries = _summary_requests(api_server, kind, headers)
    assert all(r.headers.get("helicone-auth") == "Bearer proxy-key" for r in summaries)
    assert all(r.headers.get("idempotency-key") != "once" for r in summaries)


TRACE_HEADERS = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "congo=t61rcWkgMzE",
    "baggage": "userId=alice",
    "sentry-trace": "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
    "X-Request-Id": "req-caller-1",
    "X-Amzn-Trace-Id": "Root=1-5759e988-bd862e3fe1be46a994272793",
    "X-Client-Request-Id": "client-req-1",
    "b3": "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1",
}


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_the_summary_requests_do_not_repeat_the_callers_trace_headers(
    api_server: ApiServer, kind: str
) -> None:
    """A summary is a request of its own: the per-request trace and request-id headers of
    the caller's turn are not sent with it (a tracer would join it to the turn's span, a
    gateway would take it for the turn's retry); the routing ones still are."""
    headers = {**TRACE_HEADERS, "Helicone-Auth": "Bearer proxy-key"}
    summaries = _summary_requests(api_server, kind, headers)
    for request in summaries:
        assert request.headers.get("helicone-auth") == "Bearer proxy-key"
        for name, value in TRACE_HEADERS.items():
            assert request.headers.get(name.lower()) != value, name


def test_a_streamed_managed_chat_side_call_gets_no_usage_chunk(api_server: ApiServer) -> None:
    """The usage chunk a turn asks for (for the record) is not asked for a side call: its
    stream is the caller's as it asked for it."""
    client = wrap(api_server.openai_client(sync=True), summarizer="extractive")
    api_server.openai.push(message("a0"), message("a title"))
    history: list[Any] = [{"role": "user", "content": "hi"}]
    reply = client.chat.completions.create(
        model=GPT, messages=[{"role": "system", "content": "You help."}, *history]
    )
    history += [reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": "Title?"}]
    stream = client.chat.completions.create(
        model=GPT, stream=True,
        messages=[{"role": "system", "content": "Write a title."}, *history],
    )
    chunks = list(stream)
    sent = api_server.last.json
    assert len(sent["messages"]) == 4 and sent["stream"] is True
    assert "stream_options" not in sent
    assert all(chunk.choices for chunk in chunks)


def test_a_regenerate_under_a_new_system_is_sent_without_the_last_reply(
    api_server: ApiServer,
) -> None:
    """A side call asking again for the last reply (the conversation minus that reply) goes
    over the view without it; nothing is recorded."""
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive")
    api_server.anthropic.push(message("a0", id="msg_0"), message("a1", id="msg_1"),
                              message("again", id="msg_2"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    messages += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": "more"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    client.messages.create(model=CLAUDE, max_tokens=100, system="B", messages=messages)
    sent = api_server.last.json
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert [b["text"] for b in sent["system"]] == ["B"]
    assert len(client.session.entries) == 4


def _cleared_conversation(api_server: ApiServer, **options: Any) -> tuple[Any, list[Any]]:
    """A conversation on the Read tool run until microcompaction cleared results (at the
    warning level); returns the client and the caller's list, its last tool call answered."""
    from unbounded.policy import Policy

    _replies(api_server, api_server.anthropic)
    policy = Policy(
        microcompact_keep_recent=1,
        microcompact_protect_recent_tokens=500,
        microcompact_min_savings=100,
        compact_instead_of_clearing=False,
        **options,
    )
    api_server.context_window = WINDOW
    client = wrap(
        api_server.anthropic_client(sync=True),
        summarizer="extractive",
        policy=policy,
        context_window=WINDOW,
    )
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(TURNS):
        if n and client.session.micro.cleared:
            break  # at the warning level: results cleared
        reply = client.messages.create(
            model=CLAUDE, max_tokens=1000, system="A", tools=READ, messages=messages
        )
        call = next(b for b in reply.content if b.type == "tool_use" and b.name == "Read")
        answer = {"type": "tool_result", "tool_use_id": call.id, "content": _result_text(n)}
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [answer]},
        ]
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    return client, messages


READ = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]


def _tool_results(messages: list[Any]) -> dict[str, Any]:
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def test_a_managed_side_call_sends_the_cleared_results_cleared(api_server: ApiServer) -> None:
    """Tool results microcompaction cleared are sent cleared in a side call too, as the
    session's next request would send them."""
    client, messages = _cleared_conversation(api_server, recall_enabled=False)
    cleared = set(client.session.micro.cleared)
    assert cleared
    api_server.anthropic.push(message("judged", id="msg_j"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="B", tools=READ, messages=messages)
    results = _tool_results(api_server.last.json["messages"])
    assert cleared <= set(results)
    assert all("lorem ipsum" not in json.dumps(results[tool_id]) for tool_id in cleared)


def test_a_managed_side_call_answers_the_waiting_recall_call(api_server: ApiServer) -> None:
    """A recall call the caller saw beside its own and left unanswered is answered by the
    session in a side call's request too, as in a turn's (the API refuses a call without
    its result)."""
    client, messages = _cleared_conversation(api_server)
    assert client.session.offers_recall
    recall = tool_use_block("recall", {"handle": "none"}, id="toolu_recall")
    read = tool_use_block("Read", {"path": "x"}, id="toolu_read")
    api_server.anthropic.push(message(recall, read, id="msg_both"), message("judged", id="msg_j"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=1000, system="A", tools=READ, messages=messages
    )
    answer = {"type": "tool_result", "tool_use_id": "toolu_read", "content": "x"}
    messages += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": [answer]}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="B", tools=READ, messages=messages)
    assert api_server.rejected == []
    sent = api_server.last.json
    # with the side call's own tools, the recall call and its answer go as text and recall
    # is not declared: the model cannot hand the caller a recall call
    assert "toolu_recall" not in _tool_results(sent["messages"])
    assert "[recall result]" in json.dumps(sent["messages"])
    assert [t["name"] for t in sent["tools"]] == ["Read"]
    assert "tool_choice" not in sent
    # a side call without tools: recall declared, and no tool to be called
    api_server.anthropic.push(message("a title", id="msg_t"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="T", messages=messages)
    sent = api_server.last.json
    assert [t["name"] for t in sent["tools"]] == ["Read", "recall"]
    assert sent["tool_choice"] == {"type": "none"}
    assert "toolu_recall" in _tool_results(sent["messages"])


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_huge_system_message_inside_the_conversation_is_cut(
    api_server: ApiServer, api: str
) -> None:
    """A system message inside an OpenAI conversation over `tool_result_max_tokens` is cut to
    head and tail like a user message's text (the whole text saved); the caller's next call,
    sending it whole again, still continues the conversation."""
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), summarizer="extractive",
                  events=events.append)
    queue = api_server.openai if api == "chat" else api_server.responses
    queue.push(message("a0"), message("a1"), message("a2"))
    huge = "remember this. " * 40_000  # ~150K tokens: over the 25K cap

    def call(items: list[Any]) -> Any:
        if api == "chat":
            reply = client.chat.completions.create(model=GPT, messages=items)
            return [reply.choices[0].message.model_dump(exclude_none=True)]
        reply = client.responses.create(model=GPT, input=items)
        return [item.model_dump(exclude_none=True) for item in reply.output]

    items: list[Any] = [{"role": "user", "content": "hi"}]
    items += call(items)
    items += [{"role": "system", "content": huge}, {"role": "user", "content": "go on"}]
    items += call(items)
    sent = api_server.last.body
    assert len(sent) < len(huge) // 2
    assert [e.kind for e in events].count("tool_output_capped") == 1
    items += [{"role": "user", "content": "and?"}]
    call(items)
    assert [e.kind for e in events if e.kind == "side_call_passed"] == []
    assert len([e for e in client.session.entries if e.role == "assistant"]) == 3


def test_async_clients_send_a_continuing_side_call_managed(api_server: ApiServer) -> None:
    """The async drop-ins (`messages.create`, `messages.stream`, `chat.completions.create`)
    send a side call over the conversation managed too."""
    import asyncio

    async def main() -> None:
        claude = wrap(api_server.anthropic_client(), summarizer="extractive")
        api_server.anthropic.push(message("a0", id="msg_0"), message("t", id="msg_t"),
                                  message("s", id="msg_s"))
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        reply = await claude.messages.create(
            model=CLAUDE, max_tokens=100, system="A", messages=messages
        )
        messages += [{"role": "assistant", "content": reply.content},
                     {"role": "user", "content": "Title?"}]
        await claude.messages.create(model=CLAUDE, max_tokens=10, system="T", messages=messages)
        assert [b["text"] for b in api_server.last.json["system"]] == ["T"]  # marked: managed
        async with claude.messages.stream(
            model=CLAUDE, max_tokens=10, system="S", messages=messages
        ) as stream:
            await stream.get_final_text()
        assert [b["text"] for b in api_server.last.json["system"]] == ["S"]
        assert len(claude.session.entries) == 2

        gpt = wrap(api_server.openai_client(), summarizer="extractive")
        api_server.openai.push(message("a0"), message("t"))
        history: list[Any] = [{"role": "user", "content": "hi"}]
        said = await gpt.chat.completions.create(
            model=GPT, messages=[{"role": "system", "content": "A"}, *history],
            prompt_cache_key="mine",
        )
        history += [said.choices[0].message.model_dump(exclude_none=True),
                    {"role": "user", "content": "Title?"}]
        await gpt.chat.completions.create(
            model=GPT, messages=[{"role": "system", "content": "T"}, *history]
        )
        assert "prompt_cache_key" not in api_server.last.json  # managed: no key of its own
        assert len(api_server.last.json["messages"]) == 4

    asyncio.run(main())
