"""What a long replay holds per call on our side (issue 29): the recall index keeps positions,
not a call's input or time; the replay's event log lets a turn's events go once read; the
report keeps one line per receipt, not the tool results it lists. And recall still answers
from the first call of a run whose history went to disk."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import orjson
from recorded_calls import long_tool_session

from unbounded.evaluation.receipt_lines import HANDLES_SHOWN, ReceiptLine
from unbounded.evaluation.refetch import _CallLookup
from unbounded.evaluation.replay import ReplayOptions, _EventLog, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.replay_store import ReplayStore
from unbounded.events import ContextWarning
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.spilled_entries import SpilledEntries
from unbounded.policy import Policy
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.receipts import Receipt
from unbounded.session_transcript import SessionTranscript

STAMP = "2026-02-01T09:00:00.000Z"


def _spilled_run(calls: int) -> SessionTranscript:
    """`calls` tool calls, each with a distinct input, then a compaction: all on disk."""
    transcript = SessionTranscript(ReplayStore(), [], [])
    transcript.spill_history()
    for n in range(calls):
        use = {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": "Read",
            "input": {"file_path": f"/w/{n}.py", "offset": n, "limit": 40},
        }
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"body {n}"}
        reply = Entry.assistant([{"type": "text", "text": "reading"}, use], message_id=f"m{n}")
        reply.data["timestamp"] = STAMP
        transcript.append([reply, Entry.user([result])])
    transcript.append([create_compact_boundary("auto", 100), Entry.user("summary")])
    return transcript


def test_the_index_holds_no_input_or_timestamp_of_a_call_it_reads_back() -> None:
    transcript = _spilled_run(50)
    entries = transcript.entries
    assert isinstance(entries, SpilledEntries) and entries.spilled == 100
    index = TranscriptIndex().update(entries)
    gc.collect()
    for call in index.calls.values():
        held = gc.get_referents(call)
        assert not any(isinstance(value, dict) for value in held)  # no input dict
        assert STAMP not in held  # no timestamp string
    first = index.calls["toolu_0"]
    # Read back from the spilled entry when asked, from its own block (the second).
    assert first.input == {"file_path": "/w/0.py", "offset": 0, "limit": 40}
    assert first.time == STAMP
    assert first.use_block == 1
    assert index.calls["toolu_49"].input["offset"] == 49
    assert [call.number for call in index.calls.values()] == list(range(50))


def test_the_event_log_hands_each_turn_its_events_once_and_keeps_none() -> None:
    log = _EventLog()
    first = ContextWarning(level="warning", tokens=10, percent_left=20)
    second = ContextWarning(level="error", tokens=20, percent_left=5)
    log(first)
    log(first)  # a cache break reaches the sink twice: kept once
    log(second)
    assert log.take() == [first, second]
    assert log.events == []  # nothing kept after the turn read them
    log(second)  # the same event again after a take is not a new one
    assert log.take() == []


def test_a_receipt_line_counts_what_it_does_not_name() -> None:
    results = tuple({"id": f"toolu_{n}", "tool": "Read" if n % 3 else "Bash"} for n in range(10))
    files = tuple(f"/w/{n}.py" for n in range(7))
    receipt = Receipt(
        kind="compaction",
        uuid="u1",
        time=STAMP,
        trigger="auto",
        tokens=5_000,
        tool_results=results,
        files=files,
        messages=12,
        covered={
            "by": "extractive",
            "summaryTokens": 900,
            "filesMentioned": ["/w/1.py"],
            "filesNotMentioned": ["/w/2.py", "/w/3.py"],
        },
    )
    line = ReceiptLine.of(7, receipt)
    assert line.call == 7
    assert line.tools == (("Bash", 4), ("Read", 6))
    assert line.tool_results == 10
    assert line.files == files[:HANDLES_SHOWN] and line.file_count == 7
    assert line.last_ids == ("toolu_6", "toolu_7", "toolu_8", "toolu_9")
    assert (line.covered_by, line.summary_tokens) == ("extractive", 900)
    assert (line.files_named, line.files_not_named) == (1, 2)


def _long_replay(calls: int) -> _Replayer:
    recording = ReplayRecording.of(
        long_tool_session(
            calls,
            result=lambda n: f"def handler_{n}(request):\n    return route(request, {n})\n" * 60,
            written=2_000,
        )
    )
    policy = Policy.from_env().with_changes(background_summary=False)
    options = ReplayOptions(baselines=False, session_memory=False, policy=policy, window=60_000)
    return _Replayer(recording, options)


def test_recall_answers_from_the_first_call_after_a_long_spilled_run() -> None:
    replayer = _long_replay(240)
    asyncio.run(replayer._run(None))  # the run without closing: the session is asked after
    session = replayer.session
    try:
        assert replayer.log.events == []  # every turn's events were taken and let go
        entries = session.entries
        assert isinstance(entries, SpilledEntries)
        assert len(replayer.records) >= 4  # compacted again and again
        first = session.recall_index.get("toolu_000000")
        assert first is not None and first.result_position is not None
        assert first.result_position < entries.spilled  # its result is on disk
        use: dict[str, Any] = {
            "type": "tool_use",
            "id": "toolu_recall",
            "name": "recall",
            "input": {"id": "toolu_000000"},
        }
        answer = session.run_recall(use)
        text = str(answer["content"])
        assert not answer.get("is_error")
        assert "Read: /a/0.py" in text and "def handler_0(request):" in text
        assert first.time is not None and first.time in text  # read back from the spilled entry
        # The run's receipts are lines: none holds the tool results its receipt listed.
        assert replayer.receipts
        assert all(isinstance(line, ReceiptLine) for line in replayer.receipts)
        assert all(len(line.last_ids) <= HANDLES_SHOWN for line in replayer.receipts)
    finally:
        session.close()


def test_calls_naming_one_file_or_command_share_its_string() -> None:
    uses = [
        {"type": "tool_use", "id": f"t{n}", "name": name, "input": tool_input}
        for n, (name, tool_input) in enumerate(
            [("Read", {"file_path": "/w/app.py"}), ("Bash", {"command": "pytest -q"})] * 2
        )
    ]
    # Each entry decoded from its own JSON: equal strings, separate objects, as read from a file.
    entries = [Entry(orjson.loads(orjson.dumps(Entry.assistant([use]).data))) for use in uses]
    index = TranscriptIndex().update(entries)
    first_read, first_run, second_read, second_run = index.calls.values()
    assert first_read.read_path == "/w/app.py" and first_run.command == "pytest -q"
    assert second_read.read_path is first_read.read_path
    assert second_run.command is first_run.command


def test_reads_with_the_same_arguments_share_one_dict_in_the_refetch_lookup() -> None:
    inputs = [
        {"file_path": "/w/a.py", "offset": 10},
        {"file_path": "/w/b.py", "offset": 10},
        {"file_path": "/w/c.py", "offset": 20},
    ]
    uses = [
        {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": tool_input}
        for n, tool_input in enumerate(inputs)
    ]
    entries = [Entry(orjson.loads(orjson.dumps(Entry.assistant([use]).data))) for use in uses]
    lookup = _CallLookup()
    lookup.sync(TranscriptIndex().update(entries))
    first, second, third = (lookup.read_arguments[n] for n in range(3))
    assert first == {"offset": 10} and third == {"offset": 20}
    assert second is first
    assert third is not first
