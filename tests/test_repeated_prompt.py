"""A prompt the previous run left unanswered (its call failed), given again, is kept once."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver import ApiServer, api_server_fixture, message  # noqa: F401  (registers the api_server fixture)
from unbounded.errors import ConfigError
from unbounded.providers import OpenAIProvider
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.sync_session import SyncSession

pytest.importorskip("openai")

CONFIG = SessionConfig(model="claude-sonnet-4-6")


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
    assert [m["role"] for m in sent] == ["user"] and str(sent).count("Say hello.") == 1
    assert len([e for e in session.session.entries if e.type == "user"]) == 1


def test_only_the_first_prompt_after_reopening_and_only_while_unanswered() -> None:
    within = Session(CONFIG)
    left = within.add_user("yes")
    assert within.add_user("yes") is not left  # within one process: two messages

    store = MemoryStore()
    first = Session(CONFIG, store=store)
    left = first.add_user("yes")
    first.close()
    reopened = Session(CONFIG, store=store)
    again = reopened.add_user("yes")
    assert again.uuid == left.uuid and len(reopened.entries) == 1  # kept once
    assert reopened.add_user("yes").uuid != left.uuid and len(reopened.entries) == 2  # only the first

    other = Session(CONFIG, store=MemoryStore([left]))
    other.add_user("no")  # another prompt first: added
    assert [e.content for e in other.entries] == ["yes", "no"]

    answered = Session(CONFIG, store=MemoryStore([left]))
    answered.record({"content": [{"type": "text", "text": "Sure?"}], "usage": {"input_tokens": 10, "output_tokens": 2}})
    answered.add_user("yes")  # after a reply: a new message
    assert [e.type for e in answered.entries] == ["user", "assistant", "user"]


def test_a_meta_message_is_not_a_prompt_left_unanswered() -> None:
    store = MemoryStore()
    first = Session(CONFIG, store=store)
    first.add_user("reminder", is_meta=True)
    first.close()
    reopened = Session(CONFIG, store=store)
    reopened.add_user("reminder")
    users = [(e.content, e.is_meta) for e in reopened.entries if e.type == "user"]
    assert users == [("reminder", True), ("reminder", False)]  # the prompt is added, not merged
