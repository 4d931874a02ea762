"""The rules the session-16 newcomer fixes added beyond their reproducers (tests/test_newcomer16.py):
how a model the table lacks is planned, and the constructor checks of the integrations and
the PostgreSQL store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import skip_without_postgres
from unbounded.catalog import load_model_table
from unbounded.configuration import SessionConfig, derive_settings, model_for_window
from unbounded.errors import ConfigError
from unbounded.policy import Policy


def test_an_unknown_model_with_a_window_has_half_of_it_as_output_and_no_prices(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = load_model_table()
    name = "qwen3-coder-rules16"  # the warning is logged once per name: one no other test uses
    with caplog.at_level(logging.WARNING, logger="unbounded.configuration"):
        settings = derive_settings(
            SessionConfig(model=name, context_window=32_000), Policy(), table
        )
    info = settings.model_info
    assert (info.name, info.context_window, info.max_output) == (name, 32_000, 16_000)
    assert (info.input_per_mtok, info.output_per_mtok, info.provider) == (0.0, 0.0, "other")
    assert "costs counted as 0" in caplog.text
    large = model_for_window(table, "qwen3-coder", 1_000_000)
    assert large.max_output == table.get("gpt-5.4").max_output  # half the window, at most that


def test_an_unknown_claude_model_with_a_window_is_priced_as_the_current_claude() -> None:
    table = load_model_table()
    info = model_for_window(table, "claude-zzz-9", 100_000)
    current = table.get("claude-sonnet-5-5")
    assert (info.name, info.context_window, info.provider) == ("claude-zzz-9", 100_000, "anthropic")
    assert (info.input_per_mtok, info.output_per_mtok) == (
        current.input_per_mtok,
        current.output_per_mtok,
    )


def test_an_unknown_model_without_a_window_is_refused_naming_the_window() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'qwen3-coder'.*context_window="):
        derive_settings(SessionConfig(model="qwen3-coder"), Policy(), load_model_table())


def test_a_known_model_keeps_its_figures_under_a_window() -> None:
    table = load_model_table()
    info = model_for_window(table, "gpt-5.4", 64_000)
    assert info == table.get("gpt-5.4").with_window(64_000)


@pytest.mark.parametrize(
    ("option", "value", "unit"),
    [("keep_messages", "3", "messages"), ("keep_tokens", "5000", "tokens")],
)
def test_the_middlewares_counts_given_as_text_are_config_errors(
    option: str, value: str, unit: str
) -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations import UnboundedMiddleware

    with pytest.raises(
        ConfigError,
        match=rf"{option} must be a whole number of {unit}.*"
        rf"pass {option}={value}$",
    ):
        UnboundedMiddleware("claude-sonnet-4-6", **{option: value})


def test_compactable_tools_given_as_one_name_is_that_tool() -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations import UnboundedMiddleware

    middleware = UnboundedMiddleware("claude-sonnet-4-6", compactable_tools="search")
    assert middleware.compactable_tools == ["search"]


def test_the_capability_takes_a_policy_and_bool_markers() -> None:
    pytest.importorskip("pydantic_ai")
    from unbounded.integrations.pydantic_ai import UnboundedHistory

    history = UnboundedHistory(policy=Policy(), cache_breakpoints=False, model_table=None)
    assert history.cache_breakpoints is False


@pytest.mark.parametrize("integration", ["middleware", "capability"])
def test_a_policy_file_path_is_read_when_the_integration_is_made(
    integration: str, tmp_path: Path
) -> None:
    """As Session and wrap() take one (rev16: the capability took it at f0a5812)."""
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("early_compact_fraction = 0.5\n", encoding="utf-8")
    if integration == "middleware":
        pytest.importorskip("langchain")
        from unbounded.integrations import UnboundedMiddleware

        made: object = UnboundedMiddleware("claude-sonnet-4-6", policy=str(policy_file)).policy
    else:
        pytest.importorskip("pydantic_ai")
        from unbounded.integrations.pydantic_ai import UnboundedHistory

        made = UnboundedHistory(policy=policy_file)._policy
    assert isinstance(made, Policy) and made.early_compact_fraction == 0.5
    with pytest.raises(ConfigError, match="no such policy file"):
        if integration == "middleware":
            UnboundedMiddleware("claude-sonnet-4-6", policy=str(tmp_path / "missing.toml"))
        else:
            UnboundedHistory(policy=tmp_path / "missing.toml")


def test_the_capability_names_the_option_a_misspelling_meant() -> None:
    pytest.importorskip("pydantic_ai")
    from unbounded.integrations.pydantic_ai import UnboundedHistory

    with pytest.raises(TypeError, match=r"polcy: did you mean policy\?"):
        UnboundedHistory(polcy=Policy())


def test_the_stores_wait_given_as_text_is_a_config_error() -> None:
    pytest.importorskip("psycopg")
    from unbounded.postgres import PostgresStore

    with pytest.raises(ConfigError, match=r"wait must be a number of seconds.*pass wait=5$"):
        PostgresStore("postgresql://agent@/agents", "s", wait="5")  # type: ignore[arg-type]


def test_a_pool_grows_when_asked_for_more_and_never_shrinks(postgres_url: str) -> None:
    from unbounded.postgres import connection_pool

    pool = connection_pool(postgres_url, max_size=2)
    assert connection_pool(postgres_url).max_size == 2  # the default sizes leave it as it is
    assert connection_pool(postgres_url, max_size=1).max_size == 2
    assert connection_pool(postgres_url, max_size=3) is pool and pool.max_size == 3


def test_the_agents_session_refuses_a_store_of_another_session(postgres_url: str) -> None:
    pytest.importorskip("agents")
    from unbounded.integrations.openai_agents import UnboundedSession
    from unbounded.postgres import PostgresStore

    with PostgresStore(postgres_url, "b") as store:
        with pytest.raises(ConfigError, match="holds session 'b', not 'a'"):
            UnboundedSession("a", model="gpt-5-mini", store=store)
        session = UnboundedSession("b", model="gpt-5-mini", store=store)
        assert session.session_id == "b"


def test_the_store_takes_a_postgres_scheme_and_other_parameters() -> None:
    skip_without_postgres()
    from unbounded.postgres.connect import check_store_url

    check_store_url("postgres://agent@db/agents?sslmode=require")
    check_store_url("host=/tmp dbname=agents")  # libpq's key=value form is libpq's to judge


@pytest.mark.parametrize("name", ["acme-local-once", "claude-zzz-once"])
def test_the_unknown_model_warning_is_logged_once_per_model_name(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A session reconfigured every turn (same model) would log it every turn."""
    table = load_model_table()
    with caplog.at_level(logging.WARNING, logger="unbounded.configuration"):
        for window in (32_000, 32_000, 64_000):
            derive_settings(SessionConfig(model=name, context_window=window), Policy(), table)
        derive_settings(SessionConfig(model=f"{name}-2", context_window=32_000), Policy(), table)
    warned = [r.getMessage() for r in caplog.records if "not in the model table" in r.getMessage()]
    assert len(warned) == 2
    assert repr(name) in warned[0] and repr(f"{name}-2") in warned[1]
