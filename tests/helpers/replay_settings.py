"""One model, replay settings and recorded calls for the tests that drive baselines or native
strategies call by call without a recording."""

from __future__ import annotations

from collections.abc import Mapping

from unbounded.catalog import ModelInfo
from unbounded.evaluation.baselines import ReplaySettings
from unbounded.evaluation.prefix import OpaquePrefix
from unbounded.evaluation.recorded import RecordedCall

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
