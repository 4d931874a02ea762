"""Attack on the SDK drop-ins (session 16): each confirmed bug is a strict xfail, driven through
the real `anthropic` / `openai` SDKs against the scripted local server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    Malformed,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
)
from unbounded.errors import ConfigError
from unbounded.events import Event
from unbounded.integrations import wrap
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5.4"


def claude_turns(api: ApiServer, client: Any, turns: int, system: str = "A") -> list[Any]:
    """`turns` plain turns, the whole list sent each time; returns the list, ending with the
    reply of the last turn followed by a new user message."""
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(turns):
        api.anthropic.push(message(f"a{n}", id=f"msg_{n}"))
        reply = client.messages.create(
            model=CLAUDE, max_tokens=100, system=system, messages=messages
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"u{n + 1}"},
        ]
    return messages


# ------------------------------------------------------------------ wrap() checks its options


def _sdk_client(kind: str) -> Any:
    if kind == "anthropic":
        return anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9", max_retries=0)
    return openai.OpenAI(api_key="test-key", base_url="http://127.0.0.1:9/v1", max_retries=0)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@pytest.mark.parametrize(
    "options",
    [
        {"summarizer": 42},
        {"summarizer": "clint"},
        {"events": "not callable"},
        {"context_window": "32000"},
        {"context_window": -5},
        {"model": 5},
    ],
    ids=[
        "summarizer-int",
        "summarizer-unknown-name",
        "events-str",
        "window-str",
        "window-negative",
        "model-int",
    ],
)
def test_wrap_refuses_a_wrong_option_at_construction(kind: str, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        wrap(_sdk_client(kind), **options)


# ------------------------------------------------------------------ a new system prompt


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events if e.kind in ("side_call_passed", "cache_params_changed")]


def test_anthropic_new_system_prompt_on_the_whole_conversation_continues_it(
    api_server: ApiServer,
) -> None:
    """A new system over the whole conversation is a side call once (a title request looks
    the same); the next call carrying it again on the conversation adopts it, and records the
    first call's exchange, which the caller made part of the conversation."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    api_server.anthropic.push(message("b0", id="msg_b0"), message("b1", id="msg_b1"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are B.", messages=messages
    )
    assert _kinds(events) == ["side_call_passed"]
    assert len(client.session.entries) == 4  # u0 a0 u1 a1
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "u3"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are B.", messages=messages)
    assert _kinds(events) == ["side_call_passed", "cache_params_changed"]
    assert [getattr(e, "fields", None) for e in events if e.kind == "cache_params_changed"] == [
        ("system",)
    ]
    assert len(client.session.entries) == 8  # u0 a0 u1 a1 u2 b0 u3 b1
    assert client.session.config.system == "You are B."


def test_a_new_system_prompt_then_the_old_one_again_is_forgotten(api_server: ApiServer) -> None:
    """A call back on the old system forgets the new one: carried once more after that, it is
    a side call again, not a change of system."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    api_server.anthropic.push(
        message("t0", id="msg_t0"), message("a2", id="msg_a2"), message("t1", id="msg_t1")
    )
    title = [*messages[:-1], {"role": "user", "content": "Title?"}]
    client.messages.create(model=CLAUDE, max_tokens=10, system="Title it.", messages=title)
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are A.", messages=messages
    )
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "u3"}]
    title = [*messages[:-1], {"role": "user", "content": "Title?"}]
    client.messages.create(model=CLAUDE, max_tokens=10, system="Title it.", messages=title)
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]
    assert len(client.session.entries) == 6  # u0 a0 u1 a1 u2 a2
    assert client.session.config.system == "You are A."


def test_openai_chat_new_system_message_on_the_whole_conversation_continues_it(
    api_server: ApiServer,
) -> None:
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), events=events.append)
    messages: list[Any] = [
        {"role": "system", "content": "You are A."},
        {"role": "user", "content": "u0"},
    ]
    for n in range(2):
        api_server.openai.push(message(f"a{n}", id=f"c{n}"))
        completion = client.chat.completions.create(model=GPT, messages=messages)
        messages += [completion.choices[0].message, {"role": "user", "content": f"u{n + 1}"}]
    messages[0] = {"role": "system", "content": "You are B."}
    api_server.openai.push(message("b0", id="cb0"), message("b1", id="cb1"))
    completion = client.chat.completions.create(model=GPT, messages=messages)
    assert _kinds(events) == ["side_call_passed"]
    messages += [completion.choices[0].message, {"role": "user", "content": "u3"}]
    client.chat.completions.create(model=GPT, messages=messages)
    assert _kinds(events) == ["side_call_passed", "cache_params_changed"]
    assert len(client.session.entries) == 8  # u0 a0 u1 a1 u2 b0 u3 b1
    assert client.session.config.system == "You are B."


def test_a_new_system_whose_exchange_the_caller_dropped_is_not_adopted(
    api_server: ApiServer,
) -> None:
    """The next call adopts a side call only when its messages go on through the side call's
    exchange: carrying the same new system on the conversation without it is another side
    call; the call after that, which keeps its exchange, is adopted."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    api_server.anthropic.push(message("b0", id="msg_b0"), message("b1", id="msg_b1"))
    api_server.anthropic.push(message("b2", id="msg_b2"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are B.", messages=messages)
    messages[-1] = {"role": "user", "content": "u3"}  # the first exchange dropped
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are B.", messages=messages
    )
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]
    assert len(client.session.entries) == 4 and client.session.config.system == "You are A."
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "u4"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are B.", messages=messages)
    assert _kinds(events) == ["side_call_passed", "side_call_passed", "cache_params_changed"]
    assert [m["content"] for m in client.session.messages][4:] == [
        "u3",
        [{"type": "text", "text": "b1"}],
        "u4",
        [{"type": "text", "text": "b2"}],
    ]
    assert client.session.config.system == "You are B."


@pytest.mark.parametrize(
    "tail",
    [
        ["u3"],  # another question instead (a judge's second one)
        ["u2", "u3", "u4"],  # the side call's message, then no reply
        ["x2", "b0", "u3"],  # another exchange than the side call's
        ["u2", "b0"],  # its exchange and nothing more (an assistant prefill)
    ],
    ids=["another-question", "no-reply-after-it", "another-exchange", "prefill"],
)
def test_a_call_not_going_on_through_the_side_call_does_not_adopt_it(
    api_server: ApiServer, tail: list[str]
) -> None:
    """Only messages that hold, after the conversation, the side call's fresh messages and
    then a reply and more adopt it; this call, with the same new system, is a side call."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    api_server.anthropic.push(message("b0", id="msg_b0"), message("b1", id="msg_b1"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are B.", messages=messages)
    after = [
        {"role": "assistant" if text.startswith("b") else "user", "content": text}
        for text in tail
    ]
    client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are B.", messages=[*messages[:-1], *after]
    )
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]
    assert len(client.session.entries) == 4 and client.session.config.system == "You are A."


def test_the_same_judge_question_twice_is_not_adopted(api_server: ApiServer) -> None:
    """A judge asking the same question twice over the conversation (no reply after it) is
    two side calls: the conversation goes on with its own system."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    judge = [*messages[:-1], {"role": "user", "content": "Is it safe?"}]
    api_server.anthropic.push(message("yes", id="msg_j0"), message("yes", id="msg_j1"))
    api_server.anthropic.push(message("a2", id="msg_a2"))
    for _ in range(2):
        client.messages.create(model=CLAUDE, max_tokens=10, system="Judge.", messages=judge)
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are A.", messages=messages)
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]
    assert len(client.session.entries) == 6  # u0 a0 u1 a1 u2 a2
    assert client.session.config.system == "You are A."


@pytest.mark.parametrize("system", ["You are B.", "You are A."])
def test_a_regenerate_with_a_new_system_is_adopted_by_the_call_going_on_from_it(
    api_server: ApiServer, system: str
) -> None:
    """A regenerate with a new system is a side call; the next call going on from its reply
    adopts it: the recorded last reply taken out (`LastReplyDiscarded`), the regenerated one
    and what follows recorded, the next call's system the session's (back on the old one, it
    is no change)."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 2, system="You are A.")[:-2]
    api_server.anthropic.push(message("b0", id="msg_b0"), message("b1", id="msg_b1"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are B.", messages=messages
    )
    assert _kinds(events) == ["side_call_passed"]
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "v0"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system=system, messages=messages)
    assert [e.kind for e in events if e.kind == "last_reply_discarded"] == [
        "last_reply_discarded"
    ]
    changed = ["cache_params_changed"] if system == "You are B." else []
    assert _kinds(events) == ["side_call_passed", *changed]
    assert [m["content"] for m in client.session.messages] == [
        "u0",
        [{"type": "text", "text": "a0"}],
        "u1",
        [{"type": "text", "text": "b0"}],
        "v0",
        [{"type": "text", "text": "b1"}],
    ]
    assert client.session.config.system == system


@pytest.mark.parametrize("which", ["side call", "next call"])
def test_a_new_system_with_other_tools_is_not_adopted(api_server: ApiServer, which: str) -> None:
    """The side call and the call adopting it both need the conversation's tools."""
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    api_server.anthropic.push(
        message("a0", id="msg_a0"), message("b0", id="msg_b0"), message("b1", id="msg_b1")
    )
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="A", tools=tools, messages=messages
    )
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "u1"}]
    for call in ("side call", "next call"):
        given = [] if call == which else tools
        reply = client.messages.create(
            model=CLAUDE, max_tokens=100, system="B", tools=given, messages=messages
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": "u2"},
        ]
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]
    assert len(client.session.entries) == 2 and client.session.config.system == "A"


def test_openai_chat_system_message_changing_every_turn_is_recorded(
    api_server: ApiServer,
) -> None:
    """A system message with the time in it, new at every call: each call after the first
    adopts the one before it (their exchange is in its messages), so every turn is recorded."""
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), events=events.append)
    messages: list[Any] = [{"role": "system", "content": ""}, {"role": "user", "content": "u0"}]
    for n in range(5):
        messages[0] = {"role": "system", "content": f"You are A. Time: 10:0{n}"}
        api_server.openai.push(message(f"a{n}", id=f"c{n}"))
        completion = client.chat.completions.create(model=GPT, messages=messages)
        messages += [completion.choices[0].message, {"role": "user", "content": f"u{n + 1}"}]
    assert _kinds(events) == ["side_call_passed", "cache_params_changed"] * 2
    assert len(client.session.entries) == 10
    assert client.session.config.system == "You are A. Time: 10:04"


# ------------------------------------------------------------------ an edited first message


def test_an_edited_first_message_is_refused_as_an_edited_history(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages = claude_turns(api_server, client, 3)
    messages[0] = {"role": "user", "content": "u0 rewritten"}
    api_server.anthropic.push(message("x", id="msg_x"))
    try:
        with pytest.raises(ConfigError):
            client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    finally:
        while len(api_server.anthropic):
            api_server.anthropic.pop()


# ------------------------------------------------------------------ server tools: pause_turn


def test_pause_turn_reply_sent_back_continues_the_turn(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True))
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "q"},
    }
    api_server.anthropic.push(
        message(search, stop_reason="pause_turn", id="msg_p"), message("done", id="msg_d")
    )
    messages: list[Any] = [{"role": "user", "content": "search the web"}]
    paused = client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    assert paused.stop_reason == "pause_turn"
    messages.append({"role": "assistant", "content": paused.content})
    try:
        done = client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    finally:
        while len(api_server.anthropic):
            api_server.anthropic.pop()
    assert done.id == "msg_d"
    assert [m["role"] for m in api_server.last.json["messages"]] == ["user", "assistant"]
    # The turn goes on: the paused reply and its continuation are one assistant message.
    messages += [{"role": "assistant", "content": done.content}, {"role": "user", "content": "ok"}]
    api_server.anthropic.push(message("bye", id="msg_e"))
    client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    assert [m["role"] for m in api_server.last.json["messages"]] == ["user", "assistant", "user"]


# ------------------------------------------------------------------ the caller's cache markers


def test_a_one_hour_marker_inside_a_tool_result_keeps_its_ttl(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True))
    tools = [
        {"name": "Read", "description": "r", "input_schema": {"type": "object", "properties": {}}}
    ]
    api_server.anthropic.push(
        message({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}, id="msg_1"),
        message("done", id="msg_2"),
    )
    messages: list[Any] = [{"role": "user", "content": "go"}]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    hour = {"type": "ephemeral", "ttl": "1h"}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "data", "cache_control": hour}],
    }
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": [result]},
    ]
    client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    sent = json.dumps(api_server.last.json["messages"][-1])
    assert '"ttl": "1h"' in sent


# ------------------------------------------------------------------ OpenAI streams as the SDK's


def test_a_chat_stream_yields_the_chunks_the_sdk_would(api_server: ApiServer) -> None:
    bare = api_server.openai_client(sync=True)
    client = wrap(api_server.openai_client(sync=True))
    prompt = [{"role": "user", "content": "hi"}]
    api_server.openai.push(message("hello there", id="c1"), message("hello there", id="c2"))
    expected = [
        c.choices[0].delta.content
        for c in bare.chat.completions.create(model=GPT, messages=prompt, stream=True)
    ]
    got = [
        c.choices[0].delta.content
        for c in client.chat.completions.create(model=GPT, messages=prompt, stream=True)
    ]
    assert got == expected


# ------------------------------------------------------------------ resuming a session folder


def test_anthropic_folder_resumed_with_model_keeps_recording(
    api_server: ApiServer, tmp_path: Any
) -> None:
    folder = tmp_path / "session"
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), session_folder=folder, model=CLAUDE)
    messages = claude_turns(api_server, client, 2, system="You are A.")
    client.close()
    client = wrap(
        api_server.anthropic_client(sync=True),
        session_folder=folder,
        model=CLAUDE,
        events=events.append,
    )
    api_server.anthropic.push(message("resumed", id="msg_r"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are A.", messages=messages)
    assert [e.kind for e in events if e.kind == "side_call_passed"] == []
    assert len(client.session.entries) == 6  # u0 a0 u1 a1 u2 resumed


def test_a_folder_resumed_with_model_learns_the_conversations_tools_and_system(
    api_server: ApiServer, tmp_path: Any
) -> None:
    """wrap(..., model=) opens the resumed session before any call names its system prompt or
    tools: the first call sets them (no side call, no CacheParamsChanged)."""
    folder = tmp_path / "session"
    tools = [
        {"name": "Read", "description": "r", "input_schema": {"type": "object", "properties": {}}}
    ]
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), session_folder=folder)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    api_server.anthropic.push(message("a0", id="msg_0"), message("a1", id="msg_1"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are A.", tools=tools, messages=messages
    )
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "u1"}]
    client.close()
    client = wrap(
        api_server.anthropic_client(sync=True),
        session_folder=folder,
        model=CLAUDE,
        events=events.append,
    )
    client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are A.", tools=tools, messages=messages
    )
    assert [e.kind for e in events if e.kind in ("side_call_passed", "cache_params_changed")] == []
    assert len(client.session.entries) == 4


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_session_options_beside_a_given_session_are_refused_by_name(kind: str) -> None:
    """Options a session is built with cannot reach one already built: refused, each named."""
    from unbounded.session_options import SessionOptions

    session = Session(SessionConfig(model=CLAUDE if kind == "anthropic" else GPT))
    with pytest.raises(ConfigError, match=r"hooks=, redact_secrets= beside the session"):
        wrap(_sdk_client(kind), session, redact_secrets=True, hooks=[])
    with pytest.raises(ConfigError, match=r"options= beside the session"):
        wrap(_sdk_client(kind), session, options=SessionOptions(redact_secrets=True))


def test_a_policy_beside_a_given_session_is_used(api_server: ApiServer) -> None:
    session = Session(SessionConfig(model=CLAUDE))
    client = wrap(api_server.anthropic_client(sync=True), session, policy=Policy(recall_enabled=False))
    assert client.session.policy.recall_enabled is False


def test_openai_chat_folder_resumed_with_model_keeps_recording(
    api_server: ApiServer, tmp_path: Any
) -> None:
    folder = tmp_path / "session"
    events: list[Event] = []
    messages: list[Any] = [
        {"role": "system", "content": "You are A."},
        {"role": "user", "content": "u0"},
    ]
    client = wrap(api_server.openai_client(sync=True), session_folder=folder, model=GPT)
    api_server.openai.push(message("a0", id="c0"))
    completion = client.chat.completions.create(model=GPT, messages=messages)
    messages += [completion.choices[0].message, {"role": "user", "content": "u1"}]
    client.close()
    client = wrap(
        api_server.openai_client(sync=True), session_folder=folder, model=GPT, events=events.append
    )
    api_server.openai.push(message("resumed", id="c1"))
    client.chat.completions.create(model=GPT, messages=messages)
    assert [e.kind for e in events if e.kind == "side_call_passed"] == []
    assert len(client.session.entries) == 4  # u0 a0 u1 resumed


# ------------------------------------------------------------------ a required argument missing


@pytest.mark.parametrize("stream", [False, True])
def test_a_missing_max_tokens_is_the_sdks_type_error(api_server: ApiServer, stream: bool) -> None:
    client = wrap(api_server.anthropic_client(sync=True))
    api_server.anthropic.push(message("ok", id="msg_1"))
    prompt = [{"role": "user", "content": "hi"}]
    try:
        with pytest.raises(TypeError):
            reply = client.messages.create(model=CLAUDE, messages=prompt, stream=stream)
            if stream:
                list(reply)
    finally:
        while len(api_server.anthropic):
            api_server.anthropic.pop()
    assert api_server.requests == []


# ------------------------------------------------------------------ switching model mid-session


def test_anthropic_switch_to_a_model_the_table_does_not_list(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), context_window=100_000)
    messages = claude_turns(api_server, client, 1)
    api_server.anthropic.push(message("from the new model", id="msg_new"))
    try:
        reply = client.messages.create(
            model="claude-zzz-9", max_tokens=100, system="A", messages=messages
        )
    finally:
        while len(api_server.anthropic):
            api_server.anthropic.pop()
    assert reply.id == "msg_new"
    assert api_server.last.json["model"] == "claude-zzz-9"


def test_anthropic_switch_to_a_non_claude_model_the_table_lacks_is_planned_without_prices(
    api_server: ApiServer,
) -> None:
    """A non-Claude model switched to is planned as at a first call: half the window as max
    output and no prices (`configuration.model_for_window`); a `claude-` one as Claude."""
    client = wrap(api_server.anthropic_client(sync=True), context_window=100_000)
    messages = claude_turns(api_server, client, 1)
    api_server.anthropic.push(message("from glm", id="msg_glm"))
    client.messages.create(model="glm-4.6", max_tokens=100, system="A", messages=messages)
    info = client.session.model_info
    assert (info.name, info.context_window, info.max_output) == ("glm-4.6", 100_000, 50_000)
    assert (info.input_per_mtok, info.output_per_mtok) == (0.0, 0.0)
    claude = wrap(api_server.anthropic_client(sync=True), model="claude-zzz-9", context_window=100_000)
    assert claude.session.model_info.input_per_mtok > 0


def test_openai_switch_to_a_model_the_table_does_not_list(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True), context_window=128_000)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    api_server.openai.push(message("a0", id="c0"), message("from the new model", id="c1"))
    completion = client.chat.completions.create(model=GPT, messages=messages)
    messages += [completion.choices[0].message, {"role": "user", "content": "u1"}]
    try:
        completion = client.chat.completions.create(model="qwen3-coder", messages=messages)
    finally:
        while len(api_server.openai):
            api_server.openai.pop()
    assert completion.id == "c1"


# ------------------------------------------------------------------ Chat Completions n > 1


def _two_choices(request: RecordedRequest) -> Malformed:
    """A chat completion with two choices (`Malformed` sends any 200 body, here valid JSON)."""
    choices = [
        {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        for index, text in enumerate(["first", "second"])
    ]
    body = {
        "id": "chatcmpl-two",
        "object": "chat.completion",
        "created": 1,
        "model": GPT,
        "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }
    return Malformed(json.dumps(body).encode())


def test_a_chat_caller_continuing_with_another_choice(api_server: ApiServer) -> None:
    client = wrap(api_server.openai_client(sync=True))
    api_server.openai.push(_two_choices, message("ok", id="c2"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    try:
        try:
            completion = client.chat.completions.create(model=GPT, messages=messages, n=2)
        except ConfigError:
            return  # refusing n > 1 up front is a fix too
        messages += [completion.choices[1].message, {"role": "user", "content": "more"}]
        client.chat.completions.create(model=GPT, messages=messages)
    finally:
        while len(api_server.openai):
            api_server.openai.pop()
    sent = [m.get("content") for m in api_server.last.json["messages"]]
    assert sent == ["hi", "second", "more"]


def test_openai_chat_system_message_inserted_mid_conversation(api_server: ApiServer) -> None:
    events: list[Event] = []
    client = wrap(api_server.openai_client(sync=True), events=events.append)
    api_server.openai.push(*[message(f"a{n}", id=f"c{n}") for n in range(2)])
    messages: list[Any] = [
        {"role": "system", "content": "You are A."},
        {"role": "user", "content": "u0"},
    ]
    completion = client.chat.completions.create(model=GPT, messages=messages)
    messages += [
        completion.choices[0].message,
        {"role": "system", "content": "Reminder: be brief."},
        {"role": "user", "content": "u1"},
    ]
    client.chat.completions.create(model=GPT, messages=messages)
    assert [e.kind for e in events if e.kind == "side_call_passed"] == []
    assert len(client.session.entries) >= 4


# ------------------------------------------------------------------ the caller's beta header


def _is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json["messages"][-1])


def test_the_summary_request_carries_the_callers_beta_header(api_server: ApiServer) -> None:
    def reply(request: RecordedRequest) -> Any:
        size = len(request.body) // 4
        usage = {"input_tokens": 300, "cache_read_input_tokens": size - 300, "output_tokens": 40}
        if _is_summary_request(request):
            return message(nine_section_summary("t"), id="msg_s", usage=usage)
        return message("ok", id="msg_t", usage=usage)

    api_server.anthropic.push(*[reply] * 40)
    client = wrap(
        api_server.anthropic_client(sync=True),
        model=CLAUDE,
        context_window=40_000,
        policy=Policy(),
    )
    beta = {"anthropic-beta": "context-1m-2025-08-07"}
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(20):
        reply_ = client.messages.create(
            model=CLAUDE, max_tokens=1000, messages=messages, extra_headers=beta
        )
        messages += [
            {"role": "assistant", "content": reply_.content},
            {"role": "user", "content": f"u{n + 1} " + "word " * 1500},
        ]
        if client.status().compactions:
            break
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    summaries = [r for r in api_server.requests if _is_summary_request(r)]
    assert summaries
    assert all("context-1m-2025-08-07" in r.headers.get("anthropic-beta", "") for r in summaries)


# ------------------------------------------------------------------ options beside a given session


def test_policy_and_events_beside_a_given_session_are_used_or_refused(
    api_server: ApiServer,
) -> None:
    events: list[Event] = []
    session = Session(SessionConfig(model=CLAUDE))
    try:
        client = wrap(
            api_server.anthropic_client(sync=True),
            session,
            policy=Policy(recall_enabled=False),
            events=events.append,
        )
    except ConfigError:
        return  # refusing them, as model= and context_window= are, is a fix too
    api_server.anthropic.push(message("ok", id="msg_1"), message("a title", id="msg_2"))
    prompt = [{"role": "user", "content": "hi"}]
    client.messages.create(model=CLAUDE, max_tokens=10, messages=prompt)
    client.messages.create(model=CLAUDE, max_tokens=10, system="Write a title.", messages=prompt)
    assert [e.kind for e in events] == ["side_call_passed"]
    assert client.session.policy.recall_enabled is False


# ------------------------------------------------------------------ repairs the API needs


def test_text_before_tool_results_is_sent_with_the_results_first(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True))
    tools = [
        {"name": "Read", "description": "r", "input_schema": {"type": "object", "properties": {}}}
    ]
    api_server.anthropic.push(
        message({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}, id="msg_1"),
        message("done", id="msg_2"),
    )
    messages: list[Any] = [{"role": "user", "content": "go"}]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    answer = [
        {"type": "text", "text": "here is the file"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "data"},
    ]
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": answer},
    ]
    client.messages.create(model=CLAUDE, max_tokens=100, tools=tools, messages=messages)
    sent = api_server.last.json["messages"][-1]["content"]
    assert sent[0]["type"] == "tool_result"


# ------------------------------------------------------------------ reasoning tokens


def _reasoning_completion(request: RecordedRequest) -> Malformed:
    """A chat completion whose 30,002 completion tokens are 30,000 reasoning tokens: the next
    prompt holds only the 2-token answer of it."""
    body = {
        "id": "chatcmpl-reasoned",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-5-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "42"},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 30_002,
            "total_tokens": 31_002,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 30_000,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    }
    return Malformed(json.dumps(body).encode())


def test_chat_reasoning_tokens_do_not_fill_the_context(api_server: ApiServer) -> None:
    def summary_or_reply(request: RecordedRequest) -> Any:
        if "<summary>" in json.dumps(request.json["messages"][-1]):
            return message(nine_section_summary("t"), id="c_s")
        return message("ok", id="c_2")

    client = wrap(
        api_server.openai_client(sync=True),
        model="gpt-5-mini",
        context_window=40_000,
        policy=Policy(),
    )
    api_server.openai.push(_reasoning_completion, *[summary_or_reply] * 3)
    messages: list[Any] = [{"role": "user", "content": "think hard"}]
    completion = client.chat.completions.create(model="gpt-5-mini", messages=messages)
    assert client.session.status().tokens < 5_000
    messages += [completion.choices[0].message, {"role": "user", "content": "and?"}]
    client.chat.completions.create(model="gpt-5-mini", messages=messages)
    while len(api_server.openai):
        api_server.openai.pop()
    assert client.status().compactions == 0


def test_chat_reasoning_stays_billed_and_out_of_the_context_after_a_reopen(
    api_server: ApiServer, tmp_path: Any
) -> None:
    """The reasoning is still output (priced), and a session reopened from its folder counts
    the context as the live one did."""
    from unbounded.model.content import usage_context_total

    api_server.openai.push(_reasoning_completion)
    client = wrap(
        api_server.openai_client(sync=True),
        model="gpt-5-mini",
        context_window=40_000,
        session_folder=tmp_path / "s",
    )
    client.chat.completions.create(
        model="gpt-5-mini", messages=[{"role": "user", "content": "think hard"}]
    )
    usage = client.session.entries[-1].usage
    assert usage is not None and usage["output_tokens"] == 30_002
    assert usage_context_total(usage) == 1_002
    live = client.session.status().tokens
    client.session.close()
    reopened = Session.open(tmp_path / "s", SessionConfig(model="gpt-5-mini", context_window=40_000))
    assert reopened.status().tokens == live < 5_000
    reopened.close()


def test_anthropic_previous_turn_thinking_counts_as_context(api_server: ApiServer) -> None:
    """The rule (docs/tokens.md): a reply's output, its thinking included, counts as context.
    Claude Sonnet 4.6 and later Sonnet models, Opus 4.5 and later Opus models and the Claude 5
    family keep every earlier turn's thinking in the context the next request is billed for
    (the extended-thinking docs); only older models strip it once a user message follows."""
    client = wrap(
        api_server.anthropic_client(sync=True), model=CLAUDE, context_window=40_000, policy=Policy()
    )
    thought = message(
        {"type": "thinking", "thinking": "a long thought", "signature": "sig_1"},
        "42",
        id="msg_1",
        usage={"input_tokens": 1000, "output_tokens": 30_002},
    )
    api_server.anthropic.push(thought)
    thinking = {"type": "enabled", "budget_tokens": 16_000}
    messages: list[Any] = [{"role": "user", "content": "think hard"}]
    client.messages.create(model=CLAUDE, max_tokens=20_000, thinking=thinking, messages=messages)
    assert client.session.status().tokens >= 31_002


# ------------------------------------------------------------------ a raw stream's events


def test_a_raw_stream_with_unparsable_tool_input_yields_every_event(api_server: ApiServer) -> None:
    tools = [
        {"name": "Read", "description": "r", "input_schema": {"type": "object", "properties": {}}}
    ]
    bad = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": '{"path": "a", bad'}
    prompt = [{"role": "user", "content": "hi"}]
    api_server.anthropic.push(message(bad, id="msg_1"), message(bad, id="msg_1"))
    bare = api_server.anthropic_client(sync=True)
    kwargs: dict[str, Any] = {"model": CLAUDE, "max_tokens": 10, "tools": tools, "messages": prompt}
    expected = [event.type for event in bare.messages.create(**kwargs, stream=True)]
    client = wrap(api_server.anthropic_client(sync=True))
    got = [event.type for event in client.messages.create(**kwargs, stream=True)]
    assert got == expected
    # The reply was not recorded; the caller's own reading of it, sent back, goes on.
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}
    messages = [*prompt, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    api_server.anthropic.push(message("done", id="msg_2"))
    assert client.messages.create(**{**kwargs, "messages": messages}).id == "msg_2"
    assert [e.type for e in client.session.entries] == ["user", "assistant", "user", "assistant"]
