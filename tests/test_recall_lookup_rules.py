"""Rules of recall's answers (`unbounded.recall.lookup`) the mutation check found unheld: the
number of query words searched, stray or unknown blocks, cleared placeholders written as user
text, a shortened result without a store, and which call a path or command answer picks."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.large_output import cap_text
from unbounded.compaction.tools_registry import CLEARED_TOOL_RESULT
from unbounded.model.entries import Entry
from unbounded.recall import RecallContext, RecallRequest, TranscriptIndex
from unbounded.recall.lookup import GONE_NOTE, answer_recall


def context_of(entries: list[Entry], view: list[Entry], kept: dict[str, str] | None = None) -> RecallContext:
    return RecallContext(entries=entries, view=view, cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=2_000, load_output=None if kept is None else kept.get)


def call(tool_id: str, name: str, tool_input: dict[str, Any], output: Any) -> list[Entry]:
    return [
        Entry.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]),
        Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": output}]),
    ]


def test_a_query_searches_its_first_32_words() -> None:
    entries = [Entry.user("the needle is here"), Entry.user("later")]
    context = context_of(entries, view=entries[1:])
    filler = " ".join(f"w{n:02d}" for n in range(32))
    missed = answer_recall(RecallRequest("query", f"{filler} needle"), context)
    assert not missed.found and missed.text.startswith("Nothing in this session matches")
    found = answer_recall(RecallRequest("query", " ".join(f"w{n:02d}" for n in range(31)) + " needle"), context)
    assert found.found and "the needle is here" in found.text and "only its first" not in found.text


def test_stray_blocks_and_orphan_results_are_passed_over_in_a_search() -> None:
    old = Entry.user(["stray", {"type": "text", "text": "alpha one"}, {"type": "tool_result", "tool_use_id": "ghost", "content": "alpha two"}])  # type: ignore[list-item]
    entries = [old, Entry.user("now")]
    answer = answer_recall(RecallRequest("query", "alpha"), context_of(entries, view=entries[1:]))
    assert answer.found and "alpha one" in answer.text and "alpha two" not in answer.text


def test_a_cleared_placeholder_written_as_user_text_is_not_searched() -> None:
    entries = [Entry.user(CLEARED_TOOL_RESULT), Entry.user("now")]
    word = next(w for w in CLEARED_TOOL_RESULT.strip("[]").split() if len(w) > 3)
    assert not answer_recall(RecallRequest("query", word), context_of(entries, view=entries[1:])).found


def test_a_result_with_stray_blocks_and_a_shortened_text_without_a_store() -> None:
    capped = cap_text("line\n" * 5_000, 200, "tool-outputs/x")
    assert capped is not None
    entries = [Entry.user("go"), *call("a", "Bash", {"command": "seq"}, ["stray", {"type": "text", "text": capped.text}, {"type": "image", "source": {}}])]
    answer = answer_recall(RecallRequest("id", "a"), context_of(entries, view=entries))
    assert answer.found and GONE_NOTE in answer.text and "[image]" in answer.text


def test_path_and_command_answers_take_the_latest_call_with_a_result() -> None:
    entries = [
        Entry.user("go"),
        *call("r1", "Read", {"file_path": "/a.py"}, "first read"),
        *call("r2", "Read", {"file_path": "/a.py"}, "second read"),
        Entry.assistant([{"type": "tool_use", "id": "r3", "name": "Read", "input": {"file_path": "/a.py"}}]),
        *call("w1", "Write", {"file_path": "/a.py", "content": "x"}, "written"),
        *call("b1", "Bash", {"command": "make"}, "first make"),
        *call("b2", "Bash", {"command": "make"}, "second make"),
    ]
    context = context_of(entries, view=entries)
    assert answer_recall(RecallRequest("path", "/a.py"), context).tool_use_id == "r2"
    assert answer_recall(RecallRequest("command", "make"), context).tool_use_id == "b2"


def test_a_long_request_pages_on_by_the_latest_calls_id_cut_to_160() -> None:
    path = "/" + "p" * 170
    long_id = "r2" + "x" * 200
    output = "".join(f"{n}\n" for n in range(3_000))
    entries = [Entry.user("go"), *call("r1", "Read", {"file_path": path}, output), *call(long_id, "Read", {"file_path": path}, output)]
    context = RecallContext(entries=entries, view=entries, cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=400)
    text = answer_recall(RecallRequest("path", path), context).text
    assert f"recall id={long_id[:159]}… with start_line=" in text


def test_how_a_result_left_is_cut_to_160_characters() -> None:
    from unbounded.recall import receipts_in
    from unbounded.recall.receipts import microcompact_receipt_entry

    receipt = microcompact_receipt_entry({"tier": "t" * 300, "toolResults": [{"id": "a", "tool": "Bash"}], "tokens": 1}, timestamp="2025-06-01T12:00:00Z")
    entries = [Entry.user("go"), *call("a", "Bash", {"command": "ls"}, "out"), receipt]
    context = RecallContext(entries=entries, view=entries, cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=2_000, receipts=receipts_in(entries))
    described = f"cleared by microcompaction ({'t' * 300} tier) at 2025-06-01T12:00:00Z"
    assert f"; {described[:159]}…]" in answer_recall(RecallRequest("id", "a"), context).text


def test_an_answer_from_line_two_to_the_end_says_which_lines_it_holds() -> None:
    entries = [Entry.user("go"), *call("a", "Bash", {"command": "seq 3"}, "one\ntwo\nthree")]
    context = context_of(entries, view=entries)
    from_two = answer_recall(RecallRequest("id", "a", start_line=2), context).text
    assert from_two.endswith("\ntwo\nthree\n[lines 2-3 of 3]")
    whole = answer_recall(RecallRequest("id", "a"), context).text
    assert whole.endswith("\none\ntwo\nthree")


def test_a_long_command_pages_on_by_its_latest_runs_id() -> None:
    command = "make " + "target " * 30
    long_output = "\n".join(f"line {n}" for n in range(3_000))
    entries = [Entry.user("go"), *call("b1", "Bash", {"command": command}, long_output), *call("b2", "Bash", {"command": command}, long_output)]  # fmt: skip
    answer = answer_recall(RecallRequest("command", command), context_of(entries, view=entries))
    assert answer.tool_use_id == "b2" and "recall id=b2 with start_line=" in answer.text
