"""Sub-agents: forked with the parent's cache-safe parameters, compacted with the continuation
prompt, cleanup scoped to the child, storage of their own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import continuation_summary

from unbounded.compaction.conversation import CompactionResult
from unbounded.compaction.prompts import SUBAGENT_CONTINUATION_PROMPT
from unbounded.errors import ConfigError
from unbounded.events import CompactionFinished, Event
from unbounded.extensions.session_memory import SessionMemory
from unbounded.extensions.subagents import (
    ContinuationSummarizer,
    check_agent_name,
    fork_subagent,
    resume_subagent,
    subagent_query_source,
    subagent_result,
)
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Extension, Session, SessionConfig
from unbounded.storage import FolderStore, MemoryStore
from unbounded.tokens.estimate import estimate_messages_tokens

CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    thinking={"type": "enabled", "budget_tokens": 2_000},
    context_window=60_000,
)


class Summarizer:
    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.requests.append(request)
        text = continuation_summary("audit the logs; next: read the rest")
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def answer(session: Session, turn: int, prefix: str = "") -> None:
    size = estimate_messages_tokens(session.messages) + 500
    session.record(
        ModelResponse(
            [{"type": "tool_use", "id": f"{prefix}t{turn}", "name": "Bash", "input": {"command": f"grep -n ERR log{turn}"}}],
            "tool_use",
            {"input_tokens": 20, "cache_read_input_tokens": size, "output_tokens": 30},
            "claude-sonnet-4-5",
            id=f"msg_{prefix}{turn}",
        )
    )
    session.add_tool_results([{"type": "tool_result", "tool_use_id": f"{prefix}t{turn}", "content": "ERR line\n" * 500}])


async def drive(session: Session, turns: int, prefix: str = "") -> None:
    for turn in range(turns):
        request = await session.prepare()
        validate_request(request["messages"])
        answer(session, turn, prefix)


def test_fork_shares_the_cache_safe_parameters_and_prefix(tmp_path: Path) -> None:
    parent = Session.open(tmp_path / "main", CONFIG, policy=Policy(), summarizer=Summarizer())
    parent.add_user("Find every error in the logs.")
    asyncio.run(drive(parent, 4))
    last = asyncio.run(parent.prepare())
    child = fork_subagent(parent, "log-auditor", "Audit log3 only and report.")
    assert child.config.query_source == "agent:log-auditor"
    assert child.cache_safe_params() == parent.cache_safe_params()
    first = asyncio.run(child.prepare())
    for key in ("model", "system", "tools", "thinking", "max_tokens"):
        assert first[key] == last[key], key
    # the parent's messages, then the task prompt: identical up to the breakpoint markers
    def plain(messages: list[Any]) -> str:
        return str(messages).replace(", 'cache_control': {'type': 'ephemeral'}", "")

    assert plain(first["messages"][: len(last["messages"]) - 1]) == plain(last["messages"][:-1])
    assert "Audit log3 only" in str(first["messages"][-1])
    # its own folder, transcript and lock
    assert isinstance(child.store, FolderStore)
    assert child.store.folder == (tmp_path / "main" / "subagents" / "log-auditor").resolve()
    assert len(child.entries) == len([e for e in parent.view if not e.is_compact_boundary]) + 1
    child.store.close()
    with pytest.raises(ConfigError, match="already has a transcript"):
        fork_subagent(parent, "log-auditor", "again")
    again = resume_subagent(parent, "log-auditor")
    assert len(again.entries) == len(child.entries) and again.config.query_source == "agent:log-auditor"


def test_child_compaction_uses_the_continuation_prompt_and_leaves_the_parent_alone() -> None:
    summarizer = Summarizer()
    parent_memory = SessionMemory(background=False)
    parent_events: list[Event] = []
    parent_listener_calls: list[str] = []

    class CompactionSpy(Extension):
        def after_compact(self, session: Session, result: CompactionResult) -> None:
            parent_listener_calls.append(result.summarizer)

    parent = Session(CONFIG, store=MemoryStore(), policy=Policy(), summarizer=summarizer, events=parent_events.append, extensions=[parent_memory, CompactionSpy()])
    parent.add_user("Find every error in the logs.")
    asyncio.run(drive(parent, 3))
    asyncio.run(parent.prepare())
    parent_state = (parent.micro.to_dict(), parent.tracking.to_dict())
    parent_snapshot = parent.detector.snapshot(parent.config.query_source)
    assert parent_snapshot is not None
    parent_pointer = parent_memory.updated_through
    parent_view = list(parent.view)

    child_events: list[Event] = []
    child = fork_subagent(parent, "auditor", "Audit all logs.", events=child_events.append)
    assert isinstance(child.summarizer, ContinuationSummarizer)
    asyncio.run(drive(child, 30, prefix="c"))

    finished = [e for e in child_events if isinstance(e, CompactionFinished)]
    assert finished and child.status().compactions == len(finished)
    sent = summarizer.requests[0]["messages"][-1]
    assert sent["content"] == SUBAGENT_CONTINUATION_PROMPT or sent["content"][0]["text"] == SUBAGENT_CONTINUATION_PROMPT
    assert "Task Overview: audit the logs" in str(normalize_messages(child.view))
    # nothing of the parent moved
    assert parent.status().compactions == 0 and parent_listener_calls == []
    assert (parent.micro.to_dict(), parent.tracking.to_dict()) == parent_state
    assert parent.detector.snapshot(parent.config.query_source) is parent_snapshot  # baseline kept
    assert parent_memory.updated_through == parent_pointer and list(parent.view) == parent_view
    assert not any(isinstance(e, CompactionFinished) for e in parent_events)
    assert subagent_result(child) == ""  # the child's last response was a tool call


def test_continuation_summarizer_only_rewrites_summary_requests() -> None:
    inner = Summarizer()
    wrapped = ContinuationSummarizer(inner)
    plain: ProviderRequest = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}
    assert wrapped.rewrite(plain) is plain
    blocks: ProviderRequest = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Write a <summary>", "cache_control": {"type": "ephemeral"}}]}],
    }
    rewritten = wrapped.rewrite(blocks)
    assert rewritten["messages"][-1]["content"] == [{"type": "text", "text": SUBAGENT_CONTINUATION_PROMPT, "cache_control": {"type": "ephemeral"}}]
    assert blocks["messages"][-1]["content"][0]["text"] == "Write a <summary>"  # type: ignore[index]
    asyncio.run(wrapped.create(blocks))
    assert inner.requests[-1]["messages"][-1]["content"][0]["text"] == SUBAGENT_CONTINUATION_PROMPT  # type: ignore[index]
    assert wrapped.name == inner.name
    with pytest.raises(ConfigError):
        ContinuationSummarizer(object())  # type: ignore[arg-type]


def test_names_results_and_memory_children() -> None:
    for bad in ("", "../x", "a/b", ".hidden", "x" * 65, "a..b"):
        with pytest.raises(ConfigError):
            check_agent_name(bad)
    assert subagent_query_source("reviewer-2") == "agent:reviewer-2"
    parent = Session(CONFIG, store=MemoryStore(), policy=Policy())
    parent.add_user("hi")
    child = fork_subagent(parent, "fresh", "Say done.", inherit_messages=False)
    assert isinstance(child.store, MemoryStore) and len(child.entries) == 1
    child.record(ModelResponse([{"type": "text", "text": "done"}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m"))
    assert subagent_result(child) == "done"
    assert child.summarizer is None  # the extractive summarizer covers it


def test_a_child_of_a_parent_that_called_its_model_summarizes_with_that_model() -> None:
    """No summarizer given: the parent's model (the provider of its calls) is the child's,
    asked for the continuation summary."""
    model = Summarizer()
    parent = Session(CONFIG, store=MemoryStore(), policy=Policy())
    assert fork_subagent(parent, "early").summarizer is None  # no model known yet
    parent.add_user("Find every error in the logs.")
    asyncio.run(parent.call(model))
    child = fork_subagent(parent, "auditor", "Audit all logs.")
    assert isinstance(child.summarizer, ContinuationSummarizer) and child.summarizer.inner is model
