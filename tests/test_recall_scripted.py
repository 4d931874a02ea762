"""Recall end to end against the local API server: a result is cleared, the model calls
`recall` for it and gets the original text back, and every request stays valid."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.integrations import run_agent, tool, wrap
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy
from unbounded.recall import MICROCOMPACT_RECEIPT_SUBTYPE, receipts_in
from unbounded.session import Session, SessionConfig

pytest.importorskip("anthropic")

MODEL = "claude-sonnet-4-6"
CONFIG_TEXT = "\n".join(f"setting_{n} = {n * 7}" for n in range(40)) + "\nsecret_port = 8443\n"
OTHER_TEXT = "just another file\n" * 30
# Every clearing tier but the idle-gap one is out of the way: the clock jumps two hours per
# reading, so each request finds the prompt cache cold and keeps only the newest result.
POLICY = Policy(time_based_keep_recent=1)


class JumpingClock:
    """A clock two hours later at every reading (the cache is always cold)."""

    def __init__(self) -> None:
        self.now = datetime(2025, 6, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(hours=2)
        return self.now


def tool_result_of(request: dict[str, Any], tool_use_id: str) -> Any:
    for item in request["messages"]:
        if isinstance(item["content"], list):
            for block in item["content"]:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                    return block["content"]
    raise AssertionError(f"no result for {tool_use_id}")


def test_agent_loop_recalls_a_cleared_result(api_server: ApiServer) -> None:
    files = {"config.txt": CONFIG_TEXT, "other.txt": OTHER_TEXT}

    @tool(compactable=True)
    def read_file(path: str) -> str:
        """Read a text file."""
        return files[path]

    api_server.anthropic.push(
        message(tool_use_block("read_file", {"path": "config.txt"}, id="toolu_cfg"), stop_reason="tool_use"),
        message(tool_use_block("read_file", {"path": "other.txt"}, id="toolu_other"), stop_reason="tool_use"),
        message(tool_use_block("recall", {"id": "toolu_cfg"}, id="toolu_rc"), stop_reason="tool_use"),
        message("The port is 8443."),
    )
    session = Session(SessionConfig(model=MODEL, max_tokens=1024), policy=POLICY, clock=JumpingClock())
    from unbounded.providers.anthropic import AnthropicProvider

    result = run_agent(session, AnthropicProvider(api_server.anthropic_client()), tools=[read_file], prompt="Which port?", stream=False)
    assert result.text == "The port is 8443."
    assert not api_server.rejected  # the server checks every request like the real API

    requests = [r.json for r in api_server.requests]
    # recall is offered from the request that first takes something out, not before
    assert [[t["name"] for t in r["tools"]] for r in requests[:3]] == [["read_file"], ["read_file"], ["read_file", "recall"]]
    # request 3: the config read is cleared to a placeholder naming its handle
    assert tool_result_of(requests[2], "toolu_cfg") == cleared_stub("toolu_cfg")
    assert "recall id=toolu_cfg" in cleared_stub("toolu_cfg")
    # request 4: the recall's result is the original text, whole
    recalled = tool_result_of(requests[3], "toolu_rc")
    assert CONFIG_TEXT.strip() in recalled and "secret_port = 8443" in recalled
    # the placeholder is the same bytes on every later request (the cached prefix holds)
    assert tool_result_of(requests[3], "toolu_cfg") == cleared_stub("toolu_cfg")
    for request in requests:
        validate_request(request["messages"])
    # the clearing left a receipt naming the result it took out
    receipts = receipts_in(session.entries)
    assert any(e.subtype == MICROCOMPACT_RECEIPT_SUBTYPE for e in session.entries)
    assert any(item["id"] == "toolu_cfg" and item["path"] == "config.txt" for r in receipts for item in r.tool_results)


def test_dropin_answers_a_recall_round_itself(api_server: ApiServer) -> None:
    tools = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
    client = wrap(api_server.anthropic_client(sync=True), policy=POLICY, clock=JumpingClock())
    api_server.anthropic.push(
        message(tool_use_block("Read", {"file_path": "/repo/config.txt"}, id="toolu_cfg"), stop_reason="tool_use"),
        message(tool_use_block("Read", {"file_path": "/repo/other.txt"}, id="toolu_other"), stop_reason="tool_use"),
        message(tool_use_block("recall", {"path": "config.txt"}, id="toolu_rc"), stop_reason="tool_use"),
        message("The port is 8443."),
        message("You are welcome."),
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which port?"}]

    def ask() -> Any:
        reply = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=history)
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        return reply

    for path, text in (("/repo/config.txt", CONFIG_TEXT), ("/repo/other.txt", OTHER_TEXT)):
        reply = ask()
        use = reply.content[0]
        assert use.input == {"file_path": path}
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": text}]})
    reply = ask()  # the model calls recall: answered inside, the caller gets the answer after it
    assert reply.content[0].text == "The port is 8443."
    history.append({"role": "user", "content": "Thanks!"})
    assert ask().content[0].text == "You are welcome."  # the caller's history still matches
    assert not api_server.rejected

    requests = [r.json for r in api_server.requests]
    assert len(requests) == 5
    assert tool_result_of(requests[2], "toolu_cfg") == cleared_stub("toolu_cfg")
    assert "secret_port = 8443" in tool_result_of(requests[3], "toolu_rc")
    assert [m["role"] for m in requests[4]["messages"]][-1] == "user"
    for request in requests:
        validate_request(request["messages"])
    entries = client.session.entries
    assert sum(1 for e in entries if e.data.get("isRecallRound")) == 2  # the call and its answer


@pytest.mark.parametrize("answer", ["left unanswered", "answered with anything"])
def test_dropin_answers_a_streamed_recall_in_the_next_request(api_server: ApiServer, answer: str) -> None:
    """A `recall` call the caller sees in a streamed reply: the wrapper sends the session's
    answer in the next request, whether the caller answered it with anything or not at all."""
    tools = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
    client = wrap(api_server.anthropic_client(sync=True), policy=POLICY, clock=JumpingClock())
    # Each reply has its own id, as the API gives (one id is one response in a transcript).
    api_server.anthropic.push(
        message(tool_use_block("Read", {"file_path": "/repo/config.txt"}, id="toolu_cfg"), stop_reason="tool_use", id="msg_1"),
        message(tool_use_block("Read", {"file_path": "/repo/other.txt"}, id="toolu_other"), stop_reason="tool_use", id="msg_2"),
        message(tool_use_block("recall", {"id": "toolu_cfg"}, id="toolu_rc"), stop_reason="tool_use", id="msg_3"),
        message("The port is 8443.", id="msg_4"),
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which port?"}]

    def ask() -> Any:
        with client.messages.stream(model=MODEL, max_tokens=1024, tools=tools, messages=history) as stream:
            reply = stream.get_final_message()
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        return reply

    for text in (CONFIG_TEXT, OTHER_TEXT):
        use = ask().content[0]
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": text}]})
    use = ask().content[0]  # streamed: the caller sees the recall call
    assert (use.type, use.name) == ("tool_use", "recall")
    if answer == "answered with anything":
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "n/a"}]})
    else:
        history.append({"role": "user", "content": "Go on."})
    assert ask().content[0].text == "The port is 8443."
    assert not api_server.rejected  # every request was one the API accepts

    requests = [r.json for r in api_server.requests]
    assert len(requests) == 4 and all(r["stream"] for r in requests)
    assert tool_result_of(requests[2], "toolu_cfg") == cleared_stub("toolu_cfg")
    recalled = tool_result_of(requests[3], "toolu_rc")
    assert "secret_port = 8443" in str(recalled) and "n/a" not in str(recalled)
    for request in requests:
        validate_request(request["messages"])
