"""A new middleware's first call on a long state equals a warm middleware's call on it, and it
converts only what follows the settled prefix (`_langchain_settled`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages

from unbounded.compaction.ledger import is_cleared_content
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.integrations import _langchain_settled, _langchain_view
from unbounded.integrations._langchain_settled import scan_calls, settled_prefix
from unbounded.integrations.langchain import STATE_KEY, UnboundedMiddleware, is_summary_message
from unbounded.policy import Policy

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
POLICY = Policy(
    warning_buffer=10**9,
    microcompact_protect_recent_tokens=1_500,
    microcompact_min_savings=600,
)
"""Clearing due from the first token, in small batches (a few results each)."""
TOOLS = ("read_file", "bash", "grep", "kept")


def _ai(index: int, calls: list[tuple[str, str]], prompt: int | None) -> AIMessage:
    usage: Any = None
    if prompt is not None:
        usage = {
            "input_tokens": prompt,
            "output_tokens": 30,
            "total_tokens": prompt + 30,
            "input_token_details": {"cache_read": max(0, prompt - 200)},
        }
    return AIMessage(
        content=f"step {index}",
        tool_calls=[
            {"id": tool_id, "name": name, "args": {"path": f"/src/m{index % 7}.py"}}
            for tool_id, name in calls
        ],
        id=f"ai-{index}",
        usage_metadata=usage,
    )


@st.composite
def agent_turns(draw: st.DrawFn) -> list[list[Any]]:
    """Turns of an agent run: an AI message (with usage or not, 0-2 tool calls) and its
    results, now and then a human message."""
    turns: list[list[Any]] = []
    count = draw(st.integers(min_value=40, max_value=110))
    prompt = 500
    for index in range(count):
        calls = [
            (f"call-{index}-{n}", draw(st.sampled_from(TOOLS)))
            for n in range(draw(st.integers(min_value=0, max_value=2)))
        ]
        prompt += draw(st.integers(min_value=10, max_value=400))
        reported = prompt if draw(st.integers(min_value=0, max_value=5)) else None
        turn: list[Any] = [_ai(index, calls, reported)]
        for tool_id, _ in calls:
            size = draw(st.integers(min_value=0, max_value=1_600))
            turn.append(ToolMessage(content="x" * size, tool_call_id=tool_id, id=f"tool-{tool_id}"))
        if not calls or draw(st.integers(min_value=0, max_value=9)) == 0:
            turn.append(HumanMessage(f"go on {index}", id=f"human-{index}"))
        turns.append(turn)
    return turns


def _middleware(trigger: Any = None, events: list[Any] | None = None) -> UnboundedMiddleware:
    return UnboundedMiddleware(
        "claude-sonnet-4-6",
        policy=POLICY,
        exclude_tools=["kept"],
        trigger=trigger,
        summarizer="extractive",
        clock=lambda: NOW,
        events=None if events is None else events.append,
    )


def _apply(state: dict[str, Any], update: dict[str, Any] | None) -> dict[str, Any]:
    if not update:
        return state
    out = dict(state)
    if "messages" in update:
        out["messages"] = add_messages(state["messages"], update["messages"])
    if STATE_KEY in update:
        out[STATE_KEY] = update[STATE_KEY]
    return out


def _comparable(state: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Messages and private state, with what differs by construction masked: the summary
    message's fresh id, and when a record was first converted (the time each middleware
    first saw it)."""
    messages = [
        m.model_copy(update={"id": "summary"}) if is_summary_message(m) else m
        for m in state["messages"]
    ]
    context = dict(state.get(STATE_KEY) or {})
    archive = context.get("archive")
    if isinstance(archive, dict):
        strip = {k: v for k, v in archive.items()}
        strip["messages"] = [
            {k: v for k, v in record.items() if k != "timestamp"}
            for record in archive.get("messages", [])
        ]
        strip["cleared"] = {
            tool_id: {k: v for k, v in record.items() if k != "timestamp"}
            for tool_id, record in archive.get("cleared", {}).items()
        }
        context["archive"] = strip
    return messages, context


@contextmanager
def _scan_starts() -> Iterator[list[int]]:
    """Where each `scan_calls` made meanwhile started (the settled mark's effect)."""
    starts: list[int] = []
    real = _langchain_settled.scan_calls

    def recording(messages: Any, stale: Any, **options: Any) -> Any:
        starts.append(options.get("start", 0))
        return real(messages, stale, **options)

    _langchain_settled.scan_calls = recording  # type: ignore[assignment]
    try:
        yield starts
    finally:
        _langchain_settled.scan_calls = real  # type: ignore[assignment]


def _run_warm(turns: list[list[Any]], middleware: UnboundedMiddleware) -> dict[str, Any]:
    """The state a warm middleware leaves before the last turn's call (every earlier call
    made and its update applied, as LangGraph applies it)."""
    state: dict[str, Any] = {"messages": [HumanMessage("start", id="human-start")]}
    for turn in turns:
        state = _apply(state, middleware.before_model(state, None))  # type: ignore[arg-type]
        state = {**state, "messages": [*state["messages"], *turn]}
    return state


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(turns=agent_turns(), idle=st.booleans(), compact=st.booleans(), edited=st.booleans())
def test_new_middleware_first_call_equals_a_warm_one(
    turns: list[list[Any]], idle: bool, compact: bool, edited: bool
) -> None:
    """On the state a warm middleware left (with the mark of where the settled part ends that
    its clearing calls kept), a new middleware's first call clears, counts and compacts
    exactly as the warm one's next call does (messages and private state); also when the
    history was edited under the mark (its first message taken out: the mark no longer
    fits)."""
    total = 1 + sum(len(turn) for turn in turns)
    trigger = ("messages", total - edited) if compact else None
    warm_events: list[Any] = []
    warm = _middleware(trigger, warm_events)
    state = _run_warm(turns, warm)
    gap = timedelta(hours=2) if idle else timedelta(minutes=1)
    context = dict(state.get(STATE_KEY) or {})
    context["last_model_at"] = (NOW - gap).isoformat()
    state = {**state, STATE_KEY: context}
    if edited:
        state["messages"] = state["messages"][1:]
    new_events: list[Any] = []
    new = _middleware(trigger, new_events)
    del warm_events[:]
    from_warm = _apply(state, warm.before_model(state, None))  # type: ignore[arg-type]
    with _scan_starts() as scans:
        from_new = _apply(state, new.before_model(state, None))  # type: ignore[arg-type]
    event(f"settled prefix left out: {new._view.base > 0}")
    event(f"edited: {edited}; scanned from the mark: {bool(scans and scans[0])}")
    if edited:
        assert not scans or scans[0] == 0
    assert _comparable(from_new) == _comparable(from_warm)
    assert new_events == warm_events  # what was cleared and saved, the compaction's figures
    # And the call after it, on the new middleware's view, agrees as well.
    later = {**from_warm, "messages": [*from_warm["messages"], _ai(10_000, [], None)]}
    later["messages"].append(HumanMessage("more", id="human-more"))
    assert _comparable(_apply(later, new.before_model(later, None))) == _comparable(  # type: ignore[arg-type]
        _apply(later, warm.before_model(later, None))  # type: ignore[arg-type]
    )


def _long_checkpointed(results: int, uncleared: int) -> list[Any]:
    """A thread's messages: `results` tool rounds, all but the newest `uncleared` cleared."""
    messages: list[Any] = [HumanMessage("start", id="human-start")]
    for index in range(results):
        tool_id = f"call-{index}"
        messages.append(_ai(index, [(tool_id, "read_file")], 1_000 + 50 * index))
        content = "y" * 800 if index >= results - uncleared else cleared_stub(tool_id)
        messages.append(ToolMessage(content=content, tool_call_id=tool_id, id=f"tool-{index}"))
    return messages


def test_first_call_converts_only_what_follows_the_settled_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 400 rounds of which the newest 20 are uncleared, a new middleware converts the
    messages from the oldest uncleared result's call on, not the history."""
    messages = _long_checkpointed(400, 20)
    converted: list[Any] = []
    real = _langchain_view.ConversationView._add

    def counting(self: Any, message: Any) -> None:
        converted.append(message)
        real(self, message)

    monkeypatch.setattr(_langchain_view.ConversationView, "_add", counting)
    middleware = _middleware()
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
    first_uncleared = messages.index(next(m for m in messages if m.id == "ai-380"))
    assert middleware._view.base == first_uncleared
    assert len(converted) == len(messages) - first_uncleared
    # The normalized tail starts after a user turn, as in the whole conversation: nothing to
    # repair, so microcompaction reads it without a copy.
    assert middleware._view.normalizer.repairs == []
    assert update is not None and [m.tool_call_id for m in update["messages"]][:1] == ["call-380"]


def test_settled_prefix_stops_at_the_oldest_uncleared_compactable_result() -> None:
    """The split is the call of the oldest compactable result not cleared yet; results of a
    tool never cleared do not hold it back (the count's anchor, the last reply, does)."""
    messages = _long_checkpointed(100, 10)
    call = messages.index(next(m for m in messages if m.id == "ai-90"))
    assert settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: True) == call
    assert (
        settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: False)
        == len(messages) - 2
    )
    # One old result not cleared holds the split back to its call.
    old = messages.index(next(m for m in messages if m.id == "tool-30"))
    messages[old] = messages[old].model_copy(update={"content": "z" * 100})
    assert settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: True) == old - 1


def test_a_repeated_call_id_reads_the_whole_conversation() -> None:
    """The normalizer renames a call id used twice (and its result), which it can do only
    when it reads the first use: the new middleware reads it all and clears what a view of
    the whole conversation clears."""
    messages = _long_checkpointed(80, 30)
    # A late call reuses the id of an early, cleared one; its result is old enough to clear.
    late = messages.index(next(m for m in messages if m.id == "ai-55"))
    messages[late] = _ai(55, [("call-2", "read_file")], 1_000 + 50 * 55)
    messages[late + 1] = ToolMessage(content="x" * 1_200, tool_call_id="call-2", id="tool-55")
    state = {"messages": messages}
    new = _middleware()
    whole = _middleware()
    whole._view = _langchain_view.ConversationView(_langchain_view_convert())  # reads it all
    from_new = _apply(state, new.before_model(state, None))  # type: ignore[arg-type]
    from_whole = _apply(state, whole.before_model(state, None))  # type: ignore[arg-type]
    assert new._view.base == 0
    assert _comparable(from_new) == _comparable(from_whole)


def test_the_split_is_at_the_first_line_of_a_response() -> None:
    """When the anchoring reply is a later line of a response, the split is at its first
    line: the results between the lines are in the count, as in the whole view."""
    messages = _long_checkpointed(80, 0)
    messages += [
        AIMessage(
            content="",
            tool_calls=[{"id": "call-r", "name": "read_file", "args": {"path": "/r.py"}}],
            id="reply",
        ),
        ToolMessage(content=cleared_stub("call-r"), tool_call_id="call-r", id="t-r"),
        AIMessage(content="read it", id="reply", usage_metadata=_ai(0, [], 9_000).usage_metadata),
        HumanMessage("go on", id="human-go"),
        _ai(500, [("call-big", "read_file")], None),
        ToolMessage(content="y" * 20_000, tool_call_id="call-big", id="tool-big"),
    ]
    first_line = messages.index(next(m for m in messages if m.id == "reply"))
    assert (
        settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: True) == first_line
    )
    middleware = _middleware()
    whole = _langchain_view.ConversationView(_langchain_view_convert())
    whole.sync(messages, frozenset())
    assert middleware._plan({"messages": messages}).tokens == whole.counter.total  # type: ignore[arg-type]


def test_an_invalid_call_s_uncleared_result_holds_the_split() -> None:
    """An invalid tool call is a call too: its result, not cleared yet, keeps it in view."""
    messages = _long_checkpointed(80, 1)
    at = 41
    messages[at] = AIMessage(
        content="",
        invalid_tool_calls=[{"id": "call-20", "name": "read_file", "args": "{bad", "error": None}],
        id=messages[at].id,
        usage_metadata=messages[at].usage_metadata,
    )
    messages[at + 1] = ToolMessage(content="z" * 900, tool_call_id="call-20", id="tool-20")
    assert settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: True) == at


def _langchain_view_convert() -> Any:
    from unbounded.integrations.langchain import _convert

    return _convert


def test_entries_take_their_uuid_from_the_message_and_the_call_s_timestamp() -> None:
    """A converted message's uuid is its id (the same record every time it is converted; an
    AI message's id with a digest of its content) and its timestamp the one given; a message
    without an id gets a fresh uuid."""
    from unbounded.integrations.langchain import message_to_entry

    stamp = "2026-03-01T12:00:00.000Z"
    for message in (
        _ai(3, [("call-3", "read_file")], 900),
        ToolMessage(content="out", tool_call_id="call-3", id="tool-3"),
        HumanMessage("go", id="human-3"),
    ):
        entry = message_to_entry(message, timestamp=stamp)
        again = message_to_entry(message, timestamp=stamp)
        assert entry is not None and again is not None and entry.timestamp == stamp
        assert entry.uuid == again.uuid
        if isinstance(message, AIMessage):
            assert str(entry.uuid).startswith(f"{message.id}#")
        else:
            assert entry.uuid == message.id
    unnamed = [message_to_entry(HumanMessage("go")) for _ in range(2)]
    uuids = {entry.uuid for entry in unnamed if entry is not None}
    assert len(uuids) == 2 and None not in uuids


def _after_a_clearing_call(results: int, uncleared: int, grown: int) -> dict[str, Any]:
    """A thread's state after its middleware's clearing call on the first `results - grown`
    rounds (update applied), with the `grown` rounds the agent added since."""
    whole = _long_checkpointed(results, uncleared)
    cut = len(whole) - 2 * grown
    state = _apply(
        {"messages": whole[:cut]}, _middleware().before_model({"messages": whole[:cut]}, None)
    )  # type: ignore[arg-type]
    assert "settled" in state[STATE_KEY]
    return {**state, "messages": [*state["messages"], *whole[cut:]]}


def _first_call(state: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """A new middleware's first call on `state`: the state after it, where its scans began."""
    with _scan_starts() as scans:
        after = _apply(state, _middleware().before_model(state, None))  # type: ignore[arg-type]
    return after, scans


def test_a_clearing_call_marks_where_the_settled_part_ends_once_its_clears_apply() -> None:
    """The mark a clearing call keeps is the settled prefix of the messages with its clears
    applied (what a whole scan of them finds), and names the message there."""
    state = _after_a_clearing_call(300, 60, 0)
    mark = state[STATE_KEY]["settled"]
    messages = state["messages"]
    whole = settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: name != "kept")
    assert mark["count"] == whole > 0
    assert mark["id"] == messages[whole].id


def test_a_new_middleware_scans_from_the_mark_and_does_what_a_whole_scan_does() -> None:
    """On a state whose mark fits (the message at its count carries its id) a new middleware
    scans only from there, and clears and marks what a middleware scanning everything
    (the same state without the mark) does."""
    state = _after_a_clearing_call(300, 60, 30)
    count = state[STATE_KEY]["settled"]["count"]
    from_mark, scans = _first_call(state)
    assert scans[0] == count
    unmarked = {k: v for k, v in state[STATE_KEY].items() if k != "settled"}
    from_whole, whole_scans = _first_call({**state, STATE_KEY: unmarked})
    assert whole_scans[0] == 0
    assert _comparable(from_mark) == _comparable(from_whole)
    assert from_mark[STATE_KEY]["settled"]["count"] > count  # this call cleared: it moved on


@pytest.mark.parametrize("edit", ["first message taken out", "id changed", "other tools"])
def test_a_mark_that_no_longer_fits_is_not_used(edit: str) -> None:
    """When the message at the mark's count does not carry its id (the history was edited
    under it) or the clearing configuration differs, the whole conversation is scanned, and
    the call does what a middleware without the mark does."""
    state = _after_a_clearing_call(300, 60, 30)
    context = dict(state[STATE_KEY])
    mark = dict(context["settled"])
    messages = list(state["messages"])
    if edit == "first message taken out":  # the boundary moves one place down
        messages = messages[1:]
    elif edit == "id changed":
        at = mark["count"]
        messages[at] = messages[at].model_copy(update={"id": "edited"})
    else:
        mark["tools"] = "another configuration"
    context["settled"] = mark
    edited = {"messages": messages, STATE_KEY: context}
    after, scans = _first_call(edited)
    assert scans[0] == 0
    unmarked = {k: v for k, v in context.items() if k != "settled"}
    assert _comparable(after) == _comparable(_first_call({**edited, STATE_KEY: unmarked})[0])


@pytest.mark.parametrize(
    "configuration",
    [{"exclude_tools": []}, {"exclude_tools": ["kept"], "compactable_tools": ["read_file"]}],
    ids=["nothing excluded", "only read_file compactable"],
)
def test_a_mark_written_under_another_clearing_configuration_is_not_used(
    configuration: dict[str, Any],
) -> None:
    """A mark written by a middleware excluding "kept" from clearing is not trusted by one
    that may clear other tools' results or names its compactable tools: it scans the whole
    conversation and does what it does on the state without the mark."""
    state = _after_a_clearing_call(300, 60, 30)

    def first_call(on: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
        middleware = UnboundedMiddleware(
            "claude-sonnet-4-6",
            policy=POLICY,
            summarizer="extractive",
            clock=lambda: NOW,
            **configuration,
        )
        with _scan_starts() as scans:
            after = _apply(on, middleware.before_model(on, None))  # type: ignore[arg-type]
        return after, scans

    after, scans = first_call(state)
    assert scans[0] == 0
    unmarked = {k: v for k, v in state[STATE_KEY].items() if k != "settled"}
    assert _comparable(after) == _comparable(first_call({**state, STATE_KEY: unmarked})[0])


def test_an_in_place_edit_before_the_mark_is_seen_only_once_the_mark_is_dropped() -> None:
    """The documented limit: a cleared result before the mark given its content back under
    the same id is not seen by a middleware trusting the mark; dropping `settled` from the
    state (what the docs tell a caller rewriting earlier messages to do) has it cleared."""
    state = _after_a_clearing_call(300, 60, 30)
    context = dict(state[STATE_KEY])
    count = context["settled"]["count"]
    messages = list(state["messages"])
    at = next(i for i, m in enumerate(messages[:count]) if isinstance(m, ToolMessage))
    assert is_cleared_content(messages[at].content)
    messages[at] = messages[at].model_copy(update={"content": "y" * 5_000})
    edited = {"messages": messages, STATE_KEY: context}

    def content_after(after: dict[str, Any]) -> str:
        return str(next(m for m in after["messages"] if m.id == messages[at].id).content)

    trusting, scans = _first_call(edited)
    assert scans[0] == count
    assert content_after(trusting) == "y" * 5_000
    unmarked = {k: v for k, v in context.items() if k != "settled"}
    dropped, whole_scans = _first_call({**edited, STATE_KEY: unmarked})
    assert whole_scans[0] == 0
    assert is_cleared_content(content_after(dropped))


def test_a_compaction_drops_the_mark() -> None:
    """After a compaction the mark's messages are gone: the state keeps no mark."""
    state = _after_a_clearing_call(120, 30, 10)
    update = _middleware(("messages", 100)).before_model(state, None)  # type: ignore[arg-type]
    assert update is not None and STATE_KEY in update
    assert update[STATE_KEY]["compactions"] == 1
    assert "settled" not in update[STATE_KEY]
