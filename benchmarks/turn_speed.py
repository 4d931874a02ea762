"""Per-turn cost against history length, on a synthetic tool-heavy session.

A session of tool-call turns (an assistant reply calling one tool, then its result; about
two messages a turn) grows to 3,000 messages. Timed, each as the median of the turns around
the mark:

- `per_turn_us_at_200` / `per_turn_us_at_3000`: the session's whole work for one turn
  (`add_tool_results` + `Session.prepare` + `Session.record`) at 200 and 3,000 messages
  (`MemoryStore`, auto-compaction off, the cache kept warm). Target: the second within 1.5x
  of the first (work proportional to what is new, not to the history).
- `dropin_per_call_us_at_3000`: one `messages.create` of the wrapped Anthropic client
  (`unbounded.integrations.anthropic_client.wrap`) at 3,000 messages, the caller sending the
  whole history as SDK users do; the SDK's HTTP call is replaced by a function returning the
  reply at once, so only the wrapper's work is timed. Target: within 1.5x of the per-turn
  figure.
- `langchain_middleware_per_call_us_at_3000`: `UnboundedMiddleware.before_model` on an
  agent step at 3,000 messages (the previous step saw all but the last round), only when
  LangChain is installed.

Run: python benchmarks/turn_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

MODEL = "claude-sonnet-4-6"
WINDOW = 1_000_000
SYSTEM = "You are a coding agent working in a repository. " * 40
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]
MARKS = (200, 3_000)
SAMPLES = 15
"""Turns timed around each mark (the median is reported)."""


def policy() -> Policy:
    """The benchmark's policy: auto-compaction off, so the history keeps growing."""
    return Policy(auto_compact_enabled=False)


class StepClock:
    """A clock advancing a few seconds per reading: the cache stays warm."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now


def reply(index: int, context_tokens: int) -> dict[str, Any]:
    """Turn `index`'s reply: a line of text and one tool call, with a usage that reads the
    whole earlier prompt from the cache."""
    return {
        "id": f"msg_{index:06d}",
        "model": MODEL,
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": f"Step {index}: reading the next module."},
            {
                "type": "tool_use",
                "id": f"toolu_{index:06d}",
                "name": "Read",
                "input": {"file_path": f"/src/m{index}.py"},
            },
        ],
        "usage": {
            "input_tokens": 40,
            "cache_creation_input_tokens": 60,
            "cache_read_input_tokens": context_tokens,
            "output_tokens": 30,
        },
    }


def tool_result(index: int) -> dict[str, Any]:
    """Turn `index`'s tool result: a short file."""
    body = "\n".join(f"{n:>4}\tdef f_{index}_{n}(x): return x * {n}" for n in range(6))
    return {"type": "tool_result", "tool_use_id": f"toolu_{index:06d}", "content": body}


def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


def per_turn(quick: bool = False) -> dict[str, float]:
    """Median µs of one turn's session work at 200 and 3,000 messages."""
    session = Session(
        SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, context_window=WINDOW),
        policy=policy(),
        clock=StepClock(),
    )
    session.add_user("Refactor the modules one by one.")
    samples = SAMPLES // 3 if quick else SAMPLES
    timed: dict[int, list[float]] = {mark: [] for mark in MARKS}
    context = 2_000

    async def run() -> None:
        nonlocal context
        index = 0
        while len(session.messages) < MARKS[-1] + samples * 2:
            index += 1
            started = time.perf_counter()
            if index > 1:
                session.add_tool_results([tool_result(index - 1)])
            await session.prepare()
            session.record(reply(index, context))
            elapsed = time.perf_counter() - started
            context += 130
            size = len(session.messages)
            for mark in MARKS:
                if mark <= size < mark + samples * 2:
                    timed[mark].append(elapsed)

    asyncio.run(run())
    session.close()
    return {f"per_turn_us_at_{mark}": _median_us(timed[mark]) for mark in MARKS}


def conversation(turns: int) -> list[dict[str, Any]]:
    """A caller's history of `turns` tool-call turns, as SDK users keep it (plain dicts)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Refactor the modules one by one."}
    ]
    for index in range(1, turns + 1):
        answer = reply(index, 0)
        messages.append({"role": "assistant", "content": answer["content"]})
        messages.append({"role": "user", "content": [tool_result(index)]})
    return messages


def _sdk_message(index: int, context_tokens: int) -> Any:
    from anthropic.types import Message

    return Message.model_validate(
        {
            **reply(index, context_tokens),
            "type": "message",
            "role": "assistant",
            "stop_sequence": None,
        }
    )


def dropin_per_call(quick: bool = False) -> dict[str, float]:
    """Median µs of one wrapped `messages.create` at 3,000 messages (no HTTP: the SDK's create
    returns the reply at once)."""
    try:
        import anthropic
    except ImportError:
        return {}
    from unbounded.integrations.anthropic_client import wrap

    sdk = anthropic.Anthropic(api_key="benchmark", base_url="http://127.0.0.1:9")
    original = sdk.messages.create
    samples = SAMPLES // 3 if quick else SAMPLES
    turns = MARKS[-1] // 2
    # Parsed beforehand: the SDK's own work (HTTP, parsing) is not the wrapper's.
    replies = iter([_sdk_message(i, 2_000 + 130 * i) for i in range(1, turns + samples + 1)])

    @functools.wraps(original)
    def create(**kwargs: Any) -> Any:
        return next(replies)

    sdk.messages.create = create  # type: ignore[method-assign]
    client = wrap(sdk, policy=policy(), context_window=WINDOW, clock=StepClock())
    history: list[Any] = [{"role": "user", "content": "Refactor the modules one by one."}]
    timed: list[float] = []
    for index in range(1, turns + samples + 1):
        started = time.perf_counter()
        message = client.messages.create(
            model=MODEL, max_tokens=4_096, system=SYSTEM, tools=TOOLS, messages=history
        )
        elapsed = time.perf_counter() - started
        if index > turns:
            timed.append(elapsed)
        history.append({"role": "assistant", "content": message.content})
        tool_use = message.content[-1]
        history.append(
            {"role": "user", "content": [{**tool_result(index), "tool_use_id": tool_use.id}]}
        )
    client.close()
    return {"dropin_per_call_us_at_3000": _median_us(timed)}


def middleware_per_call(quick: bool = False) -> dict[str, float]:
    """Median µs of `UnboundedMiddleware.before_model` on an agent step at 3,000 messages."""
    try:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    except ImportError:
        return {}
    from unbounded.integrations.langchain import UnboundedMiddleware

    def ai(index: int) -> Any:
        return AIMessage(
            content=f"Step {index}: reading the next module.",
            tool_calls=[
                {"id": f"toolu_{index:06d}", "name": "Read", "args": {"file_path": f"/m{index}"}}
            ],
            id=f"ai_{index}",
            usage_metadata={
                "input_tokens": 2_000 + 130 * index,
                "output_tokens": 30,
                "total_tokens": 2_030 + 130 * index,
            },
        )

    def result(index: int) -> Any:
        return ToolMessage(
            content=tool_result(index)["content"],
            tool_call_id=f"toolu_{index:06d}",
            id=f"t_{index}",
        )

    middleware = UnboundedMiddleware(MODEL, context_window=WINDOW)
    samples = SAMPLES // 3 if quick else SAMPLES
    messages: list[Any] = [HumanMessage(content="Refactor the modules one by one.", id="h")]
    timed: list[float] = []
    turns = MARKS[-1] // 2
    state: dict[str, Any] = {}
    for index in range(1, turns + samples + 1):
        messages += [ai(index), result(index)]
        state["messages"] = messages
        started = time.perf_counter()
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
        # The agent applies the update: cleared results replace theirs by id, the context.
        update = update or {}
        replaced = {m.id: m for m in update.pop("messages", []) if getattr(m, "id", None)}
        messages = [replaced.get(m.id, m) for m in messages]
        state.update(update)
        if index > turns:
            timed.append(elapsed)
    return {"langchain_middleware_per_call_us_at_3000": _median_us(timed)}


def run(quick: bool = False) -> dict[str, float]:
    """All the figures of this benchmark."""
    figures: dict[str, float] = {}
    steps: list[Callable[[bool], dict[str, float]]] = [
        per_turn,
        dropin_per_call,
        middleware_per_call,
    ]
    for step in steps:
        figures.update(step(quick))
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    print(json.dumps(run(parser.parse_args().quick), indent=2))
