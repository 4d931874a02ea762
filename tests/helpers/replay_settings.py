"""One model, replay settings and recorded calls for the tests that drive baselines or native
strategies call by call without a recording."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from unbounded.catalog import ModelInfo
from unbounded.evaluation.baselines import (
    Baseline,
    History,
    ReplaySettings,
    feed_strategies,
    make_baselines,
    run_baselines,
)
from unbounded.evaluation.native_strategies import native_strategies
from unbounded.evaluation.prefix import OpaquePrefix
from unbounded.evaluation.recorded import RecordedCall
from unbounded.model.entries import Entry

MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)


def replay_settings(
    threshold: int, call_models: Mapping[str, ModelInfo] | None = None
) -> ReplaySettings:
    """Settings for MODEL: a 2,000-token prefix, the 5-minute TTL, a 200,000 window (and the
    models some calls switch to, by name)."""
    return ReplaySettings(
        model=MODEL,
        model_name=MODEL.name,
        prefix=OpaquePrefix(2_000),
        ttl="5m",
        context_window=200_000,
        threshold=threshold,
        start_time=0.0,
        call_models=dict(call_models or {}),
    )


def recorded_call(index: int, message_prefix: str = "m", model: str = MODEL.name) -> RecordedCall:
    """The index-th recorded call (of MODEL unless `model`), one second apart."""
    return RecordedCall(
        index,
        f"{message_prefix}{index}",
        (index,),
        index,
        index,
        None,
        model,
        float(index),
        float(index),
        (),
    )


def tool_turn(n: int, tool_id: str | None = None) -> list[Entry]:
    """Tool-call turn n: a reply (a line of text and a Read call, id `tool_id`, `t{n}` when
    not given) and its result of 200 lines (about 500 tokens)."""
    call_id = tool_id or f"t{n}"
    use = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"n": n}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": f"line {n}\n" * 200}
    return [
        Entry.assistant([{"type": "text", "text": f"step {n}"}, use], message_id=f"m{n}"),
        Entry.user([result]),
    ]


def replayed_strategies(calls: int, tool_id: Callable[[int], str] | None = None) -> list[Baseline]:
    """Every baseline and native strategy after `calls` tool-call turns (`tool_turn`, ids by
    `tool_id` when given) at a 30,000-token threshold: from 200 calls on, each strategy has
    changed its requests (clear_every_turn clears) and simulates on its own."""
    shared = History(1.0)
    config = replay_settings(30_000)
    strategies = [*make_baselines(config, shared), *native_strategies(config, shared)]
    feed_strategies(strategies, [Entry.user("start the work")])
    for n in range(calls):
        run_baselines(strategies, recorded_call(n))
        feed_strategies(strategies, tool_turn(n, tool_id(n) if tool_id else None))
    return strategies
