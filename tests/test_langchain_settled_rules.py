"""Rules of `unbounded.integrations._langchain_settled.scan_calls` checked against its
definition computed from scratch on generated conversations: the tools called, which call
each uncleared result answers, whether a call id repeats (invalid calls included), and the
anchoring reply."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from unbounded.compaction.ledger import is_cleared_content
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.integrations._langchain_settled import CallScan, scan_calls, settled_prefix

_IDS = ("c1", "c2", "c3", "")
_USAGE = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}


@st.composite
def _message(draw: Any, index: int) -> BaseMessage:
    kind = draw(st.sampled_from(("human", "ai", "tool")))
    if kind == "human":
        return HumanMessage("go on", id=f"h{index}")
    if kind == "tool":
        call_id = draw(st.sampled_from(_IDS[:3]))
        content = cleared_stub(call_id) if draw(st.booleans()) else "result text"
        return ToolMessage(content=content, tool_call_id=call_id, id=f"t{index}")
    valid = [
        {
            "id": draw(st.sampled_from(_IDS)),
            "name": draw(st.sampled_from(("read", "grep"))),
            "args": {},
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    invalid = [
        {
            "id": draw(st.sampled_from(_IDS)),
            "name": draw(st.sampled_from((None, "bash"))),
            "args": "{",
            "error": None,
        }
        for _ in range(draw(st.integers(0, 1)))
    ]
    usage = _USAGE if draw(st.booleans()) else None
    message_id = draw(st.sampled_from((f"a{index}", None)))
    return AIMessage(
        content="",
        tool_calls=valid,
        invalid_tool_calls=invalid,
        id=message_id,
        usage_metadata=usage,
    )


@st.composite
def _conversations(draw: Any) -> list[BaseMessage]:
    return [draw(_message(index)) for index in range(draw(st.integers(0, 9)))]


def _scan_from_scratch(messages: list[BaseMessage], stale: frozenset[str]) -> CallScan:
    calls: list[tuple[int, str, str, bool]] = []  # (index, id, name, valid) in order
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            calls += [(index, c.get("id") or "", c["name"], True) for c in message.tool_calls]
            calls += [
                (index, c.get("id") or "", str(c.get("name") or "unknown"), False)
                for c in message.invalid_tool_calls
            ]
    names = {name: None for _, _, name, valid in calls if valid}
    ids = [tool_id for _, tool_id, _, _ in calls]
    uncleared = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage) and not is_cleared_content(message.content):
            answered = [
                (at, name)
                for at, tool_id, name, _ in calls
                if at < index and tool_id == message.tool_call_id
            ]
            if answered:
                uncleared.append(answered[-1])
    anchors = [
        index
        for index, message in enumerate(messages)
        if isinstance(message, AIMessage)
        and message.usage_metadata
        and (message.id or "") not in stale
    ]
    return CallScan(names, anchors[-1] if anchors else -1, uncleared, len(set(ids)) < len(ids))


@settings(max_examples=200, deadline=None)
@given(_conversations(), st.sampled_from((frozenset(), frozenset({"a2", "a5"}), frozenset({""}))))
def test_a_scan_is_its_definition(messages: list[BaseMessage], stale: frozenset[str]) -> None:
    assert scan_calls(messages, stale) == _scan_from_scratch(messages, stale)


def _line(message_id: str | None, usage: bool = False) -> AIMessage:
    return AIMessage(content="", id=message_id, usage_metadata=_USAGE if usage else None)


def _settled(messages: list[BaseMessage]) -> int:
    return settled_prefix(messages, scan_calls(messages, frozenset()), lambda name: True)


def test_the_split_reaches_back_to_a_first_line_at_the_start() -> None:
    # Lines of one response (one id) across a tool result: the first line is message 0.
    messages = [
        _line("r"),
        ToolMessage(content="x", tool_call_id="c9", id="t"),
        _line("r", usage=True),
    ]
    assert _settled(messages) == 0
    assert _settled([HumanMessage("hi", id="h"), *messages]) == 1


def test_the_split_takes_in_each_adjacent_line_of_the_response() -> None:
    messages = [HumanMessage("hi", id="h"), _line("r"), _line("r"), _line("r", usage=True)]
    assert _settled(messages) == 1
    assert _settled([_line("r"), _line("r", usage=True)]) == 0
    human = [HumanMessage("hi", id="h1"), HumanMessage("and", id="h2")]
    assert _settled([*human, _line("r"), _line("r", usage=True)]) == 2


def test_a_result_before_the_first_reply_joins_no_response() -> None:
    orphan = ToolMessage(content="x", tool_call_id="c9", id="t")
    assert _settled([orphan, _line("r", usage=True)]) == 1


def test_lines_with_one_id_across_a_human_message_are_two_responses() -> None:
    messages = [_line("r"), HumanMessage("again", id="h"), _line("r", usage=True)]
    assert _settled(messages) == 2
    assert _settled([_line(None), _line(None, usage=True)]) == 1  # no id: never one response
