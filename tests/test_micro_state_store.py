"""Microcompaction state survives a restart: atomic JSON, mode 0600, reloaded as it was."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction import (
    CLEARED_TOOL_RESULT,
    CompactableTools,
    MicrocompactState,
    MicrocompactStateStore,
    atomic_write_json,
    load_microcompact_state,
    microcompact,
    save_microcompact_state,
)
from unbounded.errors import ConfigError

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def conversation(calls: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for tool_id, name, tokens in calls:
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_id, "content": "x" * tokens * 4}
                ],
            }
        )
    return messages


def test_round_trip_restores_clears_order_and_pinned_edits(tmp_path: Path) -> None:
    state = MicrocompactState()
    calls = [(f"t{i}", "Bash", 10_000) for i in range(8)]
    first = microcompact(conversation(calls), state)
    calls += [(f"c{i}", "Grep", 500) for i in range(10)]
    microcompact(conversation(calls), state, cache_edits_supported=True)
    state.observe_response({"cache_read_input_tokens": 90_000, "cache_deleted_input_tokens": 0})
    assert state.cleared and state.cached.pinned_edits
    path = save_microcompact_state(state, tmp_path / "session")
    assert path == tmp_path / "session" / "microcompact_state.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind

    again = load_microcompact_state(tmp_path / "session")
    assert again.to_dict() == state.to_dict()
    assert list(again.cleared) == list(state.cleared)
    assert again.cached.tool_order == state.cached.tool_order
    assert again.cached.pinned_edits == state.cached.pinned_edits
    assert again.cache_deleted_input_tokens == 0
    # After the restart the same view gets the same clears and the same edits, nothing new.
    result = microcompact(conversation(calls), again, cache_edits_supported=True)
    assert result.tier == "none"
    assert result.cache_edits == tuple(state.cached.pinned_edits)
    cleared = {
        b["tool_use_id"]
        for m in result.messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b["content"] == CLEARED_TOOL_RESULT
    }
    assert cleared == set(first.cleared_ids)


def test_missing_file_gives_a_fresh_state(tmp_path: Path) -> None:
    state = load_microcompact_state(tmp_path / "nothing-here")
    assert state.cleared == {} and state.cached.tool_order == []
    assert not (tmp_path / "nothing-here").exists()


def test_custom_tools_are_saved_and_can_be_overridden(tmp_path: Path) -> None:
    tools = CompactableTools.default().with_tools("fetch_docs").with_aliases({"cat": "Read"})
    store = MicrocompactStateStore(tmp_path)
    store.save(MicrocompactState(tools))
    assert store.load().tools == tools
    assert (
        MicrocompactStateStore(tmp_path, tools=CompactableTools()).load().tools
        == CompactableTools()
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"version": 99}', "unsupported"),
        (
            '{"version": 1, "tools": {"tools": ["Read"], "aliases": {}}, "cleared": [["a"]]}',
            "cleared",
        ),
        (
            '{"version": 1, "tools": {"tools": ["Read"], "aliases": {}}, "stats": {"turns": -1}}',
            "stats.turns",
        ),
        (
            '{"version": 1, "tools": {"tools": ["Read"], "aliases": {}}, '
            '"cached": {"tool_order": [1]}}',
            "cached.tool_order",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_field(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "microcompact_state.json").write_text(content)
    with pytest.raises(ConfigError, match=message) as error:
        load_microcompact_state(tmp_path)
    assert "microcompact_state.json" in str(error.value)


def test_atomic_write_replaces_and_keeps_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

    def broken(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_time_based_state_survives_restart(tmp_path: Path) -> None:
    calls = [(f"r{i}", "Read", 100) for i in range(8)]
    state = MicrocompactState()
    fired = microcompact(
        conversation(calls), state, now=T0 + timedelta(hours=2), last_assistant_at=T0
    )
    assert fired.tier == "time"
    save_microcompact_state(state, tmp_path)
    restarted = load_microcompact_state(tmp_path)
    later = microcompact(
        conversation(calls),
        restarted,
        now=T0 + timedelta(hours=2, minutes=1),
        last_assistant_at=T0 + timedelta(hours=2),
    )
    assert later.messages == fired.messages
    assert restarted.stats.time_clear_events == 1
