"""The examples run as scripts against the scripted local API server (no key, no network)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_example(name: str, *args: str, base_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "UNBOUNDED_"))}
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("name", ["anthropic_dropin.py", "agent_loop.py", "langchain_middleware.py"])
def test_without_a_key_or_server_the_example_explains_itself(name: str) -> None:
    out = succeeded(run_example(name))
    assert "ANTHROPIC_API_KEY=" in out and "ANTHROPIC_BASE_URL=" in out


def test_anthropic_dropin(api_server: ApiServer) -> None:
    pytest.importorskip("anthropic")
    api_server.anthropic.push(
        message(tool_use_block("calculator", {"expression": "640 * 0.125"}, id="toolu_1"), id="msg_1"),
        message("12.5% of 640 is 80.", id="msg_2"),
        message("I multiplied 640 by 0.125.", id="msg_3"),
    )
    out = succeeded(run_example("anthropic_dropin.py", base_url=api_server.base_url))
    assert "[calculator] 640 * 0.125 = 80" in out
    assert "Claude: 12.5% of 640 is 80." in out and "I multiplied 640 by 0.125." in out
    assert "0 compaction(s)" in out
    _, second, third = api_server.requests
    result = second.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "80"
    assert third.stream and len(third.json["messages"]) == 5
    assert third.json["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_agent_loop(api_server: ApiServer) -> None:
    pytest.importorskip("anthropic")
    api_server.anthropic.push(
        message(tool_use_block("list_files", {}, id="toolu_1"), id="msg_1"),
        message(
            tool_use_block("count_word", {"name": "plan.md", "word": "cache"}, id="toolu_2"),
            tool_use_block("count_word", {"name": "notes.md", "word": "cache"}, id="toolu_3"),
            tool_use_block("read_file", {"name": "../secret"}, id="toolu_4"),
            id="msg_2",
        ),
        message("plan.md says 'cache' twice.", id="msg_3"),
    )
    out = succeeded(run_example("agent_loop.py", base_url=api_server.base_url))
    assert "turn 1: list_files" in out and "notes.md" in out
    assert "(error)" in out  # the path outside the workspace was refused, not raised
    assert "answer after 3 turn(s) [end_turn]: plan.md says 'cache' twice." in out
    results = api_server.requests[2].json["messages"][-1]["content"]
    assert [r.get("content") for r in results[:2]] == ["2", "0"]
    # recall joins at the first clear or compaction: this short run has neither
    assert [t["name"] for t in api_server.requests[0].json["tools"]] == ["list_files", "read_file", "count_word"]


def test_langchain_middleware(api_server: ApiServer) -> None:
    if importlib.util.find_spec("langchain") is None or importlib.util.find_spec("langchain_anthropic") is None:
        out = succeeded(run_example("langchain_middleware.py", base_url=api_server.base_url))
        assert "pip install 'unbounded[langchain]' langchain-anthropic" in out
        return

    def chapter(request: RecordedRequest) -> Any:
        number = len(api_server.requests)  # this request is the n-th: ask for chapter n
        usage = {"input_tokens": len(request.body) // 4 + 800, "output_tokens": 40}  # sized like the prompt
        if number > 8:
            return message("The last word of chapter 8 is h.", id="msg_end", usage=usage)
        return message(tool_use_block("read_chapter", {"number": number}, id=f"toolu_{number}"), id=f"msg_{number}", usage=usage)

    api_server.anthropic.push(*([chapter] * 9))
    out = succeeded(run_example("langchain_middleware.py", base_url=api_server.base_url))
    assert "answer: The last word of chapter 8 is h." in out
    assert "[compaction_finished]" in out
    assert "summaries among them: 1" in out
    assert len(api_server.requests) == 9


def test_replay_offline() -> None:
    out = succeeded(run_example("replay_offline.py", str(FIXTURES / "session_2_1.jsonl")))
    assert "[compaction_finished]" in out and "turn 40:" in out
    assert "compacted by extractive" in out and "Summary:" in out
