"""Normalizer rules the mutation check found unheld: assistant lines without a response id are
never merged across a tool result, a call added to an answered response gets its result,
a call renamed after its result arrived, the repaired copy reused while its source is
unchanged, an empty normalizer."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.errors import InvalidRequestError
from unbounded.model.entries import Entry
from unbounded.model.normalize import (
    MessageNormalizer,
    Repair,
    interrupted_result,
    normalize_plain_messages,
    validate_request,
)


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}


def result(tool_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def _without_id(content: list[dict[str, Any]]) -> Entry:
    """An assistant record whose message has no response id (some importers write none)."""
    return Entry({"type": "assistant", "message": {"role": "assistant", "content": content}})


def test_assistant_lines_without_an_id_are_not_merged_across_a_tool_result() -> None:
    entries = [Entry.user("go"), _without_id([use("a")]), Entry.user([result("a")]), _without_id([use("b")])]  # fmt: skip
    assert entries[1].message_id is None
    messages = MessageNormalizer(entries).messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1]["content"] == [use("a")] and messages[3]["content"] == [use("b")]


def test_a_call_added_to_a_response_already_answered_gets_an_interrupted_result() -> None:
    entries = [
        Entry.user("go"),
        Entry.assistant([use("a")], message_id="r1"),
        Entry.user([result("a")]),
        Entry.assistant([use("b")], message_id="r1"),  # a later line of the same response
    ]
    normalizer = MessageNormalizer(entries)
    messages = normalizer.messages
    assert messages[1]["content"] == [use("a"), use("b")]
    assert messages[2]["content"] == [result("a"), interrupted_result("b")]
    assert normalizer.repairs == [Repair("missing-tool-result", 2, ("b",))]
    validate_request(messages)


def test_a_repeated_call_id_in_a_later_line_of_an_answered_response_is_renamed() -> None:
    entries = [
        Entry.user("go"),
        Entry.assistant([use("a")], message_id="r1"),
        Entry.user([result("a")]),
        Entry.assistant([use("b")], message_id="r2"),
        Entry.user([result("b")]),
        Entry.assistant([use("a")], message_id="r2"),  # "a" again, merged into r2
    ]
    normalizer = MessageNormalizer(entries)
    messages = normalizer.messages
    renamed = messages[3]["content"][1]["id"]
    assert renamed != "a" and messages[3]["content"][0] == use("b")
    assert messages[4]["content"] == [result("b"), interrupted_result(renamed)]
    assert normalizer.repairs == [
        Repair("duplicate-tool-use", 3, ("a",)),
        Repair("missing-tool-result", 4, (renamed,)),
    ]
    validate_request(messages)


def test_a_repaired_message_is_the_same_object_until_its_source_changes() -> None:
    entries = [Entry.user("go"), Entry.assistant([use("a"), use("b")], message_id="m1"), Entry.user([result("b")]), Entry.user("next")]  # fmt: skip
    normalizer = MessageNormalizer(entries)
    first = normalizer.messages[2]
    assert normalizer.messages[2] is first  # the prompt-cache planner compares by identity first
    normalizer.append(Entry.user("more"))
    assert normalizer.messages[2] is not first
    assert normalizer.messages[2]["content"][-1] == {"type": "text", "text": "more"}


def test_an_empty_normalizer_has_no_messages() -> None:
    normalizer = MessageNormalizer()
    assert normalizer.messages == [] and normalizer.last() is None and normalizer.repairs == []


def test_only_an_assistant_message_of_thinking_is_left_out_at_the_end() -> None:
    thinking = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": thinking}]  # fmt: skip
    assert normalize_plain_messages(messages)[-1] == {"role": "user", "content": thinking}
    ending = [messages[0], {"role": "assistant", "content": thinking}]
    assert normalize_plain_messages(ending) == [messages[0]]


def _refusal(messages: list[dict[str, Any]]) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        validate_request(messages)
    return caught.value


def test_an_invalid_tool_use_id_is_quoted_to_80_characters() -> None:
    bad = "x" * 79 + "!" + "tail"
    error = _refusal(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": [use(bad)]}]
    )
    assert error.rule == "invalid-tool-use-id" and repr(bad[:80]) in error.detail
    assert repr(bad[:81]) not in error.detail


def test_a_tool_result_in_an_assistant_message_is_refused_as_out_of_place() -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [result("a")]}]
    error = _refusal(messages)
    assert (error.rule, error.index) == ("orphan-tool-result", 1)
    assert error.detail == "tool_result blocks belong in user messages"


def test_only_the_last_block_of_a_final_assistant_message_counts_for_trailing_whitespace() -> None:
    user = {"role": "user", "content": "q"}
    first_spaced = [{"type": "text", "text": "a  "}, {"type": "text", "text": "b"}]
    validate_request([user, {"role": "assistant", "content": first_spaced}])
    after_thinking = [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "b \n"}]  # fmt: skip
    assert (
        _refusal([user, {"role": "assistant", "content": after_thinking}]).rule
        == "trailing-whitespace"
    )
    normalized = normalize_plain_messages([user, {"role": "assistant", "content": after_thinking}])
    assert normalized[-1]["content"] == [after_thinking[0], {"type": "text", "text": "b"}]
    two_spaced = [{"type": "text", "text": "a  "}, {"type": "text", "text": "b  "}]
    normalized = normalize_plain_messages([user, {"role": "assistant", "content": two_spaced}])
    assert normalized[-1]["content"] == [
        {"type": "text", "text": "a  "},
        {"type": "text", "text": "b"},
    ]
    validate_request(normalized)
