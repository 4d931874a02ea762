"""What a newcomer following docs/integrations.md and docs/storage.md ran into (session 16): the
OpenAI drop-in, the Agents SDK session, the pydantic-ai capability, the LangChain middleware and
the PostgreSQL store. Each a bug, written as the exact reproducer (a strict xfail until the code
is fixed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
)
from conftest import skip_without_postgres
from unbounded.errors import ConfigError
from unbounded.policy import Policy

UNKNOWN = "qwen3-coder"  # a local server's model, not in the model table
NO_SERVER = "http://127.0.0.1:9"


def test_the_agents_session_takes_the_window_of_an_unknown_model() -> None:
    pytest.importorskip("agents")
    from unbounded.integrations.openai_agents import UnboundedSession

    session = UnboundedSession("user-42", model=UNKNOWN, context_window=131_072)
    assert session.session.model_info.context_window == 131_072


def test_the_middleware_takes_the_window_of_an_unknown_model() -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations import UnboundedMiddleware

    UnboundedMiddleware(UNKNOWN, context_window=32_000)


def test_the_capability_takes_the_window_of_an_unknown_model() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from unbounded.integrations.pydantic_ai import UnboundedCapability

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    capability = UnboundedCapability(context_window=32_000)
    agent = Agent(FunctionModel(reply, model_name=UNKNOWN), capabilities=[capability])
    assert agent.run_sync("hi").output == "ok"
    assert capability.session.model_info.context_window == 32_000


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_wrap_refuses_an_unknown_summarizer_name_at_once(sdk: str) -> None:
    module = pytest.importorskip(sdk)
    from unbounded.integrations import wrap

    client = getattr(module, "Anthropic" if sdk == "anthropic" else "OpenAI")(
        api_key="test-key", base_url=NO_SERVER
    )
    with pytest.raises(ConfigError, match="summarizer"):
        wrap(client, summarizer="bogus")


def test_wrap_refuses_a_summarizer_that_is_no_provider() -> None:
    openai = pytest.importorskip("openai")
    from unbounded.integrations import wrap

    client = openai.OpenAI(api_key="test-key", base_url=NO_SERVER)
    with pytest.raises(ConfigError, match="summarizer"):
        wrap(client, model="gpt-5.4", summarizer=42)


def test_the_capability_refuses_a_misspelt_option_at_once() -> None:
    pytest.importorskip("pydantic_ai")
    from unbounded.integrations.pydantic_ai import UnboundedCapability

    with pytest.raises(TypeError, match="session_folder"):
        UnboundedCapability(sesion_folder="s")


def test_the_capability_refuses_a_policy_that_is_no_policy_at_once() -> None:
    pytest.importorskip("pydantic_ai")
    from unbounded.integrations.pydantic_ai import UnboundedCapability

    with pytest.raises(ConfigError, match="policy"):
        UnboundedCapability(policy={"warning_buffer": 10})


@pytest.mark.parametrize("entry", ["capability", "middleware"])
def test_a_window_given_as_text_is_a_config_error(entry: str) -> None:
    if entry == "capability":
        pytest.importorskip("pydantic_ai")
        from unbounded.integrations.pydantic_ai import UnboundedCapability

        with pytest.raises(ConfigError, match="context_window"):
            UnboundedCapability(context_window="32000")
    else:
        pytest.importorskip("langchain")
        from unbounded.integrations import UnboundedMiddleware

        with pytest.raises(ConfigError, match="context_window"):
            UnboundedMiddleware("claude-sonnet-4-6", context_window="32000")


def test_the_middleware_with_a_policy_that_is_no_policy_is_a_config_error() -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations import UnboundedMiddleware

    with pytest.raises(ConfigError, match="policy"):
        UnboundedMiddleware("claude-sonnet-4-6", policy={"warning_buffer": 10})  # type: ignore[arg-type]


def test_exclude_tools_given_as_one_name_keeps_that_tools_results() -> None:
    pytest.importorskip("langchain")
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    from unbounded.integrations import UnboundedMiddleware

    calls = [
        ("call-search", "search", "search-results" * 20),
        ("call-calc", "calculator", "42" * 40),
        ("call-last", "calculator", "7"),
    ]
    messages: list[BaseMessage] = [HumanMessage("Look these up.", id="h0")]
    for call_id, name, output in calls:
        messages += [
            AIMessage(
                "", tool_calls=[{"id": call_id, "name": name, "args": {}}], id=f"a-{call_id}"
            ),
            ToolMessage(output, tool_call_id=call_id, id=f"t-{call_id}"),
        ]
    policy = Policy(
        auto_compact_enabled=False,
        microcompact_min_savings=0,
        microcompact_protect_recent_tokens=0,
        microcompact_keep_recent=1,
    )
    try:
        middleware = UnboundedMiddleware(
            "claude-sonnet-4-6", trigger=("tokens", 50), exclude_tools="search", policy=policy
        )
    except ConfigError:
        return  # refusing a bare name is a fix too
    update: Any = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    assert update is not None
    assert [m.tool_call_id for m in update["messages"]] == ["call-calc"]


def test_the_agents_session_refuses_an_id_that_is_no_text() -> None:
    pytest.importorskip("agents")
    from unbounded.integrations.openai_agents import UnboundedSession

    with pytest.raises(ConfigError, match="session_id"):
        UnboundedSession(42, model="gpt-5-mini")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    ["postgresql://agent@/agents?host=/nonexistent&session=ticket-4711", "mysql://agent@db/agents"],
)
def test_the_store_refuses_an_address_it_cannot_take_by_what_is_wrong(url: str) -> None:
    skip_without_postgres()
    from unbounded.postgres import PostgresStore

    with pytest.raises(ConfigError) as refused:
        PostgresStore(url, "ticket-4711")
    assert "cannot connect" not in str(refused.value)


def test_a_command_that_cannot_connect_says_so_in_one_line() -> None:
    skip_without_postgres()
    result = subprocess.run(
        [sys.executable, "-m", "unbounded", "sessions", "postgresql://agent@127.0.0.1:9/agents"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: cannot connect")


def test_import_into_a_held_session_advises_the_commands_own_option(postgres_url: str) -> None:
    from typer.testing import CliRunner

    from conftest import FIXTURES
    from unbounded.cli import app
    from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
    from unbounded.postgres import PostgresStore

    with PostgresStore(postgres_url, "held"):
        result = CliRunner().invoke(
            app,
            [
                "import",
                str(FIXTURES / "sessions" / "resumed.jsonl"),
                postgres_url,
                "--session",
                "held",
            ],
        )
    assert result.exit_code == 2
    assert "--wait" in result.stderr
    assert "lock=False" not in result.stderr


def test_the_advice_of_a_full_pool_works(postgres_url: str) -> None:
    from unbounded.postgres import PostgresStore, connection_pool

    connection_pool(postgres_url, max_size=1, timeout=0.5)
    with PostgresStore(postgres_url, "first"):
        with pytest.raises(ConfigError) as refused:
            PostgresStore(postgres_url, "second")
        if "connection_pool(url, max_size=" in str(refused.value):
            connection_pool(postgres_url, max_size=2)  # as the message advises
            PostgresStore(postgres_url, "second").close()


def test_eval_never_prints_the_database_password(postgres_url: str) -> None:
    from typer.testing import CliRunner

    from conftest import FIXTURES
    from unbounded.cli import app
    from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)

    url = postgres_url.replace("postgres:@", "postgres:hunter2@", 1)  # the test server trusts
    assert "hunter2" in url
    runner = CliRunner()
    source = str(FIXTURES / "sessions" / "resumed.jsonl")  # read with a warning
    assert runner.invoke(app, ["import", source, url, "--session", "s"]).exit_code == 0
    result = runner.invoke(app, ["eval", f"{url}&session=s"])
    assert result.exit_code == 0
    assert "warning" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_an_imported_codex_rollout_reads_back_as_it_was_or_is_refused(postgres_url: str) -> None:
    import json

    from typer.testing import CliRunner

    from conftest import FIXTURES
    from unbounded.cli import app
    from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)

    runner = CliRunner()
    rollout = str(FIXTURES / "codex_rollout.jsonl")
    imported = runner.invoke(app, ["import", rollout, postgres_url, "--session", "codex"])
    if imported.exit_code == 2:
        return  # refused, saying so: a fix too
    assert imported.exit_code == 0
    from_file = json.loads(runner.invoke(app, ["inspect", rollout, "--json"]).stdout)
    stored = runner.invoke(app, ["inspect", f"{postgres_url}&session=codex", "--json"])
    assert stored.exit_code == 0
    from_database = json.loads(stored.stdout)
    assert from_file["api_calls"] > 0
    assert (from_database["format"], from_database["api_calls"]) == (
        from_file["format"],
        from_file["api_calls"],
    )


def test_migrate_into_a_missing_schema_says_so_in_one_line(postgres_url: str) -> None:
    from typer.testing import CliRunner

    from pgserver import with_schema
    from unbounded.cli import app
    from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)

    url = with_schema(postgres_url.split("&options=")[0], "no_such_schema")
    result = CliRunner().invoke(app, ["migrate", url])
    assert result.exit_code == 2, result.exception
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert "no_such_schema" in result.stderr


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_history_with_its_first_prompt_edited_is_refused(sdk: str, api_server: ApiServer) -> None:
    pytest.importorskip(sdk)
    from unbounded.integrations import wrap

    if sdk == "anthropic":
        api_server.anthropic.push(message("r0"), message("r1"), message("r2"))
        client = wrap(api_server.anthropic_client(sync=True), model="claude-sonnet-4-6")

        def send(*texts: str) -> None:
            roles = ["user", "assistant"] * len(texts)
            messages = [{"role": r, "content": t} for r, t in zip(roles, texts, strict=False)]
            client.messages.create(
                model="claude-sonnet-4-6", max_tokens=100, system="S", messages=messages
            )
    else:
        api_server.openai.push(message("r0"), message("r1"), message("r2"))
        client = wrap(api_server.openai_client(sync=True), model="gpt-5.4")

        def send(*texts: str) -> None:
            roles = ["user", "assistant"] * len(texts)
            messages = [{"role": "system", "content": "S"}]
            messages += [{"role": r, "content": t} for r, t in zip(roles, texts, strict=False)]
            client.chat.completions.create(model="gpt-5.4", messages=messages)

    send("hi")
    send("hi", "r0", "two")
    with pytest.raises(ConfigError):
        send("HELLO", "r0", "two", "r1", "three")


@pytest.mark.parametrize("given", ["hello", {"role": "user", "content": "hi"}, 5])
def test_chat_messages_given_as_text_are_refused_as_such(given: object) -> None:
    openai = pytest.importorskip("openai")
    from unbounded.integrations import wrap

    client = wrap(openai.OpenAI(api_key="test-key", base_url=NO_SERVER), model="gpt-5.4")
    with pytest.raises(ConfigError) as refused:
        client.chat.completions.create(model="gpt-5.4", messages=given)  # type: ignore[arg-type]
    assert "list" in str(refused.value) and type(given).__name__ in str(refused.value)


def test_the_capability_refuses_cache_breakpoints_that_are_no_bool() -> None:
    pytest.importorskip("pydantic_ai")
    from unbounded.integrations.pydantic_ai import UnboundedCapability

    with pytest.raises(ConfigError, match="cache_breakpoints"):
        UnboundedCapability(cache_breakpoints="no")


def test_inspect_of_a_session_folder_reads_or_names_its_transcript(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unbounded.cli import app
    from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
    from unbounded.session import Session, SessionConfig

    folder = tmp_path / "s1"
    with Session.open(folder, SessionConfig(model="claude-sonnet-4-6")) as session:
        session.add_user("Add a --verbose flag to cli.py")
    result = CliRunner().invoke(app, ["inspect", str(folder)])
    assert result.exit_code == 0 or "transcript.jsonl" in result.stderr, result.stderr
