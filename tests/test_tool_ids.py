"""A provider that repeats tool_use ids (or sends ids the API refuses): nothing is lost.

Before the fix the second call and its result were replaced by "[A repeated tool call was
removed.]" / "[An orphaned tool result was removed.]" and recall could not find the second
call. Now the repeat is renamed in the call and in its result, the same way by the session,
the normalizer and the recall index, and `validate_request` (and the test server) refuse what
the API refuses: two results for one call, an id outside [A-Za-z0-9_-]."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from unbounded.errors import InvalidRequestError
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, normalize_plain_messages, validate_request
from unbounded.model.tool_ids import RENAMED_FIELD, ToolCallNames, name_results, renamed_tool_id
from unbounded.recall import RecallContext, RecallRequest, TranscriptIndex, answer_recall
from unbounded.session import Session, SessionConfig

TOOLS = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
CONFIG = SessionConfig(model="claude-sonnet-4-5", tools=TOOLS)
KIMI_ID = "functions.Bash:0"  # numbered per reply: the same id in every reply


def use(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}


def result(tool_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def turn(session: Session, uses: list[dict[str, Any]], outputs: list[tuple[str, str]]) -> None:
    asyncio.run(session.prepare())
    session.record({"content": uses, "usage": {"input_tokens": 10, "output_tokens": 2}})
    session.add_tool_results([result(i, t) for i, t in outputs])


def sent_calls(messages: list[Any]) -> list[tuple[str, str]]:
    """(id, command) of every tool_use and (id, output) of every tool_result, in order."""
    out = []
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "tool_use":
                out.append((block["id"], block["input"]["command"]))
            elif block["type"] == "tool_result":
                out.append((block["tool_use_id"], block["content"]))
    return out


def test_a_repeated_id_across_replies_keeps_both_calls_and_results() -> None:
    session = Session(CONFIG)
    session.add_user("look around")
    turn(session, [use(KIMI_ID, "ls")], [(KIMI_ID, "first output")])
    turn(session, [use(KIMI_ID, "pwd")], [(KIMI_ID, "second output")])  # the host answers with the id it got
    request = asyncio.run(session.prepare())
    validate_request(request["messages"])
    assert sent_calls(request["messages"]) == [
        ("functions_Bash_0", "ls"), ("functions_Bash_0", "first output"),
        ("functions_Bash_0_2", "pwd"), ("functions_Bash_0_2", "second output"),
    ]
    assert "removed" not in json.dumps(request["messages"])
    # the transcript holds the distinct names and what the provider sent
    recorded = [e for e in session.entries if e.type == "assistant"]
    assert [e.data.get(RENAMED_FIELD) for e in recorded] == [{"functions_Bash_0": KIMI_ID}, {"functions_Bash_0_2": KIMI_ID}]
    # recall finds each call with its own output, the first too
    first = session.run_recall({"id": "r1", "input": {"command": "ls"}})["content"]
    second = session.run_recall({"id": "r2", "input": {"command": "pwd"}})["content"]
    assert "first output" in first and "second output" not in first
    assert "second output" in second and "first output" not in second
    assert "first output" in session.run_recall({"id": "r3", "input": {"id": "functions_Bash_0"}})["content"]


def test_two_calls_with_one_id_in_one_reply_are_answered_in_order() -> None:
    session = Session(CONFIG)
    session.add_user("two at once")
    turn(session, [use("toolu_1", "a"), use("toolu_1", "b")], [("toolu_1", "out a"), ("toolu_1", "out b")])
    request = asyncio.run(session.prepare())
    validate_request(request["messages"])
    assert sent_calls(request["messages"]) == [("toolu_1", "a"), ("toolu_1_2", "b"), ("toolu_1", "out a"), ("toolu_1_2", "out b")]


def test_a_host_that_answers_with_the_new_names_is_understood_too() -> None:
    session = Session(CONFIG)
    session.add_user("go")
    turn(session, [use("t", "a")], [("t", "out a")])
    turn(session, [use("t", "b")], [("t_2", "out b")])
    assert sent_calls(asyncio.run(session.prepare())["messages"])[-1] == ("t_2", "out b")


def test_a_valid_id_used_once_is_never_renamed() -> None:
    session = Session(CONFIG)
    session.add_user("go")
    turn(session, [use("toolu_01A", "a"), use("toolu_01B", "b")], [("toolu_01B", "out b"), ("toolu_01A", "out a")])
    assert all(RENAMED_FIELD not in e.data for e in session.entries)
    assert [i for i, _ in sent_calls(asyncio.run(session.prepare())["messages"])] == ["toolu_01A", "toolu_01B", "toolu_01B", "toolu_01A"]


def transcript_with_repeats() -> list[Entry]:
    """A transcript written elsewhere (no renaming at record time) with a repeated id, and a
    first call that never got its result."""
    return [
        Entry.user("go"),
        Entry.assistant([use("x", "lost")], message_id="m1"),
        Entry.user("[Request interrupted by user]"),
        Entry.assistant([use("x", "ls")], message_id="m2"),
        Entry.user([result("x", "listing")]),
        Entry.assistant([use("x", "pwd"), use("x_2", "date")], message_id="m3"),
        Entry.user([result("x", "/home"), result("x_2", "monday")]),
    ]


def test_the_normalizer_and_the_index_name_a_foreign_transcript_alike() -> None:
    entries = transcript_with_repeats()
    messages = normalize_messages(entries)
    validate_request(messages)
    assert sent_calls(messages) == [
        ("x", "lost"), ("x", "Interrupted: this tool call has no result (the session was stopped or interrupted before the tool finished). Run it again if its result is still needed."),
        ("x_2", "ls"), ("x_2", "listing"),
        ("x_3", "pwd"), ("x_2_2", "date"), ("x_3", "/home"), ("x_2_2", "monday"),
    ]
    index = TranscriptIndex().update(entries)
    assert {name: (call.command, call.result) for name, call in index.calls.items()} == {
        "x": ("lost", None), "x_2": ("ls", "listing"), "x_3": ("pwd", "/home"), "x_2_2": ("date", "monday"),
    }
    context = RecallContext(entries=entries, view=entries, cleared_ids=(), index=index, budget_tokens=1_000)
    assert "/home" in answer_recall(RecallRequest("id", "x_3"), context).text
    assert "has no result" in answer_recall(RecallRequest("id", "x"), context).text


def test_plain_message_lists_are_renamed_the_same_way() -> None:
    messages = normalize_plain_messages([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("call:1", "a")]},
        {"role": "user", "content": [result("call:1", "A")]},
        {"role": "assistant", "content": [use("call:1", "b")]},
        {"role": "user", "content": [result("call:1", "B")]},
    ])
    validate_request(messages)
    assert sent_calls(messages) == [("call_1", "a"), ("call_1", "A"), ("call_1_2", "b"), ("call_1_2", "B")]


def test_the_naming_rule() -> None:
    assert renamed_tool_id("toolu_1", set()) == "toolu_1"
    assert renamed_tool_id("toolu_1", {"toolu_1"}) == "toolu_1_2"
    assert renamed_tool_id("toolu_1", {"toolu_1", "toolu_1_2"}) == "toolu_1_3"
    assert renamed_tool_id("a.b:c/d é", set()) == "a_b_c_d__"
    assert renamed_tool_id("", set()) == "tool"
    names = ToolCallNames()
    assert [names.call("t"), names.call("t")] == ["t", "t_2"]
    assert names.result("t") == "t" and names.result("t") == "t_2" and names.result("t") == "t"  # a third: no call left
    names.new_reply()
    assert names.call("t") == "t_3" and names.result("t_2") == "t_2"  # an earlier reply's call waits no longer
    assert "t_3" in names and "t_4" not in names
    blocks = [result("t", "1"), {"type": "text", "text": "note"}, result("t", "2"), result("t", "3")]
    named = name_results(blocks, [("t", "t"), ("t", "t_2")])
    assert [b.get("tool_use_id") for b in named] == ["t", None, "t_2", "t"]
    assert named[1] is blocks[1] and named[0] is blocks[0]  # copied only when renamed


# -- validate_request: what the API refuses ----------------------------------------------------

CALL = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [use("toolu_1", "ls")]}]


@pytest.mark.parametrize(
    ("messages", "rule", "index"),
    [
        ([*CALL, {"role": "user", "content": [result("toolu_1", "a"), result("toolu_1", "b")]}], "duplicate-tool-result", 2),
        ([CALL[0], {"role": "assistant", "content": [use("call.1", "ls")]}, {"role": "user", "content": [result("call.1", "a")]}], "invalid-tool-use-id", 1),
        ([CALL[0], {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": "ls"}]}, {"role": "user", "content": [result("t", "a")]}], "invalid-block", 1),
        ([CALL[0], {"role": "assistant", "content": "Sure: "}], "trailing-whitespace", 1),
        ([CALL[0], {"role": "assistant", "content": [{"type": "text", "text": "a\n"}]}], "trailing-whitespace", 1),
    ],
)
def test_validate_request_refuses_what_the_api_refuses(messages: list[Any], rule: str, index: int) -> None:
    with pytest.raises(InvalidRequestError) as error:
        validate_request(messages)
    assert (error.value.rule, error.value.index) == (rule, index)


def test_validate_request_accepts_the_neighbours_of_those() -> None:
    validate_request([*CALL, {"role": "user", "content": [result("toolu_1", "a")]}])
    validate_request([CALL[0], {"role": "assistant", "content": "Sure:"}])  # a prefill without whitespace
    validate_request([CALL[0], {"role": "assistant", "content": "  Sure"}, {"role": "user", "content": "ok "}])  # only the final assistant
    validate_request([CALL[0], {"role": "assistant", "content": [use("A-z_09", "x")]}, {"role": "user", "content": [result("A-z_09", "a")]}])


def test_a_prefill_ending_in_whitespace_is_sent_stripped() -> None:
    messages = normalize_plain_messages([{"role": "user", "content": "go"}, {"role": "assistant", "content": "The answer is \n"}])
    validate_request(messages)
    assert messages[-1]["content"] == [{"type": "text", "text": "The answer is"}]
