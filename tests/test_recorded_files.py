"""Files as the transcript last showed them, rehydration from the transcript, the use gate,
known system tokens, and early compactions that are refused before anything is announced."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import timedelta
from typing import Any

import pytest

from test_cost_policy import CONFIG, Clock, memory_session, run_turns
from unbounded.compaction.glue import rehydrator_for
from unbounded.compaction.recorded_files import RecordedFile, recorded_files, strip_line_numbers
from unbounded.compaction.rehydrate import WorkingState, rehydrate, working_state_from_entries
from unbounded.errors import ConfigError
from unbounded.events import (
    CompactionFinished,
    EarlyCompaction,
    Event,
    SessionMemoryCompactionSkipped,
)
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

_moments = itertools.count()


def _tool(call_id: str, name: str, **tool_input: Any) -> Entry:
    second = next(_moments)
    return Entry.assistant(
        [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}],
        timestamp=f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z",
    )


def _answer(call_id: str, text: str, *, error: bool = False) -> Entry:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if error:
        block["is_error"] = True
    return Entry.user([block])


def _numbered(text: str, sep: str = "→") -> str:
    return "\n".join(f"{i:6d}{sep}{line}" for i, line in enumerate(text.split("\n"), 1))


def test_line_numbers_and_reminders_come_off_only_when_every_line_has_one() -> None:
    assert strip_line_numbers(_numbered("a = 1\nb = 2")) == "a = 1\nb = 2"
    assert strip_line_numbers(_numbered("x\n\ty", sep="\t")) == "x\n\ty"
    reminder = "\n<system-reminder>Whenever you read a file…</system-reminder>\n"
    assert strip_line_numbers(_numbered("a = 1") + reminder) == "a = 1"
    # a file whose own lines start with numbers is left as it is
    assert strip_line_numbers("10 apples\nno number here") == "10 apples\nno number here"


def test_reads_writes_and_edits_replay_in_order() -> None:
    entries = [
        _tool("r1", "Read", file_path="/p/a.py"),
        _answer("r1", _numbered("def f():\n    return 1\n")),
        _tool("e1", "Edit", file_path="/p/a.py", old_string="return 1", new_string="return 2"),
        _answer("e1", "The file /p/a.py has been updated."),
        _tool("m1", "MultiEdit", file_path="/p/a.py", edits=[
            {"old_string": "def f", "new_string": "def g"},
            {"old_string": "2", "new_string": "3"},
        ]),
        _answer("m1", "Applied 2 edits"),
        _tool("w1", "Write", file_path="/p/b.py", content="B = 1\n"),
        _answer("w1", "File created"),
        _tool("w2", "Write", file_path="/p/b.py", content="B = 2\n"),
        _answer("w2", "permission denied", error=True),  # a failed call changes nothing
        _tool("s1", "str_replace_based_edit_tool", command="create", path="/p/c.py", file_text="C\n"),
        _answer("s1", "created"),
    ]
    files = recorded_files(entries)
    assert files["/p/a.py"] == RecordedFile("def g():\n    return 3\n")
    assert files["/p/b.py"] == RecordedFile("B = 1\n")
    assert files["/p/c.py"] == RecordedFile("C\n")


def test_what_cannot_be_replayed_is_unknown_never_stale() -> None:
    entries = [
        _tool("r1", "Read", file_path="/p/a.py"),
        _answer("r1", "alpha\nbeta\n"),
        _tool("e1", "Edit", file_path="/p/a.py", old_string="gamma", new_string="delta"),
        _answer("e1", "updated"),  # the old string is not in the recorded text
        _tool("r2", "Read", file_path="/p/part.py", offset=100, limit=20),
        _answer("r2", "line 100\n"),
        _tool("e2", "Edit", file_path="/p/part.py", old_string="line 100", new_string="x"),
        _answer("e2", "updated"),  # an edit on a partial read cannot give the whole file
        _tool("e3", "Edit", file_path="/p/never_read.py", old_string="a", new_string="b"),
        _answer("e3", "updated"),
    ]
    files = recorded_files(entries)
    assert files["/p/a.py"].text is None
    assert files["/p/part.py"].text is None
    assert files["/p/never_read.py"].text is None


def test_a_ranged_read_is_partial_and_a_stub_keeps_the_earlier_text() -> None:
    entries = [
        _tool("r1", "Read", file_path="/p/a.py"),
        _answer("r1", "full text\n"),
        _tool("r2", "Read", file_path="/p/a.py"),
        _answer("r2", "File unchanged since last read. The content from the earlier Read …"),
        _tool("r3", "Read", file_path="/p/b.py", offset=5),
        _answer("r3", "from line 5\n"),
    ]
    files = recorded_files(entries)
    assert files["/p/a.py"] == RecordedFile("full text\n")
    assert files["/p/b.py"] == RecordedFile("from line 5\n", partial=True)


def test_a_ranged_read_of_a_known_file_keeps_its_whole_text_for_later_edits() -> None:
    whole = "one\ntwo\nthree\nfour\n"
    entries = [
        _tool("r1", "Read", file_path="/p/t.html"),
        _answer("r1", _numbered(whole)),
        _tool("e1", "Edit", file_path="/p/t.html", old_string="two", new_string="TWO"),
        _answer("e1", "The file /p/t.html has been updated."),
        # the agent looks again at two lines of it: they agree with the text replayed so far
        _tool("r2", "Read", file_path="/p/t.html", offset=2, limit=2),
        _answer("r2", "     2→TWO\n     3→three"),
        _tool("e2", "Edit", file_path="/p/t.html", old_string="three", new_string="THREE"),
        _answer("e2", "The file /p/t.html has been updated."),
    ]
    assert recorded_files(entries)["/p/t.html"] == RecordedFile("one\nTWO\nTHREE\nfour\n")


def test_a_ranged_read_that_disagrees_with_the_known_text_is_partial() -> None:
    whole = "one\ntwo\nthree\nfour\n"
    read_whole = [_tool("r1", "Read", file_path="/p/t.py"), _answer("r1", _numbered(whole))]
    # the lines changed outside the transcript's view: what was shown is all that is known
    changed = [
        *read_whole,
        _tool("r2", "Read", file_path="/p/t.py", offset=2, limit=2),
        _answer("r2", "     2→zwei\n     3→three"),
    ]
    assert recorded_files(changed)["/p/t.py"] == RecordedFile("zwei\nthree", partial=True)
    # the same lines, shown at other line numbers: the file moved under them
    moved = [
        *read_whole,
        _tool("r2", "Read", file_path="/p/t.py", offset=3, limit=2),
        _answer("r2", "     3→two\n     4→three"),
    ]
    assert recorded_files(moved)["/p/t.py"] == RecordedFile("two\nthree", partial=True)
    # agreeing lines keep the whole text, from the first line too
    first = [
        *read_whole,
        _tool("r2", "Read", file_path="/p/t.py", limit=1),
        _answer("r2", "     1→one"),
    ]
    assert recorded_files(first)["/p/t.py"] == RecordedFile(whole)


def _shell_read(call_id: str, command: str, output: str) -> list[Entry]:
    use = Entry.assistant(
        [{"type": "tool_use", "id": call_id, "name": "shell", "input": {"command": command}}]
    )
    envelope = json.dumps({"output": output, "metadata": {"exit_code": 0}})
    return [use, Entry.user([{"type": "tool_result", "tool_use_id": call_id, "content": envelope}])]


def test_a_shell_range_read_of_a_known_file_keeps_its_whole_text() -> None:
    whole = "a = 1\nb = 2\nc = 3\n"
    known = _shell_read("s1", "cat m.py", whole)
    agreeing = [*known, *_shell_read("s2", "sed -n '2,3p' m.py", "b = 2\nc = 3\n")]
    assert recorded_files(agreeing)["m.py"] == RecordedFile(whole)
    other = [*known, *_shell_read("s2", "sed -n '2,3p' m.py", "b = 5\nc = 3\n")]
    assert recorded_files(other)["m.py"] == RecordedFile("b = 5\nc = 3\n", partial=True)
    # with nothing known before, a range is partial
    alone = _shell_read("s2", "sed -n '2,3p' m.py", "b = 2\nc = 3\n")
    assert recorded_files(alone)["m.py"] == RecordedFile("b = 2\nc = 3\n", partial=True)


def test_a_range_read_without_line_numbers_agrees_only_where_its_call_starts() -> None:
    whole = "one\ntwo\nthree\n"
    known = [_tool("r1", "Read", file_path="/p/t.py"), _answer("r1", whole)]
    # a read tool that prints no numbers: the call's offset says where the lines are
    at_two = [*known, _tool("r2", "Read", file_path="/p/t.py", offset=2), _answer("r2", "two")]
    assert recorded_files(at_two)["/p/t.py"] == RecordedFile(whole)
    at_one = [*known, _tool("r2", "Read", file_path="/p/t.py", offset=1), _answer("r2", "two")]
    assert recorded_files(at_one)["/p/t.py"] == RecordedFile("two", partial=True)
    # `tail` says nothing of where its lines start: what it shows is all that is known
    tail = [*_shell_read("s1", "cat m.py", whole), *_shell_read("s2", "tail -n 2 m.py", "one\ntwo\n")]
    assert recorded_files(tail)["m.py"] == RecordedFile("one\ntwo\n", partial=True)
    # `head` starts at the first line
    head = [*_shell_read("s1", "cat m.py", whole), *_shell_read("s2", "head -n 2 m.py", "one\ntwo\n")]
    assert recorded_files(head)["m.py"] == RecordedFile(whole)


def test_transcript_rehydration_restores_files_no_disk_holds() -> None:
    entries = [
        _tool("r1", "Read", file_path="/nowhere/on/this/disk/a.py"),
        _answer("r1", _numbered("A = 1")),
        _tool("e1", "Edit", file_path="/nowhere/on/this/disk/a.py", old_string="1", new_string="2"),
        _answer("e1", "updated"),
        _tool("r2", "Read", file_path="/nowhere/on/this/disk/lost.py"),
        _answer("r2", "L\n"),
        _tool("e2", "Edit", file_path="/nowhere/on/this/disk/lost.py", old_string="zz", new_string="y"),
        _answer("e2", "updated"),
    ]
    attachments, _ = rehydrator_for(entries, source="transcript")([])
    files = {a["filename"]: a["content"] for a in attachments if a["type"] == "file"}
    assert files == {"/nowhere/on/this/disk/a.py": "A = 2"}
    # from the disk the same files are outside every root (and absent)
    from_disk, skips = rehydrator_for(entries, source="disk")([])
    assert not [a for a in from_disk if a["type"] == "file"] and skips


def test_the_use_gate_keeps_used_modified_and_newest_files(tmp_path: Any) -> None:
    paths = {}
    for name in ("looked", "reread", "edited", "newest"):
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(f"{name}\n", encoding="utf-8")
    state = WorkingState()
    state.record_read(str(paths["looked"]), 1.0)
    state.record_read(str(paths["reread"]), 2.0)
    state.record_read(str(paths["reread"]), 3.0)
    state.record_read(str(paths["edited"]), 4.0, write=True)
    state.record_read(str(paths["newest"]), 5.0)
    assert state.files_read[str(paths["reread"])].uses == 2
    assert state.files_read[str(paths["edited"])].modified

    gated = rehydrate(state, allowed_roots=[tmp_path], policy=Policy(rehydrate_min_uses=2))
    restored = [a["filename"] for a in gated.attachments if a["type"] == "file"]
    assert restored == [str(paths[n]) for n in ("newest", "edited", "reread")]
    assert "under rehydrate_min_uses (2)" in gated.skipped_reasons()[str(paths["looked"])]
    everything = rehydrate(state, allowed_roots=[tmp_path], policy=Policy(rehydrate_min_uses=1))
    assert len([a for a in everything.attachments if a["type"] == "file"]) == 4


def test_working_state_counts_uses_and_writes() -> None:
    entries = [
        _tool("r1", "Read", file_path="/p/a.py"),
        _answer("r1", "a"),
        _tool("r2", "Read", file_path="/p/a.py"),
        _answer("r2", "File unchanged since last read."),  # a stub is not a new use
        _tool("w1", "Write", file_path="/p/b.py", content="b"),
        _answer("w1", "ok"),
    ]
    state = working_state_from_entries(entries)
    assert state.files_read["/p/a.py"].uses == 2  # the call itself counts, the stub does not add
    assert state.files_read["/p/a.py"].unchanged_stub and not state.files_read["/p/a.py"].modified
    assert state.files_read["/p/b.py"].modified


def test_known_system_tokens_are_counted_exactly() -> None:
    config = SessionConfig(
        model="claude-sonnet-4-5", system="You are a coding agent." * 50, context_window=100_000,
        system_tokens=4_321,
    )
    session = Session(config)
    assert session.estimate_request_tokens([]) == 4_321
    session.add_user("hello " * 400)
    session.record({"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 4_321 + 1_000, "output_tokens": 5}})
    assert session.estimate_request_tokens([]) == 4_321  # calibration scales the messages only


def test_wrong_rehydrate_source_and_saving_fail_at_construction() -> None:
    with pytest.raises(ConfigError, match="rehydrate_from"):
        Session(CONFIG, rehydrate_from="network")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cold_cache_compact_min_saving"):
        Policy(cold_cache_compact_min_saving=1.5)


def test_a_refused_early_compaction_announces_nothing() -> None:
    events: list[Event] = []
    clock = Clock()
    # no early compaction can free 99 % of the context: each one is refused
    session = memory_session(Policy(early_compact_min_saving=0.99), clock, events)
    run_turns(session, clock, 30)
    assert not [e for e in events if isinstance(e, EarlyCompaction)]
    refusals = [
        e for e in events
        if isinstance(e, SessionMemoryCompactionSkipped)
        and "before the threshold" in e.reason
    ]
    assert refusals
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert len(finished) == session.status().compactions


def test_a_cold_cache_compaction_needs_only_the_smaller_saving() -> None:
    def cold_compactions(saving: float) -> int:
        events: list[Event] = []
        clock = Clock()
        policy = Policy(early_compact_fraction=1.0, cold_cache_compact_min_saving=saving)
        session = memory_session(policy, clock, events)
        run_turns(session, clock, 14)
        clock.now += timedelta(minutes=12)  # the 5-minute cache expired
        session.add_user("back again")
        asyncio.run(session.prepare())
        return len([e for e in events if isinstance(e, EarlyCompaction) and e.reason == "cold_cache"])

    assert cold_compactions(0.05) == 1
    assert cold_compactions(0.99) == 0


def test_a_prefix_over_the_threshold_is_refused_only_when_the_session_compacts() -> None:
    config = SessionConfig(model="claude-sonnet-4-6", context_window=200_000, system_tokens=180_000)
    with pytest.raises(ConfigError, match="no compaction can make room"):
        Session(config)
    session = Session(config, policy=Policy(auto_compact_enabled=False))
    assert session.estimate_request_tokens([]) == 180_000


def test_appended_since_reads_only_what_was_added_at_the_end() -> None:
    from unbounded.compaction.recorded_files import AppendedSince
    from unbounded.model.entries import Entry

    def entry(n: int) -> Entry:
        return Entry({"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": str(n)}})

    since = AppendedSince()
    entries = [entry(0), entry(1)]
    assert since.start(entries) is None  # a first read: from scratch
    entries.append(entry(2))
    assert since.start(entries) == 2  # grown at its end: only the new entry
    assert since.start(entries) == 3  # nothing new
    entries[-1] = entry(9)
    assert since.start(entries) is None  # its last seen entry replaced: start over
    del entries[-1]
    assert since.start(entries) is None  # shrunk: start over
    assert since.start(list(entries)) is None  # another list, even with the same entries
