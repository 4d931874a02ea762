"""A batch's total counts each billed call once across files: a resumed (or forked) Claude
Code session starts with a copy of the earlier session's calls (same response ids and usage),
and those calls belong to the file they came first in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.app import console, error_console

runner = CliRunner()
Call = tuple[str, str]
"""A turn of a generated session: its response id and the prompt before it."""


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 160)
    monkeypatch.setattr(error_console, "width", 200)


def _records(session: str, calls: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """A Claude Code session: per call a prompt and a reply with usage; each call is
    (response id, prompt, minute of the day); uuids are the session's own."""
    records: list[dict[str, Any]] = []
    parent: str | None = None
    for number, (message_id, prompt, minute) in enumerate(calls):
        stamp = f"2026-03-02T09:{minute:02d}:00.000Z"
        reply_stamp = f"2026-03-02T09:{minute:02d}:05.000Z"
        prompt_uuid = f"{session}-{number}-u"
        reply_uuid = f"{session}-{number}-a"
        base = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": session}
        records.append(
            {
                **base,
                "parentUuid": parent,
                "type": "user",
                "message": {"role": "user", "content": prompt},
                "uuid": prompt_uuid,
                "timestamp": stamp,
            }
        )
        size = 2_000 * (number + 1)
        records.append(
            {
                **base,
                "parentUuid": prompt_uuid,
                "type": "assistant",
                "message": {
                    "model": "claude-sonnet-4-5",
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Answer to {prompt}. " * 20}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 10 + len(message_id),
                        "cache_creation_input_tokens": 400 + 7 * len(prompt),
                        "cache_read_input_tokens": size,
                        "output_tokens": 120 + number,
                    },
                },
                "uuid": reply_uuid,
                "timestamp": reply_stamp,
            }
        )
        parent = reply_uuid
    return records


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


FIRST: list[tuple[str, str, int]] = [
    ("msg_a1", "Set up the project", 0),
    ("msg_a2", "Add tests", 1),
]
RESUMED: list[tuple[str, str, int]] = [*FIRST, ("msg_b3", "Fix the failing test", 30)]


@pytest.fixture
def resumed(tmp_path: Path) -> Path:
    """a.jsonl: two billed calls; b.jsonl: a resume of it, a copy of its records (new uuids
    and session id, same response ids, usage and times) and one call of its own."""
    root = tmp_path / "resumed"
    root.mkdir()
    _write(root / "a.jsonl", _records("sess-a", FIRST))
    _write(root / "b.jsonl", _records("sess-b", RESUMED))
    return root


def _json(*arguments: str) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", *arguments, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _single(path: Path) -> dict[str, Any]:
    return _json(str(path), "--series")


def _copied_share(single: dict[str, Any], calls: slice) -> tuple[float, float]:
    """Our cost and the recorded cost of some calls of a single-file replay (its series)."""
    points = single["series"][calls]
    return sum(p["cost"] for p in points), sum(p["recorded_cost"] for p in points)


def _entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [s for s in data["sessions"] if Path(s["source"]).name == name]
    assert len(found) == 1
    return found[0]


def test_a_resumed_sessions_copied_calls_count_once_in_the_total(resumed: Path) -> None:
    first, again = _single(resumed / "a.jsonl"), _single(resumed / "b.jsonl")
    assert (first["calls"], again["calls"]) == (2, 3)
    data = _json(str(resumed))
    total = data["total"]
    assert (total["calls"], total["replayed_calls"], total["repeated_calls"]) == (3, 3, 2)
    copied_cost, copied_recorded = _copied_share(again, slice(0, 2))
    cost = first["cost"]["unbounded"] + again["cost"]["unbounded"] - copied_cost
    recorded = first["cost"]["recorded"] + again["cost"]["recorded"] - copied_recorded
    assert total["cost"] == pytest.approx(cost, abs=1e-5)
    assert total["recorded_cost"] == pytest.approx(recorded, abs=1e-5)
    # the copy replays as the original did: the total is the resumed session's own figures
    assert copied_cost == pytest.approx(first["cost"]["unbounded"], abs=1e-5)
    # the calls belong to the first file (same first time: the path decides); per-file
    # figures stay whole
    a, b = _entry(data, "a.jsonl"), _entry(data, "b.jsonl")
    assert (a["repeated_calls"], a["repeats"]) == (0, [])
    assert (b["repeated_calls"], b["repeats"]) == (2, [str(resumed / "a.jsonl")])
    assert (a["calls"], b["calls"]) == (2, 3)
    assert b["cost"] == again["cost"]


def test_the_table_total_counts_the_copy_once_and_says_so(resumed: Path) -> None:
    result = runner.invoke(app, ["replay", str(resumed)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    (total,) = (line for line in lines if line.startswith("total"))
    assert total.split()[1] == "3"  # 2 + 3 calls, 2 of them repeated
    assert total.split()[3] == f"{_json(str(resumed))['total']['cost']:,.2f}"
    note = lines[-1]
    assert note.startswith(f"{resumed / 'b.jsonl'} repeats 2 billed calls of ")
    assert str(resumed / "a.jsonl") in note and "the total counts them once" in note


def test_jobs_give_the_same_totals(resumed: Path) -> None:
    assert _json(str(resumed), "--jobs", "2") == _json(str(resumed))
    tables = [runner.invoke(app, ["replay", str(resumed), "--jobs", jobs]) for jobs in "12"]
    assert tables[0].stdout == tables[1].stdout


def test_a_fork_repeating_the_middle_of_a_session_belongs_to_the_earlier_file(
    tmp_path: Path,
) -> None:
    """z.jsonl (earlier) has three calls; m.jsonl, written later, copies its first two
    (new uuids and times) and goes on with two of its own. The path order would give the
    calls to m.jsonl: the first record's time gives them to z.jsonl."""
    original = [("msg_z1", "Plan", 0), ("msg_z2", "Build", 1), ("msg_z3", "Ship", 2)]
    fork = [("msg_z1", "Plan", 20), ("msg_z2", "Build", 21), ("msg_m3", "Try", 22)]
    fork.append(("msg_m4", "Retry", 23))
    _write(tmp_path / "z.jsonl", _records("sess-z", original))
    _write(tmp_path / "m.jsonl", _records("sess-m", fork))
    z, m = _single(tmp_path / "z.jsonl"), _single(tmp_path / "m.jsonl")
    data = _json(str(tmp_path))
    assert _entry(data, "z.jsonl")["repeated_calls"] == 0
    forked = _entry(data, "m.jsonl")
    assert (forked["repeated_calls"], forked["repeats"]) == (2, [str(tmp_path / "z.jsonl")])
    copied_cost, copied_recorded = _copied_share(m, slice(0, 2))
    total = data["total"]
    assert total["calls"] == 3 + 4 - 2
    assert total["cost"] == pytest.approx(
        z["cost"]["unbounded"] + m["cost"]["unbounded"] - copied_cost, abs=1e-5
    )
    assert total["recorded_cost"] == pytest.approx(
        z["cost"]["recorded"] + m["cost"]["recorded"] - copied_recorded, abs=1e-5
    )


def test_a_third_file_repeating_two_others_names_both(resumed: Path) -> None:
    """c.jsonl resumes b.jsonl: it repeats a.jsonl's calls and b.jsonl's own one."""
    _write(resumed / "c.jsonl", _records("sess-c", [*RESUMED, ("msg_c4", "Release", 40)]))
    data = _json(str(resumed))
    third = _entry(data, "c.jsonl")
    assert third["repeated_calls"] == 3
    assert third["repeats"] == [str(resumed / "a.jsonl"), str(resumed / "b.jsonl")]
    assert data["total"]["calls"] == 4


def test_without_shared_ids_the_total_adds_every_session(tmp_path: Path) -> None:
    """No shared response id: a total of every session's figures (the key is always there),
    no per-session repeat keys, no note line."""
    _write(tmp_path / "a.jsonl", _records("sess-a", FIRST))
    _write(tmp_path / "b.jsonl", _records("sess-b", [("msg_x1", "Other work", 5)]))
    data = _json(str(tmp_path))
    assert list(data) == ["sessions", "total", "failed"]
    total, sessions = data["total"], data["sessions"]
    assert (total["calls"], total["replayed_calls"], total["repeated_calls"]) == (3, 3, 0)
    assert total["cost"] == pytest.approx(sum(s["cost"]["unbounded"] for s in sessions), abs=1e-5)
    assert total["compactions"] == sum(s["compactions"] for s in sessions)
    assert all("repeated_calls" not in entry for entry in data["sessions"])
    table = runner.invoke(app, ["replay", str(tmp_path)]).stdout.splitlines()
    assert table[-1].startswith("total") and table[-1].split()[1] == "3"


def test_codex_sessions_are_not_matched_by_their_made_up_ids(tmp_path: Path) -> None:
    """A Codex rollout has no provider response id (the reader numbers its calls): two
    sessions share those numbers without sharing a call."""
    from conftest import FIXTURES

    rollout = (FIXTURES / "codex_rollout.jsonl").read_text(encoding="utf-8")
    for name in ("one.jsonl", "two.jsonl"):
        (tmp_path / name).write_text(rollout, encoding="utf-8")
    data = _json(str(tmp_path))
    assert data["total"]["repeated_calls"] == 0
    single = _json(str(tmp_path / "one.jsonl"))
    assert [entry["calls"] for entry in data["sessions"]] == [single["calls"]] * 2


def test_calls_on_a_rewound_branch_count_once_too(tmp_path: Path) -> None:
    """A resume of a rewound session copies the abandoned branch as well: its calls (not
    replayed, priced as recorded) are repeats like the others."""
    from conftest import FIXTURES

    text = (FIXTURES / "sessions" / "rewound.jsonl").read_text(encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(text, encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    for uuid in {r["uuid"] for r in records if "uuid" in r} | {r["sessionId"] for r in records}:
        text = text.replace(uuid, "c0" + uuid[2:])  # new uuids and session id, same calls
    (tmp_path / "b.jsonl").write_text(text, encoding="utf-8")
    first = _single(tmp_path / "a.jsonl")
    assert first["calls_not_replayed"] == {"branch": 3}
    total = _json(str(tmp_path))["total"]
    assert (total["calls"], total["replayed_calls"]) == (first["calls"], first["replayed_calls"])
    assert total["repeated_calls"] == first["calls"]
    assert total["cost"] == pytest.approx(first["cost"]["unbounded"], abs=1e-5)
    assert total["recorded_cost"] == pytest.approx(first["cost"]["recorded"], abs=1e-5)


def test_replies_known_only_by_their_line_are_not_matched_across_files(tmp_path: Path) -> None:
    """A reply with usage but no response id, request id or uuid is billed as its line; the
    same line of another file is another call, not a repeat."""
    for name, session, prompt in (("a.jsonl", "sess-a", "Set up"), ("b.jsonl", "sess-b", "Other")):
        records = _records(session, [("msg_unused", prompt, 0 if name == "a.jsonl" else 9)])
        records[1]["message"]["id"] = None
        del records[1]["uuid"]
        _write(tmp_path / name, records)
    data = _json(str(tmp_path))
    assert data["total"]["repeated_calls"] == 0
    assert [entry["calls"] for entry in data["sessions"]] == [1, 1]


def test_the_compactions_at_copied_calls_count_once_in_the_total(tmp_path: Path) -> None:
    """A replay of the copy compacts where the original's did: those compactions are the
    original's, left out of the total as the copied calls' costs are."""
    calls = [(f"msg_a{i}", f"Step {i} " + "x" * 300, i) for i in range(14)]
    _write(tmp_path / "a.jsonl", _records("sess-a", calls))
    _write(tmp_path / "b.jsonl", _records("sess-b", [*calls, ("msg_b9", "More " + "y" * 300, 30)]))
    window = ("--window", "20000", "--no-variants")
    first = _json(str(tmp_path / "a.jsonl"), *window)
    again = _json(str(tmp_path / "b.jsonl"), "--series", *window)
    assert first["compactions"] >= 1  # the copy compacts too
    own = sum(1 for point in again["series"][len(calls) :] if point["compaction"])
    total = _json(str(tmp_path), *window)["total"]
    assert total["compactions"] == first["compactions"] + own
    assert total["compactions"] < first["compactions"] + again["compactions"]
    table = runner.invoke(app, ["replay", str(tmp_path), *window]).stdout.splitlines()
    (line,) = (line for line in table if line.startswith("total"))
    assert line.split()[2] == str(total["compactions"])
