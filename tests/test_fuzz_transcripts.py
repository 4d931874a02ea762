"""Hostile input for the transcript readers: random bytes, invalid UTF-8, NUL bytes, wrong types
in every known field, deep nesting, huge lines. A reader answers with a transcript or a
`TranscriptError` naming the file, the line and the reason, never another exception, and
its memory stays bounded by the longest line it accepts."""

from __future__ import annotations

import copy
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.compaction.facts import extract_facts
from unbounded.compaction.rehydrate import working_state_from_entries
from unbounded.errors import ConfigError, TranscriptError
from unbounded.inspection import inspect_transcript
from unbounded.model.normalize import normalize_messages
from unbounded.model.transcript import Transcript
from unbounded.transcripts import jsonl
from unbounded.transcripts.claude_code import iter_claude_code, read_claude_code, write_claude_code
from unbounded.transcripts.jsonl import MAX_DEPTH, ReadReport
from unbounded.transcripts.loader import load_transcript

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), database=None)

USER = {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z", "message": {"role": "user", "content": "hi"}}
ASSISTANT = {
    "type": "assistant",
    "uuid": "a1",
    "parentUuid": "u1",
    "sessionId": "s",
    "timestamp": "2025-01-01T00:00:01Z",
    "message": {
        "id": "m1",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a.py"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    },
}
RESULT = {
    "type": "user",
    "uuid": "u2",
    "parentUuid": "a1",
    "sessionId": "s",
    "timestamp": "2025-01-01T00:00:02Z",
    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x"}], "is_error": False}]},
}
BOUNDARY = {
    "type": "system",
    "subtype": "compact_boundary",
    "uuid": "b1",
    "sessionId": "s",
    "timestamp": "2025-01-01T00:00:03Z",
    "logicalParentUuid": "u2",
    "compactMetadata": {"trigger": "auto", "preTokens": 100, "preservedSegment": {"headUuid": "u1", "anchorUuid": "b1", "tailUuid": "u2"}},
}
ATTACHMENT = {"type": "attachment", "uuid": "x1", "sessionId": "s", "timestamp": "2025-01-01T00:00:04Z", "attachment": {"type": "file", "filename": "/a", "content": "x"}}
RECORDS = (USER, ASSISTANT, RESULT, BOUNDARY, ATTACHMENT)
WRONG: tuple[Any, ...] = (None, True, 0, -1, 1.5, 1e300, "", "x", [], [1], {}, {"a": 1}, [[]], [{}], [{"type": 5}])


def use_everything(transcript: Transcript) -> None:
    """What the rest of unbounded does with a transcript it was given."""
    thread = transcript.main_thread()
    transcript.view_entries()
    transcript.api_calls()
    transcript.boundaries()
    transcript.sidechains()
    _ = transcript.model
    inspect_transcript(transcript)
    normalize_messages(transcript.view_entries())
    extract_facts(thread)
    working_state_from_entries(thread)


def read_or_error(path: Path, **options: Any) -> Transcript | TranscriptError:
    """The reader's answer: a transcript (fully usable) or a TranscriptError naming file and line."""
    try:
        transcript = load_transcript(path, **options)
    except TranscriptError as error:
        assert error.path == str(path) and error.reason
        assert "\n" not in str(error)
        return error
    use_everything(transcript)
    return transcript


# -- bytes -----------------------------------------------------------------------------------------

_valid_line = st.sampled_from([orjson.dumps(r) for r in RECORDS])
_noise = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\x00", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"{", b"}", b"[", b'"', b"\\u0000", b"\\ud800", b"\r", b"null", b"1e999"]),
)


@st.composite
def hostile_files(draw: Any) -> bytes:
    """Valid lines, some damaged (cut, spliced with noise), joined with newlines or not."""
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        line = draw(_valid_line)
        action = draw(st.sampled_from(["keep", "keep", "cut", "splice", "noise"]))
        if action == "cut":
            line = line[: draw(st.integers(0, len(line)))]
        elif action == "splice":
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(_noise) + line[at:]
        elif action == "noise":
            line = draw(_noise)
        lines.append(line)
    body = b"\n".join(lines)
    return body + b"\n" if draw(st.booleans()) else body


@FUZZ
@given(hostile_files())
def test_any_bytes_give_a_usable_transcript_or_a_transcript_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(data)
    answer = read_or_error(path)
    skipping = read_or_error(path, skip_invalid=True, format="claude-code")
    if isinstance(answer, Transcript):
        assert isinstance(skipping, Transcript) and len(skipping.entries) == len(answer.entries)
    try:
        read_claude_code(path)
    except TranscriptError as error:
        assert error.path == str(path) and error.line is not None


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(data)
    read_or_error(path)
    read_or_error(path, format="claude-code", skip_invalid=True)


def test_named_reason_for_nul(tmp_path: Path) -> None:
    good = orjson.dumps(USER) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + b'{"type":"user","uuid":"u1","message":{"role":"user","content":"a\x00b"}}\n' + good)
    with pytest.raises(TranscriptError, match="NUL byte") as raised:
        read_claude_code(path)
    assert raised.value.line == 2 and raised.value.path == str(path)
    skipped = read_claude_code(path, skip_invalid=True)
    assert skipped.skipped_lines == 1 and len(skipped.entries) == 2


def test_invalid_utf8_lone_surrogates_and_bom_are_repaired_with_a_warning(tmp_path: Path) -> None:
    good = orjson.dumps(USER) + b"\n"
    cases = {
        b'{"type":"user","uuid":"u1","message":{"role":"user","content":"caf\xe9"}}\n': ("caf\ufffd", "not UTF-8"),
        b'{"type":"user","uuid":"u1","message":{"role":"user","content":"\\ud83d cut"}}\n': ("\ufffd cut", "lone surrogates"),
    }
    for line, (text, reason) in cases.items():
        path = tmp_path / "t.jsonl"
        path.write_bytes(good + line + good)
        transcript = read_claude_code(path)
        assert [e.content for e in transcript.entries][1] == text
        assert any(w.startswith(f"{path}:2: ") and reason in w for w in transcript.warnings)
        # what is written back is valid UTF-8 and reads without a warning
        again = tmp_path / "again.jsonl"
        write_claude_code(transcript.entries, again)
        assert read_claude_code(again).warnings == []
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + good + good)
    transcript = load_transcript(path)
    assert len(transcript.entries) == 2 and "byte order mark" in transcript.warnings[0]


def test_leading_lines_that_are_not_json_are_skipped(tmp_path: Path) -> None:
    good = orjson.dumps(USER) + b"\n"
    path = tmp_path / "banner.jsonl"
    path.write_bytes(b"Script started on 2026-11-24\n\n" + good + good)
    transcript = load_transcript(path)
    assert len(transcript.entries) == 2
    assert transcript.warnings[0] == f"{path}:1: not JSON, before the first record: skipped"
    # a bad line after the first record is still an error
    path.write_bytes(good + b"not json\n" + good)
    with pytest.raises(TranscriptError, match="malformed JSON"):
        load_transcript(path)


# -- wrong types in every known field ------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _set(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


@pytest.mark.parametrize("which", range(len(RECORDS)), ids=["user", "assistant", "tool_result", "boundary", "attachment"])
def test_wrong_types_in_every_field(tmp_path: Path, which: int) -> None:
    """Every field of a realistic record, set to every wrong type: a named error or a
    transcript the rest of unbounded can use."""
    path = tmp_path / "t.jsonl"
    refused = 0
    for field_path in list(_paths(RECORDS[which])):
        for wrong in WRONG:
            records = [copy.deepcopy(r) for r in RECORDS]
            _set(records[which], field_path, copy.deepcopy(wrong))
            path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
            answer = read_or_error(path)
            if isinstance(answer, TranscriptError):
                refused += 1
                assert answer.line == which + 1, (field_path, wrong, str(answer))
    assert refused > 0


@pytest.mark.parametrize(
    ("record", "field_path", "wrong", "named"),
    [
        (ASSISTANT, ("message", "usage", "input_tokens"), "12", "message.usage.input_tokens"),
        (ASSISTANT, ("message", "content", 2, "name"), ["Read"], "message.content[2].name"),
        (ASSISTANT, ("message", "content", 2, "input"), "ls", "message.content[2].input"),
        (ASSISTANT, ("message", "content", 1, "text"), 5, "message.content[1].text"),
        (RESULT, ("message", "content", 0, "tool_use_id"), 7, "message.content[0].tool_use_id"),
        (RESULT, ("message", "content", 0, "content", 0, "text"), None, "message.content[0].content[0].text"),
        (RESULT, ("message", "content", 0, "is_error"), "no", "message.content[0].is_error"),
        (USER, ("isMeta",), "yes", "isMeta"),
        (USER, ("type",), ["user"], "type"),
        (BOUNDARY, ("compactMetadata", "preTokens"), 1.5, "compactMetadata.preTokens"),
    ],
)
def test_the_error_names_the_field(tmp_path: Path, record: dict[str, Any], field_path: tuple[Any, ...], wrong: Any, named: str) -> None:
    broken = copy.deepcopy(record)
    _set(broken, field_path, wrong)
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n" + orjson.dumps(broken) + b"\n")
    with pytest.raises(TranscriptError, match=named.replace("[", r"\[").replace("]", r"\]")) as raised:
        read_claude_code(path)
    assert raised.value.line == 2


# -- records of the right shape with hostile values ------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_json = st.recursive(_scalars, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.sampled_from(["type", "text", "id", "content", "file_path", "command", "todos", "x"]), c, max_size=3)), max_leaves=8)
_ids = st.sampled_from(["t1", "t2"])
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}, optional={"citations": _json}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": _ids, "name": st.sampled_from(["Bash", "Read", "Edit", "Write", "TodoWrite", "Skill", "str_replace_editor", "x"]), "input": st.fixed_dictionaries({}, optional={"command": st.one_of(st.text(max_size=8), st.sampled_from(["view", "create", "str_replace"])), **{k: _json for k in ("file_path", "path", "todos", "content", "skill", "plan", "x")}})}
    ),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": _ids}, optional={"content": st.one_of(st.text(max_size=10), st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "x"])}, optional={"text": st.text(max_size=5), "source": st.dictionaries(st.text(max_size=3), _json)}).filter(lambda b: b["type"] != "text" or "text" in b).filter(lambda b: b["type"] != "image" or "source" in b), max_size=2)), "is_error": st.booleans()}),
    st.fixed_dictionaries({"type": st.sampled_from(["server_tool_use", "mystery"])}, optional={"id": _json, "content": _json}),
)
_uuid = st.sampled_from(["u1", "u2", "u3", "b1"])
_common = {"parentUuid": st.one_of(st.none(), _uuid), "timestamp": st.one_of(st.text(max_size=10), st.just("2025-01-01T00:00:00Z")), "isSidechain": st.booleans(), "isMeta": st.booleans(), "isCompactSummary": st.booleans(), "cwd": _json, "toolUseResult": _json}
_record = st.one_of(
    st.fixed_dictionaries({"type": st.just("user"), "uuid": _uuid, "message": st.fixed_dictionaries({"role": st.just("user"), "content": st.one_of(st.text(max_size=10), st.lists(_block, max_size=3))})}, optional=_common),
    st.fixed_dictionaries({"type": st.just("assistant"), "uuid": _uuid, "message": st.fixed_dictionaries({"role": st.just("assistant"), "content": st.lists(_block, max_size=3)}, optional={"id": st.sampled_from(["m1", "m2"]), "usage": st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens"]), st.integers(0, 10**7)), "model": _json})}, optional=_common),
    st.fixed_dictionaries({"type": st.just("system"), "subtype": st.just("compact_boundary"), "uuid": _uuid}, optional={**_common, "compactMetadata": st.fixed_dictionaries({}, optional={"trigger": _json, "preservedSegment": st.one_of(_json, st.dictionaries(st.sampled_from(["headUuid", "anchorUuid", "tailUuid"]), st.one_of(_uuid, _json)))})}),
    st.fixed_dictionaries({"type": st.just("attachment"), "uuid": _uuid, "attachment": st.fixed_dictionaries({"type": st.sampled_from(["file", "todo", "plan_file_reference", "invoked_skills", "agent_status", "edited_text_file", "mystery"])}, optional={k: _json for k in ("content", "filename", "planContent", "skills", "status", "snippet")})}, optional=_common),
    st.fixed_dictionaries({"type": st.sampled_from(["progress", "summary", "file-history-snapshot", "queue-operation"]), "uuid": _uuid}, optional={**_common, "data": _json, "summary": _json}),
)


@FUZZ
@given(st.lists(_record, min_size=1, max_size=8))
def test_well_shaped_records_with_hostile_values_are_usable(tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    read_or_error(path)


def test_an_editor_command_that_is_not_a_string(tmp_path: Path) -> None:
    record = copy.deepcopy(ASSISTANT)
    record["message"]["content"][2] = {"type": "tool_use", "id": "t1", "name": "str_replace_editor", "input": {"command": ["create"], "path": "/a"}}
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n" + orjson.dumps(record) + b"\n")
    read_or_error(path)


# -- nesting ----------------------------------------------------------------------------------------


def _nested_record(depth: int) -> bytes:
    """A user record whose content block carries `depth` more levels of arrays."""
    deep = b"[" * depth + b"]" * depth
    return b'{"type":"user","uuid":"u9","message":{"role":"user","content":[{"type":"text","text":"x","extra":' + deep + b"}]}}\n"


@pytest.mark.parametrize("depth", [300, 1_100, 100_000])
def test_deep_nesting_is_a_named_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n" + _nested_record(depth))
    with pytest.raises(TranscriptError, match=f"nested deeper than {MAX_DEPTH} levels") as raised:
        load_transcript(path)
    assert raised.value.line == 2
    assert len(read_claude_code(path, skip_invalid=True).entries) == 1


def test_what_is_read_can_be_written_back_and_sent(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n" + _nested_record(MAX_DEPTH - 6))
    transcript = load_transcript(path)
    use_everything(transcript)
    write_claude_code(transcript.entries, tmp_path / "copy.jsonl")  # orjson writes <= 254 levels
    orjson.dumps({"request": {"messages": normalize_messages(transcript.view_entries())}})
    with pytest.raises(TranscriptError, match="nested deeper than 10"):
        read_claude_code(path, max_depth=10)


# -- huge lines ---------------------------------------------------------------------------------------


def test_a_100_mb_line_under_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    text = "y" * (100 * 1024 * 1024)
    with path.open("wb") as handle:
        handle.write(orjson.dumps(USER) + b"\n")
        handle.write(orjson.dumps({**USER, "uuid": "big", "message": {"role": "user", "content": text}}) + b"\n")
    transcript = read_claude_code(path)
    assert len(transcript.entries) == 2 and len(transcript.entries[1].content) == len(text)


def _huge_line_file(path: Path, size: int, newline: bool = True) -> None:
    with path.open("wb") as handle:
        handle.write(orjson.dumps(USER) + b"\n")
        handle.write(b'{"type":"user","uuid":"big","message":{"role":"user","content":"')
        chunk = b"z" * (1 << 20)
        for _ in range(size // len(chunk)):
            handle.write(chunk)
        handle.write(b'"}}' + (b"\n" if newline else b""))
        if newline:
            handle.write(orjson.dumps({**USER, "uuid": "after"}) + b"\n")


def test_a_line_over_the_limit_is_a_named_error_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _huge_line_file(path, 48 * 1024 * 1024)
    limit = 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(TranscriptError, match="line longer than 1,048,576 bytes") as raised:
            read_claude_code(path, max_line_bytes=limit)
        skipped = read_claude_code(path, max_line_bytes=limit, skip_invalid=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert raised.value.line == 2 and "UNBOUNDED_MAX_LINE_BYTES" in str(raised.value)
    assert [e.uuid for e in skipped.entries] == ["u1", "after"] and skipped.skipped_lines == 1
    assert peak < 8 * limit  # a few buffers of the limit's size; the 48 MB line was never held


def test_an_oversized_torn_last_line_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _huge_line_file(path, 3 * 1024 * 1024, newline=False)
    transcript = read_claude_code(path, max_line_bytes=1024 * 1024)
    assert len(transcript.entries) == 1 and "torn last line" in transcript.warnings[0]


def test_the_limit_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n" + orjson.dumps({**USER, "uuid": "u2", "message": {"role": "user", "content": "w" * 5000}}) + b"\n")
    monkeypatch.setenv("UNBOUNDED_MAX_LINE_BYTES", "1000")
    with pytest.raises(TranscriptError, match="line longer than 1,000 bytes"):
        load_transcript(path)
    monkeypatch.setenv("UNBOUNDED_MAX_LINE_BYTES", "lots")
    with pytest.raises(ConfigError):
        load_transcript(path)


def test_the_reader_streams(tmp_path: Path) -> None:
    """Iterating a 20 MB transcript holds one line at a time, not the file."""
    path = tmp_path / "t.jsonl"
    line = orjson.dumps({**RESULT, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r" * 4000}]}}) + b"\n"
    with path.open("wb") as handle:
        for _ in range(5_000):
            handle.write(line)
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_claude_code(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 5_000 and peak < 1024 * 1024


def test_bad_limits_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(USER) + b"\n")
    with pytest.raises(ConfigError):
        list(jsonl.iter_json_lines(path, skip_invalid=False, report=ReadReport(), max_line_bytes=0))
