"""The rules of recall's receipts (`unbounded.recall.receipts`) the mutation check found unheld:
how many handles a summary's note names and how long each is, which blocks a compaction's
receipt lists, a whole path counting as mentioned, and the error for a receipt built in memory."""

from __future__ import annotations

import pytest

from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry
from unbounded.recall import Receipt, TranscriptIndex
from unbounded.recall.receipts import compaction_receipt, recall_note, write_compaction_receipt


def test_the_note_names_the_eight_most_recent_results_each_cut_to_100_characters() -> None:
    items = [{"id": f"t{n}", "tool": "Bash", "command": f"make {n} " + "x" * 200} for n in range(12)]
    lines = recall_note({"toolResults": items}).splitlines()
    handles = lines[2:]
    assert [line.split(":")[0] for line in handles] == [f"- recall id=t{n}" for n in range(11, 3, -1)]
    detail = handles[0].split("Bash ", 1)[1]
    assert len(detail) == 100 and detail.startswith("make 11 x") and detail.endswith("…")


def test_a_compaction_receipt_lists_only_the_tool_results_of_user_records() -> None:
    entries = [
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "ls"}}]),
        Entry.user([{"type": "text", "text": "and also"}, "stray", {"type": "tool_result", "tool_use_id": "a", "content": "x" * 40}]),  # type: ignore[list-item]
    ]
    receipt = compaction_receipt(entries, index=TranscriptIndex().update(entries), summary_text="", summarizer="m")
    assert receipt["toolResults"] == [{"id": "a", "tool": "Bash", "tokens": 10, "command": "ls"}]


@pytest.mark.parametrize(("path", "summary", "mentioned"), [("/repo/a.c", "we changed /repo/a.c", True), ("/repo/a.c", "we changed a.c", False)])
def test_a_short_name_counts_when_the_whole_path_is_named(path: str, summary: str, mentioned: bool) -> None:
    entries = [Entry.assistant([{"type": "tool_use", "id": "w", "name": "Write", "input": {"file_path": path}}]), Entry.user([{"type": "tool_result", "tool_use_id": "w", "content": "ok"}])]
    receipt = compaction_receipt(entries, index=TranscriptIndex().update(entries), summary_text=summary, summarizer="m")
    assert receipt["covered"]["filesMentioned"] == ([path] if mentioned else [])


def test_a_receipt_built_in_memory_counts_no_messages_unless_told() -> None:
    receipt = Receipt(kind="microcompaction", uuid=None, time=None, trigger="count", tokens=3, tool_results=(), files=())
    assert receipt.messages == 0 and receipt.covered == {}


def test_a_damaged_receipt_names_the_first_40_characters_of_its_uuid() -> None:
    uuid = "u" * 39 + "v" + "w" * 20
    entry = Entry({"type": "system", "subtype": "microcompact_receipt", "uuid": uuid, "microcompactReceipt": {"tokens": -1}}, 7)
    with pytest.raises(TranscriptError) as raised:
        Receipt.from_entry(entry)
    assert raised.value.line == 7 and raised.value.hint == f"fix or remove the record (its uuid: {'u' * 39}v)"


def test_a_compaction_receipt_leaves_out_the_records_kept_verbatim() -> None:
    def call(tool_id: str) -> list[Entry]:
        use = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"make {tool_id}"}}
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": "done"}
        return [Entry.assistant([use]), Entry.user([result])]

    kept = call("t2")
    view = [Entry.user("go"), *call("t1"), *kept]
    boundary = Entry({"type": "system", "subtype": "compact_boundary", "uuid": "b1", "compactMetadata": {}})
    receipt = write_compaction_receipt(boundary, view, kept, index=TranscriptIndex().update(view), summary_text="", summarizer="m")
    # Dropped: the prompt and the first call (three messages), not the call kept verbatim.
    assert receipt["messages"] == 3
    assert [item["id"] for item in receipt["toolResults"]] == ["t1"]
