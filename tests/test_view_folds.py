"""ViewFolds: the folds a summary reads of its view, kept as the view grows."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.cut import discovered_tools
from unbounded.compaction.view_folds import ViewFolds, holds_rewritten_block
from unbounded.model.entries import Entry


def _assistant(uuid: str, *blocks: Any) -> Entry:
    return Entry({"type": "assistant", "uuid": uuid, "message": {"role": "assistant", "content": list(blocks)}})


def _user(uuid: str, content: Any) -> Entry:
    return Entry({"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}})


def _call(name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"t-{name}", "name": name, "input": {}}


def test_the_folds_read_only_what_the_list_added_and_start_over_on_another_list() -> None:
    view = [_user("a", "hi"), _assistant("b", _call("Read"))]
    folds = ViewFolds()
    folds.advance(view)
    view += [_user("c", [{"type": "tool_result", "tool_use_id": "t-Read", "content": "x"}]), _assistant("a", _call("Bash"))]
    folds.advance(view)
    facts = folds.facts()
    assert facts is not None
    assert facts.tools == discovered_tools(view) == ["Bash", "Read"]
    assert facts.messages == 4 and not facts.rewritten
    assert folds.first == {"a": 0, "b": 1, "c": 2}  # the first of a repeated uuid
    other = [_assistant("z", _call("Grep"))]  # a new view (after a compaction): from its start
    folds.advance(other)
    assert folds.facts() == (["Grep"], 1, False) and folds.first == {"z": 0}


def test_a_block_the_tools_walk_would_fail_on_leaves_the_answer_to_it() -> None:
    folds = ViewFolds()
    folds.advance([_assistant("a", "not a block", _call("Read"))])
    assert folds.facts() is None


def test_media_anywhere_in_the_view_is_noticed() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    inside = _user("b", [{"type": "tool_result", "tool_use_id": "t", "content": [image]}])
    assert holds_rewritten_block(inside.content)
    assert not holds_rewritten_block([{"type": "tool_result", "tool_use_id": "t", "content": "text"}])
    assert not holds_rewritten_block([{"type": ["image"]}])  # a type that is not a string
    folds = ViewFolds()
    view = [_user("a", "hi")]
    folds.advance(view)
    assert folds.facts() == ([], 1, False)
    view.append(inside)
    folds.advance(view)
    assert folds.facts() == ([], 2, True)


def test_a_turn_reads_at_most_its_limit_and_a_compaction_the_rest(monkeypatch: Any) -> None:
    from unbounded.compaction import glue
    from unbounded.compaction.glue import RecordedState
    from unbounded.compaction.recorded_files import RecordedFilesReader

    monkeypatch.setattr(glue, "TURN_READ_LIMIT", 4)
    fed: list[int] = []
    feed = RecordedFilesReader._feed
    monkeypatch.setattr(RecordedFilesReader, "_feed", lambda reader, n, entry: (fed.append(n), feed(reader, n, entry)))
    reads = [{"type": "tool_use", "id": f"r{n}", "name": "Read", "input": {"file_path": f"/r/{n}.py"}} for n in range(10)]
    entries = [_assistant(f"u{n}", read) for n, read in enumerate(reads)]  # a resumed history
    recorded = RecordedState()
    recorded.advance(entries, entries, "transcript")
    assert recorded.view.messages == 4 and len(recorded.working.state.files_read) == 4
    recorded.advance(entries, entries, "transcript")
    assert recorded.view.messages == 8 and len(recorded.working.state.files_read) == 8
    recorded.advance(entries, entries, "transcript")  # caught up, on this turn
    # The files reader reads to the end: after a turn that could not, the compaction feeds it
    # (not a later turn all at once).
    assert len(recorded.working.state.files_read) == 10 and fed == []
    # The compaction reads the rest (the view's folds as a summary reads them).
    assert recorded.view.advance(entries) and recorded.view.facts() == (["Read"], 10, False)
    assert len(recorded.working.read(entries).files_read) == 10


def test_a_turn_on_disk_reads_the_working_folders_too() -> None:
    from unbounded.compaction.glue import RecordedState, session_roots

    entries = [Entry({**_user(f"u{n}", "hi").data, "cwd": f"/work/{n % 2}"}) for n in range(6)]
    recorded = RecordedState()
    recorded.advance(entries, entries, "disk")
    # Read to the end on this turn: a compaction's `roots` reads nothing more.
    assert recorded._roots._since.start(entries) == len(entries)
    assert recorded.roots(entries) == session_roots(entries) == ["/work/0", "/work/1"]
