"""Session-file readers under attack (session 15): each test is a bug found by hand-made hostile
input, kept as a strict xfail until it was fixed. The rules they check: bad input is a clear
error naming the file and the line (never a traceback), every billed call counts once (never
dropped), a file of another agent's format is not read as an empty session, nothing is
half-written. Every fixture is built here; none is copied from the corpus."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.errors import TranscriptError
from unbounded.model.transcript import Transcript
from unbounded.transcripts.claude_code import read_claude_code
from unbounded.transcripts.codex import read_codex
from unbounded.transcripts.loader import load_transcript
from unbounded.transcripts.openhands import read_openhands

runner = CliRunner()
SESSION = "5e55e000-0000-4000-8000-000000000001"


def _uuid(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def _usage(**counts: Any) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 50,
    }
    usage.update(counts)
    return usage


def _user(number: int, parent: int | None, content: Any) -> dict[str, Any]:
    return {
        "parentUuid": _uuid(parent) if parent else None,
        "isSidechain": False,
        "sessionId": SESSION,
        "version": "2.1.99",
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": _uuid(number),
        "timestamp": f"2026-11-01T10:00:{number:02d}.000Z",
    }


def _assistant(number: int, parent: int, message_id: str | None, usage: Any) -> dict[str, Any]:
    return {
        "parentUuid": _uuid(parent),
        "isSidechain": False,
        "sessionId": SESSION,
        "version": "2.1.99",
        "type": "assistant",
        "message": {
            "model": "claude-sonnet-4-5",
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {number}"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        },
        "requestId": f"req_{number}",
        "uuid": _uuid(number),
        "timestamp": f"2026-11-01T10:00:{number:02d}.000Z",
    }


def _claude_session(first_usage: Any, *, first_id: str | None = "msg_1") -> list[dict[str, Any]]:
    """Two prompts, two responses; the first response's usage and id as given."""
    return [
        _user(1, None, "hello"),
        _assistant(2, 1, first_id, first_usage),
        _user(3, 2, "go on"),
        _assistant(4, 3, "msg_2", _usage(output_tokens=70)),
    ]


def _codex_line(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": f"2026-04-07T14:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _codex_message(role: str, kind: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _token_count(last: dict[str, int], total: dict[str, int] | None) -> dict[str, Any]:
    info: dict[str, Any] = {"last_token_usage": last, "model_context_window": 258_400}
    if total is not None:
        info["total_token_usage"] = total
    return {"type": "token_count", "info": info}


def _codex_rollout(*, totals: bool = True) -> list[dict[str, Any]]:
    """Two turns, one response each, each response's usage event after its items; both
    responses report the same usage (a cached prompt of the same size)."""
    last = {"input_tokens": 1_000, "cached_input_tokens": 0, "output_tokens": 10}
    return [
        _codex_line(
            "session_meta",
            {
                "id": "0c0de000-0000-4000-8000-000000000001",
                "cwd": "/w",
                "cli_version": "0.118.0",
                "model_provider": "openai",
            },
            0,
        ),
        _codex_line("turn_context", {"cwd": "/w", "model": "gpt-5.4"}, 1),
        _codex_line("response_item", _codex_message("user", "input_text", "first"), 2),
        _codex_line("response_item", _codex_message("assistant", "output_text", "one"), 3),
        _codex_line("event_msg", _token_count(last, dict(last) if totals else None), 4),
        _codex_line("response_item", _codex_message("user", "input_text", "second"), 5),
        _codex_line("response_item", _codex_message("assistant", "output_text", "two"), 6),
        _codex_line(
            "event_msg",
            _token_count(last, {k: 2 * v for k, v in last.items()} if totals else None),
            7,
        ),
    ]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _run(*args: str) -> Result:
    return runner.invoke(app, list(args))


def _fails_cleanly_naming(result: Result, path: Path, line: int) -> bool:
    """Exit status 2 (unbounded's own error, no traceback) with `file:line` in the message."""
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    return not crashed and result.exit_code == 2 and f"{path}:{line}" in result.stderr


# -- 1. usage.cache_creation (the 5m / 1h split) is read but never type-checked -------------


@pytest.mark.parametrize(
    "split",
    [
        {"ephemeral_5m_input_tokens": "abc"},
        {"ephemeral_1h_input_tokens": [1]},
        {"ephemeral_1h_input_tokens": 1e30},
        {"ephemeral_5m_input_tokens": -5},
    ],
    ids=["string", "list", "huge-float", "negative"],
)
def test_a_cache_creation_split_that_is_not_a_count_is_a_named_error(
    tmp_path: Path, split: dict[str, Any]
) -> None:
    path = _write(tmp_path / "s.jsonl", _claude_session(_usage(cache_creation=split)))
    result = _run("replay", str(path), "--json", "--no-variants")
    assert _fails_cleanly_naming(result, path, 2), result.exception or result.stderr


# -- 2. token counts past 2**63 overflow the 64-bit record columns --------------------------


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("inspect", _usage(output_tokens=2**64 - 1)),
        ("inspect", _usage(input_tokens=2**62, output_tokens=2**62)),
        ("replay", _usage(input_tokens=2**63 - 1)),
    ],
    ids=["inspect-u64-count", "inspect-sum-past-i64", "replay-i64-max"],
)
def test_a_token_count_too_large_to_hold_is_a_named_error(
    tmp_path: Path, command: str, usage: dict[str, Any]
) -> None:
    path = _write(tmp_path / "s.jsonl", _claude_session(usage))
    result = _run(command, str(path), "--json", *(["--no-variants"] if command == "replay" else []))
    assert _fails_cleanly_naming(result, path, 2), result.exception or result.stderr


def test_a_codex_token_count_too_large_to_hold_is_a_named_error(tmp_path: Path) -> None:
    records = _codex_rollout()
    records[4]["payload"]["info"]["last_token_usage"]["input_tokens"] = 2**63
    path = _write(tmp_path / "rollout.jsonl", records)
    result = _run("replay", str(path), "--json", "--no-variants")
    assert _fails_cleanly_naming(result, path, 5), result.exception or result.stderr


# -- 3. Codex item validation reads into a null list element --------------------------------


@pytest.mark.parametrize("where", ["message-content", "reasoning-summary"])
def test_a_null_element_in_a_codex_item_list_is_a_named_error(tmp_path: Path, where: str) -> None:
    records = _codex_rollout()
    if where == "message-content":
        records[3]["payload"]["content"] = [None]
    else:
        records.insert(3, _codex_line("response_item", {"type": "reasoning", "summary": [None]}, 3))
    path = _write(tmp_path / "rollout.jsonl", records)
    result = _run("inspect", str(path), "--json")
    assert _fails_cleanly_naming(result, path, 4), result.exception or result.stderr


# -- 4. Codex ordering detection hashes an item type it has not checked ---------------------


@pytest.mark.parametrize("skip_invalid", [False, True], ids=["refused", "skipped"])
def test_a_codex_item_type_that_is_not_a_string_is_a_named_error(
    tmp_path: Path, skip_invalid: bool
) -> None:
    records = _codex_rollout()
    records.insert(5, _codex_line("response_item", {"type": {"x": 1}}, 4))
    path = _write(tmp_path / "rollout.jsonl", records)
    if skip_invalid:
        result = _run("inspect", str(path), "--json", "--skip-invalid")
        assert result.exception is None and result.exit_code == 0, result.exception
        assert json.loads(result.stdout)["skipped_lines"] == 1
    else:
        result = _run("inspect", str(path), "--json")
        assert _fails_cleanly_naming(result, path, 6), result.exception or result.stderr


# -- 5. replay --report is written in place --------------------------------------------------


def _session_named_in_latin1(folder: Path) -> Path:
    """A session file whose name is not UTF-8 (`caf\\xe9.jsonl`), or a skip where the file
    system or the name decoding cannot have one."""
    name = os.fsdecode(b"caf\xe9.jsonl")
    if "\udce9" not in name:
        pytest.skip("file names here are not decoded with surrogate escapes")
    try:
        return _write(folder / name, _claude_session(_usage()))
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses a file name that is not UTF-8")


def test_the_report_of_a_session_whose_name_is_not_utf8_is_written_whole(tmp_path: Path) -> None:
    path = _session_named_in_latin1(tmp_path)
    report = tmp_path / "report.html"
    report.write_text("<html>the previous report</html>", encoding="utf-8")
    result = _run("replay", str(path), "--json", "--no-variants", "--report", str(report))
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    text = report.read_text(encoding="utf-8", errors="replace")
    assert text == "<html>the previous report</html>" or text.rstrip().endswith("</html>")


# -- 6. a reader given another agent's file returns an empty session, silently --------------


def _read_or_error(read: Any, path: Path) -> Transcript | TranscriptError:
    try:
        transcript: Transcript = read(path)
    except TranscriptError as error:
        return error
    return transcript


@pytest.mark.parametrize(
    ("reader", "written"),
    [("claude-code", "codex"), ("codex", "claude-code"), ("openhands", "claude-code")],
)
def test_a_reader_given_another_agents_file_says_so(
    tmp_path: Path, reader: str, written: str
) -> None:
    records = _codex_rollout() if written == "codex" else _claude_session(_usage())
    path = _write(tmp_path / "session.jsonl", records)
    assert load_transcript(path).format == written  # detection itself is right
    read = {"claude-code": read_claude_code, "codex": read_codex, "openhands": read_openhands}
    outcome = _read_or_error(read[reader], path)
    assert isinstance(outcome, TranscriptError) or outcome.warnings, (
        f"{outcome.records} records, {len(outcome.billed_calls())} calls, no warning"
    )


# -- 7. billed calls dropped -----------------------------------------------------------------


def test_two_codex_responses_of_the_same_size_without_totals_are_two_calls(
    tmp_path: Path,
) -> None:
    with_totals = read_codex(_write(tmp_path / "a.jsonl", _codex_rollout(totals=True)))
    assert len(with_totals.billed_calls()) == 2  # the rollout as Codex writes it
    without = read_codex(_write(tmp_path / "b.jsonl", _codex_rollout(totals=False)))
    assert len(without.billed_calls()) == 2


def test_a_response_with_usage_but_no_message_id_is_still_billed(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", _claude_session(_usage(), first_id=None))
    transcript = load_transcript(path)
    assert len(transcript.billed_calls()) == 2 or transcript.warnings


# -- 8. the JSON-document readers: unchecked times and kinds ---------------------------------


def _mini_trajectory(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "info": {
            "model_stats": {"instance_cost": 0.01, "api_calls": 1},
            "config": {"model": {"model_name": "gpt-5.4"}},
            "mini_version": "2.0.0",
            "exit_status": "Submitted",
        },
        "messages": [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Done.", "extra": extra},
        ],
        "trajectory_format": "mini-swe-agent-1",
    }


@pytest.mark.parametrize(
    "extra",
    [{"timestamp": 1e20}, {"response": {"created": 10**19}}],
    ids=["extra-timestamp", "response-created"],
)
def test_a_mini_swe_agent_time_out_of_range_is_no_crash(
    tmp_path: Path, extra: dict[str, Any]
) -> None:
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(_mini_trajectory(extra), indent=1), encoding="utf-8")
    result = _run("inspect", str(path), "--json")
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    assert result.exit_code == 0 or str(path) in result.stderr


def _sdk_events(**second: Any) -> list[dict[str, Any]]:
    user = {
        "id": "e1",
        "timestamp": "2026-04-07T14:00:01.000000+00:00",
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    }
    user.update(second)
    return [
        {
            "id": "e0",
            "timestamp": "2026-04-07T14:00:00.000000+00:00",
            "source": "agent",
            "kind": "SystemPromptEvent",
            "system_prompt": {"type": "text", "text": "You are an agent."},
            "tools": [],
        },
        user,
        {
            "id": "e2",
            "timestamp": "2026-04-07T14:00:02.000000+00:00",
            "source": "agent",
            "kind": "MessageEvent",
            "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        },
    ]


@pytest.mark.parametrize(
    "field", [{"timestamp": 5}, {"kind": ["MessageEvent"]}], ids=["timestamp-number", "kind-list"]
)
def test_an_openhands_sdk_event_field_of_the_wrong_type_is_a_named_error(
    tmp_path: Path, field: dict[str, Any]
) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_sdk_events(**field)), encoding="utf-8")
    result = _run("inspect", str(path), "--json")
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    assert result.exit_code == 0 or str(path) in result.stderr


def _openhands_event(number: int, **fields: Any) -> dict[str, Any]:
    event = {"id": number, "timestamp": f"2025-03-14T10:00:0{number}", "source": "user"}
    event.update(fields)
    return event


@pytest.mark.parametrize(
    "where",
    ["swe-agent-tool-calls", "swe-agent-trajectory", "openhands-history", "openhands-pairs"],
)
def test_a_null_element_in_a_trajectory_list_is_a_named_error(tmp_path: Path, where: str) -> None:
    if where.startswith("swe-agent"):
        path = tmp_path / "run.traj"
        assistant: dict[str, Any] = {"role": "assistant", "content": "Looking.", "action": "ls"}
        document: dict[str, Any] = {
            "history": [
                {"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": "Fix the bug."},
                assistant,
            ],
            "trajectory": [],
            "info": {},
        }
        if where == "swe-agent-tool-calls":
            assistant["tool_calls"] = [None]
        else:
            document["trajectory"] = [None]
        path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    else:
        path = tmp_path / "output.jsonl"
        prompt = _openhands_event(
            1, message="Fix the bug.", action="message", args={"content": "Fix the bug."}
        )
        if where == "openhands-history":
            history: list[Any] = [None, prompt]
        else:
            observation = _openhands_event(2, message="ok", observation="null", content="")
            history = [[prompt, observation], None]
        line = {"instance_id": "a__b-1", "instruction": "Fix the bug.", "history": history}
        path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    result = _run("inspect", str(path), "--json")
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    assert result.exit_code == 2 and str(path) in result.stderr


def test_a_mini_swe_agent_token_count_too_large_to_hold_is_a_named_error(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "cache_creation_input_tokens": 10**19}
    extra = {"response": {"id": "chatcmpl-1", "model": "gpt-5.4", "usage": usage}}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(_mini_trajectory(extra), indent=1), encoding="utf-8")
    result = _run("replay", str(path), "--json", "--no-variants")
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    assert result.exit_code == 0 or str(path) in result.stderr


@pytest.mark.parametrize("command", ["inspect", "replay"])
def test_a_session_whose_name_is_not_utf8_is_shown(tmp_path: Path, command: str) -> None:
    path = _session_named_in_latin1(tmp_path)
    assert (
        _run(
            command, str(path), "--json", *(["--no-variants"] if command == "replay" else [])
        ).exit_code
        == 0
    )
    result = _run(command, str(path), *(["--no-variants"] if command == "replay" else []))
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, result.exception
    assert result.exit_code == 0
