"""A discarded reply's uuids leave the transcript's set of uuids: the same reply appended again
(a regenerate under the uuid it had) is no repeat, so the view across a later partial compaction
is still derived from the boundary backwards, and is the one the whole history gives."""

from __future__ import annotations

import orjson
import pytest

from unbounded import session_transcript
from unbounded.model.entries import Entry, create_compact_boundary, messages_after_compact_boundary
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import MemoryStore


def _boundary(head: str | None, tail: str | None, anchor: str | None) -> Entry:
    boundary = create_compact_boundary("auto", 100)
    segment = {"headUuid": head, "tailUuid": tail, "anchorUuid": anchor}
    boundary.data["compactMetadata"]["preservedSegment"] = segment
    return boundary


def _bytes(view: list[Entry]) -> list[bytes]:
    return [orjson.dumps(entry.data, option=orjson.OPT_SORT_KEYS) for entry in view]


def test_a_reply_discarded_and_appended_again_is_no_repeated_uuid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history = [Entry.user(f"u{n}") for n in range(20)]
    head = history[-1]
    transcript = SessionTranscript(MemoryStore(), history, [])  # (it appends to `history`)
    reply = Entry.assistant([{"type": "text", "text": "first try"}], message_id="m1")
    transcript.append([reply])
    assert transcript.discard_last_reply() == [reply]
    again = Entry.assistant(
        [{"type": "text", "text": "second try"}], message_id="m2", uuid=reply.uuid
    )
    transcript.append([again, Entry.user("after")])
    asked: list[bool] = []
    real = session_transcript.messages_after_compact_boundary

    def derive(entries: list[Entry], *, unique_uuids: bool = False) -> list[Entry]:
        asked.append(unique_uuids)
        return real(entries, unique_uuids=unique_uuids)

    monkeypatch.setattr(session_transcript, "messages_after_compact_boundary", derive)
    summary = Entry.user("summary", is_compact_summary=True)
    transcript.append([_boundary(head.uuid, again.uuid, summary.uuid), summary])
    assert asked == [True]  # the uuids are still each the only one
    assert [entry.content for entry in transcript.view[2:]] == [
        "u19",
        [{"type": "text", "text": "second try"}],
    ]
    assert _bytes(transcript.view) == _bytes(
        messages_after_compact_boundary(list(transcript.entries))
    )
