"""The normalizer's repairs, each with its exact output and its entry in `repairs`, so that a
flipped or dropped rule fails here (the mutation check runs these with test_normalize.py)."""

from __future__ import annotations

from typing import Any

from unbounded.model.entries import Entry
from unbounded.model.normalize import (
    INTERRUPTED_RESULT_TEXT,
    MISSING_START_TEXT,
    MessageNormalizer,
    Repair,
    interrupted_result,
    is_tool_result_only,
    normalize_messages,
    normalize_plain_messages,
    validate_request,
)


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}


def result(tool_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def test_a_missing_result_gets_the_interrupted_result() -> None:
    entries = [Entry.user("go"), Entry.assistant([use("a"), use("b")], message_id="m1"), Entry.user([result("b")]), Entry.user("next")]
    normalizer = MessageNormalizer(entries)
    messages = normalizer.messages
    assert messages[2]["content"] == [result("b"), interrupted_result("a"), {"type": "text", "text": "next"}]
    assert interrupted_result("a") == {"type": "tool_result", "tool_use_id": "a", "is_error": True, "content": INTERRUPTED_RESULT_TEXT}
    assert normalizer.repairs == [Repair("missing-tool-result", 2, ("a",))]
    validate_request(messages)


def test_an_orphan_result_becomes_text_and_a_repeated_one_is_dropped() -> None:
    entries = [
        Entry.user("go"),
        Entry.assistant([use("a")], message_id="m1"),
        Entry.user([result("a"), result("a", "again"), result("zz", [{"type": "text", "text": "lost"}, {"type": "image", "source": {}}], is_error=True), result("yy", "plain")]),
    ]
    normalizer = MessageNormalizer(entries)
    content = normalizer.messages[2]["content"]
    assert content[0] == result("a")
    assert content[1:] == [
        {"type": "text", "text": "[Tool result for yy, whose call is not in this conversation]\nplain"},
        {"type": "text", "text": "[Tool error result for zz, whose call is not in this conversation]\nlost\n[image]"},
    ]
    assert normalizer.repairs == [Repair("orphan-tool-result", 2, ("a", "zz", "yy"))]
    validate_request(normalizer.messages)


def test_a_message_of_nothing_but_a_dropped_result_keeps_a_placeholder() -> None:
    entries = [Entry.user("go"), Entry.assistant([use("a")], message_id="m1"), Entry.user([result("a")]), Entry.assistant([{"type": "text", "text": "done"}], message_id="m2"), Entry.user([result("a", "late copy")])]
    messages = normalize_messages(entries)
    assert messages[4]["content"] == [{"type": "text", "text": "[Tool result for a, whose call is not in this conversation]\nlate copy"}]
    empty_result = [Entry.user("go"), Entry.assistant([{"type": "text", "text": "hi"}], message_id="m1"), Entry.user([result("q", None)])]
    assert normalize_messages(empty_result)[2]["content"] == [{"type": "text", "text": "[Tool result for q, whose call is not in this conversation]"}]


def test_a_conversation_starting_with_the_assistant_gets_a_first_user_message() -> None:
    entries = [Entry.assistant([use("a")], message_id="m1"), Entry.user([result("a")])]
    normalizer = MessageNormalizer(entries)
    assert normalizer.messages[0] == {"role": "user", "content": MISSING_START_TEXT}
    assert normalizer.repairs == [Repair("missing-first-user", 0)]
    broken = [Entry.assistant([use("a")], message_id="m1"), Entry.user("moved on")]
    repairs = MessageNormalizer(broken).repairs
    assert repairs == [Repair("missing-first-user", 0), Repair("missing-tool-result", 2, ("a",))]  # indices shift by one


def test_two_responses_in_a_row_are_joined_and_listed() -> None:
    entries = [Entry.user("go"), Entry.assistant([{"type": "text", "text": "one"}], message_id="m1"), Entry.assistant([{"type": "text", "text": "two"}], message_id="m2")]
    normalizer = MessageNormalizer(entries)
    assert normalizer.messages[1]["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert normalizer.repairs == [Repair("joined-responses", 1)]
    plain = normalize_plain_messages([{"role": "user", "content": "go"}, {"role": "assistant", "content": "one"}, {"role": "assistant", "content": "two"}])
    assert plain[1]["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]


def test_last_matches_the_list_without_copying_it() -> None:
    entries = [Entry.user("go"), Entry.assistant([{"type": "thinking", "thinking": "hm", "signature": "s"}], message_id="m1")]
    normalizer = MessageNormalizer(entries)
    assert normalizer.last() == {"role": "user", "content": "go"} == normalizer.messages[-1]
    assert MessageNormalizer([entries[1]]).last() == {"role": "user", "content": MISSING_START_TEXT}
    assert MessageNormalizer().last() is None and len(MessageNormalizer()) == 0
    only_thinking = MessageNormalizer()
    only_thinking.append_message({"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]})
    assert len(only_thinking) == 1 and only_thinking.messages == [{"role": "user", "content": MISSING_START_TEXT}]
    assert MessageNormalizer([Entry.user("a"), Entry.assistant([{"type": "text", "text": "b "}], message_id="m")]).last() == {"role": "assistant", "content": [{"type": "text", "text": "b"}]}


def test_is_tool_result_only() -> None:
    assert is_tool_result_only([result("a")]) and is_tool_result_only([result("a"), result("b")])
    assert not is_tool_result_only([]) and not is_tool_result_only("text")
    assert not is_tool_result_only([result("a"), {"type": "text", "text": "x"}]) and not is_tool_result_only([result("a"), "x"])


def test_a_trailing_prefill_is_stripped_only_at_its_end() -> None:
    messages = normalize_plain_messages([{"role": "user", "content": "go"}, {"role": "assistant", "content": [{"type": "text", "text": " a "}, {"type": "text", "text": "b \n"}]}])
    assert messages[-1]["content"] == [{"type": "text", "text": " a "}, {"type": "text", "text": "b"}]
    untouched = normalize_plain_messages([{"role": "user", "content": "go "}, {"role": "assistant", "content": [use("t")]}])
    assert untouched[0]["content"] == "go " and untouched[-1]["content"] == [use("t")]


def test_results_are_put_first_past_a_value_that_is_no_block() -> None:
    """A string among a user message's blocks is dropped, not read as a block (hypothesis
    found the order check calling .get on it)."""
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": ["junk", {"type": "text", "text": "b"}, result]},
    ]
    assert normalize_plain_messages(messages)[-1]["content"] == [
        result,
        {"type": "text", "text": "b"},
    ]
