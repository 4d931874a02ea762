"""Differential driver for the LangChain middleware's compactions (review of session 14).

Run it once per `src` (two versions of unbounded cannot share a process):

    PYTHONPATH=/path/to/src:tests/helpers python tests/langchain_compaction_differential.py SEEDS OUT

It drives random conversations through `UnboundedMiddleware.before_model`, the updates
applied with LangGraph's own `add_messages` reducer, and writes to OUT (JSON, one entry per
seed) every summary request the summarizer was sent and every update, uuids and clock
readings numbered by first appearance. Two runs compare with `cmp`. What varies by seed:
results with images, errors, messages without ids, messages replaced by id, RemoveMessage
edits between calls, a new middleware on the state (the first-call path), the messages
round-tripped through serialization (what a checkpointer hands back), a kept tail of 0,
message or token triggers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import sys
import uuid
import zlib
from datetime import datetime, timezone
from typing import Any

_IDS = random.Random(0)


def _uuid4() -> uuid.UUID:
    return uuid.UUID(int=_IDS.getrandbits(128), version=4)


if __name__ == "__main__":
    uuid.uuid4 = _uuid4  # before anything imports it by name (a run alone, not under pytest)

from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.graph.message import add_messages  # noqa: E402
from summaries import nine_section_summary  # noqa: E402

from unbounded.errors import PromptTooLongError, ProviderError  # noqa: E402
from unbounded.integrations.langchain import UnboundedMiddleware  # noqa: E402
from unbounded.model.profile import MODEL_PROFILE  # noqa: E402
from unbounded.policy import Policy  # noqa: E402
from unbounded.providers.base import ModelResponse  # noqa: E402

MODEL = "claude-sonnet-4-6"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NOW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|\+00:00)")
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def numbered(pattern: re.Pattern[str], label: str, text: str) -> str:
    """Each distinct match named by the order it first appears in."""
    seen: dict[str, str] = {}
    return pattern.sub(lambda m: seen.setdefault(m.group(), f"<{label}-{len(seen)}>"), text)


class Capturing:
    """A summarizer that keeps every request it is sent, as JSON."""

    name = "capturing"
    supports_cache_edits = False

    def __init__(self, requests: list[str]) -> None:
        self.profile = MODEL_PROFILE
        self.requests = requests

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
        """A fixed summary (or a failure, as often as the shape says); the request kept."""
        self.requests.append(json.dumps(request, ensure_ascii=False, indent=1, default=repr))
        roll = FAILS.random()
        if roll < shape["too_long"]:
            # The summary request over the window: the compaction drops its oldest rounds.
            raise PromptTooLongError(
                "prompt is too long: 210000 tokens > 200000 maximum",
                actual_tokens=210_000,
                limit_tokens=200_000,
            )
        if roll < shape["too_long"] + shape["failures"]:
            raise ProviderError("overloaded", status=529)
        text = f"<summary>\n{nine_section_summary('the work')}\n</summary>"
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)


def _id(pick: random.Random, value: str) -> str | None:
    return None if pick.random() < shape["no_ids"] else value


shape: dict[str, Any] = {}


def _result(pick: random.Random, call_id: str, n: int) -> Any:
    text = f"{call_id} output line\n" * pick.randrange(5, 160)
    if pick.random() < shape["markers"]:
        # A block carrying a cache marker of its own: the summary's planner unmarks it.
        return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
    if pick.random() < shape["images"]:
        image = pick.choice(
            [
                {"type": "image", "source_type": "base64", "data": _PNG, "mime_type": "image/png"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_PNG}"}},
            ]
        )
        return [{"type": "text", "text": text}, image]
    return text


def rounds(pick: random.Random, start: int, count: int) -> list[BaseMessage]:
    """Rounds of one to three parallel tool calls, human words now and then."""
    out: list[BaseMessage] = []
    for n in range(start, start + count):
        calls = [
            {
                "id": f"call-{n}-{k}",
                "name": pick.choice(["read", "grep", "bash", "view_image"]),
                "args": {"path": f"src/m{pick.randrange(12)}.py"},
            }
            for k in range(pick.choice([0, 1, 1, 2, 3]))
        ]
        prompt = 1_500 + 400 * n
        usage = (
            {"input_tokens": prompt, "output_tokens": 30, "total_tokens": prompt + 30}
            if pick.random() < 0.9
            else None
        )
        words: Any = pick.choice([f"Step {n}.", "", f"Looking at part {n}."])
        if pick.random() < shape["rich"]:
            # Anthropic-shaped content: thinking, text ending in whitespace, a server
            # compaction block now and then.
            words = [
                {"type": "thinking", "thinking": f"Think {n}.", "signature": f"sig{n}"},
                {"type": "text", "text": f"Step {n}.  "},
            ]
            if pick.random() < 0.1:
                words.insert(0, {"type": "compaction", "content": f"Server summary {n}."})
        if pick.random() < shape["rich"] / 3:
            out.append(SystemMessage(f"Note {n}.", id=_id(pick, f"s-{n}")))
        out.append(
            AIMessage(
                content=words,
                tool_calls=calls,
                id=_id(pick, f"ai-{n}"),
                usage_metadata=usage,
            )
        )
        for call in calls:
            out.append(
                ToolMessage(
                    content=_result(pick, call["id"], n),
                    tool_call_id=call["id"],
                    id=_id(pick, f"tool-{call['id']}"),
                    status="error" if pick.random() < 0.1 else "success",
                )
            )
        if pick.random() < 0.2 or not calls:
            content: Any = f"Also check part {n}."
            if pick.random() < shape["markers"]:
                content = [
                    {"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}
                ]
            if pick.random() < shape["images"]:
                content = [
                    {"type": "text", "text": content},
                    {
                        "type": "image",
                        "source_type": "base64",
                        "data": _PNG,
                        "mime_type": "image/png",
                    },
                ]
            out.append(HumanMessage(content, id=_id(pick, f"h-{n}")))
    return out


def edits(pick: random.Random, messages: list[BaseMessage], n: int) -> list[BaseMessage]:
    """Edits an agent might make between calls: a message replaced by id, one removed."""
    out: list[BaseMessage] = []
    if len(messages) < 4:
        return out
    roll = pick.random()
    if roll < shape["replace"]:
        humans = [m for m in messages if isinstance(m, HumanMessage) and m.id]
        if humans:
            target = pick.choice(humans)
            out.append(HumanMessage(f"Edited words {n}.", id=target.id))
    elif roll < shape["replace"] + shape["remove"]:
        target = pick.choice(messages[1:])
        if target.id and not isinstance(target, AIMessage):
            out.append(RemoveMessage(id=target.id))
    return out


def dump(update: dict[str, Any]) -> str:
    return json.dumps(
        {k: messages_to_dict(v) if k == "messages" else v for k, v in sorted(update.items())},
        ensure_ascii=False,
        default=repr,
        sort_keys=True,
    )


def middleware(requests: list[str]) -> UnboundedMiddleware:
    kept: dict[str, Any] = (
        {"keep_messages": 0, "keep_tokens": 0}
        if shape["keep"] == ("messages", 0)
        else {"keep": shape["keep"]}
    )
    return UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=shape["trigger"],
        **kept,
        summarizer=Capturing(requests),
        summary_retries=0,
        policy=Policy(
            microcompact_min_savings=shape["min_savings"],
            microcompact_protect_recent_tokens=3_000,
            warning_buffer=10**9,
        ),
    )


def run(seed: int) -> dict[str, Any]:
    """One random conversation; what it sent and wrote."""
    global _IDS
    _IDS = random.Random(10_000 + seed)
    TAKEN[0] = 0
    pick = random.Random(seed)
    shape.clear()
    shape.update(
        images=pick.choice([0.0, 0.05, 0.3]),
        no_ids=pick.choice([0.0, 0.0, 0.1, 0.5]),
        replace=pick.choice([0.0, 0.1]),
        remove=pick.choice([0.0, 0.05]),
        copies=pick.random() < 0.4,
        new_middleware=pick.choice([0.0, 0.0, 0.05]),
        trigger=pick.choice(
            [("messages", 40), ("messages", 80), ("tokens", 12_000), ("tokens", 25_000)]
        ),
        keep=pick.choice([("messages", 0), ("messages", 6), ("messages", 12), ("tokens", 4_000)]),
        min_savings=pick.choice([500, 2_000, 20_000]),
        failures=pick.choice([0.0, 0.0, 0.0, 0.3]),
        too_long=pick.choice([0.0, 0.0, 0.4]),
        asynchronous=pick.random() < 0.3,
        markers=pick.choice([0.0, 0.0, 0.2]),
        dropped=pick.choice([0.0, 0.0, 0.2]),
        rich=pick.choice([0.0, 0.0, 0.3]),
        lead=pick.random() < 0.3,
    )
    FAILS.seed(seed)
    requests: list[str] = []
    events: list[str] = []
    current = middleware(requests)
    state: dict[str, Any] = {"messages": [HumanMessage("Work through the modules.", id="h-0")]}
    if shape["lead"]:
        state["messages"].insert(0, SystemMessage("You are careful.", id="sys"))
    n = 0
    for call in range(pick.randrange(40, 140)):
        if call:
            new = rounds(pick, n, 1)
            n += 1
            new = edits(pick, state["messages"], n) + new
            state["messages"] = add_messages(state["messages"], new)
        if shape["copies"]:
            state["messages"] = messages_from_dict(messages_to_dict(state["messages"]))
        if call and pick.random() < shape["new_middleware"]:
            current = middleware(requests)
            events.append(f"new middleware at {call}")
        if shape["asynchronous"]:
            update = asyncio.run(current.abefore_model(state, None))  # type: ignore[arg-type]
        else:
            update = current.before_model(state, None)  # type: ignore[arg-type]
        if not update:
            continue
        events.append(f"{call} {dump(update)}")
        if pick.random() < shape["dropped"]:
            events.append("dropped")  # an agent that does not apply this update
            continue
        if "messages" in update:
            state["messages"] = add_messages(state["messages"], update["messages"])
        for key, value in update.items():
            if key != "messages":
                state[key] = value
    text = json.dumps(
        {"shape": repr(sorted(shape.items())), "requests": requests, "events": events}
    )
    text = numbered(_NOW, "now", numbered(_UUID, "uuid", text))
    parts = json.loads(text)
    if FULL:
        return {"seed": seed, **parts}
    return {
        "seed": seed,
        "shape": parts["shape"],
        "requests": [_sha(r) for r in parts["requests"]],
        "events": [_sha(e) for e in parts["events"]],
        "compactions": sum('"type": "remove"' in e for e in events),
        "folds_taken": TAKEN[0],
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


FULL = False
FAILS = random.Random(0)
TAKEN = [0]


def _freeze_clock() -> None:
    """One clock reading for every record: equal runs are equal bytes."""
    import importlib

    for name in (
        "unbounded.model.entries",
        "unbounded.integrations._langchain_view",
        "unbounded.integrations.langchain",
    ):
        module = importlib.import_module(name)
        module.now_iso = lambda: "2026-11-29T12:00:00.000Z"  # type: ignore[attr-defined]


def _count_folds() -> None:
    """Count the compactions that took the view's folds (the new code only)."""
    try:
        from unbounded.compaction.view_folds import PrefixFolds
    except ImportError:
        return
    real = getattr(PrefixFolds, "folds_of", None)
    if real is None:
        return

    def counted(self: Any, *args: Any) -> Any:
        out = real(self, *args)
        TAKEN[0] += out is not None
        return out

    PrefixFolds.folds_of = counted  # type: ignore[method-assign]


def run_agent(seed: int) -> dict[str, Any]:
    """A real agent (`create_agent`) with a checkpointer (`InMemorySaver`): every invoke
    hands the middleware the history as copies; a scripted model calls tools at random."""
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    global _IDS
    _IDS = random.Random(20_000 + seed)
    TAKEN[0] = 0
    pick = random.Random(seed)
    shape.clear()
    shape.update(failures=0.0, images=0.0, too_long=0.0)
    requests: list[str] = []
    counter = [0]

    class Scripted(BaseChatModel):
        """Tool rounds at random, a final answer now and then; usage sized by its input."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            counter[0] += 1
            n = counter[0]
            size = sum(len(str(m.content)) for m in messages) // 4 + 1_500
            since = 0  # model calls of this turn so far
            for message in reversed(messages):
                if isinstance(message, HumanMessage):
                    break
                since += isinstance(message, AIMessage)
            calls = [
                {"name": "read", "args": {"path": f"m{pick.randrange(30)}.py"}, "id": f"c{n}-{k}"}
                for k in range(pick.choice([0, 1, 1, 1, 2, 2]) if since < 12 else 0)
            ]
            reply = AIMessage(
                content=pick.choice(["", f"Step {n}."]),
                tool_calls=calls,
                usage_metadata={
                    "input_tokens": size,
                    "output_tokens": 30,
                    "total_tokens": size + 30,
                },
            )
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def read(path: str) -> str:
        """Read a file."""
        # (from the path alone: parallel calls run in threads, in any order)
        return f"# {path}\n" + "x = compute(value)\n" * (20 + zlib.crc32(path.encode()) % 380)

    keep = pick.choice([("messages", 6), ("messages", 12), ("tokens", 4_000)])
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=pick.choice([("messages", 40), ("tokens", 15_000)]),
        keep=keep,
        summarizer=Capturing(requests),
        summary_retries=0,
        clock=lambda: datetime(2026, 11, 29, 12, tzinfo=timezone.utc),
        policy=Policy(
            microcompact_min_savings=pick.choice([500, 2_000]),
            microcompact_protect_recent_tokens=3_000,
            warning_buffer=10**9,
        ),
    )
    agent = create_agent(
        Scripted(), tools=[read], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
    events: list[str] = []
    for turn in range(pick.randrange(15, 35)):
        agent.invoke({"messages": [HumanMessage(f"Turn {turn}.", id=f"turn-{turn}")]}, config)
        values = agent.get_state(config).values
        events.append(dump({"messages": values["messages"]}))
        events.append(json.dumps(values.get("unbounded"), sort_keys=True, default=repr))
    text = json.dumps({"requests": requests, "events": events})
    text = _NOW.sub("<now>", numbered(_UUID, "uuid", text))
    parts = json.loads(text)
    if FULL:
        return {"seed": seed, **parts}
    return {
        "seed": seed,
        "shape": f"agent {keep}",
        "requests": [_sha(r) for r in parts["requests"]],
        "events": [_sha(e) for e in parts["events"]],
        "compactions": len(requests),
        "folds_taken": TAKEN[0],
    }


def main() -> None:
    global FULL
    first, last = (int(x) for x in sys.argv[1].split(":"))
    FULL = "full" in sys.argv[3:]
    _count_folds()
    _freeze_clock()
    agents = "agent" in sys.argv[3:]
    out = [(run_agent if agents else run)(seed) for seed in range(first, last)]
    with open(sys.argv[2], "w") as file:
        json.dump(out, file)


if __name__ == "__main__":
    main()
