"""The thread rebuilt on a record table's rows (`inspection_thread`) is the thread
`model.thread.rebuild_thread` rebuilds from the loaded records, and the table holds little per
record."""

from __future__ import annotations

import tracemalloc
import uuid as uuidlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unbounded.inspection_stream import rebuilt_branch, rebuilt_main_thread, scan_records
from unbounded.inspection_thread import is_subagent_file
from unbounded.model.entries import Entry
from unbounded.model.thread import rebuild_thread
from unbounded.record_table import RecordTable, UuidKey

_SESSIONS = ("s-1", "s-2")
_TIMES = ("2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z")


def _uuid(number: int) -> str:
    """Canonical uuids for most records; a few odd ones, as importers and tests write them."""
    if number % 7 == 6:
        return f"U-{number}"
    return str(uuidlib.UUID(int=number * 0x9E3779B97F4A7C15 + 1))


@st.composite
def _records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random forest of Claude Code records: branches, copies under the same or a new uuid,
    sidechains, compact boundaries, missing and later parents, progress chains, summaries."""
    count = draw(st.integers(1, 24))
    records: list[dict[str, Any]] = []
    for index in range(count):
        kind = draw(
            st.sampled_from(
                [
                    "prompt",
                    "results",
                    "text",
                    "call",
                    "call",
                    "progress",
                    "system",
                    "boundary",
                    "attachment",
                    "snapshot",
                    "summary",
                    "meta",
                ]
            )
        )
        own = draw(st.sampled_from(["new", "new", "new", "copy", "none"]))
        if own == "copy" and records:
            uuid = draw(st.sampled_from([r.get("uuid") for r in records]))
        else:
            uuid = _uuid(index) if own != "none" else None
        link = draw(
            st.sampled_from(["previous", "previous", "earlier", "later", "missing", "none"])
        )
        parent = {
            "previous": _uuid(index - 1) if index else None,
            "earlier": _uuid(draw(st.integers(0, index))) if index else None,
            "later": _uuid(index + draw(st.integers(1, 3))),
            "missing": _uuid(1000 + index),
            "none": None,
        }[link]
        tool = f"toolu_{draw(st.integers(0, 4))}"
        response = f"msg_{draw(st.integers(0, 3))}"
        words = draw(st.sampled_from(["a", "b"]))
        record: dict[str, Any] = {
            "type": "user",
            "parentUuid": parent,
            "isSidechain": draw(st.booleans()) and draw(st.booleans()),
            "timestamp": draw(st.sampled_from(_TIMES)),
        }
        if draw(st.integers(0, 4)):
            record["sessionId"] = draw(st.sampled_from(_SESSIONS))
        if uuid is not None:
            record["uuid"] = uuid
        if kind == "prompt":
            record["message"] = {"role": "user", "content": words}
        elif kind == "meta":
            record["isMeta"] = True
            record["message"] = {"role": "user", "content": f"<command-name>{words}</command-name>"}
        elif kind == "results":
            record["message"] = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool, "content": words}],
            }
        elif kind in ("text", "call"):
            block: dict[str, Any] = (
                {"type": "text", "text": words}
                if kind == "text"
                else {"type": "tool_use", "id": tool, "name": "Read", "input": {}}
            )
            record["type"] = "assistant"
            record["message"] = {
                "id": response,
                "role": "assistant",
                "content": [block],
                "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        elif kind == "progress":
            record["type"] = "progress"
            record["data"] = {"type": "hook_progress"}
        elif kind == "system":
            record["type"] = "system"
            record["subtype"] = "informational"
            record["content"] = words
        elif kind == "boundary":
            record["type"] = "system"
            record["subtype"] = "compact_boundary"
            record["parentUuid"] = None
            if draw(st.booleans()):
                record["logicalParentUuid"] = parent
            record["compactMetadata"] = {"trigger": "auto", "preTokens": 10}
        elif kind == "attachment":
            record["type"] = "attachment"
            record["attachment"] = {"type": "todo"}
        elif kind == "snapshot":
            record = {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}
        else:
            record = {
                "type": "summary",
                "summary": "s",
                "leafUuid": _uuid(draw(st.integers(0, 30))),
            }
        records.append(record)
    return records


def _write(path: Path, records: list[dict[str, Any]]) -> list[Entry]:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return [Entry(record, line) for line, record in enumerate(records, start=1)]


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=_records())
def test_the_thread_on_rows_is_the_thread_of_the_loaded_records(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    path = tmp_path / "forest.jsonl"
    entries = _write(path, records)
    scan = scan_records(path)
    table = scan.records
    sidechains = all(e.is_sidechain for e in entries if e.is_conversation) and any(
        e.is_conversation for e in entries
    )
    assert is_subagent_file(table) == sidechains
    expected, report = rebuild_thread(
        entries, include_sidechains=sidechains, summary_leaves=scan.summary_leaves
    )
    selected = rebuilt_main_thread(table, scan.summary_leaves)
    assert [table.lines[row] for row in selected.indexes] == [e.line for e in expected]
    assert selected.warnings == report.warnings()
    for leaf in sorted({e.uuid for e in entries if e.uuid is not None})[:3]:
        branch, _ = rebuild_thread(entries, include_sidechains=sidechains, leaf_uuid=leaf)
        rows = rebuilt_branch(table, leaf)
        assert [table.lines[row] for row in rows] == [e.line for e in branch]


def _record(kind: str, uuid: str, parent: str | None, sidechain: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": kind,
        "parentUuid": parent,
        "isSidechain": sidechain,
        "timestamp": "2026-01-01T00:00:01Z",
        "uuid": uuid,
    }
    if kind == "progress":
        record["data"] = {"type": "hook_progress"}
    else:
        record["message"] = {"role": "user", "content": uuid}
    return record


def test_a_parent_written_again_later_does_not_break_the_walk_past_progress(
    tmp_path: Path,
) -> None:
    # "d" names "s", whose uuid the last record carries again: `s` then maps to the last row,
    # which hangs off the progress record and is not resolved when the walk from "d" reaches it.
    records = [
        _record("user", "a", None),
        _record("user", "b", "a"),
        _record("progress", "p", "b"),
        _record("user", "c", "p"),
        _record("user", "s", "c", sidechain=True),
        _record("user", "d", "s"),
        _record("user", "s", "p"),
    ]
    path = tmp_path / "forward.jsonl"
    entries = _write(path, records)
    expected, report = rebuild_thread(entries)
    selected = rebuilt_main_thread(scan_records(path).records)
    assert [e.line for e in expected] == [1, 2, 3, 7]
    assert [scan_records(path).records.lines[row] for row in selected.indexes] == [1, 2, 3, 7]
    assert selected.warnings == report.warnings()


@pytest.mark.parametrize("sessions", [255, 256, 257, 300])
def test_a_column_past_255_distinct_values_gives_each_back(tmp_path: Path, sessions: int) -> None:
    # A code column holds one byte a row up to 255 distinct values (0 is "none") and four
    # from the 256th on; a concatenation of real sessions passes that mid-scan.
    records = [
        {**_record("user", _uuid(n + 1), None), "sessionId": f"session-{n}"}
        for n in range(sessions)
    ]
    path = tmp_path / "sessions.jsonl"
    _write(path, records)
    table = scan_records(path).records
    assert [info.session_id for info in table] == [f"session-{n}" for n in range(sessions)]
    assert table.session_ids.codes.itemsize == (1 if sessions < 256 else 4)


def test_uuid_keys_give_the_string_back_and_compare_it_whole() -> None:
    canonical = "6a5dcf77-6496-4c01-9804-3666ed60f364"
    key = UuidKey.of(canonical)
    assert key.odd is None and len(key.raw) == 16 and key.text() == canonical
    # Upper case, braces or spaces are not the canonical text: kept whole.
    for odd in (canonical.upper(), "6a5dcf77-6496-4c01-9804-3666ed60f3 4", "u1", ""):
        assert UuidKey.of(odd).odd == odd and UuidKey.of(odd).text() == odd
    assert UuidKey.of(canonical) != UuidKey.of(canonical.upper())


def test_a_row_matches_a_key_only_when_the_strings_are_equal(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write(path, [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "a"}}])
    table = scan_records(path).records
    own = UuidKey.of("u1")
    assert table.same_uuid(0, own)
    # A key with the same 16 bytes but another string (a digest collision) is another uuid.
    assert not table.same_uuid(0, UuidKey(own.raw, "u2"))
    assert not table.same_uuid(0, UuidKey(own.raw, None))


def _session(path: Path, calls: int) -> None:
    """A session shaped like Claude Code's: per call a prompt or tool result, an assistant
    text line and a tool-call line of one response, a hook's progress record."""
    records: list[dict[str, Any]] = []
    parent: str | None = None

    def add(record: dict[str, Any]) -> None:
        nonlocal parent
        record.update(
            uuid=str(uuidlib.uuid4()),
            parentUuid=parent,
            sessionId="s",
            timestamp=f"2026-01-01T00:00:{len(records) % 60:02d}Z",
            isSidechain=False,
        )
        parent = record["uuid"]
        records.append(record)

    usage = {"input_tokens": 3, "cache_read_input_tokens": 20000, "output_tokens": 300}
    for call in range(calls):
        tool = f"toolu_{call:020d}"
        if call:
            content = [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{call - 1:020d}",
                    "content": "x" * 50,
                }
            ]
            add({"type": "user", "message": {"role": "user", "content": content}})
        else:
            add({"type": "user", "message": {"role": "user", "content": "go"}})
        for block in (
            {"type": "text", "text": "y"},
            {"type": "tool_use", "id": tool, "name": "Read", "input": {}},
        ):
            add(
                {
                    "type": "assistant",
                    "message": {
                        "id": f"msg_{call:024d}",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [block],
                        "usage": usage,
                    },
                }
            )
        add({"type": "progress", "data": {"type": "hook_progress"}, "toolUseID": tool})
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


def test_the_table_holds_little_per_record(tmp_path: Path) -> None:
    # Half a million records (a 100,000-call session) must fit the opening's memory: uuids
    # as 16-byte keys, tool ids flat, codes in bytes (about 150 bytes a record here). Strings
    # for the uuids and a tuple per row's tool ids held about 280.
    path = tmp_path / "long.jsonl"
    _session(path, 2_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table: RecordTable = scan_records(path).records
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table) == 8_000
    assert held / len(table) < 170


def test_rebuilding_the_thread_holds_little_per_record(tmp_path: Path) -> None:
    # About 80 bytes a record on top of the table at the peak; stand-in entries, a dict of
    # uuid strings and sets of content tuples held about 340.
    path = tmp_path / "long.jsonl"
    _session(path, 2_000)
    scan = scan_records(path)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        selected = rebuilt_main_thread(scan.records)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(selected.indexes) == 8_000
    assert peak / len(scan.records) < 110


@pytest.mark.parametrize("calls", [3])
def test_a_generated_session_rebuilds_to_every_record(tmp_path: Path, calls: int) -> None:
    path = tmp_path / "short.jsonl"
    _session(path, calls)
    table = scan_records(path).records
    assert list(rebuilt_main_thread(table).indexes) == list(range(4 * calls))
