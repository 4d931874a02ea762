"""Codex CLI rollouts: detection, the mapping to entries, usage per model call, compaction, bad
input, the default session search, and OpenAI pricing in replay."""

from __future__ import annotations

import itertools
import json
import os
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import CORPUS, FIXTURES
from unbounded.caching.fidelity import simulate_recorded_session
from unbounded.catalog import load_model_table
from unbounded.cli.app import app
from unbounded.compaction import CompactableTools
from unbounded.compaction.facts import extract_facts
from unbounded.errors import TranscriptError
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.evaluation.sources import codex_sessions_dir, latest_codex_session, latest_session
from unbounded.inspection import inspect_transcript
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.tokens.estimate import ContextCounter
from unbounded.transcripts import codex
from unbounded.transcripts.codex import read_codex
from unbounded.transcripts.codex_items import command_text, output_failed
from unbounded.transcripts.importing import parse_arguments
from unbounded.transcripts.loader import detect_format, load_transcript

ROLLOUT = FIXTURES / "codex_rollout.jsonl"
CORPUS_ROLLOUT = CORPUS / "OpenPrintKit_codex-rollout-c61729d4.jsonl"
runner = CliRunner()


def tool_blocks(entries: list[Entry], kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in entries:
        content = entry.content
        if isinstance(content, list):
            found.extend(b for b in content if isinstance(b, dict) and b.get("type") == kind)
    return found


def check_view(entries: list[Entry]) -> list[Any]:
    """The view is a valid request and every tool_use is answered exactly once."""
    messages = normalize_messages(entries)
    validate_request(messages)
    uses = [b["id"] for b in tool_blocks(entries, "tool_use")]
    results = [b["tool_use_id"] for b in tool_blocks(entries, "tool_result")]
    assert sorted(uses) == sorted(results) and len(set(uses)) == len(uses)
    return messages


_CLOCK = itertools.count()


def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A rollout line, one second after the previous one (records are never simultaneous)."""
    moment = datetime(2025, 10, 1, 8, tzinfo=timezone.utc) + timedelta(seconds=next(_CLOCK))
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"timestamp": stamp, "type": kind, "payload": payload}


def user(text: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": text}]
    return line("response_item", {"type": "message", "role": "user", "content": content})


def say(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return line("response_item", {"type": "message", "role": "assistant", "content": content})


def call(call_id: str, script: str) -> dict[str, Any]:
    arguments = json.dumps({"command": ["bash", "-lc", script]})
    payload = {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id}
    return line("response_item", payload)


def output(call_id: str, text: str) -> dict[str, Any]:
    payload = {"type": "function_call_output", "call_id": call_id, "output": text}
    return line("response_item", payload)


def usage(prompt: int, cached: int, produced: int, totals: dict[str, int]) -> dict[str, Any]:
    last = {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": produced}
    for key, value in last.items():
        totals[key] = totals.get(key, 0) + value
    info = {"total_token_usage": dict(totals), "last_token_usage": last}
    return line("event_msg", {"type": "token_count", "info": info})


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


META = line("session_meta", {"id": "s-1", "cwd": "/w", "cli_version": "0.34.0"})


# -- the fixture (recent Codex: usage after the response's items) ----------------------------


@pytest.fixture(scope="module")
def rollout() -> Transcript:
    return load_transcript(ROLLOUT)


def test_detected_from_content(tmp_path: Path) -> None:
    copy = tmp_path / "session.txt"
    copy.write_bytes(ROLLOUT.read_bytes())
    assert detect_format(copy) == "codex"
    assert load_transcript(copy).format == "codex"


def test_context_messages_are_meta_and_prompts_are_not(rollout: Transcript) -> None:
    users = [e for e in rollout.entries if e.type == "user" and isinstance(e.content, str)]
    meta = [e.content for e in users if e.is_meta]
    prompts = [e.content for e in users if not e.is_meta and not e.is_compact_summary]
    assert any("<permissions instructions>" in str(text) for text in meta)
    assert prompts[:2] == [
        "The parse_size tests fail on '10k'. Find out why and fix it.",
        "Also accept decimals such as '1.5M'.",
    ]
    agents = [e for e in rollout.entries if e.type == "user" and isinstance(e.content, list)]
    assert agents[0].is_meta and "AGENTS.md" in agents[0].content[0]["text"]  # type: ignore[index]
    developer = next(e for e in rollout.entries if e.data.get("codexRole") == "developer")
    assert developer.is_meta
    # The UI events that repeat response items leave no entries of their own.
    assert sum(1 for text in prompts if text.startswith("Also accept")) == 2  # + replacement


def test_parallel_calls_are_one_response_with_one_usage(rollout: Transcript) -> None:
    first = [e for e in rollout.entries if e.message_id == "codex_msg_1"]
    assert [b["id"] for b in tool_blocks(first, "tool_use")] == ["call_read_grep", "call_read_file"]
    messages = normalize_messages(rollout.main_thread()[: rollout.entries.index(first[-1]) + 3])
    assert [b["type"] for b in messages[-2]["content"]] == ["tool_use", "tool_use"]  # type: ignore[index]
    assert all(e.usage == first[0].usage for e in first)
    assert first[0].usage == {
        "input_tokens": 5_200,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 180,
    }


def test_calls_usage_and_models(rollout: Transcript) -> None:
    calls = rollout.api_calls()
    # Nine responses; the info-less and the repeated usage events count for nothing, and the
    # usage of Codex's own summary call belongs to no response of the file.
    assert len(calls) == 9
    assert [c.model for c in calls] == ["gpt-5-codex"] * 5 + ["gpt-5"] * 4
    # The main model is the one with the most calls.
    assert rollout.model == "gpt-5-codex"
    assert rollout.models() == {"gpt-5-codex": 5, "gpt-5": 4}
    assert calls[1].usage["cache_read_input_tokens"] == 4_992
    assert calls[1].usage["input_tokens"] == 6_100 - 4_992
    assert rollout.meta["unattributed_token_counts"] == 1
    assert rollout.meta["model_context_window"] == rollout.reported_window == 272_000
    assert rollout.meta["ordering"] == "trailing"
    assert rollout.warnings == []


def test_tool_inputs(rollout: Transcript) -> None:
    uses = {b["id"]: b for b in tool_blocks(rollout.entries, "tool_use")}
    grep = uses["call_read_grep"]
    assert grep["name"] == "shell"
    assert grep["input"] == {"command": 'rg -n "def parse_size" -S', "workdir": "/home/dev/widget"}
    carrier = next(e for e in rollout.entries if grep in tool_blocks([e], "tool_use"))
    assert carrier.data["codexArgv"] == ["bash", "-lc", 'rg -n "def parse_size" -S']
    assert uses["call_patch"]["name"] == "apply_patch"
    assert uses["call_patch"]["input"]["input"].startswith("*** Begin Patch")
    assert uses["call_test_pass"]["input"]["command"] == "pytest -q tests/test_units.py"
    texts = [b.get("text") for b in tool_blocks(rollout.entries, "text")]
    assert "[web search: python parse decimal size suffix]" in texts


def test_results_errors_and_the_unanswered_call(rollout: Transcript) -> None:
    results = {b["tool_use_id"]: b for b in tool_blocks(rollout.entries, "tool_result")}
    assert results["call_test_fail"].get("is_error") is True
    assert results["call_decimal"].get("is_error") is True
    assert "is_error" not in results["call_test_pass"]
    assert "is_error" not in results["call_patch"]
    lint = results["call_lint"]
    assert lint["content"] == codex.NO_OUTPUT
    synthetic = [e for e in rollout.entries if e.data.get("syntheticToolResult")]
    assert len(synthetic) == 1


def test_reasoning_and_unknown_items_never_reach_the_api(rollout: Transcript) -> None:
    progress = [e.data["data"] for e in rollout.entries if e.type == "progress"]
    kinds = [d["type"] for d in progress]
    assert kinds.count("codex_reasoning") == 2 and kinds.count("codex_turn_context") == 2
    assert {"codex_item", "codex_event"} <= set(kinds)
    reasoning = next(d for d in progress if d["type"] == "codex_reasoning")
    assert reasoning == {
        "type": "codex_reasoning",
        "summary": "**Locating parse_size**",
        "encrypted": True,
    }
    text = json.dumps(normalize_messages(rollout.main_thread()))
    assert "Locating parse_size" not in text and "ghost_commit" not in text


def test_compaction_view_is_what_codex_sent(rollout: Transcript) -> None:
    (boundary,) = rollout.boundaries()
    assert boundary.compact_metadata["trigger"] == "auto"
    assert boundary.compact_metadata["preTokens"] == 7_600 + 400
    view = rollout.view_entries()
    summaries = [e for e in view if e.is_compact_summary]
    assert len(summaries) == 1 and "int()" in str(summaries[0].content)
    before_summary = view[1 : view.index(summaries[0])]
    assert before_summary[0].is_meta  # the environment context again
    assert [e.content for e in before_summary[1:]] == [
        "The parse_size tests fail on '10k'. Find out why and fix it.",
        "Also accept decimals such as '1.5M'.",
    ]
    messages = check_view(view)
    assert messages[0]["role"] == "user"
    # Every call before a recorded response sees a valid request too.
    main = rollout.main_thread()
    for api_call in rollout.api_calls():
        check_view(messages_after_compact_boundary(main[: api_call.first]))


def test_chain_ids_and_round_trip(rollout: Transcript, tmp_path: Path) -> None:
    uuids = [e.uuid for e in rollout.entries]
    assert all(uuids) and len(set(uuids)) == len(uuids)
    for previous, entry in zip(rollout.entries, rollout.entries[1:], strict=False):
        if not entry.is_compact_boundary:
            assert entry.parent_uuid == previous.uuid
    assert all(
        e.data.get("sessionId") == "5f0c9a42-7b1d-4e38-a2c6-1d9e8f7a6b54" for e in rollout.entries
    )
    from unbounded.transcripts import write_claude_code

    out = tmp_path / "as_claude_code.jsonl"
    write_claude_code(rollout.entries, out)
    again = load_transcript(out)
    assert again.format == "claude-code"
    assert [e.data for e in again.entries] == [e.data for e in rollout.entries]


def test_facts_and_compactable_tools(rollout: Transcript) -> None:
    facts = extract_facts(rollout.main_thread())
    assert "pytest -q tests/test_units.py" in facts.commands
    assert 'rg -n "def parse_size" -S' in facts.commands
    assert not any("AGENTS.md" in p or "environment_context" in p for p in facts.user_prompts)
    assert facts.user_prompts[0].startswith("The parse_size tests fail")
    assert any("invalid literal" in error.text for error in facts.errors)
    tools = CompactableTools.default()
    assert tools.canonical("shell") == "Bash" and tools.canonical("shell_command") == "Bash"
    assert tools.canonical("apply_patch") == "Edit"
    assert not tools.is_compactable("update_plan")


def test_inspect_uses_the_window_the_session_reported(rollout: Transcript) -> None:
    report = inspect_transcript(rollout)
    assert report.model.name == "gpt-5-codex" and report.thresholds.context_window == 272_000
    assert any("272,000" in note for note in report.notes)
    assert inspect_transcript(rollout, window=400_000).thresholds.context_window == 400_000


# -- Codex 0.3x: usage before the response, each output right after its call ----------------


def test_leading_usage_and_interleaved_parallel_calls(tmp_path: Path) -> None:
    totals: dict[str, int] = {}
    records = [
        META,
        user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        user("list and count"),
        usage(3_000, 0, 50, totals),
        call("c1", "ls"),
        output("c1", json.dumps({"output": "a\nb\n", "metadata": {"exit_code": 0}})),
        call("c2", "wc -l a"),
        output("c2", json.dumps({"output": "no such file", "metadata": {"exit_code": 1}})),
        usage(3_400, 2_944, 20, totals),
        say("Two files; `a` is missing."),
    ]
    transcript = read_codex(write(tmp_path / "old.jsonl", records))
    assert transcript.meta["ordering"] == "leading"
    assert transcript.model == codex.DEFAULT_CODEX_MODEL
    assert len(transcript.warnings) == 1 and codex.MODEL_ASSUMED in transcript.warnings[0]
    calls = transcript.api_calls()
    assert [c.usage["input_tokens"] for c in calls] == [3_000, 3_400 - 2_944]
    messages = check_view(transcript.main_thread())
    assert [b["id"] for b in messages[1]["content"]] == ["c1", "c2"]  # type: ignore[index]
    results = {b["tool_use_id"]: b for b in tool_blocks(transcript.entries, "tool_result")}
    assert results["c2"]["is_error"] is True and "is_error" not in results["c1"]


def test_usage_events_without_totals_still_count(tmp_path: Path) -> None:
    def last_only(prompt: int) -> dict[str, Any]:
        info = {"last_token_usage": {"input_tokens": prompt, "output_tokens": 5}}
        return line("event_msg", {"type": "token_count", "info": info})

    records = [META, user("go"), say("one"), last_only(1_000), last_only(1_000)]
    transcript = read_codex(write(tmp_path / "no_totals.jsonl", records))
    # The second event repeats the first exactly, nothing in between: a rate-limit refresh.
    assert [call.usage for call in transcript.api_calls()] == [{"input_tokens": 1_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 5}]
    # The same usage after another response's items is that response's call (same size).
    records[4:4] = [user("again"), say("two")]
    calls = read_codex(write(tmp_path / "same.jsonl", records)).api_calls()
    assert [call.usage["input_tokens"] for call in calls] == [1_000, 1_000]
    records += [say("three"), last_only(1_100)]
    calls = read_codex(write(tmp_path / "more.jsonl", records)).api_calls()
    assert [call.usage["input_tokens"] for call in calls] == [1_000, 1_000, 1_100]


def test_compacted_without_replacement_history(tmp_path: Path) -> None:
    totals: dict[str, int] = {}
    records = [
        META,
        user("<user_instructions>\nBe brief.\n</user_instructions>"),
        user("first request"),
        usage(2_000, 0, 10, totals),
        say("done"),
        user("second request"),
        usage(2_100, 1_920, 10, totals),
        say("done again"),
        usage(2_200, 2_048, 300, totals),  # Codex's summary call
        line("compacted", {"message": "Both requests were handled."}),
        user("third request"),
        usage(900, 0, 10, totals),
        say("ok"),
    ]
    transcript = read_codex(write(tmp_path / "compacted.jsonl", records))
    view = transcript.view_entries()
    assert view[0].is_compact_boundary and view[0].compact_metadata["preTokens"] == 2_500
    assert view[1].is_meta and "Be brief" in str(view[1].content)
    summary = view[2]
    assert summary.is_compact_summary
    assert summary.content == "first request\n\nsecond request\n\nBoth requests were handled."
    check_view(view)
    assert extract_facts(view).user_prompts == ("third request",)


def test_an_output_for_no_open_call_is_kept_with_a_warning(tmp_path: Path) -> None:
    records = [META, user("go"), output("ghost", "text"), say("ok")]
    transcript = read_codex(write(tmp_path / "orphan.jsonl", records))
    assert any("ghost" in w and "not open" in w for w in transcript.warnings)
    assert not tool_blocks(transcript.entries, "tool_result")
    check_view(transcript.main_thread())


def test_unknown_record_and_event_types_are_progress(tmp_path: Path) -> None:
    records = [
        META,
        user("go"),
        {"timestamp": "2025-10-01T08:00:01.000Z", "type": "future_thing", "payload": {"x": 1}},
        line("event_msg", {"type": "exec_command_end", "call_id": "c", "exit_code": 0}),
        line("response_item", {"type": "brand_new_item", "data": [1, 2]}),
        say("ok"),
    ]
    transcript = read_codex(write(tmp_path / "unknown.jsonl", records))
    kinds = [e.data["data"]["type"] for e in transcript.entries if e.type == "progress"]
    assert kinds == ["codex_record", "codex_event", "codex_item"]
    check_view(transcript.main_thread())


# -- helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "failed"),
    [
        ('{"output":"x","metadata":{"exit_code":0}}', False),
        ('{"output":"x","metadata":{"exit_code":2}}', True),
        ("Exit code: 0\nWall time: 1s\nOutput:\nerror: in the output only\n", False),
        ("Exit code: 127\nOutput:\nbash: nope: command not found\n", True),
        ("Process exited with code 1\nOutput:\n", True),
        ("failed in sandbox LinuxSeccomp with execution error: sandbox denied", True),
        ("error: Failed to find expected lines in a.py", True),
        ("aborted by user", True),
        ("Plan updated", False),
        ({"content": "denied", "success": False}, True),
        ([{"type": "input_text", "text": "ok"}], False),
    ],
)
def test_output_failed(value: Any, failed: bool) -> None:
    assert output_failed(value) is failed


def test_command_text_and_arguments() -> None:
    assert command_text(["bash", "-lc", "ls -la && pwd"]) == "ls -la && pwd"
    assert command_text(["/bin/zsh", "-c", "echo hi"]) == "echo hi"
    assert command_text(["apply_patch", "*** Begin Patch\n"]) == "apply_patch '*** Begin Patch\n'"
    assert command_text(["python", "-c", "print(1)"]) == "python -c 'print(1)'"
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("not json") == {"raw": "not json"}
    assert parse_arguments("[1, 2]") == {"raw": "[1, 2]"}
    assert parse_arguments("") == {}


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (
            {"type": "function_call", "name": "shell", "arguments": 3, "call_id": "c"},
            "payload.arguments",
        ),
        ({"type": "function_call", "name": "shell", "arguments": "{}"}, "payload.call_id"),
        ({"type": "message", "role": "user", "content": "text"}, "payload.content"),
        (
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": 5}]},
            "payload.content[0].text",
        ),
        ({"type": "function_call_output", "call_id": "c", "output": 7}, "payload.output"),
        (
            {"type": "local_shell_call", "call_id": "c", "action": {"command": "ls"}},
            "payload.action.command",
        ),
        ({"type": "reasoning", "summary": "x"}, "payload.summary"),
    ],
)
def test_wrong_types_name_the_file_line_and_field(
    tmp_path: Path, payload: dict[str, Any], field: str
) -> None:
    path = write(tmp_path / "bad.jsonl", [META, user("go"), line("response_item", payload)])
    with pytest.raises(TranscriptError) as raised:
        load_transcript(path)
    message = str(raised.value)
    assert "bad.jsonl:3" in message and f"'{field}'" in message
    skipped = load_transcript(path, skip_invalid=True)
    assert skipped.skipped_lines == 1


def test_wrong_usage_and_meta_types(tmp_path: Path) -> None:
    info = {"last_token_usage": {"input_tokens": "many"}, "total_token_usage": {}}
    for record, field in (
        (
            line("event_msg", {"type": "token_count", "info": info}),
            "payload.info.last_token_usage.input_tokens",
        ),
        (line("turn_context", {"model": 5}), "payload.model"),
        (line("compacted", {"message": ["x"]}), "payload.message"),
        (line("session_meta", {"id": 1}), "payload.id"),
        ({"type": "response_item", "payload": "x"}, "payload"),
    ):
        path = write(tmp_path / "bad.jsonl", [META, record])
        with pytest.raises(TranscriptError, match=field.replace("[", r"\[")):
            load_transcript(path)


def test_malformed_line_and_unknown_format_hint(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_bytes(orjson.dumps(META) + b"\n{not json\n" + orjson.dumps(user("x")) + b"\n")
    with pytest.raises(TranscriptError, match=r"torn\.jsonl:2"):
        load_transcript(path)
    other = write(tmp_path / "other.jsonl", [{"kind": "something"}])
    with pytest.raises(TranscriptError, match="Codex CLI rollout"):
        load_transcript(other)


# -- properties --------------------------------------------------------------------------------


@st.composite
def rollouts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """Random sessions in either usage order: turns of responses with text and parallel calls
    (every response but a turn's last calls a tool, as a model does to keep going), their
    outputs (after the usage event, or right after each call in the 0.3x order; some missing in
    a turn's last response), and now and then a compaction. Returns the records and how many
    responses have usage."""
    leading = draw(st.booleans())
    records: list[dict[str, Any]] = [META]
    totals: dict[str, int] = {}
    calls = 0
    paid = 0
    for turn in range(draw(st.integers(1, 4))):
        records.append(user(f"request {turn}"))
        responses = draw(st.integers(1, 3))
        for number in range(responses):
            fewest = 0 if number == responses - 1 else 1
            ids = [f"c{calls + k}" for k in range(draw(st.integers(fewest, 3)))]
            calls += len(ids)
            # Codex answers every call before the model goes on; a turn's last response may
            # leave calls open (an interrupted turn).
            last = number == responses - 1
            answered = [i for i in ids if not last or draw(st.booleans())]
            has_usage = draw(st.booleans())
            speaks = draw(st.booleans()) or not ids
            body: list[dict[str, Any]] = [say("working")] if speaks else []
            tail: list[dict[str, Any]] = []
            for call_id in ids:
                body.append(call(call_id, f"echo {call_id}"))
                if call_id in answered:
                    (body if leading else tail).append(output(call_id, "Exit code: 0\nOutput:\n"))
            event = [usage(1_000 + 10 * len(records), 0, 5, totals)] if has_usage else []
            records += event + body + tail if leading else body + event + tail
            paid += has_usage
        if draw(st.integers(0, 4)) == 0:
            records.append(line("compacted", {"message": f"summary after turn {turn}"}))
    return records, paid


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(rollouts())
def test_any_rollout_gives_valid_views_and_one_call_per_paid_response(
    tmp_path_factory: pytest.TempPathFactory, generated: tuple[list[dict[str, Any]], int]
) -> None:
    records, paid = generated
    path = write(tmp_path_factory.mktemp("codex") / "r.jsonl", records)
    transcript = read_codex(path)
    assert len(transcript.api_calls()) == paid
    main = transcript.main_thread()
    check_view(transcript.view_entries())
    for api_call in transcript.api_calls():
        check_view(messages_after_compact_boundary(main[: api_call.first]))


# -- finding sessions --------------------------------------------------------------------------


def test_codex_sessions_dir_respects_codex_home(tmp_path: Path) -> None:
    assert codex_sessions_dir(tmp_path, {}) == tmp_path / ".codex" / "sessions"
    assert codex_sessions_dir(tmp_path, {"CODEX_HOME": "/opt/codex"}) == Path("/opt/codex/sessions")


def test_latest_session_across_claude_code_and_codex(tmp_path: Path) -> None:
    claude = tmp_path / ".claude" / "projects" / "p" / "a.jsonl"
    rollout = tmp_path / ".codex" / "sessions" / "2026" / "03" / "02" / "rollout-2026-03-02-x.jsonl"
    for path, stamp in ((claude, 2_000), (rollout, 3_000)):
        path.parent.mkdir(parents=True)
        path.write_text("{}\n")
        os.utime(path, (stamp, stamp))
    (rollout.parent / "notes.jsonl").write_text("{}\n")  # not a rollout
    assert latest_codex_session(tmp_path / ".codex" / "sessions") == rollout
    assert latest_session(tmp_path, {}) == rollout
    os.utime(claude, (4_000, 4_000))
    assert latest_session(tmp_path, {}) == claude
    assert latest_session(tmp_path, {"CODEX_HOME": str(tmp_path / "elsewhere")}) == claude
    assert latest_codex_session(tmp_path / "missing") is None


def test_replay_without_a_path_takes_the_newest_codex_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from unbounded.cli import replay_command  # noqa: F401

    home = tmp_path / "home"
    older = home / ".claude" / "projects" / "p" / "old.jsonl"
    older.parent.mkdir(parents=True)
    older.write_bytes((FIXTURES / "session_2_1.jsonl").read_bytes())
    os.utime(older, (1_000, 1_000))
    codex_home = tmp_path / "codex-home"
    newest = codex_home / "sessions" / "2026" / "03" / "02" / "rollout-2026-03-02T09-00-00-x.jsonl"
    newest.parent.mkdir(parents=True)
    newest.write_bytes(ROLLOUT.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    result = runner.invoke(app, ["replay", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"] == "02/" + newest.name
    assert data["model"] == "gpt-5-codex" and data["invalid_requests"] == 0
    # 9 responses replayed; the 10th billed call is Codex's own compaction summary.
    assert data["replayed_calls"] == 9 and data["calls"] == 10
    assert data["calls_not_replayed"] == {"side": 1} and data["context_window"] == 272_000


# -- OpenAI prices in replay ---------------------------------------------------------------------


def test_codex_replay_is_priced_on_its_own_openai_model(rollout: Transcript) -> None:
    report = replay_session(rollout, ReplayOptions(policy=Policy()))
    assert report.model == "gpt-5-codex" and report.invalid_requests == 0
    assert report.models == {"gpt-5-codex": 5, "gpt-5": 4}
    assert report.recorded_comparable and report.recorded_model == "gpt-5-codex"
    assert report.recorded_cost is not None and report.recorded_cost > 0
    # OpenAI caching: reads, never writes.
    assert all(p.cache_write == 0 for p in report.points)
    assert report.ours.cache_read_share > 0
    costs = report.costs()
    assert costs["recorded_comparable"] is True


def test_another_provider_is_not_comparable(rollout: Transcript) -> None:
    report = replay_session(
        rollout, ReplayOptions(model="claude-sonnet-4-5", policy=Policy(), baselines=False)
    )
    assert not report.recorded_comparable and report.recorded_model == "gpt-5-codex"
    assert report.costs()["recorded_comparable"] is False
    assert any("not comparable" in note for note in report.notes)
    assert report.context_window == load_model_table().get("claude-sonnet-4-5").context_window


def _one_hour_session(model: str) -> Transcript:
    usage_1h = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 20_000,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 20_000},
        "output_tokens": 10,
    }
    entries = [
        Entry.user("Fix the bug. " * 40, timestamp="2026-02-01T12:00:00.000Z"),
        Entry.assistant(
            [{"type": "text", "text": "Looking."}],
            message_id="msg_1",
            model=model,
            usage=usage_1h,
            timestamp="2026-02-01T12:00:05.000Z",
        ),
        Entry.user("And the other one.", timestamp="2026-02-01T12:01:00.000Z"),
        Entry.assistant(
            [{"type": "text", "text": "Done."}],
            message_id="msg_2",
            model=model,
            usage={
                **usage_1h,
                "cache_read_input_tokens": 20_000,
                "cache_creation_input_tokens": 30,
            },
            timestamp="2026-02-01T12:01:05.000Z",
        ),
    ]
    return Transcript(entries=entries, format="claude-code")


def test_an_openai_model_replays_a_one_hour_claude_session() -> None:
    transcript = _one_hour_session("claude-sonnet-4-5")
    fidelity = simulate_recorded_session(transcript, load_model_table().get("gpt-4o"))
    assert fidelity.recorded_cost_usd is None  # no 1-hour tier to price it with
    report = replay_session(transcript, ReplayOptions(model="gpt-4o", policy=Policy()))
    assert report.invalid_requests == 0
    assert not report.recorded_comparable and report.recorded_model == "claude-sonnet-4-5"
    assert report.recorded_cost is not None and report.recorded_cost > 0
    assert all(p.cache_write == 0 for p in report.points)


def test_an_unpriceable_recording_has_no_recorded_cost() -> None:
    # 1-hour cache writes recorded for a model without that tier cannot be priced.
    report = replay_session(
        _one_hour_session("gpt-4o"), ReplayOptions(model="gpt-4o", policy=Policy())
    )
    assert report.recorded_cost is None
    assert report.costs()["recorded_comparable"] is False
    assert any("1-hour cache" in note for note in report.notes)


def test_cli_marks_the_recorded_cost_not_comparable() -> None:
    from unbounded.cli import replay_command  # noqa: F401

    result = runner.invoke(app, ["replay", str(ROLLOUT), "--model", "claude-sonnet-4-5"])
    assert result.exit_code == 0, result.stderr
    assert "not comparable" in result.stdout


# -- the corpus rollout (Codex 0.34) ------------------------------------------------------------


def _corpus_rollout() -> Path:
    if not CORPUS_ROLLOUT.is_file():
        pytest.skip("../shared/corpus/raw is not present")
    return CORPUS_ROLLOUT


@pytest.mark.corpus
def test_corpus_rollout_mapping_and_counter() -> None:
    transcript = load_transcript(_corpus_rollout())
    assert transcript.meta["ordering"] == "leading"
    calls = transcript.api_calls()
    assert len(calls) == 456 and transcript.meta["unattributed_token_counts"] == 0
    uses = tool_blocks(transcript.entries, "tool_use")
    assert len(uses) == 400 and len(tool_blocks(transcript.entries, "tool_result")) == 400
    assert sum(1 for b in tool_blocks(transcript.entries, "tool_result") if b.get("is_error")) == 38
    main = transcript.main_thread()
    counter = ContextCounter()
    errors = []
    starts = {c.first: c for c in calls}
    for index, entry in enumerate(main):
        api_call = starts.get(index)
        if api_call is not None and counter.anchored:
            errors.append(abs(counter.total - api_call.prompt_tokens) / api_call.prompt_tokens)
        counter.append(entry)
    # Each call's prompt, predicted from the previous call's usage plus the estimate of what
    # came since: a median error of 0.01% and a 90th percentile of 0.6% on this session.
    assert statistics.median(errors) < 0.001
    assert statistics.quantiles(errors, n=10)[-1] < 0.01


@pytest.mark.corpus
def test_corpus_rollout_replay_and_compact() -> None:
    from unbounded.cli import compact_command, replay_command  # noqa: F401

    path = _corpus_rollout()
    result = runner.invoke(app, ["replay", str(path), "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["calls"] == 456 and data["invalid_requests"] == 0 and data["overflows"] == 0
    assert data["context_window"] == 272_000
    cost = data["cost"]
    assert cost["recorded_comparable"] and cost["recorded_model"] == "gpt-5"
    # early, free (session-memory) compactions keep the context near half the threshold
    assert 0.2 < cost["unbounded"] / cost["recorded"] < 1.0
    compacted = runner.invoke(app, ["compact", str(path), "--json"])
    assert compacted.exit_code == 0, compacted.stderr
