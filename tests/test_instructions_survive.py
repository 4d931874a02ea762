"""The user's standing instructions, the instruction files and the latest request survive three
compactions in a row, verbatim: with the offline summarizer, and with a model that leaves
them out of its summary (the facts ledger carries them)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.facts import text_of
from unbounded.extensions.instructions import NestedMemory
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.tokens.estimate import estimate_messages_tokens

RULES = ("Never push to main, open a pull request instead.", "Use pnpm, not npm.")
BACKGROUND = "The exporter writes CSV and JSON files for the billing team and runs nightly. " * 16
# Long enough that quoting the message in a list of user messages cuts the rule off: only
# the standing instructions and the latest-request block can carry the end of each.
FIRST = f"Port the exporter to TypeScript. {BACKGROUND}\n{RULES[0]}"
LATEST = f"Now also keep the old CLI flags working.\n{BACKGROUND}\n{RULES[1]} Start with the --format flag."
CLAUDE_MD = "Project rules: run `pnpm test` before every commit.\nKeep functions under 40 lines."
CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[
        {"name": "Bash", "description": "run", "input_schema": {"type": "object"}},
        {"name": "Read", "description": "read", "input_schema": {"type": "object"}},
    ],
    context_window=60_000,
)


class ForgetfulModel:
    """A summarizer that writes a plausible summary and leaves every instruction out."""

    name = "forgetful"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        reply = nine_section_summary("the exporter port")
        return ModelResponse([{"type": "text", "text": reply}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def _reply(turn: int, request: ProviderRequest) -> ModelResponse:
    size = estimate_messages_tokens(request["messages"]) + 2_000
    if turn == 0:
        block = {"type": "tool_use", "id": "t0", "name": "Read", "input": {"file_path": "/proj/src/export.ts"}}
    else:
        block = {"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {"command": f"pnpm build --step {turn}"}}
    usage = {"input_tokens": 50, "cache_read_input_tokens": size - 50, "output_tokens": 40}
    return ModelResponse([block], "tool_use", usage, "claude-sonnet-4-5", id=f"msg_{turn}")


def _view_text(session: Session) -> str:
    return "\n".join(text_of(m["content"]) + "\n" + "\n".join(
        text_of(b.get("content")) for b in m["content"] if isinstance(m["content"], list) and b.get("type") == "tool_result"
    ) for m in normalize_messages(session.view))


def _run(summarizer: Any) -> list[str]:
    files = {"/proj/CLAUDE.md": CLAUDE_MD}
    memory = NestedMemory("/proj", read_file=files.get, resolve=os.path.normpath, clock=lambda: 1.0)
    session = Session(CONFIG, store=MemoryStore(), policy=Policy(), summarizer=summarizer, extensions=[memory])
    session.add_user(FIRST)
    views: list[str] = []
    turn = 0
    while session.status().compactions < 3 and turn < 200:
        if turn == 2:
            session.add_user(LATEST)
        request = asyncio.run(session.prepare())
        validate_request(request["messages"])
        compactions = session.status().compactions
        if compactions > len(views):
            views.append(_view_text(session))
        session.record(_reply(turn, request))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "built\n" * 1_500}])
        turn += 1
    assert session.status().compactions >= 3
    return views


@pytest.mark.parametrize("summarizer", [None, ForgetfulModel()], ids=["offline", "forgetful-model"])
def test_rules_files_and_the_latest_request_survive_three_compactions(summarizer: Any) -> None:
    views = _run(summarizer)
    assert len(views) >= 3
    for view in views:
        for rule in RULES:
            assert rule in view
        assert CLAUDE_MD in view
        for line in LATEST.split("\n"):
            assert line.strip() in view
    # what the model wrote never held them: the ledger did
    if summarizer is not None:
        assert summarizer.calls >= 3
        assert RULES[0] not in nine_section_summary("the exporter port")


def test_without_the_ledger_a_forgetful_model_loses_them() -> None:
    """The check above can fail: with the facts ledger off, the rules are gone."""
    files = {"/proj/CLAUDE.md": CLAUDE_MD}
    memory = NestedMemory("/proj", read_file=files.get, resolve=os.path.normpath, clock=lambda: 1.0)
    session = Session(CONFIG, store=MemoryStore(), policy=Policy(facts_ledger=False), summarizer=ForgetfulModel(), extensions=[memory])
    session.add_user(FIRST)
    turn = 0
    while session.status().compactions < 2 and turn < 200:
        request = asyncio.run(session.prepare())
        session.record(_reply(turn, request))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{turn}", "content": "built\n" * 1_500}])
        turn += 1
    assert RULES[0] not in _view_text(session)
