"""Reading and writing Claude Code transcripts, and every kind of bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from unbounded import TranscriptError, load_transcript
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.transcripts import append_claude_code, detect_format, write_claude_code


def test_fixture_2_1_reads_every_record_type(session_2_1: Path) -> None:
    transcript = load_transcript(session_2_1)
    kinds = {e.type for e in transcript.entries}
    assert {
        "file-history-snapshot",
        "progress",
        "user",
        "assistant",
        "attachment",
        "system",
        "queue-operation",
        "future-record-type",
    } <= kinds
    assert transcript.format == "claude-code"
    assert transcript.meta["versions"] == ["2.1.40"]
    assert [b.compact_metadata["preTokens"] for b in transcript.boundaries()] == [171_500]


def test_view_starts_at_the_last_boundary(session_2_1: Path) -> None:
    transcript = load_transcript(session_2_1)
    view = transcript.view_entries()
    assert view[0].is_compact_boundary
    assert view[1].is_compact_summary
    messages = normalize_messages(view)
    validate_request(messages)
    assert messages[0]["role"] == "user"
    assert "Primary Request" in str(messages[0]["content"])


def test_inline_sidechain_is_not_in_the_main_thread(session_1_0: Path) -> None:
    transcript = load_transcript(session_1_0)
    main = transcript.main_thread()
    assert all(not e.is_sidechain for e in main)
    assert len(transcript.sidechains()) == 1
    (thread,) = transcript.sidechains().values()
    assert [e.type for e in thread] == ["user", "assistant", "user", "assistant"]
    validate_request(normalize_messages(main))
    assert [c.message_id for c in transcript.api_calls()] == ["msg_old_01", "msg_old_02"]


def test_round_trip_keeps_unknown_fields(session_2_1: Path, tmp_path: Path) -> None:
    transcript = load_transcript(session_2_1)
    out = tmp_path / "out.jsonl"
    write_claude_code(transcript.entries, out)
    again = load_transcript(out)
    assert [e.data for e in again.entries] == [e.data for e in transcript.entries]
    last = again.entries[-1].data
    assert last["unknownFieldFromTheFuture"] == {"x": 1}
    assert any(
        e.type == "future-record-type" and e.data["payload"] == {"kept": True}
        for e in again.entries
    )


def test_round_trip_is_byte_identical_for_compact_json(session_2_1: Path, tmp_path: Path) -> None:
    out = tmp_path / "same.jsonl"
    write_claude_code(load_transcript(session_2_1).entries, out)
    assert out.read_bytes() == session_2_1.read_bytes()


def test_append_then_load(session_2_1: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copy(session_2_1, path)
    boundary = create_compact_boundary(
        "manual", 5_000, logical_parent_uuid="x", messages_summarized=3
    )
    append_claude_code([boundary, Entry.user("summary", is_compact_summary=True)], path)
    transcript = load_transcript(path)
    assert transcript.boundaries()[-1].compact_metadata == {
        "trigger": "manual",
        "preTokens": 5_000,
        "messagesSummarized": 3,
    }
    assert transcript.view_entries()[1].is_compact_summary


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def _good_line(uuid: str = "u1") -> str:
    record = {
        "type": "user",
        "uuid": uuid,
        "sessionId": "s",
        "message": {"role": "user", "content": "hi"},
    }
    return orjson.dumps(record).decode()


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", _good_line() + "\n{not json\n" + _good_line("u2") + "\n")
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert info.value.line == 2
    assert "bad.jsonl:2" in str(info.value)
    assert "malformed JSON" in str(info.value)


def test_skip_invalid_counts_skipped_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.jsonl", _good_line() + "\n{not json\n[1,2]\n" + _good_line("u2") + "\n"
    )
    transcript = load_transcript(path, skip_invalid=True)
    assert transcript.skipped_lines == 2
    assert [e.uuid for e in transcript.entries] == ["u1", "u2"]


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (
            {"type": "user", "uuid": 5, "message": {"role": "user", "content": "x"}},
            "'uuid' should be a string",
        ),
        (
            {
                "type": "user",
                "uuid": "a",
                "isMeta": "yes",
                "message": {"role": "user", "content": "x"},
            },
            "'isMeta'",
        ),
        ({"type": "user", "uuid": "a", "message": "hello"}, "needs a 'message' object"),
        (
            {"type": "user", "uuid": "a", "message": {"role": "user", "content": 7}},
            "message.content",
        ),
        (
            {
                "type": "assistant",
                "uuid": "a",
                "message": {"role": "assistant", "content": [], "usage": {"input_tokens": "12"}},
            },
            "usage.input_tokens",
        ),
        (
            {
                "type": "assistant",
                "uuid": "a",
                "message": {"role": "assistant", "content": ["text"]},
            },
            "content[0]",
        ),
        ({"type": "attachment", "uuid": "a", "attachment": []}, "attachment"),
        (
            {
                "type": "system",
                "uuid": "a",
                "subtype": "compact_boundary",
                "compactMetadata": {"preTokens": "many"},
            },
            "preTokens",
        ),
    ],
)
def test_wrong_type_in_known_field(tmp_path: Path, record: dict[str, object], needle: str) -> None:
    path = _write(
        tmp_path / "typed.jsonl", _good_line() + "\n" + orjson.dumps(record).decode() + "\n"
    )
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert info.value.line == 2
    assert needle in str(info.value)


def test_unknown_fields_are_never_an_error(tmp_path: Path) -> None:
    record = {
        "type": "user",
        "uuid": "a",
        "sessionId": "s",
        "brandNew": [1, {"x": None}],
        "message": {"role": "user", "content": "x", "alsoNew": True},
    }
    path = _write(tmp_path / "new.jsonl", orjson.dumps(record).decode() + "\n")
    assert load_transcript(path).entries[0].data["brandNew"] == [1, {"x": None}]


def test_torn_last_line_is_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path / "torn.jsonl", _good_line() + "\n" + _good_line("u2")[:25])
    transcript = load_transcript(path)
    assert [e.uuid for e in transcript.entries] == ["u1"]
    assert len(transcript.warnings) == 1
    assert "torn last line" in transcript.warnings[0] and "torn.jsonl:2" in transcript.warnings[0]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "nonl.jsonl", _good_line() + "\n" + _good_line("u2"))
    transcript = load_transcript(path)
    assert [e.uuid for e in transcript.entries] == ["u1", "u2"]
    assert transcript.warnings == []


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="empty file"):
        load_transcript(_write(tmp_path / "empty.jsonl", "\n\n"))


def test_binary_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="binary"):
        load_transcript(_write(tmp_path / "blob.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00"))


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "latin.jsonl",
        (_good_line() + "\n").encode() + b'{"type":"user","x":"\xff\xfe"}\n',
    )
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert info.value.line == 2


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="unknown transcript format"):
        load_transcript(_write(tmp_path / "x.jsonl", '{"hello": "world"}\n'))
    with pytest.raises(TranscriptError, match="unknown transcript format"):
        load_transcript(_write(tmp_path / "y.txt", "just some text\n"))


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such file"):
        load_transcript(tmp_path / "absent.jsonl")
    with pytest.raises(TranscriptError, match="folder"):
        load_transcript(tmp_path)


def test_format_is_detected_from_content_not_name(session_2_1: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "notes.traj"
    shutil.copy(session_2_1, renamed)
    assert detect_format(renamed) == "claude-code"


def test_atomic_write_leaves_no_temporary_files(session_2_1: Path, tmp_path: Path) -> None:
    write_claude_code(load_transcript(session_2_1).entries, tmp_path / "a.jsonl")
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl"]
