"""The per-turn steps that reuse the previous turn's work equal their from-scratch twins.

`CacheBreakpointPlanner` (markers placed only past the first changed message) against
`plan_cache_breakpoints`, and a `PromptCacheBreakDetector(messages_immutable=True)` (digests of
the messages shared with the previous request not looked at again) against `snapshot_request`:
on generated request sequences that respect the pipeline's rule (a changed message is a new
dict), and on every turn of replayed sessions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, FIXTURES
from unbounded.caching.blocks import canonical_json
from unbounded.caching.break_detector import PromptCacheBreakDetector, snapshot_request
from unbounded.caching.breakpoints import (
    BreakpointPlan,
    CacheBreakpointPlanner,
    plan_cache_breakpoints,
)
from unbounded.demo import demo_transcript
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.prefix import shared_prefix_length
from unbounded.model.request import ProviderRequest
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

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


def _sessions() -> Iterator[Any]:
    yield pytest.param(lambda: demo_transcript(), id="demo")
    yield pytest.param(lambda: load_transcript(FIXTURES / "session_2_1.jsonl"), id="fixture")
    corpus = (
        sorted(
            (p for p in CORPUS.glob("*.jsonl") if "agent-" not in p.name),
            key=lambda p: p.stat().st_size,
        )
        if CORPUS.is_dir()
        else []
    )
    if corpus:
        yield pytest.param(lambda: load_transcript(corpus[-1]), id="corpus-largest")


@pytest.mark.parametrize("load", list(_sessions()))
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
        expected = plan_cache_breakpoints(request, **options)
        assert plan == expected
        assert canonical_json(plan.request) == canonical_json(expected.request)
        turns[0] += 1
        return plan

    monkeypatch.setattr(CacheBreakpointPlanner, "plan", checked)
    report = replay_session(load(), ReplayOptions(policy=Policy(), baselines=False))
    assert report.calls > 3 and turns[0] >= report.calls
    assert reused[0] >= reused[1] * 0.75 or reused[1] < 200  # incremental for real
