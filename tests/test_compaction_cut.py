"""Where a compaction cuts (`compaction/cut.py`): the kept tail of the turn, one run of the
transcript, the reply a tool result answers, the tools the summarized records called."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.cut import (
    contiguous_tail_start,
    discovered_tools,
    is_one_run,
    kept_rounds_start,
    reply_start,
    turn_tail_start,
)
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary


def user(text: str) -> Entry:
    return Entry.user(text)


def reply(*blocks: dict[str, Any], message_id: str) -> Entry:
    return Entry.assistant(list(blocks), message_id=message_id)


def call(tool_id: str, name: str = "Read") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def result(tool_id: str) -> Entry:
    return Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}])


def test_the_last_user_message_is_kept() -> None:
    entries = [user("one"), reply({"type": "text", "text": "hi"}, message_id="m1"), user("two")]
    assert turn_tail_start(entries, entries) == entries[2].uuid


def test_tool_results_keep_the_reply_whose_calls_they_answer() -> None:
    # One response written as two lines (same message id), its result between them.
    first = reply(call("t1"), message_id="m2")
    second = reply(call("t2"), message_id="m2")
    entries = [user("go"), reply({"type": "text", "text": "ok"}, message_id="m1"), user("read"), first, result("t1"), second, result("t2")]
    assert reply_start(entries, 6) == 3
    assert turn_tail_start(entries, entries) == first.uuid


def test_a_view_ending_with_a_reply_keeps_nothing() -> None:
    entries = [user("one"), reply({"type": "text", "text": "hi"}, message_id="m1")]
    assert turn_tail_start(entries, entries) is None


def test_a_tail_that_is_all_there_is_leaves_nothing_to_summarize() -> None:
    entries = [user("only")]
    assert turn_tail_start(entries, entries) == ""
    calls = [user("read"), reply(call("t1"), message_id="m1"), result("t1")]
    assert turn_tail_start(calls, calls) == calls[1].uuid  # the prompt before the reply is summarized


def test_a_tail_that_is_not_one_run_of_the_transcript_is_not_kept() -> None:
    old = [user("a"), user("b")]
    boundary = create_compact_boundary("auto", 100)
    summary = Entry.user("summary", is_compact_summary=True)
    boundary.compact_metadata["preservedSegment"] = {"headUuid": old[1].uuid, "anchorUuid": summary.uuid, "tailUuid": old[1].uuid}
    entries = [*old, boundary, summary]
    view = messages_after_compact_boundary(entries)
    assert [e.content for e in view[1:]] == ["summary", "b"]
    assert not is_one_run(entries, view[1:])
    assert is_one_run(entries, view[2:])
    assert contiguous_tail_start(entries, view) == 2


def test_one_run_checks_every_record_in_order() -> None:
    entries = [user("a"), user("b"), user("c")]
    assert is_one_run(entries, entries[1:])
    assert not is_one_run(entries, [entries[0], entries[2]])
    assert not is_one_run(entries, [entries[1], entries[0]])
    assert not is_one_run(entries, [])
    assert not is_one_run(entries, [user("elsewhere")])


def test_discovered_tools_are_the_names_called_sorted_once() -> None:
    entries = [reply(call("t1", "Read"), call("t2", "Bash"), message_id="m1"), result("t1"), reply(call("t3", "Read"), message_id="m2")]
    assert discovered_tools(entries) == ["Bash", "Read"]


def test_a_turn_tail_across_an_earlier_splice_is_not_kept() -> None:
    old = [user("a"), user("b")]
    boundary = create_compact_boundary("auto", 100)
    summary = Entry.user("summary", is_compact_summary=True)
    boundary.compact_metadata["preservedSegment"] = {"headUuid": old[1].uuid, "anchorUuid": summary.uuid, "tailUuid": old[1].uuid}
    newest = user("c")
    entries = [*old, boundary, summary, newest]
    view = messages_after_compact_boundary(entries)
    assert [e.content for e in view[1:]] == ["summary", "b", "c"]
    # "b" and "c" trigger the next turn, but they are two runs of the file: a boundary could
    # relink only one, so nothing is kept verbatim.
    assert turn_tail_start(entries, view) == ""


def rounds_view() -> list[Entry | None]:
    """A prompt, then three rounds of a call and its result, then a user message."""
    view: list[Entry | None] = [user("read the modules " + "x" * 400)]
    for n in range(3):
        view += [reply(call(f"t{n}"), message_id=f"m{n}"), result(f"t{n}")]
    return [*view, user("go on")]


def test_kept_rounds_start_keeps_the_newest_round_whatever_the_budget() -> None:
    assert kept_rounds_start(rounds_view(), keep_messages=0, keep_tokens=0) == 7


def test_kept_rounds_start_adds_older_rounds_within_the_message_budget() -> None:
    view = rounds_view()
    assert kept_rounds_start(view, keep_messages=3, keep_tokens=None) == 5  # a round and "go on"
    assert kept_rounds_start(view, keep_messages=2, keep_tokens=None) == 7  # a round is 2
    assert kept_rounds_start(view, keep_messages=5, keep_tokens=None) == 3


def test_kept_rounds_start_never_cuts_between_a_call_and_its_result() -> None:
    for keep in range(8):
        start = kept_rounds_start(rounds_view(), keep_messages=keep, keep_tokens=None)
        assert start in (1, 3, 5, 7)


def test_kept_rounds_start_summarizes_the_oldest_round_when_all_fits() -> None:
    """Over the trigger with everything inside the budget: the oldest round after `first`
    goes into the summary, never the newest; a lone summary is not summarized alone."""
    view = rounds_view()
    assert kept_rounds_start(view, keep_messages=None, keep_tokens=None) == 1
    assert kept_rounds_start(view, first=1, keep_messages=None, keep_tokens=None) == 3
    assert kept_rounds_start([user("only this")], keep_messages=None, keep_tokens=None) is None


def test_kept_rounds_start_stops_at_the_token_budget() -> None:
    view = rounds_view()  # rounds of 3 to 4 tokens (padded) after a ~104-token prompt
    assert kept_rounds_start(view, keep_messages=None, keep_tokens=0) == 7
    assert kept_rounds_start(view, keep_messages=None, keep_tokens=10) == 3
    assert kept_rounds_start(view, keep_messages=None, keep_tokens=20) == 1  # the prompt: over
