"""SWE-agent, mini-swe-agent, OpenHands and OpenHands SDK importers: detection, mapping, valid
API views, clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.model.transcript import Transcript
from unbounded.transcripts.loader import detect_format, load_transcript
from unbounded.transcripts.openhands import read_openhands
from unbounded.transcripts.swe_agent import command_name, looks_like_error, read_swe_agent

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
CORPUS_TRAJ = CORPUS / "SWE-agent-SWE-agent_pydicom__pydicom-1458.traj"

OPENHANDS_OUTPUT = FIXTURES / "openhands_output.jsonl"
OPENHANDS_PAIRS = FIXTURES / "openhands_pairs.jsonl"
SWE_AGENT_V1 = FIXTURES / "swe_agent_v1.traj"


def corpus_traj() -> Path:
    if not CORPUS.is_dir() or not CORPUS_TRAJ.is_file():
        pytest.skip(f"corpus not available at {CORPUS}")
    return CORPUS_TRAJ


def blocks(entries: list[Entry], kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in entries:
        content = entry.content
        if isinstance(content, list):
            found.extend(b for b in content if isinstance(b, dict) and b.get("type") == kind)
    return found


def check_view(transcript: Transcript) -> list[Any]:
    """The view is a valid request and every tool_use is answered exactly once."""
    messages = normalize_messages(transcript.view_entries())
    validate_request(messages)
    view = transcript.view_entries()
    uses = [b["id"] for b in blocks(view, "tool_use")]
    results = [b["tool_use_id"] for b in blocks(view, "tool_result")]
    assert len(uses) == len(set(uses))
    assert sorted(uses) == sorted(results)
    return messages


def check_chain(entries: list[Entry]) -> None:
    uuids = [e.uuid for e in entries]
    assert all(uuids) and len(set(uuids)) == len(uuids)
    known = set(uuids)
    assert all(e.parent_uuid is None or e.parent_uuid in known for e in entries)


ALL_FIXTURES = [
    (OPENHANDS_OUTPUT, "openhands"),
    (OPENHANDS_PAIRS, "openhands"),
    (SWE_AGENT_V1, "swe-agent"),
]


# -- detection ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "expected"), ALL_FIXTURES)
def test_format_detected_from_content(path: Path, expected: str, tmp_path: Path) -> None:
    assert detect_format(path) == expected
    renamed = tmp_path / "x.txt"
    shutil.copy(path, renamed)
    assert detect_format(renamed) == expected
    assert load_transcript(renamed).format == expected


@pytest.mark.corpus
def test_corpus_traj_detected_from_content(tmp_path: Path) -> None:
    path = corpus_traj()
    assert detect_format(path) == "swe-agent"
    renamed = tmp_path / "x.txt"
    shutil.copy(path, renamed)
    assert detect_format(renamed) == "swe-agent"


def test_single_line_traj_and_event_array_detected(tmp_path: Path) -> None:
    document = orjson.loads(SWE_AGENT_V1.read_bytes())
    one_line = tmp_path / "a.jsonl"
    one_line.write_bytes(orjson.dumps(document))
    assert detect_format(one_line) == "swe-agent"

    events = orjson.loads(OPENHANDS_OUTPUT.read_bytes())["history"]
    compact = tmp_path / "events.json"
    compact.write_bytes(orjson.dumps(events))
    assert detect_format(compact) == "openhands"
    pretty = tmp_path / "events_pretty.json"
    pretty.write_bytes(orjson.dumps(events, option=orjson.OPT_INDENT_2))
    assert detect_format(pretty) == "openhands"
    for path in (compact, pretty):
        transcript = load_transcript(path)
        check_view(transcript)
        assert len(blocks(transcript.view_entries(), "tool_use")) == 5
        assert transcript.meta["instances"] == []


# -- OpenHands flat events -----------------------------------------------------------------------
def test_openhands_output_maps_events() -> None:
    transcript = load_transcript(OPENHANDS_OUTPUT)
    assert transcript.format == "openhands"
    assert transcript.meta["instances"] == ["acme__pager-17"]
    assert transcript.meta["system"].startswith("You are OpenHands agent")
    assert [t["function"]["name"] for t in transcript.meta["tools"]] == [
        "execute_bash",
        "str_replace_editor",
        "finish",
    ]
    check_chain(transcript.entries)
    view = transcript.view_entries()
    uses = blocks(view, "tool_use")
    assert [u["id"] for u in uses] == [f"toolu_pg_0{n}" for n in range(1, 6)]
    assert [u["name"] for u in uses] == [
        "execute_bash",
        "str_replace_editor",
        "str_replace_editor",
        "execute_bash",
        "finish",
    ]
    # Input comes from the model response's arguments, not the action args.
    assert uses[1]["input"] == {"command": "view", "path": "/workspace/pager/pager.py"}
    results = {b["tool_use_id"]: b for b in blocks(view, "tool_result")}
    errors = sorted(k for k, b in results.items() if b.get("is_error"))
    assert errors == ["toolu_pg_03", "toolu_pg_04"]  # ERROR: edit, exit code 1
    assert results["toolu_pg_01"]["content"] == "pager.py\ntest_pager.py"
    synthetic = [e for e in view if e.data.get("syntheticToolResult")]
    assert len(synthetic) == 1  # finish is never answered by OpenHands
    assert all(e.data["instanceId"] == "acme__pager-17" for e in view)
    assert all(e.time is not None and e.time.year == 2025 for e in view)


def test_openhands_non_conversation_events_are_progress() -> None:
    transcript = read_openhands(OPENHANDS_OUTPUT)
    progress = [e for e in transcript.entries if e.type == "progress"]
    kinds = [
        e.data["data"]["event"].get("action") or e.data["data"]["event"].get("observation")
        for e in progress
    ]
    assert kinds == ["system", "recall", "recall", "agent_state_changed"]
    assert all(e.data["data"]["type"] == "openhands_event" for e in progress)
    assert transcript.warnings == []


def test_openhands_parallel_calls_share_one_message_and_usage() -> None:
    transcript = read_openhands(OPENHANDS_OUTPUT)
    messages = check_view(transcript)
    assert [m["role"] for m in messages] == ["user", "assistant"] * 5 + ["user"]
    first_response = messages[1]["content"]
    assert [b["type"] for b in first_response] == ["text", "tool_use", "tool_use"]
    calls = transcript.api_calls()
    assert [c.message_id for c in calls] == [f"chatcmpl-pager-r{n}" for n in range(1, 5)]
    assert calls[0].usage == {
        "input_tokens": 206,
        "cache_creation_input_tokens": 5004,
        "cache_read_input_tokens": 0,
        "output_tokens": 142,
    }
    assert calls[1].usage["input_tokens"] == 5980 - 5004 - 760
    assert calls[1].usage["cache_read_input_tokens"] == 5004
    with_usage = [e for e in transcript.main_thread() if e.usage is not None]
    assert len(with_usage) == 4  # one per response, not one per action
    assert transcript.model == "claude-sonnet-4-20250514"


# -- OpenHands old pairs, several evaluations -----------------------------------------------------
def test_openhands_pairs_view_is_first_instance() -> None:
    transcript = load_transcript(OPENHANDS_PAIRS)
    assert transcript.meta["instances"] == ["acme__cli-3", "acme__tests-9"]
    evaluations = transcript.meta["evaluations"]
    assert [e["instance_id"] for e in evaluations] == transcript.meta["instances"]
    check_chain(transcript.entries)
    view = transcript.view_entries()
    assert {e.data["instanceId"] for e in view} == {"acme__cli-3"}
    assert not any(e.is_sidechain for e in view)
    messages = check_view(transcript)
    assert messages[0]["content"].startswith("Add a --version flag")
    uses = blocks(view, "tool_use")
    assert [u["name"] for u in uses] == ["run", "write", "run", "finish"]
    assert [u["id"] for u in uses] == ["oh_2", "oh_4", "oh_6", "oh_8"]
    assert uses[0]["input"]["command"] == "cat cli.py"
    assert "thought" not in uses[0]["input"]
    assert not any(b.get("is_error") for b in blocks(view, "tool_result"))

    others = transcript.sidechains()
    assert len(others) == 1
    (second,) = others.values()
    assert {e.data["instanceId"] for e in second} == {"acme__tests-9"}
    assert all(e.is_sidechain for e in second)
    second_uses = blocks(second, "tool_use")
    assert [u["name"] for u in second_uses] == ["run", "run_ipython"]
    # Ids stay unique over the file although both evaluations number events from 0.
    assert [u["id"] for u in second_uses] == ["oh_2_2", "oh_4_2"]
    errors = [b for b in blocks(second, "tool_result") if b.get("is_error")]
    assert len(errors) == 1  # exit code 127
    validate_request(normalize_messages(second))


def test_openhands_line_longer_than_sniffed_head(tmp_path: Path) -> None:
    record = orjson.loads(OPENHANDS_OUTPUT.read_bytes())
    record["instruction"] = "x" * 100_000  # instance_id and instruction come before history
    big = tmp_path / "big.jsonl"
    big.write_bytes(orjson.dumps(record) + b"\n" + orjson.dumps(record) + b"\n")
    assert detect_format(big) == "openhands"
    transcript = load_transcript(big)
    assert transcript.meta["instances"] == ["acme__pager-17", "acme__pager-17"]
    assert all(e.line == 1 for e in transcript.main_thread())
    check_view(transcript)


def test_openhands_skip_invalid_and_line_errors(tmp_path: Path) -> None:
    lines = OPENHANDS_PAIRS.read_bytes().splitlines(keepends=True)
    broken = tmp_path / "broken_output.jsonl"
    broken.write_bytes(lines[0] + b'{"instance_id": "x", "history": [}\n')
    with pytest.raises(TranscriptError) as caught:
        read_openhands(broken)
    assert "broken_output.jsonl:2" in str(caught.value)
    assert "malformed JSON" in str(caught.value)
    transcript = read_openhands(broken, skip_invalid=True)
    assert transcript.skipped_lines == 1
    assert transcript.meta["instances"] == ["acme__cli-3"]


def test_openhands_wrong_types_are_clear(tmp_path: Path) -> None:
    record = orjson.loads(OPENHANDS_OUTPUT.read_bytes())
    record["history"] = {"not": "a list"}
    bad = tmp_path / "bad_history.jsonl"
    bad.write_bytes(orjson.dumps(record) + b"\n")
    with pytest.raises(TranscriptError) as caught:
        load_transcript(bad)
    message = str(caught.value)
    assert "bad_history.jsonl:1" in message and "'history' should be a list" in message

    record = orjson.loads(OPENHANDS_OUTPUT.read_bytes())
    record["history"][4]["tool_call_metadata"]["tool_call_id"] = 17
    bad.write_bytes(orjson.dumps(record) + b"\n")
    with pytest.raises(TranscriptError, match=r"history\[4\]\.tool_call_metadata\.tool_call_id"):
        read_openhands(bad)


def test_openhands_pretty_event_array_malformed_names_line(tmp_path: Path) -> None:
    events = orjson.loads(OPENHANDS_OUTPUT.read_bytes())["history"][:3]
    text = orjson.dumps(events, option=orjson.OPT_INDENT_2).decode()
    lines = text.splitlines()
    lines[5] = lines[5] + " oops"
    bad = tmp_path / "events.json"
    bad.write_text("\n".join(lines))
    with pytest.raises(TranscriptError) as caught:
        read_openhands(bad)
    assert "events.json:6" in str(caught.value)


# -- SWE-agent 1.x ---------------------------------------------------------------------------------
def test_swe_agent_v1_function_calling() -> None:
    transcript = load_transcript(SWE_AGENT_V1)
    assert transcript.format == "swe-agent"
    assert transcript.meta["system"].startswith("You are a helpful assistant")
    assert transcript.meta["trajectory_steps"] == 4
    assert transcript.meta["info"]["model_stats"]["api_calls"] == 4
    assert transcript.model == "claude-sonnet-4-20250514"
    check_chain(transcript.entries)
    messages = check_view(transcript)
    assert [m["role"] for m in messages] == ["user", "assistant"] * 4 + ["user"]
    view = transcript.view_entries()
    uses = blocks(view, "tool_use")
    assert [u["id"] for u in uses] == [f"toolu_sl_0{n}" for n in range(1, 5)]
    assert [u["name"] for u in uses] == [
        "str_replace_editor",
        "bash",
        "str_replace_editor",
        "submit",
    ]
    assert uses[0]["input"] == {"command": "view", "path": "/testbed"}
    assert uses[3]["input"] == {}
    errors = [b["tool_use_id"] for b in blocks(view, "tool_result") if b.get("is_error")]
    assert errors == ["toolu_sl_02"]  # the traceback
    assistants = [e for e in view if e.type == "assistant"]
    assert [e.message_id for e in assistants] == [f"swe_msg_{n}" for n in range(1, 5)]
    assert all(e.usage is None for e in assistants)  # no per-step usage in .traj
    stamps = [e.timestamp for e in transcript.entries]
    assert stamps[0] == "1970-01-01T00:00:00.000Z"
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_swe_agent_arguments_that_are_not_json(tmp_path: Path) -> None:
    document = orjson.loads(SWE_AGENT_V1.read_bytes())
    document["history"][2]["tool_calls"][0]["function"]["arguments"] = "view /testbed"
    path = tmp_path / "raw_args.traj"
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    uses = blocks(read_swe_agent(path).entries, "tool_use")
    assert uses[0]["input"] == {"raw": "view /testbed"}


def test_swe_agent_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    lines = SWE_AGENT_V1.read_text().splitlines()
    lines[6] = lines[6].rstrip(",") + ' "dangling": ,'
    bad = tmp_path / "broken.traj"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TranscriptError) as caught:
        read_swe_agent(bad)
    message = str(caught.value)
    assert "broken.traj:7" in message and "malformed JSON" in message


def test_swe_agent_invalid_utf8_names_line(tmp_path: Path) -> None:
    raw = SWE_AGENT_V1.read_bytes().replace(b"Let me look", b"Let \xff look", 1)
    bad = tmp_path / "latin.traj"
    bad.write_bytes(raw)
    line = raw[: raw.index(b"\xff")].count(b"\n") + 1
    with pytest.raises(TranscriptError, match=rf"latin\.traj:{line}: not valid UTF-8"):
        read_swe_agent(bad)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(history={"role": "user"}), "'history' should be a list"),
        (lambda d: d.pop("history"), "'history' is missing"),
        (lambda d: d["history"][3].update(tool_call_ids="toolu_sl_01"), "history[3].tool_call_ids"),
        (lambda d: d["history"][1].update(content=42), "'history[1].content' should be a string"),
        (lambda d: d["history"][2]["tool_calls"][0].pop("id"), "history[2].tool_calls[0].id"),
        (lambda d: d.update(info=[]), "'info' should be an object"),
    ],
)
def test_swe_agent_wrong_types_are_clear(mutate: Any, field: str, tmp_path: Path) -> None:
    document = orjson.loads(SWE_AGENT_V1.read_bytes())
    mutate(document)
    bad = tmp_path / "typed.traj"
    bad.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    with pytest.raises(TranscriptError) as caught:
        read_swe_agent(bad)
    assert field in str(caught.value)
    assert "typed.traj" in str(caught.value)
    assert caught.value.hint


# -- SWE-agent 0.x (third-party corpus file, read in place) ------------------------------------
@pytest.mark.corpus
def test_swe_agent_old_format_corpus() -> None:
    transcript = load_transcript(corpus_traj())
    assert transcript.format == "swe-agent"
    assert transcript.meta["system"].startswith("SETTING: You are an autonomous programmer")
    assert transcript.meta["trajectory_steps"] == 12
    assert transcript.meta["info"]["model_stats"]["api_calls"] == 12
    check_chain(transcript.entries)
    messages = check_view(transcript)
    view = transcript.view_entries()
    demo = view[0]
    assert demo.is_meta and demo.data.get("isDemo")
    uses = blocks(view, "tool_use")
    assert len(uses) == 12  # one per model call
    assert [u["id"] for u in uses] == [f"swe_{n}" for n in range(1, 13)]
    names = [u["name"] for u in uses]
    assert names[:3] == ["create", "edit", "bash"]  # `python reproduce_bug.py` is a shell command
    assert names[-1] == "submit" and names.count("edit") == 5
    assert uses[0]["input"] == {"command": "create reproduce_bug.py\n"}
    results = blocks(view, "tool_result")
    # A traceback and three rejected (syntax error) edits.
    assert sum(1 for b in results if b.get("is_error")) == 4
    # The submit observation is only in the trajectory: it answers the last call.
    last = view[-1]
    assert last.data.get("observationFrom") == "trajectory"
    assert "diff --git" in results[-1]["content"]
    # The text block is the thought, without the action's code block.
    first_response = messages[1]["content"]
    assert first_response[0]["type"] == "text"
    assert "```" not in first_response[0]["text"]


# -- helpers -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Error: file not found", True),
        ("ERROR:\nNo replacement was performed", True),
        ("usage: edit <start_line>:<end_line>", True),
        ("bash: foo: command not found", True),
        ('Traceback (most recent call last):\n  File "x"', True),
        ("Found 3 matches for numpy_handler.py", False),
        ("", False),
    ],
)
def test_looks_like_error(text: str, expected: bool) -> None:
    assert looks_like_error(text) is expected


def test_command_name() -> None:
    assert command_name("open pydicom/dataset.py 293\n") == "open"
    assert command_name('find_file "x.py"') == "find_file"
    assert command_name("python reproduce.py") == "bash"
    assert command_name("rm -f a") == "bash"
    assert command_name("") == "bash"


# -- mini-swe-agent ---------------------------------------------------------------------------------

MINI_V1 = FIXTURES / "versions" / "mini-swe-agent-1.traj.json"
MINI_TOOLCALL = FIXTURES / "versions" / "mini-swe-agent-1.1-toolcall.traj.json"
SDK_FOLDER = FIXTURES / "versions" / "openhands-sdk-conversation"
SDK_LIST = FIXTURES / "versions" / "openhands-sdk-events.json"


def test_mini_swe_agent_text_actions_become_tool_calls_answered_by_the_next_message() -> None:
    transcript = load_transcript(MINI_V1)
    assert transcript.format == "mini-swe-agent"
    assert transcript.meta["system"].startswith("You are a helpful assistant")
    calls = blocks(transcript.entries, "tool_use")
    results = blocks(transcript.entries, "tool_result")
    assert [c["input"]["command"] for c in calls][:2] == [
        "sed -n '1,40p' utils/pages.py",
        "pytest -q tests/test_pages.py",
    ]
    assert [c["id"] for c in calls] == [r["tool_use_id"] for r in results]
    assert [bool(r.get("is_error")) for r in results] == [False, True, False, False]
    assert results[-1]["content"] == "Submitted"  # the last action's answer
    texts = [b["text"] for b in blocks(transcript.entries, "text")]
    assert "THOUGHT: Let me look at the function first." in texts and not any("```" in t for t in texts)
    first = transcript.api_calls()[0]
    assert first.usage == {"input_tokens": 1_750, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 0, "output_tokens": 140}
    assert first.model == "claude-sonnet-4-5-20250929"
    validate_request(normalize_messages(transcript.view_entries()))


def test_mini_swe_agent_tool_calls_and_exit_message() -> None:
    transcript = load_transcript(MINI_TOOLCALL)
    calls = blocks(transcript.entries, "tool_use")
    results = blocks(transcript.entries, "tool_result")
    assert [c["id"] for c in calls] == ["call_m1", "call_m2", "call_m3"]
    assert [(r["tool_use_id"], bool(r.get("is_error"))) for r in results] == [
        ("call_m1", False), ("call_m2", True), ("call_m3", False)
    ]
    exits = [e for e in transcript.entries if e.type == "progress"]
    assert [e.data["data"]["type"] for e in exits] == ["mini_swe_agent_exit"]
    assert transcript.entries[0].timestamp == "2026-04-07T14:00:20.000Z"  # extra.timestamp
    assert len(transcript.api_calls()) == 3 and transcript.model == "gpt-5.4"


def test_a_mini_swe_agent_reply_with_two_actions_is_text() -> None:
    document = orjson.loads(MINI_V1.read_bytes())
    document["messages"][2]["content"] += "\n```bash\nls\n```"
    transcript = _read_json_document(document, "two.traj.json")
    assert len(blocks(transcript.entries, "tool_use")) == 3  # the first reply makes no call
    user_texts = [e.content for e in transcript.entries if e.type == "user" and isinstance(e.content, str)]
    assert any("<returncode>0</returncode>" in t for t in user_texts)  # its observation is plain text


def _read_json_document(document: Any, name: str) -> Transcript:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / name
        path.write_bytes(orjson.dumps(document))
        return load_transcript(path)
    finally:
        shutil.rmtree(folder)


# -- OpenHands agent SDK ----------------------------------------------------------------------------


def test_openhands_sdk_events_map_to_one_conversation() -> None:
    transcript = load_transcript(SDK_FOLDER)
    assert transcript.format == "openhands-sdk"
    assert transcript.meta["system"] == "You are OpenHands agent, a helpful AI assistant."
    responses = [e for e in transcript.entries if e.type == "assistant"]
    assert [e.message_id for e in responses] == ["resp-0001", "resp-0001", "resp-0002", "resp-0003"]
    texts = [b["text"] for e in responses for b in e.content if isinstance(b, dict) and b.get("type") == "text"]
    assert texts[0] == "Running the linter first." and len(texts) == 3  # one thought per response
    results = blocks(transcript.entries, "tool_result")
    assert [(r["tool_use_id"], bool(r.get("is_error"))) for r in results] == [
        ("toolu_sdk_01", True), ("toolu_sdk_02", False), ("toolu_sdk_03", False)
    ]
    messages = normalize_messages(transcript.view_entries())
    validate_request(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    first = transcript.api_calls()[0]
    assert first.usage == {"input_tokens": 300, "cache_creation_input_tokens": 5_900, "cache_read_input_tokens": 0, "output_tokens": 180}
    (side,) = transcript.meta["side_calls"]
    assert side["usage_id"] == "condenser" and side["usage"]["output_tokens"] == 400


def test_openhands_sdk_rejections_errors_and_nudges(tmp_path: Path) -> None:
    events = orjson.loads(SDK_LIST.read_bytes())
    reject = dict(events[5], kind="UserRejectObservation", rejection_reason="not now")
    reject.pop("observation")
    error = dict(events[8], kind="AgentErrorEvent", error="tool crashed")
    error.pop("observation")
    nudge = {"id": "n", "kind": "MessageEvent", "source": "environment", "llm_message": {"role": "user", "content": [{"type": "text", "text": "Please use a tool."}]}}
    changed = [*events[:5], reject, *events[6:8], error, nudge, *events[9:]]
    path = tmp_path / "events.json"
    path.write_bytes(orjson.dumps(changed))
    transcript = load_transcript(path)
    results = blocks(transcript.entries, "tool_result")
    assert results[1] == {"type": "tool_result", "tool_use_id": "toolu_sdk_02", "content": "Action rejected: not now", "is_error": True}
    assert results[2]["content"] == "tool crashed" and results[2]["is_error"] is True
    nudges = [e for e in transcript.entries if e.type == "user" and e.content == "Please use a tool."]
    assert len(nudges) == 1 and nudges[0].is_meta


def test_an_sdk_call_without_an_observation_gets_one_before_the_next_response(tmp_path: Path) -> None:
    events = orjson.loads(SDK_LIST.read_bytes())
    path = tmp_path / "events.json"
    path.write_bytes(orjson.dumps([e for e in events if e["id"] != events[8]["id"]]))
    transcript = load_transcript(path)
    missing = [r for r in blocks(transcript.entries, "tool_result") if r["tool_use_id"] == "toolu_sdk_03"]
    assert len(missing) == 1 and "no observation" in missing[0]["content"]
    validate_request(normalize_messages(transcript.view_entries()))


def test_an_sdk_event_line_file_reads_like_the_folder(tmp_path: Path) -> None:
    events = orjson.loads(SDK_LIST.read_bytes())
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    assert detect_format(path) == "openhands-sdk"
    from_lines = normalize_messages(load_transcript(path).view_entries())
    assert from_lines == normalize_messages(load_transcript(SDK_FOLDER).view_entries())


def test_a_folder_that_is_no_conversation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="is a folder"):
        detect_format(tmp_path)


def test_the_thought_of_a_response_is_written_once_for_its_parallel_actions(tmp_path: Path) -> None:
    events = orjson.loads(SDK_LIST.read_bytes())
    events[3]["thought"] = events[2]["thought"]  # both actions of resp-0001 carry it
    path = tmp_path / "events.json"
    path.write_bytes(orjson.dumps(events))
    texts = [b["text"] for b in blocks(load_transcript(path).entries, "text")]
    assert texts.count("Running the linter first.") == 1
