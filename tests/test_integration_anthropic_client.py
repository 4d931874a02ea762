"""The Anthropic client drop-in, through the real SDK against the scripted local server.

The caller's code is the SDK's usual loop; what the server receives is the session's prepared
request (cache breakpoints, compacted history), and what the caller gets back is the SDK's own
object.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    prompt_too_long,
    server_error,
    thinking_block,
    tool_use_block,
)
from unbounded.errors import ConfigError
from unbounded.events import CacheParamsChanged, Event
from unbounded.integrations import wrap
from unbounded.integrations._anthropic_prints import message_print, new_messages
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore

anthropic = pytest.importorskip("anthropic")

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."
TOOLS = [
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
]
SUMMARY = nine_section_summary("fix the parser")


def kwargs(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS, "messages": messages, **extra}


def markers(request: RecordedRequest) -> list[str]:
    """Where the request carries cache_control markers."""
    body = request.json
    found = []
    if any("cache_control" in t for t in body.get("tools", [])):
        found.append("tools")
    system = body.get("system")
    if isinstance(system, list) and any("cache_control" in b for b in system):
        found.append("system")
    for sent in body["messages"]:
        if isinstance(sent["content"], list) and any("cache_control" in b for b in sent["content"]):
            found.append("messages")
    return found


def is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json["messages"][-1])


def test_full_list_calls_send_the_prepared_request_and_return_the_sdk_message(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(
        message(tool_use_block("Read", {"path": "parser.py"}, id="toolu_1"), id="msg_1"),
        message("The parser is fixed.", id="msg_2"),
    )
    messages: list[Any] = [{"role": "user", "content": "Fix the parser."}]
    reply = client.messages.create(**kwargs(messages))
    assert isinstance(reply, anthropic.types.Message) and reply.id == "msg_1"
    messages.append({"role": "assistant", "content": reply.content})  # the SDK objects, as usual
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def parse(): ..."}]})
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "The parser is fixed."

    first, second = api_server.requests
    assert markers(first) == ["tools", "system", "messages"]
    assert markers(second) == ["tools", "system", "messages"]
    assert second.json["messages"][-1]["content"][-1]["cache_control"]["type"] == "ephemeral"
    assert [m["role"] for m in second.json["messages"]] == ["user", "assistant", "user"]
    assert second.json["messages"][1]["content"][0]["id"] == "toolu_1"
    session = client.session
    assert [e.type for e in session.entries] == ["user", "assistant", "user", "assistant"]
    assert session.status().reported_tokens > 0  # the usage anchors the count
    assert client.status().tokens == session.status().tokens


def test_new_only_calls_send_the_same_requests(api_server: ApiServer) -> None:
    def conversation(client: Any, full: bool) -> None:
        history: list[Any] = []
        turns = [
            {"role": "user", "content": "Fix the parser."},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def parse(): ..."}]},
            {"role": "user", "content": "Thanks, now run the tests."},
        ]
        for turn in turns:
            history.append(turn)
            reply = client.messages.create(**kwargs(history if full else [turn]))
            history.append({"role": "assistant", "content": reply.content})

    for full in (True, False):
        api_server.anthropic.push(
            message(tool_use_block("Read", {"path": "parser.py"}, id="toolu_1"), id="msg_1"),
            message("Fixed.", id="msg_2"),
            message("Tests pass.", id="msg_3"),
        )
        conversation(wrap(api_server.anthropic_client(sync=True), policy=Policy()), full)
    full_requests, new_requests = api_server.requests[:3], api_server.requests[3:]
    for a, b in zip(full_requests, new_requests, strict=True):
        assert a.json == b.json
    assert len(new_requests[-1].json["messages"]) == 5


def test_an_echo_without_thinking_and_a_sliding_window_are_recognized(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(
        message(thinking_block("let me think"), "First answer.", id="msg_1"),
        message("Second answer.", id="msg_2"),
        message("Third answer.", id="msg_3"),
    )
    u1 = {"role": "user", "content": "one"}
    first = client.messages.create(**kwargs([u1]))
    echo = {"role": "assistant", "content": [b for b in first.content if b.type == "text"]}  # thinking dropped
    u2 = {"role": "user", "content": "two"}
    second = client.messages.create(**kwargs([u1, echo, u2]))
    a2 = {"role": "assistant", "content": second.content[0].text}  # a plain string echo
    u3 = {"role": "user", "content": "three"}
    client.messages.create(**kwargs([a2, u3]))  # a window: the last reply and the new prompt
    texts = [json.dumps(m["content"]) for m in api_server.last.json["messages"]]
    assert len(texts) == 5 and sum("one" in t for t in texts) == 1
    assert "thinking" in texts[1]  # the session keeps the reply as the API gave it


def test_a_retry_after_an_error_does_not_repeat_the_message(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(server_error(500), message("ok", id="msg_1"))
    messages = [{"role": "user", "content": "hello"}]
    with pytest.raises(anthropic.InternalServerError):  # the SDK's own exception, unchanged
        client.messages.create(**kwargs(messages))
    client.messages.create(**kwargs(messages))
    assert api_server.last.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}
    ]


def test_prompt_too_long_is_compacted_and_retried_once(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive", policy=Policy(), events=events.append)
    api_server.anthropic.push(message(tool_use_block("Bash", {"command": "pytest"}, id="toolu_1"), id="msg_1"))
    messages: list[Any] = [{"role": "user", "content": "Run the tests."}]
    reply = client.messages.create(**kwargs(messages))
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 failed\n" * 200}]},
    ]
    api_server.anthropic.push(prompt_too_long(210_000, 200_000), message("Recovered.", id="msg_2"))
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "Recovered."
    assert client.status().compactions == 1
    refused, retried = api_server.requests[1:]
    assert "Run the tests." in json.dumps(retried.json["messages"][0])  # inside the summary
    assert "This session continues" in json.dumps(retried.json["messages"][0])
    assert retried.json["messages"][1:] == refused.json["messages"][1:]  # the tool round, verbatim
    assert any(e.kind == "reactive_compaction" for e in events)
    assert all(type(e).__module__ == "unbounded.events" for e in events)  # typed, one home

    # A second refusal after the compaction reaches the caller as the SDK's exception.
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "More."}]
    api_server.anthropic.push(prompt_too_long(), prompt_too_long())
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        client.messages.create(**kwargs(messages))


def test_a_given_session_without_a_summarizer_still_compacts_offline(api_server: ApiServer) -> None:
    """The drop-in names its client as where the requests go, not as the summaries' model:
    a session built without a summarizer keeps compacting offline (no paid summary call)."""
    session = Session(SessionConfig(model=MODEL, system=SYSTEM), policy=Policy())
    client = wrap(api_server.anthropic_client(sync=True), session)
    api_server.anthropic.push(message(tool_use_block("Bash", {"command": "pytest"}, id="toolu_1"), id="msg_1"))
    messages: list[Any] = [{"role": "user", "content": "Run the tests."}]
    reply = client.messages.create(**kwargs(messages))
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 failed\n" * 200}]},
    ]
    api_server.anthropic.push(prompt_too_long(210_000, 200_000), message("Recovered.", id="msg_2"))
    assert client.messages.create(**kwargs(messages)).content[0].text == "Recovered."
    assert session.status().compactions == 1 and session.model_provider() is None
    assert [is_summary_request(r) for r in api_server.requests] == [False, False, False]
    assert "This session continues" in json.dumps(api_server.last.json["messages"][0])  # the hand-over


def test_a_long_conversation_compacts_transparently(api_server: ApiServer) -> None:
    """The caller keeps sending its ever-growing list; the server sees a compacted one."""
    turn = {"n": 0}

    def reply(request: RecordedRequest) -> Any:
        if is_summary_request(request):
            return message(SUMMARY, id="msg_summary")
        turn["n"] += 1
        n = turn["n"]
        return message(
            tool_use_block("Bash", {"command": f"make step{n}"}, id=f"toolu_{n}"),
            id=f"msg_{n}",
            usage={"input_tokens": 2_000, "cache_read_input_tokens": 4_000 * n, "output_tokens": 50},
        )

    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, context_window=40_000, policy=Policy())
    threshold = client.session.thresholds.autocompact
    messages: list[Any] = [{"role": "user", "content": "Build every step."}]
    for _ in range(12):
        api_server.anthropic.push(reply, reply)  # a main reply, or a summary then a main reply
        result = client.messages.create(**kwargs(messages))
        messages.append({"role": "assistant", "content": result.content})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": result.content[0].id, "content": "ok\n" * 400}]})
    # leftover scripted replies were never requested
    assert client.status().compactions >= 1
    summary_requests = [r for r in api_server.requests if is_summary_request(r)]
    assert summary_requests and summary_requests[0].json["model"] == MODEL  # the client and the model
    main = [r for r in api_server.requests if not is_summary_request(r)]
    assert "fix the parser" in json.dumps(main[-1].json["messages"][0])  # starts with the summary
    assert len(main[-1].json["messages"]) < len(messages) and len(main[-1].body) // 4 < threshold
    while len(api_server.anthropic):
        api_server.anthropic.pop()


def test_the_streaming_helper_returns_the_sdk_stream_and_records_the_reply(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message("Streamed hello.", id="msg_1"), message("And again.", id="msg_2"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    with client.messages.stream(**kwargs(messages)) as stream:
        assert "".join(stream.text_stream) == "Streamed hello."
        final = stream.get_final_message()
    assert api_server.requests[0].stream and markers(api_server.requests[0]) == ["tools", "system", "messages"]
    assert client.session.entries[-1].type == "assistant"
    messages += [{"role": "assistant", "content": final.content}, {"role": "user", "content": "again"}]
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "And again." and len(api_server.last.json["messages"]) == 3


def test_create_with_stream_true_records_once_read(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message(tool_use_block("Read", {"path": "a.py"}, id="toolu_1"), id="msg_1"))
    events = list(client.messages.create(**kwargs([{"role": "user", "content": "read a.py"}]), stream=True))
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    last = client.session.entries[-1]
    assert last.type == "assistant" and last.content[0]["input"] == {"path": "a.py"}


def test_async_client_create_and_stream(api_server: ApiServer) -> None:
    async def main() -> None:
        client = wrap(api_server.anthropic_client(), policy=Policy(), summarizer="extractive")
        api_server.anthropic.push(
            message(tool_use_block("Read", {"path": "a.py"}, id="toolu_1"), id="msg_1"),
            prompt_too_long(),
            message("Done.", id="msg_2"),
        )
        messages: list[Any] = [{"role": "user", "content": "read a.py"}]
        reply = await client.messages.create(**kwargs(messages))
        assert isinstance(reply, anthropic.types.Message)
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}]},
        ]
        async with client.messages.stream(**kwargs(messages)) as stream:
            final = await stream.get_final_message()
        assert final.content[0].text == "Done."
        assert client.status().compactions == 1  # the streamed call was refused, compacted, retried
        assert client.session.entries[-1].type == "assistant"

    asyncio.run(main())


def test_async_client_summarizes_with_the_same_client(api_server: ApiServer) -> None:
    async def main() -> None:
        client = wrap(api_server.anthropic_client(), model=MODEL, context_window=40_000, policy=Policy())
        api_server.anthropic.push(
            message("Noted.", id="msg_1", usage={"input_tokens": 30_000}),  # over the threshold
            message(SUMMARY, id="msg_summary"),
            message("Continuing.", id="msg_2"),
        )
        messages: list[Any] = [{"role": "user", "content": "Remember the plan."}]
        reply = await client.messages.create(**kwargs(messages))
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Go on."}]
        reply = await client.messages.create(**kwargs(messages))
        assert reply.content[0].text == "Continuing." and client.status().compactions == 1
        await client.close()

    asyncio.run(main())
    _, fork, main_call = api_server.requests
    assert is_summary_request(fork) and fork.stream and fork.json["system"] == main_call.json["system"]
    assert "fix the parser" in json.dumps(main_call.json["messages"][0])


def test_the_sync_client_works_inside_a_running_event_loop(api_server: ApiServer) -> None:
    """A notebook runs an event loop; the blocking wrapper still works there."""
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message("From a notebook.", id="msg_1"))

    async def notebook_cell() -> str:
        reply = client.messages.create(**kwargs([{"role": "user", "content": "hi"}]))
        return str(reply.content[0].text)

    assert asyncio.run(notebook_cell()) == "From a notebook."


def test_changing_cache_safe_parameters_warns(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy(), events=events.append)
    api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
    messages: list[Any] = [{"role": "user", "content": "first"}]
    reply = client.messages.create(**kwargs(messages, temperature=0.2))
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "second"}]
    client.messages.create(**kwargs(messages, tools=TOOLS[:1], temperature=0.7))
    changes = [e for e in events if isinstance(e, CacheParamsChanged)]
    assert [c.fields for c in changes] == [("tools",)]
    assert client.session.config.tools == TOOLS[:1]
    assert api_server.last.json["temperature"] == 0.7  # passed through, not cache-keyed


def test_a_rewritten_history_is_refused(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message("one", id="msg_1"))
    reply = client.messages.create(**kwargs([{"role": "user", "content": "first"}]))
    edited = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "something else entirely"},
        {"role": "user", "content": "next"},
    ]
    with pytest.raises(ConfigError, match=r"messages\[1\] differs"):
        client.messages.create(**kwargs(edited))
    with pytest.raises(ConfigError, match="must end with a user message"):
        client.messages.create(**kwargs([{"role": "user", "content": "first"}, {"role": "assistant", "content": reply.content}]))


def test_a_folder_session_resumes_without_duplicates(api_server: ApiServer, tmp_path: Path) -> None:
    folder = tmp_path / "session-1"
    api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
    client = wrap(api_server.anthropic_client(sync=True), session_folder=folder, policy=Policy())
    messages: list[Any] = [{"role": "user", "content": "first"}]
    reply = client.messages.create(**kwargs(messages))
    assert isinstance(client.session.store, FolderStore)
    client.close()  # releases the folder's lock (and the SDK client)

    with wrap(api_server.anthropic_client(sync=True), session_folder=folder, policy=Policy()) as again:
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "second"}]
        again.messages.create(**kwargs(messages))
        assert [m["role"] for m in api_server.last.json["messages"]] == ["user", "assistant", "user"]
        assert len(again.session.entries) == 4
    FolderStore(folder).close()  # the lock was released again


def test_a_given_session_and_misuse(api_server: ApiServer) -> None:
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    client = wrap(api_server.anthropic_client(sync=True), session)
    assert client.session is session
    assert client.models is client.client.models  # everything else is the SDK's
    with pytest.raises(ConfigError, match=r"anthropic\.Anthropic, anthropic\.AsyncAnthropic, openai\.OpenAI or openai\.AsyncOpenAI"):
        wrap(object())  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match="not both"):
        wrap(api_server.anthropic_client(sync=True), session, session_folder="x")
    with pytest.raises(ConfigError, match="opens at the first"):
        _ = wrap(api_server.anthropic_client(sync=True)).session
    with pytest.raises(ConfigError, match="history must be"):
        wrap(api_server.anthropic_client(sync=True), history="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs messages"):
        client.messages.create(model=MODEL, max_tokens=10)
    with pytest.raises(ConfigError, match="needs model"):
        client.messages.create(max_tokens=10, messages=[{"role": "user", "content": "x"}])


def test_new_messages_detection() -> None:
    u1, a1 = message_print("user", "one"), message_print("assistant", [{"type": "text", "text": "A"}])
    known = [u1, a1]
    same = [{"role": "user", "content": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}}]}]

    def relation(messages: list[dict[str, Any]], mode: Any = "auto") -> tuple[int, str]:
        found = new_messages(messages, known, mode)
        return found.start, found.relation

    assert relation([*same, {"role": "assistant", "content": "A"}, {"role": "user", "content": "two"}]) == (2, "continues")
    assert relation([{"role": "user", "content": "two"}]) == (0, "unrelated")  # new-only, or a side call
    assert relation([{"role": "assistant", "content": "A"}, {"role": "user", "content": "two"}]) == (1, "window")
    assert relation(same) == (1, "retry")  # the conversation minus its last reply
    assert relation([{"role": "user", "content": "one"}], "new") == (0, "new")
    assert relation([{"role": "user", "content": "zero"}], "full") == (0, "unrelated")
    with pytest.raises(ConfigError, match=r"messages\[1\] differs"):
        new_messages([*same, {"role": "assistant", "content": "B"}], known, "full")
    with pytest.raises(ConfigError):
        new_messages([{"role": "user", "content": "bad role"}, {"role": "system", "content": "x"}], known)


# --------------------------------------------------------------------------- calls users make next


def tool_round(messages: list[Any], reply: Any, tool_id: str, output: str = "ok") -> None:
    messages.append({"role": "assistant", "content": reply.content})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]})


def test_a_side_call_goes_out_as_given_and_the_conversation_goes_on(api_server: ApiServer) -> None:
    """A title request in the middle of a tool loop: one message out, nothing recorded."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy(), events=events.append)
    api_server.anthropic.push(
        message(tool_use_block("Read", {"path": "parser.py"}, id="toolu_1"), id="msg_1"),
        message("Parser fix", id="msg_title"),
        message("Parser refactor", id="msg_title_2"),
        message("Fixed.", id="msg_2"),
        message("Still parser work", id="msg_title_3"),
    )
    messages: list[Any] = [{"role": "user", "content": "Fix the parser."}]
    reply = client.messages.create(**kwargs(messages))
    # Right after a tool_use reply: a title with its own system prompt and no tools...
    title = client.messages.create(model=MODEL, max_tokens=20, system="You write titles.",
                                   messages=[{"role": "user", "content": "Title for: fix the parser"}])
    assert title.content[0].text == "Parser fix"
    assert api_server.last.json["messages"] == [{"role": "user", "content": "Title for: fix the parser"}]
    assert "tools" not in api_server.last.json and api_server.last.json["max_tokens"] == 20
    # ...and one with the conversation's own parameters: still not a continuation.
    client.messages.create(**kwargs([{"role": "user", "content": "A better title?"}]))
    assert len(api_server.last.json["messages"]) == 1
    tool_round(messages, reply, "toolu_1")
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "Fixed." and len(api_server.last.json["messages"]) == 3
    # After a text reply, a title over the whole history is a side call too (other system),
    # sent over the session's view (its cache markers placed), with its own parameters.
    messages.append({"role": "assistant", "content": reply.content})
    client.messages.create(model=MODEL, max_tokens=20, system="You write titles.",
                           messages=[*messages, {"role": "user", "content": "Title?"}])
    sent = api_server.last.json
    assert len(sent["messages"]) == 5 and sent["max_tokens"] == 20
    # its history holds tool calls: the conversation's tools declared (the API refuses tool
    # blocks without), none to be called
    assert [t["name"] for t in sent["tools"]] == ["Read", "Bash"] and sent["tool_choice"] == {"type": "none"}
    assert [b["text"] for b in sent["system"]] == ["You write titles."]
    assert "cache_control" in json.dumps(sent["messages"])  # managed: the session's markers
    assert [e.type for e in client.session.entries] == ["user", "assistant", "user", "assistant"]
    passed = [e for e in events if e.kind == "side_call_passed"]
    assert [p.reason for p in passed] == [  # type: ignore[attr-defined]
        "a different system prompt",
        "it leaves the tool calls of the last reply unanswered",
        "a different system prompt",
    ]


def test_a_side_call_first_after_the_opening_call(api_server: ApiServer) -> None:
    """Before the caller's style is known, a one-message call is a side call when it would
    leave a tool call unanswered or has other tools."""
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(
        message(tool_use_block("Read", {"path": "a.py"}, id="toolu_1"), id="msg_1"),
        message("Reading a file", id="msg_title"),
        message("Read it.", id="msg_2"),
    )
    reply = client.messages.create(**kwargs([{"role": "user", "content": "Read a.py."}]))
    client.messages.create(**kwargs([{"role": "user", "content": "Title?"}]))  # same parameters
    assert len(api_server.last.json["messages"]) == 1
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}]}
    client.messages.create(**kwargs([results]))  # new-only: the results continue it
    assert len(api_server.last.json["messages"]) == 3
    assert reply.content[0].id == api_server.last.json["messages"][1]["content"][0]["id"]


def test_asking_again_with_the_same_list_regenerates_the_reply(api_server: ApiServer, tmp_path: Path) -> None:
    events: list[Event] = []
    folder = tmp_path / "s"
    client = wrap(api_server.anthropic_client(sync=True), session_folder=folder, policy=Policy(), events=events.append)
    api_server.anthropic.push(
        message("First try.", id="msg_1"),
        message("Second try.", id="msg_2"),
        message(tool_use_block("Read", {"path": "a.py"}, id="toolu_1"), id="msg_3"),
        message(tool_use_block("Read", {"path": "b.py"}, id="toolu_2"), id="msg_4"),
        message("Done.", id="msg_5"),
    )
    messages: list[Any] = [{"role": "user", "content": "hello"}]
    client.messages.create(**kwargs(messages))
    again = client.messages.create(**kwargs(messages))  # regenerate: the same one-message list
    assert again.content[0].text == "Second try."
    assert len(api_server.last.json["messages"]) == 1
    messages += [{"role": "assistant", "content": again.content}, {"role": "user", "content": "Read a file."}]
    client.messages.create(**kwargs(messages))
    retried = client.messages.create(**kwargs(messages))  # a retry of a longer list
    assert [m["role"] for m in api_server.last.json["messages"]] == ["user", "assistant", "user"]
    assert "Second try." in json.dumps(api_server.last.json["messages"][1])
    tool_round(messages, retried, "toolu_2")
    client.messages.create(**kwargs(messages))
    sent = json.dumps(api_server.last.json["messages"])
    assert "First try." not in sent and "toolu_1" not in sent and len(api_server.last.json["messages"]) == 5
    assert sum(e.kind == "last_reply_discarded" for e in events) == 2
    client.close()
    # The discarded replies stay in the file on abandoned branches; reopening leaves them out.
    with wrap(api_server.anthropic_client(sync=True), session_folder=folder, model=MODEL, policy=Policy()) as reopened:
        texts = json.dumps(reopened.session.messages)
        assert "First try." not in texts and "toolu_1" not in texts and "Done." in texts


def test_the_callers_cache_settings_are_kept(api_server: ApiServer) -> None:
    """A system block marked for an hour stays so; the markers before it follow (the API
    refuses a 1h marker after a 5m one), ours after it keep the session's TTL, and the
    request never carries more than 4 markers (the server checks both)."""
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    hour = {"type": "ephemeral", "ttl": "1h"}
    system = [
        {"type": "text", "text": "Shared rules.", "cache_control": hour},
        {"type": "text", "text": "Project notes."},
    ]
    api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
    messages: list[Any] = [{"role": "user", "content": "first"}]
    reply = client.messages.create(**kwargs(messages, system=system))
    sent = api_server.last.json
    assert sent["system"][0]["cache_control"] == hour
    assert "cache_control" not in sent["system"][1]
    assert sent["tools"][-1]["cache_control"] == hour
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # Five marked system blocks and a 1h marker on the caller's message: at most 4 markers
    # go out, and the message marker takes the caller's TTL.
    many = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    other = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    other.messages.create(**kwargs([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": hour}]}], system=many))
    sent = api_server.last.json
    assert sent["messages"][-1]["content"][-1]["cache_control"] == hour
    assert all(b.get("cache_control", hour) == hour for b in sent["system"])  # raised: before a 1h one
    assert sum("cache_control" in b for b in sent["system"]) == 3 and "cache_control" not in sent["tools"][-1]
    assert reply.content[0].text == "one"


def test_with_options_and_raw_responses_stay_in_the_session(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy())
    api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
    quick = client.with_options(timeout=30, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "first"}]
    reply = quick.messages.create(**kwargs(messages))
    assert quick.session is client.session and len(client.session.entries) == 2
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "second"}]
    raw = client.messages.with_raw_response.create(**kwargs(messages))
    assert raw.headers["request-id"] and raw.parse().content[0].text == "two"
    assert len(client.session.entries) == 4 and len(api_server.last.json["messages"]) == 3
    for bypass in ("with_streaming_response",):
        with pytest.raises(ConfigError, match="past the session"):
            getattr(client.messages, bypass)
        with pytest.raises(ConfigError, match="past the session"):
            getattr(client, bypass)
    with pytest.raises(ConfigError, match="stream=True"):
        client.messages.with_raw_response.create(**kwargs(messages), stream=True)


def test_async_with_options_and_raw_response(api_server: ApiServer) -> None:
    async def main() -> None:
        client = wrap(api_server.anthropic_client(), policy=Policy())
        api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
        messages: list[Any] = [{"role": "user", "content": "first"}]
        reply = await client.with_options(timeout=30).messages.create(**kwargs(messages))
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "second"}]
        raw = await client.messages.with_raw_response.create(**kwargs(messages))
        assert (await raw.parse()).content[0].text == "two"
        assert len(client.session.entries) == 4
        await client.close()

    asyncio.run(main())


def test_the_summary_call_has_its_own_output_budget(api_server: ApiServer) -> None:
    """The caller's max_tokens (1024) is a reply budget, not a summary's: the summary call
    asks for the compaction budget, and once more with twice that when it is cut off."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, context_window=40_000, policy=Policy(), events=events.append)
    budget = client.session.policy.compact_max_output_tokens  # scaled for the 40K window
    api_server.anthropic.push(
        message("Noted.", id="msg_1", usage={"input_tokens": 30_000}),  # over the threshold
        message("<summary>\n1. Primary Request and Intent: fix the", stop_reason="max_tokens", id="msg_cut"),
        message(SUMMARY, id="msg_summary"),
        message("Continuing.", id="msg_2"),
    )
    messages: list[Any] = [{"role": "user", "content": "Remember the plan."}]
    reply = client.messages.create(**kwargs(messages))
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Go on."}]
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "Continuing." and client.status().compactions == 1
    first, cut, summary, main_call = api_server.requests
    assert first.json["max_tokens"] == main_call.json["max_tokens"] == 1024
    assert (cut.json["max_tokens"], summary.json["max_tokens"]) == (budget, 2 * budget)
    assert not any(e.kind == "compaction_failed" for e in events)


def test_the_message_that_triggers_a_compaction_is_sent_verbatim(api_server: ApiServer) -> None:
    """Over the threshold, the new prompt (and later the new tool round) is kept whole after
    the summary, never known only through it."""
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, context_window=40_000, policy=Policy())
    spec = "Requirement: " + " ".join(f"field{i} must be validated" for i in range(500))  # ~3K tokens, under the output cap
    log = "FAIL " + " ".join(f"case{i}" for i in range(1_500))
    api_server.anthropic.push(
        message("Noted.", id="msg_1", usage={"input_tokens": 30_000}),  # over the threshold
        message(SUMMARY, id="msg_summary_1"),
        message(tool_use_block("Bash", {"command": "pytest"}, id="toolu_1"), id="msg_2", usage={"input_tokens": 31_000}),
        message(SUMMARY, id="msg_summary_2"),
        message("All fixed.", id="msg_3"),
    )
    messages: list[Any] = [{"role": "user", "content": "Remember the plan."}]
    reply = client.messages.create(**kwargs(messages))
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": spec}]
    reply = client.messages.create(**kwargs(messages))
    sent = api_server.last.json["messages"]
    assert "This session continues" in json.dumps(sent[0]) and sent[-1]["content"][-1]["text"] == spec
    tool_round(messages, reply, "toolu_1", log)
    reply = client.messages.create(**kwargs(messages))
    assert reply.content[0].text == "All fixed." and client.status().compactions == 2
    sent = api_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0]["id"] == "toolu_1" and sent[2]["content"][0]["content"] == log


def _counting_turn_flows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the turns the stream managers take from the engine."""
    from unbounded import engine
    from unbounded.integrations import _anthropic_streams

    opened: list[int] = []

    def counted(session: Any, options: engine.TurnOptions) -> Any:
        opened.append(1)
        return engine.turn_flow(session, options)

    monkeypatch.setattr(_anthropic_streams, "turn_flow", counted)
    return opened


def _after_a_tool_round(client: Any, api_server: ApiServer) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "Run the tests."}]
    api_server.anthropic.push(message(tool_use_block("Bash", {"command": "pytest"}, id="toolu_1"), id="msg_1"))
    reply = client.messages.create(**kwargs(messages))
    return [
        *messages,
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 failed\n" * 200}]},
    ]


def test_the_streaming_helper_retries_a_prompt_too_long_once_through_the_engine(
    api_server: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _counting_turn_flows(monkeypatch)
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive", policy=Policy(), events=events.append)
    messages = _after_a_tool_round(client, api_server)
    api_server.anthropic.push(prompt_too_long(210_000, 200_000), message("Recovered.", id="msg_2"))
    with client.messages.stream(**kwargs(messages)) as stream:
        assert "".join(stream.text_stream) == "Recovered."
        final = stream.get_final_message()
    assert opened == [1] and client.status().compactions == 1
    refused, retried = api_server.requests[1:]
    assert refused.stream and retried.stream
    assert "Run the tests." in json.dumps(retried.json["messages"][0])  # inside the summary now
    assert retried.json["messages"][1:] == refused.json["messages"][1:]  # the tool round, verbatim
    assert [e.kind for e in events].count("reactive_compaction") == 1
    assert client.session.entries[-1].type == "assistant"

    # Refused again after the compaction: the SDK's exception reaches the caller, one retry only.
    messages += [{"role": "assistant", "content": final.content}, {"role": "user", "content": "More."}]
    api_server.anthropic.push(prompt_too_long(), prompt_too_long(), message("never sent", id="msg_x"))
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"), client.messages.stream(**kwargs(messages)):
        pass
    assert len(api_server.requests) == 5 and len(api_server.anthropic) == 1  # two sends, no third
    assert client.status().compactions == 2


def test_the_async_streaming_helper_raises_a_second_prompt_too_long(
    api_server: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _counting_turn_flows(monkeypatch)

    async def main() -> None:
        client = wrap(api_server.anthropic_client(), summarizer="extractive", policy=Policy())
        messages: list[Any] = [{"role": "user", "content": "Run the tests."}]
        api_server.anthropic.push(message(tool_use_block("Bash", {"command": "pytest"}, id="toolu_1"), id="msg_1"))
        reply = await client.messages.create(**kwargs(messages))
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 failed\n" * 200}]},
        ]
        api_server.anthropic.push(prompt_too_long(), prompt_too_long(), message("never sent", id="msg_x"))
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            async with client.messages.stream(**kwargs(messages)):
                pass
        assert client.status().compactions == 1 and len(api_server.anthropic) == 1
        assert client.session.entries[-1].type != "assistant"  # nothing recorded as a reply

    asyncio.run(main())
    assert opened == [1] and len(api_server.requests) == 3
