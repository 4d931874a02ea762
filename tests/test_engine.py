"""The turn engine (`unbounded/engine.py`): the flow's steps, driven here by hand and by the
async and blocking drivers, against a scripted provider."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from unbounded.blocking import BlockingRunner
from unbounded.engine import (
    RECALL_ROUND_FIELD,
    TurnOptions,
    drive_turn,
    drive_turn_blocking,
    turn_flow,
)
from unbounded.errors import ConfigError, PromptTooLongError, ServerError
from unbounded.events import Event
from unbounded.extension import Extension
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession

MODEL = "claude-sonnet-4-6"
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}}]
USAGE = {"input_tokens": 10, "output_tokens": 1}


def text(reply: str) -> ModelResponse:
    return ModelResponse([{"type": "text", "text": reply}], "end_turn", USAGE, MODEL)


def recall_call(tool_id: str) -> ModelResponse:
    use = {"type": "tool_use", "id": tool_id, "name": "recall", "input": {"query": "parser"}}
    return ModelResponse([use], "tool_use", USAGE, MODEL)


class LoopSpy(Extension):
    """Notes the event loop each `prepare` runs on."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def before_prepare(self, session: Session) -> None:
        self.loops.append(asyncio.get_running_loop())


def new_session(events: list[Event] | None = None, *, extensions: tuple[Extension, ...] = (), **policy: Any) -> Session:
    session = Session(SessionConfig(model=MODEL, tools=TOOLS), policy=Policy(recall_from_start=True, **policy), events=events.append if events is not None else None, extensions=extensions)
    session.add_user("Fix the parser.")
    return session


class Scripted:
    """Sends nothing: answers each request with the next item (a reply, or an error raised)."""

    def __init__(self, *items: ModelResponse | Exception) -> None:
        self.items = list(items)
        self.requests: list[ProviderRequest] = []

    async def send(self, request: ProviderRequest) -> ModelResponse:
        return self.send_now(request)

    def send_now(self, request: ProviderRequest) -> ModelResponse:
        self.requests.append(request)
        item = self.items.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def test_a_plain_reply_is_recorded_and_ends_the_turn() -> None:
    session = new_session()
    script = Scripted(text("done"))
    reply = asyncio.run(drive_turn(turn_flow(session), script.send, lambda r: r))
    assert reply.text == "done" and len(script.requests) == 1
    assert [e.type for e in session.entries] == ["user", "assistant"]


def test_prompt_too_long_compacts_once_per_send_and_then_raises() -> None:
    events: list[Event] = []
    session = new_session(events, auto_compact_enabled=False)  # compaction on, automatic off
    too_long = PromptTooLongError("prompt is too long")
    script = Scripted(too_long, too_long)
    with pytest.raises(PromptTooLongError):
        asyncio.run(drive_turn(turn_flow(session), script.send, lambda r: r))
    # A compaction of a one-message conversation fails: the first error is raised at once.
    assert len(script.requests) == 1
    assert [e.kind for e in events].count("reactive_compaction") == 1


def test_after_a_reactive_compaction_the_request_is_sent_again() -> None:
    compacted: list[str] = []

    class Compacting:
        policy = Policy()
        offers_recall = False

        async def prepare(self) -> ProviderRequest:
            return {"model": MODEL, "messages": [{"role": "user", "content": f"after {len(compacted)}"}]}

        def record(self, response: Any, *, extra: Any = None) -> Any:
            compacted.append("recorded")

        async def auto_compact(self) -> object:
            compacted.append("compacted")
            return object()

        def run_recall(self, tool_use: Any) -> dict[str, Any]:
            raise AssertionError("no recall here")

        def append(self, entries: Any) -> None:
            raise AssertionError("nothing appended here")

        def events_sink(self) -> None:
            return None

    too_long = PromptTooLongError("prompt is too long")
    script = Scripted(too_long, text("fits now"))
    reply = asyncio.run(drive_turn(turn_flow(Compacting()), script.send, lambda r: r))
    assert reply.text == "fits now" and compacted == ["compacted", "recorded"]
    assert [r["messages"][0]["content"] for r in script.requests] == ["after 0", "after 1"]
    # A second refusal of the same send is raised, not compacted again.
    compacted.clear()
    script = Scripted(too_long, too_long)
    with pytest.raises(PromptTooLongError):
        asyncio.run(drive_turn(turn_flow(Compacting()), script.send, lambda r: r))
    assert compacted == ["compacted"]


def test_other_errors_are_raised_without_compacting() -> None:
    events: list[Event] = []
    session = new_session(events)
    with pytest.raises(ServerError):
        asyncio.run(drive_turn(turn_flow(session), Scripted(ServerError("boom")).send, lambda r: r))
    assert not any(e.kind == "reactive_compaction" for e in events)


def test_recall_rounds_are_answered_inside_the_flow_up_to_the_limit() -> None:
    session = new_session()
    script = Scripted(recall_call("toolu_r1"), recall_call("toolu_r2"), text("done"))
    options = TurnOptions(recall_rounds=1)
    reply = asyncio.run(drive_turn(turn_flow(session, options), script.send, lambda r: r))
    # One round answered inside; the second recall call goes to the caller as the reply.
    assert reply.tool_uses[0]["id"] == "toolu_r2" and len(script.items) == 1
    rounds = [e for e in session.entries if e.data.get(RECALL_ROUND_FIELD)]
    assert [e.type for e in rounds] == ["assistant", "user"]
    assert rounds[1].content[0]["tool_use_id"] == "toolu_r1"
    last_request = script.requests[-1]["messages"]
    assert last_request[-1]["content"][0]["tool_use_id"] == "toolu_r1"


def test_without_recall_rounds_a_recall_call_is_the_reply() -> None:
    session = new_session()
    reply = asyncio.run(drive_turn(turn_flow(session), Scripted(recall_call("toolu_r1")).send, lambda r: r))
    assert reply.tool_uses[0]["name"] == "recall"
    assert not any(e.data.get(RECALL_ROUND_FIELD) for e in session.entries)


def test_a_reply_read_asynchronously_is_awaited() -> None:
    session = new_session()

    async def later(reply: ModelResponse) -> ModelResponse:
        return reply

    reply = asyncio.run(drive_turn(turn_flow(session), Scripted(text("done")).send, later))
    assert reply.text == "done" and session.entries[-1].type == "assistant"


def test_the_blocking_driver_keeps_the_flow_on_one_loop() -> None:
    spy = LoopSpy()
    session = new_session(extensions=(spy,))
    loops = spy.loops
    script = Scripted(recall_call("toolu_r1"), text("done"))
    with BlockingRunner() as runner:
        reply = drive_turn_blocking(turn_flow(session, TurnOptions(recall_rounds=3)), script.send_now, lambda r: r, runner.run)
    assert reply.text == "done" and len(loops) == 2 and loops[0] is loops[1]


def test_negative_recall_rounds_are_refused() -> None:
    with pytest.raises(ConfigError, match="recall_rounds"):
        TurnOptions(recall_rounds=-1)


def test_the_sync_session_keeps_one_loop_for_its_life() -> None:
    spy = LoopSpy()
    session = SyncSession(new_session(extensions=(spy,)))
    loops = spy.loops

    class Provider:
        name = "main"

        async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
            return text("done")

    session.prepare()
    session.call(Provider())  # type: ignore[arg-type]
    session.add_user("Again.")
    session.prepare()
    assert len(loops) == 3 and loops[0] is loops[1] is loops[2]
    session.close()
    assert session.closed


# The session's parts and state: read-only properties, reached through `SyncSession.session`.
SESSION_PARTS = {
    "calibration", "deps", "detector", "entries", "extensions", "last_request", "marked_messages", "micro",
    "options", "recall", "recall_index", "settings", "state", "store", "summarizer",
    "tracking", "transcript", "ttl_latch", "view", "warnings",
}


def test_the_sync_session_has_every_public_method_of_session() -> None:
    public = {name for name in dir(Session) if not name.startswith("_")}
    parts = sorted(n for n in SESSION_PARTS if isinstance(inspect.getattr_static(Session, n), property))
    assert parts == sorted(SESSION_PARTS)  # only properties may be left to `.session`
    missing = sorted(name for name in public - SESSION_PARTS if not hasattr(SyncSession, name))
    assert missing == []
    for name in ("prepare", "call", "compact", "auto_compact", "answer_tool"):
        assert inspect.iscoroutinefunction(getattr(Session, name))
        assert not inspect.iscoroutinefunction(getattr(SyncSession, name))


def test_a_reply_calling_recall_and_another_tool_goes_to_the_caller() -> None:
    session = new_session()
    mixed = recall_call("toolu_r1")
    mixed.content.append({"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {}})
    reply = asyncio.run(drive_turn(turn_flow(session, TurnOptions(recall_rounds=3)), Scripted(mixed).send, lambda r: r))
    assert [u["id"] for u in reply.tool_uses] == ["toolu_r1", "toolu_2"]
    assert not any(e.data.get(RECALL_ROUND_FIELD) for e in session.entries)


def test_recall_is_not_answered_while_the_session_does_not_offer_it() -> None:
    session = Session(SessionConfig(model=MODEL, tools=TOOLS), policy=Policy(recall_enabled=False))
    session.add_user("Fix the parser.")
    reply = asyncio.run(drive_turn(turn_flow(session, TurnOptions(recall_rounds=3)), Scripted(recall_call("toolu_r1")).send, lambda r: r))
    assert reply.tool_uses[0]["id"] == "toolu_r1"
    assert not any(e.data.get(RECALL_ROUND_FIELD) for e in session.entries)
