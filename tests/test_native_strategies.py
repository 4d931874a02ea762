"""The server compaction priced as a replay strategy (evaluation/native_strategies.py)."""

from __future__ import annotations

from replay_settings import recorded_call, replay_settings

from unbounded.evaluation.native_strategies import (
    NATIVE_STRATEGIES,
    ServerCompactionStrategy,
    native_strategies,
    server_trigger,
)
from unbounded.evaluation.replay import strategy_names
from unbounded.model.entries import Entry
from unbounded.policy import Policy


def test_the_trigger_sits_a_warning_buffer_under_the_threshold_and_never_under_the_minimum() -> None:
    assert server_trigger(200_000) == 180_000
    assert server_trigger(60_000) == 50_000
    assert server_trigger(200_000, Policy(warning_buffer=30_000)) == 170_000


def test_the_strategy_is_registered_after_the_baselines() -> None:
    assert strategy_names()[-len(NATIVE_STRATEGIES) :] == NATIVE_STRATEGIES
    assert [s.name for s in native_strategies(replay_settings(100_000))] == list(NATIVE_STRATEGIES)


def test_at_the_trigger_the_server_step_shares_the_prefix_and_the_summary_goes_on_alone() -> None:
    strategy = ServerCompactionStrategy(replay_settings(70_000))  # trigger: 50,000
    chunk = "parser detail " * 2_000  # about 7,000 tokens
    strategy.feed([Entry.user("Fix the parser. " + chunk)])
    quiet = strategy.plan(recorded_call(0, "msg_"))
    assert quiet.side == () and not quiet.changed
    for n in range(8):
        strategy.respond(Entry.assistant([{"type": "text", "text": f"step {n} " + chunk}], message_id=f"m{n}"))
        strategy.feed([Entry.user(f"go on {n}")])
    plan = strategy.plan(recorded_call(1, "msg_"))
    assert strategy.run.compactions == 1 and plan.changed
    (step,) = plan.side
    assert step.query_source == "server_compaction"
    first = step.request["messages"][0]["content"]
    assert step.request["system"] and str(first if isinstance(first, str) else first[0]["text"]).startswith("Fix the parser")
    assert step.output_tokens > 0
    assert len(plan.messages) == 1 and plan.messages[0]["role"] == "user"
    strategy.respond(Entry.assistant([{"type": "text", "text": "ok"}], message_id="after"))
    strategy.feed([Entry.user("and then?")])
    later = strategy.plan(recorded_call(2, "msg_"))
    assert later.side == () and later.changed and len(later.messages) == 3
