"""A transcript that keeps its entries before the last compaction boundary on disk
(model/spilled_entries.py, `SessionTranscript.spill_history`): what it holds in memory, and
that everything read through it (entries, view, messages, stretches, recall) is what the
transcript that keeps everything gives."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import weakref
from typing import IO

import orjson
import pytest
from forking import runtime_error_in_a_fork
from hypothesis import given, settings
from hypothesis import strategies as st
from recorded_calls import long_tool_session

from unbounded.compaction.glue import RootsReader
from unbounded.compaction.recorded_files import AppendedSince
from unbounded.evaluation.replay import ReplayOptions, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.replay_store import ReplayStore
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.model.spilled_entries import SpilledEntries, entry_in_place
from unbounded.policy import Policy
from unbounded.recall.index import TranscriptIndex
from unbounded.session_transcript import SessionTranscript


def _entries(count: int) -> list[Entry]:
    out = [Entry.user(f"prompt {n}") for n in range(count)]
    for line, entry in enumerate(out, start=1):
        entry.line = line if line % 2 else None
    return out


def test_spilled_positions_read_back_equal_entries_with_their_lines() -> None:
    original = _entries(6)
    spilled = SpilledEntries(original)
    spilled.spill_before(4)
    assert spilled.spilled == 4
    assert len(spilled.live) == 2
    assert len(spilled) == 6
    assert list(spilled) == original
    assert [e.line for e in spilled] == [e.line for e in original]
    assert spilled[-1] is original[-1]
    assert spilled[1:5] == original[1:5]
    assert spilled[::-2] == original[::-2]
    with pytest.raises(IndexError, match="entry 6 out of range"):
        spilled[6]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 entries take no weakrefs")
def test_a_spilled_entry_still_held_comes_back_as_the_same_object() -> None:
    original = _entries(3)
    kept = original[1]
    spilled = SpilledEntries(original)
    spilled.spill_before(3)
    del original
    gc.collect()
    assert spilled[1] is kept  # a reader's `entries[k] is last` still holds
    gone = weakref.ref(spilled[0])
    gc.collect()
    assert gone() is None  # nothing held it: the spill alone keeps position 0
    assert spilled[0] == Entry({**spilled[0].data})


def test_spilling_again_only_moves_what_is_not_on_disk_yet() -> None:
    original = _entries(5)
    spilled = SpilledEntries(original[:2])
    spilled.spill_before(2)
    spilled.extend(original[2:])
    spilled.spill_before(4)
    spilled.spill_before(1)  # already on disk: nothing moves
    assert (spilled.spilled, len(spilled.live)) == (4, 1)
    assert list(spilled) == original


def test_removing_a_tail_that_reaches_into_the_spill_forgets_those_records() -> None:
    original = _entries(6)
    spilled = SpilledEntries(original)
    spilled.spill_before(4)
    del spilled[5:]
    assert (spilled.spilled, len(spilled)) == (4, 5)
    del spilled[2:]
    assert (spilled.spilled, len(spilled)) == (2, 2)
    spilled.append(original[5])
    spilled.spill_before(3)
    assert list(spilled) == [*original[:2], original[5]]
    with pytest.raises(ValueError, match="only a tail"):
        del spilled[0:1]


def _no_weak_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Python 3.10: entries take no weak references, so no spilled entry is held."""
    monkeypatch.setattr(SpilledEntries, "_hold", lambda *_: None)


def test_a_mark_spilled_under_a_reader_is_still_in_place_without_weak_references(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_weak_hold(monkeypatch)
    original = _entries(4)
    spilled = SpilledEntries(original)
    spilled.spill_before(4)
    assert spilled[3] is not original[3]  # read back as a new object
    assert entry_in_place(spilled, 3, original[3])
    assert not entry_in_place(spilled, 2, original[3])  # another entry at that position
    assert not entry_in_place(spilled, 3, None)
    # A plain list, or a live position, keeps the identity rule: an equal entry is not the one
    # marked (a live entry may be replaced).
    assert not entry_in_place(original, 3, Entry({**original[3].data}))
    spilled.append(Entry.user("live"))
    assert not entry_in_place(spilled, 4, Entry({**spilled[4].data}))


@pytest.mark.parametrize("weak_hold", [True, False], ids=["weakref", "python-3.10"])
def test_the_incremental_readers_do_not_start_over_when_their_mark_is_spilled(
    monkeypatch: pytest.MonkeyPatch, weak_hold: bool
) -> None:
    if not weak_hold:
        _no_weak_hold(monkeypatch)
    original = _entries(3)
    for n, entry in enumerate(original):
        entry.data["cwd"] = f"/work/{n}"
    spilled = SpilledEntries(original)
    since, roots, index = AppendedSince(), RootsReader(), TranscriptIndex()
    since.start(spilled)
    roots.read(spilled)
    index.update(spilled)
    spilled.spill_before(3)  # every mark is now on disk
    del original
    gc.collect()
    scanned: list[int] = []
    monkeypatch.setattr(TranscriptIndex, "_scan", lambda _, __, at: scanned.append(at))
    later = Entry.user("later")
    later.data["cwd"] = "/work/later"
    spilled.append(later)
    assert since.start(spilled) == 3
    assert roots.read(spilled) == ["/work/0", "/work/1", "/work/2", "/work/later"]
    index.update(spilled)
    assert scanned == [3]  # only the new entry, not the spill again


def test_a_closed_spill_says_so_when_read_or_spilled() -> None:
    spilled = SpilledEntries(_entries(4))
    spilled.spill_before(2)
    spilled.close()
    assert spilled.closed
    spilled.close()  # twice is fine
    assert spilled[3] == spilled.live[-1]  # the live entries stay readable
    with pytest.raises(ValueError, match=r"spilled entries were closed .*before closing"):
        spilled[0]
    with pytest.raises(ValueError, match="spilled entries were closed"):
        spilled.spill_before(4)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_fork_can_neither_read_nor_add_to_the_spill_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After fork() both processes would write records at the same offset of the shared
    file: the fork is refused, and the parent reads back what it spilled."""
    _no_weak_hold(monkeypatch)  # every read of a spilled position goes to the file
    original = _entries(4)
    spilled = SpilledEntries(original)
    spilled.spill_before(2)
    assert runtime_error_in_a_fork(lambda: spilled[3]) == ""  # in memory: no file read
    assert "(a fork) cannot read" in runtime_error_in_a_fork(lambda: spilled[0])
    assert "opened by process" in runtime_error_in_a_fork(lambda: spilled.spill_before(4))
    spilled.spill_before(4)
    assert list(spilled) == original


def test_removing_one_entry_by_position_gives_the_tail_only_error() -> None:
    spilled = SpilledEntries(_entries(3))
    with pytest.raises(ValueError, match="only a tail"):
        del spilled[-1]
    assert len(spilled) == 3


def test_reads_and_spills_leave_the_file_position_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_weak_hold(monkeypatch)
    original = _entries(4)
    spilled = SpilledEntries(original)
    spilled.spill_before(2)
    handle = spilled._open()
    handle.seek(1)  # a position another thread would share, were reads to move it
    spilled.spill_before(4)
    assert list(spilled) == original
    assert handle.tell() == 1
    assert os.fstat(handle.fileno()).st_size == sum(len(orjson.dumps(e.data)) for e in original)


# -- the session's transcript in both modes ------------------------------------------------


def _boundary(kept: list[Entry] | None, anchor: Entry) -> Entry:
    boundary = create_compact_boundary("auto", 100)
    if kept:
        boundary.compact_metadata["preservedSegment"] = {
            "headUuid": kept[0].uuid,
            "tailUuid": kept[-1].uuid,
            "anchorUuid": anchor.uuid,
        }
    return boundary


Step = tuple[str, int]


def _play(steps: list[Step], *, spill: bool) -> tuple[SessionTranscript, list[list[Entry]]]:
    """Drive a transcript through `steps`, the same entries built for both modes (uuids are
    taken from a counter, so two plays are equal)."""
    counter = iter(range(1_000_000))
    transcript = SessionTranscript(ReplayStore(), [], [])
    transcript.keep_stretches()
    if spill:
        transcript.spill_history()
    stretches: list[list[Entry]] = []

    def named(entry: Entry) -> Entry:
        entry.data["uuid"] = f"u{next(counter)}"
        entry.data["timestamp"] = "2026-02-01T09:00:00Z"
        return entry

    calls = 0
    for kind, size in steps:
        if kind == "turn":
            tool_id = f"toolu_{calls}"
            calls += 1
            use = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"ls {calls}"}}
            result = {"type": "tool_result", "tool_use_id": tool_id, "content": "x" * size}
            reply = named(Entry.assistant([use], message_id=f"msg_{calls}"))
            transcript.append([reply, named(Entry.user([result]))])
        elif kind == "reply":
            transcript.append([named(Entry.assistant([{"type": "text", "text": "ok"}], message_id=f"r{size}"))])
        elif kind == "discard":
            transcript.discard_last_reply()
        else:  # a compaction: keep the last `size` entries of the view (a partial one) or none
            view = [e for e in transcript.view if e.type in ("user", "assistant")]
            kept = view[len(view) - size :] if size and len(view) >= size else None
            summary = named(Entry.user("summary", is_compact_summary=True))
            if kind == "anchored":  # the kept messages follow a reply appended with the boundary
                reply = named(Entry.assistant([{"type": "text", "text": "r"}], message_id="anchor"))
                transcript.append([named(_boundary(kept, reply)), summary, reply])
            else:
                transcript.append([named(_boundary(kept, summary)), summary])
        stretches += [stretch for _, stretch in transcript.take_stretches()]
    return transcript, stretches


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(0, 300)),
        st.tuples(st.just("reply"), st.integers(0, 5)),
        st.tuples(st.just("discard"), st.just(0)),
        st.tuples(st.just("compact"), st.integers(0, 3)),
        st.tuples(st.just("anchored"), st.integers(1, 3)),
    ),
    max_size=40,
)


def test_discarding_the_reply_a_partial_compaction_is_anchored_at_drops_it_from_the_view() -> None:
    # The view is [boundary, summary, reply, kept result]: the reply is not the view's tail,
    # so the spilled fast path must not just cut the tail off.
    steps: list[Step] = [("turn", 1), ("anchored", 1), ("discard", 0)]
    whole, _ = _play(steps, spill=False)
    bounded, _ = _play(steps, spill=True)
    assert [e.data for e in bounded.view] == [e.data for e in whole.view]
    assert [e.type for e in bounded.view] == ["system", "user"]  # the boundary and summary
    assert bounded.messages == whole.messages


@settings(max_examples=60, deadline=None)
@given(_STEPS)
def test_a_spilling_transcript_reads_as_the_one_that_keeps_everything(steps: list[Step]) -> None:
    whole, whole_stretches = _play(steps, spill=False)
    bounded, bounded_stretches = _play(steps, spill=True)
    assert list(bounded.entries) == list(whole.entries)
    assert [e.data for e in bounded.view] == [e.data for e in whole.view]
    assert bounded.messages == whole.messages
    assert bounded.counter.total == whole.counter.total
    assert [[e.data for e in s] for s in bounded_stretches] == [
        [e.data for e in s] for s in whole_stretches
    ]
    # Recall reads the same calls and results back from the spill.
    whole_index = TranscriptIndex().update(whole.entries)
    bounded_index = TranscriptIndex().update(bounded.entries)
    assert list(bounded_index.calls) == list(whole_index.calls)
    for name, call in whole_index.calls.items():
        other = bounded_index.calls[name]
        assert (other.result, other.result_position, other.command) == (
            call.result,
            call.result_position,
            call.command,
        )
    assert bounded_index.runs_of("ls 1") == whole_index.runs_of("ls 1")


def test_a_spilling_transcript_holds_only_what_follows_its_last_boundary() -> None:
    steps: list[Step] = []
    for _ in range(30):
        steps += [("turn", 50)] * 10 + [("compact", 2)]
    whole, _ = _play(steps, spill=False)
    bounded, _ = _play(steps, spill=True)
    entries = bounded.entries
    assert isinstance(entries, SpilledEntries)
    assert len(entries) == len(whole.entries) == 30 * 22
    # The boundary and its summary are in memory; the kept messages are the view's own.
    assert len(entries.live) == 2
    assert entries.spilled == 30 * 22 - 2
    assert len(bounded.view) == 2 + 2


def test_the_recall_index_keeps_no_result_text_of_a_spilled_entry() -> None:
    transcript = _play([("turn", 100_000), ("compact", 0), ("turn", 10)], spill=True)[0]
    index = TranscriptIndex().update(transcript.entries)
    held = weakref.ref(transcript.entries[1])  # the first result, read back from disk
    gc.collect()
    assert held() is None  # neither the index nor the transcript holds it
    assert index.calls["toolu_0"].result == "x" * 100_000  # read back when asked


def _compacting_replay() -> _Replayer:
    recording = ReplayRecording.of(
        long_tool_session(
            240,
            result=lambda n: f"def handler_{n}(request):\n    return route(request, {n})\n" * 60,
            written=2_000,
        )
    )
    policy = Policy.from_env().with_changes(background_summary=False)
    options = ReplayOptions(baselines=False, session_memory=False, policy=policy, window=60_000)
    return _Replayer(recording, options)


def _spill_files(monkeypatch: pytest.MonkeyPatch) -> list[IO[bytes]]:
    """The spill files opened from now on."""
    opened: list[IO[bytes]] = []
    original = SpilledEntries._open

    def recording_open(entries: SpilledEntries) -> IO[bytes]:
        handle = original(entries)
        if handle not in opened:
            opened.append(handle)
        return handle

    monkeypatch.setattr(SpilledEntries, "_open", recording_open)
    return opened


def test_a_replayed_session_holds_its_live_entries_not_its_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = _spill_files(monkeypatch)
    replayer = _compacting_replay()
    asyncio.run(replayer.run(None))
    session = replayer.session
    entries = session.entries
    held = entries.live if isinstance(entries, SpilledEntries) else entries
    assert len(replayer.records) >= 4  # it compacted, again and again
    assert len(entries) > 480
    # What stays in memory is bounded by the live context (the view), not the session length.
    assert len(held) <= len(session.view) + 2
    # The run closed its session: the spill file is gone now, not at a later collection.
    assert session.closed
    assert len(opened) == 1
    assert opened[0].closed


def test_a_replay_that_fails_still_closes_its_spill_file(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _spill_files(monkeypatch)
    replayer = _compacting_replay()

    def fail() -> None:
        raise RuntimeError("pricing failed")

    monkeypatch.setattr(replayer, "_price_calls_not_replayed", fail)
    with pytest.raises(RuntimeError, match="pricing failed"):
        asyncio.run(replayer.run(None))
    assert len(opened) == 1  # it had spilled before failing
    assert opened[0].closed


def test_a_stretch_closed_in_the_batch_of_a_partial_compaction_holds_its_kept_messages() -> None:
    transcript = SessionTranscript(ReplayStore(), [], [])
    transcript.keep_stretches()
    question = Entry.user("question")
    answer = Entry.assistant([{"type": "text", "text": "answer"}], message_id="m1")
    transcript.append([question, answer])
    # A partial compaction keeps both messages, spliced in after its summary (the anchor
    # follows the boundary); a second boundary in the same batch closes that view.
    summary = Entry.user("summary", is_compact_summary=True)
    partial = _boundary([question, answer], summary)
    second = create_compact_boundary("auto", 50)
    transcript.append([partial, summary, second])
    whole = [question, answer, partial, summary, second]
    stretches = transcript.take_stretches()
    assert [boundary for boundary, _ in stretches] == [partial, second]
    closed = stretches[1][1]
    assert [e.uuid for e in closed] == [partial.uuid, summary.uuid, question.uuid, answer.uuid]
    assert [e.data for e in closed] == [
        e.data for e in messages_after_compact_boundary(whole[:4])
    ]
