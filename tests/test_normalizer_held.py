"""What the normalizer keeps of the messages a later record can no longer change: no response
id but the last one's, and the tool calls of an assistant message only while a repair of it
or of its answer may read them; every repair still comes out as it did."""

from __future__ import annotations

from typing import Any

from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer, Repair, interrupted_result


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}


def result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def turns(normalizer: MessageNormalizer, first: int, count: int) -> None:
    """`count` plain tool-call turns, each answered, ids `c<n>`."""
    for n in range(first, first + count):
        normalizer.append(Entry.assistant([use(f"c{n}")], message_id=f"m{n}"))
        normalizer.append(Entry.user([result(f"c{n}")]))


def test_the_calls_of_answered_messages_are_not_kept() -> None:
    normalizer = MessageNormalizer([Entry.user("go")])
    turns(normalizer, 0, 200)
    assert sorted(normalizer._renames) == [399]  # the last assistant message's alone


def test_a_repair_far_back_comes_out_the_same_after_many_turns() -> None:
    """A repeated call id (renamed, with its result and a missing one), and a call never
    answered in a message with no renamed call, then many ordinary turns: every repair still
    reads the calls it needs."""
    entries = [
        Entry.user("go"),
        Entry.assistant([use("a")], message_id="x1"),
        Entry.user([result("a")]),
        Entry.assistant([use("a"), use("b")], message_id="x2"),  # "a" again: renamed a_2
        Entry.user([result("a")]),  # answers a_2; "b" never answered
        Entry.assistant([use("d")], message_id="x3"),
        Entry.user("no result for d"),
    ]
    normalizer = MessageNormalizer(entries)
    turns(normalizer, 0, 50)
    messages = normalizer.messages
    assert [block["id"] for block in messages[3]["content"]] == ["a_2", "b"]
    assert messages[4]["content"] == [
        {**result("a"), "tool_use_id": "a_2"},
        interrupted_result("b"),
    ]
    assert messages[6]["content"] == [
        interrupted_result("d"),
        {"type": "text", "text": "no result for d"},
    ]
    assert normalizer.repairs == [
        Repair("duplicate-tool-use", 3, ("a",)),
        Repair("missing-tool-result", 4, ("b",)),
        Repair("missing-tool-result", 6, ("d",)),
    ]


def test_a_record_of_the_last_response_still_merges_into_it() -> None:
    """The last assistant message's response id is kept: a later line of the same response
    (after its tool results) joins it; one of an earlier response does not."""
    normalizer = MessageNormalizer([Entry.user("go")])
    turns(normalizer, 0, 3)
    normalizer.append(Entry.assistant([{"type": "text", "text": "more"}], message_id="m2"))
    assert normalizer.messages[-2]["content"][-1] == {"type": "text", "text": "more"}
    normalizer.append(Entry.user("next"))
    normalizer.append(Entry.assistant([{"type": "text", "text": "late"}], message_id="m1"))
    assert normalizer.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "late"}]}
