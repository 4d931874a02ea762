"""Per-call time against history length, for every entry point, in one run.

One generated conversation of real-session shape: an agent's tool loop where each turn is an
assistant message (a line of text and one call of Read, Bash, Grep or Edit on changing paths)
and its result of 1-3 KB (lines of code, seeded). Each entry point is measured at 200, 1,000,
3,000 and 10,000 messages of it (the marks; `--marks` changes them). For each entry point one
object per mark is first brought to its mark (untimed), then the marks are taken in turn,
round after round, one call (the middleware: one invoke of `CALLS_PER_INVOKE` calls) per mark
and round: a busy moment of a shared machine then slows every mark alike instead of the one
that happened to run in it, which keeps the ratios between marks steady. The first
`WARMUP_ROUNDS` rounds are left out; every figure is the median of the `--samples` calls
kept at the mark, in CPU time of the calling thread (`time.thread_time`: other processes do
not count), and `_max_` the slowest of them. Nothing between two timed calls walks the
history either (the next reply's usage is the session's own count). What is timed, and only
that:

- `session`: one turn of `Session` (`add_tool_results` + `prepare` + `record`), in memory,
  auto-compaction off (the history keeps growing), a 1,000,000-token window; each reply's
  usage reports the size of the request it answers, so results are cleared as in a live
  session.
- `dropin`: one `messages.create` of the wrapped Anthropic client (`wrap`), the caller
  sending the whole history each time as SDK users do; the SDK's own create returns a reply
  built beforehand, so only the wrapper's work is timed.
- `middleware`: `UnboundedMiddleware`'s hooks (`before_model` + `after_model`) per model call
  inside a real `create_agent` with a checkpointer. The agent is invoked with the history up
  to the mark and makes one call; each round invokes it again on the same thread (its
  messages come back from the checkpoint as copies) for `CALLS_PER_INVOKE` calls, all timed
  (the first hook of each invoke included). The history is below the warning level, where
  nothing may be cleared: each call reads the count from the last reported usage.
- `middleware_clearing`: the same with clearing due (a policy at the warning level from the
  first token): the middleware keeps its converted view and brings it up to date with what
  each call adds, clearing old results in batches.
- `middleware_first_call`: `before_model` of a NEW `UnboundedMiddleware` (a new process, or
  another thread's conversation) on the agent's messages at the mark, one new middleware per
  call (its construction not timed, and its garbage collected before the call). Below the
  warning level with a warm cache nothing may be cleared, so it reads the count from the
  last reported usage and what follows.
- `middleware_first_call_clearing`: the same with clearing due, on the state a checkpointed
  thread holds (the results a warm middleware cleared read the placeholder; the newest
  `UNCLEARED_RESULTS` do not; its last clearing call, `SINCE_LAST_CLEARING` messages ago,
  left in the private state the mark of where the settled part ends) and a policy at the
  warning level from the first token that clears in batches of 10,000 tokens above the
  newest 10,000: the new middleware checks the mark, scans from it to where results are
  still uncleared, converts and counts from there, and clears a batch (from 200 messages
  on the row fails when it does not; a quick run's smaller marks hold too few results).
- `middleware_first_call_compaction`: the same state with a compaction due (`trigger=
  ("messages", 100)`, half the history at marks under 200): the new middleware converts the
  history for the summary, cuts, and rewrites the state. The summary call itself (the
  summarizer's `create`) is not timed.
- `--at-trigger` only: `session_compaction`, `dropin_compaction`, `middleware_compaction`,
  the compaction at the DEFAULT policy's trigger in a running agent. Each sample starts a
  new `Session` / wrapped client / `create_agent` (one invoke, no checkpointer: it would
  store the whole message list at each of thousands of steps) with `Policy()` and the
  model's own window
  (200,000 tokens) and runs the tool loop turn after turn, each reply's usage reporting the
  size of the request it answers (the middleware's model: a quarter of the characters it
  was sent), until the policy compacts; what is timed is that turn: the `Session` turn, the
  drop-in's `messages.create`, the middleware's hooks of that model call, the summarizer's
  `create` (which answers at once) not counted. The turns before it (count-based clearing
  included) are not timed. `<entry>_compaction_us` is the median of the samples,
  `_max_us` the slowest, `_messages` the history's length when it compacted. A sample is a
  whole run to the trigger (thousands of turns, about a minute of CPU each), so `--samples`
  defaults to `TRIGGER_SAMPLES` here. `--compaction N` times each run's Nth compaction
  instead (the runs go on past the earlier ones, untimed).
- `langchain`: LangChain's own stack in the same agent, on the same messages:
  `SummarizationMiddleware.before_model` (trigger above the context, so it only counts) plus
  `ContextEditingMiddleware(ClearToolUsesEdit()).wrap_model_call` without the model call
  it wraps.

`<entry>_ratio_<mark>_to_<first>` is each later mark's figure over the first mark's, and
`<entry>_growth` the last mark's over the first's: ours aim at 3x at most from 200 to 10,000,
no call over 20 ms. Without --json the figures print as one table (median and slowest call
per mark, the growth, and both checks for each of our entry points).

Run: python benchmarks/turn_speed.py [--marks 200,1000,3000,10000] [--samples 15] [--json]
     python benchmarks/turn_speed.py --at-trigger [--samples 3] [--compaction N] [--json]
     (instead: only the three compaction-at-the-default-trigger rows)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import random
import statistics
import sys
import time
import types
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

MODEL = "claude-sonnet-4-6"
WINDOW = 1_000_000
SYSTEM = "You are a coding agent working in a repository. " * 40
TOOLS = [
    {
        "name": name,
        "description": f"{name} a file or run a command.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("Read", "Bash", "Grep", "Edit")
]
MARKS = (200, 1_000, 3_000, 10_000)
SAMPLES = 15
WARMUP_ROUNDS = 2
"""Rounds of every mark run before the timed ones (caches, first-call conversions)."""
CALLS_PER_INVOKE = 5
"""Model calls per invoke of a LangChain agent (a round of the middleware's figures)."""
GROWTH_LIMIT = 3.0
"""Ours: the median call at the last mark within this many times the first mark's."""
STEP_LIMIT_US = 20_000.0
"""Ours: no call slower than this (20 ms)."""
ENTRY_POINTS = {
    "session": "Session turn",
    "dropin": "drop-in messages.create",
    "middleware": "middleware in create_agent",
    "middleware_clearing": "middleware in create_agent, clearing due",
    "middleware_first_call": "middleware, new, first call",
    "middleware_first_call_clearing": "middleware, new, first call, clearing due",
    "middleware_first_call_compaction": "middleware, new, first call, compaction due",
    "langchain": "LangChain's own stack",
}
"""Every row of the table: the figures' prefix and what it times."""
OURS = frozenset(ENTRY_POINTS) - {"langchain"}
CODE_LINES = [
    f"    def step_{n}(self, value: int) -> int:\n        return self.helper(value) * {n}\n"
    for n in range(200)
]


def tool_call(index: int) -> dict[str, Any]:
    """Turn `index`'s tool_use block (the tool and path change from turn to turn)."""
    name = ("Read", "Bash", "Grep", "Edit")[index % 4]
    path = f"/repo/src/module_{index % 700}.py"
    arguments = {"command": f"pytest -q tests/test_{index % 90}.py"} if name == "Bash" else {}
    return {
        "type": "tool_use",
        "id": f"toolu_{index:07d}",
        "name": name,
        "input": {"path": path, **arguments},
    }


def result_text(index: int) -> str:
    """Turn `index`'s result: 1-3 KB of code lines (seeded by the turn)."""
    rng = random.Random(index)
    size = rng.randint(1_000, 3_000)
    lines: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(CODE_LINES)
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def tool_result(index: int) -> dict[str, Any]:
    """Turn `index`'s tool_result block."""
    return {
        "type": "tool_result",
        "tool_use_id": f"toolu_{index:07d}",
        "content": result_text(index),
    }


def reply(index: int, prompt_tokens: int) -> dict[str, Any]:
    """Turn `index`'s reply, whose usage reads the whole prompt but the newest part."""
    return {
        "id": f"msg_{index:07d}",
        "model": MODEL,
        "stop_reason": "tool_use",
        "content": [{"type": "text", "text": f"Step {index}: next module."}, tool_call(index)],
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 600,
            "cache_read_input_tokens": max(0, prompt_tokens - 620),
            "output_tokens": 40,
        },
    }


class StepClock:
    """A clock that moves a few seconds per reading: the prompt cache stays warm."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2)
        return self.now


def _figures(prefix: str, timed: dict[int, list[float]]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for mark, samples in timed.items():
        if samples:
            figures[f"{prefix}_us_at_{mark}"] = round(statistics.median(samples) * 1e6, 1)
            figures[f"{prefix}_max_us_at_{mark}"] = round(max(samples) * 1e6, 1)
    marks = [mark for mark, samples in timed.items() if samples]
    if len(marks) > 1:
        first = figures[f"{prefix}_us_at_{marks[0]}"]
        # Each later mark against the first (the targets: 3,000 within 1.5x of 200, 10,000
        # within 3x), then the last against the first as `_growth`.
        for mark in marks[1:]:
            at = figures[f"{prefix}_us_at_{mark}"]
            figures[f"{prefix}_ratio_{mark}_to_{marks[0]}"] = round(at / first, 2) if first else 0.0
        last = figures[f"{prefix}_us_at_{marks[-1]}"]
        figures[f"{prefix}_growth"] = round(last / first, 2) if first else 0.0
    return figures


def _interleaved(
    drivers: dict[int, Callable[[], list[float]]], samples: int
) -> dict[int, list[float]]:
    """Round-robin over the marks: each round takes one step of every mark's driver, and the
    first `WARMUP_ROUNDS` rounds are not kept.

    Each driver already holds its history at its mark, so what a mark's figure measures is
    that history's per-call cost. Taking the marks in turn puts them under the same load (a
    shared machine's busy minute slows every mark alike, not the one that ran in it), which
    is what makes their ratio steady; the median of the kept steps is the figure."""
    timed: dict[int, list[float]] = {mark: [] for mark in drivers}
    for round_index in range(WARMUP_ROUNDS + samples):
        for mark, step in drivers.items():
            elapsed = step()
            if round_index >= WARMUP_ROUNDS:
                timed[mark].extend(elapsed)
    return timed


class _SessionDriver:
    """A `Session` whose history is at a mark; `step` times one more turn of it."""

    def __init__(self, mark: int) -> None:
        self.session = Session(
            SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, context_window=WINDOW),
            policy=Policy(auto_compact_enabled=False),
            clock=StepClock(),
        )
        self.session.add_user("Refactor the modules one by one.")
        self.loop = asyncio.new_event_loop()
        self.index = 0
        self.prompt = 2_000
        while len(self.session.messages) < mark:
            self.step()

    def step(self) -> list[float]:
        """One turn (`add_tool_results` + `prepare` + `record`), in thread CPU seconds."""
        self.index += 1
        answer = reply(self.index, self.prompt)
        result = [tool_result(self.index - 1)] if self.index > 1 else []
        started = time.thread_time()
        if result:
            self.session.add_tool_results(result)
        self.loop.run_until_complete(self.session.prepare())
        self.session.record(answer)
        elapsed = time.thread_time() - started
        # The next reply's usage: the session's own count (kept per turn, not a walk of the
        # request), so nothing between the timed turns costs O(history) either.
        self.prompt = self.session.status().tokens
        return [elapsed]

    def close(self) -> None:
        """Close the session and its loop."""
        self.session.close()
        self.loop.close()


def session_per_turn(marks: Sequence[int], samples: int) -> dict[str, float]:
    """`Session` turns at each mark, the marks interleaved."""
    drivers = {mark: _SessionDriver(mark) for mark in marks}
    try:
        timed = _interleaved({mark: d.step for mark, d in drivers.items()}, samples)
    finally:
        for driver in drivers.values():
            driver.close()
    return _figures("session", timed)


class _RawReply:
    """What `messages.with_raw_response.create` returns, without HTTP: the parsed reply and
    its body."""

    def __init__(self, message: Any, body: dict[str, Any]) -> None:
        self._message = message
        self.http_response = types.SimpleNamespace(json=lambda: body)

    def parse(self) -> Any:
        """The SDK's `Message`."""
        return self._message


class _DropinDriver:
    """A wrapped Anthropic client whose caller's history is at a mark (no HTTP)."""

    def __init__(self, mark: int) -> None:
        import anthropic

        from unbounded.integrations import wrap

        sdk = anthropic.Anthropic(api_key="benchmark", base_url="http://127.0.0.1:9")
        self.pending: list[Any] = []

        @functools.wraps(sdk.messages.create)
        def create(**kwargs: Any) -> Any:
            return self.pending.pop()

        # The drop-in reads a whole reply raw (its body kept for byte identity).
        sdk.messages.with_raw_response.create = create
        self.client = wrap(
            sdk, policy=Policy(auto_compact_enabled=False), context_window=WINDOW, clock=StepClock()
        )
        self.history: list[Any] = [{"role": "user", "content": "Refactor the modules one by one."}]
        self.prompt = 2_000
        self.index = 0
        while len(self.history) < mark:
            self.step()

    def step(self) -> list[float]:
        """One `messages.create` with the whole history, in thread CPU seconds."""
        from anthropic.types import Message

        self.index += 1
        # Parsed beforehand: the SDK's own work is not the wrapper's.
        body = {**reply(self.index, self.prompt), "type": "message", "role": "assistant"}
        self.pending.append(_RawReply(Message.model_validate(body), body))
        started = time.thread_time()
        message = self.client.messages.create(
            model=MODEL, max_tokens=4_096, system=SYSTEM, tools=TOOLS, messages=self.history
        )
        elapsed = time.thread_time() - started
        self.history.append({"role": "assistant", "content": message.content})
        self.history.append({"role": "user", "content": [tool_result(self.index)]})
        self.prompt = self.client.session.status().tokens
        return [elapsed]


def dropin_per_call(marks: Sequence[int], samples: int) -> dict[str, float]:
    """Wrapped `messages.create` calls at each mark, the marks interleaved (no HTTP)."""
    try:
        import anthropic  # noqa: F401
    except ImportError:
        return {}
    drivers = {mark: _DropinDriver(mark) for mark in marks}
    try:
        timed = _interleaved({mark: d.step for mark, d in drivers.items()}, samples)
    finally:
        for driver in drivers.values():
            driver.client.close()
    return _figures("dropin", timed)


# -- LangChain ------------------------------------------------------------------------------


def _langchain_messages(count: int) -> list[Any]:
    """The conversation's first `count` messages as LangChain messages (with ids and usage)."""
    from langchain_core.messages import HumanMessage, ToolMessage

    messages: list[Any] = [HumanMessage("Refactor the modules one by one.", id="human-0")]
    index = 0
    while len(messages) < count:
        index += 1
        messages.append(_ai_message(index, reported_prompt(index)))
        messages.append(
            ToolMessage(
                content=result_text(index), tool_call_id=f"toolu_{index:07d}", id=f"tool-{index}"
            )
        )
    return messages


def reported_prompt(index: int) -> int:
    """The prompt turn `index`'s reply reports: what a run with clearing sends (the calls and
    placeholders, plus the last 40,000 tokens of results), below the warning level of the
    1,000,000-token window at every mark (each mark's figure is then the regime its row names:
    the `_clearing` rows set a policy where clearing is due from the first token)."""
    return 2_000 + 60 * index + min(40_000, 500 * index)


def _ai_message(index: int, prompt: int, final: bool = False) -> Any:
    from langchain_core.messages import AIMessage

    call = tool_call(index)
    return AIMessage(
        content="Done." if final else f"Step {index}: next module.",
        tool_calls=[]
        if final
        else [{"id": call["id"], "name": "read_file", "args": {"path": call["input"]["path"]}}],
        id=f"ai-{index}",
        usage_metadata={
            "input_tokens": prompt,
            "output_tokens": 40,
            "total_tokens": prompt + 40,
            "input_token_details": {"cache_read": max(0, prompt - 620)},
        },
    )


def _scripted_model(start: int, calls: int) -> Any:
    """A chat model that calls `read_file` `calls` times, then answers; its usage is the
    conversation's own (`reported_prompt`)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Scripted(GenericFakeChatModel):
        step: int = 0

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            self.step += 1
            final = self.step > calls
            index = start + self.step
            answer = _ai_message(index, reported_prompt(index), final=final)
            return ChatResult(generations=[ChatGeneration(message=answer)])

    return Scripted(messages=iter(()))


def read_file(path: str) -> str:
    """Read a file."""
    return result_text(sum(map(ord, path)))


class _AgentDriver:
    """An agent thread (`create_agent` with a checkpointer) whose history is at a mark.

    Made by one invoke with the history (one model call, not timed); each `step` invokes the
    agent again on the same thread (its messages come back from the checkpoint as copies) for
    `CALLS_PER_INVOKE` model calls and returns the hooks' time of each call, the first hook of
    that invoke included."""

    def __init__(self, middleware: list[Any], history: list[Any], timings: list[float]) -> None:
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver

        self.middleware = middleware
        self.timings = timings
        self.start = len(history)
        self.invokes = 0
        self.saver = InMemorySaver()
        self.config: Any = {
            "configurable": {"thread_id": "bench"},
            "recursion_limit": 10 * CALLS_PER_INVOKE + 20,
        }
        agent = create_agent(
            _scripted_model(self.start, 1),
            tools=[read_file],
            middleware=middleware,
            checkpointer=self.saver,
        )
        timings.clear()
        agent.invoke({"messages": history}, self.config)

    def step(self) -> list[float]:
        """One more invoke of `CALLS_PER_INVOKE` model calls; the hooks' time per call."""
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage

        self.invokes += 1
        # Ids of each invoke's messages apart from every other invoke's.
        first_id = self.start + 10 * self.invokes * (CALLS_PER_INVOKE + 1)
        agent = create_agent(
            _scripted_model(first_id, CALLS_PER_INVOKE),
            tools=[read_file],
            middleware=self.middleware,
            checkpointer=self.saver,
        )
        self.timings.clear()
        go_on = HumanMessage("Go on.", id=f"human-{first_id}")
        agent.invoke({"messages": [go_on]}, self.config)
        return list(self.timings)


CLEARING_DUE = Policy(warning_buffer=10**9)
"""At the warning level from the first token: count-based clearing is not held back."""


CLEARING_IN_BATCHES = Policy(
    warning_buffer=10**9,
    microcompact_protect_recent_tokens=10_000,
    microcompact_min_savings=10_000,
)
"""Clearing due from the first token, in batches of 10,000 tokens above the newest 10,000
(`middleware_first_call_clearing`: a batch is due at every mark)."""
UNCLEARED_RESULTS = 100
"""Results of a checkpointed state that do not read the placeholder yet (the newest)."""


def checkpointed_messages(count: int) -> list[Any]:
    """The conversation's first `count` messages as a thread that ran with the middleware holds
    them: every result but the newest `UNCLEARED_RESULTS` cleared (the same id, the
    placeholder as content)."""
    from unbounded.compaction.tools_registry import cleared_stub

    messages = _langchain_messages(count)
    results = [index for index, m in enumerate(messages) if m.type == "tool"]
    for index in results[: max(0, len(results) - UNCLEARED_RESULTS)]:
        message = messages[index]
        messages[index] = message.model_copy(update={"content": cleared_stub(message.tool_call_id)})
    return messages


SINCE_LAST_CLEARING = 80
"""Messages a checkpointed thread gained since its middleware last cleared a batch (about
20,000 tokens of results: the next batch is due)."""


def checkpointed_state(count: int) -> dict[str, Any]:
    """The state of a thread at `count` messages (not timed): `checkpointed_messages`, on the
    first `count - SINCE_LAST_CLEARING` of which its middleware's last clearing call cleared
    a batch, with that call's update applied as LangGraph applies it (the cleared results,
    the private state with the mark of where the settled part ends), then the messages the
    agent added since."""
    from langgraph.graph.message import add_messages

    from unbounded.integrations.langchain import STATE_KEY, UnboundedMiddleware

    messages = checkpointed_messages(count)
    since = min(SINCE_LAST_CLEARING, count // 4)
    state: dict[str, Any] = {"messages": messages[: count - since]}
    last = UnboundedMiddleware(MODEL, context_window=WINDOW, policy=CLEARING_IN_BATCHES)
    update = last.before_model(state, None) or {}  # type: ignore[arg-type]
    if "messages" in update:
        state["messages"] = add_messages(state["messages"], update["messages"])
    if STATE_KEY in update:
        state[STATE_KEY] = update[STATE_KEY]
    state["messages"] = [*state["messages"], *messages[count - since :]]
    return state


SUMMARY_BODY = "".join(
    f"{number}. {heading}:\n   " + "The modules are refactored one by one, tested. " * 40 + "\n"
    for number, heading in enumerate(
        (
            "Primary Request and Intent",
            "Key Technical Concepts",
            "Files and Code Sections",
            "Errors and fixes",
            "Problem Solving",
            "All user messages",
            "Pending Tasks",
            "Current Work",
            "Optional Next Step",
        ),
        start=1,
    )
)
"""What the benchmark's summary says: the nine sections, long enough for the plausibility
floor at every mark."""


class _TimedSummarizer:
    """A summarizer that answers at once and keeps the CPU time its calls took (not timed)."""

    name = "benchmark"
    supports_cache_edits = False

    def __init__(self) -> None:
        from unbounded.model.profile import MODEL_PROFILE

        self.profile = MODEL_PROFILE
        self.spent = 0.0

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
        """A fixed summary."""
        from unbounded.providers.base import ModelResponse

        started = time.thread_time()
        text = f"<summary>\n{SUMMARY_BODY}</summary>"
        answer = ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)
        self.spent += time.thread_time() - started
        return answer


class _FirstCallDriver:
    """The agent's messages at a mark; `step` times `before_model` of a new middleware."""

    def __init__(
        self, mark: int, policy: Policy | None, state: dict[str, Any], trigger: Any = None
    ) -> None:
        self.mark = mark
        self.state = state
        self.policy = policy
        self.trigger = trigger

    def step(self) -> list[float]:
        """One new middleware's first call, in thread CPU seconds (construction and the
        summary call not timed)."""
        from unbounded.integrations.langchain import UnboundedMiddleware

        summarizer = _TimedSummarizer()
        middleware = UnboundedMiddleware(
            MODEL,
            context_window=WINDOW,
            policy=self.policy,
            trigger=self.trigger,
            summarizer=summarizer,
            summary_retries=0,
        )
        # The construction's garbage (the recall tool's schema models) is the construction's
        # cost: collected here, not in the timed call whose allocations would tip a full
        # collection of the process's heap (the drivers' histories: 240 ms at 10,000).
        gc.collect()
        started = time.thread_time()
        update = middleware.before_model(self.state, None)  # type: ignore[arg-type]
        elapsed = time.thread_time() - started - summarizer.spent
        due = self.trigger is not None or (
            self.policy is CLEARING_IN_BATCHES and self.mark >= MARKS[0]
        )
        if due and not (update and "messages" in update):
            raise RuntimeError(f"the first-call row did not clear or compact at {self.mark}")
        return [elapsed]


def first_call_per_mark(marks: Sequence[int], samples: int) -> dict[str, float]:
    """A new middleware's first call at each mark: with nothing to clear, with clearing due,
    and with a compaction due."""
    try:
        import langchain.agents.middleware  # noqa: F401
    except ImportError:
        return {}
    figures: dict[str, float] = {}
    rows: list[tuple[str, Policy | None, Callable[[int], dict[str, Any]], Callable[[int], Any]]] = [
        (
            "middleware_first_call",
            None,
            lambda mark: {"messages": _langchain_messages(mark)},
            lambda mark: None,
        ),
        (
            "middleware_first_call_clearing",
            CLEARING_IN_BATCHES,
            checkpointed_state,
            lambda mark: None,
        ),
        # Half the history under 200 messages, so that a quick run's small marks compact too.
        (
            "middleware_first_call_compaction",
            None,
            checkpointed_state,
            lambda mark: ("messages", min(100, mark // 2)),
        ),
    ]
    for name, policy, history, trigger in rows:
        drivers = {
            mark: _FirstCallDriver(mark, policy, history(mark), trigger(mark)) for mark in marks
        }
        timed = _interleaved({mark: driver.step for mark, driver in drivers.items()}, samples)
        figures.update(_figures(name, timed))
    return figures


# -- compaction at the default trigger --------------------------------------------------------

TRIGGER_TURNS = 6_000
"""A run that has not compacted after this many turns is a broken row, not a figure."""
TRIGGER_SAMPLES = 3
"""Runs to the trigger per entry point by default (each about a minute of CPU)."""


class _Compactions:
    """An event sink that counts the compactions that finished."""

    def __init__(self) -> None:
        self.finished = 0

    def __call__(self, event: Any) -> None:
        from unbounded.events import CompactionFinished

        if isinstance(event, CompactionFinished):
            self.finished += 1


def session_at_trigger(window: int | None = None, nth: int = 1) -> tuple[float, int]:
    """One `Session` of the default policy run turn by turn until it compacts for the `nth`
    time: that turn's CPU seconds (the summarizer's call not counted) and the history's
    length before it. `window`: the context window (None: the model's)."""
    summarizer = _TimedSummarizer()
    compactions = _Compactions()
    session = Session(
        SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, context_window=window),
        policy=Policy(),
        clock=StepClock(),
        summarizer=summarizer,
        events=compactions,
    )
    loop = asyncio.new_event_loop()
    try:
        session.add_user("Refactor the modules one by one.")
        for index in range(1, TRIGGER_TURNS * nth):
            result = [tool_result(index - 1)] if index > 1 else []
            length = len(session.messages)
            spent = summarizer.spent
            before = compactions.finished
            started = time.thread_time()
            if result:
                session.add_tool_results(result)
            request = loop.run_until_complete(session.prepare())
            paused = time.thread_time()
            # The reply reports the size of the request it answers, as the API would: the
            # estimate of what prepare built (after a clearing, less than the session's count
            # until this usage arrives). Not timed.
            answer = reply(index, session.estimate_request_tokens(request["messages"]))
            resumed = time.thread_time()
            session.record(answer)
            elapsed = time.thread_time() - started - (resumed - paused) - (summarizer.spent - spent)
            if compactions.finished > before and compactions.finished >= nth:
                return elapsed, length  # this turn made the nth compaction
    finally:
        session.close()
        loop.close()
    raise RuntimeError("the session never compacted")


def dropin_at_trigger(window: int | None = None, nth: int = 1) -> tuple[float, int]:
    """One wrapped client of the default policy, the caller sending the whole history, run
    until it compacts for the `nth` time: that `messages.create`'s CPU seconds (the SDK's
    own create and the summarizer's call not counted) and the caller's history length."""
    import anthropic
    from anthropic.types import Message

    from unbounded.integrations import wrap

    sdk = anthropic.Anthropic(api_key="benchmark", base_url="http://127.0.0.1:9")
    summarizer = _TimedSummarizer()
    compactions = _Compactions()
    index = [0]
    sdk_time = [0.0]

    @functools.wraps(sdk.messages.create)
    def create(**kwargs: Any) -> Any:
        started = time.thread_time()
        # The reply reports the size of the request it answers, as the API would (the
        # estimate of the messages sent).
        sent = client.session.estimate_request_tokens(kwargs["messages"])
        body = {
            **reply(index[0], sent),
            "type": "message",
            "role": "assistant",
        }
        raw = _RawReply(Message.model_validate(body), body)
        sdk_time[0] += time.thread_time() - started
        return raw

    sdk.messages.with_raw_response.create = create
    client = wrap(
        sdk, context_window=window, clock=StepClock(), summarizer=summarizer, events=compactions
    )
    history: list[Any] = [{"role": "user", "content": "Refactor the modules one by one."}]
    try:
        for turn in range(1, TRIGGER_TURNS * nth):
            index[0] = turn
            spent = summarizer.spent
            sdk_time[0] = 0.0
            before = compactions.finished
            started = time.thread_time()
            message = client.messages.create(
                model=MODEL, max_tokens=4_096, system=SYSTEM, tools=TOOLS, messages=history
            )
            elapsed = time.thread_time() - started - (summarizer.spent - spent) - sdk_time[0]
            if compactions.finished > before and compactions.finished >= nth:
                return elapsed, len(history)  # this call made the nth compaction
            history.append({"role": "assistant", "content": message.content})
            history.append({"role": "user", "content": [tool_result(turn)]})
    finally:
        client.close()
    raise RuntimeError("the drop-in never compacted")


def _sent_tokens(messages: Sequence[Any]) -> int:
    """What the scripted model reports it was sent: a quarter of the characters of the
    messages' content and tool calls, plus the tools' schemas."""
    chars = 2_400
    for message in messages:
        content = message.content
        chars += len(content) if isinstance(content, str) else len(json.dumps(content))
        for call in getattr(message, "tool_calls", None) or ():
            chars += 60 + len(call["args"].get("path", ""))  # the id, name and argument
    return chars // 4


def middleware_at_trigger(window: int | None = None, nth: int = 1) -> tuple[float, int]:
    """One agent (`create_agent`) with `UnboundedMiddleware(MODEL)` of the
    default policy, run model call after model call until the middleware compacts for the
    `nth` time: that call's hooks' CPU seconds (the summarizer's call not counted) and the
    messages it had."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from unbounded.integrations.langchain import UnboundedMiddleware

    summarizer = _TimedSummarizer()
    compactions = _Compactions()
    found: list[tuple[float, int]] = []

    class Timed(UnboundedMiddleware):
        pending = 0.0
        length = 0

        def before_model(self, state: Any, runtime: Any) -> Any:
            spent = summarizer.spent
            started = time.thread_time()
            try:
                return super().before_model(state, runtime)
            finally:
                self.pending = time.thread_time() - started - (summarizer.spent - spent)
                self.length = len(state["messages"])

        def after_model(self, state: Any, runtime: Any) -> Any:
            started = time.thread_time()
            try:
                return super().after_model(state, runtime)
            finally:
                if compactions.finished >= nth and not found:
                    found.append((self.pending + time.thread_time() - started, self.length))

    class Looping(GenericFakeChatModel):
        step: int = 0

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            self.step += 1
            done = bool(found) or self.step >= TRIGGER_TURNS * nth
            prompt = _sent_tokens(messages)
            call = tool_call(self.step)
            answer = AIMessage(
                content="Done." if done else f"Step {self.step}: next module.",
                tool_calls=[]
                if done
                else [
                    {"id": call["id"], "name": "read_file", "args": {"path": call["input"]["path"]}}
                ],
                id=f"ai-{self.step}",
                usage_metadata={
                    "input_tokens": prompt,
                    "output_tokens": 40,
                    "total_tokens": prompt + 40,
                    "input_token_details": {"cache_read": max(0, prompt - 620)},
                },
            )
            return ChatResult(generations=[ChatGeneration(message=answer)])

    middleware = Timed(
        MODEL,
        context_window=window,
        summarizer=summarizer,
        summary_retries=0,
        events=compactions,
    )
    # No checkpointer: one invoke runs the whole loop (a checkpointer would store the whole
    # message list at each of its thousands of steps; the middleware's work is the same).
    agent = create_agent(Looping(messages=iter(())), tools=[read_file], middleware=[middleware])
    config: Any = {
        "configurable": {"thread_id": "trigger"},
        "recursion_limit": 3 * TRIGGER_TURNS * nth,
    }
    agent.invoke({"messages": [HumanMessage("Refactor the modules one by one.")]}, config)
    if not found:
        raise RuntimeError("the middleware never compacted")
    return found[0]


def at_trigger(samples: int, nth: int = 1) -> dict[str, float]:
    """The `nth` compaction at the default policy's trigger, per entry point, `samples` runs
    each (the entry points taken in turn, run after run, so load falls on them alike)."""
    runs: dict[str, Callable[..., tuple[float, int]]] = {"session": session_at_trigger}
    try:
        import anthropic  # noqa: F401

        runs["dropin"] = dropin_at_trigger
    except ImportError:
        pass
    try:
        import langchain.agents.middleware  # noqa: F401

        runs["middleware"] = middleware_at_trigger
    except ImportError:
        pass
    timed: dict[str, list[float]] = {name: [] for name in runs}
    lengths: dict[str, int] = {}
    for _ in range(samples):
        for name, run_one in runs.items():
            elapsed, lengths[name] = run_one(nth=nth)
            timed[name].append(elapsed)
    figures: dict[str, float] = {}
    for name, taken in timed.items():
        figures[f"{name}_compaction_us"] = round(statistics.median(taken) * 1e6, 1)
        figures[f"{name}_compaction_max_us"] = round(max(taken) * 1e6, 1)
        figures[f"{name}_compaction_messages"] = lengths[name]
    figures["compaction_nth"] = nth
    return figures


def trigger_table(figures: dict[str, float]) -> str:
    """The compaction-at-the-default-trigger figures as one table."""
    nth = int(figures.get("compaction_nth", 1))
    title = "compaction at the default trigger" if nth == 1 else f"compaction {nth} of each run"
    lines = [f"{title:<34}  messages   median / slowest µs  <=20ms"]
    for name, label in (
        ("session", "Session turn"),
        ("dropin", "drop-in messages.create"),
        ("middleware", "middleware hooks in create_agent"),
    ):
        if f"{name}_compaction_us" not in figures:
            continue
        slowest = figures[f"{name}_compaction_max_us"]
        cell = f"{figures[f'{name}_compaction_us']:,.0f} / {slowest:,.0f}"
        lines.append(
            f"{label:<34}  {figures[f'{name}_compaction_messages']:>8,.0f}  {cell:>21}  "
            + ("ok" if slowest <= STEP_LIMIT_US else "OVER")
        )
    return "\n".join(lines)


def middleware_per_call(marks: Sequence[int], samples: int) -> dict[str, float]:
    """Our middleware's and LangChain's own stack's hooks per model call inside create_agent."""
    try:
        from langchain.agents.middleware import (
            ClearToolUsesEdit,
            ContextEditingMiddleware,
            SummarizationMiddleware,
        )
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
    except ImportError:
        return {}
    from unbounded.integrations.langchain import UnboundedMiddleware

    calls: list[float] = []
    pending = [0.0]

    class TimedOurs(UnboundedMiddleware):
        def before_model(self, state: Any, runtime: Any) -> Any:
            started = time.thread_time()
            try:
                return super().before_model(state, runtime)
            finally:
                pending[0] = time.thread_time() - started

        def after_model(self, state: Any, runtime: Any) -> Any:
            started = time.thread_time()
            try:
                return super().after_model(state, runtime)
            finally:
                calls.append(pending[0] + time.thread_time() - started)

    class TimedSummarization(SummarizationMiddleware):
        def before_model(self, state: Any, runtime: Any) -> Any:
            started = time.thread_time()
            try:
                return super().before_model(state, runtime)
            finally:
                pending[0] = time.thread_time() - started

    class TimedEditing(ContextEditingMiddleware):
        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            inner = [0.0]

            def model_call(edited: Any) -> Any:
                started = time.thread_time()
                try:
                    return handler(edited)
                finally:
                    inner[0] = time.thread_time() - started

            started = time.thread_time()
            try:
                return super().wrap_model_call(request, model_call)
            finally:
                calls.append(pending[0] + time.thread_time() - started - inner[0])

    figures: dict[str, float] = {}
    ours: dict[int, Callable[[], list[float]]] = {}
    clearing: dict[int, Callable[[], list[float]]] = {}
    theirs: dict[int, Callable[[], list[float]]] = {}
    for mark in marks:
        history = _langchain_messages(mark)
        driver = _AgentDriver([TimedOurs(MODEL, context_window=WINDOW)], list(history), calls)
        ours[mark] = driver.step
        busy = TimedOurs(MODEL, context_window=WINDOW, policy=CLEARING_DUE)
        clearing[mark] = _AgentDriver([busy], list(history), calls).step
        summary_model = FakeListChatModel(responses=["summary"])
        stack = [
            TimedSummarization(model=summary_model, trigger=("tokens", 100_000_000)),
            TimedEditing(edits=[ClearToolUsesEdit()]),
        ]
        theirs[mark] = _AgentDriver(stack, list(history), calls).step
    rounds = -(-samples // CALLS_PER_INVOKE)  # enough invokes for `samples` calls
    timed_ours = _interleaved(ours, rounds)
    timed_clearing = _interleaved(clearing, rounds)
    timed_theirs = _interleaved(theirs, rounds)
    figures.update(_figures("middleware", timed_ours))
    figures.update(_figures("middleware_clearing", timed_clearing))
    figures.update(_figures("langchain", timed_theirs))
    return figures


def _stored_bytes(saver: Any) -> dict[str, int]:
    """Bytes an `InMemorySaver` holds, by channel: its checkpoints' channel values and the
    pending writes of the steps (each a serialized copy of what a node wrote)."""
    held: dict[str, int] = {}
    for (_thread, _ns, channel, _version), (_kind, blob) in saver.blobs.items():
        held[channel] = held.get(channel, 0) + len(blob)
    for writes in saver.writes.values():
        for _task, channel, (_kind, blob), _path in writes.values():
            held[channel] = held.get(channel, 0) + len(blob)
    return held


def checkpoint_writes(mark: int, invokes: int = 4) -> dict[str, float]:
    """What the checkpointer stores per invoke (`CALLS_PER_INVOKE` tool rounds and the
    answer) of the clearing-due agent at `mark` messages, by channel, in bytes: the
    middleware's private keys against LangGraph's `messages`. Not timed (deterministic)."""
    from unbounded.integrations.langchain import UnboundedMiddleware

    middleware = UnboundedMiddleware(MODEL, context_window=WINDOW, policy=CLEARING_DUE)
    driver = _AgentDriver([middleware], _langchain_messages(mark), [])
    grown: dict[str, int] = {}
    for _ in range(invokes):
        before = _stored_bytes(driver.saver)
        driver.step()
        for channel, held in _stored_bytes(driver.saver).items():
            grown[channel] = grown.get(channel, 0) + held - before.get(channel, 0)
    return {
        f"checkpoint_{channel}_bytes_per_invoke": grown.get(channel, 0) / invokes
        for channel in ("messages", "unbounded", "unbounded_turn")
    }


def run(marks: Sequence[int] = MARKS, samples: int = SAMPLES) -> dict[str, float]:
    """Every figure of this benchmark."""
    marks = sorted(marks)
    figures: dict[str, float] = {}
    steps: list[Callable[[Sequence[int], int], dict[str, float]]] = [
        session_per_turn,
        dropin_per_call,
        middleware_per_call,
        first_call_per_mark,
    ]
    for step in steps:
        figures.update(step(marks, samples))
    return figures


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--marks", default=",".join(map(str, MARKS)), help="history sizes")
    parser.add_argument(
        "--samples",
        type=int,
        help=f"calls timed per mark ({SAMPLES}); with --at-trigger, runs ({TRIGGER_SAMPLES})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--at-trigger",
        action="store_true",
        help="instead: only the compaction at the default policy's trigger, per entry point",
    )
    parser.add_argument(
        "--compaction",
        type=int,
        default=1,
        metavar="N",
        help="with --at-trigger: time the Nth compaction of each run (1)",
    )
    parser.add_argument(
        "--checkpoint-writes",
        type=int,
        metavar="MARK",
        help="instead: the bytes a checkpointer stores per invoke at MARK messages",
    )
    args = parser.parse_args(argv)
    if args.samples is not None and args.samples < 1:
        parser.error(f"--samples must be at least 1, not {args.samples}")
    if args.compaction < 1:
        parser.error(f"--compaction must be at least 1, not {args.compaction}")
    if args.checkpoint_writes is not None:
        stored = checkpoint_writes(args.checkpoint_writes)
        print(json.dumps(stored, indent=2))
        return stored
    if args.at_trigger:
        figures = at_trigger(args.samples or TRIGGER_SAMPLES, args.compaction)
        print(json.dumps(figures, indent=2) if args.json else trigger_table(figures))
        return figures
    marks = [int(mark) for mark in args.marks.split(",")]
    figures = run(marks, args.samples or SAMPLES)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(table(figures, sorted(marks)))
    return figures


def table(figures: dict[str, float], marks: Sequence[int]) -> str:
    """The figures as one table: per entry point, the median and slowest call (µs) at each
    mark, the growth from the first mark to the last, and for ours both checks (growth within
    `GROWTH_LIMIT`, no call over `STEP_LIMIT_US`)."""
    width = max(len(label) for label in ENTRY_POINTS.values())
    head = ["entry point".ljust(width), *(f"{mark:>7,} msgs".rjust(19) for mark in marks)]
    lines = ["  ".join([*head, "growth".rjust(7), f"<={GROWTH_LIMIT:g}x", "<=20ms"])]
    lines.append("  ".join(["".ljust(width), *("median / slowest µs".rjust(19) for _ in marks)]))
    for name, label in ENTRY_POINTS.items():
        if f"{name}_us_at_{marks[0]}" not in figures:
            continue
        cells = [
            f"{figures[f'{name}_us_at_{m}']:,.0f} / {figures[f'{name}_max_us_at_{m}']:,.0f}"
            for m in marks
        ]
        growth = figures.get(f"{name}_growth", 1.0)
        checks = ["", ""]
        if name in OURS:
            slowest = max(figures[f"{name}_max_us_at_{m}"] for m in marks)
            checks = [
                "ok" if growth <= GROWTH_LIMIT else "OVER",
                "ok" if slowest <= STEP_LIMIT_US else "OVER",
            ]
        row = [label.ljust(width), *(cell.rjust(19) for cell in cells), f"{growth:.2f}x".rjust(7)]
        lines.append("  ".join([*row, checks[0].ljust(5), checks[1]]).rstrip())
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
