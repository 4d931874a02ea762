"""Session-memory compaction: the keep index, API invariants, refusals, the result, cleanup."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.cut import contiguous_tail_start
from unbounded.compaction.memory_compact import (
    adjust_index_to_preserve_api_invariants,
    api_invariants_hold,
    calculate_messages_to_keep_index,
    first_unsummarized_index,
    has_text_blocks,
    plan_messages_to_keep,
)
from unbounded.compaction.memory_updaters import OfflineNotesUpdater
from unbounded.compaction.notes import parse_notes, session_memory_template
from unbounded.errors import ConfigError
from unbounded.events import CompactionFinished, Event, SessionMemoryCompactionSkipped
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore, MemoryStore
from unbounded.tokens.estimate import estimate_messages_tokens

CONFIG = SessionConfig(model="claude-sonnet-4-5", system="sys", context_window=60_000)
POLICY = Policy(
    session_memory_init_tokens=1_000,
    session_memory_min_tokens_between_updates=1_000,
    session_memory_keep_min_tokens=2_000,
    session_memory_keep_min_text_messages=2,
    session_memory_keep_max_tokens=6_000,
)


def user(text: str) -> Entry:
    return Entry.user(text)


def result(tool_id: str, size: int = 400) -> Entry:
    return Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": "r" * size}])


def use(tool_id: str, message_id: str, *extra: dict[str, Any]) -> Entry:
    return Entry.assistant([*extra, {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}], message_id=message_id)


# -- the keep index ---------------------------------------------------------------------------------


def test_keep_index_meets_the_minimums_and_stops_at_the_maximum() -> None:
    view = [user("t" * 4_000) for _ in range(10)]  # 1,000 tokens each, all with text
    kw: dict[str, Any] = {"floor": 0, "min_tokens": 2_500, "min_text_messages": 2, "max_tokens": 6_000}
    assert calculate_messages_to_keep_index(view, 10, **kw) == 7  # 3,000 tokens, 3 texts
    assert calculate_messages_to_keep_index(view, 8, **kw) == 7  # expands from the first uncovered
    assert calculate_messages_to_keep_index(view, 2, **kw) == 2  # never forward past it (8,000 kept)
    assert calculate_messages_to_keep_index(view, 10, **{**kw, "min_text_messages": 9, "max_tokens": 5_000}) == 5
    assert calculate_messages_to_keep_index(view, 10, **{**kw, "floor": 9}) == 9  # not past the boundary
    # messages without text do not count towards the text minimum
    silent = [result(f"r{i}", 4_000) for i in range(6)] + [user("hello")]
    assert calculate_messages_to_keep_index(silent, 6, floor=0, min_tokens=10, min_text_messages=2, max_tokens=100_000) == 0
    assert has_text_blocks(user("x")) and not has_text_blocks(result("a")) and not has_text_blocks(user("  "))
    with pytest.raises(ConfigError):
        calculate_messages_to_keep_index(view, 3, floor=11, min_tokens=1, min_text_messages=1, max_tokens=2)


def test_parallel_tool_calls_and_thinking_stay_together() -> None:
    thinking = {"type": "thinking", "thinking": "plan the calls", "signature": "s"}
    view = [
        user("go"),
        Entry.assistant([thinking], message_id="A"),  # thinking written as its own line
        use("t1", "A"),
        result("t1"),
        use("t2", "A"),  # a second line of the same response
        result("t2"),
        use("t3", "B"),
        result("t3"),
    ]
    assert adjust_index_to_preserve_api_invariants(view, 5) == 1  # t2's result -> its call -> all of A
    assert adjust_index_to_preserve_api_invariants(view, 3) == 1
    assert adjust_index_to_preserve_api_invariants(view, 7) == 6
    assert adjust_index_to_preserve_api_invariants(view, 6) == 6
    assert adjust_index_to_preserve_api_invariants(view, 5, floor=3) == 4  # clamped at the floor...
    assert not api_invariants_hold(view, 4) and not api_invariants_hold(view, 3) and api_invariants_hold(view, 1) and api_invariants_hold(view, 6)


def test_the_first_uncovered_message_and_one_run_of_the_file() -> None:
    old = [user("a"), user("b"), user("c")]
    boundary = create_compact_boundary("auto", 100)
    summary = Entry.user("summary", is_compact_summary=True)
    boundary.compact_metadata["preservedSegment"] = {"headUuid": old[1].uuid, "anchorUuid": summary.uuid, "tailUuid": old[2].uuid}
    later = [user("d"), user("e")]
    entries = [*old, boundary, summary, *later]
    view = messages_after_compact_boundary(entries)
    assert [e.content for e in view[1:]] == ["summary", "b", "c", "d", "e"]
    assert contiguous_tail_start(entries, view) == 4  # "d": the spliced b, c are another run
    assert first_unsummarized_index(view, later[0].uuid) == 5
    assert first_unsummarized_index(view, None) == 1 and first_unsummarized_index(view, "gone") == 1
    policy = Policy(session_memory_keep_min_tokens=10_000, session_memory_keep_max_tokens=20_000)
    # the uncovered part starts inside the spliced segment: refused
    assert isinstance(plan_messages_to_keep(entries, view, summary.uuid, policy), str)
    # covered up to "d": the start may move forward over covered messages to one run
    assert plan_messages_to_keep(entries, view, later[0].uuid, policy) == 4


# -- the session ---------------------------------------------------------------------------------------


class Summarizer:
    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.calls = 0

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.calls += 1
        return ModelResponse([{"type": "text", "text": nine_section_summary("the work so far")}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def step(session: Session, turn: int, size: int = 1_600, thinking: bool = False) -> None:
    """One response (with parallel calls written as two lines sharing a message id) and its results."""
    message_id = f"msg_{turn}"
    first: list[dict[str, Any]] = [{"type": "thinking", "thinking": "think", "signature": "s"}] if thinking else []
    first.append({"type": "tool_use", "id": f"a{turn}", "name": "Bash", "input": {"command": f"make {turn}"}})
    session.append([Entry.assistant(first, message_id=message_id, usage=None)])
    session.add_tool_results([{"type": "tool_result", "tool_use_id": f"a{turn}", "content": "o" * size}])
    session.append([Entry.assistant([{"type": "tool_use", "id": f"b{turn}", "name": "Read", "input": {"file_path": f"f{turn}.py"}}], message_id=message_id)])
    session.add_tool_results([{"type": "tool_result", "tool_use_id": f"b{turn}", "content": "o" * size}])
    if turn % 3 == 0:
        size_now = estimate_messages_tokens(session.messages)
        session.record(ModelResponse([{"type": "text", "text": f"Step {turn} is done."}], "end_turn", {"input_tokens": size_now, "output_tokens": 5}, "m"))
        session.add_user(f"Continue with step {turn + 1}.")


def make_session(folder: Path | None = None, **options: Any) -> tuple[Session, SessionMemory, list[Event]]:
    events: list[Event] = []
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    store = FolderStore(folder) if folder else MemoryStore()
    options.setdefault("policy", POLICY)
    session = Session(CONFIG, store=store, events=events.append, extensions=[memory], **options)
    return session, memory, events


def test_compaction_from_the_notes_without_a_summary_call(tmp_path: Path) -> None:
    summarizer = Summarizer()
    session, memory, events = make_session(tmp_path / "s", summarizer=summarizer)
    session.add_user("Build the step runner.")
    for turn in range(12):
        step(session, turn, thinking=turn % 2 == 0)
    asyncio.run(memory.update_now(session))
    covered = memory.updated_through
    step(session, 12)
    step(session, 13)
    before = list(session.view)
    result = asyncio.run(session.auto_compact())
    assert result is not None and result.summarizer == "session_memory" and summarizer.calls == 0
    assert result.usage is None and result.attempts == 0 and result.request == {}
    # kept: from the first uncovered message (or earlier, for the minimums), whole responses
    kept = result.messages_to_keep
    index = before.index(kept[0])
    assert index <= next(i for i, e in enumerate(before) if e.uuid == covered) + 1
    assert api_invariants_hold(before, index)
    segment = result.boundary.compact_metadata["preservedSegment"]
    assert segment == {"headUuid": kept[0].uuid, "anchorUuid": result.summary_messages[0].uuid, "tailUuid": kept[-1].uuid}
    assert result.boundary.compact_metadata["sessionMemory"] is True
    summary = str(result.summary_messages[0].content)
    assert summary.startswith("This session continues") and "# Task Specification" in summary
    assert "Build the step runner." in summary and "Continue from where the conversation stopped" in summary
    assert str(tmp_path / "s" / "transcript.jsonl") in summary
    # the session applied it: the view is the summary then the kept messages, valid, smaller
    messages = normalize_messages(session.view)
    validate_request(messages)
    assert result.post_tokens < estimate_messages_tokens(normalize_messages(before)) / 2
    assert result.post_tokens < session.thresholds.autocompact
    assert [e.uuid for e in session.view[2 : 2 + len(kept)]] == [e.uuid for e in kept]
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished[-1].summarizer == "session_memory"
    # cleanup: the notes cover everything the summary replaced
    assert memory.updated_through in (covered, result.summary_messages[0].uuid)
    # the transcript on disk relinks the kept messages the same way
    assert isinstance(session.store, FolderStore)
    session.store.close()
    again, again_memory, _ = make_session(tmp_path / "s")
    assert normalize_messages(again.view) == messages
    assert again_memory.updated_through == memory.updated_through


def test_refusals() -> None:
    session, memory, events = make_session()
    session.add_user("Build it.")
    for turn in range(6):
        step(session, turn)

    def reasons() -> list[str]:
        return [e.reason for e in events if isinstance(e, SessionMemoryCompactionSkipped)]

    assert asyncio.run(memory.compact_from_memory(session)) is None and "no notes" in reasons()[-1]
    session.store.write_memory(session_memory_template())
    assert asyncio.run(memory.compact_from_memory(session)) is None and "empty template" in reasons()[-1]
    asyncio.run(memory.update_now(session))
    # a context that would stay over the threshold after compaction
    tight = Session(CONFIG, store=MemoryStore(), policy=POLICY.with_changes(autocompact_pct_override=1), extensions=[tight_memory := SessionMemory(background=False)], events=events.append)
    tight.add_user("Build it.")
    for turn in range(6):
        step(tight, turn)
    asyncio.run(tight_memory.update_now(tight))
    assert asyncio.run(tight_memory.compact_from_memory(tight)) is None and "would still hold" in reasons()[-1]
    # switched off
    off = Session(CONFIG, store=MemoryStore(), policy=POLICY.with_changes(session_memory_enabled=False), extensions=[off_memory := SessionMemory(background=False)])
    off.add_user("x")
    off.store.write_memory(session.store.read_memory() or "")
    assert asyncio.run(off_memory.compact_from_memory(off)) is None


def test_a_blocking_pre_compact_hook_refuses() -> None:
    class Blocked:
        blocked = True
        block_reason = "not now"

    class Hooks:
        async def arun_pre_compact(self, trigger: str, instructions: str | None) -> Blocked:
            return Blocked()

    session, memory, events = make_session(hooks=Hooks())
    session.add_user("Build it.")
    for turn in range(8):
        step(session, turn)
    asyncio.run(memory.update_now(session))
    assert asyncio.run(memory.compact_from_memory(session)) is None
    assert any(isinstance(e, SessionMemoryCompactionSkipped) and "not now" in e.reason for e in events)


def test_after_a_summary_compaction_the_notes_cover_nothing_yet() -> None:
    session, memory, _ = make_session(summarizer=Summarizer(), policy=POLICY.with_changes(session_memory_enabled=False))
    session.add_user("Build it.")
    for turn in range(4):
        step(session, turn)
    memory.state.updated_through = session.view[3].uuid
    asyncio.run(session.compact())
    assert memory.updated_through is None
    assert parse_notes(session_memory_template()).sections  # untouched template helpers still fine


def test_repeated_memory_compactions_stay_valid() -> None:
    session, _, events = make_session(summarizer=Summarizer())
    session.add_user("Build the step runner.")
    turn = 0
    while session.status().compactions < 4 and turn < 200:
        step(session, turn, size=2_400, thinking=turn % 3 == 0)
        asyncio.run(session.prepare())
        validate_request(normalize_messages(session.view))
        turn += 1
    finished = [e.summarizer for e in events if isinstance(e, CompactionFinished)]
    assert session.status().compactions >= 4 and finished.count("session_memory") >= 3, finished
    assert "Build the step runner." in str(normalize_messages(session.view)[0])
