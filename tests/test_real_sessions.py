"""Sessions as users have them: resumed, rewound, interrupted, killed mid-tool, with slash
commands, notifications, huge outputs, odd bytes, small windows, mixed models.

The fixtures in tests/fixtures/sessions are written by tests/fixtures/build_sessions.py in
Claude Code's own shapes; each test names the issue it guards against. Every fixture replays
with no invalid request and passes `validate_request` at every recorded call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import multiprocessing
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from unbounded.catalog import load_model_table
from unbounded.cli import app
from unbounded.compaction.large_output import cap_text
from unbounded.errors import ConfigError, InvalidRequestError, SessionLockedError
from unbounded.events import Event, RequestRepaired, ToolCallsInterrupted, ToolOutputCapped
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import (
    INTERRUPTED_RESULT_TEXT,
    MessageNormalizer,
    normalize_messages,
    validate_request,
)
from unbounded.model.user_messages import classify_user_content, latest_user_request
from unbounded.policy import MIN_CONTEXT_WINDOW, Policy, compute_thresholds
from unbounded.session import Session, SessionConfig
from unbounded.side_outputs import side_output_name
from unbounded.storage import FolderStore, MemoryStore
from unbounded.transcripts.loader import load_transcript

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SESSIONS = FIXTURES / "sessions"
CONFIG = SessionConfig(model="claude-sonnet-4-5", system="You are a coding agent.")
runner = CliRunner()


def fixture(name: str) -> Path:
    return SESSIONS / name


def cli_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def texts(messages: list[Any]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def tool_ids(messages: list[Any]) -> list[str]:
    return [
        b["id"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


# -- the fixtures are what the builder writes ------------------------------------------------


def test_fixture_files_match_their_builder() -> None:
    spec = importlib.util.spec_from_file_location("build_sessions", FIXTURES / "build_sessions.py")
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    for name, data in builder.build().items():
        assert (SESSIONS / name).read_bytes() == data, f"rebuild {name}: python {spec.origin}"


@pytest.mark.parametrize("path", sorted(SESSIONS.glob("*.jsonl")), ids=lambda p: p.name)
def test_every_fixture_is_valid_at_every_call_and_replays_without_invalid_requests(path: Path) -> None:
    transcript = load_transcript(path)
    main = transcript.main_thread()
    for call in transcript.api_calls():
        validate_request(normalize_messages(messages_after_compact_boundary(main[: call.first])))
    report = cli_json("replay", str(path))
    assert report["invalid_requests"] == 0 and report["replayed_calls"] == len(transcript.api_calls())
    assert report["calls"] == len(transcript.billed_calls())
    inspected = cli_json("inspect", str(path))
    assert list(inspected["models"]) and inspected["context_tokens"] > 0
    compacted = cli_json("compact", str(path))
    assert compacted["summary_tokens"] > 0


# -- 1. the thread as Claude Code rebuilds it -----------------------------------------------


@pytest.mark.parametrize("name", ["resumed.jsonl", "resumed_linked.jsonl"])
def test_a_resumed_session_sends_each_tool_call_once(name: str) -> None:
    transcript = load_transcript(fixture(name))
    messages = normalize_messages(transcript.view_entries())
    ids = tool_ids(messages)
    assert len(ids) == len(set(ids)) == 15  # 9 calls before the resume, 6 after
    assert texts(messages).count("Add a --verbose flag") == 1
    assert "--quiet" in texts(messages)
    assert len(transcript.api_calls()) == 17
    # In file order the copy is there twice: the plain list repeats every earlier call.
    raw = load_transcript(fixture(name), file_order=True)
    raw_ids = [i for e in raw.main_thread() if e.type == "assistant" for i in tool_ids([{"content": e.content}])]
    assert len(raw_ids) - len(set(raw_ids)) == 9


def test_a_resumed_session_reports_its_two_sessions() -> None:
    transcript = load_transcript(fixture("resumed.jsonl"))
    report = transcript.thread_report()
    assert report.file_sessions == [
        "5e55107a-0000-4000-8000-00000000000a",
        "5e55107a-0000-4000-8000-00000000000b",
    ]
    assert report.thread_sessions == ["5e55107a-0000-4000-8000-00000000000b"]
    assert any("5e55107a-0000-4000-8000-00000000000a" in w for w in transcript.warnings)
    linked = load_transcript(fixture("resumed_linked.jsonl")).thread_report()
    assert linked.duplicates == 20 and linked.abandoned == 0


def test_a_rewound_branch_is_left_out_of_the_view_and_the_summary(tmp_path: Path) -> None:
    transcript = load_transcript(fixture("rewound.jsonl"))
    view = texts(normalize_messages(transcript.view_entries()))
    assert "ABANDONED" not in view and "abandoned_pandas" not in view
    assert "Keep the standard library" in view and "exporter_1.py" in view
    output = tmp_path / "compacted.jsonl"
    compacted = runner.invoke(app, ["compact", str(fixture("rewound.jsonl")), "-o", str(output)])
    assert compacted.exit_code == 0 and "ABANDONED" not in compacted.stdout
    assert "ABANDONED" in texts(normalize_messages(load_transcript(fixture("rewound.jsonl"), file_order=True).main_thread()))


def test_parallel_tool_results_and_progress_records_stay_in_the_thread(corpus_or_fixture: Path) -> None:
    transcript = load_transcript(corpus_or_fixture)
    main = transcript.main_thread()
    raw = load_transcript(corpus_or_fixture, file_order=True).main_thread()
    answered = [e for e in raw if e.type == "user" and isinstance(e.content, list) and any(b.get("type") == "tool_result" for b in e.content)]
    assert all(e in main for e in answered)  # no result dropped by the rebuild
    assert sum(1 for e in main if e.type == "progress") == sum(1 for e in raw if e.type == "progress")


@pytest.fixture(params=["session_2_1.jsonl", "corpus"])
def corpus_or_fixture(request: pytest.FixtureRequest) -> Path:
    if request.param == "corpus":
        path = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw" / "marot-spotter_4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
        if not path.exists():
            pytest.skip("../shared/corpus/raw is not present")
        return path
    return FIXTURES / request.param


# -- 2. the model per call ------------------------------------------------------------------------


def test_each_call_is_priced_with_its_own_model() -> None:
    transcript = load_transcript(fixture("mixed_models.jsonl"))
    assert transcript.models() == {"claude-opus-4-6": 10, "claude-haiku-4-5-20251001": 3}
    assert transcript.model == "claude-opus-4-6"  # the main model, though the last call is Haiku
    report = cli_json("replay", str(fixture("mixed_models.jsonl")))
    assert list(report["models"]) == ["claude-opus-4-6", "claude-haiku-4-5-20251001"]
    table = load_model_table()
    opus, haiku = table.get("claude-opus-4-6"), table.get("claude-haiku-4-5")
    expected = 0.0
    for call in transcript.api_calls():
        info = haiku if call.model and "haiku" in call.model else opus
        u = call.usage
        expected += (
            u["input_tokens"] * info.input_per_mtok
            + u["cache_creation_input_tokens"] * info.input_per_mtok * info.cache_write_5m_multiplier
            + u["cache_read_input_tokens"] * info.input_per_mtok * info.cache_read_multiplier
            + u["output_tokens"] * info.output_per_mtok
        ) / 1e6
    assert report["cost"]["recorded"] == pytest.approx(expected, rel=1e-6)


# -- 3. dangling tool calls -------------------------------------------------------------------------


def test_calls_left_unanswered_in_a_recorded_session_get_an_interrupted_result() -> None:
    transcript = load_transcript(fixture("interrupted.jsonl"))
    normalizer = MessageNormalizer(transcript.view_entries())
    messages = normalizer.messages
    # the call lost to "[Request interrupted by user]" is answered in the next message
    assert any(r.kind == "missing-tool-result" for r in normalizer.repairs)
    assert INTERRUPTED_RESULT_TEXT in texts(messages)
    # the call at the very end may still be answered: the view ends with it
    assert messages[-1]["role"] == "assistant" and tool_ids(messages[-1:])


def _slow_tool_child(folder: str, conn: Any) -> None:
    """Runs in a child process: a session that starts a tool and is killed inside it."""
    import time

    session = Session.open(folder, CONFIG)
    session.add_user("Rebuild the search index.")
    session.record(
        {
            "id": "msg_slow",
            "content": [{"type": "tool_use", "id": "toolu_slow", "name": "Bash", "input": {"command": "reindex --all"}}],
            "usage": {"input_tokens": 50, "output_tokens": 20},
            "stop_reason": "tool_use",
        }
    )
    conn.send("tool started")
    time.sleep(120)  # the slow tool; the parent kills the process here


def test_a_session_killed_inside_a_tool_resumes_with_a_valid_request(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_slow_tool_child, args=(str(folder), child))
    process.start()
    assert parent.poll(60) and parent.recv() == "tool started"
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    events: list[Event] = []
    with Session.open(folder, CONFIG, events=events.append) as session:
        assert session.pending_tool_use_ids() == ["toolu_slow"]
        request = asyncio.run(session.prepare())
        validate_request(request["messages"])
        assert [e for e in events if isinstance(e, ToolCallsInterrupted)] == [ToolCallsInterrupted(("toolu_slow",), "resume")]
    lines = (folder / "transcript.jsonl").read_text().splitlines()
    recorded = json.loads(lines[-1])
    assert recorded["message"]["content"][0]["tool_use_id"] == "toolu_slow"
    assert recorded["message"]["content"][0]["is_error"] is True


def test_interrupt_and_a_new_prompt_answer_pending_calls() -> None:
    session = Session(CONFIG)
    session.add_user("Deploy it.")
    session.record({"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], "usage": {"input_tokens": 10, "output_tokens": 5}})
    session.interrupt()
    messages = session.messages
    assert messages[-1]["content"][0]["tool_use_id"] == "t1"
    assert messages[-1]["content"][-1]["text"] == "[Request interrupted by user for tool use]"
    session.record({"content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}], "usage": {"input_tokens": 10, "output_tokens": 5}})
    session.add_user("Actually, stop and explain first.")
    validate_request(session.messages)
    assert session.pending_tool_use_ids() == []
    # results given in the prompt itself are not replaced
    session.record({"content": [{"type": "tool_use", "id": "t3", "name": "Bash", "input": {}}], "usage": {"input_tokens": 10, "output_tokens": 5}})
    session.add_user([{"type": "tool_result", "tool_use_id": "t3", "content": "done"}])
    assert "done" in texts(session.messages[-1:]) and INTERRUPTED_RESULT_TEXT not in texts(session.messages[-1:])


def test_a_repaired_request_is_reported() -> None:
    events: list[Event] = []
    store = MemoryStore([
        Entry.user("go"),
        Entry.assistant([{"type": "tool_use", "id": "lost", "name": "Bash", "input": {}}], message_id="m1"),
        Entry.user("[Request interrupted by user]"),
    ])
    session = Session(CONFIG, store=store, events=events.append)
    asyncio.run(session.prepare())
    assert [e.repairs for e in events if isinstance(e, RequestRepaired)] == [("missing-tool-result@2",)]


# -- 4. huge tool results -------------------------------------------------------------------------


def test_a_huge_tool_result_is_capped_and_kept_whole_on_disk(tmp_path: Path) -> None:
    events: list[Event] = []
    big = "".join(f"line {n}: {'x' * 60}\n" for n in range(80_000)) + "the line the agent needs\n"
    assert len(big) > 5_000_000
    with Session.open(tmp_path / "s", CONFIG, events=events.append) as session:
        session.add_user("cat the log")
        session.record({"content": [{"type": "tool_use", "id": "toolu_cat", "name": "Bash", "input": {"command": "cat big.log"}}], "usage": {"input_tokens": 30, "output_tokens": 10}})
        session.add_tool_results([{"type": "tool_result", "tool_use_id": "toolu_cat", "content": big}])
        request = asyncio.run(session.prepare())
        assert session.status().compactions == 0  # no compaction of everything to make room
    sent = request["messages"][-1]["content"][0]["content"]
    assert len(sent) <= 25_000 * 4 + 1_000 and "the line the agent needs" in sent  # the tail is kept
    saved = tmp_path / "s" / "tool-outputs" / f"{side_output_name('toolu_cat')}.txt"
    assert str(saved) in sent and saved.read_text() == big
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    capped = [e for e in events if isinstance(e, ToolOutputCapped)]
    assert capped and capped[0].original_chars == len(big) and capped[0].saved_to == str(saved)


def test_cap_keeps_head_and_tail_on_line_boundaries() -> None:
    text = "".join(f"{n}\n" for n in range(10_000))
    capped = cap_text(text, 1_000, "/tmp/out.txt")
    assert capped is not None
    head, _, tail = capped.text.partition("\n[... ")
    assert text.startswith(head) and head.endswith("\n")
    assert text.endswith(tail.split("...]\n", 1)[1])
    assert cap_text("short", 1_000, None) is None


# -- 5. slash commands and special user messages --------------------------------------------


def test_user_messages_are_classified() -> None:
    command = classify_user_content(
        "<command-message>orchestrator is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>create TODO app by Next.js</command-args>"
    )
    assert command.kind == "command" and command.request == "/orchestrator create TODO app by Next.js"
    assert classify_user_content("Split complex tasks…", is_meta=True).kind == "meta"
    assert classify_user_content("Base directory for this skill: /x", is_meta=True).kind == "skill"
    notification = classify_user_content("<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n<summary>done</summary>\n</task-notification>")
    assert notification.kind == "notification" and notification.task_id == "b1" and not notification.is_request
    assert classify_user_content("<system-reminder>x</system-reminder>").kind == "system_reminder"
    prompt = classify_user_content("fix it\n<system-reminder>todo list empty</system-reminder>")
    assert prompt.kind == "prompt" and prompt.request == "fix it"
    assert classify_user_content("[Request interrupted by user]").kind == "interrupt"
    assert classify_user_content("<local-command-stdout>ok</local-command-stdout>").kind == "command_output"
    assert classify_user_content([{"type": "tool_result", "tool_use_id": "t", "content": "x"}]).kind == "tool_results"
    assert classify_user_content("<user-prompt-submit-hook>lint ok</user-prompt-submit-hook>").kind == "hook"


def test_the_latest_request_is_the_command_not_its_template_or_a_notification() -> None:
    slash = load_transcript(fixture("slash_commands.jsonl")).main_thread()
    latest = latest_user_request(slash)
    assert latest is not None and latest.request == "/orchestrator create TODO app by Next.js"
    notes = load_transcript(fixture("notifications.jsonl")).main_thread()
    latest = latest_user_request(notes)
    assert latest is not None and latest.request is not None and latest.request.startswith("Good. Next: 1) make")


# -- 6. small windows ---------------------------------------------------------------------------------


def test_small_windows_scale_the_budgets_and_tiny_ones_are_refused() -> None:
    sonnet = load_model_table().get("claude-sonnet-4-5")
    for window in (16_000, 32_000):
        thresholds = compute_thresholds(sonnet.with_window(window), Policy())
        assert 0.6 * window < thresholds.autocompact < 0.7 * window
        assert 0 < thresholds.warning < thresholds.autocompact < thresholds.blocking < window
    big = compute_thresholds(sonnet.with_window(200_000), Policy())
    assert big.autocompact == 167_000  # the seeds' numbers above the reference size
    assert Policy().for_window(50_000).tool_result_max_tokens == 12_500
    assert Policy(autocompact_buffer=2_000).for_window(20_000).autocompact_buffer == 2_000  # set by the user
    with pytest.raises(ConfigError, match="too small"):
        compute_thresholds(sonnet.with_window(MIN_CONTEXT_WINDOW - 1), Policy())
    result = runner.invoke(app, ["inspect", str(FIXTURES / "session_2_1.jsonl"), "--window", "1000"])
    assert result.exit_code == 2 and "too small" in result.output


def test_a_system_prompt_that_leaves_no_room_to_compact_into_is_refused() -> None:
    from unbounded.policy import MIN_COMPACTION_ROOM

    sonnet = load_model_table().get("claude-sonnet-4-5")
    threshold = compute_thresholds(sonnet.with_window(32_000), Policy()).autocompact
    def config(system_tokens: int) -> SessionConfig:
        return SessionConfig(model="claude-sonnet-4-5", context_window=32_000, system="x", system_tokens=system_tokens)
    Session(config(threshold - MIN_COMPACTION_ROOM))  # just enough room
    with pytest.raises(ConfigError, match=r"leaving 2,047 for the conversation: no compaction can make room.*larger context_window"):
        Session(config(threshold - MIN_COMPACTION_ROOM + 1))
    # A threshold the caller chose only has to be above the prompt; without compaction, no limit.
    Session(config(threshold - 100), policy=Policy(autocompact_pct_override=100))
    Session(config(threshold + 1_000), policy=Policy(auto_compact_enabled=False))
    # The replay says the same of a recorded prompt, naming --window.
    result = runner.invoke(app, ["replay", str(FIXTURES / "session_2_1.jsonl"), "--window", "19000"])
    assert result.exit_code == 2 and "no compaction can make room" in result.output and "--window" in result.output


def test_a_small_window_session_does_not_compact_every_turn() -> None:
    session = Session(SessionConfig(model="claude-sonnet-4-5", context_window=16_000))
    compactions = 0
    for turn in range(40):
        session.add_user(f"step {turn}: " + "word " * 150)
        asyncio.run(session.prepare())
        session.record({"content": [{"type": "text", "text": "ok " * 100}], "usage": {"input_tokens": session.status().tokens, "output_tokens": 100}})
        compactions = session.status().compactions
    assert 1 <= compactions <= 8


def test_replay_refuses_a_window_smaller_than_the_recorded_prefix() -> None:
    result = runner.invoke(app, ["replay", str(FIXTURES / "session_2_1.jsonl"), "--window", "9000"])
    assert result.exit_code == 2 and "window" in result.output


# -- 7. odd content -------------------------------------------------------------------------------------


def test_odd_content_is_repaired_with_warnings_naming_the_lines() -> None:
    transcript = load_transcript(fixture("odd_content.jsonl"))
    warnings = "\n".join(transcript.warnings)
    assert ":1: UTF-8 byte order mark removed" in warnings and "lone surrogates" in warnings and "not UTF-8" in warnings
    messages = normalize_messages(transcript.view_entries())
    assert "caf\ufffd.txt" in texts(messages) and "\ufffd cut in half" in texts(messages)
    for command in ("inspect", "replay", "compact", "eval"):
        result = runner.invoke(app, [command, str(fixture("odd_content.jsonl")), "--json"])
        assert result.exit_code == 0, (command, result.output)


def test_a_tool_returning_lone_surrogates_is_written_and_sent(tmp_path: Path) -> None:
    with Session.open(tmp_path / "s", CONFIG) as session:
        session.add_user("list files")
        session.record({"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], "usage": {"input_tokens": 10, "output_tokens": 5}})
        session.add_tool_results([{"type": "tool_result", "tool_use_id": "t1", "content": "caf\udce9.txt \ud83d"}])
        request = asyncio.run(session.prepare())
        json.dumps(request).encode("utf-8")  # encodable
        assert any("U+FFFD" in w for w in session.warnings)
    assert "caf\ufffd.txt \ufffd" in (tmp_path / "s" / "transcript.jsonl").read_text()


def test_skip_invalid_exists_on_every_command_that_reads_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = (FIXTURES / "session_2_1.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    for command in ("inspect", "replay", "compact", "eval"):
        refused = runner.invoke(app, [command, str(path)])
        assert refused.exit_code == 2 and "--skip-invalid" in refused.output
        result = runner.invoke(app, [command, str(path), "--skip-invalid", "--json"])
        assert result.exit_code == 0, (command, result.output)


# -- 8. session lifecycle ------------------------------------------------------------------------------


def test_a_session_can_be_opened_again_after_close_or_with(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with Session.open(folder, CONFIG) as session:
        session.add_user("one")
    with Session.open(folder, CONFIG) as session:  # the lock was released
        session.add_user("two")
        with pytest.raises(SessionLockedError):
            Session.open(folder, CONFIG)
    again = Session.open(folder, CONFIG)
    again.close()
    again.close()  # twice is fine
    with pytest.raises(Exception, match="closed"):
        again.add_user("three")

    async def use_async() -> None:
        async with Session.open(folder, CONFIG) as session:
            session.add_user("four")

    asyncio.run(use_async())
    assert len(load_transcript(folder / "transcript.jsonl").main_thread()) == 3


def test_an_abandoned_session_frees_its_lock_when_collected(tmp_path: Path) -> None:
    import gc

    Session.open(tmp_path / "s", CONFIG).add_user("left open")  # a re-run notebook cell
    gc.collect()
    with Session.open(tmp_path / "s", CONFIG):
        pass


def test_a_failed_from_transcript_releases_its_lock(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with pytest.raises(ConfigError):
        Session.from_transcript(FIXTURES / "session_2_1.jsonl", folder, SessionConfig(model="claude-sonnet-4-5", context_window=1_000))
    with Session.from_transcript(FIXTURES / "session_2_1.jsonl", folder) as session:
        assert session.messages


def test_a_read_only_store_never_writes(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with Session.open(folder, CONFIG) as session:
        session.add_user("hello")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    store = FolderStore(folder, lock=False)
    session = Session(CONFIG, store=store)
    session.add_user("x" * 200_000)
    asyncio.run(session.prepare())
    session.record({"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 9, "output_tokens": 1}})
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert len(session.messages) == 2  # what it was given is kept in memory


def test_leftover_temporary_files_are_removed_on_open(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    with Session.open(folder, CONFIG) as session:
        session.add_user("x")
    stale = folder / "state" / ".session.json.abc123.tmp"
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("half a write")
    with Session.open(folder, CONFIG):
        assert not stale.exists()


# -- 9. never overwrite the input ------------------------------------------------------------------


def test_compact_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes((FIXTURES / "session_2_1.jsonl").read_bytes())
    os.chmod(session, 0o644)
    refused = runner.invoke(app, ["compact", str(session), "-o", str(session)])
    assert refused.exit_code == 2 and "input" in refused.output and "--force" in refused.output
    assert session.read_bytes() == (FIXTURES / "session_2_1.jsonl").read_bytes()
    forced = runner.invoke(app, ["compact", str(session), "-o", str(session), "--force"])
    assert forced.exit_code == 0 and stat.S_IMODE(session.stat().st_mode) == 0o644
    traj = tmp_path / "run.traj"
    traj.write_bytes((FIXTURES / "swe_agent_v1.traj").read_bytes())
    for extra in ([], ["--force"]):
        result = runner.invoke(app, ["compact", str(traj), "-o", str(traj), *extra])
        assert result.exit_code == 2
    assert traj.read_bytes() == (FIXTURES / "swe_agent_v1.traj").read_bytes()
    other = tmp_path / "notes.txt"
    other.write_text("my notes")
    assert runner.invoke(app, ["compact", str(session), "-o", str(other)]).exit_code == 2
    assert other.read_text() == "my notes"


# -- 10. memory compaction lands under the threshold ------------------------------------------------


def test_memory_compaction_counts_the_system_prompt_and_calibrates(tmp_path: Path) -> None:
    from unbounded.compaction.memory_updaters import OfflineNotesUpdater
    from unbounded.extensions.session_memory import SessionMemory

    system = "Rules of this repository. " * 4_000  # ~25K tokens by length/4
    config = SessionConfig(model="claude-sonnet-4-5", system=system, context_window=100_000)
    policy = Policy(session_memory_init_tokens=2_000, session_memory_min_tokens_between_updates=2_000)
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    session = Session(config, policy=policy, extensions=[memory])
    compacted_at: list[int] = []
    for turn in range(120):
        session.add_user(f"turn {turn}: edit module_{turn}.py " + "because " * 200)
        asyncio.run(session.prepare())
        if session.status().compactions > len(compacted_at):
            compacted_at.append(turn)
        # the API counts this content 1.6x what length/4 says
        real = int(session.estimate_request_tokens(session.messages) * 1.6 / (session.calibration or 1.0))
        session.record({"content": [{"type": "text", "text": f"done {turn}"}], "usage": {"input_tokens": real, "output_tokens": 20}})
    assert len(compacted_at) >= 2
    assert all(b - a > 1 for a, b in itertools.pairwise(compacted_at))  # never two in a row
    assert session.calibration is not None and 1.4 < session.calibration < 1.8


# -- 11. redaction ------------------------------------------------------------------------------------


def test_session_notes_are_redacted(tmp_path: Path) -> None:
    from unbounded.compaction.memory_updaters import OfflineNotesUpdater
    from unbounded.extensions.session_memory import SessionMemory

    key = "sk-ant-api03-" + "A1b2C3d4" * 10
    aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    memory = SessionMemory(OfflineNotesUpdater(), background=False)
    policy = Policy(session_memory_init_tokens=100, session_memory_min_tokens_between_updates=100)
    with Session.open(tmp_path / "s", CONFIG, policy=policy, extensions=[memory], redact_secrets=True) as session:
        session.add_user(f"Use ANTHROPIC_API_KEY={key} and this config: {{\"SecretAccessKey\": \"{aws}\"}}")
        session.record({"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": f"export KEY={key}"}}], "usage": {"input_tokens": 3_000, "output_tokens": 5}})
        session.add_tool_results([{"type": "tool_result", "tool_use_id": "t1", "content": f'"aws_secret_access_key": "{aws}"'}])
        asyncio.run(memory.update_now(session))
    notes = (tmp_path / "s" / "session-memory" / "summary.md").read_text()
    assert notes.strip() and key not in notes and aws not in notes


def test_invalid_request_error_names_the_rule() -> None:
    with pytest.raises(InvalidRequestError, match="tool-use-unanswered"):
        validate_request([{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}])


def test_attachments_are_left_out_in_order_until_the_rest_fits() -> None:
    from unbounded.compaction.conversation import drop_attachments_to_fit
    from unbounded.compaction.memory_compact import build_session_memory_result
    from unbounded.tokens.estimate import estimate_messages_tokens

    view = [Entry.user("tidy the parser"), Entry.assistant([{"type": "text", "text": "done"}], model="m")]
    attachments = [
        {"type": "file", "filename": "/r/small.py", "content": "x = 1\n" * 100, "truncated": False},
        {"type": "file", "filename": "/r/big.py", "content": "y = 2\n" * 1_000, "truncated": False},
        {"type": "todo", "content": [{"content": "write tests", "status": "pending"}], "itemCount": 1, "context": "post-compact"},
        {"type": "plan_file_reference", "planFilePath": "/r/plan.md", "planContent": "step one\n" * 200},
        {"type": "invoked_skills", "skills": [{"name": "lint", "path": "/s/lint", "content": "run ruff " * 300}]},
        {"type": "plan_mode", "planFilePath": "/r/plan.md"},
    ]

    def result() -> Any:
        return build_session_memory_result(view, view, 1, "## Task\ntidy the parser", pre_tokens=5_000, attachments=attachments)

    def size(r: Any) -> int:
        return estimate_messages_tokens(normalize_messages(r.view()))

    def kinds(r: Any) -> list[str]:
        return [a.data["attachment"].get("filename") or a.data["attachment"]["type"] for a in r.attachments]

    roomy = result()
    drop_attachments_to_fit(roomy, lambda messages: True)
    assert len(roomy.attachments) == 6 and not roomy.skipped_attachments
    everything = size(roomy)
    # Just under everything: the biggest file goes first, and nothing else.
    tight = result()
    drop_attachments_to_fit(tight, lambda messages: estimate_messages_tokens(messages) < everything)
    assert kinds(tight) == ["/r/small.py", "todo", "plan_file_reference", "invoked_skills", "plan_mode"]
    assert tight.skipped_attachments == ["file /r/big.py: no room after the compaction"]
    # No room at all: files, skills, the plan, the todo list go, in that order; the plan mode
    # flag, the summary and the kept messages stay.
    none = result()
    drop_attachments_to_fit(none, lambda messages: False)
    assert kinds(none) == ["plan_mode"]
    assert [s.split(":")[0] for s in none.skipped_attachments] == [
        "file /r/big.py", "file /r/small.py", "invoked_skills", "plan_file_reference /r/plan.md", "todo",
    ]
    assert [m.content for m in none.summary_messages] == [m.content for m in roomy.summary_messages]
    assert none.messages_to_keep == roomy.messages_to_keep == view[1:]


@pytest.mark.skipif(not (Path(__file__).resolve().parents[2] / "shared/corpus/raw").is_dir(), reason="corpus not present")
def test_a_small_window_leaves_out_re_read_files_instead_of_compacting_every_turn() -> None:
    from unbounded.evaluation.replay import ReplayOptions, replay_session

    path = Path(__file__).resolve().parents[2] / "shared/corpus/raw/claude-code-log_a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
    if not path.exists():
        pytest.skip("corpus session not present")
    transcript = load_transcript(path)
    runs = {
        share: replay_session(transcript, ReplayOptions(window=60_000, baselines=False, policy=Policy(rehydrate_max_room_share=share)))
        for share in (1.0, 0.5)
    }
    # A 60,000-token window with a 23,000-token prefix: re-read files refilled the room.
    assert runs[0.5].compactions * 2 <= runs[1.0].compactions
    assert runs[0.5].ours.cost_usd < runs[1.0].ours.cost_usd
    for run in runs.values():
        assert run.invalid_requests == 0 and run.ours.overflows == 0
