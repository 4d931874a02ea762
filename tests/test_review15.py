"""Review of session 15's src changes (the i35r reader fixes and the i35x newcomer fixes): each
test is a bug found by attacking them, written as a strict xfail first and passing since its
fix."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from unbounded import storage
from unbounded.catalog import load_model_table
from unbounded.cli import app
from unbounded.cli.batch import run_each
from unbounded.configuration import SessionConfig
from unbounded.errors import ConfigError, SessionLockedError
from unbounded.fileio import write_output_chunks
from unbounded.policy import Policy
from unbounded.session import Session
from unbounded.storage import FolderStore
from unbounded.transcripts import write_claude_code
from unbounded.transcripts.loader import load_transcript

FIXTURES = Path(__file__).parent / "fixtures"
CODEX = FIXTURES / "versions" / "codex-0.44.jsonl"
runner = CliRunner()


# -- 1. Codex: the repeat rule without totals ---------------------------------------------------
def _codex_without_totals() -> list[dict[str, Any]]:
    """codex-0.44 with `total_token_usage` taken out of every token_count (the case the new
    rule decides on `last_token_usage` and the items in between)."""
    records = [json.loads(line) for line in CODEX.read_text(encoding="utf-8").splitlines()]
    for record in records:
        info = record["payload"].get("info") if record["type"] == "event_msg" else None
        if isinstance(info, dict):
            info.pop("total_token_usage", None)
    return records


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("between", ["tool output", "user prompt"])
def test_codex_repeat_after_input_items_is_no_new_call(tmp_path: Path, between: str) -> None:
    records = _codex_without_totals()
    # Lines 5-7 of the fixture: function_call, token_count (that call), function_call_output;
    # line 4 the user's prompt, line 12 the last token_count.
    assert records[4]["payload"]["type"] == "function_call"
    assert records[5]["payload"]["type"] == "token_count"
    assert records[6]["payload"]["type"] == "function_call_output"
    assert records[3]["payload"]["role"] == "user"
    assert records[11]["payload"]["type"] == "token_count"
    plain = load_transcript(_write(tmp_path / "plain.jsonl", records))
    # The same event again after input items only: a rate-limit refresh, not a model call.
    if between == "tool output":
        repeated = [*records[:7], records[5], *records[7:]]
    else:
        repeated = [*records, records[3], records[11]]
    again = load_transcript(_write(tmp_path / "repeated.jsonl", repeated))
    assert len(plain.billed_calls()) == 3
    assert len(again.billed_calls()) == len(plain.billed_calls())
    assert again.meta.get("unattributed_token_counts", 0) == 0


def test_codex_equal_responses_with_model_output_between_are_two_calls(tmp_path: Path) -> None:
    """What the new rule is for (holds): without totals, an equal event after a response's
    own items is a second call."""
    records = _codex_without_totals()
    # Lines 8-9 (function_call, token_count) replaced by a copy of lines 5-6's event values.
    records[8]["payload"]["info"]["last_token_usage"] = records[5]["payload"]["info"][
        "last_token_usage"
    ]
    transcript = load_transcript(_write(tmp_path / "equal.jsonl", records))
    assert len(transcript.billed_calls()) == 3


# -- 2. Policy: lists for tuple fields ----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("cache_ttl_1h_query_sources", ["sdk"]),
        ("compaction_tier_order", ["summary", "native", "offline"]),
        ("budget_reminder_marks", [0.5, 0.8]),
    ],
)
def test_policy_takes_a_list_for_a_tuple_field(name: str, value: list[Any]) -> None:
    change: dict[str, Any] = {name: value}  # a list, as JSON or a caller's code gives it
    changed = Policy().with_changes(**change)
    assert getattr(changed, name) == tuple(value)
    assert Policy(**change) == changed


# -- 3. The held folders registry --------------------------------------------------------------
def _open_in_child(folder: str, answer: Any) -> None:
    try:
        FolderStore(folder).close()
        answer.put("opened")
    except SessionLockedError as exc:
        answer.put(str(exc))


def _refusal_in_a_forked_child(folder: Path) -> Any:
    """What a forked child is told when it opens `folder`, which this process holds."""
    context = multiprocessing.get_context("fork")
    with FolderStore(folder):
        answer = context.Queue()
        child = context.Process(target=_open_in_child, args=(str(folder), answer))
        child.start()
        child.join(30)
        return answer.get(timeout=5)


def test_forked_child_is_told_another_process_holds_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_HELD_HERE", set())  # this test's entries only
    message = _refusal_in_a_forked_child(tmp_path / "s")
    assert "another process" in message
    assert "in this process" not in message


def _hold(folder: str, held: Any, done: Any) -> None:
    store = FolderStore(folder)
    held.set()
    done.wait(30)
    store.close()


def test_closed_relative_folder_is_not_held_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_HELD_HERE", set())  # the stale entry dies with the test
    monkeypatch.chdir(tmp_path)
    store = FolderStore("rel")
    monkeypatch.chdir("/")
    store.close()
    context = multiprocessing.get_context("fork")
    held, done = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(str(tmp_path / "rel"), held, done))
    holder.start()
    try:
        assert held.wait(30)
        with pytest.raises(SessionLockedError) as refused:
            FolderStore(tmp_path / "rel")
    finally:
        done.set()
        holder.join(30)
    assert "another process" in str(refused.value)


def test_session_open_refusal_gives_advice_that_works(tmp_path: Path) -> None:
    config = SessionConfig(model=load_model_table().names()[0])
    first = Session.open(tmp_path / "s", config)
    try:
        with pytest.raises(SessionLockedError) as refused:
            Session.open(tmp_path / "s", config)
        message = str(refused.value)
        assert "wait=" in message
        if "FolderStore(" not in message:  # the advice is meant for Session.open itself
            threading.Timer(0.2, first.close).start()
            Session.open(tmp_path / "s", config, wait=10).close()
    finally:
        first.close()


def test_the_refusal_advice_followed_opens_the_session(tmp_path: Path) -> None:
    """What the message names works: a Session over a waiting FolderStore gets the folder
    once the other thread closes it."""
    config = SessionConfig(model=load_model_table().names()[0])
    first = Session.open(tmp_path / "s", config)
    try:
        with pytest.raises(SessionLockedError) as refused:
            Session.open(tmp_path / "s", config)
        assert "Session(config, store=FolderStore(folder, wait=SECONDS))" in str(refused.value)
        threading.Timer(0.2, first.close).start()
        Session(config, store=FolderStore(tmp_path / "s", wait=10)).close()
    finally:
        first.close()


def test_another_process_refusal_names_a_wait_that_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_HELD_HERE", set())
    message = _refusal_in_a_forked_child(tmp_path / "s")
    assert "FolderStore(folder, wait=SECONDS)" in message
    assert "pass wait=" not in message  # Session.open takes none


# -- 4. Batch containment ----------------------------------------------------------------------
def _dies_on_b(path: str) -> str:
    """A session whose worker process dies (as an out-of-memory kill or a crash in C does)."""
    if path == "b":
        os._exit(3)
    return path.upper()


def _killed_on_b(path: str) -> str:
    """b's worker killed as the kernel's out-of-memory killer does, while a is still running."""
    if path == "b":
        os.kill(os.getpid(), signal.SIGKILL)
    if path == "a":
        time.sleep(1)
    return path.upper()


def test_a_killed_worker_fails_its_session_and_the_pool_mates_run_again() -> None:
    """The pool breaks with a and b started: each is run again alone (a succeeds, b dies
    again and is failed); the sessions not started run in a fresh pool."""
    outcomes = list(run_each(_killed_on_b, ["a", "b", "c", "d", "e"], jobs=2))
    assert [o.path for o in outcomes] == ["a", "b", "c", "d", "e"]
    assert [o.result for o in outcomes] == ["A", None, "C", "D", "E"]
    assert outcomes[1].error == (
        "b: the worker process running it died: out of memory? run it alone (without --jobs) "
        "to see why"
    )


def _raises_on_b(path: str) -> str:
    if path == "b":
        raise KeyboardInterrupt
    return path.upper()


def test_a_dead_worker_fails_its_session_only() -> None:
    outcomes = list(run_each(_dies_on_b, ["a", "b", "c"], jobs=2))
    assert [o.path for o in outcomes] == ["a", "b", "c"]
    assert outcomes[1].error is not None and outcomes[1].result is None
    assert outcomes[2].result == "C"


def test_keyboard_interrupt_is_not_contained() -> None:
    """Holds: an interrupt stops the batch (only Exception is contained)."""
    with pytest.raises(KeyboardInterrupt):
        list(run_each(_raises_on_b, ["a", "b", "c"], jobs=1))


# -- 5. replay --report written atomically ------------------------------------------------------
RECORDING = FIXTURES / "versions" / "claude-2.1.92.jsonl"


def test_report_through_a_symlink_writes_its_target(tmp_path: Path) -> None:
    target = tmp_path / "real.html"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    result = runner.invoke(app, ["replay", str(RECORDING), "--report", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert "<html" in target.read_text(encoding="utf-8").lower()


def test_report_into_a_named_pipe_reaches_its_reader(tmp_path: Path) -> None:
    pipe = tmp_path / "page"
    os.mkfifo(pipe)
    received: list[bytes] = []

    def read() -> None:
        with pipe.open("rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)  # blocks for ever on a replaced pipe
    reader.start()
    result = runner.invoke(app, ["replay", str(RECORDING), "--report", str(pipe)])
    reader.join(10)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert received and b"<html" in received[0].lower()


def test_compact_output_through_a_symlink_writes_its_target(tmp_path: Path) -> None:
    """compact -o (write_claude_code keep_mode) follows a link as --report does."""
    target = tmp_path / "real.jsonl"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    write_claude_code(load_transcript(RECORDING).entries, link, keep_mode=True)
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8").startswith("{")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize("name", ["/dev/fd/{}", "/proc/self/fd/{}"])
def test_output_named_by_an_open_descriptor_is_written_through_it(
    tmp_path: Path, name: str
) -> None:
    """/dev/stdout or /proc/self/fd/N on a regular file: written into the open file (as a
    shell's > does), not replaced by a new one the descriptor never sees."""
    target = tmp_path / "out.html"
    with target.open("wb") as handle:
        before = os.fstat(handle.fileno()).st_ino
        write_output_chunks(name.format(handle.fileno()), [b"page"])
    assert target.stat().st_ino == before
    assert target.read_bytes() == b"page"


# -- 6. Docs ------------------------------------------------------------------------------------
DOCS = Path(__file__).parent.parent / "docs"


def test_session_doc_says_options_are_checked_before_the_folder(tmp_path: Path) -> None:
    config = SessionConfig(model=load_model_table().names()[0])
    with pytest.raises(ConfigError):
        Session.open(tmp_path / "s", config, rehydrate_from="bogus")
    assert not (tmp_path / "s").exists()  # the behaviour: checked before the folder is made
    text = " ".join((DOCS / "session.md").read_text(encoding="utf-8").split())
    assert "opens its folder's store first, then checks them" not in text


def test_compact_into_dev_null_leaves_it_a_device() -> None:
    """An output under /dev/ is written through, never replaced by a rename: run as root, the
    rename turned /dev/null into a regular file for the whole machine."""
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        pytest.skip("/dev/null is not a character device here")
    session = Path(__file__).parent / "fixtures" / "sessions" / "rewound.jsonl"
    result = CliRunner().invoke(app, ["compact", str(session), "-o", "/dev/null", "--force"])
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
