"""Every session file, every version: the record shapes of each agent version the project
knows read into the same model, new record types never reject a file, and the thread keeps
every call.

The fixtures in tests/fixtures/versions are written by tests/fixtures/build_versions.py; its
docstring says which version writes which shape.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.catalog import load_model_table
from unbounded.cli import app
from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.thread import rebuild_thread
from unbounded.transcripts.claude_code import write_claude_code
from unbounded.transcripts.loader import detect_format, load_transcript

VERSIONS = FIXTURES / "versions"
runner = CliRunner()


def fixture(name: str) -> Path:
    return VERSIONS / name


def cli_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def tool_ids(messages: list[Any]) -> list[str]:
    return [
        b["id"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def test_the_version_fixtures_are_what_their_builder_writes() -> None:
    spec = importlib.util.spec_from_file_location("build_versions", FIXTURES / "build_versions.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    built = builder.build()
    on_disk = {
        str(p.relative_to(VERSIONS)) for p in VERSIONS.rglob("*") if p.is_file()
    }
    assert on_disk == set(built)
    for name, data in built.items():
        assert (VERSIONS / name).read_bytes() == data, f"rebuild {name}: python {spec.origin}"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-2.0.2-vscode.jsonl", "claude-code"),
        ("claude-2.1.45.jsonl", "claude-code"),
        ("claude-2.1.78-hooks.jsonl", "claude-code"),
        ("claude-2.1.92.jsonl", "claude-code"),
        ("codex-0.44.jsonl", "codex"),
        ("codex-0.63.jsonl", "codex"),
        ("codex-0.118.jsonl", "codex"),
        ("mini-swe-agent-1.traj.json", "mini-swe-agent"),
        ("mini-swe-agent-1.1-toolcall.traj.json", "mini-swe-agent"),
        ("openhands-sdk-conversation", "openhands-sdk"),
        ("openhands-sdk-conversation/events", "openhands-sdk"),
        ("openhands-sdk-events.json", "openhands-sdk"),
    ],
)
def test_each_version_is_detected_from_its_content(name: str, expected: str) -> None:
    assert detect_format(fixture(name)) == expected
    transcript = load_transcript(fixture(name))
    messages = normalize_messages(transcript.view_entries())
    validate_request(messages)
    assert messages and messages[0]["role"] == "user"


# -- Build 1: unknown is not invalid ----------------------------------------------------------


def test_a_file_opening_with_a_record_type_no_reader_knows_reads() -> None:
    """2.1.92 opens with `permission-mode`: it used to be "unknown transcript format"."""
    transcript = load_transcript(fixture("claude-2.1.92.jsonl"))
    assert transcript.unknown_record_types == {"permission-mode": 1, "last-prompt": 3}
    inspected = cli_json("inspect", str(fixture("claude-2.1.92.jsonl")))
    assert inspected["unknown_record_types"] == {"permission-mode": 1, "last-prompt": 3}
    assert (
        "2 record types this version does not know: permission-mode ×1, last-prompt ×3"
        in " ".join(inspected["warnings"])
    )


def test_unknown_records_are_written_back_unchanged(tmp_path: Path) -> None:
    source = fixture("claude-2.1.92.jsonl")
    written = tmp_path / "compacted.jsonl"
    result = runner.invoke(app, ["compact", str(source), "-o", str(written)])
    assert result.exit_code == 0, result.output
    original = [line for line in source.read_bytes().splitlines() if b'"permission-mode"' in line or b'"last-prompt"' in line]
    lines = written.read_bytes().splitlines()
    assert len(original) == 4 and all(line in lines for line in original)


def test_a_file_with_no_conversation_record_is_still_refused(tmp_path: Path) -> None:
    only_metadata = tmp_path / "metadata.jsonl"
    only_metadata.write_text(
        '{"type":"permission-mode","permissionMode":"default","sessionId":"s"}\n'
        '{"type":"ai-title","aiTitle":"x","sessionId":"s"}\n'
    )
    with pytest.raises(TranscriptError, match="no conversation record"):
        detect_format(only_metadata)


KNOWN_NAMES = {
    "user", "assistant", "system", "attachment", "progress", "summary", "custom-title",
    "queue-operation", "file-history-snapshot", "compacted", "tool", "exit",
}
RECORD_TYPE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=12).filter(
    lambda name: name.strip("-") == name and name not in KNOWN_NAMES
)
READERS = {
    "claude-2.1.45.jsonl": "jsonl",
    "claude-2.0.2-vscode.jsonl": "jsonl",
    "codex-0.63.jsonl": "jsonl",
    "mini-swe-agent-1.traj.json": "messages",
    "openhands-sdk-events.json": "list",
    "../openhands_output.jsonl": "history",
    "../swe_agent_v1.traj": "traj",
}
"""A fixture per reader (Claude Code, Codex, mini-swe-agent, OpenHands SDK, OpenHands,
SWE-agent), and where records go in it."""


def _with_unknown_records(name: str, kinds: list[str], where: list[int]) -> tuple[bytes, dict[str, int]]:
    """The fixture with records of unknown types put in at the given places, each in its
    format's envelope, and the names the reader counts them under."""
    raw = fixture(name).read_bytes()
    counted: dict[str, int] = {}
    shape = READERS[name]

    def count(label: str) -> None:
        counted[label] = counted.get(label, 0) + 1

    if shape == "jsonl":
        lines = raw.splitlines()
        for kind, at in zip(kinds, where, strict=True):
            if name.startswith("codex"):
                record: dict[str, Any] = {"timestamp": "2026-04-07T14:00:01.000Z", "type": kind, "payload": {"x": 1}}
            else:
                record = {"type": kind, "sessionId": "s", "value": [1, {"nested": True}]}
            lines.insert(at % (len(lines) + 1), json.dumps(record).encode())
            count(kind)
        return b"\n".join(lines) + b"\n", counted
    if shape == "history":
        lines = raw.splitlines()
        evaluation = json.loads(lines[0])
        history = evaluation["history"]
        for number, (kind, at) in enumerate(zip(kinds, where, strict=True)):
            history.insert(at % (len(history) + 1), {"id": 9_000 + number, "kind": kind})
            count(f"event {kind}")
        lines[0] = json.dumps(evaluation).encode()
        return b"\n".join(lines) + b"\n", counted
    document = json.loads(raw)
    items = {"messages": document["messages"] if shape == "messages" else None, "list": document, "traj": document.get("history") if isinstance(document, dict) else None}[shape]
    assert isinstance(items, list)
    for number, (kind, at) in enumerate(zip(kinds, where, strict=True)):
        # Past the system prompt and the task: an unknown record there would be the first.
        place = 2 + at % (len(items) - 1)
        if shape == "list":
            items.insert(place, {"id": f"unknown-{number}", "kind": kind.title(), "source": "agent"})
            count(f"event {kind.title()}")
        else:
            items.insert(place, {"role": kind, "content": "x"})
            count(f"message of role {kind}" if shape == "messages" else f"history item of role {kind}")
    return json.dumps(document).encode(), counted


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(READERS)),
    kinds=st.lists(RECORD_TYPE, min_size=1, max_size=4),
    data=st.data(),
)
def test_any_reader_keeps_and_counts_record_types_it_has_never_seen(
    tmp_path: Path, name: str, kinds: list[str], data: st.DataObject
) -> None:
    where = data.draw(st.lists(st.integers(0, 200), min_size=len(kinds), max_size=len(kinds)))
    content, injected = _with_unknown_records(name, kinds, where)
    path = tmp_path / f"unknown-{Path(name).name}"
    path.write_bytes(content)
    plain = load_transcript(fixture(name))
    mixed = load_transcript(path)
    expected = dict(plain.unknown_record_types)
    for label, count in injected.items():
        expected[label] = expected.get(label, 0) + count
    assert mixed.unknown_record_types == expected  # every one counted, none missed
    assert mixed.records == plain.records + len(kinds)  # every one kept
    # ... and otherwise passed over: the same request and the same billed calls.
    assert normalize_messages(mixed.view_entries()) == normalize_messages(plain.view_entries())
    assert [c.message_id for c in mixed.billed_calls()] == [c.message_id for c in plain.billed_calls()]


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("mini-swe-agent-1.traj.json", {"role": "reviewer", "content": "looks fine"}),
        ("openhands-sdk-events.json", {"id": "x", "kind": "FutureEvent", "source": "agent"}),
    ],
)
def test_the_new_readers_count_what_they_do_not_know(tmp_path: Path, name: str, event: dict[str, Any]) -> None:
    document = json.loads(fixture(name).read_text())
    if isinstance(document, list):
        document.insert(2, event)
        expected = {"event ConversationRatingEvent": 1, "event FutureEvent": 1}
    else:
        document["messages"].insert(3, event)
        expected = {"message of role reviewer": 1}
    path = tmp_path / name
    path.write_text(json.dumps(document))
    transcript = load_transcript(path)
    assert transcript.unknown_record_types == expected
    plain = load_transcript(fixture(name))
    assert normalize_messages(transcript.view_entries()) == normalize_messages(plain.view_entries())


# -- Build 2: the thread keeps every call, and says what it leaves out and why --------------------


def test_hook_progress_chains_keep_every_call_of_2_1_78() -> None:
    """Each prompt hangs off the last hook record of a chain that starts at the turn's first
    tool call: the rebuild used to keep 8 of the 20 calls and call the rest rewound."""
    transcript = load_transcript(fixture("claude-2.1.78-hooks.jsonl"))
    assert len(transcript.api_calls()) == 20
    assert transcript.thread_report().branches == [] and transcript.warnings == []
    ids = tool_ids(normalize_messages(transcript.view_entries()))
    assert len(ids) == len(set(ids)) == 16
    # Each later prompt follows the turn's answer, not the Stop hook's record before it.
    main = transcript.main_thread()
    prompts = [i for i, e in enumerate(main) if e.type == "user" and isinstance(e.content, str)]
    for index in prompts[1:]:
        parent = next(e for e in main if e.uuid == main[index].parent_uuid)
        assert parent.type == "progress"  # as written
    answers = [e for e in main if e.type == "assistant" and "passes." in json.dumps(e.content)]
    assert len(answers) == 4


def test_a_message_after_a_progress_record_of_an_abandoned_turn_keeps_its_parent() -> None:
    """The redirect takes the latest message only when it descends from the record the
    progress chain hangs off; otherwise the named parent stands."""
    root = Entry.user("first", timestamp="2026-01-01T00:00:00.000Z")
    call = Entry.assistant(
        [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
        message_id="m1",
        parent_uuid=root.uuid,
        usage={"input_tokens": 1, "output_tokens": 1},
    )
    progress = Entry({"type": "progress", "uuid": "p1", "parentUuid": call.uuid, "data": {}})
    result = Entry.user(
        [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}], parent_uuid=call.uuid
    )
    elsewhere = Entry.user("a prompt of another branch", parent_uuid=root.uuid)
    after = Entry.user("hangs off the progress record", parent_uuid="p1")
    thread, _ = rebuild_thread([root, call, progress, result, elsewhere, after])
    assert [e.uuid for e in thread if e.type != "progress"] == [root.uuid, call.uuid, result.uuid, after.uuid]


def test_a_rewound_branch_is_reported_with_where_it_is_and_what_it_holds() -> None:
    transcript = load_transcript(fixture("claude-2.1.92.jsonl"))
    (branch,) = transcript.thread_report().branches
    assert branch.reason == "rewound"
    assert (branch.prompts, branch.responses, branch.tool_results) == (1, 2, 1)
    lines = fixture("claude-2.1.92.jsonl").read_text().splitlines()
    assert "Rewrite the CLI in Rust" in lines[branch.first_line - 1]
    assert json.loads(lines[branch.fork_line - 1])["uuid"] == json.loads(lines[branch.first_line - 1])["parentUuid"]
    (warning,) = transcript.warnings
    assert warning.startswith(
        f"left out of the thread: 1 rewound branch (line {branch.first_line}, branching from "
        f"line {branch.fork_line}: 1 prompt, 2 responses, 1 tool result): the conversation went "
        "back to an earlier message"
    )
    assert "billed all the same" in warning


def test_each_left_out_branch_counts_what_it_holds() -> None:
    (branch,) = load_transcript(FIXTURES / "sessions" / "rewound.jsonl").thread_report().branches
    assert (branch.prompts, branch.responses, branch.tool_results) == (1, 3, 2)


def test_a_second_result_for_an_answered_call_stays_out_of_the_thread() -> None:
    """A side-branch tool result is brought back only for a call the path leaves unanswered."""
    prompt = Entry.user("go")
    call = Entry.assistant(
        [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
        message_id="m1",
        parent_uuid=prompt.uuid,
        usage={"input_tokens": 1, "output_tokens": 1},
    )
    answer = Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "a"}], parent_uuid=call.uuid)
    again = Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "b"}], parent_uuid=call.uuid)
    reply = Entry.assistant([{"type": "text", "text": "ok"}], message_id="m2", parent_uuid=answer.uuid)
    thread, report = rebuild_thread([prompt, call, answer, again, reply])
    assert again not in thread and report.duplicates == 0
    assert [(b.reason, b.tool_results) for b in report.branches] == [("rewound", 1)]


def test_records_whose_parents_loop_are_detached() -> None:
    """A damaged file whose records name each other as parents never joins the thread."""
    prompt = Entry.user("the thread", extra={"sessionId": "s"})
    reply = Entry.assistant([{"type": "text", "text": "ok"}], message_id="m1", parent_uuid=prompt.uuid, extra={"sessionId": "s"})
    one = Entry.user("loop one", parent_uuid="loop-two", extra={"sessionId": "s"})
    one.data["uuid"] = "loop-one"
    two = Entry.user("loop two", parent_uuid="loop-one", extra={"sessionId": "s"})
    two.data["uuid"] = "loop-two"
    thread, report = rebuild_thread([prompt, one, two, reply])
    assert [e.uuid for e in thread] == [prompt.uuid, reply.uuid]
    assert [(b.reason, b.prompts, b.session) for b in report.branches] == [("detached", 2, None)]


def test_history_a_resume_wrote_again_is_reported_as_copied_not_rewound() -> None:
    transcript = load_transcript(FIXTURES / "sessions" / "resumed.jsonl")
    (branch,) = transcript.thread_report().branches
    assert branch.reason == "copied" and branch.session == "5e55107a-0000-4000-8000-00000000000a"
    (warning,) = transcript.warnings
    assert "1 copied branch" in warning and "the thread follows the copy" in warning
    assert "billed all the same" not in warning  # its responses are the thread's own


def test_records_a_client_wrote_again_under_the_same_uuid_are_read_once() -> None:
    """The VS Code extension appends records again on reopening (same uuid and time)."""
    transcript = load_transcript(fixture("claude-2.0.2-vscode.jsonl"))
    report = transcript.thread_report()
    assert report.copies == 12 and report.branches == []
    assert any("12 record(s) written again under uuids already in the file" in w for w in transcript.warnings)
    main = transcript.main_thread()
    assert len({e.uuid for e in main}) == len(main)
    assert len(transcript.api_calls()) == len(transcript.billed_calls()) == 11
    replayed = cli_json("replay", str(fixture("claude-2.0.2-vscode.jsonl")))
    assert replayed["calls"] == replayed["replayed_calls"] == 11


def test_a_response_line_written_again_later_is_the_same_line() -> None:
    """A response's line under a new uuid and a new time (history written again) is kept once:
    the replay never sees one response at two places."""
    first = Entry.user("go", timestamp="2026-01-01T00:00:00.000Z")
    line = Entry.assistant([{"type": "text", "text": "done"}], message_id="m1", parent_uuid=first.uuid, usage={"input_tokens": 1, "output_tokens": 2}, timestamp="2026-01-01T00:00:01.000Z")
    again = Entry(json.loads(json.dumps(line.data)))
    again.data["uuid"] = "another-uuid"
    again.data["parentUuid"] = line.uuid
    again.data["timestamp"] = "2026-01-01T09:00:00.000Z"
    thread, report = rebuild_thread([first, line, again])
    assert [e.uuid for e in thread] == [first.uuid, line.uuid] and report.duplicates == 1


def test_a_synthetic_message_is_never_a_billed_call() -> None:
    transcript = load_transcript(fixture("claude-2.0.2-vscode.jsonl"))
    synthetic = [e for e in transcript.main_thread() if e.model == "<synthetic>"]
    assert len(synthetic) == 1 and synthetic[0].usage is None
    assert synthetic[0].message is not None and "usage" in synthetic[0].message  # recorded, zeros
    assert all(c.model != "<synthetic>" for c in transcript.billed_calls())
    assert "<synthetic>" not in transcript.models()


def test_calls_on_a_rewound_branch_are_priced_in_every_strategy() -> None:
    replayed = cli_json("replay", str(fixture("claude-2.1.92.jsonl")))
    assert replayed["calls_not_replayed"] == {"branch": 2}
    fixed = {name: run["fixed_cost"] for name, run in replayed["strategies"].items()}
    assert len(set(fixed.values())) == 1 and next(iter(fixed.values())) > 0
    assert any("on branches the thread does not follow" in note for note in replayed["notes"])


# -- Build 3: Codex and OpenAI models priced as themselves ---------------------------------------


def test_a_codex_model_missing_from_the_table_gets_openai_figures_and_the_reported_window() -> None:
    path = fixture("codex-0.118.jsonl")
    assert load_model_table().find("gpt-7-codex") is None
    inspected = cli_json("inspect", str(path))
    assert inspected["model"] == "gpt-7-codex" and inspected["model_source"] == "assumed"
    assert inspected["context_window"] == 258_400
    replayed = cli_json("replay", str(path))
    assert replayed["model"] == "gpt-7-codex" and replayed["model_assumed"] is True
    assert replayed["context_window"] == 258_400
    note = next(n for n in replayed["notes"] if "not in the model table" in n)
    assert "figures of gpt-5.4" in note and "no cache-write charge" in note
    gpt54 = load_model_table().get("gpt-5.4")
    assert gpt54.provider == "openai" and gpt54.cache_write_5m_multiplier == 1.0
    # Our replay pays no cache writes (OpenAI's automatic caching); the recording wrote none.
    assert replayed["strategies"]["unbounded"]["cost_parts"]["cache_writes"] == 0


def test_an_unknown_model_with_a_claude_name_is_not_priced_as_openai(tmp_path: Path) -> None:
    source = (FIXTURES / "sessions" / "mixed_models.jsonl").read_text()
    path = tmp_path / "renamed.jsonl"
    path.write_text(source.replace("claude-opus-4-6", "claude-opus-9"))
    inspected = cli_json("inspect", str(path))
    assert inspected["model"] == "claude-opus-9" and inspected["model_source"] == "assumed"
    assert any("claude-sonnet-5-5 (an Anthropic model" in w for w in inspected["warnings"])


# -- pre_tokens: one definition ----------------------------------------------------------------------


def test_pre_tokens_at_a_boundary_is_the_same_in_eval_inspect_and_compact() -> None:
    path = str(fixture("claude-2.1.45.jsonl"))
    (boundary,) = cli_json("inspect", path)["boundaries"]
    (point,) = cli_json("eval", path)["per_session"][0]["points"]
    compacted = cli_json("compact", path, "--at", "boundary")
    assert point["pre_tokens"] == boundary["counted_pre_tokens"] == compacted["pre_tokens"]
    assert point["recorded_pre_tokens"] == boundary["pre_tokens"]
    recorded = boundary["pre_tokens"]
    assert abs(point["pre_tokens"] - recorded) < 0.1 * recorded  # the same count, other moment


# -- timestamps -------------------------------------------------------------------------------------


def test_replay_of_a_transcript_without_timestamps_warns_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "untimed.jsonl"
    lines = (FIXTURES / "sessions" / "mixed_models.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        record.pop("timestamp", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    replayed = cli_json("replay", str(path))
    assert replayed["calls"] == replayed["replayed_calls"] == 13
    assert any("13 recorded calls without a timestamp" in note for note in replayed["notes"])


# -- Build 5: the same input gives the same output ----------------------------------------------------

_FRESH = re.compile(
    r'"(?:boundary_uuid|uuid|timestamp)": "[^"]*"|[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}'
)


def _run(seed: str, *args: str) -> str:
    environment = {**os.environ, "PYTHONHASHSEED": seed, "COLUMNS": "160"}
    result = subprocess.run(
        [sys.executable, "-m", "unbounded", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    return result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "--json"),
        ("replay", "--json"),
        ("eval", "--json"),
        ("compact", "--at", "end"),
        ("compact", "--at", "end", "--json"),
    ],
    ids=lambda args: " ".join(args),
)
def test_two_runs_under_different_hash_seeds_give_the_same_output(args: tuple[str, ...]) -> None:
    """Only the ids and times of newly written records may differ (here: the new boundary)."""
    path = str(FIXTURES / "sessions" / "notifications.jsonl")
    command, *options = args
    first = _run("1", command, path, *options)
    second = _run("2", command, path, *options)
    assert first and _FRESH.sub("…", first) == _FRESH.sub("…", second)


def test_the_hand_over_names_do_not_depend_on_the_hash_seed() -> None:
    path = str(FIXTURES / "swe_agent_v1.traj")
    outputs = {_FRESH.sub("…", _run(seed, "compact", path, "--at", "end")) for seed in ("1", "7", "1234")}
    assert len(outputs) == 1 and "Summary:" in outputs.pop()


def test_writing_back_keeps_the_records_a_reader_does_not_know(tmp_path: Path) -> None:
    transcript = load_transcript(fixture("claude-2.1.92.jsonl"))
    out = tmp_path / "copy.jsonl"
    write_claude_code(transcript.entries, out)
    assert load_transcript(out).unknown_record_types == transcript.unknown_record_types


def test_the_streamed_inspect_keeps_a_response_line_written_again_once(tmp_path: Path) -> None:
    """Streamed and loaded inspect key a response line by its id and content alone."""
    from unbounded.inspection import inspect_transcript
    from unbounded.inspection_stream import inspect_file

    first = Entry.user("go", timestamp="2026-01-01T00:00:00.000Z")
    line = Entry.assistant([{"type": "text", "text": "done"}], message_id="m1", parent_uuid=first.uuid, usage={"input_tokens": 1, "output_tokens": 2}, timestamp="2026-01-01T00:00:01.000Z")
    again = Entry(json.loads(json.dumps(line.data)))
    again.data.update(uuid="another-uuid", parentUuid=line.uuid, timestamp="2026-01-01T09:00:00.000Z")
    path = tmp_path / "again.jsonl"
    write_claude_code([first, line, again], path)
    streamed = inspect_file(path).to_dict()
    assert streamed == inspect_transcript(load_transcript(path)).to_dict()
    assert streamed["messages"] == 2 and streamed["api_calls"] == 1


def test_a_billed_call_keeps_its_first_line_and_its_last_usage() -> None:
    first = Entry.user("go", timestamp="2026-01-01T00:00:00.000Z")
    one = Entry.assistant([{"type": "text", "text": "a"}], message_id="m1", parent_uuid=first.uuid, usage={"input_tokens": 1, "output_tokens": 1}, timestamp="2026-01-01T00:00:01.000Z")
    two = Entry.assistant([{"type": "text", "text": "b"}], message_id="m1", parent_uuid=one.uuid, usage={"input_tokens": 1, "output_tokens": 9}, timestamp="2026-01-01T00:00:02.000Z")
    one.line, two.line = 2, 3
    from unbounded.model.transcript import Transcript

    (call,) = Transcript([first, one, two], "claude-code").billed_calls()
    assert (call.timestamp, call.line, call.usage["output_tokens"], call.uuid) == (
        "2026-01-01T00:00:01.000Z", 2, 9, two.uuid
    )


def test_the_provider_comes_from_the_format_before_the_name(tmp_path: Path) -> None:
    from unbounded.catalog import provider_of_name, resolve_recorded_model

    assert provider_of_name("gpt-9") == provider_of_name("openai/o5") == "openai"
    assert provider_of_name("anthropic/claude-x") == provider_of_name("claude-x") == "anthropic"
    assert provider_of_name("mystery-1") is None
    table = load_model_table()
    assert resolve_recorded_model(table, "mystery-1", provider="openai")[0].provider == "openai"
    assert resolve_recorded_model(table, "mystery-1")[0].provider == "anthropic"  # the default
    # A Codex rollout is OpenAI's whatever its model is called; pointed at a local server, not.
    rollout = fixture("codex-0.118.jsonl").read_text().replace("gpt-7-codex", "mystery-1")
    path = tmp_path / "rollout.jsonl"
    path.write_text(rollout)
    assert any("figures of gpt-5.4" in w for w in cli_json("inspect", str(path))["warnings"])
    path.write_text(rollout.replace('"model_provider":"openai"', '"model_provider":"ollama"'))
    assert any("figures of claude-sonnet-5-5" in w for w in cli_json("inspect", str(path))["warnings"])


def test_a_provider_prefix_and_an_unnamed_model_are_no_unknown_models() -> None:
    sdk = cli_json("inspect", str(fixture("openhands-sdk-conversation")))
    assert sdk["model"] == "claude-sonnet-4-5" and sdk["model_source"] == "transcript"
    unnamed = cli_json("inspect", str(fixture("openhands-sdk-events.json")))
    assert unnamed["model_source"] == "default"
    assert not any("not in the model table" in w for w in unnamed["warnings"])


def test_the_agents_own_summary_calls_are_in_the_recorded_cost_only() -> None:
    replayed = cli_json("replay", str(FIXTURES / "codex_rollout.jsonl"))
    assert replayed["calls_not_replayed"] == {"side": 1}
    assert all(run["fixed_cost"] == 0 for run in replayed["strategies"].values())


def test_a_leading_codex_rollout_counts_the_summary_call_before_its_compaction(tmp_path: Path) -> None:
    """Codex 0.3x writes the usage before the response it belongs to; the one before a
    `compacted` record is Codex's own summary call."""

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload})

    def usage(prompt: int) -> str:
        last = {"input_tokens": prompt, "cached_input_tokens": 0, "output_tokens": 10, "total_tokens": prompt + 10}
        info = {"total_token_usage": {"total_tokens": prompt * 7}, "last_token_usage": last, "model_context_window": 272_000}
        return line("event_msg", {"type": "token_count", "info": info})

    path = tmp_path / "leading.jsonl"
    path.write_text("\n".join([
        line("session_meta", {"id": "s", "cwd": "/w", "cli_version": "0.34.0"}),
        line("turn_context", {"model": "gpt-5", "cwd": "/w"}),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
        usage(100),
        line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}),
        usage(200),
        line("compacted", {"message": "they said hi"}),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}),
        usage(300),
        line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello again"}]}),
    ]) + "\n")
    transcript = load_transcript(path)
    assert transcript.meta["ordering"] == "leading"
    assert [c.place for c in transcript.billed_calls()] == ["thread", "side", "thread"]
