"""What a newcomer following README.md and docs/ ran into (session 15): each a bug, written as
the exact reproducer (a strict xfail until the code was fixed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.errors import ConfigError
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

SESSION = FIXTURES / "sessions" / "resumed.jsonl"
runner = CliRunner()


def invoke(*args: str) -> Any:
    """Run the CLI in process; a wide terminal keeps rich from wrapping the lines checked."""
    return runner.invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


class Replayed(Exception):
    """Raised by a stand-in for work a command should never have reached."""


def test_replay_checks_the_report_path_before_replaying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def replay_session(*_: object, **__: object) -> None:
        raise Replayed

    monkeypatch.setattr("unbounded.evaluation.replay.replay_session", replay_session)
    report = tmp_path / "missing" / "out.html"
    result = invoke("replay", str(SESSION), "--report", str(report), "--no-variants")
    assert not isinstance(result.exception, Replayed)
    assert result.exit_code == 2
    assert str(report) in result.stderr


def test_replay_checks_the_window_before_opening_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def pick_session(*_: object, **__: object) -> None:
        raise Replayed

    monkeypatch.setattr("unbounded.cli.replay_command.pick_session", pick_session)
    result = invoke("replay", str(SESSION), "--window", "-5")
    assert not isinstance(result.exception, Replayed)
    assert result.exit_code == 2
    assert "window" in result.stderr


def test_a_negative_window_is_told_the_real_minimum() -> None:
    result = invoke("inspect", str(SESSION), "--window", "-5")
    assert result.exit_code == 2
    assert "8,192" in result.stderr


def test_inspect_checks_the_window_before_reading_the_file(tmp_path: Path) -> None:
    result = invoke("inspect", str(tmp_path / "missing.jsonl"), "--window", "100")
    assert result.exit_code == 2
    assert "--window 100" in result.stderr and "8,192" in result.stderr, result.stderr


def test_a_session_with_a_negative_window_is_told_the_real_minimum() -> None:
    with pytest.raises(ConfigError, match="8,192"):
        Session(SessionConfig(model="claude-sonnet-4-6", context_window=-5))


def test_export_without_a_session_advises_its_own_session_option(tmp_path: Path) -> None:
    result = invoke("export", "postgresql://nobody@127.0.0.1:1/db", "-o", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "--session ID" in result.stderr, result.stderr


def _model_table(folder: Path) -> Path:
    """A models file naming `my-model` (the row the unknown-model advice asks for)."""
    models = folder / "models.toml"
    models.write_text(
        '[models.my-model]\nprovider = "anthropic"\ncontext_window = 200_000\nmax_output = 32_000\n'
        "input_per_mtok = 3.0\noutput_per_mtok = 15.0\ncache_write_5m_multiplier = 1.25\n"
        "cache_write_1h_multiplier = 2.0\ncache_read_multiplier = 0.1\nmin_cacheable_tokens = 1_024\n"
        'encoding = "o200k_base"\naliases = []\nsource = "test"\n',
        encoding="utf-8",
    )
    return models


def test_the_unknown_model_advice_works_for_replay(tmp_path: Path) -> None:
    advice = invoke("replay", str(SESSION), "--model", "my-model", "--no-variants")
    assert advice.exit_code == 2
    assert "--models-file" in advice.stderr
    models = _model_table(tmp_path)
    followed = invoke(
        "replay", str(SESSION), "--model", "my-model", "--models-file", str(models), "--no-variants"
    )
    assert followed.exit_code == 0, followed.stderr


def test_the_model_file_of_the_advice_is_one_inspect_takes(tmp_path: Path) -> None:
    """The file the test above writes is a valid model table: inspect, which has the option, uses it."""
    models = _model_table(tmp_path)
    result = invoke("inspect", str(SESSION), "--model", "my-model", "--models-file", str(models))
    assert result.exit_code == 0, result.stderr


def test_a_policy_file_refuses_a_fraction_for_a_token_count(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[policy]\nsession_memory_keep_max_tokens = 8000.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p\.toml"):
        Policy.from_file(policy)


def test_a_policy_file_value_out_of_range_names_the_file(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[policy]\nearly_compact_fraction = 7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p\.toml"):
        Policy.from_file(policy)


def test_a_policy_field_of_the_wrong_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="early_compact_fraction"):
        Policy(early_compact_fraction="0.5")  # type: ignore[arg-type]


def test_tools_given_as_one_dict_is_a_config_error(tmp_path: Path) -> None:
    tool = {"name": "add", "description": "Add.", "input_schema": {"type": "object"}}
    with pytest.raises(ConfigError, match="tools"):
        Session.open(tmp_path / "s", SessionConfig(model="claude-sonnet-4-6", tools=tool))  # type: ignore[arg-type]


def test_a_window_given_as_text_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="window"):
        Session.open(
            tmp_path / "s", SessionConfig(model="claude-sonnet-4-6", context_window="200000")
        )  # type: ignore[arg-type]


def test_wrap_with_a_policy_that_is_no_policy_is_a_config_error(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    from unbounded.integrations import wrap

    client = anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="policy"):
        wrap(client, session_folder=str(tmp_path / "s"), model="claude-sonnet-4-6", policy=3)


@pytest.mark.parametrize(
    ("config", "options"),
    [
        (SessionConfig(model="claude-sonnet-4-6"), {"rehydrate_from": "disk2"}),
        (SessionConfig(model="claude-sonnet-4-6"), {"policy": "missing-policy.toml"}),
        (SessionConfig(model="claude-sonnet-4-6", context_window=-5), {}),
        (SessionConfig(model="claude-nonexistent-9"), {}),
    ],
    ids=["rehydrate_from", "policy-file", "window", "model"],
)
def test_a_refused_open_creates_no_folder(
    tmp_path: Path, config: SessionConfig, options: dict[str, Any]
) -> None:
    folder = tmp_path / "s"
    with pytest.raises(ConfigError):
        Session.open(folder, config, **options)
    assert not folder.exists(), sorted(os.listdir(folder))


def test_tune_output_into_a_missing_folder_makes_it(tmp_path: Path) -> None:
    """What docs/cli.md promises for -o, kept by the check that refuses a folder."""
    output = tmp_path / "new" / "p.toml"
    result = invoke(
        "tune", str(FIXTURES / "sessions" / "interrupted.jsonl"), "--trials", "0", "-j", "1",
        "-o", str(output),
    )
    assert result.exit_code == 0, result.stderr
    assert output.read_text(encoding="utf-8").startswith("[policy]")


def test_tune_output_into_a_folder_names_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    result = invoke(
        "tune",
        str(FIXTURES / "sessions" / "interrupted.jsonl"),
        "--trials",
        "0",
        "-j",
        "1",
        "-o",
        str(folder),
    )
    assert result.exit_code == 2
    assert ".tmp" not in result.stderr
    assert str(folder) in result.stderr


def test_the_command_list_keeps_each_summary_on_one_line() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "(--llm), and report what compaction keeps" in result.stdout
    assert "keeps at least what the default keeps" in result.stdout


HELP_GAPS = [
    (
        "tune",
        "policy_file",
        lambda h: "unbounded tune" not in h,
        "--policy says 'see `unbounded tune`' (itself), not what it does there (the base the candidates are drawn around)",
    ),
    (
        "tune",
        "seed",
        lambda h: "repeatable" not in h,
        "--seed says 'repeatable' though it takes one value (it means: the same seed, the same draw)",
    ),
    (
        "eval",
        "model",
        lambda h: "probes" not in h,
        "--model says 'Model for LLM summaries and probes', but the probe exam runs on --llm",
    ),
    (
        "eval",
        "probes",
        lambda h: "6" in h,
        "--probes does not say the exam needs at least 6 (fewer is refused)",
    ),
    (
        "replay",
        "window",
        lambda h: "default" in h,
        "--window does not say its default (the transcript's reported window, else the model's)",
    ),
]


@pytest.mark.parametrize(
    ("name", "param", "fine", "gap"), HELP_GAPS, ids=[f"{c}-{p}" for c, p, _, _ in HELP_GAPS]
)
def test_an_option_help_says_what_it_does(name: str, param: str, fine: Any, gap: str) -> None:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    helps = {p.name: getattr(p, "help", "") or "" for p in command.params}
    assert fine(helps[param]), f"{name} {gap}: {helps[param]!r}"


def test_the_probes_help_names_the_exams_own_minimum() -> None:
    """The "at least 6" of eval --probes is the exam's rule (one probe per category), not a
    number of its own: it follows the categories."""
    from unbounded.evaluation.probes import CATEGORIES

    command = typer.main.get_command(app).commands["eval"]  # type: ignore[attr-defined]
    helps = {p.name: getattr(p, "help", "") or "" for p in command.params}
    assert f"at least {len(CATEGORIES)}" in helps["probes"]


@pytest.mark.parametrize("name", ["inspect", "replay", "eval", "compact"])
def test_the_no_session_advice_names_an_option_the_command_has(name: str) -> None:
    result = invoke(name, "postgresql://nobody@127.0.0.1:1/db")
    assert result.exit_code == 2
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    advised = {word.strip("`,.;()") for word in result.stderr.split() if word.startswith("--")}
    assert advised <= options, f"{name} advises {advised - options}: {result.stderr}"


def test_a_second_open_in_one_process_says_this_process(tmp_path: Path) -> None:
    from unbounded.errors import SessionLockedError

    config = SessionConfig(model="claude-sonnet-4-6")
    first = Session.open(tmp_path / "nb", config)
    try:
        with pytest.raises(SessionLockedError) as refused:
            Session.open(tmp_path / "nb", config)
        assert "another process" not in str(refused.value)
    finally:
        first.close()


def test_wrap_refuses_a_misspelt_option_at_once() -> None:
    anthropic = pytest.importorskip("anthropic")
    from unbounded.integrations import wrap

    client = anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9")
    with pytest.raises(TypeError, match="session_folder"):
        wrap(client, sesion_folder="s")


def test_tune_on_a_folder_is_not_told_it_does_not_exist(tmp_path: Path) -> None:
    result = invoke(
        "tune",
        str(FIXTURES / "sessions"),
        "--trials",
        "0",
        "-j",
        "1",
        "-o",
        str(tmp_path / "p.toml"),
    )
    assert result.exit_code == 0 or "folder" in result.stderr, result.stderr


def test_tune_names_a_database_address_as_given(tmp_path: Path) -> None:
    url = "postgresql://nobody@127.0.0.1:1/db?session=x"
    result = invoke("tune", url, "--trials", "0", "-j", "1", "-o", str(tmp_path / "p.toml"))
    assert result.exit_code == 2
    assert url in result.stderr, result.stderr
    assert "unbounded export" in result.stderr  # how to tune it: export it to a file first


def test_a_summarizer_that_cannot_connect_names_the_address(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    result = runner.invoke(
        app,
        [
            "compact",
            str(FIXTURES / "sessions" / "interrupted.jsonl"),
            "-s",
            "anthropic",
            "-o",
            str(tmp_path / "out.jsonl"),
        ],
        env={
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "COLUMNS": "200",
        },
    )
    assert result.exit_code == 2
    assert not (tmp_path / "out.jsonl").exists()  # holds today: nothing half-written
    assert "127.0.0.1:9" in result.stderr, result.stderr


def test_wrap_of_an_unknown_claude_model_gives_the_library_remedy(tmp_path: Path) -> None:
    anthropic = pytest.importorskip("anthropic")
    from unbounded.integrations import wrap

    client = anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError) as refused:
        wrap(client, session_folder=str(tmp_path / "s"), model="claude-nope-1")
    assert "context_window" in str(refused.value)
    assert "--models-file" not in str(refused.value)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_failed_connection_of_either_sdk_names_the_address_and_its_setting(sdk: str) -> None:
    """Both wire formats map the SDK's connection error to the address tried (never its
    credentials or path) and the variable it comes from; without a request, the plain text."""
    httpx = pytest.importorskip("httpx")
    module = pytest.importorskip(sdk)
    from unbounded.wire import AnthropicMessages, OpenAIChat

    request = httpx.Request("POST", "http://user:secret@127.0.0.1:9/v1/messages")
    failed = module.APIConnectionError(request=request)
    failed.__cause__ = httpx.ConnectError("All connection attempts failed")
    wire = AnthropicMessages() if sdk == "anthropic" else OpenAIChat()
    mapped = str(wire.map_error(failed))
    assert "http://127.0.0.1:9 (All connection attempts failed)" in mapped
    assert f"{sdk.upper()}_BASE_URL" in mapped
    assert "secret" not in mapped and "/v1" not in mapped
    bare = str(wire.map_error(httpx.ConnectError("refused")))  # made without a request
    assert bare == "connection error: ConnectError: refused"


def test_a_policy_file_refusal_points_at_the_line_and_the_value(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[policy]\n# tuned\nsession_memory_keep_max_tokens = 8000.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p\.toml:3: .*8000\.5"):
        Policy.from_file(policy)
    policy.write_text("[policy]\ncompact_enabled = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p\.toml:2: .*compact_enabled.*wrong type"):
        Policy.from_file(policy)


def test_fields_fine_alone_but_not_together_name_the_file(tmp_path: Path) -> None:
    """Values checked together, as the file gives them: two that only fit together pass."""
    policy = tmp_path / "p.toml"
    policy.write_text(
        "[policy]\nsession_memory_keep_min_tokens = 7000\nsession_memory_keep_max_tokens = 8000\n",
        encoding="utf-8",
    )
    assert Policy.from_file(policy).session_memory_keep_min_tokens == 7000
    policy.write_text("[policy]\nsession_memory_keep_min_tokens = 7000\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"p\.toml:2: .*keep_min_tokens must not exceed"):
        Policy.from_file(policy)


def test_a_refused_from_transcript_creates_no_folder(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with pytest.raises(ConfigError):
        Session.from_transcript(
            SESSION, folder, SessionConfig(model="claude-sonnet-4-6", context_window=-5)
        )
    assert not folder.exists()


def test_open_refuses_a_store_of_its_own(tmp_path: Path) -> None:
    from unbounded.storage import MemoryStore

    with pytest.raises(TypeError, match="its folder"):
        Session.open(tmp_path / "s", SessionConfig(model="claude-sonnet-4-6"), store=MemoryStore())
    assert not (tmp_path / "s").exists()


def test_wrap_of_an_openai_client_refuses_a_misspelt_option_at_once() -> None:
    openai = pytest.importorskip("openai")
    from unbounded.integrations import wrap

    client = openai.OpenAI(api_key="test-key", base_url="http://127.0.0.1:9")
    with pytest.raises(TypeError, match="did you mean prices"):
        wrap(client, price={"input_per_mtok": 1.0})


def test_wrap_plans_an_unknown_claude_model_with_the_window_given() -> None:
    anthropic = pytest.importorskip("anthropic")
    from unbounded.integrations import wrap

    client = anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9")
    wrapped = wrap(client, model="claude-nope-1", context_window=100_000)
    assert wrapped.session.model_info.name == "claude-nope-1"
    assert wrapped.session.model_info.context_window == 100_000


@pytest.mark.parametrize("name", ["inspect", "replay", "eval", "compact"])
def test_the_unknown_model_advice_names_an_option_the_command_has(name: str) -> None:
    result = invoke(name, str(SESSION), "--model", "my-model")
    assert result.exit_code == 2
    assert "UNBOUNDED_MODELS_FILE" in result.stderr
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    advised = {word.strip("`,.;()") for word in result.stderr.split() if word.startswith("--")}
    assert advised <= options, f"{name} advises {advised - options}: {result.stderr}"


def test_a_replay_batch_reads_the_models_file_in_each_job(tmp_path: Path) -> None:
    models = _model_table(tmp_path)
    sessions = [str(FIXTURES / "sessions" / n) for n in ("resumed.jsonl", "interrupted.jsonl")]
    result = invoke(
        "replay", *sessions, "--model", "my-model", "--models-file", str(models), "--no-variants"
    )
    assert result.exit_code == 0, result.stderr
