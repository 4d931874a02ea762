"""The re-fetch search of a replay (evaluation/refetch.py) finds what a walk back over every
earlier tool call finds, walking only the calls of the same file name or command."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.evaluation.refetch import _CallLookup, _other_arguments
from unbounded.model.entries import Entry
from unbounded.recall.index import (
    ToolCall,
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


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(_CALL, st.booleans()), min_size=1, max_size=25), ask=_CALL)
def test_the_lookup_finds_what_walking_back_over_every_call_finds(
    steps: list[tuple[tuple[str, int, int, str], bool]], ask: tuple[str, int, int, str]
) -> None:
    calls: dict[str, ToolCall] = {}
    entries: list[Entry] = []
    lookup = _CallLookup()
    for number, ((kind, target, offset, outcome), sync_now) in enumerate(steps):
        use = _use(kind, target, offset)
        entries.append(Entry.assistant([use]))
        path = use["input"].get("file_path")
        calls[f"t{number}"] = ToolCall(
            id=f"t{number}",
            name=kind,
            use_position=number,
            number=number,
            source=entries,
            read_path=read_path_of(use),
            write_path=path if kind == "Write" else None,
            command=command_of(use),
            # The result's position is only compared with None here: the use's own stands in.
            result_position=None if outcome == "waiting" else number,
            is_error=outcome == "error",
        )
        if sync_now:  # the replay syncs at its calls, not after every tool call
            lookup.sync(calls)
            question = _use(ask[0], ask[1], ask[2])
            assert lookup.earlier_fetch(question) is _walk_back(list(calls.values()), question)
    lookup.sync(calls)
    question = _use(ask[0], ask[1], ask[2])
    assert lookup.earlier_fetch(question) is _walk_back(list(calls.values()), question)


def test_a_new_index_dict_starts_the_lookup_again() -> None:
    read = _use("Read", 0, 0)
    first = ToolCall(
        "a", "Read", 0, "/w/app.py", None, None, result_position=0, source=[Entry.assistant([read])]
    )
    lookup = _CallLookup()
    lookup.sync({"a": first})
    assert lookup.earlier_fetch(read) is first
    lookup.sync({})  # the index was rebuilt from other entries
    assert lookup.earlier_fetch(read) is None
