"""The Anthropic drop-in over a long run: a 60-turn tool-using loop written against the SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    Message,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.events import Event
from unbounded.integrations import wrap
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy

pytest.importorskip("anthropic")

MODEL = "claude-sonnet-4-6"
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def read(path: str) -> str:
    return f"# {path}\n" + f"value_{path} = compute(value)\n" * 400  # about 3,000 tokens


def is_summary_request(request: RecordedRequest) -> bool:
    return "<summary>" in json.dumps(request.json["messages"][-1])


def test_a_sixty_turn_sdk_loop_compacts_recalls_and_sends_only_valid_requests(api_server: ApiServer) -> None:
    state = {"turn": 0, "summaries": 0, "recalled": False}
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, context_window=40_000, policy=Policy(), events=events.append)

    def reply(request: RecordedRequest) -> Message:
        size = len(request.body) // 4
        usage = {"input_tokens": 300, "cache_read_input_tokens": max(0, size - 300), "output_tokens": 40}
        if is_summary_request(request):
            state["summaries"] += 1
            return message(nine_section_summary(f"reading modules, summary {state['summaries']}"), id=f"msg_s{state['summaries']}", usage=usage)
        state["turn"] += 1
        n = state["turn"]
        if not state["recalled"] and "recall" in [t["name"] for t in request.json.get("tools", [])]:
            state["recalled"] = True
            return message(tool_use_block("recall", {"path": "mod1.py"}, id="toolu_recall"), id=f"msg_{n}", usage=usage)
        return message(tool_use_block("Read", {"path": f"mod{n}.py"}, id=f"toolu_{n}"), id=f"msg_{n}", usage=usage)

    api_server.anthropic.push(*[reply] * 200)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every module."}]
    for _ in range(60):  # the usual SDK loop: the whole list each time
        result = client.messages.create(model=MODEL, max_tokens=1024, system="You read code.", tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": result.content})
        call = next(block for block in result.content if block.type == "tool_use")
        assert call.name == "Read"  # the recall round was answered inside the drop-in
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": read(call.input["path"])}]})
    while len(api_server.anthropic):
        api_server.anthropic.pop()

    main = [r for r in api_server.requests if not is_summary_request(r)]
    assert len(main) >= 60
    assert client.status().compactions >= 2
    assert api_server.rejected == []  # the server's Messages API checks, summary requests included
    for request in main:
        validate_request(request.json["messages"])
        assert len(request.body) // 4 < 40_000
    served = [e for e in events if e.kind == "recall_served"]
    assert served and served[0].found
    after_recall = next(r for r in main if "toolu_recall" in json.dumps(r.json["messages"][-1]))
    assert "value_mod1.py = compute" in json.dumps(after_recall.json["messages"][-1])
    summaries = [r for r in api_server.requests if is_summary_request(r)]
    assert summaries and all(r.json["model"] == MODEL for r in summaries)  # the client's own model
