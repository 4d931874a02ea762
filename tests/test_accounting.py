"""Token accounting by category (seed 003 buildTokenAccounting)."""

from __future__ import annotations

from pathlib import Path

from unbounded import load_transcript
from unbounded.model.entries import Entry
from unbounded.tokens import build_token_accounting
from unbounded.tokens.exact import TiktokenCounter


def _read(tool_id: str, path: str, message_id: str) -> Entry:
    return Entry.assistant(
        [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}],
        message_id=message_id,
    )


def _result(tool_id: str, text: str) -> Entry:
    return Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": text}])


def test_categories_and_duplicate_reads() -> None:
    entries = [
        Entry.user("please fix the bug" * 4),
        _read("t1", "/a.py", "m1"),
        _result("t1", "x" * 400),
        _read("t2", "/a.py", "m2"),
        _result("t2", "x" * 404),
        _read("t3", "/b.py", "m3"),
        _result("t3", "y" * 40),
        Entry.assistant(
            [{"type": "text", "text": "done" * 10}, {"type": "thinking", "thinking": "t" * 8}],
            message_id="m4",
        ),
        Entry.user("<local-command-stdout>ok</local-command-stdout>"),
        Entry.attachment_record(
            {"type": "todo", "content": [{"content": "ship", "status": "pending"}]}
        ),
        Entry.user(
            [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                }
            ]
        ),
    ]
    stats = build_token_accounting(entries)
    assert stats.human_messages == 18
    assert stats.assistant_messages == 10 + 2
    assert stats.tool_results["Read"] == 100 + 101 + 10
    assert stats.tool_calls["Read"] == 3
    assert stats.local_command_outputs > 0
    assert stats.attachment_counts == {"todo": 1} and stats.attachments["todo"] > 0
    assert stats.other == 2_000
    assert stats.duplicate_file_reads["/a.py"].count == 2
    assert stats.duplicate_file_reads["/a.py"].tokens == (201 // 2) * 1
    assert "/b.py" not in stats.duplicate_file_reads
    assert sum(stats.categories().values()) == stats.total
    data = stats.to_dict()
    assert data["duplicate_reads"]["files"] == 1 and data["percent"]["tool_results"] > 0


def test_skips_what_never_reaches_the_api(session_2_1: Path) -> None:
    transcript = load_transcript(session_2_1)
    everything = build_token_accounting(transcript.main_thread())
    assert everything.tool_calls == {"Read": 2, "Edit": 1, "Bash": 2}
    assert everything.tool_results["Bash"] > 0


def test_exact_counter_can_be_plugged_in(session_2_1: Path) -> None:
    counter = TiktokenCounter("o200k_base")
    stats = build_token_accounting(load_transcript(session_2_1).main_thread(), counter.count_text)
    assert stats.total > 0 and sum(stats.categories().values()) == stats.total
