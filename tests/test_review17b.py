"""Review of session 17's managed side calls (i37s, merged in 4260eda): what it found, fixed
in i37z, driven through the real SDKs against the scripted local API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    anthropic_request_error,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    compaction_block,
    message,
    tool_use_block,
)
from unbounded.events import Event
from unbounded.integrations import wrap
from unbounded.policy import Policy

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5.4"
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]
HUGE = "remember this. " * 40_000  # ~150K tokens: over the 25K cap of a message's text


def _resume_after_a_huge_message(api_server: ApiServer, folder: Path, role: str) -> list[Event]:
    """A Chat Completions conversation holding a huge `role` message in its middle, recorded
    in `folder`; then a new client on that folder gets the caller's next call (its whole
    history, the huge message whole as it always sends it). The resumed client's events."""
    api_server.openai.push(message("a0"), message("a1"), message("a2"))
    items: list[Any] = [{"role": "user", "content": "hi"}]
    options: dict[str, Any] = {
        "session_folder": folder,
        "policy": Policy(),
        "summarizer": "extractive",
    }
    with wrap(api_server.openai_client(sync=True), **options) as client:
        reply = client.chat.completions.create(model=GPT, messages=items)
        items += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": role, "content": HUGE},
            {"role": "user", "content": "go on"},
        ]
        reply = client.chat.completions.create(model=GPT, messages=items)
        items += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "and?"},
        ]
    events: list[Event] = []
    with wrap(api_server.openai_client(sync=True), events=events.append, **options) as again:
        again.chat.completions.create(model=GPT, messages=items)
        assert len([e for e in again.session.entries if e.role == "assistant"]) == 3
    return events


def test_a_session_folder_with_a_huge_system_message_resumes(
    api_server: ApiServer, tmp_path: Path
) -> None:
    events = _resume_after_a_huge_message(api_server, tmp_path / "s", "system")
    assert [e for e in events if e.kind == "side_call_passed"] == []


def test_a_session_folder_with_a_huge_user_message_resumes(
    api_server: ApiServer, tmp_path: Path
) -> None:
    _resume_after_a_huge_message(api_server, tmp_path / "s", "user")


def test_a_history_new_title_request_stays_out_of_the_conversation(
    api_server: ApiServer,
) -> None:
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive", history="new")
    api_server.anthropic.push(
        message("a0", id="msg_0"), message("A title", id="msg_t"), message("a1", id="msg_1")
    )
    client.messages.create(
        model=CLAUDE,
        max_tokens=100,
        system="You are an agent.",
        tools=READ,
        messages=[{"role": "user", "content": "u0"}],
    )
    entries = len(client.session.entries)
    title = client.messages.create(
        model=CLAUDE,
        max_tokens=20,
        system="Write a short title.",
        messages=[{"role": "user", "content": "Conversation: u0 / a0. Its title?"}],
    )
    assert title.content[0].text == "A title"
    assert len(client.session.entries) == entries
    client.messages.create(
        model=CLAUDE,
        max_tokens=100,
        system="You are an agent.",
        tools=READ,
        messages=[{"role": "user", "content": "u1"}],
    )
    sent = json.dumps(api_server.last.json["messages"])
    assert "Its title?" not in sent and "A title" not in sent


def test_a_history_new_title_request_is_sent_managed_a_new_system_with_tools_is_a_change(
    api_server: ApiServer,
) -> None:
    """history='new': a new system without the conversation's tools (or on another model)
    is a side call sent over the recorded conversation, not recorded; a new system with the
    conversation's tools is a change of system, recorded."""
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive", history="new")
    api_server.anthropic.push(
        message("a0", id="msg_0"),
        message("A title", id="msg_t"),
        message("other", id="msg_o"),
        message("a1", id="msg_1"),
    )
    agent: dict[str, Any] = {"model": CLAUDE, "max_tokens": 100, "tools": READ}
    client.messages.create(
        **agent, system="You are an agent.", messages=[{"role": "user", "content": "u0"}]
    )
    entries = len(client.session.entries)
    client.messages.create(
        model=CLAUDE,
        max_tokens=20,
        system="Write a short title.",
        messages=[{"role": "user", "content": "Its title?"}],
    )
    sent = api_server.last.json
    assert sent["messages"][0]["content"] == "u0"  # over the conversation
    assert "Its title?" in json.dumps(sent["messages"][-1])
    client.messages.create(
        model="claude-opus-4-6",
        max_tokens=20,
        system="Another.",
        tools=READ,
        messages=[{"role": "user", "content": "Other model?"}],
    )
    assert len(client.session.entries) == entries  # neither recorded
    client.messages.create(
        **agent, system="You are a careful agent.", messages=[{"role": "user", "content": "u1"}]
    )
    assert len(client.session.entries) == entries + 2  # a change of system: recorded
    assert client.session.config.system == "You are a careful agent."


@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK's Message reads the block as text
def test_a_conversation_holding_a_compaction_block_goes_on(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive")
    block = compaction_block("Summary: we fixed the parser.")
    api_server.anthropic.push(message(block, "Going on.", id="msg_0"), message("more", id="msg_1"))
    messages: list[Any] = [{"role": "user", "content": "fix the parser"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    messages += [
        {"role": "assistant", "content": [block, {"type": "text", "text": "Going on."}]},
        {"role": "user", "content": "and the tests?"},
    ]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    assert reply.content[0].text == "more"
    assert api_server.last.json["messages"][1]["content"][0]["type"] == "compaction"
    # The plain client takes no `betas=`: the compaction beta goes in its header.
    assert "compact" in api_server.last.headers.get("anthropic-beta", "")
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "judge it"},
    ]
    api_server.anthropic.push(message("judged", id="msg_j"))
    judged = client.messages.create(model=CLAUDE, max_tokens=100, system="Judge.", messages=messages)
    assert judged.content[0].text == "judged"  # a managed side call over it goes too
    assert api_server.last.json["system"][0]["text"] == "Judge."


def _markers(body: Any) -> list[Any]:
    """Every `cache_control` of a request body (tools, system, messages)."""
    found: list[Any] = []

    def look(value: Any) -> None:
        if isinstance(value, dict):
            if "cache_control" in value:
                found.append(value["cache_control"])
            for inner in value.values():
                look(inner)
        elif isinstance(value, list):
            for inner in value:
                look(inner)

    look({k: body.get(k) for k in ("tools", "system", "messages")})
    return found


def test_a_managed_side_call_keeps_the_callers_one_hour_markers(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive")
    hour = {"type": "ephemeral", "ttl": "1h"}
    api_server.anthropic.push(
        message(tool_use_block("Read", {"path": "a"}, id="toolu_a"), id="msg_0"),
        message("judged", id="msg_j"),
    )
    system = [{"type": "text", "text": "You are an agent.", "cache_control": hour}]
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "read a", "cache_control": hour}]}
    ]
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system=system, tools=READ, messages=messages
    )
    assert {m.get("ttl") for m in _markers(api_server.last.json)} == {"1h"}  # a turn keeps them
    messages += [
        {"role": "assistant", "content": reply.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
                {"type": "text", "text": "Judge the work so far.", "cache_control": hour},
            ],
        },
    ]
    judge = [{"type": "text", "text": "You are a judge.", "cache_control": hour}]
    client.messages.create(model=CLAUDE, max_tokens=100, system=judge, messages=messages)
    sent = api_server.last.json
    assert sent["system"][0]["text"] == "You are a judge."
    assert len(sent["messages"]) == 3  # managed: the session's view and its own message
    assert {m.get("ttl") for m in _markers(sent)} == {"1h"}


def test_a_managed_side_call_never_hands_the_caller_a_recall_call(
    api_server: ApiServer,
) -> None:
    from test_side_calls17 import _cleared_conversation

    client, messages = _cleared_conversation(api_server)
    assert client.session.offers_recall
    recall = tool_use_block("recall", {"handle": "none"}, id="toolu_recall")
    read = tool_use_block("Read", {"path": "x"}, id="toolu_read")
    api_server.anthropic.push(message(recall, id="msg_r"), message(read, id="msg_read"))
    reply = client.messages.create(
        model=CLAUDE, max_tokens=1000, system="A", tools=READ, messages=messages
    )
    assert [b.name for b in reply.content if b.type == "tool_use"] == ["Read"]  # inside
    messages += [
        {"role": "assistant", "content": reply.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_read", "content": "x"}],
        },
    ]

    def judge(request: Any) -> Any:
        """As a model: it may call any tool the request declares."""
        names = [t.get("name") for t in request.json.get("tools") or []]
        if "recall" in names:
            return message(tool_use_block("recall", {"handle": "h"}, id="toolu_r2"), id="msg_j")
        return message("judged", id="msg_j")

    api_server.anthropic.push(judge, message("judged", id="msg_j2"))
    judged = client.messages.create(
        model=CLAUDE, max_tokens=100, system="Judge.", tools=READ, messages=messages
    )
    assert [b.name for b in judged.content if b.type == "tool_use"] == []


def _tool_blocks(messages: list[Any]) -> list[str]:
    """The types of the tool_use / tool_result blocks among request messages."""
    return [
        block["type"]
        for m in messages
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") in ("tool_use", "tool_result")
    ]


def test_a_managed_title_request_over_tool_calls_declares_tools(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive")
    api_server.anthropic.push(
        message(tool_use_block("Read", {"path": "a"}, id="toolu_a"), id="msg_0"),
        message("A title", id="msg_t"),
    )
    messages: list[Any] = [{"role": "user", "content": "read a"}]
    reply = client.messages.create(
        model=CLAUDE, max_tokens=100, system="You are an agent.", tools=READ, messages=messages
    )
    messages += [
        {"role": "assistant", "content": reply.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
                {"type": "text", "text": "A title for this conversation?"},
            ],
        },
    ]
    title = client.messages.create(
        model=CLAUDE, max_tokens=20, system="Write a title.", messages=messages
    )
    assert title.content[0].text == "A title"
    sent = api_server.last.json
    assert _tool_blocks(sent["messages"])  # the conversation's calls are sent
    assert sent.get("tools")


def test_the_local_api_refuses_tool_blocks_without_tools() -> None:
    """The scripted server refuses, as the API does, tool_use/tool_result blocks in a request
    that declares no tools (so every test sending one checks the rule)."""
    messages = [
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [tool_use_block("Read", {"path": "a"}, id="toolu_a")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a"}]},
    ]
    body: dict[str, Any] = {"model": CLAUDE, "max_tokens": 10, "messages": messages}
    assert "must define tools" in str(anthropic_request_error(body, None, 0))
    assert anthropic_request_error({**body, "tools": READ}, None, 0) is None
