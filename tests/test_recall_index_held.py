"""What the recall index holds per tool call, counted in bytes between 250 and 750 calls: a
row of packed columns and the call's id packed (`PackedNames`), not an object per call (of
fields with a number object each, or reading the row), nor a str and a dict slot per id, nor a
second set of the names taken."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from held import bytes_held

from unbounded.model.entries import Entry
from unbounded.recall.index import ToolCall, TranscriptIndex

_TOOLS = ("Read", "Bash", "Edit")


def _entries(calls: int) -> list[Entry]:
    """A prompt, then per call a reply with one tool call (a read, a run or a write, over 40
    files) and its result: the entries a replayed session leaves to its index."""
    entries = [Entry.user("start the work")]
    for n in range(calls):
        tool = _TOOLS[n % 3]
        path = f"/repo/src/module_{n % 40}.py"
        inputs: dict[str, Any] = {
            "Read": {"file_path": path},
            "Bash": {"command": f"pytest -q tests/test_{n % 40}.py"},
            "Edit": {"file_path": path, "old_string": "a", "new_string": "b"},
        }
        use = {"type": "tool_use", "id": f"toolu_{n:012d}", "name": tool, "input": inputs[tool]}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n:012d}", "content": "x" * 600}
        entries.append(Entry.assistant([use], message_id=f"msg_{n}"))
        entries.append(Entry.user([result]))
    return entries


def _bytes_held(index: TranscriptIndex, entries: list[Entry]) -> int:
    """Bytes of the objects reachable from the index, not through the entries it reads back
    from (a replay keeps them on disk), nor through code."""
    return bytes_held([index], {id(entries)} | {id(entry) for entry in entries})


def _indexed(calls: int) -> tuple[TranscriptIndex, list[Entry]]:
    """The index of `calls` calls, updated a turn at a time over one growing list of entries
    (as a session's)."""
    every = _entries(calls)
    entries = every[:1]
    index = TranscriptIndex().update(entries)
    for end in range(3, len(every) + 1, 2):
        entries.extend(every[end - 2 : end])
        index.update(entries)
    return index, entries


def test_a_call_costs_the_index_a_row_not_an_object_of_fields() -> None:
    """500 more calls add under 130 bytes each: the id packed (its 18 bytes, its end and
    its table slots) and some 70 bytes of columns (some 103 in all; the id as a str keyed
    to its row in a dict made it some 205, an object per call reading its row some 253, a
    second set of the names taken some 300, a dataclass with its numbers as objects 380)."""
    few_index, few_entries = _indexed(250)
    many_index, many_entries = _indexed(750)
    assert len(many_index.calls) == 750
    grown = _bytes_held(many_index, many_entries) - _bytes_held(few_index, few_entries)
    assert grown / 500 < 130
    # No object per call: a call's object is made when one is asked for, and let go.
    gc.collect()
    assert not any(isinstance(item, ToolCall) for item in gc.get_referents(many_index.rows))
    assert [call.number for call in many_index.calls.values()] == list(range(750))


def test_a_call_read_from_its_row_sees_its_result_arrive() -> None:
    """A call taken before its result came reads the result from its row once it has."""
    entries = _entries(2)
    index = TranscriptIndex().update(entries[:4])  # the second call's result not yet in
    waiting = index.get("toolu_000000000001")
    assert waiting is not None and waiting.result_position is None and waiting.result is None
    index.update(entries)
    assert waiting.result_position == 4 and waiting.result == "x" * 600
    assert waiting.result_tokens == 150 and waiting.command == "pytest -q tests/test_1.py"


def test_the_calls_by_id_answer_as_the_dict_of_rows_did() -> None:
    """The packed ids answer look-ups, membership and iteration in call order; an id not
    held (or not a str) is a KeyError, not a row."""
    index, _ = _indexed(3)
    calls = index.calls
    assert list(calls) == ["toolu_000000000000", "toolu_000000000001", "toolu_000000000002"]
    assert calls["toolu_000000000001"].number == 1
    assert "toolu_000000000002" in calls and "toolu_000000000003" not in calls
    for missing in ("toolu_000000000003", 1):
        with pytest.raises(KeyError):
            calls[missing]  # type: ignore[index]
    assert index.get("toolu_000000000003") is None
    assert index.call_at(2).id == "toolu_000000000002"


def test_a_look_up_by_something_else_than_a_str_finds_no_call() -> None:
    """A call whose id reads "5" is not call 5 (nor found by the int)."""
    entries = [
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": "5", "name": "Read", "input": {}}]),
        Entry.user([{"type": "tool_result", "tool_use_id": "5", "content": "ok"}]),
    ]
    calls = TranscriptIndex().update(entries).calls
    assert "5" in calls and calls["5"].number == 0
    assert 5 not in calls
    with pytest.raises(KeyError):
        calls[5]  # type: ignore[index]


def test_a_call_id_with_a_lone_surrogate_is_found() -> None:
    """A caller's raw entries may carry any str as an id: the index finds the call by it."""
    odd = "t\ud800"
    entries = [
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": odd, "name": "Read", "input": {}}]),
        Entry.user([{"type": "tool_result", "tool_use_id": odd, "content": "ok"}]),
    ]
    index = TranscriptIndex().update(entries)
    assert list(index.calls) == ["t_"]  # named as the API allows
    assert index.get("t_") is not None and index.get(odd) is None  # asked by its raw id: none
