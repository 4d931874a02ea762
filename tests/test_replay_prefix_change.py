"""A prefix change the recording shows (an MCP server reconnected: new tools and instructions)
costs every replayed strategy what it cost the recording: the part of the system prompt and
tools after the one cached before the session is written again at that call, once."""

from __future__ import annotations

from typing import Any

import pytest
from recorded_calls import MODEL, recorded_time, tool_call_session

from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.evaluation.prefix import ChangingPrefixSimulator, ScaledBlockCounter
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript

WARM = 15_000
"""Tokens the recording's first call read: cached by an earlier session."""
REST = 6_000
"""Tokens of the prefix after the warm part: written on the first call, again after /mcp."""


def _session(mcp_output: str | None, third_model: str = MODEL) -> Transcript:
    """Four calls 10 s apart; `/mcp` with `mcp_output` between the second and the third
    (none when None), the third on `third_model`."""
    calls = [
        (0, WARM, REST + 2_000),
        (10, WARM + REST + 2_000, 1_000),
        (20, WARM, REST + 4_000),  # the recording re-wrote everything after the warm part
        (30, WARM + REST + 4_000, 1_000),
    ]
    mcp = [
        Entry.user("<command-name>/mcp</command-name>", timestamp=recorded_time(18)),
        Entry.user(
            f"<local-command-stdout>{mcp_output}</local-command-stdout>",
            timestamp=recorded_time(18),
        ),
    ]
    models = [MODEL, MODEL, third_model, MODEL]
    before = {2: mcp} if mcp_output is not None else None
    return tool_call_session(calls, models=models, before=before)


def test_every_strategy_writes_the_changed_prefix_again_once() -> None:
    report = replay_session(_session("Reconnected to tidewave."), ReplayOptions())
    assert report.prefix.changes == (report.points[2].time,)
    rest = report.prefix.tokens - report.prefix.warm_tokens
    assert rest > 0
    before, changed, after = report.points[1], report.points[2], report.points[3]
    # At the change, only the warm part is read (before the fix: the whole earlier prompt).
    assert changed.cache_read == report.prefix.warm_tokens
    assert changed.cache_write == changed.context_tokens - report.prefix.warm_tokens
    # The new version is cached like the old one: the next call reads all it repeats.
    assert after.cache_read == changed.context_tokens
    assert before.cache_read > report.prefix.tokens
    # The recording's event, not a policy choice: every baseline pays it as ours does.
    for name, cost in changed.baseline_cost.items():
        assert cost == pytest.approx(changed.cost), name


def test_a_dismissed_mcp_dialog_changes_nothing() -> None:
    report = replay_session(_session("MCP dialog dismissed"), ReplayOptions())
    assert report.prefix.changes == ()
    changed = report.points[2]
    assert changed.cache_read == report.points[1].context_tokens


def test_the_replay_prices_the_change_as_the_fidelity_report_does() -> None:
    report = replay_session(_session("Reconnected to tidewave."), ReplayOptions())
    simulated = [call.simulated for call in report.fidelity.calls]
    assert [p.cache_read for p in report.points] == [s.cache_read_input_tokens for s in simulated]
    assert [p.cache_write for p in report.points] == [
        s.cache_creation_input_tokens for s in simulated
    ]


def test_a_model_change_is_left_to_the_model_key() -> None:
    # The fidelity report marks it a prefix change too; the replay's requests name the model
    # they are sent to, which keys the cache already: no version on top.
    transcript = _session(None, third_model="claude-opus-4-6")
    report = replay_session(transcript, ReplayOptions())
    assert report.fidelity.calls[2].prefix_changed
    assert report.prefix.changes == ()


@pytest.mark.parametrize("versions", [["v0"], ["v0", "v1", "v2"]])
def test_one_version_text_per_change_or_a_config_error(versions: list[str]) -> None:
    model = load_model_table().get(MODEL)
    with pytest.raises(ConfigError, match="1 prefix change"):
        ChangingPrefixSimulator(
            model,
            counter=ScaledBlockCounter(1.0, {}),
            other_models=None,
            changes=[10.0],
            versions=versions,
        )


def test_from_the_change_time_on_the_prefix_is_sent_under_the_new_version() -> None:
    simulator = ChangingPrefixSimulator(
        load_model_table().get(MODEL),
        counter=ScaledBlockCounter(1.0, {"v0": 5_000, "v1": 5_000}),
        other_models=None,
        changes=[10.0],
        versions=["v0", "v1"],
    )
    request: Any = {
        "model": MODEL,
        "system": [{"type": "text", "text": "v0", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert simulator.step(0.0, request).cache_creation_input_tokens == 5_000
    assert simulator.step(9.0, request).cache_read_input_tokens == 5_000
    changed = simulator.step(10.0, request)  # at the change time itself
    assert (changed.cache_read_input_tokens, changed.cache_creation_input_tokens) == (0, 5_000)
    assert simulator.step(11.0, request).cache_read_input_tokens == 5_000
    assert request["system"][0]["text"] == "v0"  # the caller's request is left as it was
