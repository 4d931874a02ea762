"""Entries -> API messages (normalize.py) and request validation: one behaviour per test."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from unbounded.errors import InvalidRequestError
from unbounded.model.entries import (
    Entry,
    create_compact_boundary,
    messages_after_compact_boundary,
)
from unbounded.model.normalize import (
    MessageNormalizer,
    normalize_messages,
    normalize_plain_messages,
    validate_request,
)

# -- builders ------------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str = "let me think") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(tool_id: str, name: str = "Bash", **inputs: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": inputs or {"command": "ls"}}


def tool_result(tool_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def user(content: Any, **kwargs: Any) -> Entry:
    return Entry.user(content, **kwargs)


def assistant(*blocks: dict[str, Any], mid: str = "msg_A", **kwargs: Any) -> Entry:
    return Entry.assistant(list(blocks), message_id=mid, **kwargs)


def results(*tool_ids: str) -> Entry:
    return Entry.user([tool_result(t, f"result of {t}") for t in tool_ids])


def progress() -> Entry:
    return Entry({"type": "progress", "uuid": "p-1", "data": {"type": "bash_progress"}})


def system_record() -> Entry:
    return Entry({"type": "system", "subtype": "local_command", "content": "ls", "uuid": "s-1"})


def api_error(mid: str = "msg_err") -> Entry:
    return Entry.assistant(
        [text("API Error: 529 Overloaded")],
        message_id=mid,
        model="<synthetic>",
        extra={"isApiErrorMessage": True},
    )


def todo_attachment(item: str = "write tests") -> Entry:
    return Entry.attachment_record(
        {"type": "todo", "content": [{"content": item, "status": "pending"}]}
    )


TODO_REMINDER = "<system-reminder>\nCurrent todo list:\n- [pending] write tests\n</system-reminder>"


# -- dropped records ------------------------------------------------------------------------


def test_progress_records_are_dropped() -> None:
    entries = [user("hi"), progress(), assistant(text("hello"))]
    assert normalize_messages(entries) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [text("hello")]},
    ]


def test_system_records_are_dropped() -> None:
    entries = [system_record(), user("hi"), system_record(), assistant(text("hello"))]
    assert [m["role"] for m in normalize_messages(entries)] == ["user", "assistant"]


def test_compact_boundary_is_dropped_but_summary_kept() -> None:
    entries = [
        user("old"),
        assistant(text("old answer")),
        create_compact_boundary("auto", 1000),
        user("Summary of the conversation", is_compact_summary=True),
    ]
    view = messages_after_compact_boundary(entries)
    assert view[0].is_compact_boundary
    assert normalize_messages(view) == [{"role": "user", "content": "Summary of the conversation"}]


def test_synthetic_api_error_is_dropped() -> None:
    entries = [user("hi"), api_error(), user("again")]
    assert normalize_messages(entries) == [{"role": "user", "content": [text("hi"), text("again")]}]


def test_api_error_flag_from_a_real_model_is_kept() -> None:
    # Only isApiErrorMessage *and* model "<synthetic>" make a placeholder.
    entry = Entry.assistant(
        [text("real")], message_id="m", model="claude-x", extra={"isApiErrorMessage": True}
    )
    assert not entry.is_synthetic_api_error
    assert normalize_messages([user("hi"), entry])[-1] == {
        "role": "assistant",
        "content": [text("real")],
    }


# -- merging user messages ------------------------------------------------------------------


def test_consecutive_user_strings_merge_into_blocks() -> None:
    assert normalize_messages([user("one"), user("two")]) == [
        {"role": "user", "content": [text("one"), text("two")]}
    ]


def test_consecutive_user_string_and_list_merge() -> None:
    entries = [user("one"), user([text("two"), text("three")]), user("four")]
    assert normalize_messages(entries) == [
        {"role": "user", "content": [text("one"), text("two"), text("three"), text("four")]}
    ]


def test_single_user_message_keeps_its_string_content() -> None:
    assert normalize_messages([user("just a string")]) == [
        {"role": "user", "content": "just a string"}
    ]


# -- merging assistant lines ----------------------------------------------------------------


def test_assistant_lines_with_same_id_merge() -> None:
    entries = [
        user("hi"),
        assistant(thinking(), mid="A"),
        assistant(text("answer"), mid="A"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
    ]
    assert normalize_messages(entries) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [thinking(), text("answer"), tool_use("t1")]},
        {"role": "user", "content": [tool_result("t1", "result of t1")]},
    ]


def test_interleaved_parallel_tool_calls_become_one_exchange() -> None:
    entries = [
        user("go"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
        assistant(tool_use("t2"), mid="A"),
        results("t2"),
    ]
    assert normalize_messages(entries) == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("t1"), tool_use("t2")]},
        {
            "role": "user",
            "content": [tool_result("t1", "result of t1"), tool_result("t2", "result of t2")],
        },
    ]


def test_interleaved_parallel_tool_calls_after_a_prompt_validate() -> None:
    entries = [
        user("go"),
        assistant(text("doing it"), mid="A"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
        assistant(tool_use("t2"), mid="A"),
        results("t2"),
        assistant(tool_use("t3"), mid="A"),
        results("t3"),
        assistant(text("done"), mid="B"),
    ]
    messages = normalize_messages(entries)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"] == [
        "t1",
        "t2",
        "t3",
    ]
    validate_request(messages)


def test_two_responses_in_a_row_are_joined_and_reported() -> None:
    entries = [user("hi"), assistant(text("a"), mid="A"), assistant(text("b"), mid="B")]
    normalizer = MessageNormalizer(entries)
    assert normalizer.messages[1:] == [{"role": "assistant", "content": [text("a"), text("b")]}]
    assert [r.kind for r in normalizer.repairs] == ["joined-responses"]
    assert normalizer.last() == normalizer.messages[-1]  # the repaired view's last message


def test_different_ids_across_tool_results_are_not_merged() -> None:
    entries = [
        user("hi"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
        assistant(tool_use("t2"), mid="B"),
        results("t2"),
    ]
    assert [m["role"] for m in normalize_messages(entries)] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_walk_back_stops_at_a_user_message_with_more_than_tool_results() -> None:
    entries = [
        user("hi"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
        todo_attachment(),
        assistant(tool_use("t2"), mid="A"),
        results("t2"),
    ]
    messages = normalize_messages(entries)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[3]["content"] == [tool_use("t2")]
    validate_request(messages)


# -- tool_result hoisting -------------------------------------------------------------------


def test_attachment_after_tool_results_stays_after_them() -> None:
    entries = [user("hi"), assistant(tool_use("t1")), results("t1"), todo_attachment()]
    assert normalize_messages(entries)[-1]["content"] == [
        tool_result("t1", "result of t1"),
        text(TODO_REMINDER),
    ]


def test_interrupt_text_after_tool_results_stays_after_them() -> None:
    interrupt = "[Request interrupted by user for tool use]"
    entries = [user("hi"), assistant(tool_use("t1")), results("t1"), user([text(interrupt)])]
    messages = normalize_messages(entries)
    assert messages[-1]["content"] == [tool_result("t1", "result of t1"), text(interrupt)]
    validate_request(messages)


def test_text_before_a_tool_result_message_is_moved_after_it() -> None:
    entries = [
        user("hi"),
        assistant(tool_use("t1")),
        todo_attachment(),
        user([text("note")]),
        results("t1"),
    ]
    messages = normalize_messages(entries)
    assert messages[-1]["content"] == [
        tool_result("t1", "result of t1"),
        text(TODO_REMINDER),
        text("note"),
    ]
    validate_request(messages)


def test_hoisting_is_stable_for_results_and_other_blocks() -> None:
    entries = [
        user("hi"),
        assistant(tool_use("t1"), tool_use("t2")),
        results("t1"),
        user([text("between")]),
        results("t2"),
        user([text("after")]),
    ]
    assert normalize_messages(entries)[-1]["content"] == [
        tool_result("t1", "result of t1"),
        tool_result("t2", "result of t2"),
        text("between"),
        text("after"),
    ]


# -- whitespace and empty messages ----------------------------------------------------------


def test_whitespace_only_text_block_is_dropped() -> None:
    entries = [user("hi"), assistant(text("\n\n"), mid="A"), assistant(text("answer"), mid="A")]
    assert normalize_messages(entries)[-1] == {"role": "assistant", "content": [text("answer")]}


def test_whitespace_block_inside_a_list_is_dropped() -> None:
    entries = [user([text("hi"), text("  \n "), text("there")])]
    assert normalize_messages(entries) == [{"role": "user", "content": [text("hi"), text("there")]}]


def test_message_left_empty_disappears() -> None:
    entries = [
        user("hi"),
        assistant(text("\n\n"), mid="A"),
        user("   "),
        user([]),
        user([text("\t")]),
    ]
    assert normalize_messages(entries) == [{"role": "user", "content": "hi"}]


def test_empty_assistant_line_does_not_split_user_messages() -> None:
    # The blank line contributes nothing, so the two user messages still merge.
    entries = [user("a"), assistant(text("\n\n"), mid="A"), user("b")]
    assert normalize_messages(entries) == [{"role": "user", "content": [text("a"), text("b")]}]


# -- thinking -------------------------------------------------------------------------------


def test_trailing_thinking_only_message_is_left_out() -> None:
    entries = [user("hi"), assistant(thinking(), mid="A")]
    assert normalize_messages(entries) == [{"role": "user", "content": "hi"}]


def test_trailing_redacted_thinking_only_message_is_left_out() -> None:
    entries = [user("hi"), assistant({"type": "redacted_thinking", "data": "xyz"}, mid="A")]
    assert normalize_messages(entries) == [{"role": "user", "content": "hi"}]


def test_trailing_thinking_comes_back_once_text_arrives() -> None:
    normalizer = MessageNormalizer([user("hi"), assistant(thinking(), mid="A")])
    assert len(normalizer.messages) == 1
    assert normalizer.last() == {"role": "user", "content": "hi"}
    normalizer.append(assistant(text("answer"), mid="A"))
    assert normalizer.messages[-1] == {"role": "assistant", "content": [thinking(), text("answer")]}
    assert normalizer.last() == normalizer.messages[-1]


def test_thinking_only_message_in_the_middle_is_kept() -> None:
    entries = [user("hi"), assistant(thinking(), mid="A"), user("more")]
    assert normalize_messages(entries) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [thinking()]},
        {"role": "user", "content": "more"},
    ]


# -- attachments ----------------------------------------------------------------------------


def test_attachment_becomes_a_system_reminder_joining_the_previous_user_message() -> None:
    entries = [user("hi"), todo_attachment()]
    assert normalize_messages(entries) == [
        {"role": "user", "content": [text("hi"), text(TODO_REMINDER)]}
    ]


def test_attachment_after_an_assistant_message_starts_a_user_message() -> None:
    entries = [user("hi"), assistant(text("hello")), todo_attachment()]
    assert normalize_messages(entries)[-1] == {"role": "user", "content": [text(TODO_REMINDER)]}


def test_attachment_rendering_nothing_contributes_nothing() -> None:
    # A plan reference without plan content renders to nothing.
    entries = [user("hi"), Entry.attachment_record({"type": "plan_file_reference"})]
    assert normalize_messages(entries) == [{"role": "user", "content": "hi"}]


def test_unknown_attachment_type_is_rendered_not_dropped() -> None:
    entries = [user("hi"), Entry.attachment_record({"type": "brand_new", "value": 42})]
    reminder = normalize_messages(entries)[0]["content"][1]["text"]
    assert reminder.startswith("<system-reminder>\n")
    assert reminder.endswith("\n</system-reminder>")
    assert "brand_new" in reminder and "42" in reminder


# -- purity and incrementality --------------------------------------------------------------


def _busy_conversation() -> list[Entry]:
    return [
        user("hi"),
        progress(),
        assistant(text("\n\n"), mid="A"),
        assistant(thinking(), mid="A"),
        assistant(text("calling"), mid="A"),
        assistant(tool_use("t1"), mid="A"),
        results("t1"),
        assistant(tool_use("t2"), mid="A"),
        todo_attachment(),
        results("t2"),
        user([text("note"), text(" ")]),
        api_error(),
        system_record(),
        assistant(text("done"), mid="B"),
        user("next"),
        user([text("and more")]),
        assistant(thinking("trailing"), mid="C"),
    ]


def test_entries_are_never_mutated() -> None:
    entries = _busy_conversation()
    before = copy.deepcopy([e.data for e in entries])
    messages = normalize_messages(entries)
    normalize_plain_messages(messages)
    assert [e.data for e in entries] == before


def test_incremental_append_equals_batch() -> None:
    entries = _busy_conversation()
    normalizer = MessageNormalizer()
    for count, entry in enumerate(entries, start=1):
        normalizer.append(entry)
        assert normalizer.messages == normalize_messages(entries[:count])
    assert normalizer.messages == normalize_messages(entries)
    assert MessageNormalizer(entries).messages == normalize_messages(entries)


def test_busy_conversation_is_valid() -> None:
    messages = normalize_messages(_busy_conversation())
    validate_request(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]


# -- plain messages -------------------------------------------------------------------------


def test_plain_messages_merge_user_runs_and_drop_empty() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": ""},
        {"role": "user", "content": [text("b")]},
        {"role": "assistant", "content": "reply"},
    ]
    assert normalize_plain_messages(messages) == [
        {"role": "user", "content": [text("a"), text("b")]},
        {"role": "assistant", "content": "reply"},
    ]


def test_plain_messages_merge_assistant_runs() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    assert normalize_plain_messages(messages) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [text("a"), text("b")]},
    ]


# -- validate_request -----------------------------------------------------------------------


def _rejects(messages: list[dict[str, Any]], rule: str, index: int | None) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        validate_request(messages)
    exc = info.value
    assert exc.rule == rule
    assert exc.index == index
    if index is not None:
        assert f"messages[{index}]" in str(exc)
    assert rule in str(exc)
    return exc


def u(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def a(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def test_rule_non_empty() -> None:
    exc = _rejects([], "non-empty", None)
    assert str(exc).startswith("messages:")


def test_rule_role() -> None:
    _rejects([u("hi"), {"role": "system", "content": "x"}], "role", 1)


def test_rule_first_message_user() -> None:
    _rejects([a("hello"), u("hi")], "first-message-user", 0)


def test_rule_alternation() -> None:
    _rejects([u("hi"), a("a"), a("b")], "alternation", 2)


def test_rule_empty_content_string() -> None:
    _rejects([u("hi"), a("")], "empty-content", 1)


def test_rule_empty_content_list() -> None:
    _rejects([u([])], "empty-content", 0)


def test_rule_empty_content_whitespace_only_text() -> None:
    _rejects([u("hi"), a([text("ok"), text("\n\n")])], "empty-content", 1)


def test_rule_empty_content_whitespace_only_string() -> None:
    _rejects([u("hi"), a("x"), u("  \n")], "empty-content", 2)


def test_rule_duplicate_tool_use_id() -> None:
    messages = [
        u("hi"),
        a([tool_use("t1")]),
        u([tool_result("t1")]),
        a([tool_use("t1")]),
        u([tool_result("t1")]),
    ]
    _rejects(messages, "duplicate-tool-use-id", 3)


def test_rule_duplicate_tool_use_id_within_one_message() -> None:
    _rejects([u("hi"), a([tool_use("t1"), tool_use("t1")])], "duplicate-tool-use-id", 1)


def test_rule_tool_use_unanswered() -> None:
    messages = [u("hi"), a([tool_use("t1"), tool_use("t2")]), u([tool_result("t1")])]
    exc = _rejects(messages, "tool-use-unanswered", 1)
    assert "t2" in str(exc)


def test_rule_tool_use_unanswered_when_request_ends_with_tool_use() -> None:
    exc = _rejects([u("hi"), a([text("x"), tool_use("t1")])], "tool-use-unanswered", 1)
    assert "t1" in str(exc)


def test_rule_orphan_tool_result() -> None:
    messages = [u("hi"), a([tool_use("t1")]), u([tool_result("t1"), tool_result("t9")])]
    exc = _rejects(messages, "orphan-tool-result", 2)
    assert "t9" in str(exc)


def test_rule_orphan_tool_result_answering_an_older_message() -> None:
    messages = [
        u("hi"),
        a([tool_use("t1")]),
        u([tool_result("t1")]),
        a("ok"),
        u([tool_result("t1")]),
    ]
    _rejects(messages, "orphan-tool-result", 4)


def test_rule_orphan_tool_result_in_an_assistant_message() -> None:
    _rejects([u("hi"), a([tool_result("t1")])], "orphan-tool-result", 1)


def test_rule_tool_result_order() -> None:
    messages = [u("hi"), a([tool_use("t1")]), u([text("first"), tool_result("t1")])]
    _rejects(messages, "tool-result-order", 2)


def test_valid_multi_turn_tool_conversation_passes() -> None:
    messages = [
        u("fix the bug"),
        a([thinking(), text("looking"), tool_use("t1"), tool_use("t2", name="Read")]),
        u([tool_result("t1"), tool_result("t2", [text("file body")]), text("<reminder>")]),
        a([tool_use("t3", name="Edit")]),
        u([tool_result("t3")]),
        a([text("fixed")]),
        u("thanks, now the docs"),
        a("done"),
    ]
    validate_request(messages)


def test_validate_rejects_tool_use_in_a_user_message() -> None:
    messages = [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}]
    with pytest.raises(InvalidRequestError) as info:
        validate_request(messages)
    assert info.value.rule == "tool-use-in-user-message" and info.value.index == 0


def test_validate_rejects_non_object_blocks() -> None:
    with pytest.raises(InvalidRequestError) as info:
        validate_request([{"role": "user", "content": ["just a string"]}])
    assert info.value.rule == "invalid-block"
