"""A session's transcript derives its view across a partial compaction's boundary from the
boundary backwards while no two entries share a uuid, and from the whole history otherwise:
the view is always what `messages_after_compact_boundary` gives the whole history."""

from __future__ import annotations

import random

import orjson
import pytest

from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import MemoryStore


def _boundary(head: object, tail: object, anchor: object) -> Entry:
    segment: dict[str, object] = {"headUuid": head, "tailUuid": tail, "anchorUuid": anchor}
    boundary = create_compact_boundary("auto", 100)
    boundary.data["compactMetadata"]["preservedSegment"] = segment
    return boundary


def _bytes(view: list[Entry]) -> list[bytes]:
    return [orjson.dumps(entry.data, option=orjson.OPT_SORT_KEYS) for entry in view]


def _reply(rng: random.Random, n: int) -> Entry:
    entry = Entry.assistant([{"type": "text", "text": f"reply {n}"}], message_id=f"m{n}")
    entry.data["message"]["usage"] = {"input_tokens": n, "output_tokens": 1}
    return entry


@pytest.mark.parametrize("seed", range(12))
def test_the_view_across_a_boundary_is_the_whole_history_s(seed: int) -> None:
    rng = random.Random(seed)
    transcript = SessionTranscript(MemoryStore(), [Entry.user("start")], [])
    for n in range(60):
        roll = rng.random()
        entries = list(transcript.entries)
        if roll < 0.12 and len(entries) > 4:  # a partial compaction, its segment anywhere
            uuids = [e.uuid for e in entries if e.uuid] + ["missing", None, 7]
            head, tail = rng.choice(uuids), rng.choice(uuids)
            if rng.random() < 0.5 and len(entries) > 6:  # the usual: the view's tail
                head, tail = entries[-4].uuid, entries[-2].uuid
            boundary = _boundary(head, tail, None)
            summary = Entry.user(f"summary {n}", is_compact_summary=True)
            boundary.data["compactMetadata"]["preservedSegment"]["anchorUuid"] = summary.uuid
            transcript.append([boundary, summary])
        elif roll < 0.17 and len(entries) > 3:  # a record again under an earlier uuid
            again = Entry.user(f"again {n}")
            again.data["uuid"] = rng.choice([e.uuid for e in entries if e.uuid])
            transcript.append([again])
        elif roll < 0.22:
            transcript.discard_last_reply()
        else:
            transcript.append([Entry.user(f"user {n}"), _reply(rng, n)])
        expected = messages_after_compact_boundary(list(transcript.entries))
        assert _bytes(transcript.view) == _bytes(expected)


def test_a_repeated_uuid_sends_the_view_to_the_whole_history() -> None:
    """The head's first occurrence is an old record of the same uuid: looked for backwards,
    the newer one would be found."""
    old = Entry.user("old")
    transcript = SessionTranscript(MemoryStore(), [old], [])
    middle = Entry.user("middle")
    newer = Entry.user("newer, same uuid")
    newer.data["uuid"] = old.uuid
    last = Entry.user("last")
    transcript.append([middle, newer, last])
    summary = Entry.user("summary", is_compact_summary=True)
    transcript.append([_boundary(old.uuid, last.uuid, summary.uuid), summary])
    texts = [entry.content for entry in transcript.view]
    assert texts[2:] == ["old", "middle", "newer, same uuid", "last"]


def test_a_repeat_is_seen_in_the_entries_loaded() -> None:
    old = Entry.user("old")
    newer = Entry.user("newer, same uuid")
    newer.data["uuid"] = old.uuid
    last = Entry.user("last")
    transcript = SessionTranscript(MemoryStore(), [old, newer, last], [])
    summary = Entry.user("summary", is_compact_summary=True)
    transcript.append([_boundary(old.uuid, last.uuid, summary.uuid), summary])
    assert [entry.content for entry in transcript.view][2:] == ["old", "newer, same uuid", "last"]


def test_unique_uuids_find_the_segment_the_whole_history_finds() -> None:
    entries = [Entry.user(f"u{n}") for n in range(8)]
    summary = Entry.user("summary", is_compact_summary=True)
    cases = [(1, 5), (5, 5), (5, 1), (0, 7), ("missing", 5), (5, "missing"), (None, 5), (3, 7)]
    for head, tail in cases:
        named = [entries[x].uuid if isinstance(x, int) else x for x in (head, tail)]
        history = [*entries, _boundary(named[0], named[1], summary.uuid), summary]
        fast = messages_after_compact_boundary(history, unique_uuids=True)
        assert _bytes(fast) == _bytes(messages_after_compact_boundary(history)), (head, tail)


def test_a_segment_naming_no_uuid_is_looked_for_as_the_whole_history_does() -> None:
    """A head or tail of null matches the first record without a uuid, which only the walk
    from the start finds (records without one are not counted as repeats)."""
    entries = [Entry.user(f"u{n}") for n in range(6)]
    for nameless in (entries[1], entries[4]):
        del nameless.data["uuid"]
    summary = Entry.user("summary", is_compact_summary=True)
    history = [*entries, _boundary(None, entries[5].uuid, summary.uuid), summary]
    fast = messages_after_compact_boundary(history, unique_uuids=True)
    assert [e.content for e in fast][2:] == ["u1", "u2", "u3", "u4", "u5"]
    assert _bytes(fast) == _bytes(messages_after_compact_boundary(history))


def test_a_session_with_unique_uuids_derives_its_view_from_the_boundary_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Across a compaction the transcript reads the entries back from the boundary to the
    segment's head, not the whole history."""
    from unbounded import session_transcript

    asked: list[bool] = []
    real = session_transcript.messages_after_compact_boundary

    def derive(entries: list[Entry], *, unique_uuids: bool = False) -> list[Entry]:
        asked.append(unique_uuids)
        return real(entries, unique_uuids=unique_uuids)

    history = [Entry.user(f"u{n}") for n in range(50)]
    transcript = SessionTranscript(MemoryStore(), history, [])
    monkeypatch.setattr(session_transcript, "messages_after_compact_boundary", derive)
    summary = Entry.user("summary", is_compact_summary=True)
    transcript.append([_boundary(history[-3].uuid, history[-1].uuid, summary.uuid), summary])
    assert asked == [True]
    assert [e.content for e in transcript.view][2:] == ["u47", "u48", "u49"]


class _Counted(list[Entry]):
    """A list that counts the items read one at a time."""

    reads = 0

    def __getitem__(self, index: object) -> object:  # type: ignore[override]
        if isinstance(index, int):
            _Counted.reads += 1
        return super().__getitem__(index)  # type: ignore[index]


def test_unique_uuids_read_back_to_the_head_only() -> None:
    entries = [Entry.user(f"u{n}") for n in range(1000)]
    summary = Entry.user("summary", is_compact_summary=True)
    history = _Counted([*entries, _boundary(entries[-3].uuid, entries[-1].uuid, summary.uuid), summary])
    _Counted.reads = 0
    view = messages_after_compact_boundary(history, unique_uuids=True)
    assert len(view) == 5
    assert _Counted.reads < 20
