"""The re-fetch search of a replay (evaluation/refetch.py) finds what a walk back over every
earlier tool call finds, walking only the calls of the same file name or command."""

from __future__ import annotations

import gc
from array import array
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.evaluation.refetch import _CallLookup, _other_arguments
from unbounded.model.entries import Entry
from unbounded.recall.index import (
    ToolCall,
    TranscriptIndex,
    command_of,
    normalize_command,
    read_path_of,
    same_path,
)

PATHS = ("/w/app.py", "app.py", "src/app.py", "/w/lib.py", "lib.py", "dir\\app.py")
COMMANDS = ("pytest -q", "pytest  -q", "ls")


def _walk_back(calls: list[ToolCall], use: Mapping[str, Any]) -> ToolCall | None:
    """The search as the module docstring states it: every earlier call, newest first."""
    path = read_path_of(use)
    command = command_of(use) if path is None else None
    if path is None and command is None:
        return None
    wanted = normalize_command(command) if command is not None else None
    arguments = _other_arguments(use.get("input"))
    for call in reversed(calls):
        if call.write_path is not None and (path is None or same_path(call.write_path, path)):
            return None
        if call.result_position is None or call.is_error:
            continue
        if (
            path is not None
            and call.read_path is not None
            and same_path(call.read_path, path)
            and _other_arguments(call.input) == arguments
        ):
            return call
        if wanted is not None and call.command and normalize_command(call.command) == wanted:
            return call
    return None


def _use(kind: str, target: int, offset: int) -> dict[str, Any]:
    if kind == "Bash":
        return {"type": "tool_use", "name": "Bash", "input": {"command": COMMANDS[target % 3]}}
    tool_input: dict[str, Any] = {"file_path": PATHS[target % len(PATHS)]}
    if offset:
        tool_input["offset"] = offset
    return {"type": "tool_use", "name": kind, "input": tool_input}


_CALL = st.tuples(
    st.sampled_from(("Read", "Bash", "Write", "Glob")),
    st.integers(0, 5),
    st.sampled_from((0, 0, 10)),
    st.sampled_from(("result", "result", "error", "waiting")),
)


def _step(number: int, kind: str, target: int, offset: int, outcome: str) -> list[Entry]:
    """The entries of one tool call: its reply, then its result unless it is still waiting."""
    use = _use(kind, target, offset) | {"id": f"t{number}"}
    entries = [Entry.assistant([use], message_id=f"m{number}")]
    if outcome != "waiting":
        result = {"type": "tool_result", "tool_use_id": f"t{number}", "content": "out"}
        if outcome == "error":
            result["is_error"] = True
        entries.append(Entry.user([result]))
    return entries


def _found(call: ToolCall | None) -> str | None:
    return None if call is None else call.id


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(_CALL, st.booleans()), min_size=1, max_size=25), ask=_CALL)
def test_the_lookup_finds_what_walking_back_over_every_call_finds(
    steps: list[tuple[tuple[str, int, int, str], bool]], ask: tuple[str, int, int, str]
) -> None:
    entries: list[Entry] = []
    index = TranscriptIndex()
    lookup = _CallLookup()
    question = _use(ask[0], ask[1], ask[2])
    for number, ((kind, target, offset, outcome), sync_now) in enumerate(steps):
        entries.extend(_step(number, kind, target, offset, outcome))
        if sync_now:  # the replay syncs at its calls, not after every tool call
            index.update(entries)
            lookup.sync(index)
            every = list(index.calls.values())
            assert _found(lookup.earlier_fetch(question)) == _found(_walk_back(every, question))
    index.update(entries)
    lookup.sync(index)
    every = list(index.calls.values())
    assert _found(lookup.earlier_fetch(question)) == _found(_walk_back(every, question))


def test_a_new_index_dict_starts_the_lookup_again() -> None:
    read = _use("Read", 0, 0)
    entries = _step(0, "Read", 0, 0, "result")
    index = TranscriptIndex().update(entries)
    lookup = _CallLookup()
    lookup.sync(index)
    assert _found(lookup.earlier_fetch(read)) == "t0"
    index.update([Entry.user("other entries")])  # the index was rebuilt from other entries
    lookup.sync(index)
    assert lookup.earlier_fetch(read) is None


def test_the_lookup_holds_rows_not_a_call_object_each() -> None:
    """The lookup's groups are packed rows: no `ToolCall` is reachable from it (an object a
    call, kept for every call of a long replay, is what the index's columns do away with)."""
    entries: list[Entry] = []
    for number in range(300):
        kind = ("Read", "Bash", "Write")[number % 3]
        entries.extend(_step(number, kind, number % 7, 0, "result"))
    index = TranscriptIndex().update(entries)
    lookup = _CallLookup()
    lookup.sync(index)
    held = [lookup.by_name, lookup.by_command, *lookup.by_name.values()]
    held += list(lookup.by_command.values())
    assert sum(len(rows) for rows in lookup.by_command.values()) == 100
    assert not any(isinstance(v, ToolCall) for item in held for v in gc.get_referents(item))
    assert all(isinstance(rows, array) for rows in lookup.by_name.values())
