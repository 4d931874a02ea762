"""A scripted 300-turn agent session through the whole pipeline.

The main requests go through `AnthropicProvider` and the real `anthropic` SDK to the local
scripted API server (tests/apiserver.py). Session-memory updates and summaries come from
in-process scripted providers. Phases:

    turns   0-109  notes are updated by a (scripted) forked model call: compactions come from
                   session memory, with no summary call
    turns 110-169  the notes updater is down: session-memory compaction refuses (the notes do
                   not cover the conversation), the summary call fails three times, the
                   circuit breaker trips and the extractive summarizer recovers; later
                   compactions use the summary call again
    turns 170-299  the updater is back; one main request answers prompt-too-long and is
                   recovered by reactive compaction (`Session.call`)
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

import apiserver
from apiserver import RecordedRequest, message, prompt_too_long, start_server, tool_use_block
from unbounded.compaction.memory_updaters import ModelNotesUpdater
from unbounded.compaction.notes import SECTION_TITLES, notes_are_empty
from unbounded.compaction.offline_notes import offline_notes
from unbounded.events import CompactionFinished, Event, SessionMemoryUpdateFailed
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, ServerError
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore
from unbounded.tokens.estimate import estimate_messages_tokens

pytest.importorskip("anthropic")
from unbounded.model.profile import MODEL_PROFILE
from unbounded.providers.anthropic import AnthropicProvider

TURNS = 300
UPDATER_DOWN = range(110, 170)
PTL_TURN = 230
TOOLS = [
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
    {"name": "Edit", "description": "Edit a file", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}},
]
CONFIG = SessionConfig(
    model="claude-sonnet-5-5",
    system="You are a careful coding agent.",
    tools=TOOLS,
    context_window=60_000,  # auto-compaction at 27,000 tokens
    max_tokens=8_192,  # the SDK insists on streaming above ~21,000
)
POLICY = Policy(
    session_memory_init_tokens=4_000,
    session_memory_min_tokens_between_updates=2_500,
    session_memory_tool_calls_between_updates=3,
    session_memory_section_tokens=600,
    session_memory_total_tokens=4_000,
    session_memory_compact_section_chars=2_400,
    session_memory_keep_min_tokens=3_000,
    session_memory_keep_min_text_messages=2,
    session_memory_keep_max_tokens=8_000,
    session_memory_wait_seconds=30,  # ends with the update in flight; far beyond a stall
    session_memory_update_timeout_seconds=10,
    compact_max_summary_requests=1_000,  # the breaker decides here, not the request budget
)


def task_prompt(k: int) -> str:
    return f"Task {k}: make module mod{k % 7} handle case {k} and keep the tests green."


def agent_reply(turn: int) -> tuple[list[dict[str, Any]], bool]:
    """The scripted agent's response at `turn`: (content blocks, ends the agent's turn)."""
    if turn % 25 == 24:
        return [{"type": "text", "text": f"Done with task {turn // 25}: case {turn // 25} passes."}], True
    module = f"src/mod{turn % 7}.py"
    kind = turn % 4
    if kind == 0:
        return [tool_use_block("Read", {"file_path": module}, id=f"toolu_{turn}_a")], False
    if kind == 1:
        return [
            {"type": "text", "text": f"Editing {module} for case {turn}."},
            tool_use_block(
                "Edit",
                {"file_path": module, "old_string": f"v{turn}", "new_string": f"v{turn + 1}"},
                id=f"toolu_{turn}_a",
            ),
        ], False
    if kind == 2:  # two tool calls in one response
        return [
            tool_use_block("Bash", {"command": f"pytest -q tests/test_case{turn}.py"}, id=f"toolu_{turn}_a"),
            tool_use_block("Read", {"file_path": f"tests/test_case{turn}.py"}, id=f"toolu_{turn}_b"),
        ], False
    return [tool_use_block("Bash", {"command": f"ruff check src/mod{turn % 7}.py"}, id=f"toolu_{turn}_a")], False


def tool_results(turn: int, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for block in blocks:
        if block["type"] != "tool_use":
            continue
        error = turn % 13 == 5 and block["name"] == "Bash"
        text = (
            f"AssertionError: case {turn} expected 3 got 4"
            if error
            else f"output of {block['name']} at turn {turn}\n" + "data line\n" * 350
        )
        results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text, "is_error": error})
    return results


class MainApi:
    """Replies of the scripted API server for the main requests, with realistic usage."""

    def __init__(self) -> None:
        self.turn = 0
        self.calls = 0

    def __call__(self, request: RecordedRequest) -> Any:
        self.calls += 1
        body = request.json
        size = estimate_messages_tokens(body["messages"]) + 400
        content, _ = agent_reply(self.turn)
        return message(
            *content,
            usage={"input_tokens": 60, "cache_read_input_tokens": max(0, size - 60), "output_tokens": 80},
            id=f"msg_{self.turn:04d}",
            model="claude-sonnet-5-5",
        )


class NotesModel:
    """A scripted forked notes call: rewrites the notes file with `Write` (the session has an
    Edit tool, so its tool list is kept) and also tries a Bash call, which must be refused."""

    name = "scripted-notes"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0
        self.down = False
        self.requests: list[ProviderRequest] = []

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        self.requests.append(request)
        if self.down:
            raise ServerError("notes model unavailable", status=503)
        prompt = request["messages"][-1]["content"]
        assert isinstance(prompt, str)
        notes = re.search(r"<session_notes>\n(.*)\n</session_notes>", prompt, re.S)
        path = re.search(r'file_path "([^"]+)"', prompt)
        assert notes and path
        new = offline_notes(notes.group(1), request["messages"][:-1][-16:], policy=POLICY)
        return ModelResponse(
            [
                {"type": "tool_use", "id": "n1", "name": "Write", "input": {"file_path": path.group(1), "content": new}},
                {"type": "tool_use", "id": "n2", "name": "Bash", "input": {"command": "rm -rf /"}},
            ],
            "tool_use",
            {"input_tokens": 10, "cache_read_input_tokens": 1_000, "output_tokens": 300},
            "claude-sonnet-5-5",
        )


class Summarizer:
    """Scripted summary calls: fails `failures` times, then answers."""

    name = "scripted-summary"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise ServerError("summary model overloaded", status=500)
        text = nine_section_summary("the tasks of this session; current work: editing modules")
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {"input_tokens": 5, "output_tokens": 50}, "m")


async def run_soak(folder: Path) -> dict[str, Any]:
    events: list[Event] = []
    notes_model = NotesModel()
    summarizer = Summarizer()
    memory = SessionMemory(ModelNotesUpdater(notes_model))
    main = MainApi()
    log: dict[str, Any] = {"memory_compaction_summary_calls": [], "ptl": None}
    with start_server() as api:
        provider = AnthropicProvider(api.anthropic_client())
        session = Session.open(
            folder, CONFIG, policy=POLICY, summarizer=summarizer, events=events.append, extensions=[memory]
        )
        session.add_user(task_prompt(0))
        for turn in range(TURNS):
            main.turn = turn
            notes_model.down = turn in UPDATER_DOWN
            if turn == UPDATER_DOWN.start:
                # three failed compactions: each is two calls (the cache-sharing call, then
                # the direct fallback call)
                summarizer.failures = 6
            if turn == PTL_TURN:
                api.anthropic.push(prompt_too_long(70_000, 60_000))
            api.anthropic.push(main)
            compactions = session.status().compactions
            summary_calls = summarizer.calls
            seen = len(events)
            response = await session.call(provider, stream=turn % 5 == 0)
            new_events = events[seen:]
            finished = [e for e in new_events if isinstance(e, CompactionFinished)]
            if any(e.summarizer == "session_memory" for e in finished):
                log["memory_compaction_summary_calls"].append(summarizer.calls - summary_calls)
            if turn == PTL_TURN:
                log["ptl"] = {
                    "reactive": any(e.kind == "reactive_compaction" for e in new_events),
                    "compacted": session.status().compactions - compactions,
                    "answered": response.id == f"msg_{turn:04d}",
                }
            blocks = list(response.content)
            _, ends = agent_reply(turn)
            if ends:
                session.add_user(task_prompt(turn // 25 + 1))
            else:
                session.add_tool_results(tool_results(turn, blocks))
            await asyncio.sleep(0)  # let a background notes update run
        await memory.wait_for_update(30)  # a hang guard: ends with the update
        final_request = await session.prepare()
        log.update(
            events=events,
            session=session,
            memory=memory,
            notes_model=notes_model,
            summarizer=summarizer,
            main_calls=len(api.requests),
            unscripted=len(api.unscripted),
            final_request=final_request,
        )
    return log


@pytest.fixture
def fast_folder(tmp_path: Path) -> Any:
    """A folder in memory (tmpfs) when there is one: the session fsyncs ~8 times a turn, and on
    a busy disk that alone can take longer than the rest of this test. Durability is what
    test_resume_kill checks, on the ordinary disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="unbounded-soak-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_300_turn_session(fast_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server writes headers and body separately; without TCP_NODELAY each reply waits
    # for a delayed ACK (~40 ms), which would dominate this test's time.
    monkeypatch.setattr(apiserver._Handler, "disable_nagle_algorithm", True)
    tmp_path = fast_folder
    log = asyncio.run(run_soak(tmp_path / "s"))
    events: list[Event] = log["events"]
    session: Session = log["session"]
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    by = [e.summarizer for e in finished]

    # auto-compaction happened repeatedly, at least once from session memory without a call
    assert session.status().compactions == len(finished) >= 4, by
    assert by.count("session_memory") >= 2, by
    assert log["memory_compaction_summary_calls"] and all(n == 0 for n in log["memory_compaction_summary_calls"])
    assert by.index("session_memory") < by.index("extractive")

    # three summary failures trip the breaker; the extractive summarizer recovers
    failed = [i for i, e in enumerate(events) if e.kind == "compaction_failed"]
    tripped = [i for i, e in enumerate(events) if e.kind == "circuit_breaker_tripped"]
    assert len(tripped) == 1 and len(failed) >= 3
    after = [e for e in events[tripped[0]:] if isinstance(e, CompactionFinished)]
    assert after[0].summarizer == "extractive"
    assert "scripted-summary" in by  # the summary call works again after the breaker
    assert session.status().consecutive_failures == 0
    assert any(isinstance(e, SessionMemoryUpdateFailed) for e in events)

    # the prompt-too-long answer was recovered by reactive compaction
    assert log["ptl"] == {"reactive": True, "compacted": 1, "answered": True}

    # the forked notes calls shared the main request's cache-safe parameters
    notes_model: NotesModel = log["notes_model"]
    fork = notes_model.requests[-1]
    assert fork["system"] == log["final_request"]["system"] and [t["name"] for t in fork["tools"]] == ["Read", "Edit", "Bash", "recall"]
    assert "cache_control" in str(fork["messages"][-2]) and "cache_control" not in str(fork["messages"][-1])

    # the session is in a sound state: valid request, under the threshold, notes in place
    messages = normalize_messages(session.view)
    validate_request(messages)
    assert session.status().tokens < session.thresholds.autocompact
    notes = session.store.read_memory()
    assert notes is not None and not notes_are_empty(notes)
    assert all(f"# {title}" in notes for title in SECTION_TITLES)
    assert "rm -rf" not in notes
    assert log["main_calls"] == TURNS + 1 and log["unscripted"] == 0  # the PTL turn sent twice
    # the user's requests survive the compactions (in the notes or the summaries)
    assert task_prompt(1)[:60] in str(log["final_request"]["messages"])

    # what is on disk gives the same view
    assert isinstance(session.store, FolderStore)
    session.store.close()
    again = Session.open(tmp_path / "s", CONFIG, policy=POLICY, extensions=[SessionMemory()])
    assert normalize_messages(again.view) == messages
    assert again.status() == session.status()
