"""A compaction receipt's items are checked to encode (JSON) once, as the running sums build
them (`RunningReceipt.checked`), and the transcript does not encode them again when it
appends the boundary that holds them: the rest of the boundary is still checked, and a list
that is not the one checked (another list, equal or not) is checked whole."""

from __future__ import annotations

from typing import Any

from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.receipts import RECEIPT_KEY, RunningReceipt, write_compaction_receipt
from unbounded.session_transcript import SessionTranscript
from unbounded.storage import MemoryStore

LONE = "\ud800"
"""A lone surrogate: JSON (UTF-8) cannot encode it."""


def _call(uuid: str, tool_id: str, path: str) -> Entry:
    call = {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": path}}
    return Entry(
        {"type": "assistant", "uuid": uuid, "message": {"role": "assistant", "content": [call]}}
    )


def _result(uuid: str, tool_id: str) -> Entry:
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": "text " * 20}
    return Entry({"type": "user", "uuid": uuid, "message": {"role": "user", "content": [result]}})


def _view(path: str) -> list[Entry]:
    prompt = Entry({"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}})
    tail = Entry({"type": "user", "uuid": "u9", "message": {"role": "user", "content": "ok"}})
    return [
        prompt,
        _call("a1", "t1", path),
        _result("u1", "t1"),
        _call("a2", "t2", "/r/b.py"),
        _result("u2", "t2"),
        tail,
    ]


def _read(view: list[Entry]) -> tuple[RunningReceipt, dict[str, Any], Entry]:
    index = TranscriptIndex()
    running = RunningReceipt()
    running.advance(view, index.update(view), {})
    boundary = create_compact_boundary("auto", 100)
    receipt = write_compaction_receipt(
        boundary,
        view,
        view[-1:],
        index=index,
        summary_text="s",
        summarizer="t",
        already_cleared={},
        running=running,
    )
    return running, receipt, boundary


def test_the_items_read_are_handed_over_as_checked_when_each_encodes() -> None:
    running, receipt, _ = _read(_view("/r/a.py"))
    assert running.checked is receipt["toolResults"]
    assert len(receipt["toolResults"]) == 2


def test_an_item_that_does_not_encode_leaves_the_items_unchecked() -> None:
    running, receipt, _ = _read(_view(f"/r/a{LONE}.py"))
    assert any(LONE in str(item.get("path")) for item in receipt["toolResults"])
    assert running.checked is None


def _transcript() -> SessionTranscript:
    return SessionTranscript(MemoryStore(), [], [])


def test_the_checked_items_are_not_encoded_again_in_the_boundary() -> None:
    # A checked list holding what cannot encode stands for one checked elsewhere: left as is.
    _, receipt, boundary = _read(_view("/r/a.py"))
    checked = receipt["toolResults"]
    checked[0]["path"] = f"/r/x{LONE}"
    transcript = _transcript()
    transcript.append([boundary], checked=checked)
    assert boundary.compact_metadata[RECEIPT_KEY]["toolResults"][0]["path"] == f"/r/x{LONE}"
    assert transcript.warnings == []


def test_the_rest_of_a_boundary_with_checked_items_is_still_repaired() -> None:
    running, _, boundary = _read(_view("/r/a.py"))
    boundary.data["content"] = f"Conversation compacted {LONE}"
    boundary.compact_metadata["note"] = f"n{LONE}"
    transcript = _transcript()
    transcript.append([boundary], checked=running.checked)
    assert boundary.data["content"] == "Conversation compacted \ufffd"
    assert boundary.compact_metadata["note"] == "n\ufffd"
    assert len(boundary.compact_metadata[RECEIPT_KEY]["toolResults"]) == 2
    assert len(transcript.warnings) == 1


def test_items_that_are_not_the_checked_list_are_checked_whole() -> None:
    running, receipt, boundary = _read(_view("/r/a.py"))
    checked = running.checked
    assert checked is not None
    # An equal list (another object), then edited: not the list that was checked.
    copy = [dict(item) for item in checked]
    receipt["toolResults"] = copy
    copy[0]["path"] = f"/r/x{LONE}"
    checked[0]["path"] = f"/r/x{LONE}"
    transcript = _transcript()
    transcript.append([boundary], checked=checked)
    assert boundary.compact_metadata[RECEIPT_KEY]["toolResults"][0]["path"] == "/r/x\ufffd"
    assert len(transcript.warnings) == 1


def test_an_item_built_again_at_the_read_is_checked_too() -> None:
    # The result comes before its call: its item is built without the call, and built again
    # at the read from the call, whose path cannot encode.
    prompt = Entry({"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}})
    view = [prompt, _result("u1", "t1")]
    index = TranscriptIndex()
    running = RunningReceipt()
    running.advance(view, index.update(view), {})
    view += [
        _call("a1", "t1", f"/r/a{LONE}.py"),
        Entry({"type": "user", "uuid": "u9", "message": {"role": "user", "content": "ok"}}),
    ]
    receipt = write_compaction_receipt(
        create_compact_boundary("auto", 100),
        view,
        view[-1:],
        index=index.update(view),
        summary_text="s",
        summarizer="t",
        already_cleared={},
        running=running,
    )
    assert receipt["toolResults"][0]["path"] == f"/r/a{LONE}.py"
    assert running.checked is None
