"""Shell hooks: commands come only from the settings given (a file others may write is
refused), run without a shell when they need none, get hostile text only on stdin, and are
killed with their children when they overrun."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from unbounded.errors import ConfigError
from unbounded.hooks import HookRunner, HookSettings
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell hooks")

CONFIG = SessionConfig(model="claude-sonnet-4-5", context_window=60_000)
HOSTILE = "; touch {d}/semicolon && touch {d}/and | touch {d}/pipe $(touch {d}/subshell) `touch {d}/backtick` > {d}/redirect"


def _settings_file(tmp_path: Path, command: str, event: str = "PreCompact", timeout: float | None = None) -> Path:
    hook: dict[str, object] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {event: [{"matcher": "", "hooks": [hook]}]}}))
    path.chmod(0o644)
    return path


def test_a_settings_file_other_users_can_write_is_refused(tmp_path: Path) -> None:
    path = _settings_file(tmp_path, "true")
    assert HookSettings.load(path).hooks_for("PreCompact", "manual")
    path.chmod(0o666)
    with pytest.raises(ConfigError, match="writable by every user"):
        HookSettings.load(path)
    assert HookSettings.load(path, check_permissions=False).hooks_for("PreCompact", "manual")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the file to another user")
def test_a_settings_file_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    path = _settings_file(tmp_path, "true")
    os.chown(path, 54321, 54321)  # root's own files are trusted; another user's are not
    with pytest.raises(ConfigError, match="belong to another user"):
        HookSettings.load(path)


def test_hostile_text_reaches_a_hook_only_as_json_on_stdin(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    hostile = HOSTILE.format(d=marks)
    runner = HookRunner(HookSettings.load(_settings_file(tmp_path, "cat")), session_id="s", cwd=tmp_path)
    outcome = runner.run_pre_compact("manual", hostile)
    (result,) = outcome.results
    assert result.status == "success" and json.loads(result.stdout)["custom_instructions"] == hostile
    assert list(marks.iterdir()) == []  # nothing in it was run by anyone


def test_plain_commands_run_without_a_shell(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text("import os\nprint(os.getppid())\n")
    direct = HookRunner(HookSettings.load(_settings_file(tmp_path, f"{sys.executable} {script}")), session_id="s", cwd=tmp_path)
    (result,) = direct.run_pre_compact("manual", None).results
    assert int(result.stdout) == os.getpid()  # started by us, not by /bin/sh
    piped = HookRunner(HookSettings.load(_settings_file(tmp_path, f"{sys.executable} {script} | cat")), session_id="s", cwd=tmp_path)
    (result,) = piped.run_pre_compact("manual", None).results
    assert int(result.stdout) != os.getpid()  # shell syntax: under /bin/sh -c


def test_an_overrunning_hook_is_killed_with_its_children_and_compaction_goes_on(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The child's output goes elsewhere, so only the kill can end it before its 300 s: a
    # runner that killed the shell alone would still see its pipes close (`exec`), and the
    # child would survive the deadline below.
    command = f"sleep 300 >/dev/null 2>&1 & echo $! > {pids}; exec sleep 300"
    # The check needs the hook killed after it started its child: on a loaded machine the
    # shell may not get that far within the timeout, and then it is run again with a longer one.
    for attempt, timeout in enumerate((0.5, 2.0, 8.0)):
        pids.unlink(missing_ok=True)
        settings = HookSettings.load(_settings_file(tmp_path, command, timeout=timeout))
        runner = HookRunner(settings, session_id="s", cwd=tmp_path, policy=Policy())
        session = Session.open(tmp_path / f"s{attempt}", CONFIG, policy=Policy(), hooks=runner)
        session.add_user("Do the thing.")
        session.record({"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 10, "output_tokens": 2}})
        result = asyncio.run(session.compact())
        assert result.boundary.is_compact_boundary
        written = pids.read_text().strip() if pids.exists() else ""
        if written:
            break
    else:
        pytest.fail("the hook never got to start its child")
    child = int(written)
    try:
        deadline = time.monotonic() + 30  # a hang guard: a killed child is gone at once
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0]
            except FileNotFoundError:
                break  # gone
            if state == "Z":
                break  # killed, waiting to be reaped by init
            time.sleep(0.05)
        else:
            pytest.fail(f"the hook's child {child} survived the timeout")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_hook_output_added_to_the_context_is_capped(tmp_path: Path) -> None:
    command = f"{sys.executable} -c \"print('x' * 1_000_000)\""
    runner = HookRunner(HookSettings.load(_settings_file(tmp_path, command, event="SessionStart")), session_id="s", cwd=tmp_path)
    (text,) = runner.run_session_start("compact")
    assert len(text) < 10_100 and text.endswith("characters]")
