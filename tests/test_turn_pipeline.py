"""The per-turn steps that reuse the previous turn's work equal their from-scratch twins.

`CacheBreakpointPlanner` (markers placed only past the first changed message) against
`plan_cache_breakpoints`, and a `PromptCacheBreakDetector(messages_immutable=True)` (digests of
the messages shared with the previous request not looked at again) against `snapshot_request`:
on generated request sequences that respect the pipeline's rule (a changed message is a new
dict), and on every turn of replayed sessions.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_caching_incremental import _sessions as replayed_sessions
from unbounded.caching.blocks import canonical_json
from unbounded.caching.break_detector import PromptCacheBreakDetector, snapshot_request
from unbounded.caching.breakpoints import (
    BreakpointPlan,
    CacheBreakpointPlanner,
    plan_cache_breakpoints,
)
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.prefix import shared_prefix_length, shared_prefix_length_own
from unbounded.model.request import ProviderRequest
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_shared_prefix_length_is_the_first_difference() -> None:
    rng = random.Random(7)
    for _ in range(2_000):
        new = [rng.randint(0, 2) for _ in range(rng.randint(0, 10))]
        old = [rng.randint(0, 2) for _ in range(rng.randint(0, 10))]
        expected = 0
        while expected < min(len(new), len(old)) and new[expected] == old[expected]:
            expected += 1
        assert shared_prefix_length(new, old) == expected


@SETTINGS
@given(
    size=st.integers(0, 300),
    changes=st.lists(st.integers(0, 299), max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 300)),
    added=st.integers(0, 4),
    as_tuple=st.booleans(),
)
def test_the_copy_free_prefix_is_the_first_difference_and_leaves_its_list_alone(
    size: int, changes: list[int], cut: int | None, added: int, as_tuple: bool
) -> None:
    """`shared_prefix_length_own` (the caller's own list grown for one comparison, then put
    back) finds what `shared_prefix_length` finds: a change near the end or far from it, a
    shorter or longer input, a tuple."""
    own = [object() for _ in range(size)]
    before = list(own)
    new = list(own)
    for index in changes:
        if index < len(new):
            new[index] = object()  # a replaced message: a new object at that position
    if cut is not None:
        new = new[:cut]
    new += [object() for _ in range(added)]
    given: Any = tuple(new) if as_tuple else new
    expected = 0  # counted one by one; a tuple never equals a list (nothing is reused)
    while (
        not as_tuple and expected < min(len(new), size) and new[expected] is before[expected]
    ):
        expected += 1
    assert shared_prefix_length_own(given, own) == expected
    assert shared_prefix_length(given, before) == expected
    assert len(own) == len(before) and all(map(operator.is_, own, before))


def assert_same(planner: CacheBreakpointPlanner, request: ProviderRequest, ttl: Any) -> None:
    """The planner's plan is the from-scratch one, in value and in JSON."""
    before = canonical_json(request)
    plan = planner.plan(request, ttl=ttl)
    expected = plan_cache_breakpoints(request, ttl=ttl)
    assert plan == expected
    assert plan.marked_messages == expected.marked_messages
    assert canonical_json(plan.request) == canonical_json(expected.request)
    assert canonical_json(request) == before, "the input must not be modified"


texts = st.text(alphabet="ab \n", max_size=5)
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda t: {"type": "text", "text": t, "cache_control": {"type": "ephemeral"}}, texts),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, texts),
    st.builds(lambda t: {"type": "tool_result", "tool_use_id": "x", "content": t}, texts),
)
message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(texts, st.lists(block, max_size=3)),
)
EDITS = st.sampled_from(["append", "append", "replace", "drop", "plan", "equal_copy"])


@SETTINGS
@given(data=st.data(), start=st.lists(message, max_size=4), steps=st.integers(1, 10))
def test_incremental_steps_equal_their_twins(
    data: st.DataObject, start: list[dict[str, Any]], steps: int
) -> None:
    planner = CacheBreakpointPlanner()
    detector = PromptCacheBreakDetector(messages_immutable=True)
    messages = list(start)
    for _ in range(steps):
        edit = data.draw(EDITS)
        if edit == "append" or not messages:
            messages.append(data.draw(message))
        elif edit == "replace":  # a new dict, as microcompaction makes
            messages[data.draw(st.integers(0, len(messages) - 1))] = data.draw(message)
        elif edit == "drop":  # a compaction
            del messages[: data.draw(st.integers(1, len(messages)))]
        elif edit == "equal_copy":
            index = data.draw(st.integers(0, len(messages) - 1))
            messages[index] = dict(messages[index])
        elif edit == "plan":  # the previous request's messages, markers and all
            planned = plan_cache_breakpoints(cast(ProviderRequest, {"messages": messages}))
            messages = list(planned.request["messages"])
        request = cast(ProviderRequest, {"model": "m", "system": "s", "messages": list(messages)})
        assert_same(planner, request, data.draw(st.sampled_from(["5m", "1h"])))
        warm = detector.record_prompt_state(request, query_source="main", now=0)
        assert warm == snapshot_request(request)


# The same sessions as the from-scratch replay test (the demo, a fixture, the largest corpus one).
@pytest.mark.parametrize("load", list(replayed_sessions()))
def test_every_replayed_turn_plans_as_from_scratch(
    load: Callable[[], Transcript], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every turn of a replayed session the incremental planner's plan is the
    from-scratch one, and it redoes only what follows the first changed message."""
    real_plan = CacheBreakpointPlanner.plan
    turns = [0]
    reused = [0, 0]  # messages before the first change, messages in all

    def checked(self: CacheBreakpointPlanner, request: ProviderRequest, **options: Any) -> Any:
        inputs = list(request.get("messages") or [])
        reused[0] += shared_prefix_length(inputs, self._inputs)
        reused[1] += len(inputs)
        plan: BreakpointPlan = real_plan(self, request, **options)
        options.pop("unchanged_prefix", None)  # the session's hint: no from-scratch twin
        expected = plan_cache_breakpoints(request, **options)
        assert plan == expected
        assert canonical_json(plan.request) == canonical_json(expected.request)
        turns[0] += 1
        return plan

    monkeypatch.setattr(CacheBreakpointPlanner, "plan", checked)
    report = replay_session(load(), ReplayOptions(policy=Policy(), baselines=False))
    assert report.calls > 3 and turns[0] >= report.calls
    assert reused[0] >= reused[1] * 0.75 or reused[1] < 200  # incremental for real


# -- the drop-in: the caller's repeated messages are not printed again ----------------------

caller_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda t: {"type": "text", "text": t, "cache_control": {"type": "ephemeral"}}, texts),
    st.builds(
        lambda t: {"type": "text", "text": t, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        texts,
    ),
)
caller_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(texts.filter(bool), st.lists(caller_block, min_size=1, max_size=3)),
)
CALLS = st.sampled_from(
    ["append", "append", "recall", "answer", "window", "equal_copy", "fresh_list"]
)


@SETTINGS
@given(data=st.data(), steps=st.integers(1, 12))
def test_seen_messages_give_the_from_scratch_continuation(data: st.DataObject, steps: int) -> None:
    """However a caller's lists follow each other, the continuation computed from the kept
    prints (and the prefix a previous call verified) is the one computed from scratch."""
    from unbounded.errors import ConfigError
    from unbounded.integrations._anthropic_markers import longest_ttl, message_markers
    from unbounded.integrations._anthropic_prints import (
        MessagePrint,
        SeenMessages,
        message_print,
        new_messages,
    )

    seen = SeenMessages()
    known: list[MessagePrint] = []
    recall_ids: set[str] = set()
    verified = 0
    messages: list[Any] = []
    calls = 0
    for _ in range(steps):
        call = data.draw(CALLS)
        if call == "window" and len(messages) > 2:
            messages = messages[data.draw(st.integers(1, len(messages) - 1)) :]
        elif call == "equal_copy" and messages:
            index = data.draw(st.integers(0, len(messages) - 1))
            messages = [*messages[:index], dict(messages[index]), *messages[index + 1 :]]
        elif call == "fresh_list":
            messages = list(messages)
        elif call == "recall":  # a recall call the caller sends back (its result follows)
            calls += 1
            use = {"type": "tool_use", "id": f"r{calls}", "name": "recall", "input": {}}
            messages = [*messages, {"role": "assistant", "content": [use]}]
        elif call == "answer" and calls:  # a result for a recall call already made
            result = {"type": "tool_result", "tool_use_id": f"r{calls}", "content": "x"}
            messages = [*messages, {"role": "user", "content": [result]}]
        else:
            messages = [*messages, data.draw(caller_message)]
        same = seen.read(list(messages), recall_ids)
        assert seen.longest_ttl == longest_ttl(message_markers(messages))
        try:
            scratch = new_messages(messages, known, "auto", recall_ids)
        except ConfigError:
            scratch = None
        try:
            kept = new_messages(
                messages,
                known,
                "auto",
                recall_ids,
                prints=seen.prints,
                verified=min(verified, same),
            )
        except ConfigError:
            kept = None
        assert kept == scratch
        verified = 0
        if kept is None:
            continue
        if kept.relation in ("continues", "window", "new", "unrelated"):
            known.extend(kept.prints[kept.start :])
            if kept.relation == "continues" and len(known) == len(messages):
                verified = len(messages)
        if data.draw(st.booleans()):  # the model replies; the caller echoes it next time
            reply = data.draw(caller_message)
            known.append(message_print("assistant", reply["content"]))
            messages = [*messages, {**reply, "role": "assistant"}]


def test_the_blocking_runner_keeps_one_loop_and_closes_it() -> None:
    import asyncio

    from unbounded.blocking import BlockingRunner

    runner = BlockingRunner()

    async def loop_of() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first = runner.run(loop_of())
    assert runner.run(loop_of()) is first  # one loop for every call
    started: list[asyncio.Task[None]] = []

    async def leave_a_task() -> None:
        started.append(asyncio.ensure_future(asyncio.sleep(3600)))

    runner.run(leave_a_task())
    runner.close()
    assert first.is_closed() and started[0].cancelled()

    async def inside() -> asyncio.AbstractEventLoop:
        return runner.run(loop_of())  # a loop runs here: the call goes to a worker thread

    assert asyncio.run(inside()) is not first


# -- the LangChain middleware: what a call keeps from the last one ------------------------


@pytest.mark.parametrize("seed", range(6))
def test_the_middleware_decides_as_a_fresh_one_on_every_step(seed: int) -> None:
    """An agent run (tool rounds with large results, clearing applied to the state as the
    agent applies it, now and then a step that rewrites the list): on every step the kept
    middleware returns what a new middleware (everything converted, counted and scanned
    again) returns for the same state."""
    pytest.importorskip("langchain.agents.middleware")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from unbounded.integrations.langchain import UnboundedMiddleware

    rng = random.Random(seed)
    policy = Policy(
        microcompact_protect_recent_tokens=3_000,
        microcompact_min_savings=2_000,
        auto_compact_enabled=False,
        warning_buffer=10**9,  # at the warning level: clearing may rewrite a warm cache
    )

    def fresh() -> UnboundedMiddleware:
        return UnboundedMiddleware("claude-sonnet-4-6", policy=policy)

    def without_uuids(value: Any) -> Any:  # a record's uuid and time: drawn at conversion
        if isinstance(value, dict):
            return {k: without_uuids(v) for k, v in value.items() if k not in ("uuid", "timestamp")}
        if isinstance(value, list):
            return [without_uuids(v) for v in value]
        return value

    def described(update: dict[str, Any] | None) -> Any:
        if update is None:
            return None
        messages = [(type(m).__name__, m.id, str(m.content)) for m in update.get("messages", [])]
        return messages, without_uuids({k: v for k, v in update.items() if k != "messages"})

    kept = fresh()
    clearing_steps = 0
    state: dict[str, Any] = {"messages": [HumanMessage(content="Go through the files.", id="h0")]}
    for step in range(40):
        tool = rng.choice(["read_file", "grep", "list"])
        call = {"id": f"c{step}", "name": tool, "args": {"path": f"/f{step}"}}
        reply = AIMessage(content=f"step {step}", tool_calls=[call], id=f"a{step}")
        body = "line of output\n" * rng.randint(50, 400)
        result = ToolMessage(content=body, tool_call_id=f"c{step}", id=f"t{step}")
        messages = [*state["messages"], reply, result]
        if rng.random() < 0.1:  # a rewritten list: a new human turn in place of the last one
            messages = [*messages[:-2], HumanMessage(content=f"new {step}", id=f"n{step}")]
        state["messages"] = messages
        expected = fresh().before_model(dict(state), None)  # type: ignore[arg-type]
        update = kept.before_model(dict(state), None)  # type: ignore[arg-type]
        assert described(update) == described(expected), f"step {step}"
        if update:  # applied as the agent applies it
            clearing_steps += bool(update.get("messages"))
            replaced = {m.id: m for m in update.get("messages", [])}
            state["messages"] = [replaced.get(m.id, m) for m in state["messages"]]
            state.update({k: v for k, v in update.items() if k != "messages"})
    assert clearing_steps > 0  # results were cleared along the way


def test_the_turn_speed_benchmark_reports_every_entry_point_at_every_mark() -> None:
    """`benchmarks/turn_speed.py` (part of `benchmarks/run.py --json`) times each entry point
    at each history size and reports each figure; nothing here is timed against a bound."""
    import importlib.util
    import math
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "turn_speed.py"
    spec = importlib.util.spec_from_file_location("turn_speed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = module.run((12, 20, 30), samples=2)
    names = ["session", "dropin"]
    try:
        import langchain_core  # noqa: F401

        names += [
            "middleware",
            "middleware_clearing",
            "middleware_first_call",
            "middleware_first_call_clearing",
            "middleware_first_call_compaction",
            "langchain",
        ]
    except ImportError:
        pass
    marks = (12, 20, 30)
    keys = [f"{name}_{kind}_at_{mark}" for name in names for kind in ("us", "max_us") for mark in marks]
    keys += [f"{name}_growth" for name in names]
    # Every later mark against the first (the Must-show compares 10,000 with 200 in one run).
    keys += [f"{name}_ratio_{mark}_to_12" for name in names for mark in (20, 30)]
    assert sorted(figures) == sorted(keys)
    # One table, a row per entry point, the checks beside ours only.
    rows = module.table(figures, marks).splitlines()[2:]
    width = max(len(label) for label in module.ENTRY_POINTS.values())
    assert [row[:width].strip() for row in rows] == [module.ENTRY_POINTS[name] for name in module.ENTRY_POINTS if name in names]
    for row in rows:
        ends = row.split()[-2:]
        if "LangChain" in row:
            assert ends[-1].endswith("x")  # its growth: no check of ours applies to it
        else:
            assert {ends[0], ends[1]} <= {"ok", "OVER"}
    assert all(math.isfinite(figures[key]) and figures[key] > 0 for key in keys)
    for name in names:
        for mark in (20, 30):
            ratio = figures[f"{name}_us_at_{mark}"] / figures[f"{name}_us_at_12"]
            assert figures[f"{name}_ratio_{mark}_to_12"] == pytest.approx(ratio, rel=0.02, abs=0.01)
    # The messages really grew to each mark: the slowest call of a mark is one of its own.
    assert all(figures[f"{name}_us_at_30"] <= figures[f"{name}_max_us_at_30"] for name in names)


def test_a_thousand_turn_session_snapshots_and_clears_as_from_scratch() -> None:
    """1,000 turns of a tool loop through one `Session` (its detector and microcompaction
    reuse the last turn's work, found without copying the history): every 25th request's
    snapshot equals one taken from scratch, and its messages equal the history with every
    clear applied from scratch."""
    import asyncio
    from datetime import datetime, timedelta, timezone

    from unbounded.compaction.micro import _apply_all
    from unbounded.session import Session, SessionConfig

    moments = iter(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=2 * n) for n in range(10**6))
    session = Session(
        SessionConfig(model="claude-sonnet-4-6", system="You are a coding agent.", context_window=200_000),
        policy=Policy(auto_compact_enabled=False),
        clock=lambda: next(moments),
    )
    session.add_user("Refactor the modules one by one.")
    checked = 0

    async def run() -> None:
        nonlocal checked
        for turn in range(1, 1_001):
            if turn > 1:
                text = f"line {turn}\n" * (40 + turn % 60)
                session.add_tool_results([{"type": "tool_result", "tool_use_id": f"toolu_{turn - 1:05d}", "content": text}])
            request = await session.prepare()
            if turn % 25 == 0:
                snapshot = session.detector.snapshot(session.config.query_source)
                assert snapshot == snapshot_request(request)
                view = _apply_all(session.micro, session.transcript.messages)
                assert [m["content"] for m in view] == [
                    [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
                    if isinstance(m["content"], list)
                    else m["content"]
                    for m in request["messages"]
                ]
                checked += 1
            session.record(
                {
                    "id": f"msg_{turn:05d}",
                    "model": "claude-sonnet-4-6",
                    "stop_reason": "tool_use",
                    "content": [
                        {"type": "text", "text": f"Step {turn}."},
                        {"type": "tool_use", "id": f"toolu_{turn:05d}", "name": "Read", "input": {"path": f"/m{turn % 300}.py"}},
                    ],
                    "usage": {"input_tokens": 10, "cache_read_input_tokens": 400 * turn, "output_tokens": 20},
                }
            )

    asyncio.run(run())
    session.close()
    assert checked == 40
    assert session.micro.stats.results_cleared > 0  # the clears were exercised too
