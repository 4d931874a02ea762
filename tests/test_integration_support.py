"""What the framework integrations share (`integrations/_support.py`): a framework's message
appended by what it is, and the `recall` tool's answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from unbounded.errors import ConfigError
from unbounded.integrations._support import answer_recall, append_message, as_session
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession


def _session() -> Session:
    return Session(SessionConfig(model="claude-sonnet-4-5"), policy=Policy())


def _stored(session: Session, index: int) -> Any:
    message = session.entries[index].message
    assert message is not None
    return message


def test_append_message_routes_by_role_and_content() -> None:
    session = _session()
    append_message(session, "user", [{"type": "text", "text": "list the files"}])
    call = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
    usage = {"input_tokens": 40, "output_tokens": 5}
    append_message(session, "assistant", [call], {"usage": usage, "model": "claude-x"})
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}
    append_message(session, "user", [result])
    assert [entry.type for entry in session.entries] == ["user", "assistant", "user"]
    assert _stored(session, 1)["content"] == [call]
    assert _stored(session, 1)["usage"]["input_tokens"] == 40
    assert _stored(session, 1)["model"] == "claude-x"
    assert _stored(session, 2)["content"] == [result]
    assert session.pending_tool_use_ids() == []


def test_append_message_checks_tool_results_only_as_tool_results() -> None:
    session = _session()
    append_message(session, "user", [{"type": "text", "text": "hello"}])
    call = {"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {}}
    append_message(session, "assistant", [call])
    nameless = {"type": "tool_result", "tool_use_id": "", "content": "x"}
    with pytest.raises(ConfigError, match="add_tool_results takes tool_result blocks"):
        append_message(session, "user", [nameless])
    # beside text a result is part of a user turn (which add_tool_results would refuse)
    result = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}
    append_message(session, "user", [{"type": "text", "text": "here:"}, result])
    assert session.pending_tool_use_ids() == []
    assert [b["type"] for b in _stored(session, -1)["content"]] == ["text", "tool_result"]


def _recalling_session() -> Session:
    session = _session()
    session.add_user("remember the number 4711")
    session.record({"content": [{"type": "text", "text": "noted"}]})
    return session


def test_answer_recall_gives_the_transcripts_text() -> None:
    session = _recalling_session()
    expected = session.run_recall(
        {"type": "tool_use", "id": "c1", "name": "recall", "input": {"query": "4711"}}
    )
    answer = answer_recall(session, "c1", {"query": "4711"})
    content = expected["content"]
    assert answer.text == (content if isinstance(content, str) else json.dumps(content))
    assert "4711" in answer.text and answer.is_error is False


def test_answer_recall_wrong_arguments_are_an_error_answer() -> None:
    answer = answer_recall(_recalling_session(), "c2", {"invalid": "{not json"})
    assert answer.is_error is True and answer.text


def test_as_session_takes_either_session() -> None:
    session = _session()
    assert as_session(session) is session
    assert as_session(SyncSession(session)) is session
    bad: Any = "a folder"
    with pytest.raises(ConfigError, match="expected a Session or a SyncSession, not str"):
        as_session(bad)
