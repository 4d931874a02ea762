"""PreCompact, PostCompact and SessionStart hooks: Python callables and shell commands.

Compaction fires three hook events (seed 004 "Hooks", seed 002 `runPreCompactHooks`):
PreCompact before the summary is written (its output becomes extra summary instructions,
merged *after* the user's own: user first, then hooks, joined by a blank line), PostCompact
when the compaction is done, and SessionStart with source "compact" after it, whose output
is added to the context the model sees.

Commands are configured in Claude Code's settings format and follow its hook contract
(Claude Code hooks reference, docs.anthropic.com/en/docs/claude-code/hooks: "Hook Input",
"Hook Output", "Simple: Exit Code", "Advanced: JSON Output"; PostCompact as added in Claude
Code 2.1.76 and typed in claude-agent-sdk-python's `PostCompactHookInput`)::

    {"hooks": {
        "PreCompact":   [{"matcher": "manual" | "auto" | "", "hooks": [
                            {"type": "command", "command": "...", "timeout": 60}]}],
        "PostCompact":  [{"matcher": "auto", "hooks": [...]}],
        "SessionStart": [{"matcher": "compact", "hooks": [...]}]}}

- **Input**: one JSON object on stdin with `session_id`, `transcript_path`, `cwd`,
  `hook_event_name`, and per event: PreCompact `trigger` ("manual"/"auto") and
  `custom_instructions` ("" for auto); PostCompact `trigger` and `compact_summary`;
  SessionStart `source` ("compact" here; also "startup", "resume", "clear").
  `CLAUDE_PROJECT_DIR` is set to the cwd in the environment.
- **Matchers**: "", "*" or no matcher match everything; a plain word matches exactly; any
  other matcher is a regular expression that must match the whole value (the trigger for
  PreCompact/PostCompact, the source for SessionStart).
- **Exit codes**: 0 is success and stdout is used (PreCompact: extra custom instructions, in
  our design; SessionStart: additional context; PostCompact: shown to the user); 2 is a
  blocking error whose stderr is the reason (for PreCompact the outcome says `blocked` and
  the orchestrator decides: Claude Code's earlier hook docs only showed that stderr to the
  user, later versions block the compaction; SessionStart and PostCompact cannot block, so
  it is only shown);
  any other code is a non-blocking error, shown to the user, stdout ignored.
- **JSON output** (stdout of an exit-0 hook that is a JSON object):
  `hookSpecificOutput.additionalContext` (SessionStart, PostCompact; PreCompact also accepts
  it and `hookSpecificOutput.customInstructions`) is the text used; `systemMessage` is shown
  to the user; `"decision": "block"` with `reason`, or `"continue": false` with `stopReason`,
  blocks a PreCompact.
- **Timeout**: per hook `timeout` in seconds, else `Policy.hook_timeout_seconds` (60); a hook
  that runs over is killed with its whole process group and reported as timed out.
- **Where commands come from**: only the settings given (`HookSettings.load` or
  `from_settings`), never the transcript; `load` refuses a file other users can write.

Hooks matching an event run concurrently; their results keep the configuration's order.
Identical commands run once. A hook never raises: failures, timeouts and commands that
cannot start become `HookResult`s. Commands run without a shell (`shlex.split`) unless they
use shell syntax (pipes, redirections, variables, globs, `~`, `;`, `&&`, a leading
`VAR=value`…), in which case they run under `/bin/sh -c` (POSIX only). Text a hook adds to
instructions or context is cut at `max_output_chars` (10,000, as Claude Code caps hook
output it injects).

A callable hook receives the same input dict and returns a string (like stdout), a dict
(like JSON output) or None, sync or async; raising `HookBlockingError` is exit code 2, any
other exception a non-blocking error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import shlex
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import orjson

from unbounded.blocking import run_blocking
from unbounded.errors import ConfigError, HookBlockingError
from unbounded.policy import Policy

HookEventName = Literal["PreCompact", "PostCompact", "SessionStart"]
HOOK_EVENTS: tuple[HookEventName, ...] = ("PreCompact", "PostCompact", "SessionStart")
"""The events this module runs."""
CompactTrigger = Literal["manual", "auto"]
HookStatus = Literal["success", "blocking_error", "non_blocking_error", "timeout"]

BLOCKING_EXIT_CODE = 2
"""Exit code of a hook that blocks (its stderr is the reason)."""
DEFAULT_MAX_OUTPUT_CHARS = 10_000
"""Hook text added to instructions or context is cut at this many characters."""
SHELL = "/bin/sh"
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~!#\n]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WORD = re.compile(r"^[A-Za-z0-9_]+$")

HookReturn: TypeAlias = "str | Mapping[str, Any] | None"
HookFunction: TypeAlias = Callable[[dict[str, Any]], "HookReturn | Awaitable[HookReturn]"]


@dataclass(frozen=True, slots=True)
class CommandHook:
    """A shell command hook."""

    command: str
    timeout: float | None = None

    @property
    def label(self) -> str:
        """How results and messages name this hook."""
        return self.command


@dataclass(frozen=True, slots=True)
class CallableHook:
    """A Python callable hook."""

    function: HookFunction
    name: str
    timeout: float | None = None

    @property
    def label(self) -> str:
        """How results and messages name this hook."""
        return self.name


Hook: TypeAlias = "CommandHook | CallableHook"


def matcher_matches(matcher: str | None, value: str) -> bool:
    """Whether a settings matcher selects `value` ("", "*", a word, or a full-match regex)."""
    if matcher is None or matcher in ("", "*"):
        return True
    if _WORD.match(matcher):
        return matcher == value
    try:
        return re.fullmatch(matcher, value) is not None
    except re.error:
        return matcher == value


@dataclass(frozen=True, slots=True)
class HookMatcher:
    """A matcher and the hooks it runs."""

    matcher: str
    hooks: tuple[Hook, ...]


def _fail(where: str, problem: str) -> ConfigError:
    return ConfigError(f"hook settings: {where}: {problem}")


def _parse_timeout(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(f"{where}.timeout", f"must be a positive number of seconds, not {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class HookSettings:
    """The hooks configured for each event, parsed from Claude Code's settings format."""

    events: Mapping[str, tuple[HookMatcher, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    """Hook entries left out (types other than "command"), one line each."""

    @classmethod
    def from_settings(cls, data: Mapping[str, Any]) -> HookSettings:
        """Parse `{"hooks": {...}}` (or the inner mapping); ConfigError names what is wrong."""
        hooks = data.get("hooks", data) if isinstance(data, Mapping) else None
        if not isinstance(hooks, Mapping):
            raise _fail("hooks", "must be an object mapping event names to matcher lists")
        events: dict[str, tuple[HookMatcher, ...]] = {}
        warnings: list[str] = []
        for event in HOOK_EVENTS:
            groups = hooks.get(event)
            if groups is None:
                continue
            if not isinstance(groups, list):
                raise _fail(f"hooks.{event}", "must be a list of matcher objects")
            parsed: list[HookMatcher] = []
            for index, group in enumerate(groups):
                where = f"hooks.{event}[{index}]"
                if not isinstance(group, Mapping):
                    raise _fail(where, "must be an object with 'matcher' and 'hooks'")
                matcher = group.get("matcher", "")
                if matcher is None:
                    matcher = ""
                if not isinstance(matcher, str):
                    raise _fail(f"{where}.matcher", f"must be a string, not {matcher!r}")
                entries = group.get("hooks")
                if not isinstance(entries, list):
                    raise _fail(f"{where}.hooks", "must be a list of hook objects")
                commands: list[Hook] = []
                for position, entry in enumerate(entries):
                    at = f"{where}.hooks[{position}]"
                    if not isinstance(entry, Mapping):
                        raise _fail(at, "must be an object")
                    kind = entry.get("type", "command")
                    if kind != "command":
                        warnings.append(f"{at}: hook type {kind!r} is not supported; left out")
                        continue
                    command = entry.get("command")
                    if not isinstance(command, str) or not command.strip():
                        raise _fail(f"{at}.command", "must be a non-empty string")
                    commands.append(CommandHook(command, _parse_timeout(entry.get("timeout"), at)))
                parsed.append(HookMatcher(matcher, tuple(commands)))
            events[event] = tuple(parsed)
        return cls(events=events, warnings=tuple(warnings))

    @classmethod
    def load(cls, path: str | Path, *, check_permissions: bool = True) -> HookSettings:
        """Read a settings JSON file (e.g. .claude/settings.json).

        Its commands will run, so (POSIX, unless `check_permissions=False`) a file that other
        users may write (world-writable, or owned by someone other than you or root) is
        refused with a ConfigError.
        """
        if check_permissions:
            _check_settings_permissions(Path(path))
        try:
            data = orjson.loads(Path(path).read_bytes())
        except OSError as error:
            raise ConfigError(f"{path}: cannot read hook settings: {error}") from error
        except orjson.JSONDecodeError as error:
            raise ConfigError(f"{path}: hook settings are not valid JSON: {error}") from error
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: hook settings must be a JSON object")
        return cls.from_settings(data)

    def with_hook(
        self,
        event: HookEventName,
        hook: Hook | HookFunction,
        *,
        matcher: str = "",
        timeout: float | None = None,
        name: str | None = None,
    ) -> HookSettings:
        """A copy with one more hook (a command, a CallableHook, or a plain function)."""
        if event not in HOOK_EVENTS:
            raise ConfigError(f"unknown hook event {event!r}; expected one of {HOOK_EVENTS}")
        if not isinstance(hook, (CommandHook, CallableHook)):
            label = name or getattr(hook, "__qualname__", None) or repr(hook)
            hook = CallableHook(hook, label, timeout)
        events = dict(self.events)
        events[event] = (*events.get(event, ()), HookMatcher(matcher, (hook,)))
        return HookSettings(events=events, warnings=self.warnings)

    def hooks_for(self, event: HookEventName, value: str) -> list[Hook]:
        """Hooks whose matcher selects `value`, in order, identical commands once."""
        selected: list[Hook] = []
        seen: set[str] = set()
        for group in self.events.get(event, ()):
            if not matcher_matches(group.matcher, value):
                continue
            for hook in group.hooks:
                if isinstance(hook, CommandHook):
                    if hook.command in seen:
                        continue
                    seen.add(hook.command)
                selected.append(hook)
        return selected


@dataclass(frozen=True, slots=True)
class HookResult:
    """What one hook did."""

    event: str
    hook: str
    """The command, or the callable's name."""
    status: HookStatus
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    output: Mapping[str, Any] | None = None
    """stdout parsed, when it was a JSON object (or the dict a callable returned)."""
    duration_seconds: float = 0.0

    @property
    def succeeded(self) -> bool:
        """Exit code 0 (or a callable that returned)."""
        return self.status == "success"

    def specific_output(self, key: str) -> str | None:
        """A string field of the JSON output's `hookSpecificOutput`, when present."""
        if not self.output:
            return None
        specific = self.output.get("hookSpecificOutput")
        if isinstance(specific, Mapping):
            value = specific.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return None

    def text(self) -> str | None:
        """The text a successful hook contributes: plain stdout, or its JSON context field."""
        if not self.succeeded:
            return None
        if self.output is not None:
            return self.specific_output("additionalContext") or self.specific_output(
                "customInstructions"
            )
        stripped = self.stdout.strip()
        return stripped or None

    def system_message(self) -> str | None:
        """The JSON output's `systemMessage` (shown to the user)."""
        value = self.output.get("systemMessage") if self.output else None
        return value if isinstance(value, str) and value.strip() else None

    def block_reason(self) -> str | None:
        """Why this hook blocks, or None when it does not."""
        if self.status == "blocking_error":
            return self.stderr.strip() or f"{self.event} hook exited with status 2"
        if self.succeeded and self.output:
            if self.output.get("decision") == "block":
                return str(self.output.get("reason") or f"{self.event} hook blocked")
            if self.output.get("continue") is False:
                return str(self.output.get("stopReason") or f"{self.event} hook stopped")
        return None


@dataclass(frozen=True, slots=True)
class PreCompactOutcome:
    """What the PreCompact hooks decided."""

    new_custom_instructions: str | None
    """What the hooks add (seed 002 `newCustomInstructions`); None when they add nothing.
    The caller merges it after the user's own instructions (`merge_custom_instructions`)."""
    user_display_message: str | None
    results: tuple[HookResult, ...]
    merged_instructions: str | None = None
    """The user's instructions, then the hooks' (blank line between); None when neither."""
    blocked: bool = False
    block_reason: str | None = None


@dataclass(frozen=True, slots=True)
class PostCompactOutcome:
    """What the PostCompact hooks returned."""

    additional_context: tuple[str, ...]
    user_display_message: str | None
    results: tuple[HookResult, ...]


def _check_settings_permissions(path: Path) -> None:
    """Refuse a hook settings file that someone else could have written commands into."""
    if os.name != "posix":
        return
    try:
        info = path.stat()
    except OSError:
        return  # reading it reports the problem
    if info.st_mode & 0o002:
        raise ConfigError(
            f"{path}: hook settings are writable by every user (mode {info.st_mode & 0o777:04o}); "
            f"their commands would run as you: chmod o-w {path}"
        )
    if info.st_uid not in (os.getuid(), 0):
        raise ConfigError(
            f"{path}: hook settings belong to another user (uid {info.st_uid}); their commands "
            "would run as you: copy the file and check it, or pass check_permissions=False"
        )


def merge_custom_instructions(user: str | None, hook: str | None) -> str | None:
    """User instructions first, hook instructions after, joined by a blank line (seed 004)."""
    parts = [part.strip() for part in (user, hook) if part and part.strip()]
    return "\n\n".join(parts) if parts else None


def command_argv(command: str) -> tuple[list[str], bool]:
    """The argv to run `command` with, and whether it needs `/bin/sh -c` (shell syntax)."""
    first = command.strip().split(None, 1)[0] if command.strip() else ""
    if not _SHELL_SYNTAX.search(command) and not _ASSIGNMENT.match(first):
        try:
            argv = shlex.split(command)
        except ValueError:
            argv = []
        if argv:
            return argv, False
    return [SHELL, "-c", command], True


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n[hook output cut at {limit:,} characters]"


def _parse_output(stdout: str) -> Mapping[str, Any] | None:
    stripped = stdout.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled by a timeout meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _in_daemon_thread(function: Callable[[Any], Any], argument: Any) -> asyncio.Future[Any]:
    """Run a blocking callable in a daemon thread: a hook that overruns its timeout is
    abandoned, and does not hold up the event loop's shutdown as a pool worker would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def target() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = function(argument)
        except BaseException as caught:
            error = caught
        with contextlib.suppress(RuntimeError):  # the loop may be closed already
            loop.call_soon_threadsafe(_settle, future, value, error)

    threading.Thread(target=target, name="unbounded-hook", daemon=True).start()
    return future


class HookRunner:
    """Runs the configured hooks of one session: `arun_*` (async) and `run_*` (sync)."""

    def __init__(
        self,
        settings: HookSettings | Mapping[str, Any] | None = None,
        *,
        session_id: str,
        cwd: str | Path,
        transcript_path: str | Path | None = None,
        policy: Policy | None = None,
        env: Mapping[str, str] | None = None,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        if settings is None:
            settings = HookSettings()
        elif not isinstance(settings, HookSettings):
            settings = HookSettings.from_settings(settings)
        self.settings = settings
        self.session_id = session_id
        self.cwd = str(cwd)
        self.transcript_path = str(transcript_path) if transcript_path is not None else None
        self.policy = policy or Policy()
        self.max_output_chars = max_output_chars
        base = dict(os.environ if env is None else env)
        base["CLAUDE_PROJECT_DIR"] = self.cwd
        self.env = base

    # -- running -------------------------------------------------------------------------
    def payload(self, event: HookEventName, **fields: Any) -> dict[str, Any]:
        """The JSON object a hook receives on stdin."""
        return {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": self.cwd,
            "hook_event_name": event,
            **fields,
        }

    async def arun_hooks(
        self, event: HookEventName, match_value: str, payload: Mapping[str, Any]
    ) -> tuple[HookResult, ...]:
        """Run every hook of `event` whose matcher selects `match_value`, concurrently."""
        hooks = self.settings.hooks_for(event, match_value)
        if not hooks:
            return ()
        data = dict(payload)
        results = await asyncio.gather(*(self._run_one(event, hook, data) for hook in hooks))
        return tuple(results)

    async def _run_one(self, event: str, hook: Hook, payload: dict[str, Any]) -> HookResult:
        timeout = hook.timeout or self.policy.hook_timeout_seconds
        if isinstance(hook, CommandHook):
            return await self._run_command(event, hook, payload, timeout)
        return await self._run_callable(event, hook, payload, timeout)

    async def _run_command(
        self, event: str, hook: CommandHook, payload: dict[str, Any], timeout: float
    ) -> HookResult:
        argv, _ = command_argv(hook.command)
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as error:
            return HookResult(event, hook.command, "non_blocking_error", None, "", str(error))
        try:
            out, err = await asyncio.wait_for(
                process.communicate(orjson.dumps(payload)), timeout=timeout
            )
        except asyncio.TimeoutError:
            _kill_group(process)
            with contextlib.suppress(Exception):
                await process.wait()
            return HookResult(
                event,
                hook.command,
                "timeout",
                None,
                "",
                f"timed out after {timeout:g} seconds",
                timed_out=True,
                duration_seconds=time.monotonic() - started,
            )
        except asyncio.CancelledError:
            _kill_group(process)
            raise
        stdout = out.decode("utf-8", errors="replace")
        stderr = err.decode("utf-8", errors="replace")
        code = process.returncode
        status: HookStatus
        if code == 0:
            status = "success"
        elif code == BLOCKING_EXIT_CODE:
            status = "blocking_error"
        else:
            status = "non_blocking_error"
        return HookResult(
            event,
            hook.command,
            status,
            code,
            stdout,
            stderr,
            output=_parse_output(stdout) if code == 0 else None,
            duration_seconds=time.monotonic() - started,
        )

    async def _run_callable(
        self, event: str, hook: CallableHook, payload: dict[str, Any], timeout: float
    ) -> HookResult:
        started = time.monotonic()

        async def call() -> HookReturn:
            value: Any
            if inspect.iscoroutinefunction(hook.function):
                value = await hook.function(dict(payload))
            else:
                value = await _in_daemon_thread(hook.function, dict(payload))
            if inspect.isawaitable(value):
                value = await value
            result: HookReturn = value
            return result

        try:
            value = await asyncio.wait_for(call(), timeout=timeout)
        except asyncio.TimeoutError:
            return HookResult(
                event,
                hook.name,
                "timeout",
                None,
                "",
                f"timed out after {timeout:g} seconds",
                timed_out=True,
                duration_seconds=time.monotonic() - started,
            )
        except HookBlockingError as error:
            return HookResult(
                event, hook.name, "blocking_error", BLOCKING_EXIT_CODE, "", str(error)
            )
        except Exception as error:  # a hook never breaks compaction
            message = f"{type(error).__name__}: {error}"
            return HookResult(event, hook.name, "non_blocking_error", 1, "", message)
        elapsed = time.monotonic() - started
        if isinstance(value, Mapping):
            output = dict(value)
            stdout = orjson.dumps(output, default=str).decode()
            return HookResult(
                event, hook.name, "success", 0, stdout, "", output=output, duration_seconds=elapsed
            )
        stdout = "" if value is None else str(value)
        return HookResult(event, hook.name, "success", 0, stdout, "", duration_seconds=elapsed)

    # -- display -------------------------------------------------------------------------
    def _display(self, results: Sequence[HookResult]) -> str | None:
        lines: list[str] = []
        for result in results:
            name = f"{result.event} [{result.hook}]"
            if result.status == "success":
                text = result.text() if result.output is None else None
                lines.append(
                    f"{name} completed successfully"
                    + (f": {_cap(text, self.max_output_chars)}" if text else "")
                )
            elif result.status == "blocking_error":
                reason = result.block_reason() or ""
                lines.append(f"{name} blocked: {reason}")
            elif result.status == "timeout":
                lines.append(f"{name} {result.stderr}")
            else:
                code = (
                    "could not start" if result.exit_code is None else f"status {result.exit_code}"
                )
                detail = result.stderr.strip()
                lines.append(f"{name} failed ({code})" + (f": {detail}" if detail else ""))
            message = result.system_message()
            if message:
                lines.append(message)
        return "\n".join(lines) if lines else None

    # -- events --------------------------------------------------------------------------
    async def arun_pre_compact(
        self, trigger: CompactTrigger, custom_instructions: str | None = None
    ) -> PreCompactOutcome:
        """Run PreCompact hooks; their stdout becomes extra instructions after the user's."""
        payload = self.payload(
            "PreCompact", trigger=trigger, custom_instructions=custom_instructions or ""
        )
        results = await self.arun_hooks("PreCompact", trigger, payload)
        texts = [
            _cap(text, self.max_output_chars)
            for text in (r.text() for r in results if r.block_reason() is None)
            if text
        ]
        hook_instructions = "\n\n".join(texts) if texts else None
        reasons = [reason for reason in (r.block_reason() for r in results) if reason]
        return PreCompactOutcome(
            new_custom_instructions=hook_instructions,
            user_display_message=self._display(results),
            results=results,
            merged_instructions=merge_custom_instructions(custom_instructions, hook_instructions),
            blocked=bool(reasons),
            block_reason="\n".join(reasons) if reasons else None,
        )

    async def arun_post_compact(
        self, trigger: CompactTrigger, compact_summary: str = ""
    ) -> PostCompactOutcome:
        """Run PostCompact hooks (observers; JSON additionalContext is returned)."""
        payload = self.payload("PostCompact", trigger=trigger, compact_summary=compact_summary)
        results = await self.arun_hooks("PostCompact", trigger, payload)
        context = tuple(
            _cap(text, self.max_output_chars)
            for text in (r.specific_output("additionalContext") for r in results if r.succeeded)
            if text
        )
        return PostCompactOutcome(
            additional_context=context,
            user_display_message=self._display(results),
            results=results,
        )

    async def arun_session_start_hooks(self, source: str = "compact") -> tuple[HookResult, ...]:
        """Run SessionStart hooks and return their full results."""
        payload = self.payload("SessionStart", source=source)
        return await self.arun_hooks("SessionStart", source, payload)

    async def arun_session_start(self, source: str = "compact") -> list[str]:
        """Run SessionStart hooks; the context strings they add (stdout or additionalContext)."""
        results = await self.arun_session_start_hooks(source)
        return [_cap(text, self.max_output_chars) for text in (r.text() for r in results) if text]

    # -- sync facades --------------------------------------------------------------------
    def run_pre_compact(
        self, trigger: CompactTrigger, custom_instructions: str | None = None
    ) -> PreCompactOutcome:
        """`arun_pre_compact` from blocking code (see `unbounded.blocking`)."""
        return run_blocking(self.arun_pre_compact(trigger, custom_instructions))

    def run_post_compact(
        self, trigger: CompactTrigger, compact_summary: str = ""
    ) -> PostCompactOutcome:
        """`arun_post_compact` from blocking code (see `unbounded.blocking`)."""
        return run_blocking(self.arun_post_compact(trigger, compact_summary))

    def run_session_start(self, source: str = "compact") -> list[str]:
        """`arun_session_start` from blocking code (see `unbounded.blocking`)."""
        return run_blocking(self.arun_session_start(source))


__all__ = [
    "HOOK_EVENTS",
    "CallableHook",
    "CommandHook",
    "HookMatcher",
    "HookResult",
    "HookRunner",
    "HookSettings",
    "PostCompactOutcome",
    "PreCompactOutcome",
    "command_argv",
    "matcher_matches",
    "merge_custom_instructions",
]
