"""A prompt given again before anything answered it is kept once (its call failed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver import ApiServer, api_server_fixture, message  # noqa: F401  (registers the api_server fixture)
from unbounded.errors import ConfigError
from unbounded.providers import OpenAIProvider
from unbounded.session import Session, SessionConfig, SyncSession

pytest.importorskip("openai")


def test_the_openai_quick_start_run_again_after_a_missing_key_sends_the_prompt_once(
    api_server: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "openai"
    session = SyncSession.open(folder, SessionConfig(model="gpt-5-mini"))
    session.add_user("Say hello.")
    with pytest.raises(ConfigError, match="cannot build an OpenAI client"):
        session.call(OpenAIProvider(), stream=True)
    session.close()

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", api_server.openai_base_url)
    api_server.openai.push(message("Hello."))
    session = SyncSession.open(folder, SessionConfig(model="gpt-5-mini"))
    session.add_user("Say hello.")
    assert session.call(OpenAIProvider(), stream=True).text == "Hello."
    sent = api_server.last.json["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert "Say hello.\n\nSay hello." not in str(sent) and str(sent).count("Say hello.") == 1
    assert len([e for e in session.session.entries if e.type == "user"]) == 1


def test_a_prompt_repeated_after_a_reply_is_a_new_message() -> None:
    session = Session(SessionConfig(model="claude-sonnet-4-6"))
    first = session.add_user("yes")
    assert session.add_user("yes") is first  # nothing answered it yet: kept once
    session.record({"content": [{"type": "text", "text": "Sure?"}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    second = session.add_user("yes")
    assert second is not first
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user"]
    assert session.add_user("no") is not second  # another prompt is appended
    session.add_user([{"type": "text", "text": "no"}])  # the same prompt as blocks: kept once
    assert [e.content for e in session.entries if e.type == "user"] == ["yes", "yes", "no"]


def test_a_message_with_flags_is_always_appended() -> None:
    session = Session(SessionConfig(model="claude-sonnet-4-6"))
    first = session.add_user("reminder", is_meta=True)
    second = session.add_user("reminder", is_meta=True)
    assert second is not first
    third = session.add_user("reminder")  # a prompt after the application's own message
    assert third is not second and len([e for e in session.entries if e.type == "user"]) == 3
