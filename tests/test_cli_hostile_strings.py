"""Every string a session file holds is printed as it is: a model name, a tool name, a path, a
command, a summary or a timestamp with `[/]`, `[bold]`, `\\` or `:smile:` in it neither breaks
rich's markup (a traceback) nor is eaten by it (a tag, a backslash or an emoji code gone).

Each fixture is rewritten with a hostile piece appended to every string value of every record
(JSON held in a string too), and every command that reads a session runs on it."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.app import console, error_console
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)

FIXTURES = Path(__file__).parent / "fixtures"
PIECES = ("[/]", "[bold]", "[red]", "\\", "[link=x]", ":smile:")
HOSTILE = "¤" + "¤".join(PIECES) + "¤\\"
"""Appended to every string: each piece between two `¤`, and a trailing backslash (a piece
rich eats leaves `¤¤`)."""
MODEL = "claude-weird[/]{}[bold]" + HOSTILE
"""A model name of the file, the name it had in the middle (two models stay two): unknown to
the model table, so it is shown under its own name."""
MAIN_MODEL = {
    "sessions/interrupted.jsonl": "claude-opus-4-6",
    "sessions/mixed_models.jsonl": "claude-opus-4-6",
    "session_2_1.jsonl": "claude-sonnet-4-5-20250929",
    "codex_rollout.jsonl": "gpt-5-codex",
    "swe_agent_v1.traj": "claude-sonnet-4-20250514",
    "openhands_output.jsonl": "claude-sonnet-4-20250514",  # its calls', not its config's
}
"""Each fixture's model (its first call's)."""
IN_A_NAME = HOSTILE.replace("[/]¤", "")
"""HOSTILE as a file name can hold it (no `/`)."""
STRUCTURE = {"type", "role", "subtype"}
"""The readers' vocabulary: a record whose type is poisoned is another record (or none)."""
SESSIONS = [
    "sessions/interrupted.jsonl",  # Claude Code
    "sessions/mixed_models.jsonl",  # Claude Code, two models: "calls by model", "other models"
    "session_2_1.jsonl",  # Claude Code with a compaction boundary
    "codex_rollout.jsonl",
    "swe_agent_v1.traj",
    "openhands_output.jsonl",
]


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    # Wide enough that no cell cuts the model name.
    monkeypatch.setattr(console, "width", 400)
    monkeypatch.setattr(error_console, "width", 400)


def poisoned(value: Any, key: str | None = None, *, in_model: bool = False, first: bool = False) -> Any:
    """`value` with HOSTILE after every string (before it when `first`: a field shown cut
    to its start), every model name made a MODEL; keys and the STRUCTURE fields left as
    they are."""
    if isinstance(value, dict):
        return {
            k: poisoned(v, k, in_model=key == "model", first=first) for k, v in value.items()
        }
    if isinstance(value, list):
        return [poisoned(v, key, in_model=in_model, first=first) for v in value]
    if not isinstance(value, str) or key in STRUCTURE or HOSTILE in value:
        return value  # poisoned once is enough (a compacted poisoned session)
    if key == "model" or (in_model and key == "name"):  # a SWE-agent's model: {name: ...}
        return MODEL.format(value)
    if value[:1] in "{[":  # JSON in a string (tool arguments, a SWE-agent's replay_config)
        try:
            held = json.loads(value)
        except ValueError:
            held = None
        if isinstance(held, dict | list):
            return json.dumps(poisoned(held, key, first=first))
    return HOSTILE + value if first else value + HOSTILE


def write_poisoned(source: Path, folder: Path, *, first: bool = False) -> Path:
    """The session rewritten with every string poisoned, in `folder` under its own name."""
    target = folder / source.name
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".traj":  # one JSON document
        target.write_text(json.dumps(poisoned(json.loads(text), first=first)), encoding="utf-8")
    else:
        lines = [
            json.dumps(poisoned(json.loads(line), first=first))
            for line in text.splitlines()
            if line
        ]
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def run(*args: str) -> Result:
    """The command in-process; it must end without a traceback (an exit status is fine)."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def assert_shown_as_is(text: str) -> None:
    """Every hostile piece the output shows is whole: nothing between two `¤` went missing or
    became something else (a cut cell shows `…`; a note quoting a name with repr shows its
    backslash doubled, as repr does)."""
    assert "¤¤" not in text
    for line in text.splitlines():
        for between in line.split("¤")[1:-1]:
            if not re.search(r"\s|…", between):
                assert between in (*PIECES, "\\\\"), (between, line)


def header_row(text: str, label: str) -> str:
    """The value of the `label` row of the command's header panel."""
    for line in text.splitlines():
        if line.startswith(f"│ {label}  "):
            return line[len(label) + 2 :].strip(" │")
    raise AssertionError(f"no {label!r} row in {text}")


@pytest.mark.parametrize("name", SESSIONS)
def test_every_command_shows_a_poisoned_session_as_it_is(name: str, tmp_path: Path) -> None:
    path = str(write_poisoned(FIXTURES / name, tmp_path))
    shown = {}
    for args in (
        ["inspect", path],
        ["replay", path],
        ["replay", path, "--model", "gpt-5"],  # another provider: "* recorded on MODEL"
        ["compact", path],
        ["eval", path],
    ):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert_shown_as_is(result.stdout + result.stderr)
        shown[" ".join(args[::2])] = result.stdout
    model = MODEL.format(MAIN_MODEL[name])
    assert header_row(shown["inspect"], "model").startswith(f"{model} (")
    assert header_row(shown["replay"], "model").startswith(f"{model} · window")
    if name != "swe_agent_v1.traj":  # the one that records no cost to compare
        recorded_on = f"* recorded on {model}: its cost is not comparable"
        assert recorded_on in shown["replay --model"]
    if name == "sessions/mixed_models.jsonl":
        other = MODEL.format("claude-haiku-4-5-20251001")
        assert header_row(shown["inspect"], "calls by model") == f"{model} 10, {other} 3"
        assert header_row(shown["replay"], "other models").startswith(f"{other} 3 calls, each")


def test_a_batch_shows_poisoned_sessions_as_they_are(tmp_path: Path) -> None:
    for name in SESSIONS[:2] + SESSIONS[3:5]:
        write_poisoned(FIXTURES / name, tmp_path)
    for command in ("replay", "eval"):
        result = run(command, str(tmp_path))
        assert result.exit_code == 0, result.output
        assert_shown_as_is(result.stdout + result.stderr)


def test_a_compacted_poisoned_session_shows_its_boundary_and_receipt_as_they_are(
    tmp_path: Path,
) -> None:
    """The boundary and receipt `compact -o` writes, poisoned in turn: the boundaries table
    (trigger, time) and the receipts table (kind, dropped tools, summarizer) show them whole."""
    source = write_poisoned(FIXTURES / "sessions" / "mixed_models.jsonl", tmp_path)
    compacted = tmp_path / "compacted" / "out.jsonl"
    compacted.parent.mkdir()
    assert run("compact", str(source), "-o", str(compacted)).exit_code == 0
    for first in (False, True):  # before: the receipt's time is shown cut to 16 characters
        (tmp_path / str(first)).mkdir()
        again = write_poisoned(compacted, tmp_path / str(first), first=first)
        result = run("inspect", str(again))
        assert result.exit_code == 0, result.output
        assert_shown_as_is(result.stdout + result.stderr)
        boundaries = result.stdout.split("Compaction boundaries")[1].split("Receipts")[0]
        receipts = result.stdout.split("Receipts")[1]
        if first:
            assert f"│ {HOSTILE}manual " in boundaries
            assert f"│ {HOSTILE[:16]} │" in receipts
        else:
            assert f"│ manual{HOSTILE} " in boundaries
            assert f"extractive{HOSTILE}" in receipts
            assert f"(manual{HOSTILE})" in receipts


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.text(alphabet="ab[]/\\#@=:_x", min_size=1, max_size=24))
def test_any_model_name_is_shown_as_it_is(model: str, tmp_path: Path) -> None:
    """Whatever brackets, backslashes and colons a model name holds, the header shows it."""
    name = f"zz-{model}"  # no model of the table starts so: shown under its own name
    records = [
        json.loads(line)
        for line in (FIXTURES / "sessions" / "interrupted.jsonl").read_text().splitlines()
    ]
    for record in records:
        if isinstance(record.get("message"), dict) and "model" in record["message"]:
            record["message"]["model"] = name
    path = tmp_path / "model.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    shown = run("inspect", str(path))
    assert shown.exit_code == 0, shown.output
    assert header_row(shown.stdout, "model").startswith(f"{name} (")
    replayed = run("replay", str(path), "--no-variants")
    assert replayed.exit_code == 0, replayed.output
    assert header_row(replayed.stdout, "model").startswith(f"{name} · window")


def test_a_timeline_event_quoting_the_session_is_shown_as_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An invalid request's or a failed compaction's text quotes records (ids, tool names)."""
    from unbounded.cli.replay_command import render_timeline
    from unbounded.evaluation.replay import TimelineEvent

    said = f"messages.3: tool_use id 'toolu{HOSTILE}' has no tool_result"
    report = SimpleNamespace(timeline=[TimelineEvent(3, 0.0, "invalid_request", said)])
    render_timeline(report)  # type: ignore[arg-type]  (only its timeline is read)
    out = capsys.readouterr().out
    assert said in out
    assert_shown_as_is(out)


def test_compact_names_a_bracketed_output_file_as_it_is(tmp_path: Path) -> None:
    output = tmp_path / f"out{IN_A_NAME}.jsonl"
    result = run("compact", str(FIXTURES / "sessions" / "interrupted.jsonl"), "-o", str(output))
    assert result.exit_code == 0, result.output
    assert f"│ {output} " in result.stdout


def test_the_database_commands_show_session_ids_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sessions` lists ids (a file name's stem by default), `import` and `export` name one."""
    from unbounded.postgres import transfer

    name = f"s{IN_A_NAME}"  # also a file's name
    when = datetime(2026, 11, 30, tzinfo=timezone.utc)
    listed = transfer.SessionInfo(f"s{HOSTILE}", 3, 2048, when, when)
    monkeypatch.setattr(transfer, "list_sessions", lambda url: [listed])
    monkeypatch.setattr(transfer, "export_session", lambda url, session, output: 10)
    monkeypatch.setattr(
        transfer,
        "import_session",
        lambda path, url, session, **_: transfer.ImportResult(session, 3, 10, [], 0),
    )
    url = "postgresql://me@localhost/d[red]b"
    shown = run("sessions", url)
    assert shown.exit_code == 0, shown.output
    assert f"│ s{HOSTILE} │" in shown.stdout
    assert "Sessions in postgresql://me@localhost/d[red]b" in shown.stdout
    exported = run("export", url, "--session", name, "-o", str(tmp_path / f"{name}.jsonl"))
    assert exported.exit_code == 0, exported.output
    assert f"exported {name} (10 B) to {tmp_path / name}.jsonl" in exported.stderr
    source = tmp_path / f"{name}.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    imported = run("import", str(source), url)
    assert imported.exit_code == 0, imported.output
    assert f"as session {name}\n" in imported.stderr


def test_the_probe_exams_title_shows_model_names_as_they_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The examiner and grader can be models of a --models-file, named as it likes."""
    from unbounded.cli.eval_command import render_exam

    render_exam(
        {
            "points_examined": 1,
            "model": MODEL.format("x"),
            "grader_model": f"grader{HOSTILE}",
            "max_points": 3,
            "handovers": {},
        }
    )
    out = capsys.readouterr().out
    assert f"({MODEL.format('x')}; graded by grader{HOSTILE})" in " ".join(out.split())
    assert_shown_as_is(out)
