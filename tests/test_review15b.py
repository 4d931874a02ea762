"""Review of session 15's last src changes (i35y outputs and dead workers, i35d batch totals,
the lead's markup escaping): each test is a bug found by attacking them, written as a
strict xfail first and passing since its fix."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from unbounded.cli import app
from unbounded.cli.batch import expand_paths, run_each
from unbounded.cli.batch_totals import first_record_time
from unbounded.cli.text import shorten_middle
from unbounded.fileio import write_output_chunks

SESSIONS = Path(__file__).parent / "fixtures" / "sessions"
RECORDING = SESSIONS / "interrupted.jsonl"
runner = CliRunner()


# -- 1. Outputs --------------------------------------------------------------------------------
def test_report_over_the_recording_is_refused(tmp_path: Path) -> None:
    recording = tmp_path / "s.jsonl"
    shutil.copyfile(RECORDING, recording)
    link = tmp_path / "report.html"
    link.symlink_to(recording.name)
    before = recording.read_bytes()
    result = runner.invoke(app, ["replay", str(recording), "--report", str(link)])
    assert recording.read_bytes() == before
    assert result.exit_code == 2


def test_tune_output_over_a_session_it_reads_is_refused(tmp_path: Path) -> None:
    recording = tmp_path / "s.jsonl"
    shutil.copyfile(RECORDING, recording)
    before = recording.read_bytes()
    result = runner.invoke(
        app, ["tune", str(recording), "--trials", "0", "--jobs", "1", "-o", str(recording)]
    )
    assert recording.read_bytes() == before
    assert result.exit_code == 2


# -- 3. Batch totals ---------------------------------------------------------------------------
def test_first_record_time_skips_a_deeply_nested_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"[" * 5000 + b"\n" + RECORDING.read_bytes())
    assert first_record_time(path) == first_record_time(RECORDING)
    assert first_record_time(RECORDING) is not None


def test_a_file_named_by_its_folder_and_by_itself_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copyfile(RECORDING, tmp_path / "s.jsonl")
    monkeypatch.chdir(tmp_path)
    assert len(expand_paths([".", "./s.jsonl"])) == 1


# -- 4. Markup escaping ------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 6])
def test_a_name_ending_in_a_backslash_is_shown_as_it_is(width: int) -> None:
    name = "notes\\"
    console = Console(width=120, force_terminal=False)
    with console.capture() as captured:
        console.print(shorten_middle(name, width), highlight=False)
    assert captured.get().rstrip("\n") == name


# -- 2. run_each -------------------------------------------------------------------------------
def _marks_then_interrupted_on_b(path: str) -> str:
    """Leaves a mark per session it starts; b is interrupted (Ctrl-C reaching its worker)."""
    Path(path).touch()
    if Path(path).name == "b":
        raise KeyboardInterrupt
    time.sleep(0.2)
    return path


def test_an_interrupt_with_jobs_does_not_run_the_rest_of_the_batch(tmp_path: Path) -> None:
    names = [chr(ord("a") + index) for index in range(12)]
    with pytest.raises(KeyboardInterrupt):
        list(run_each(_marks_then_interrupted_on_b, [str(tmp_path / n) for n in names], jobs=2))
    assert not (tmp_path / names[-1]).exists()
    # Nor later, in the background: the workers left finish what they started, then stop.
    for child in multiprocessing.active_children():
        child.join(timeout=60)
    assert not (tmp_path / names[-1]).exists()


def test_a_relative_path_to_an_open_descriptor_is_written_through_it(tmp_path: Path) -> None:
    target = tmp_path / "held.txt"
    with target.open("wb") as held:
        before = os.fstat(held.fileno()).st_ino
        named = os.path.relpath(f"/proc/self/fd/{held.fileno()}")
        assert named.startswith("..")
        write_output_chunks(named, [b"report"])
    assert target.stat().st_ino == before
    assert target.read_bytes() == b"report"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_relative_path_to_another_process_descriptor_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "held.txt"
    target.write_bytes(b"")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1], 'ab'); print(f.fileno(), flush=True); "
            "time.sleep(60)",
            str(target),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        number = holder.stdout.readline().strip()
        before = target.stat().st_ino
        named = os.path.relpath(f"/proc/{holder.pid}/fd/{number}")
        assert named.startswith("..")
        write_output_chunks(named, [b"report"])
    finally:
        holder.kill()
        holder.wait()
    assert target.stat().st_ino == before
    assert target.read_bytes() == b"report"


def test_report_to_stdout_and_json_both_reach_a_redirected_file(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("wb") as stdout:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "unbounded",
                "replay",
                str(RECORDING),
                "--json",
                "--report",
                "/dev/stdout",
            ],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>")
    _page, _, printed = text.partition("</html>\n")
    assert json.loads(printed)["source"] == RECORDING.name


def test_the_resumed_file_is_the_one_said_to_repeat_whatever_the_names(tmp_path: Path) -> None:
    lines = (SESSIONS / "resumed.jsonl").read_bytes().splitlines(keepends=True)
    # Lines 1-38: the first session; 39-: its resume (the copy, then the new turns).
    (tmp_path / "z-original.jsonl").write_bytes(b"".join(lines[:38]))
    (tmp_path / "a-resumed.jsonl").write_bytes(b"".join(lines[38:]))
    assert first_record_time(tmp_path / "z-original.jsonl") == first_record_time(
        tmp_path / "a-resumed.jsonl"
    )
    result = runner.invoke(app, ["replay", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    sessions = json.loads(result.stdout)["sessions"]
    repeated = {Path(s["source"]).name: s["repeated_calls"] for s in sessions}
    assert repeated == {"a-resumed.jsonl": 10, "z-original.jsonl": 0}


def test_compact_into_a_named_pipe_with_a_reader_does_not_hang(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "unbounded", "compact", str(RECORDING), "-o", str(pipe)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=20,  # a hang guard: the command takes about a second
        )
        assert completed.returncode == 0
    finally:
        with contextlib.suppress(OSError):  # let the reader go if nothing wrote to the pipe
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=5)
    assert received and received[0].count(b"\n") > 1


@pytest.mark.parametrize("name", ["r[x].html", "r[/]x.html"])
def test_report_written_line_shows_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r[").mkdir()
    result = runner.invoke(app, ["replay", str(RECORDING), "--report", name])
    assert (tmp_path / name).exists()
    assert result.exit_code == 0
    assert f"report written to {name}" in result.stdout
