"""Thresholds, environment overrides and the model table."""

from __future__ import annotations

from pathlib import Path

import pytest

from unbounded import ConfigError, Policy, compute_thresholds, load_model_table
from unbounded.catalog import ModelInfo


def model(window: int = 200_000, max_output: int = 8_192) -> ModelInfo:
    return ModelInfo("m", "anthropic", window, max_output, 3.0, 15.0)


def test_seed_example_sonnet_3_5() -> None:
    """Seed 000: 200k window, 8,192 max output -> effective 191,808, auto-compact 178,808."""
    thresholds = compute_thresholds(model(), Policy())
    assert thresholds.effective_window == 191_808
    assert thresholds.autocompact == 178_808
    assert thresholds.warning == thresholds.error == 158_808
    assert thresholds.blocking == 197_000


def test_output_reservation_is_capped_at_20k() -> None:
    thresholds = compute_thresholds(model(max_output=128_000), Policy())
    assert thresholds.effective_window == 180_000
    assert thresholds.autocompact == 167_000


def test_percent_left_and_levels() -> None:
    thresholds = compute_thresholds(model(max_output=20_000), Policy())
    assert thresholds.percent_left(0) == 100
    assert thresholds.percent_left(83_500) == 50
    assert thresholds.percent_left(500_000) == 0
    assert thresholds.level(100) == "ok"
    assert thresholds.level(147_000) == "error"
    assert thresholds.level(167_000) == "autocompact"
    assert thresholds.level(197_000) == "blocking"


def test_auto_compaction_threshold_is_inclusive() -> None:
    """Auto-compaction and the "autocompact" level start at the threshold itself."""
    thresholds = compute_thresholds(model(max_output=20_000), Policy())
    at = thresholds.autocompact
    assert thresholds.should_autocompact(at) and thresholds.level(at) == "autocompact"
    assert not thresholds.should_autocompact(at - 1) and thresholds.level(at - 1) != "autocompact"


def test_auto_compact_off_measures_against_effective_window() -> None:
    thresholds = compute_thresholds(model(max_output=20_000), Policy(auto_compact_enabled=False))
    assert thresholds.limit == 180_000
    assert thresholds.warning == 160_000
    assert not thresholds.should_autocompact(179_000)
    assert thresholds.level(170_000) == "error"


def test_env_overrides() -> None:
    env = {
        "UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE": "50",
        "UNBOUNDED_DISABLE_MICROCOMPACT": "true",
        "UNBOUNDED_MAX_OUTPUT_TOKENS": "10000",
        "UNBOUNDED_BLOCKING_LIMIT_OVERRIDE": "150000",
    }
    policy = Policy.from_env(env)
    assert not policy.microcompact_enabled and policy.compact_enabled
    thresholds = compute_thresholds(model(), policy)
    assert thresholds.effective_window == 190_000
    assert thresholds.autocompact == 95_000
    assert thresholds.blocking == 150_000


def test_pct_override_is_capped_at_the_default() -> None:
    thresholds = compute_thresholds(
        model(), Policy.from_env({"UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE": "99"})
    )
    assert thresholds.autocompact == 178_808


def test_disable_switches() -> None:
    policy = Policy.from_env(
        {"UNBOUNDED_DISABLE_COMPACT": "1", "UNBOUNDED_DISABLE_AUTO_COMPACT": "yes"}
    )
    assert not policy.compact_enabled and not policy.auto_compact_enabled
    assert not compute_thresholds(model(), policy).auto_compact_enabled
    assert (
        compute_thresholds(
            model(), Policy.from_env({"UNBOUNDED_DISABLE_COMPACT": "1"})
        ).auto_compact_enabled
        is False
    )


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE", "150", "(0, 100]"),
        ("UNBOUNDED_AUTOCOMPACT_PCT_OVERRIDE", "lots", "must be a number"),
        ("UNBOUNDED_MAX_OUTPUT_TOKENS", "-5", "must be > 0"),
        ("UNBOUNDED_BLOCKING_LIMIT_OVERRIDE", "1e5", "whole number"),
        ("UNBOUNDED_DISABLE_COMPACT", "maybe", "1/0"),
    ],
)
def test_bad_env_values_fail_at_construction(name: str, value: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        Policy.from_env({name: value})
    assert name in str(info.value) and needle in str(info.value)


def test_bad_policy_fields_fail_at_construction() -> None:
    with pytest.raises(ConfigError):
        Policy(autocompact_buffer=-1)
    with pytest.raises(ConfigError):
        Policy(autocompact_pct_override=0)
    with pytest.raises(ConfigError):
        Policy.from_env({}, not_a_field=3)


def test_model_lookup_by_name_alias_and_prefix() -> None:
    table = load_model_table(environ={})
    assert table.get("claude-opus-4-6").context_window == 200_000
    assert table.get("claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"
    assert table.get("claude-opus-4-6[1m]").name == "claude-opus-4-6"
    assert table.get("claude-haiku-4-5-20991231").name == "claude-haiku-4-5"
    assert table.get("gpt-4.1-mini").cache_write_1h_multiplier is None
    assert table.find("no-such-model") is None


def test_unknown_model_error_suggests_and_explains() -> None:
    with pytest.raises(ConfigError) as info:
        load_model_table(environ={}).get("claude-sonet-4-5")
    message = str(info.value)
    assert "claude-sonnet-4-5" in message and "UNBOUNDED_MODELS_FILE" in message


def test_user_model_file_extends_and_overrides(tmp_path: Path) -> None:
    extra = tmp_path / "models.toml"
    extra.write_text(
        '[models.my-local-llm]\nprovider = "other"\ncontext_window = 32_768\nmax_output = 4_096\n'
        "input_per_mtok = 0.0\noutput_per_mtok = 0.0\n"
        '[models.claude-opus-4-6]\nprovider = "anthropic"\ncontext_window = 1_000_000\n'
        "max_output = 128_000\ninput_per_mtok = 5.0\noutput_per_mtok = 25.0\n"
    )
    table = load_model_table(environ={"UNBOUNDED_MODELS_FILE": str(extra)})
    assert table.get("my-local-llm").context_window == 32_768
    assert table.get("claude-opus-4-6").context_window == 1_000_000
    assert compute_thresholds(table.get("my-local-llm")).effective_window == 32_768 - 4_096


def test_bad_model_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[models.x]\nprovider = "anthropic"\ncontext_window = "big"\n')
    with pytest.raises(ConfigError, match=r"missing|wrong type"):
        load_model_table([bad], environ={})
    bad.write_text("not toml = = =")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_model_table([bad], environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_model_table([tmp_path / "absent.toml"], environ={})


def test_every_packaged_model_is_consistent() -> None:
    table = load_model_table(environ={})
    assert len(table.names()) >= 20
    for name in table.names():
        info = table.get(name)
        assert info.max_output < info.context_window
        assert compute_thresholds(info).autocompact > 0
