"""The rules added when the session-file readers were attacked (session 15) that
tests/test_readers_attack15.py does not reach on its own: the sums of counts in every
agent's usage names, and a batch that survives one session's unexpected crash."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from unbounded.cli import app, replay_command
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.cli.text import printable, shorten_middle
from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.record_checks import (
    COUNT_LIMIT,
    count_problem,
    token_counts_problem,
    usage_problem,
)
from unbounded.transcripts import loader
from unbounded.transcripts.claude_code import read_claude_code
from unbounded.transcripts.mini_swe_agent import read_mini_swe_agent
from unbounded.transcripts.openhands_sdk import read_openhands_sdk


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": COUNT_LIMIT // 2, "completion_tokens": COUNT_LIMIT // 2},
        {"prompt_tokens_details": {"cached_tokens": COUNT_LIMIT - 1, "audio_tokens": 1}},
    ],
    ids=["top-level", "details"],
)
def test_counts_of_one_usage_that_add_up_past_the_limit_are_named(usage: dict[str, Any]) -> None:
    problem = token_counts_problem(usage, "response.usage")
    assert problem is not None and "add up to" in problem and "response.usage." in problem


def test_counts_that_add_up_to_just_below_the_limit_pass() -> None:
    usage = {"prompt_tokens": COUNT_LIMIT // 2, "completion_tokens": COUNT_LIMIT // 2 - 1}
    assert token_counts_problem(usage, "response.usage") is None
    assert usage_problem({"input_tokens": COUNT_LIMIT - 1}) is None


def test_a_cache_creation_split_that_adds_up_past_the_limit_is_named() -> None:
    split = {
        "ephemeral_5m_input_tokens": COUNT_LIMIT // 2,
        "ephemeral_1h_input_tokens": COUNT_LIMIT // 2,
    }
    problem = usage_problem({"input_tokens": 1, "cache_creation": split})
    assert problem is not None and "message.usage.cache_creation.ephemeral_1h" in problem


def test_a_cache_creation_split_that_is_not_an_object_is_named() -> None:
    problem = usage_problem({"input_tokens": 1, "cache_creation": [5]})
    assert problem == "field 'message.usage.cache_creation' should be an object, found list"


def test_a_single_count_past_the_limit_is_named_on_its_own() -> None:
    # compactMetadata.preTokens and receipt counts are checked alone, with no sum after.
    assert count_problem(COUNT_LIMIT - 1, "compactMetadata.preTokens") is None
    problem = count_problem(COUNT_LIMIT, "compactMetadata.preTokens")
    assert problem is not None and "'compactMetadata.preTokens' is too large" in problem


# -- a billed line without a message id ------------------------------------------------------


def _no_id_line(number: int, request: str | None, uuid: str | None) -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": number}
    record: dict[str, Any] = {
        "type": "assistant",
        "message": {
            "id": None,
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": f"part {number}"}],
            "usage": usage,
        },
        "timestamp": f"2026-11-01T10:00:{number:02d}.000Z",
    }
    if request is not None:
        record["requestId"] = request
    if uuid is not None:
        record["uuid"] = uuid
    return record


@pytest.mark.parametrize(
    ("lines", "calls"),
    [
        # The streamed lines of one request share it: one call.
        ([("req_1", "u1"), ("req_1", "u2")], ["request:req_1"]),
        ([("req_1", "u1"), ("req_2", "u2")], ["request:req_1", "request:req_2"]),
        # No request id: each line is its own call, by uuid, else by line number.
        ([(None, "u1"), (None, "u2")], ["line:u1", "line:u2"]),
        ([(None, None), (None, None)], ["line:1", "line:2"]),
    ],
    ids=["one-request", "two-requests", "by-uuid", "by-line"],
)
def test_lines_with_usage_but_no_message_id_are_billed_once_each(
    tmp_path: Path, lines: list[tuple[str | None, str | None]], calls: list[str]
) -> None:
    path = tmp_path / "s.jsonl"
    records = [_no_id_line(n, request, uuid) for n, (request, uuid) in enumerate(lines, 1)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    transcript = read_claude_code(path)
    assert [call.message_id for call in transcript.billed_calls()] == calls


def test_a_line_without_usage_or_message_id_is_no_call() -> None:
    record = _no_id_line(1, "req_1", "u1")
    del record["message"]["usage"]
    assert Entry(record, 1).message_id is None


# -- another agent's file ----------------------------------------------------------------------


def test_the_refusal_names_the_file_and_the_format_it_looks_like(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    line = {"timestamp": "2026-04-07T14:00:00.000Z", "type": "session_meta", "payload": {}}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError) as caught:
        read_claude_code(path)
    assert caught.value.path == str(path)
    assert "it looks like a Codex CLI rollout (format 'codex')" in str(caught.value)


def test_a_file_of_only_records_no_format_knows_is_still_read(tmp_path: Path) -> None:
    # A newer Claude Code writes types the reader does not know: an empty session, no error.
    path = tmp_path / "s.jsonl"
    line = {"type": "permission-mode", "permissionMode": "default", "sessionId": "s"}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    transcript = read_claude_code(path)
    assert transcript.meta["unknown_record_types"] == {"permission-mode": 1}


# -- times and kinds of the JSON-document readers ----------------------------------------------


def test_a_mini_swe_agent_time_out_of_range_is_left_out_with_a_warning(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix the bug.", "extra": {"timestamp": 1_775_000_000}},
        {"role": "assistant", "content": "Done.", "extra": {"timestamp": 1e20}},
    ]
    document = {"info": {}, "messages": messages, "trajectory_format": "mini-swe-agent-1"}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    transcript = read_mini_swe_agent(path)
    assert [w for w in transcript.warnings if "out of range (1e+20 seconds" in w]
    # The reply keeps the time before it.
    assert transcript.entries[-1].timestamp == transcript.entries[-2].timestamp


def test_an_openhands_sdk_event_timestamp_that_is_not_a_string_is_named(tmp_path: Path) -> None:
    event = {
        "id": "e1",
        "timestamp": 5,
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    }
    path = tmp_path / "events.json"
    path.write_text(json.dumps([event]), encoding="utf-8")
    with pytest.raises(TranscriptError, match="field 'timestamp' should be a string, found"):
        read_openhands_sdk(path)


# -- names that are not UTF-8 ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("café.jsonl", "café.jsonl"),  # valid names are shown as they are
        ("caf\udce9.jsonl", "caf\\xe9.jsonl"),  # os.fsdecode(b"caf\xe9.jsonl"): the byte
        ("a\ud800b", "a\\ud800b"),  # a surrogate no file name decodes to
    ],
    ids=["utf8", "escaped-byte", "other-surrogate"],
)
def test_a_name_is_printable_on_a_strict_utf8_stream(name: str, shown: str) -> None:
    assert printable(name) == shown
    assert shorten_middle(name, 80) == shown
    shown.encode("utf-8")  # strict: raises on a lone surrogate


# -- a batch survives one session's crash ------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures" / "sessions"


@pytest.fixture
def two_sessions(tmp_path: Path) -> list[Path]:
    """Two valid sessions in a folder; the second is the one made to crash."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    paths = [folder / "a.jsonl", folder / "b.jsonl"]
    for path, name in zip(paths, ("interrupted.jsonl", "mixed_models.jsonl"), strict=True):
        path.write_bytes((FIXTURES / name).read_bytes())
    return paths


def _crash_on(path: Path, original: Any) -> Any:
    def crashing(address: str, *args: Any, **kwargs: Any) -> Any:
        if str(address) == str(path):
            raise ZeroDivisionError("made to crash")
        return original(address, *args, **kwargs)

    return crashing


@pytest.mark.parametrize("command", ["replay", "eval"])
def test_a_session_that_crashes_fails_alone_and_the_batch_goes_on(
    two_sessions: list[Path],
    command: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, bad = two_sessions
    if command == "replay":
        target = replay_command
        monkeypatch.setattr(target, "open_address", _crash_on(bad, target.open_address))
    else:
        monkeypatch.setattr(loader, "detect_format", _crash_on(bad, loader.detect_format))
    extra = ["--no-variants"] if command == "replay" else []
    with caplog.at_level(logging.ERROR, logger="unbounded.cli.batch"):
        result = CliRunner().invoke(app, [command, str(good.parent), "--json", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert [f["path"] for f in data["failed"]] == [str(bad)]
    assert "unexpected ZeroDivisionError: made to crash" in data["failed"][0]["error"]
    # The other session was run.
    ran = data["sessions"] if command == "replay" else list(data["by_session"])
    assert len(ran) == 1 and str(good) in str(ran)
    assert "Traceback" in caplog.text and "made to crash" in caplog.text


def test_one_session_that_crashes_keeps_its_traceback(
    two_sessions: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # eval runs one session through the batch's runner too: a bug is not dressed as an error.
    bad = two_sessions[1]
    monkeypatch.setattr(loader, "detect_format", _crash_on(bad, loader.detect_format))
    result = CliRunner().invoke(app, ["eval", str(bad), "--json"])
    assert isinstance(result.exception, ZeroDivisionError)


def test_a_codex_refresh_after_a_user_message_is_no_second_call(tmp_path: Path) -> None:
    """Without totals, only the model's own output between two equal usage events makes the
    second a new call: a user message or a tool's output before a refresh does not."""
    from test_readers_attack15 import _codex_line, _codex_message, _token_count
    from unbounded.transcripts.codex import read_codex

    last = {"input_tokens": 1_000, "cached_input_tokens": 0, "output_tokens": 10}
    meta = {"id": "0c0de000-0000-4000-8000-000000000002", "cwd": "/w", "cli_version": "0.118.0"}
    records = [
        _codex_line("session_meta", meta, 0),
        _codex_line("turn_context", {"cwd": "/w", "model": "gpt-5.4"}, 1),
        _codex_line("response_item", _codex_message("user", "input_text", "first"), 2),
        _codex_line("response_item", _codex_message("assistant", "output_text", "one"), 3),
        _codex_line("event_msg", _token_count(last, None), 4),
        _codex_line("response_item", _codex_message("user", "input_text", "second"), 5),
        _codex_line("event_msg", _token_count(last, None), 6),
    ]
    path = tmp_path / "refresh.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    assert len(read_codex(path).billed_calls()) == 1
