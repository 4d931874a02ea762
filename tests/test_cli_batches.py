"""Many sessions in one command: `replay` and `eval` on folders and globs, one bad file
reported while the others run, a table across files, `--jobs`; and no-argument `replay`
skipping sessions that hold no conversation."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.cli import app
from unbounded.cli.app import console, error_console
from unbounded.cli.batch import expand_paths
from unbounded.errors import ConfigError

runner = CliRunner()
SESSIONS = FIXTURES / "sessions"
SNAPSHOT_ONLY = (
    '{"type":"file-history-snapshot","messageId":"m1","snapshot":{"messageId":"m1",'
    '"trackedFileBackups":{},"timestamp":"2026-01-01T00:00:00Z"},"isSnapshotUpdate":false}\n'
)


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 120)
    monkeypatch.setattr(error_console, "width", 200)  # one error per line


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three good sessions (one a level down), a bad one, and a file that is not a session."""
    root = tmp_path / "runs"
    (root / "older").mkdir(parents=True)
    shutil.copy(SESSIONS / "rewound.jsonl", root / "a.jsonl")
    shutil.copy(SESSIONS / "interrupted.jsonl", root / "b.jsonl")
    shutil.copy(FIXTURES / "session_2_1.jsonl", root / "older" / "c.jsonl")
    (root / "broken.jsonl").write_text('{"type": "user", "message": \n', encoding="utf-8")
    (root / "notes.txt").write_text("not a session\n", encoding="utf-8")
    return root


# -- expanding the arguments ------------------------------------------------------------------


def test_a_folder_expands_to_its_sessions_every_level_down_sorted(folder: Path) -> None:
    assert expand_paths([str(folder)]) == [
        str(folder / "a.jsonl"),
        str(folder / "b.jsonl"),
        str(folder / "broken.jsonl"),
        str(folder / "older" / "c.jsonl"),
    ]


def test_globs_expand_sorted_and_repeats_are_dropped(folder: Path) -> None:
    assert expand_paths([str(folder / "*.jsonl"), str(folder / "a.jsonl")]) == [
        str(folder / "a.jsonl"),
        str(folder / "b.jsonl"),
        str(folder / "broken.jsonl"),
    ]
    assert expand_paths([str(folder / "**" / "c.jsonl")]) == [str(folder / "older" / "c.jsonl")]


def test_a_database_address_and_a_plain_file_pass_as_given(folder: Path) -> None:
    address = "postgresql://agent@db/agents?session=x"
    assert expand_paths([address, str(folder / "missing.jsonl")]) == [
        address,
        str(folder / "missing.jsonl"),
    ]


def test_a_glob_or_folder_with_no_session_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no file matches"):
        expand_paths([str(tmp_path / "*.jsonl")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"holds no session"):
        expand_paths([str(tmp_path / "empty")])


# -- replay -------------------------------------------------------------------------------------


def test_replay_a_folder_reports_the_bad_file_and_replays_the_others(folder: Path) -> None:
    result = runner.invoke(app, ["replay", str(folder)])
    assert result.exit_code == 2  # one file failed
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "broken.jsonl:1" in errors[0]
    out = result.stdout
    assert "Replayed 3 sessions (1 failed, see above)" in out
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        assert name in out
    assert "total" in out


def test_replay_batch_json_and_jobs_give_the_same_figures(folder: Path) -> None:
    runs = []
    for jobs in ("1", "2"):
        result = runner.invoke(app, ["replay", str(folder), "--json", "--jobs", jobs])
        assert result.exit_code == 2
        runs.append(json.loads(result.stdout))
    serial, parallel = runs
    assert [s["source"] for s in serial["sessions"]] == [
        str(folder / "a.jsonl"),
        str(folder / "b.jsonl"),
        str(folder / "older" / "c.jsonl"),
    ]
    assert [f["path"] for f in serial["failed"]] == [str(folder / "broken.jsonl")]
    assert serial == parallel
    # each session's report is the one a single replay gives
    single = runner.invoke(app, ["replay", str(folder / "a.jsonl"), "--json"])
    alone = json.loads(single.stdout)
    in_batch = serial["sessions"][0]
    assert alone.pop("source") == "a.jsonl" and in_batch.pop("source") == str(folder / "a.jsonl")
    assert alone == in_batch


def test_replay_report_takes_one_session(folder: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(folder), "--report", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "--report writes one session's page: give one session, not 4" in result.stderr


def test_a_session_without_a_conversation_is_refused_plainly(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.jsonl"
    snapshot.write_text(SNAPSHOT_ONLY, encoding="utf-8")
    result = runner.invoke(app, ["replay", str(snapshot)])
    assert result.exit_code == 2
    assert "no conversation to replay" in result.stderr


def _home_with_sessions(home: Path) -> Path:
    """Claude Code sessions: an older real one, then newer ones without a conversation."""
    project = home / ".claude" / "projects" / "-home-me-app"
    project.mkdir(parents=True)
    real = project / "11111111-real.jsonl"
    shutil.copy(SESSIONS / "rewound.jsonl", real)
    (project / "22222222-empty.jsonl").write_text("", encoding="utf-8")
    (project / "33333333-snapshots.jsonl").write_text(SNAPSHOT_ONLY, encoding="utf-8")
    for age, name in enumerate(("33333333-snapshots", "22222222-empty", "11111111-real")):
        stamp = 1_700_000_000 - age * 60
        os.utime(project / f"{name}.jsonl", (stamp, stamp))
    return real


def test_replay_without_a_path_skips_newer_sessions_without_a_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _home_with_sessions(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    result = runner.invoke(app, ["replay", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["source"] == f"{real.parent.name}/{real.name}"
    assert data["calls"] > 0
    assert "skipped 2 newer sessions with no conversation" in result.stderr


def test_replay_without_a_path_refuses_a_report_over_the_session_it_would_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _home_with_sessions(tmp_path)
    before = real.read_bytes()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    result = runner.invoke(app, ["replay", "--report", str(real)])
    assert result.exit_code != 0
    assert "would replace the recording" in result.stderr
    assert real.read_bytes() == before


# -- eval ---------------------------------------------------------------------------------------


def test_eval_a_folder_with_a_bad_file_and_jobs(folder: Path) -> None:
    runs = []
    for jobs in ("1", "2"):
        result = runner.invoke(app, ["eval", str(folder), "--json", "--jobs", jobs])
        assert result.exit_code == 2
        runs.append(json.loads(result.stdout))
    serial, parallel = runs
    assert serial == parallel
    assert serial["sessions"] == 3
    assert [f["path"] for f in serial["failed"]] == [str(folder / "broken.jsonl")]
    assert len(serial["by_session"]) == 3
    # the aggregate is the sum of the parts
    facts = sum(one["user_prompts"]["facts"] for one in serial["by_session"].values())
    assert serial["user_prompts"]["facts"] == facts


def test_eval_prints_a_table_across_sessions(folder: Path) -> None:
    result = runner.invoke(app, ["eval", str(folder / "a.jsonl"), str(folder / "b.jsonl")])
    assert result.exit_code == 0, result.stderr
    assert "2 sessions evaluated" in result.stdout
    assert "a.jsonl" in result.stdout and "b.jsonl" in result.stdout


def test_eval_of_one_bad_file_still_fails_with_its_error(folder: Path) -> None:
    result = runner.invoke(app, ["eval", str(folder / "broken.jsonl")])
    assert result.exit_code == 2
    assert "broken.jsonl:1" in result.stderr
