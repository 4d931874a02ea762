"""Token counts and receipts are checked when a transcript is read.

Before: a negative `usage` count made `compact` and `eval` crash with a traceback, `inspect`
show -998,619 tokens and `replay` fail without naming the file or line; a receipt with wrong
types made `inspect` crash and every `run_recall` raise TypeError. Now each is the usual
one-line `file:line: field ... should be ...` error, in every command and in the session."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.record_checks import count_problem, receipt_problem, usage_problem
from unbounded.recall import Receipt
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.transcripts.claude_code import read_claude_code

runner = CliRunner()

USER = {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z", "message": {"role": "user", "content": "fix the bug"}}
ASSISTANT = {
    "type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s", "timestamp": "2025-01-01T00:00:01Z",
    "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}], "usage": {"input_tokens": 1_000, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}},
}
RESULT = {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": "s", "timestamp": "2025-01-01T00:00:02Z", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed"}]}}
RECEIPT = {"version": 1, "tier": "time", "toolResults": [{"id": "t1", "tool": "Bash", "tokens": 3, "command": "pytest"}], "files": [], "tokens": 3, "breaksCache": False}
MICRO = {"type": "system", "subtype": "microcompact_receipt", "uuid": "r1", "parentUuid": "u2", "sessionId": "s", "timestamp": "2025-01-01T00:00:03Z", "content": "1 old tool result(s) cleared", "isMeta": True, "microcompactReceipt": RECEIPT}
REPLY = {
    "type": "assistant", "uuid": "a2", "parentUuid": "r1", "sessionId": "s", "timestamp": "2025-01-01T00:00:04Z",
    "message": {"id": "m2", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Fixed."}], "usage": {"input_tokens": 1_200, "output_tokens": 9}},
}
BOUNDARY_RECEIPT = {"version": 1, "messages": 2, "tokens": 10, "toolResults": [{"id": "t1", "tool": "Bash", "tokens": 3}], "files": ["/a.py"], "covered": {"by": "extractive", "summaryTokens": 5, "filesMentioned": [], "filesNotMentioned": ["/a.py"]}}

# (what is broken, where: (record index, path), the wrong value, the field the error names)
DAMAGE = [
    ("negative input", (1, ("message", "usage", "input_tokens")), -998_619, "message.usage.input_tokens"),
    ("negative cache read", (4, ("message", "usage", "cache_read_input_tokens")), -1, "message.usage.cache_read_input_tokens"),
    ("fractional output", (4, ("message", "usage", "output_tokens")), 2.5, "message.usage.output_tokens"),
    ("receipt files", (3, ("microcompactReceipt", "files")), 7, "microcompactReceipt.files"),
    ("receipt tokens", (3, ("microcompactReceipt", "tokens")), "3", "microcompactReceipt.tokens"),
    ("receipt item id", (3, ("microcompactReceipt", "toolResults", 0, "id")), None, "microcompactReceipt.toolResults[0].id"),
    ("receipt item tokens", (3, ("microcompactReceipt", "toolResults", 0, "tokens")), -3, "microcompactReceipt.toolResults[0].tokens"),
    ("receipt items", (3, ("microcompactReceipt", "toolResults")), {"id": "t1"}, "microcompactReceipt.toolResults"),
    ("receipt flag", (3, ("microcompactReceipt", "breaksCache")), "no", "microcompactReceipt.breaksCache"),
]


def records() -> list[dict[str, Any]]:
    return [copy.deepcopy(r) for r in (USER, ASSISTANT, RESULT, MICRO, REPLY)]


def damaged(tmp_path: Path, where: tuple[int, tuple[Any, ...]], wrong: Any) -> Path:
    lines = records()
    target: Any = lines[where[0]]
    for key in where[1][:-1]:
        target = target[key]
    if wrong is None:
        del target[where[1][-1]]
    else:
        target[where[1][-1]] = wrong
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return path


def test_the_undamaged_transcript_reads_and_every_command_runs(tmp_path: Path) -> None:
    path = damaged(tmp_path, (0, ("uuid",)), "u1")
    assert len(read_claude_code(path).entries) == 5
    for command in (["inspect"], ["compact", "--summarizer", "extractive", "-o", str(tmp_path / "out.jsonl")], ["eval"], ["replay"]):
        result = runner.invoke(app, [command[0], str(path), *command[1:]])
        assert result.exit_code == 0, (command, result.output)


@pytest.mark.parametrize(("what", "where", "wrong", "field"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_the_reader_names_the_file_line_and_field(tmp_path: Path, what: str, where: tuple[int, tuple[Any, ...]], wrong: Any, field: str) -> None:
    path = damaged(tmp_path, where, wrong)
    with pytest.raises(TranscriptError) as raised:
        read_claude_code(path)
    assert raised.value.path == str(path) and raised.value.line == where[0] + 1
    assert field in raised.value.reason


@pytest.mark.parametrize("command", ["inspect", "compact", "eval", "replay"])
@pytest.mark.parametrize(("what", "where", "wrong", "field"), [DAMAGE[0], DAMAGE[3]], ids=["usage", "receipt"])
def test_every_command_gives_the_one_line_error(tmp_path: Path, command: str, what: str, where: tuple[int, tuple[Any, ...]], wrong: Any, field: str) -> None:
    path = damaged(tmp_path, where, wrong)
    extra = ["--summarizer", "extractive", "-o", str(tmp_path / "out.jsonl")] if command == "compact" else []
    result = runner.invoke(app, [command, str(path), *extra])
    assert result.exit_code == 2, result.output
    assert f"{path}:{where[0] + 1}: field '{field}'" in result.stderr
    assert "Traceback" not in result.output and "998,619" not in result.stdout


def test_a_session_refuses_the_transcript_at_open(tmp_path: Path) -> None:
    path = damaged(tmp_path, (3, ("microcompactReceipt", "files")), 7)
    folder = tmp_path / "s"
    folder.mkdir()
    path.rename(folder / "transcript.jsonl")
    with pytest.raises(TranscriptError, match=r"transcript.jsonl:4: field 'microcompactReceipt.files'"):
        Session.open(folder, SessionConfig(model="claude-sonnet-4-5"))


def test_run_recall_names_a_damaged_receipt_built_in_memory() -> None:
    lines = records()
    lines[3]["microcompactReceipt"]["files"] = 7  # TypeError in every run_recall before
    entries = [Entry(record, number) for number, record in enumerate(lines, start=1)]
    session = Session(SessionConfig(model="claude-sonnet-4-5", tools=[{"name": "Bash", "input_schema": {"type": "object"}}]), store=MemoryStore(entries))
    with pytest.raises(TranscriptError, match=r"<input>:4: field 'microcompactReceipt.files' should be a list of strings, found 7"):
        session.run_recall({"id": "r", "input": {"id": "t1"}})


def test_a_boundary_receipt_is_checked_too(tmp_path: Path) -> None:
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "sessionId": "s", "timestamp": "2025-01-01T00:00:05Z", "logicalParentUuid": "a2", "compactMetadata": {"trigger": "auto", "preTokens": 100, "receipt": copy.deepcopy(BOUNDARY_RECEIPT)}}
    path = tmp_path / "b.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*records(), boundary]))
    receipts = [Receipt.from_entry(e) for e in read_claude_code(path).entries]
    assert [r.kind for r in receipts if r is not None] == ["microcompaction", "compaction"]
    for field, wrong in (("covered", []), ("messages", -2), ("files", ["/a.py", 3])):
        broken = copy.deepcopy(boundary)
        broken["compactMetadata"]["receipt"][field] = wrong
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*records(), broken]))
        with pytest.raises(TranscriptError, match=f"compactMetadata.receipt.{field}"):
            read_claude_code(path)
    broken = copy.deepcopy(boundary)
    broken["compactMetadata"]["preTokens"] = -5
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*records(), broken]))
    with pytest.raises(TranscriptError, match=r":6: field 'compactMetadata.preTokens' should be a whole number >= 0, found -5"):
        read_claude_code(path)


def test_the_checks_themselves() -> None:
    assert count_problem(0, "n") is None and count_problem(None, "n") is None
    assert count_problem(-1, "n") == "field 'n' should be a whole number >= 0, found -1"
    assert count_problem(True, "n") == "field 'n' should be a whole number >= 0, found true"
    assert count_problem("1", "n") == "field 'n' should be a whole number >= 0, found str"
    assert usage_problem({"input_tokens": 0, "output_tokens": 1}) is None
    assert usage_problem([1]) == "field 'message.usage' should be an object, found list"
    assert usage_problem({"cache_creation_input_tokens": -4}, "u") == "field 'u.cache_creation_input_tokens' should be a whole number >= 0, found -4"
    assert receipt_problem(None, "r") is None and receipt_problem(RECEIPT, "r") is None
    assert receipt_problem(BOUNDARY_RECEIPT, "r") is None
    assert receipt_problem("x", "r") == "field 'r' should be an object, found str"
    assert receipt_problem({"toolResults": [{"id": "a", "path": 3}]}, "r") == "field 'r.toolResults[0].path' should be a string, found 3"
    assert receipt_problem({"covered": {"summaryTokens": -1}}, "r") == "field 'r.covered.summaryTokens' should be a whole number >= 0, found -1"
    assert receipt_problem({"tier": 5}, "r") == "field 'r.tier' should be a string, found 5"
