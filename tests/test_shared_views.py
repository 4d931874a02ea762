"""The per-turn lists a step reads without copying equal the copies they stand for.

`MessageNormalizer.borrowed_messages` is the normalizer's own list when nothing needs a repair
or a trim, and `microcompact(..., share_view=True)` returns the microcompaction state's own
view (or its input when nothing is cleared). `Session.prepare` reads both within one turn and
hands out a new list, so no request it returned changes afterwards.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from test_micro_incremental import conversations
from test_micro_properties import policies
from unbounded.compaction.micro import MicrocompactState, microcompact
from unbounded.model.normalize import MessageNormalizer
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

PLAIN = [
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
]
ODD_ENDINGS: dict[str, list[dict[str, Any]]] = {
    "assistant first": [{"role": "assistant", "content": "Hello."}],
    "thinking last": [
        *PLAIN,
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "h", "signature": "s"}]},
    ],
    "whitespace last": [*PLAIN[:1], {"role": "assistant", "content": "Done.  \n"}],
    "unanswered call": [
        *PLAIN[:1],
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
        },
        {"role": "user", "content": "What did it say?"},
    ],
}


def normalizer_of(messages: list[dict[str, Any]]) -> MessageNormalizer:
    normalizer = MessageNormalizer()
    for message in messages:
        normalizer.append_message(message)
    return normalizer


def test_a_clean_view_is_lent_not_copied() -> None:
    normalizer = normalizer_of(PLAIN)
    lent = normalizer.borrowed_messages()
    assert lent == normalizer.messages
    assert lent is normalizer.borrowed_messages()  # the normalizer's own list, twice
    assert normalizer.messages is not normalizer.messages  # what the copy would cost


def test_a_view_needing_a_repair_or_a_trim_is_the_repaired_copy() -> None:
    for name, messages in ODD_ENDINGS.items():
        normalizer = normalizer_of(messages)
        assert normalizer.borrowed_messages() == normalizer.messages, name
        # The repaired or trimmed list differs from the kept one: lending that would be wrong.
        assert normalizer.borrowed_messages() != normalizer._messages, name


@SETTINGS
@given(messages=conversations(), policy=policies, data=st.data())
def test_a_shared_view_equals_the_copied_one_turn_after_turn(
    messages: list[dict[str, Any]], policy: Any, data: st.DataObject
) -> None:
    """Two states fed the same turns, one sharing its view: equal messages on every turn, and
    the shared one is the state's own list (the input itself while nothing is cleared)."""
    shared, copied = MicrocompactState(), MicrocompactState()
    handles = data.draw(st.booleans())
    shared.name_handles = copied.name_handles = handles
    for end in range(1, len(messages) + 1, 2):
        view = messages[:end]
        lent = microcompact(view, shared, policy=policy, share_view=True)
        made = microcompact(view, copied, policy=policy)
        assert lent.messages == made.messages
        assert lent.cleared_ids == made.cleared_ids
        own = shared._applied.view if shared._applied is not None else view
        assert lent.messages is own
        assert made.messages is not own


def test_no_request_changes_after_prepare_returned_it() -> None:
    """A tool loop with clears: every request, kept as returned, still equals the deep copy
    taken when it was returned (the steps share lists within a turn, never across)."""
    moments = iter(
        datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=2 * n) for n in range(10**5)
    )
    session = Session(
        SessionConfig(model="claude-sonnet-4-6", system="You code.", context_window=200_000),
        policy=Policy(auto_compact_enabled=False),
        clock=lambda: next(moments),
    )
    session.add_user("Refactor the modules one by one.")
    kept: list[tuple[Any, Any]] = []

    async def run() -> None:
        for turn in range(1, 161):
            if turn > 1:
                text = f"line {turn}\n" * 4_000
                result = {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{turn - 1:04d}",
                    "content": text,
                }
                session.add_tool_results([result])
            request = await session.prepare()
            kept.append((request, copy.deepcopy(request)))
            call = {
                "type": "tool_use",
                "id": f"toolu_{turn:04d}",
                "name": "Read",
                "input": {"path": f"/m{turn}.py"},
            }
            session.record(
                {
                    "id": f"msg_{turn:04d}",
                    "model": "claude-sonnet-4-6",
                    "stop_reason": "tool_use",
                    "content": [{"type": "text", "text": f"Step {turn}."}, call],
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 9_000 * turn,
                        "output_tokens": 20,
                    },
                }
            )

    asyncio.run(run())
    session.close()
    assert session.micro.stats.results_cleared > 0  # clears changed the shared view
    for turn, (request, snapshot) in enumerate(kept, start=1):
        assert request == snapshot, turn


def test_a_turn_without_the_planner_still_hands_out_its_own_list() -> None:
    """Steps that leave out the cache planner (the step that copies the messages) still
    return a request whose list is not microcompaction's."""
    session = Session(SessionConfig(model="claude-sonnet-4-6", system="You code."))
    steps = session._steps
    steps.order = tuple(step for step in steps.order if step.__name__ != "place_breakpoints")
    session.add_user("Hello.")
    request = asyncio.run(session.prepare())
    assert request["messages"] == [{"role": "user", "content": "Hello."}]
    assert request["messages"] is not session.transcript.normalizer._messages
    session.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(script=["big"] * 20 + ["compact", "tool", "big", "user"] * 4)  # clears, compactions
@given(
    script=st.lists(
        st.sampled_from(["tool", "tool", "tool", "big", "user", "compact"]), min_size=5, max_size=60
    )
)
def test_random_turns_give_the_from_scratch_request_and_never_change_it(script: list[str]) -> None:
    """Tool turns with small and large results, user turns, manual compactions: each request
    holds the history with every clear applied from scratch, its snapshot is the one taken
    from scratch, and no request changes after it was returned."""
    from unbounded.caching.break_detector import snapshot_request
    from unbounded.compaction.micro import _apply_all
    from unbounded.providers.extractive import ExtractiveSummarizer

    moments = iter(
        datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=2 * n) for n in range(10**4)
    )
    session = Session(
        SessionConfig(model="claude-sonnet-4-6", system="You code.", context_window=100_000),
        policy=Policy(auto_compact_enabled=False),
        summarizer=ExtractiveSummarizer(),
        clock=lambda: next(moments),
    )
    session.add_user("Start.")
    kept: list[tuple[Any, Any]] = []

    def unmarked(message: Any) -> Any:
        content = message["content"]
        if isinstance(content, str):  # the planner marks a string as one text block
            content = [{"type": "text", "text": content}]
        return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]

    async def run() -> None:
        for turn, step in enumerate(script, start=1):
            if step == "compact":
                await session.compact()
                continue
            if step == "user":
                session.add_user(f"Now step {turn}.")
            request = await session.prepare()
            kept.append((request, copy.deepcopy(request)))
            assert session.detector.snapshot(session.config.query_source) == snapshot_request(
                request
            )
            view = _apply_all(session.micro, session.transcript.normalizer.messages)
            assert [unmarked(m) for m in request["messages"]] == [unmarked(m) for m in view]
            tool_id = f"toolu_{turn:04d}"
            call = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Read",
                "input": {"path": f"/{turn}"},
            }
            session.record(
                {
                    "id": f"msg_{turn:04d}",
                    "model": "claude-sonnet-4-6",
                    "stop_reason": "tool_use",
                    "content": [{"type": "text", "text": f"Step {turn}."}, call],
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 9_000 * turn,
                        "output_tokens": 20,
                    },
                }
            )
            size = 30_000 if step == "big" else 300
            result = {"type": "tool_result", "tool_use_id": tool_id, "content": "x\n" * size}
            session.add_tool_results([result])

    asyncio.run(run())
    session.close()
    for request, snapshot in kept:
        assert request == snapshot
