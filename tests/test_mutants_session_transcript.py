"""Rules of `session_transcript.py` that the mutation check found no test holding: how appended
entries are chained by parentUuid, what an empty or unencodable batch does, what
`discard_last_reply` takes out, the pending tool calls, the last reply's time, and that a
spilling transcript derives its view across a compaction (or a discarded reply) without reading
its spilled history back, while a compaction it cannot derive so reads as the whole history."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from unbounded.evaluation.replay_store import ReplayStore
from unbounded.model.entries import SYNTHETIC_MODEL, Entry, create_compact_boundary
from unbounded.model.spilled_entries import SpilledEntries
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import MemoryStore


def _reply(text: str, message_id: str, **kwargs: Any) -> Entry:
    return Entry.assistant([{"type": "text", "text": text}], message_id=message_id, **kwargs)


def _boundary(head: str | None, tail: str | None, anchor: str | None) -> Entry:
    segment = {"headUuid": head, "tailUuid": tail, "anchorUuid": anchor}
    return create_compact_boundary("auto", 100, preserved_segment=segment)


# -- appending ---------------------------------------------------------------------------------


def test_appended_entries_are_chained_to_the_one_before_unless_they_name_a_parent() -> None:
    first = Entry.user("first")
    transcript = SessionTranscript(MemoryStore(), [first], [])
    question = Entry.user("question")
    answer = _reply("answer", "m1")
    elsewhere = Entry.user("a reply to another record", parent_uuid="elsewhere")
    nameless = Entry.user("no uuid")
    del nameless.data["uuid"]
    after_nameless = Entry.user("after the nameless one")
    boundary = create_compact_boundary("auto", 100)
    summary = Entry.user("summary", is_compact_summary=True)
    transcript.append([question, answer, elsewhere, nameless, after_nameless, boundary, summary])
    parents = [
        e.parent_uuid
        for e in (question, answer, elsewhere, nameless, after_nameless, boundary, summary)
    ]
    assert parents == [
        first.uuid,
        question.uuid,
        "elsewhere",  # a parent it names is kept
        elsewhere.uuid,
        elsewhere.uuid,  # a record without a uuid is passed over
        None,  # a compact boundary starts a new chain (its logicalParentUuid says where)
        boundary.uuid,
    ]


class _RecordingStore(MemoryStore):
    """A store that remembers each batch it was asked to append."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[Entry]] = []

    def append(self, entries: Sequence[Entry]) -> None:
        """Remember the batch, then keep its entries."""
        self.batches.append(list(entries))
        super().append(entries)


def test_an_empty_batch_never_reaches_the_store() -> None:
    store = _RecordingStore()
    transcript = SessionTranscript(store, [], [])
    transcript.append([])
    assert store.batches == []
    entry = Entry.user("hello")
    transcript.append([entry])
    assert store.batches == [[entry]]


def test_lone_surrogates_are_replaced_and_reported() -> None:
    transcript = SessionTranscript(MemoryStore(), [], [])
    entry = Entry.user("broken \ud800 text")
    transcript.append([entry])
    assert entry.content == "broken \ufffd text"
    assert transcript.entries == [entry]
    assert len(transcript.warnings) == 1
    assert "lone surrogates in 1 string(s) of a user message" in transcript.warnings[0]


def test_a_value_json_cannot_hold_is_refused_and_the_entry_left_as_it_was() -> None:
    store = _RecordingStore()
    transcript = SessionTranscript(store, [], [])
    entry = Entry.user("hello", extra={"tags": {"a set"}})
    before = dict(entry.data)
    with pytest.raises(TypeError):
        transcript.append([entry])
    assert entry.data == before
    assert transcript.entries == []
    assert transcript.warnings == []
    assert store.batches == []


# -- discard_last_reply ------------------------------------------------------------------------


def test_a_reply_that_is_the_first_entry_can_be_discarded() -> None:
    reply = _reply("hello", "m1")
    transcript = SessionTranscript(MemoryStore(), [reply], [])
    assert transcript.discard_last_reply() == [reply]
    assert list(transcript.entries) == []
    assert transcript.view == []
    assert transcript.messages == []


def test_discarding_takes_the_lines_of_the_last_response_only() -> None:
    question = Entry.user("question")
    earlier = _reply("an earlier response", "m1")
    thinking = Entry.assistant(
        [{"type": "thinking", "thinking": "hmm", "signature": "s"}], message_id="m2"
    )
    text = _reply("the last response", "m2")
    transcript = SessionTranscript(MemoryStore(), [question, earlier, thinking, text], [])
    assert transcript.discard_last_reply() == [thinking, text]
    assert list(transcript.entries) == [question, earlier]
    assert transcript.view == [question, earlier]


def test_nothing_is_discarded_after_a_prompt_or_a_sub_agents_reply() -> None:
    question = Entry.user("question")
    answer = _reply("answer", "m1")
    prompts = [Entry.user("one more thing"), Entry.user("and another")]
    transcript = SessionTranscript(MemoryStore(), [question, answer, *prompts], [])
    assert transcript.discard_last_reply() == []
    assert list(transcript.entries) == [question, answer, *prompts]
    sidechain = _reply("a sub-agent's reply", "m2", extra={"isSidechain": True})
    transcript = SessionTranscript(MemoryStore(), [question, answer, sidechain], [])
    assert transcript.discard_last_reply() == []
    assert list(transcript.entries) == [question, answer, sidechain]


# -- pending tool calls and the last reply's time -----------------------------------------------


def test_the_pending_tool_calls_are_the_last_responses_tool_uses() -> None:
    transcript = SessionTranscript(MemoryStore(), [Entry.user("run two things")], [])
    assert transcript.pending_tool_use_ids() == []
    calls: list[dict[str, Any]] = [
        {"type": "text", "text": "running them"},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pwd"}},
    ]
    transcript.append([Entry.assistant(calls, message_id="m1")])
    assert transcript.pending_tool_use_ids() == ["toolu_1", "toolu_2"]
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "b"},
    ]
    transcript.append([Entry.user(results)])
    assert transcript.pending_tool_use_ids() == []


def test_a_response_written_as_plain_text_has_no_pending_calls() -> None:
    reply = _reply("", "m1")
    reply.data["message"]["content"] = "plain text, as an older client wrote it"
    transcript = SessionTranscript(MemoryStore(), [Entry.user("hi"), reply], [])
    assert transcript.messages[-1]["content"] == "plain text, as an older client wrote it"
    assert transcript.pending_tool_use_ids() == []


def test_the_last_reply_time_passes_over_later_prompts_and_api_errors() -> None:
    transcript = SessionTranscript(
        MemoryStore(), [Entry.user("hi", timestamp="2026-02-01T09:00:00Z")], []
    )
    assert transcript.last_reply_time() is None
    transcript.append([_reply("hello", "m1", timestamp="2026-02-01T09:00:05Z")])
    error = _reply(
        "API Error: overloaded", "m2", model=SYNTHETIC_MODEL, timestamp="2026-02-01T09:01:00Z"
    )
    error.data["isApiErrorMessage"] = True
    transcript.append([Entry.user("again", timestamp="2026-02-01T09:00:30Z"), error])
    time = transcript.last_reply_time()
    assert time is not None
    assert time.isoformat() == "2026-02-01T09:00:05+00:00"


# -- spilling --------------------------------------------------------------------------------


def test_spilling_twice_keeps_one_spill_and_close_deletes_it() -> None:
    history = [Entry.user("old"), _reply("old", "m0"), create_compact_boundary("auto", 10)]
    transcript = SessionTranscript(MemoryStore(), history, [])
    transcript.spill_history()
    spilled = transcript.entries
    assert isinstance(spilled, SpilledEntries)
    transcript.spill_history()
    assert transcript.entries is spilled
    transcript.close()
    assert spilled.closed


@pytest.mark.parametrize("stretches", [False, True])
def test_a_spilling_transcript_spills_up_to_a_boundary_appended_last(stretches: bool) -> None:
    transcript = SessionTranscript(MemoryStore(), [], [])
    if stretches:
        transcript.keep_stretches()
    transcript.spill_history()
    transcript.append([Entry.user("question"), _reply("answer", "m1")])
    boundary = create_compact_boundary("auto", 100)
    transcript.append([boundary])  # its summary is appended apart
    entries = transcript.entries
    assert isinstance(entries, SpilledEntries)
    assert entries.live == [boundary]
    assert entries.spilled == 2


def _turns(transcript: SessionTranscript, first: int, count: int) -> None:
    for number in range(first, first + count):
        transcript.append(
            [Entry.user(f"question {number}"), _reply(f"answer {number}", f"m{number}")]
        )


def _spilled_session() -> SessionTranscript:
    """A spilling transcript past one full compaction, holding none of its entries elsewhere
    (spilled entries nobody holds are read back from disk; a replay's store keeps none)."""
    transcript = SessionTranscript(ReplayStore(), [], [])
    transcript.spill_history()
    _turns(transcript, 0, 5)
    transcript.append(
        [create_compact_boundary("auto", 100), Entry.user("summary 1", is_compact_summary=True)]
    )
    _turns(transcript, 5, 3)
    return transcript


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each read of a spill file from now on (its size)."""
    reads: list[int] = []
    original = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        reads.append(length)
        return original(fd, length, offset)

    monkeypatch.setattr(os, "pread", counting)
    return reads


def _whole(transcript: SessionTranscript) -> SessionTranscript:
    """The same history in a transcript that never spilled (its view derived from all of it)."""
    return SessionTranscript(MemoryStore(), [Entry(dict(e.data)) for e in transcript.entries], [])


def _partial_compaction(
    transcript: SessionTranscript, keep: Callable[[list[Entry]], list[Entry]]
) -> None:
    messages = [e for e in transcript.view if e.type in ("user", "assistant")]
    kept = keep(messages)
    summary = Entry.user("summary 2", is_compact_summary=True)
    transcript.append([_boundary(kept[0].uuid, kept[-1].uuid, summary.uuid), summary])


def test_a_partial_compaction_and_a_discarded_reply_read_nothing_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transcript = _spilled_session()
    gc.collect()
    reads = _count_reads(monkeypatch)
    _partial_compaction(transcript, lambda messages: messages[-2:])  # the last question and answer
    transcript.append([_reply("after the compaction", "m-late")])
    transcript.discard_last_reply()
    assert reads == []
    assert [e.content for e in transcript.view[1:]] == [
        "summary 2",
        "question 7",
        [{"type": "text", "text": "answer 7"}],
    ]
    whole = _whole(transcript)
    assert [e.data for e in transcript.view] == [e.data for e in whole.view]
    assert transcript.messages == whole.messages


def test_keeping_the_previous_summary_alone_reads_nothing_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The summary is followed in the view by kept messages that are not in memory: the kept
    run is the summary alone."""
    transcript = _spilled_session()
    _partial_compaction(transcript, lambda messages: messages[-2:])
    _turns(transcript, 8, 2)
    gc.collect()
    reads = _count_reads(monkeypatch)
    summary = transcript.view[1]
    assert summary.content == "summary 2"
    assert transcript.view[2].content == "question 7"  # a kept message, spilled since
    anchor = Entry.user("summary 3", is_compact_summary=True)
    transcript.append([_boundary(summary.uuid, summary.uuid, anchor.uuid), anchor])
    assert reads == []
    assert [e.content for e in transcript.view[1:]] == ["summary 3", "summary 2"]
    whole = _whole(transcript)
    assert [e.data for e in transcript.view] == [e.data for e in whole.view]


def test_a_second_boundary_in_a_batch_keeps_messages_from_before_the_first() -> None:
    """The view the first boundary opens does not hold them: the history does."""
    transcript = _spilled_session()
    kept = [e for e in transcript.view if e.type in ("user", "assistant")][-2:]
    summary = Entry.user("summary 3", is_compact_summary=True)
    transcript.append(
        [
            create_compact_boundary("auto", 100),
            Entry.user("summary 2", is_compact_summary=True),
            _boundary(kept[0].uuid, kept[-1].uuid, summary.uuid),
            summary,
        ]
    )
    assert [e.content for e in transcript.view[1:]] == [
        "summary 3",
        "question 7",
        [{"type": "text", "text": "answer 7"}],
    ]
    whole = _whole(transcript)
    assert [e.data for e in transcript.view] == [e.data for e in whole.view]


@pytest.mark.parametrize("segment", ["unknown head", "unknown tail", "tail before head"])
def test_a_kept_segment_the_history_does_not_hold_keeps_nothing(segment: str) -> None:
    transcript = _spilled_session()
    messages = [e for e in transcript.view if e.type in ("user", "assistant")]
    head, tail = messages[-4].uuid, messages[-1].uuid
    if segment == "unknown head":
        head = "nowhere"
    elif segment == "unknown tail":
        tail = "nowhere"
    else:
        head, tail = tail, head
    summary = Entry.user("summary 2", is_compact_summary=True)
    transcript.append([_boundary(head, tail, summary.uuid), summary])
    assert [e.content for e in transcript.view[1:]] == ["summary 2"]
    whole = _whole(transcript)
    assert [e.data for e in transcript.view] == [e.data for e in whole.view]
