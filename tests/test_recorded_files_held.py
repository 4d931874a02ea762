"""What the transcript's record of files holds: where each read or written text is in the
entries, not the text (made again when a compaction asks); an edit's result as text."""

from __future__ import annotations

import gc
from typing import Any

from held import bytes_held

from unbounded.compaction.recorded_files import RecordedFile, RecordedFilesReader
from unbounded.model.entries import Entry
from unbounded.model.spilled_entries import SpilledEntries

FILES = 200


def _text(n: int) -> str:
    return "".join(f"line {k} of module {n}\n" for k in range(80))  # some 1,900 characters


def _numbered(text: str) -> str:
    return "\n".join(f"{i:6d}→{line}" for i, line in enumerate(text.split("\n"), 1))


def _entries() -> list[Entry]:
    """Per file a read of it (numbered lines) and its result, every fourth one written whole
    afterwards, and the last one edited."""
    entries = [Entry.user("start")]
    for n in range(FILES):
        path = f"/repo/m{n}.py"
        read: dict[str, Any] = {"file_path": path}
        if n % 5 == 0:
            read["offset"] = 3
        entries.append(
            Entry.assistant([{"type": "tool_use", "id": f"r{n}", "name": "Read", "input": read}])
        )
        entries.append(
            Entry.user(
                [{"type": "tool_result", "tool_use_id": f"r{n}", "content": _numbered(_text(n))}]
            )
        )
        if n % 4 == 0:
            write = {"file_path": path, "content": _text(n + 1000)}
            entries.append(
                Entry.assistant(
                    [{"type": "tool_use", "id": f"w{n}", "name": "Write", "input": write}]
                )
            )
            entries.append(
                Entry.user([{"type": "tool_result", "tool_use_id": f"w{n}", "content": "ok"}])
            )
    edit = {"file_path": f"/repo/m{FILES - 1}.py", "old_string": "line 0 ", "new_string": "first "}
    entries.append(
        Entry.assistant([{"type": "tool_use", "id": "e", "name": "Edit", "input": edit}])
    )
    entries.append(Entry.user([{"type": "tool_result", "tool_use_id": "e", "content": "ok"}]))
    return entries


def _expected(n: int) -> RecordedFile:
    if n == FILES - 1:
        return RecordedFile(_text(n).replace("line 0 ", "first ", 1))
    if n % 4 == 0:
        return RecordedFile(_text(n + 1000))
    return RecordedFile(_text(n), partial=n % 5 == 0)


def _bytes_held(reader: RecordedFilesReader, entries: Any) -> int:
    """Bytes reachable from the reader, not through the entries it reads back from."""
    return bytes_held([reader], {id(entries)} | {id(entry) for entry in entries})


def test_read_and_written_files_are_held_as_places_not_texts() -> None:
    entries = _entries()
    reader = RecordedFilesReader()
    files = reader.read(entries)
    assert files == {f"/repo/m{n}.py": _expected(n) for n in range(FILES)}
    del files
    # The texts are some 1,900 characters a file; a place is a few hundred bytes at most
    # (the path, its dict slot, the record). The one edited file is held as text.
    assert _bytes_held(reader, entries) < FILES * 400


def test_a_place_reads_its_text_back_from_spilled_entries() -> None:
    entries = SpilledEntries(_entries())
    reader = RecordedFilesReader()
    first = reader.read(entries)
    entries.spill_before(len(entries))  # every entry on disk now: read back by position
    gc.collect()
    assert first == {f"/repo/m{n}.py": _expected(n) for n in range(FILES)}
    assert reader.read(entries) == first
    entries.close()
