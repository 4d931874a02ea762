"""PreCompact / PostCompact / SessionStart hooks: real shell commands, callables, matchers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from unbounded.errors import ConfigError, HookBlockingError
from unbounded.hooks import (
    CommandHook,
    HookRunner,
    HookSettings,
    command_argv,
    matcher_matches,
    merge_custom_instructions,
)
from unbounded.policy import Policy

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell hooks")


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def _settings(
    event: str, command: str, matcher: str | None = "", timeout: float | None = None
) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    group: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


def _runner(tmp_path: Path, settings: Any, **kwargs: Any) -> HookRunner:
    return HookRunner(
        settings, session_id="sess-1", cwd=tmp_path, transcript_path=tmp_path / "t.jsonl", **kwargs
    )


def test_stdin_carries_the_claude_code_input(tmp_path: Path) -> None:
    echo = _script(tmp_path, "echo_input.sh", "cat\n")  # writes its stdin back: a JSON object
    runner = _runner(tmp_path, _settings("PreCompact", echo, "manual"))
    outcome = runner.run_pre_compact("manual", "keep the API notes")
    (result,) = outcome.results
    assert result.status == "success" and result.exit_code == 0
    assert result.output == {
        "session_id": "sess-1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "PreCompact",
        "trigger": "manual",
        "custom_instructions": "keep the API notes",
    }
    # JSON output without a context field adds no instructions
    assert outcome.merged_instructions == "keep the API notes"
    assert outcome.new_custom_instructions is None


def test_pre_compact_stdout_is_appended_after_the_user_instructions(tmp_path: Path) -> None:
    command = _script(tmp_path, "pre.sh", "echo 'Preserve the database schema decisions.'\n")
    outcome = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact(
        "manual", "Focus on the auth work"
    )
    assert outcome.merged_instructions == (
        "Focus on the auth work\n\nPreserve the database schema decisions."
    )
    assert outcome.new_custom_instructions == "Preserve the database schema decisions."
    # the orchestrator's merge (user first, hooks after) gives the same text
    assert (
        merge_custom_instructions("Focus on the auth work", outcome.new_custom_instructions)
        == outcome.merged_instructions
    )
    assert outcome.blocked is False
    assert outcome.user_display_message == (
        f"PreCompact [{command}] completed successfully: Preserve the database schema decisions."
    )
    # auto compaction: no user instructions, custom_instructions is ""
    auto = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact("auto")
    assert auto.merged_instructions == "Preserve the database schema decisions."


def test_exit_code_2_blocks_and_stderr_is_the_reason(tmp_path: Path) -> None:
    command = _script(
        tmp_path, "block.sh", "echo ignored; echo 'not now: deploy running' >&2; exit 2\n"
    )
    outcome = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact("auto")
    (result,) = outcome.results
    assert result.status == "blocking_error" and result.exit_code == 2
    assert outcome.blocked is True
    assert outcome.block_reason == "not now: deploy running"
    assert outcome.new_custom_instructions is None
    assert outcome.merged_instructions is None


def test_other_exit_codes_are_non_blocking(tmp_path: Path) -> None:
    command = _script(tmp_path, "fail.sh", "echo out; echo 'went wrong' >&2; exit 3\n")
    outcome = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact("manual", "mine")
    (result,) = outcome.results
    assert result.status == "non_blocking_error" and result.exit_code == 3
    assert result.stdout == "out\n" and result.stderr == "went wrong\n"
    assert outcome.blocked is False
    assert outcome.merged_instructions == "mine"
    assert outcome.user_display_message == f"PreCompact [{command}] failed (status 3): went wrong"


def test_a_timed_out_hook_is_reported_and_does_not_block(tmp_path: Path) -> None:
    # That the hook and its children are killed is checked by pid in
    # test_security_hooks.py::test_an_overrunning_hook_is_killed_with_its_children_and_compaction_goes_on.
    command = "sleep 60"  # killed at the timeout; long enough that no stall lets it finish first
    runner = _runner(tmp_path, _settings("PreCompact", command, timeout=0.3))
    outcome = runner.run_pre_compact("auto")
    (result,) = outcome.results
    assert result.status == "timeout" and result.timed_out is True and result.exit_code is None
    assert outcome.blocked is False
    assert "timed out after 0.3 seconds" in (outcome.user_display_message or "")


def test_default_timeout_comes_from_the_policy(tmp_path: Path) -> None:
    runner = _runner(
        tmp_path, _settings("SessionStart", "sleep 60"), policy=Policy(hook_timeout_seconds=0.2)
    )
    (result,) = asyncio.run(runner.arun_session_start_hooks())
    assert result.timed_out


def test_session_start_context_plain_and_json(tmp_path: Path) -> None:
    plain = _script(tmp_path, "plain.sh", "echo 'Branch: main'\n")
    as_json = _script(
        tmp_path,
        "json.sh",
        'printf \'%s\' \'{"hookSpecificOutput": {"hookEventName": "SessionStart", '
        '"additionalContext": "Reloaded CLAUDE.md"}}\'\n',
    )
    startup_only = _script(tmp_path, "startup.sh", "echo 'should not run'\n")
    settings = {
        "hooks": {
            "SessionStart": [
                {"matcher": "compact", "hooks": [{"type": "command", "command": plain}]},
                {
                    "matcher": "startup|resume",
                    "hooks": [{"type": "command", "command": startup_only}],
                },
                {"hooks": [{"type": "command", "command": as_json}]},
            ]
        }
    }
    runner = _runner(tmp_path, settings)
    assert runner.run_session_start("compact") == ["Branch: main", "Reloaded CLAUDE.md"]
    assert runner.run_session_start("startup") == ["should not run", "Reloaded CLAUDE.md"]


def test_session_start_exit_2_does_not_add_context(tmp_path: Path) -> None:
    command = _script(tmp_path, "s.sh", "echo context; exit 2\n")
    runner = _runner(tmp_path, _settings("SessionStart", command, "compact"))
    assert runner.run_session_start() == []


def test_post_compact_gets_the_summary_and_returns_context(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    command = _script(
        tmp_path,
        "post.sh",
        f"cat > {seen}\n"
        'printf \'%s\' \'{"hookSpecificOutput": {"hookEventName": "PostCompact", '
        '"additionalContext": "re-read MEMORY.md"}, "systemMessage": "compacted"}\'\n',
    )
    outcome = _runner(tmp_path, _settings("PostCompact", command, "auto")).run_post_compact(
        "auto", "1. Primary Request..."
    )
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "PostCompact"
    assert payload["trigger"] == "auto" and payload["compact_summary"] == "1. Primary Request..."
    assert outcome.additional_context == ("re-read MEMORY.md",)
    assert (
        outcome.user_display_message == f"PostCompact [{command}] completed successfully\ncompacted"
    )
    manual = _runner(tmp_path, _settings("PostCompact", command, "auto")).run_post_compact("manual")
    assert manual.results == ()


def test_json_decision_block_blocks_pre_compact(tmp_path: Path) -> None:
    command = _script(tmp_path, "j.sh", 'echo \'{"decision": "block", "reason": "busy"}\'\n')
    outcome = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact("auto")
    assert outcome.blocked and outcome.block_reason == "busy"


def test_cwd_environment_and_shell_fallback(tmp_path: Path) -> None:
    command = 'printf "%s|%s" "$(pwd)" "$CLAUDE_PROJECT_DIR"'
    assert command_argv(command)[1] is True
    outcome = _runner(tmp_path, _settings("PreCompact", command)).run_pre_compact("auto")
    real = os.path.realpath(tmp_path)
    assert outcome.new_custom_instructions in (f"{real}|{tmp_path}", f"{tmp_path}|{tmp_path}")


def test_command_argv_uses_no_shell_for_plain_commands() -> None:
    assert command_argv("python3 hook.py --flag 'two words'") == (
        ["python3", "hook.py", "--flag", "two words"],
        False,
    )
    assert command_argv("cat a | wc -l") == (["/bin/sh", "-c", "cat a | wc -l"], True)
    assert command_argv("FOO=1 run") == (["/bin/sh", "-c", "FOO=1 run"], True)
    assert command_argv("~/bin/hook") == (["/bin/sh", "-c", "~/bin/hook"], True)
    assert command_argv("echo 'unterminated") == (["/bin/sh", "-c", "echo 'unterminated"], True)


def test_a_command_that_cannot_start_is_a_non_blocking_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-hook")
    outcome = _runner(tmp_path, _settings("PreCompact", missing)).run_pre_compact("manual", "u")
    (result,) = outcome.results
    assert result.status == "non_blocking_error" and result.exit_code is None
    assert outcome.merged_instructions == "u"
    assert "could not start" in (outcome.user_display_message or "")


def test_identical_commands_run_once_and_results_keep_order(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = _script(tmp_path, "one.sh", f"echo ran >> {runs}; echo one\n")
    second = _script(tmp_path, "two.sh", "echo two\n")
    settings = {
        "hooks": {
            "PreCompact": [
                {"matcher": "", "hooks": [{"type": "command", "command": first}]},
                {
                    "matcher": "auto",
                    "hooks": [
                        {"type": "command", "command": second},
                        {"type": "command", "command": first},
                    ],
                },
            ]
        }
    }
    outcome = _runner(tmp_path, settings).run_pre_compact("auto")
    assert runs.read_text() == "ran\n"  # listed twice, run once
    assert [r.hook for r in outcome.results] == [first, second]
    assert outcome.new_custom_instructions == "one\n\ntwo"


def test_callables_sync_async_blocking_and_failing(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []

    def sync_hook(payload: dict[str, Any]) -> str:
        received.append(payload)
        return "from sync"

    async def async_hook(payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreCompact",
                "customInstructions": "from async",
            }
        }

    def broken(payload: dict[str, Any]) -> None:
        raise ValueError("bug in hook")

    settings = (
        HookSettings()
        .with_hook("PreCompact", sync_hook)
        .with_hook("PreCompact", async_hook, matcher="manual")
        .with_hook("PreCompact", broken, name="broken-hook")
    )
    outcome = _runner(tmp_path, settings).run_pre_compact("manual", "user first")
    assert outcome.merged_instructions == "user first\n\nfrom sync\n\nfrom async"
    assert (
        received[0]["hook_event_name"] == "PreCompact"
        and received[0]["custom_instructions"] == "user first"
    )
    assert [r.status for r in outcome.results] == ["success", "success", "non_blocking_error"]
    assert outcome.results[2].stderr == "ValueError: bug in hook"
    assert "PreCompact [broken-hook] failed (status 1): ValueError: bug in hook" in (
        outcome.user_display_message or ""
    )
    auto = _runner(tmp_path, settings).run_pre_compact("auto")
    assert [r.hook for r in auto.results] == [
        r.hook for r in outcome.results if r.hook != outcome.results[1].hook
    ]

    def blocker(payload: dict[str, Any]) -> None:
        raise HookBlockingError("compaction disabled during release")

    blocked = _runner(tmp_path, HookSettings().with_hook("PreCompact", blocker)).run_pre_compact(
        "auto"
    )
    assert blocked.blocked and blocked.block_reason == "compaction disabled during release"


def test_slow_callables_time_out(tmp_path: Path) -> None:
    release = threading.Event()
    finished: list[str] = []

    def slow(payload: dict[str, Any]) -> str:
        release.wait(30)  # until the test has its results: a runner that waited would hang here
        finished.append("sync")
        return "late"

    async def slow_async(payload: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        finished.append("async")
        return "late"

    settings = (
        HookSettings()
        .with_hook("SessionStart", slow, timeout=0.2)
        .with_hook("SessionStart", slow_async, timeout=0.2)
    )
    results = asyncio.run(_runner(tmp_path, settings).arun_session_start_hooks())
    assert [r.status for r in results] == ["timeout", "timeout"]
    assert finished == []  # the runner did not wait for either to finish
    release.set()


def test_both_apis_inside_an_event_loop(tmp_path: Path) -> None:
    command = _script(tmp_path, "ctx.sh", "echo ready\n")
    runner = _runner(tmp_path, _settings("SessionStart", command, "compact"))

    async def main() -> tuple[list[str], list[str]]:
        blocking = runner.run_session_start()  # on a worker thread (unbounded.blocking)
        return blocking, await runner.arun_session_start()

    assert asyncio.run(main()) == (["ready"], ["ready"])


def test_long_output_is_cut(tmp_path: Path) -> None:
    command = _script(tmp_path, "long.sh", "head -c 5000 /dev/zero | tr '\\0' 'a'\n")
    runner = _runner(tmp_path, _settings("SessionStart", command), max_output_chars=100)
    (context,) = runner.run_session_start()
    assert context.startswith("a" * 100) and context.endswith("[hook output cut at 100 characters]")


def test_matchers() -> None:
    assert (
        matcher_matches("", "auto") and matcher_matches("*", "auto") and matcher_matches(None, "x")
    )
    assert matcher_matches("manual", "manual") and not matcher_matches("manual", "auto")
    assert not matcher_matches("auto", "autox")
    assert matcher_matches("manual|auto", "auto") and not matcher_matches("man.*", "auto")
    assert matcher_matches("compact", "compact") and not matcher_matches(
        "startup|resume", "compact"
    )
    assert not matcher_matches("[", "auto")  # invalid regex: exact comparison


def test_merge_rule() -> None:
    assert merge_custom_instructions("user", "hook") == "user\n\nhook"
    assert merge_custom_instructions(None, "hook") == "hook"
    assert merge_custom_instructions("  ", None) is None


def test_settings_parsing_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreCompact": [
                        {
                            "matcher": "manual",
                            "hooks": [
                                {"type": "command", "command": "echo hi", "timeout": 5},
                                {"type": "prompt", "prompt": "summarize"},
                            ],
                        }
                    ],
                    "PreToolUse": [{"matcher": "Bash", "hooks": []}],
                }
            }
        )
    )
    settings = HookSettings.load(path)
    (group,) = settings.events["PreCompact"]
    assert group.matcher == "manual" and group.hooks == (CommandHook("echo hi", 5.0),)
    assert settings.warnings == (
        "hooks.PreCompact[0].hooks[1]: hook type 'prompt' is not supported; left out",
    )
    assert "PreToolUse" not in settings.events
    with pytest.raises(ConfigError, match=r"hooks.PreCompact\[0\].hooks\[0\].command"):
        HookSettings.from_settings({"hooks": {"PreCompact": [{"hooks": [{"type": "command"}]}]}})
    with pytest.raises(ConfigError, match="timeout"):
        HookSettings.from_settings(_settings("PreCompact", "x", timeout=-1))
    with pytest.raises(ConfigError, match="must be a list"):
        HookSettings.from_settings({"hooks": {"SessionStart": {"matcher": "compact"}}})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        HookSettings.load(bad)
    with pytest.raises(ConfigError, match="unknown hook event"):
        HookSettings().with_hook("Stop", lambda p: None)  # type: ignore[arg-type]


def test_no_hooks_no_results(tmp_path: Path) -> None:
    runner = HookRunner(session_id="s", cwd=tmp_path)
    outcome = runner.run_pre_compact("manual", "only mine")
    assert outcome.results == () and outcome.user_display_message is None
    assert outcome.merged_instructions == "only mine"
    assert runner.run_session_start() == []
