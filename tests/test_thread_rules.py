"""Rules of `unbounded.model.thread` the mutation check found unheld: which side-branch
records come back into the thread, and which repeated records are dropped."""

from __future__ import annotations

from typing import Any

from unbounded.model.entries import Entry
from unbounded.model.thread import LeftOutBranch, ThreadReport, rebuild_thread

TS = "2026-01-01T00:00:00.000Z"


def _call(tool_id: str, message_id: str, parent: str) -> Entry:
    block: dict[str, Any] = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}
    return Entry.assistant([block], message_id=message_id, parent_uuid=parent, timestamp=TS)


def _result(tool_id: str, parent: str, text: str = "ok") -> Entry:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    return Entry.user([block], parent_uuid=parent, timestamp=TS)


def test_side_records_of_a_turn_on_the_path_come_back_and_others_stay_out() -> None:
    prompt = Entry.user("run both", timestamp=TS)
    first = _call("t1", "m1", prompt.uuid or "")
    # The same response's second call, written on a side branch, and its result under it.
    second = _call("t2", "m1", first.uuid or "")
    second_result = _result("t2", second.uuid or "")
    first_result = _result("t1", first.uuid or "")
    reply = Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", parent_uuid=first_result.uuid)
    note = Entry({"type": "system", "subtype": "informational", "uuid": "s1", "parentUuid": prompt.uuid, "content": "hook ran"})
    other = Entry.assistant([{"type": "text", "text": "another response"}], message_id="m9", parent_uuid=first.uuid)
    entries = [prompt, first, second, second_result, note, other, first_result, reply]
    thread, report = rebuild_thread(entries)
    assert thread == [prompt, first, second, second_result, note, first_result, reply]
    assert report.rescued == 3
    assert [(b.reason, b.responses) for b in report.branches] == [("rewound", 1)]
    assert report.abandoned == 1


def test_a_second_side_result_for_a_rescued_call_stays_out() -> None:
    prompt = Entry.user("run both", timestamp=TS)
    first = _call("t1", "m1", prompt.uuid or "")
    second = _call("t2", "m1", first.uuid or "")
    kept = _result("t2", second.uuid or "", "one")
    again = _result("t2", second.uuid or "", "two")
    first_result = _result("t1", first.uuid or "")
    reply = Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", parent_uuid=first_result.uuid)
    thread, report = rebuild_thread([prompt, first, second, kept, again, first_result, reply])
    assert [kept in thread, again in thread].count(True) == 1
    assert second in thread and report.rescued == 2


def test_repeated_records_on_the_path_are_kept_once_and_counted() -> None:
    prompt = Entry.user("look", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    answer = _result("t1", call.uuid or "", "a")
    answer_again = _result("t1", answer.uuid or "", "a")  # the same result under a new uuid
    typed = Entry.user("and now?", parent_uuid=answer_again.uuid, timestamp=TS)
    typed_again = Entry.user("and now?", parent_uuid=typed.uuid, timestamp=TS)
    typed_later = Entry.user("and now?", parent_uuid=typed_again.uuid, timestamp="2026-01-01T00:00:09.000Z")
    summary = Entry.user("summary", parent_uuid=typed_later.uuid, timestamp=TS, is_compact_summary=True)
    summary_again = Entry.user("summary", parent_uuid=summary.uuid, timestamp=TS, is_compact_summary=True)
    thread, report = rebuild_thread(
        [prompt, call, answer, answer_again, typed, typed_again, typed_later, summary, summary_again]
    )
    assert thread == [prompt, call, answer, typed, typed_later, summary, summary_again]
    assert report.duplicates == 2
    assert report.warnings() == [
        "2 repeated record(s) (history written again under new uuids on resume) were kept once"
    ]


def test_nothing_to_rebuild_gives_an_empty_report() -> None:
    thread, report = rebuild_thread([])
    assert thread == [] and (report.abandoned, report.copies, report.duplicates, report.rescued) == (0, 0, 0, 0)
    assert report.leaf_uuid is None and report.warnings() == []


def test_a_named_leaf_rebuilds_its_own_branch_and_an_unknown_one_the_newest() -> None:
    prompt = Entry.user("start", timestamp=TS)
    old = Entry.assistant([{"type": "text", "text": "first try"}], message_id="m1", parent_uuid=prompt.uuid)
    new = Entry.assistant([{"type": "text", "text": "second try"}], message_id="m2", parent_uuid=prompt.uuid)
    entries = [prompt, old, new]
    assert rebuild_thread(entries, leaf_uuid=old.uuid)[0] == [prompt, old]
    assert rebuild_thread(entries)[0] == [prompt, new]
    thread, report = rebuild_thread(entries, leaf_uuid="not-in-the-file")
    assert thread == [prompt, new] and report.leaf_uuid == new.uuid


def test_a_summary_leaf_after_the_last_message_ends_the_thread() -> None:
    prompt = Entry.user("start", timestamp=TS)
    answer = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=prompt.uuid)
    side = Entry.user("aside", parent_uuid=prompt.uuid, timestamp=TS)
    later = Entry({"type": "system", "subtype": "informational", "uuid": "s1", "parentUuid": side.uuid, "content": "x"})
    thread, report = rebuild_thread([prompt, answer, side, later], summary_leaves=["s1", "unknown"])
    assert thread == [prompt, side, later] and report.leaf_uuid == "s1"
    assert rebuild_thread([prompt, answer, side, later], summary_leaves=[prompt.uuid or ""])[1].leaf_uuid == side.uuid


def test_a_record_without_a_uuid_stays_in_the_thread() -> None:
    prompt = Entry.user("start", timestamp=TS)
    loose = Entry({"type": "user", "message": {"role": "user", "content": "typed"}, "timestamp": TS})
    answer = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=prompt.uuid)
    assert rebuild_thread([prompt, loose, answer])[0] == [prompt, loose, answer]


def test_a_side_prompt_of_text_blocks_is_not_brought_back() -> None:
    prompt = Entry.user("start", timestamp=TS)
    answer = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=prompt.uuid)
    aside = Entry.user([{"type": "text", "text": "edited prompt"}], parent_uuid=prompt.uuid, timestamp=TS)
    reply = Entry.assistant([{"type": "text", "text": "b"}], message_id="m2", parent_uuid=answer.uuid)
    thread, report = rebuild_thread([prompt, answer, aside, reply])
    assert thread == [prompt, answer, reply] and report.rescued == 0
    assert [(b.reason, b.prompts) for b in report.branches] == [("rewound", 1)]


def test_a_branch_of_a_session_the_thread_does_not_hold_is_named_by_it() -> None:
    prompt = Entry.user("mine", timestamp=TS, extra={"sessionId": "a"})
    theirs = Entry.user("theirs", timestamp=TS, extra={"sessionId": "b"})
    answer = Entry.assistant([{"type": "text", "text": "x"}], message_id="m1", parent_uuid=theirs.uuid, extra={"sessionId": "b"})
    reply = Entry.assistant([{"type": "text", "text": "y"}], message_id="m2", parent_uuid=prompt.uuid, extra={"sessionId": "a"})
    _, report = rebuild_thread([prompt, theirs, answer, reply])
    assert [(b.reason, b.session, b.prompts, b.responses) for b in report.branches] == [("other_session", "b", 1, 1)]


def test_the_note_lists_three_branches_of_a_reason_and_counts_the_rest() -> None:
    def branches(count: int) -> list[LeftOutBranch]:
        return [LeftOutBranch("rewound", 10 * n, 1, None, 1, 0, 0) for n in range(1, count + 1)]

    (three,) = ThreadReport(branches=branches(3)).warnings()
    assert "line 10, branching from line 1: 1 prompt; line 20, branching from line 1: 1 prompt; line 30" in three
    assert "more" not in three and three.startswith("left out of the thread: 3 rewound branches (")
    (five,) = ThreadReport(branches=branches(5)).warnings()
    assert "line 30, branching from line 1: 1 prompt; 2 more)" in five and "line 40" not in five


def test_a_compact_boundary_follows_its_logical_parent_not_the_record_before_it() -> None:
    prompt = Entry.user("start", timestamp=TS)
    answer = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=prompt.uuid)
    aside = Entry.user("a rewound prompt", parent_uuid=prompt.uuid, timestamp=TS)
    boundary = Entry(
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
         "logicalParentUuid": answer.uuid, "content": "Conversation compacted"}
    )
    after = Entry.user("go on", parent_uuid="b1", timestamp=TS)
    thread, _ = rebuild_thread([prompt, answer, aside, boundary, after])
    assert thread == [prompt, answer, boundary, after]


def test_records_without_a_parent_or_naming_a_missing_one_follow_the_record_before() -> None:
    unlinked = [Entry.user("one", timestamp=TS), Entry.user("two", timestamp=TS), Entry.user("three", timestamp=TS)]
    assert rebuild_thread(unlinked)[0] == unlinked
    first = Entry.user("start", timestamp=TS)
    orphan = Entry.user("parent gone", parent_uuid="missing", timestamp=TS)
    assert rebuild_thread([first, orphan])[0] == [first, orphan]
    answer = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=first.uuid)
    late = Entry.user("parent gone too", parent_uuid="missing", timestamp=TS)
    assert rebuild_thread([first, answer, late])[0] == [first, answer, late]


def test_a_record_without_a_parent_opens_a_chain_only_when_its_session_changes() -> None:
    other = Entry.user("an older session", timestamp=TS, extra={"sessionId": "b"})
    opening = Entry.user("resumed", timestamp=TS, extra={"sessionId": "a"})
    follows = Entry.user("same session", timestamp=TS, extra={"sessionId": "a"})
    thread, report = rebuild_thread([other, opening, follows])
    assert thread == [opening, follows] and report.file_sessions == ["b", "a"]


def test_four_branches_of_a_reason_show_three_and_one_more() -> None:
    branches = [LeftOutBranch("rewound", 10 * n, 1, None, 1, 0, 0) for n in range(1, 5)]
    (note,) = ThreadReport(branches=branches).warnings()
    assert "line 30, branching from line 1: 1 prompt; 1 more)" in note and "line 40" not in note


def test_records_without_a_message_to_end_on_are_kept_in_file_order() -> None:
    notes = [Entry({"type": "system", "subtype": "informational", "uuid": f"s{n}", "content": "x"}) for n in range(2)]
    thread, report = rebuild_thread(notes)
    assert thread == notes and report.leaf_uuid is None


def _progress(uuid: str, parent: str | None) -> Entry:
    return Entry({"type": "progress", "uuid": uuid, "parentUuid": parent, "data": {"type": "hook_progress"}, "timestamp": TS})


def test_a_message_named_after_a_tool_calls_progress_follows_the_turns_real_end() -> None:
    prompt = Entry.user("run it", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    hook = _progress("p1", call.uuid)  # one progress record, hanging off the call itself
    answer = _result("t1", call.uuid or "")
    done = Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", parent_uuid=answer.uuid)
    typed = Entry.user("next", parent_uuid="p1", timestamp=TS)
    reply = Entry.assistant([{"type": "text", "text": "ok"}], message_id="m3", parent_uuid=typed.uuid)
    thread, report = rebuild_thread([prompt, call, hook, answer, done, typed, reply])
    assert thread == [prompt, call, hook, answer, done, typed, reply] and report.branches == []


def test_a_progress_chain_hanging_off_a_record_written_later_keeps_the_named_parent() -> None:
    prompt = Entry.user("run it", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    hook = _progress("p1", "p2")  # names a progress record the file holds only further down
    typed = Entry.user("next", parent_uuid="p1", timestamp=TS)
    later = _progress("p2", call.uuid)
    thread, _ = rebuild_thread([prompt, call, hook, typed, later])
    assert thread == [prompt, call, hook, typed, later]


def test_a_progress_chain_reaching_no_message_keeps_the_named_parent() -> None:
    # A fragment that opens on a progress record: the chain climbs to no tool call at all.
    hook = _progress("p1", None)
    answer = Entry.assistant([{"type": "text", "text": "earlier"}], message_id="m1", parent_uuid="gone")
    typed = Entry.user("next", parent_uuid="p1", timestamp=TS)
    thread, _ = rebuild_thread([hook, answer, typed])
    assert thread == [hook, typed]


def test_a_repeated_result_that_carries_the_users_words_is_kept() -> None:
    prompt = Entry.user("look", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    answer = _result("t1", call.uuid or "", "a")
    # The same call's result again, now with what the user typed next to it: the words are
    # not a repeat, so the record stays (the request's repair handles the second result).
    words = [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}, {"type": "text", "text": "stop there"}]
    interrupted = Entry.user(words, parent_uuid=answer.uuid, timestamp=TS)
    again = _result("t1", interrupted.uuid or "", "b")  # a bare repeat under another text
    thread, report = rebuild_thread([prompt, call, answer, interrupted, again])
    assert thread == [prompt, call, answer, interrupted] and report.duplicates == 1



def test_a_side_record_last_in_the_file_comes_back() -> None:
    # Children are linked over every record, the file's last one included.
    prompt = Entry.user("run it", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    result = _result("t1", call.uuid or "")
    reply = Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", parent_uuid=result.uuid)
    note = Entry({"type": "system", "subtype": "informational", "uuid": "s1", "parentUuid": prompt.uuid, "content": "hook ran"})
    thread, report = rebuild_thread([prompt, call, result, reply, note])
    assert thread == [prompt, call, result, reply, note] and report.rescued == 1


def test_the_side_records_of_a_parent_whose_first_child_opens_the_file_come_back() -> None:
    # The prompt's first child is record 0 (written before it): its later children are
    # still walked.
    prompt = Entry.user("run it", timestamp=TS)
    call = _call("t1", "m1", prompt.uuid or "")
    result = _result("t1", call.uuid or "")
    reply = Entry.assistant([{"type": "text", "text": "done"}], message_id="m2", parent_uuid=result.uuid)
    early = Entry({"type": "progress", "uuid": "p0", "parentUuid": prompt.uuid, "data": {}})
    note = Entry({"type": "system", "subtype": "informational", "uuid": "s1", "parentUuid": prompt.uuid, "content": "hook ran"})
    thread, report = rebuild_thread([early, prompt, call, result, reply, note])
    assert thread == [early, prompt, call, result, reply, note] and report.rescued == 1
