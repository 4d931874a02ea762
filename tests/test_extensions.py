"""`Extension`: the one way to plug into a session. Each hook fires once where it should, in
the order the extensions were given, with the right typed argument; an extension that
overrides one hook works; the old doors (an `attach` object, listener lists, the
`memory_compactor` slot, `prepare_steps`) are gone or refused with a clear error."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from unbounded.compaction.conversation import CompactionResult
from unbounded.errors import ConfigError
from unbounded.extensions import Extension, NestedMemory, SessionMemory
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.turn import TurnContext

CONFIG = SessionConfig(model="claude-sonnet-4-5", context_window=60_000)
TOOL = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}


class Recorder(Extension):
    """Overrides every hook and notes each call, with this extension's name."""

    def __init__(self, name: str, calls: list[tuple[str, str, Any]]) -> None:
        self.name = name
        self.calls = calls

    def attached(self, session: Session) -> None:
        self.calls.append((self.name, "attached", session))

    async def before_prepare(self, session: Session) -> None:
        self.calls.append((self.name, "before_prepare", len(session.entries)))

    def tools_offered(self, session: Session, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append((self.name, "tools_offered", [t["name"] for t in tools]))
        return [*tools, {**TOOL, "name": f"tool_of_{self.name}"}]

    async def before_request(self, session: Session, turn: TurnContext) -> None:
        self.calls.append((self.name, "before_request", turn.built_request()["model"]))

    def after_record(self, session: Session, entry: Entry) -> None:
        self.calls.append((self.name, "after_record", entry))

    def after_compact(self, session: Session, result: CompactionResult) -> None:
        self.calls.append((self.name, "after_compact", result))


def hooks_of(calls: list[tuple[str, str, Any]], hook: str) -> list[tuple[str, Any]]:
    """(extension, argument) of every call of `hook`, in order."""
    return [(name, argument) for name, called, argument in calls if called == hook]


def one_turn(session: Session) -> Entry:
    """Prepare a request and record a plain answer; the recorded entry."""
    asyncio.run(session.prepare())
    return session.record({"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 50}})


def test_each_hook_fires_once_in_the_order_given_with_its_typed_argument() -> None:
    calls: list[tuple[str, str, Any]] = []
    first, second = Recorder("first", calls), Recorder("second", calls)
    session = Session(CONFIG, store=MemoryStore(), summarizer=ExtractiveSummarizer(), extensions=[first, second])
    assert session.extensions == (first, second)
    assert hooks_of(calls, "attached") == [("first", session), ("second", session)]

    session.add_user("Read the files.")
    request = asyncio.run(session.prepare())
    assert hooks_of(calls, "before_prepare") == [("first", 1), ("second", 1)]
    assert hooks_of(calls, "before_request") == [("first", CONFIG.model), ("second", CONFIG.model)]
    # folded: the second sees what the first left, and the request declares both; asked
    # once when the settings were derived (the size estimate), once for the request
    assert hooks_of(calls, "tools_offered") == [("first", []), ("second", ["tool_of_first"])] * 2
    assert [t["name"] for t in request.get("tools", [])] == ["tool_of_first", "tool_of_second"]

    entry = session.record({"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 50}})
    assert hooks_of(calls, "after_record") == [("first", entry), ("second", entry)]
    assert isinstance(entry, Entry) and entry.type == "assistant"
    assert not hooks_of(calls, "after_compact")

    session.add_user("Go on.")
    result = asyncio.run(session.compact())
    assert hooks_of(calls, "after_compact") == [("first", result), ("second", result)]
    assert isinstance(result, CompactionResult)
    assert len(hooks_of(calls, "attached")) == 2 and len(hooks_of(calls, "after_record")) == 2


def test_an_extension_overriding_one_hook_works_and_the_rest_stay_no_ops() -> None:
    recorded: list[str] = []

    class LastReply(Extension):
        def after_record(self, session: Session, entry: Entry) -> None:
            recorded.append(str(entry.message_id))

    session = Session(CONFIG, store=MemoryStore(), summarizer=ExtractiveSummarizer(), extensions=[LastReply()])
    session.add_user("Hello.")
    request = asyncio.run(session.prepare())
    assert "tools" not in request  # tools_offered left them as they were: none
    entry = session.record({"id": "msg_1", "content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 9}})
    assert recorded == ["msg_1"] and entry.message_id == "msg_1"
    session.add_user("Again.")
    result = asyncio.run(session.compact())  # the no-op after_compact is harmless
    assert result.summarizer == "extractive" and session.status().compactions == 1 and recorded == ["msg_1"]


def notes_result(session: Session, name: str) -> CompactionResult:
    """A compaction result naming who built it (what a notes extension would return)."""
    boundary = create_compact_boundary("auto", session.status().tokens)
    return CompactionResult(boundary, [], [], [], [], 0, 0, 0, name, None, {}, 0, False, name)


class Notes(Extension):
    """Offers a notes compaction; `answer` says whether it has one."""

    def __init__(self, name: str, answer: bool, asked: list[tuple[str, int | None]]) -> None:
        self.name, self.answer, self.asked = name, answer, asked

    async def compact_from_memory(self, session: Session, *, max_post_tokens: int | None = None) -> CompactionResult | None:
        self.asked.append((self.name, max_post_tokens))
        return notes_result(session, self.name) if self.answer else None


def test_memory_compaction_asks_only_the_offering_extensions_in_order_and_the_first_answer_wins() -> None:
    asked: list[tuple[str, int | None]] = []
    calls: list[tuple[str, str, Any]] = []
    extensions = [Notes("empty", False, asked), Recorder("plain", calls), Notes("full", True, asked), Notes("late", True, asked)]
    session = Session(CONFIG, store=MemoryStore(), summarizer=ExtractiveSummarizer(), extensions=extensions)
    tiers = session.default_compaction_tiers()
    assert type(tiers[0]).__name__ == "SessionMemoryTier"
    session.add_user("Hello.")
    one_turn(session)
    result = asyncio.run(session.auto_compact())
    assert result is not None and result.summarizer == "full"
    assert [name for name, _ in asked] == ["empty", "full"]  # "late" is never asked
    assert hooks_of(calls, "after_compact") == [("plain", result)]


def test_without_an_extension_offering_notes_there_is_no_notes_tier_and_no_early_compaction() -> None:
    calls: list[tuple[str, str, Any]] = []
    session = Session(CONFIG, store=MemoryStore(), summarizer=ExtractiveSummarizer(), extensions=[Recorder("plain", calls)])
    session.store.write_memory("# Current State\nWorking on it.")
    assert all(type(tier).__name__ != "SessionMemoryTier" for tier in session.default_compaction_tiers())
    assert not session._compactor.free_compaction_available()
    offering = Session(CONFIG, store=MemoryStore(), extensions=[Notes("n", True, [])])
    offering.store.write_memory("# Current State\nWorking on it.")
    assert offering._compactor.free_compaction_available()


def test_one_extension_class_under_its_public_names() -> None:
    import unbounded
    import unbounded.session

    assert unbounded.Extension is unbounded.session.Extension is Extension
    assert "Extension" in unbounded.__all__


def test_the_packaged_extensions_are_extensions() -> None:
    memory, instructions = SessionMemory(background=False), NestedMemory(".")
    session = Session(CONFIG, store=MemoryStore(), policy=Policy(), extensions=[memory, instructions])
    assert session.extensions == (memory, instructions)
    assert isinstance(memory, Extension) and isinstance(instructions, Extension)


def test_an_old_style_extension_is_refused_at_construction_with_what_to_do() -> None:
    class OldStyle:
        def attach(self, session: Session) -> None:
            raise AssertionError("never called")

    store = MemoryStore()
    with pytest.raises(ConfigError, match=r"extensions\[1\] is a OldStyle, not an unbounded.Extension: subclass Extension"):
        Session(CONFIG, store=store, extensions=[SessionMemory(), OldStyle()])  # type: ignore[list-item]


def test_the_old_doors_are_gone() -> None:
    with pytest.raises(TypeError, match="memory_compactor"):
        Session(CONFIG, store=MemoryStore(), memory_compactor=lambda session: None)  # type: ignore[call-arg]
    session = Session(CONFIG, store=MemoryStore())
    for door in ("prepare_listeners", "turn_listeners", "compaction_listeners", "memory_compactor", "prepare_steps"):
        assert not hasattr(session, door), door


BIG_TOOLS = [
    {"name": f"tool_{i}", "description": "Does one thing well. " * 40, "input_schema": {"type": "object"}}
    for i in range(20)
]


class AddsTools(Extension):
    """Declares tools of its own in every request."""

    def __init__(self, tools: list[dict[str, Any]] = BIG_TOOLS) -> None:
        self.tools = tools

    def tools_offered(self, session: Any, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*tools, *self.tools]


def test_the_tools_an_extension_adds_are_in_the_estimate_from_construction() -> None:
    extended = Session(CONFIG, store=MemoryStore(), policy=Policy(), extensions=[AddsTools()])
    configured = Session(
        dataclasses.replace(CONFIG, tools=BIG_TOOLS), store=MemoryStore(), policy=Policy()
    )
    bare = Session(CONFIG, store=MemoryStore(), policy=Policy())
    assert configured.estimate_request_tokens([]) > bare.estimate_request_tokens([]) + 3_000
    assert extended.estimate_request_tokens([]) == configured.estimate_request_tokens([])
    assert extended.settings.overhead_raw == configured.settings.overhead_raw


def test_the_tools_an_extension_adds_stay_counted_after_reconfigure() -> None:
    extended = Session(CONFIG, store=MemoryStore(), policy=Policy(), extensions=[AddsTools()])
    brief = dataclasses.replace(CONFIG, system="Be brief. " * 200)
    extended.reconfigure(brief)
    configured = Session(
        dataclasses.replace(brief, tools=BIG_TOOLS), store=MemoryStore(), policy=Policy()
    )
    assert extended.estimate_request_tokens([]) == configured.estimate_request_tokens([])


def test_the_tools_an_extension_adds_count_in_the_minimum_room_check() -> None:
    small = SessionConfig(model="claude-sonnet-4-5", context_window=16_000)
    Session(small, store=MemoryStore(), policy=Policy())  # room enough without them
    with pytest.raises(ConfigError, match="the system prompt and tools alone take about"):
        Session(small, store=MemoryStore(), policy=Policy(), extensions=[AddsTools(BIG_TOOLS * 2)])
