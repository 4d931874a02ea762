"""The rules of the recall index (`unbounded.recall.index`) the mutation check found unheld:
rescans, replies split over lines, blocks of the wrong kind and the Bash fallbacks of other
agents' tools. Each test fails when its rule is flipped or dropped."""

from __future__ import annotations

from typing import Any

from unbounded.model.entries import Entry
from unbounded.recall.index import TranscriptIndex, command_of, read_path_of


def use(tool_id: str, message_id: str | None = None, name: str = "Bash") -> Entry:
    return Entry.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": {"command": f"echo {tool_id}"}}], message_id=message_id)


def result(tool_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def test_an_unchanged_last_entry_means_only_the_new_entries_are_scanned() -> None:
    first = [use("a"), Entry.user([result("a", "one")])]
    index = TranscriptIndex().update(first)
    # Same last record, other records before it: the index does not look back (append-only).
    other_prefix = [use("z"), first[1], use("b"), Entry.user([result("b", "two")])]
    index.update(other_prefix)
    assert list(index.calls) == ["a", "b"]
    assert index.get("b").result == "two"  # type: ignore[union-attr]


def test_a_rescan_starts_at_the_first_entry() -> None:
    index = TranscriptIndex().update([Entry.user("go"), use("a"), use("b")])
    index.update([use("c"), Entry.user([result("c", "three")])])  # shorter: from the start
    assert list(index.calls) == ["c"] and index.get("c").result == "three"  # type: ignore[union-attr]
    assert TranscriptIndex().update([]).calls == {}


def test_a_reply_split_over_lines_answers_its_renamed_call() -> None:
    entries = [
        use("a", "m1"),
        Entry.user([result("a", "first")]),
        use("a", "m2"),  # the provider repeats the id: renamed a_2
        Entry({"type": "assistant", "message": {"role": "assistant", "content": "thinking aloud"}}),
        Entry.assistant([{"type": "text", "text": "and b"}], message_id="m2"),
        Entry.user([result("a", "second")]),
    ]
    index = TranscriptIndex().update(entries)
    assert {name: call.result for name, call in index.calls.items()} == {"a": "first", "a_2": "second"}
    assert index.get("a_2").transcript_id == "a"  # type: ignore[union-attr]


def test_blocks_of_the_wrong_kind_or_place_are_passed_over() -> None:
    entries = [
        use("a"),
        Entry.assistant(["not a block", result("a", "from the assistant")]),  # type: ignore[list-item]
        Entry.user([result("a", "the result"), result("a", "a second result"), result("nope", "orphan")]),
    ]
    index = TranscriptIndex().update(entries)
    call = index.get("a")
    assert call is not None and call.result == "the result" and call.result_position == 2
    assert list(index.calls) == ["a"]


def test_a_pending_call_has_no_result_tokens() -> None:
    call = TranscriptIndex().update([use("a")]).get("a")
    assert call is not None and call.result is None and call.result_tokens == 0 and not call.is_error


def test_other_agents_shell_and_read_tools() -> None:
    def block(name: str, tool_input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": "x", "name": name, "input": tool_input}

    # OpenHands' IPython tool counts as Bash: its command, else its cmd.
    assert command_of(block("execute_ipython_cell", {"command": "print(1)"})) == "print(1)"
    assert command_of(block("execute_ipython_cell", {"cmd": "print(2)"})) == "print(2)"
    assert command_of(block("execute_ipython_cell", {"command": "", "cmd": ""})) is None
    assert command_of(block("execute_ipython_cell", {"command": ["ls"]})) is None
    assert command_of(block("execute_ipython_cell", "print(3)")) is None
    assert command_of(block("Search", {"command": "ls"})) is None
    assert command_of(block("Bash", {"command": "ls -la"})) == "ls -la"
    # SWE-agent's `open <path> [line]` reads a file, as Read does.
    assert read_path_of(block("open", {"command": "open src/app.py 40"})) == "src/app.py"
    assert read_path_of(block("Read", {"file_path": "/r/a.py"})) == "/r/a.py"
    assert read_path_of(block("Bash", {"command": "cat a.py"})) is None
