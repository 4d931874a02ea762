"""Token counts and receipts are checked when a transcript is read.

Before: a negative `usage` count made `compact` and `eval` crash with a traceback, `inspect`
show -998,619 tokens and `replay` fail without naming the file or line; a receipt with wrong
types made `inspect` crash and every `run_recall` raise TypeError. Now each is the usual
one-line `file:line: field ... should be ...` error, in every command and in the session."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.record_checks import (
    count_problem,
    receipt_problem,
    token_counts_problem,
    usage_problem,
)
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


# The other readers: (name, the copy to damage, how to damage it, where the error points, the field it names)
FIXTURES = Path(__file__).parent / "fixtures"


def _swe_agent(document: Any) -> None:
    document["history"][2]["usage"] = {"prompt_tokens": 900, "completion_tokens": -7}


def _mini_swe_agent(document: Any) -> None:
    document["messages"][2]["extra"]["response"]["usage"]["prompt_tokens_details"]["cached_tokens"] = "12"


def _openhands(lines: Any) -> None:
    lines[0]["history"][4]["tool_call_metadata"]["model_response"]["usage"]["prompt_tokens"] = -5210


def _codex(lines: Any) -> None:
    event = next(r for r in lines if r["type"] == "event_msg" and r["payload"]["type"] == "token_count" and r["payload"].get("info"))
    event["payload"]["info"]["last_token_usage"]["cached_input_tokens"] = -3


def _openhands_sdk_state(document: Any) -> None:
    document["stats"]["usage_to_metrics"]["agent"]["token_usages"][1]["cache_read_tokens"] = -1


def _openhands_sdk_event(document: Any) -> None:
    stats = {"usage_to_metrics": {"agent": {"token_usages": [{"response_id": "r", "prompt_tokens": 1.5}]}}}
    document.append({"kind": "ConversationStateUpdateEvent", "id": "u", "timestamp": "2025-03-14T10:09:00", "source": "environment", "key": "stats", "value": stats})


OTHER_READERS = [
    ("swe-agent", "swe_agent_v1.traj", None, _swe_agent, "history[2].usage.completion_tokens", "found -7"),
    ("mini-swe-agent", "versions/mini-swe-agent-1.1-toolcall.traj.json", None, _mini_swe_agent, "messages[2].extra.response.usage.prompt_tokens_details.cached_tokens", "found str"),
    ("openhands", "openhands_output.jsonl", None, _openhands, "history[4].tool_call_metadata.model_response.usage.prompt_tokens", "found -5210"),
    ("codex", "codex_rollout.jsonl", None, _codex, "payload.info.last_token_usage.cached_input_tokens", "found -3"),
    ("openhands-sdk state", "versions/openhands-sdk-conversation", "base_state.json", _openhands_sdk_state, "stats.usage_to_metrics.agent.token_usages[1].cache_read_tokens", "found -1"),
    ("openhands-sdk event", "versions/openhands-sdk-events.json", None, _openhands_sdk_event, "events[11]: field 'value.usage_to_metrics.agent.token_usages[0].prompt_tokens'", "found float"),
]


def _copy_of(tmp_path: Path, source: str, inner: str | None) -> tuple[Path, Path]:
    """A copy of a fixture and the JSON file in it to damage."""
    original = FIXTURES / source
    target = tmp_path / original.name
    if original.is_dir():
        shutil.copytree(original, target)
        return target, target / (inner or "")
    target.write_bytes(original.read_bytes())
    return target, target


def _rewrite(file: Path, damage: Any) -> None:
    if file.suffix == ".jsonl":
        lines = [orjson.loads(line) for line in file.read_bytes().splitlines()]
        damage(lines)
        file.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    else:
        document = orjson.loads(file.read_bytes())
        damage(document)
        file.write_bytes(orjson.dumps(document))


@pytest.mark.parametrize(("name", "source", "inner", "damage", "field", "found"), OTHER_READERS, ids=[r[0] for r in OTHER_READERS])
def test_every_reader_checks_its_token_counts(tmp_path: Path, name: str, source: str, inner: str | None, damage: Any, field: str, found: str) -> None:
    """Before: each of these readers kept a negative or wrong-typed count (a negative total
    in inspect, or a TypeError later)."""
    path, file = _copy_of(tmp_path, source, inner)
    assert runner.invoke(app, ["inspect", str(path)]).exit_code == 0
    _rewrite(file, damage)
    for command in (["inspect"], ["eval"], ["replay"]):
        result = runner.invoke(app, [command[0], str(path)])
        assert result.exit_code == 2, (command, result.output)
        assert f"{file}" in result.stderr and field in result.stderr and found in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_the_token_counts_check() -> None:
    assert token_counts_problem(None, "u") is None
    assert token_counts_problem({"prompt_tokens": 0, "total_tokens": 3, "model": "m", "context_window": -1}, "u") is None
    assert token_counts_problem({"prompt_tokens_details": None, "audio_tokens": None}, "u") is None
    assert token_counts_problem([], "u") == "field 'u' should be an object, found list"
    assert token_counts_problem({"cache_write_tokens": -1}, "u") == "field 'u.cache_write_tokens' should be a whole number >= 0, found -1"
    assert token_counts_problem({"completion_tokens_details": {"reasoning_tokens": True}}, "u") == "field 'u.completion_tokens_details.reasoning_tokens' should be a whole number >= 0, found true"
    assert token_counts_problem({"prompt_tokens_details": 4}, "u") == "field 'u.prompt_tokens_details' should be an object, found 4"
    assert token_counts_problem({1: -1, "a_tokens": 0, "b_tokens": -2}, "u") == "field 'u.b_tokens' should be a whole number >= 0, found -2"
