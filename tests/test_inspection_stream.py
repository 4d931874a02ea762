"""Streaming inspect: the same report as the in-memory one, without holding the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, corpus_files
from unbounded.inspection import inspect_transcript
from unbounded.inspection_stream import (
    SelectedThread,
    file_order_main_thread,
    inspect_file,
    scan_records,
)
from unbounded.model.entries import Entry
from unbounded.transcripts.claude_code import write_claude_code
from unbounded.transcripts.loader import detect_format, load_transcript


def _same_report(path: Path) -> None:
    streamed = inspect_file(path).to_dict()
    loaded = inspect_transcript(load_transcript(path)).to_dict()
    assert streamed == loaded
    in_file_order = inspect_file(path, select_thread=file_order_main_thread).to_dict()
    assert in_file_order == inspect_transcript(load_transcript(path, file_order=True)).to_dict()


def _claude_code_fixtures() -> list[Path]:
    found = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        try:
            if detect_format(path) == "claude-code":
                found.append(path)
        except Exception:
            continue
    return found


@pytest.mark.parametrize("path", _claude_code_fixtures(), ids=lambda p: p.name)
def test_the_streamed_report_equals_the_loaded_one_on_fixtures(path: Path) -> None:
    _same_report(path)


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_files("*.jsonl"), ids=lambda p: p.name)
def test_the_streamed_report_equals_the_loaded_one_on_the_corpus(path: Path) -> None:
    try:
        if detect_format(path) != "claude-code":
            pytest.skip("not a Claude Code file")
    except Exception:
        pytest.skip("unreadable corpus file")
    _same_report(path)


def test_the_thread_selector_is_pluggable(tmp_path: Path) -> None:
    entries = [Entry.user("first question"), Entry.user("second " * 20)]
    path = tmp_path / "t.jsonl"
    write_claude_code(entries, path)
    seen: list[int] = []

    def only_the_last(records: Any, leaves: Any) -> SelectedThread:
        seen.append(len(records))
        return SelectedThread(file_order_main_thread(records).indexes[-1:], [])

    report = inspect_file(path, select_thread=only_the_last)
    assert seen == [2]
    assert report.messages == 1
    assert report.accounting.human_messages == 35  # "second " * 20: 140 chars / 4


def test_a_partial_compaction_view_is_spliced_like_the_loader_does(tmp_path: Path) -> None:
    first, answer = Entry.user("keep me " * 50), Entry.assistant([{"type": "text", "text": "ok"}])
    dropped = Entry.user("summarized away")
    boundary = Entry(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b-1",
            "parentUuid": None,
            "compactMetadata": {
                "trigger": "manual",
                "preTokens": 100,
                "preservedSegment": {"headUuid": first.uuid, "tailUuid": answer.uuid, "anchorUuid": "b-1"},
            },
        }
    )
    summary = Entry.user("the summary")
    summary.data["isCompactSummary"] = True
    path = tmp_path / "partial.jsonl"
    write_claude_code([first, answer, dropped, boundary, summary], path)
    _same_report(path)
    assert inspect_file(path).messages == 3


def test_scan_keeps_no_content(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    write_claude_code([Entry.user("x" * 100_000)], path)
    (record,) = scan_records(path).records
    assert record.offset == 0 and record.line == 1
    fields = [name for name in dir(record) if not name.startswith("_") and name != "table"]
    assert all(len(str(getattr(record, name))) < 200 for name in fields)
    assert record.content_shape == "str" and record.user_kind == "prompt"


def test_a_response_written_as_several_lines_keeps_one_id_string(tmp_path: Path) -> None:
    # Claude Code writes a response's blocks as a run of lines sharing its id: the table
    # holds one string for the run (half a million records at 1 GiB).
    path = tmp_path / "s.jsonl"
    usage = {"input_tokens": 3, "output_tokens": 5}
    first = Entry.assistant([{"type": "text", "text": "a"}], message_id="msg_1", usage=usage)
    second = Entry.assistant(
        [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
        message_id="msg_1",
        usage=usage,
        parent_uuid=first.uuid,
    )
    other = Entry.assistant(
        [{"type": "text", "text": "b"}], message_id="msg_2", usage=usage, parent_uuid=second.uuid
    )
    write_claude_code([first, second, other], path)
    ids = scan_records(path).records.message_ids
    assert ids == ["msg_1", "msg_1", "msg_2"]
    assert len({id(message_id) for message_id in ids}) == 2


def test_a_file_changed_between_the_passes_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded import inspection_stream
    from unbounded.errors import TranscriptError

    path = tmp_path / "t.jsonl"
    write_claude_code([Entry.user("hello"), Entry.user("world")], path)
    real = inspection_stream.scan_records

    def then_rewrite(*args: Any, **kwargs: Any) -> Any:
        scan = real(*args, **kwargs)
        path.write_bytes(b"\n" * path.stat().st_size)
        return scan

    monkeypatch.setattr(inspection_stream, "scan_records", then_rewrite)
    with pytest.raises(TranscriptError, match="changed while"):
        inspect_file(path)
