"""What a compaction sends and leaves, byte for byte: the summary request (system, tools,
messages, every field) and the compacted history of one fixed conversation, through a `Session`
compacting at its automatic trigger and through a new `UnboundedMiddleware` compacting on
its first call, against the bytes captured before the compaction's own work was made cheaper.

The expected bytes are in tests/fixtures/compaction_request/. After a deliberate change to
what a compaction sends, read the new files, then write them with `UNBOUNDED_UPDATE_GOLDEN=1
pytest tests/test_compaction_request_golden.py` and review the diff.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "compaction_request"
MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a coding agent working in a repository."
TOOLS = [
    {
        "name": name,
        "description": f"{name} a file or run a command.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("Read", "Bash", "Grep", "Edit")
]


class Capturing:
    """A summarizer that keeps every request it is sent, as JSON, and answers a fixed summary."""

    name = "capturing"
    supports_cache_edits = False

    def __init__(self) -> None:
        self.profile = MODEL_PROFILE
        self.requests: list[str] = []

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        """The fixed summary; the request kept in the order its keys were built."""
        self.requests.append(json.dumps(request, ensure_ascii=False, indent=1))
        text = f"<summary>\n{nine_section_summary('the refactoring')}\n</summary>"
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)


def tool_input(index: int) -> tuple[str, dict[str, Any]]:
    """Turn `index`'s tool and arguments: reads, edits, commands and searches on changing
    files, so the ledger of files, commands and errors has something of each."""
    name = ("Read", "Bash", "Grep", "Edit")[index % 4]
    path = f"/repo/src/module_{index % 7}.py"
    if name == "Bash":
        return name, {"command": f"pytest -q tests/test_{index % 5}.py"}
    if name == "Edit":
        return name, {"file_path": path, "old_string": f"v{index}", "new_string": f"v{index + 1}"}
    if name == "Grep":
        return name, {"pattern": f"step_{index}", "path": "/repo/src"}
    return name, {"file_path": path}


def result_text(index: int) -> str:
    """Turn `index`'s result: code lines, and now and then a failed command's traceback."""
    lines = [f"    def step_{index}_{n}(self) -> int:\n        return {n}\n" for n in range(20)]
    if index % 8 == 1:
        lines.append(
            "Traceback (most recent call last):\n"
            f'  File "/repo/src/module_{index % 7}.py", line {index}, in step\n'
            f"ValueError: step {index} failed\n"
        )
    return "".join(lines)


def user_text(index: int) -> str | None:
    """Now and then the user says something between tool turns."""
    return f"Also keep module_{index % 7} documented ({index})." if index % 15 == 0 else None


class StepClock:
    """A clock that moves two seconds per reading (the prompt cache stays warm)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now


def session_compaction() -> tuple[list[str], str]:
    """A `Session` of the default policy on a small window, turned until its first automatic
    compaction: the summary requests, and the request prepared after it."""
    summarizer = Capturing()
    session = Session(
        SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, context_window=40_000),
        policy=Policy(),
        summarizer=summarizer,
        clock=StepClock(),
    )
    loop = asyncio.new_event_loop()
    try:
        session.add_user("Refactor the modules one by one.")
        prompt = 2_000
        for index in range(1, 400):
            request = loop.run_until_complete(session.prepare())
            if summarizer.requests:
                return summarizer.requests, json.dumps(request, ensure_ascii=False, indent=1)
            name, arguments = tool_input(index)
            reply = {
                "id": f"msg_{index:05d}",
                "model": MODEL,
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": f"Step {index}: next module."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{index:05d}",
                        "name": name,
                        "input": arguments,
                    },
                ],
                "usage": {"input_tokens": prompt, "output_tokens": 40},
            }
            session.record(reply)
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": f"toolu_{index:05d}",
                "content": result_text(index),
            }
            if index % 8 == 1:
                result["is_error"] = True
            session.add_tool_results([result])
            said = user_text(index)
            if said:
                session.add_user(said)
            prompt = session.status().tokens
    finally:
        loop.close()
        session.close()
    raise AssertionError("the session never compacted")


def langchain_messages(turns: int) -> list[Any]:
    """The same conversation as LangChain messages (ids and usage as an agent's)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages: list[Any] = [HumanMessage("Refactor the modules one by one.", id="human-0")]
    for index in range(1, turns + 1):
        name, arguments = tool_input(index)
        prompt = 2_000 + 700 * index
        messages.append(
            AIMessage(
                content=f"Step {index}: next module.",
                tool_calls=[{"id": f"toolu_{index:05d}", "name": name, "args": arguments}],
                id=f"ai-{index}",
                usage_metadata={
                    "input_tokens": prompt,
                    "output_tokens": 40,
                    "total_tokens": prompt + 40,
                    "input_token_details": {"cache_read": max(0, prompt - 620)},
                },
            )
        )
        messages.append(
            ToolMessage(
                content=result_text(index),
                tool_call_id=f"toolu_{index:05d}",
                id=f"tool-{index}",
                status="error" if index % 8 == 1 else "success",
            )
        )
        said = user_text(index)
        if said:
            messages.append(HumanMessage(said, id=f"human-{index}"))
    return messages


def middleware_compaction() -> tuple[list[str], str]:
    """A new middleware's first call on 120 turns with a compaction due: the summary requests,
    and the state update it returns (the compacted messages and its private state)."""
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import messages_to_dict

    from unbounded.integrations.langchain import UnboundedMiddleware

    summarizer = Capturing()
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=("messages", 100),
        summarizer=summarizer,
        summary_retries=0,
    )
    update = middleware.before_model({"messages": langchain_messages(120)}, None)  # type: ignore[arg-type,typeddict-item]
    assert update and "messages" in update
    written = {
        key: messages_to_dict(value) if key == "messages" else value
        for key, value in update.items()
    }
    return summarizer.requests, json.dumps(written, ensure_ascii=False, indent=1, default=repr)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NOW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def numbered(pattern: re.Pattern[str], label: str, text: str) -> str:
    """`text` with each distinct match of `pattern` (a fresh uuid, the wall clock's time) named
    by the order it first appears in: which of them are the same one is still compared."""
    seen: dict[str, str] = {}
    return pattern.sub(lambda m: seen.setdefault(m.group(), f"<{label}-{len(seen)}>"), text)


def _check(name: str, requests: list[str], after: str) -> None:
    after = numbered(_NOW, "now", numbered(_UUID, "uuid", after))
    texts = {f"{name}_request_{n}.json": text for n, text in enumerate(requests)}
    texts[f"{name}_after.json"] = after
    if os.environ.get("UNBOUNDED_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        for file, text in texts.items():
            (GOLDEN / file).write_text(text, encoding="utf-8")
    expected = sorted(path.name for path in GOLDEN.glob(f"{name}_*.json"))
    assert sorted(texts) == expected
    for file, text in texts.items():
        assert text == (GOLDEN / file).read_text(encoding="utf-8"), file


def test_a_session_compaction_sends_and_leaves_the_captured_bytes() -> None:
    requests, after = session_compaction()
    assert len(requests) == 1
    _check("session", requests, after)


def test_a_middleware_compaction_sends_and_leaves_the_captured_bytes() -> None:
    requests, after = middleware_compaction()
    assert len(requests) == 1
    _check("middleware", requests, after)
