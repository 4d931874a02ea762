"""API keys never reach what unbounded writes: a key is planted in the environment and in the
provider, a session runs through the real SDK (turns, a retried 429, a refused key, a
compaction by the model, a cache-break diff, a hook, the CLI on the result) with every log at
DEBUG going to a file, and then every file written is searched for the key.

Also the opt-in redaction of secret-looking strings (`unbounded.redaction`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import sys
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary
from typer.testing import CliRunner

import apiserver
from apiserver import (
    RecordedRequest,
    Reply,
    auth_error,
    message,
    rate_limited,
    start_server,
    tool_use_block,
)
from unbounded.cli import app, compact_command, inspect_command  # noqa: F401  (registers them)
from unbounded.events import Event
from unbounded.hooks import HookRunner
from unbounded.policy import Policy
from unbounded.providers.base import AuthenticationError
from unbounded.providers.retry import RetryingProvider
from unbounded.redaction import Redactor, find_secrets, redact, redact_data
from unbounded.session import Session, SessionConfig

anthropic = pytest.importorskip("anthropic")

KEY = "sk-ant-test-PLANTED-" + secrets.token_hex(16)
OPENAI_KEY = "sk-proj-PLANTED" + secrets.token_hex(16)
CONFIG = SessionConfig(
    model="claude-sonnet-5-5",
    system="You are a careful agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    context_window=60_000,
)
SUMMARY = nine_section_summary("keep going")


@pytest.fixture(autouse=True)
def _fast_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiserver._Handler, "disable_nagle_algorithm", True)


def _replies(request: RecordedRequest) -> Reply:
    body = request.json if isinstance(request.json, dict) else {}
    last = body.get("messages", [{}])[-1].get("content")
    if "<summary>" in str(last):
        return message(SUMMARY, chunk_size=4096)
    turn = int(request.request_id.rsplit("_", 1)[-1])
    read = 8_000 if turn < 10 else 0  # the cache read collapses late: a cache-break diff
    return message("ok", tool_use_block("Bash", {"command": f"step {turn}"}, id=f"toolu_{turn:03d}"), usage={"input_tokens": 500, "cache_read_input_tokens": read}, chunk_size=4096)


def _files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def test_a_planted_api_key_appears_in_no_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    log_file = tmp_path / "debug.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    events: list[Event] = []
    folder, diffs = tmp_path / "session", tmp_path / "diffs"
    try:
        with start_server() as api:
            api.anthropic.push(auth_error(), rate_limited("1"), *([_replies] * 200))
            provider = AnthropicProvider(api_key=KEY, base_url=api.anthropic_base_url, timeout=5)
            sleeps: list[float] = []

            async def sleep(delay: float) -> None:
                sleeps.append(delay)

            retrying = RetryingProvider(provider, sleep=sleep, events=events.append)
            hook = f"{sys.executable} -c \"import sys; sys.stdin.read(); print('hook context')\""
            hooks = HookRunner({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": hook}]}]}}, session_id="s", cwd=tmp_path)
            session = Session.open(folder, CONFIG, policy=Policy(), summarizer=retrying, events=events.append, hooks=hooks, diff_dir=diffs, allowed_roots=[str(tmp_path)])
            session.add_user("Please run the steps.")

            async def drive() -> None:
                with pytest.raises(AuthenticationError) as refused:
                    await session.call(retrying, stream=True)
                logging.getLogger("test").error("the call failed: %s", refused.value)
                previous: list[str] = []
                for _ in range(10):
                    if previous:
                        session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": "done"} for tool_id in previous])
                    response = await session.call(retrying, stream=True)
                    previous = [str(block["id"]) for block in response.tool_uses]
                session.config = dataclasses.replace(session.config, system="You are a careful agent. Be brief.")
                session.add_tool_results([{"type": "tool_result", "tool_use_id": tool_id, "content": "done"} for tool_id in previous])
                await session.compact()

            asyncio.run(drive())
            sent = api.requests[0].headers
            assert KEY in (sent.get("x-api-key", "") + sent.get("authorization", ""))  # the key was in use
            assert sleeps == [1.0]
            transcript = folder / "transcript.jsonl"
            logging.getLogger("test").info("events: %r", events)
        runner = CliRunner()
        for args in (["inspect", str(transcript), "--json"], ["compact", str(transcript), "--summarizer", "extractive", "--json", "-o", str(tmp_path / "compacted.jsonl")]):
            outcome = runner.invoke(app, args)
            assert outcome.exit_code == 0, outcome.output
            (tmp_path / f"cli-{args[0]}.out").write_text(outcome.output)
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()

    assert any(path.name.startswith("cache-break-") for path in _files_under(diffs))
    assert log_file.stat().st_size > 0
    written = _files_under(tmp_path)
    assert len(written) >= 8
    for path in written:
        data = path.read_bytes()
        for planted in (KEY, OPENAI_KEY):
            assert planted.encode() not in data, f"{path} holds the API key"
            assert planted[-12:].encode() not in data, f"{path} holds part of the API key"


# -- redaction ------------------------------------------------------------------------------------------------

SAMPLES = {
    "anthropic_key": "sk-ant-api03-" + "A1b2C3d4E5" * 4,
    "openai_key": "sk-proj-" + "Zz9Yy8Xx7W" * 3,
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "slack_token": "xoxb-123456789012-abcdefghij",
    "google_api_key": "AIza" + "S" * 35,
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_of_key_is_redacted(kind: str) -> None:
    text = f"before {SAMPLES[kind]} after"
    assert redact(text) == f"before [REDACTED:{kind}] after"


def test_bearer_tokens_aws_secrets_and_private_keys() -> None:
    text = (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n"
        "-----BEGIN RSA PRIVATE KEY-----\ncut off mid-way"
    )
    assert redact(text) == (
        "Authorization: Bearer [REDACTED:bearer_token]\n"
        "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n"
        "[REDACTED:private_key]\n"
        "[REDACTED:private_key]"
    )


@pytest.mark.parametrize(
    "harmless",
    ["task-list of sk-items", "the risk-ant-colony model", "AKIA is a prefix", "bearer of bad news", "ghp_short", "a normal sentence about keys and tokens"],
)
def test_ordinary_text_is_left_alone(harmless: str) -> None:
    assert redact(harmless) == harmless and find_secrets(harmless) == []


def test_environment_secrets_and_nested_data() -> None:
    redactor = Redactor.from_environment({"MY_SERVICE_TOKEN": "plain-looking-value-123", "SHORT_TOKEN": "abc", "HOME": "/root"})
    data = {"content": [{"type": "text", "text": "token plain-looking-value-123 and abc"}], SAMPLES["github_token"]: 1}
    assert redactor.redact_data(data) == {"content": [{"type": "text", "text": "token [REDACTED:secret] and abc"}], "[REDACTED:github_token]": 1}
    assert redact_data(["x", 1, None, {"k": SAMPLES["aws_access_key_id"]}]) == ["x", 1, None, {"k": "[REDACTED:aws_access_key_id]"}]
    extra = Redactor().with_patterns(("ticket", r"TICKET-\d{6}"))
    assert extra.redact("see TICKET-123456") == "see [REDACTED:ticket]"


def _session_with_a_pasted_key(tmp_path: Path, redact_secrets: bool | Redactor, monkeypatch: pytest.MonkeyPatch) -> tuple[Session, Any]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    secret_file = tmp_path / "project" / "config.env"
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    secret_file.write_text(f"GITHUB_TOKEN={SAMPLES['github_token']}\n")
    session = Session.open(tmp_path / "s", CONFIG, policy=Policy(), allowed_roots=[str(secret_file.parent)], redact_secrets=redact_secrets)
    session.add_user(f"Use the key {KEY} and the AWS id {SAMPLES['aws_access_key_id']}.")
    session.record({"content": [{"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": str(secret_file)}}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    session.add_tool_results([{"type": "tool_result", "tool_use_id": "r1", "content": "(the file)"}])
    result = asyncio.run(session.compact())
    return session, result


def test_session_redacts_what_a_compaction_writes_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, result = _session_with_a_pasted_key(tmp_path, True, monkeypatch)
    written = [entry.data for entry in result.new_entries()]
    assert KEY not in str(written) and SAMPLES["aws_access_key_id"] not in str(written)
    assert SAMPLES["github_token"] not in str(written)  # the re-read file, redacted too
    assert "[REDACTED:" in result.summary_text
    assert "[REDACTED:github_token]" in str([a.data for a in result.attachments])
    # what the user wrote stays as it was: the transcript is append-only
    assert KEY in str(session.entries[0].data)


def test_without_the_flag_nothing_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, result = _session_with_a_pasted_key(tmp_path, False, monkeypatch)
    assert SAMPLES["aws_access_key_id"] in result.summary_text
