"""What a shell command's output says, read without running anything.

An agent learns most of its state from command output: a test run that failed, a compiler
error, the commit a `git commit` made. Tools flag few of these as errors (a `mix compile`
that fails inside `| tail -20` exits 0), so the hand-over reads the text itself:

- `command_words` / `command_key`: the program a command line runs, past `cd …&&`, variable
  assignments, `sudo` and comments, before any pipe; its key is the program with its
  subcommand (`mix test`, `git add`, `npm run build`, `python -m pytest`), so two runs of
  the same check compare even when their arguments differ (a script file is an argument,
  not a subcommand: `bun speak.ts` is `bun`).
- `failure_excerpt`: the lines of an output that say it failed: `error:` / `fatal:` /
  `FAILED` / `npm ERR!` at a line start, `SomeError:` / `** (SomeError)`, a traceback,
  `Exit code N` (N > 0), `file:line: error:`, `command not found`, `No such file or
  directory`, `undefined function`, a JSON reply saying it failed (`"status": "error"`,
  `"error": {…}`, `"success": false`), a server that could not start ("Failed to start…",
  `EADDRINUSE`, "address already in use", "Is port 8888 in use?"), a count of failures
  above zero ("2 failed", "1 error"), and for a build or lint run (`warns`) its `warning:`
  lines, not a dependency's; each with the two lines after it (the location a compiler
  prints). A result the tool flagged as an error keeps its first line too (what failed).
  Outputs of commands that only read (`cat`, `grep`, `git log`, `bd show`…) are never
  failures: they quote text.
- `is_check`: a test, build or lint run (the programs of `CHECK_PROGRAMS`, not their
  install or init subcommands; `bun`, `deno`, `npx` only with a subcommand, not running a
  script file; `python` only as `python -m tool`), and `outcome_line`: the line that says
  how it went (the first failure line, else the last line with a count in it, else the
  last line).
- `commits_in`: the commits a `git commit` output reports (`[branch sha] message` and its
  `N files changed` line).

Each reads a Codex output envelope's output, not the envelope (`unwrap_output`: the JSON
`{"output", "metadata": {"exit_code"}}` of older versions, the `Exit code: N … Output:` text
of newer ones, exec_command's `Process exited with code N … Output:`). `command_segments`
lives in `unbounded.model.shell_files` (the shell-read recogniser there splits commands with
it) and is imported from here as before.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from unbounded.model.shell_files import command_segments, unwrap_output

CHECK_PROGRAMS = frozenset(
    {
        "pytest", "mix", "npm", "npx", "pnpm", "yarn", "bun", "deno", "cargo", "go", "make",
        "uv", "poetry", "bundle", "rake", "gradle", "mvn", "dotnet", "jest", "vitest", "tox",
        "nox", "ruff", "mypy", "pyright", "eslint", "tsc", "flake8", "rspec", "phpunit",
    }
)  # fmt: skip
"""Programs whose runs test, build or lint the work."""
SETUP_SUBCOMMANDS = frozenset(
    {"install", "i", "ci", "add", "remove", "uninstall", "init", "new", "fund", "deps.get"}
)
"""Subcommands of those programs that set up rather than check."""
SCRIPT_RUNNERS = frozenset({"bun", "deno", "npx"})
"""Check programs that also run any script: a check only with a subcommand (`bun test`)."""
READ_ONLY_PROGRAMS = frozenset(
    {
        "cat", "head", "tail", "less", "more", "grep", "egrep", "rg", "ag", "ack", "find",
        "ls", "tree", "wc", "sed", "awk", "jq", "echo", "printf", "diff", "file", "stat",
        "which", "pwd", "ps", "lsof", "du", "df", "bd", "beads", "gh",
    }
)  # fmt: skip
"""Programs that only show text: their output quotes errors rather than reporting one."""
LINTERS = frozenset({"ruff", "mypy", "pyright", "eslint", "tsc", "flake8"})
"""Check programs whose every run is a lint: a warning is what they report."""
READ_ONLY_GIT = frozenset({"log", "show", "diff", "status", "blame", "grep", "branch"})
CONTEXT_LINES = 2
"""Lines kept after each failure line (a compiler's location, a test's assertion)."""
EXCERPT_LINES = 8
EXCERPT_CHARS = 600

_SEGMENTS = re.compile(r"&&|\|\||;|\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"sudo", "time", "env", "nohup", "exec", "command"})
_NOT_PROGRAMS = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset"})
_SUBCOMMAND = re.compile(r"^[a-z][\w:.-]{0,23}$")
_SCRIPT_FILE = re.compile(r"\.(?:[jt]sx?|[mc]js|py|sh|rb|exs?)$")
_FAILURE_LINE = re.compile(
    r"^\s*(?:\*\* \(\w+(?:\.\w+)*\)|(?:error|fatal)(?:\[\w+\])?:|[\w.]*(?:Error|Exception):|"
    r"Traceback \(most recent call last\)|FAILED\b|FAIL\b|npm ERR!|Exit code [1-9])"
    r"|:\d+(?::\d+)?: (?:fatal )?error\b|: command not found|No such file or directory"
    r"|\b[1-9]\d* (?:failed|failures?|errors?)\b"
    r"|\bundefined (?:function|variable|method|module)\b"
    r'|"(?:status|state)"\s*:\s*"(?:error|failed|failure)"|"error"\s*:\s*[{"]'
    r'|"(?:success|ok)"\s*:\s*false\b'
    r"|^\s*Failed to (?:start|bind|listen)\b|\bEADDRINUSE\b|\baddress already in use\b"
    r"|\bIs port \d+ in use\b"
)
_FAILURE_WORDS = (
    "rror",
    "fatal",
    "Exception",
    "Traceback",
    "FAIL",
    "ERR!",
    "Exit code",
    "command not found",
    "No such file",
    "fail",
    "Fail",
    "undefined",
    "false",
    "EADDRINUSE",
    "address already in use",
    "Is port",
    "** (",
)
"""A line `_FAILURE_LINE` finds holds one of these (each of its patterns needs one): an
output with none has no failure line, told without running the patterns line by line (some
10 us a line)."""
_WARNING_LINE = re.compile(r"^\s*warning:", re.I)
_DEPENDENCY_HEADER = re.compile(r"^==> \S")
WARNING_SUBCOMMANDS = frozenset({"compile", "build", "credo", "lint", "check", "vet", "clippy"})
"""Subcommands whose warnings are what the agent runs them for (not a test run's)."""
MAKING_SUBCOMMANDS = frozenset(
    {"deploy", "publish", "release", "serve", "server", "start", "up", "dev", "generate"}
)
"""Subcommands that start or make something (`npm run dev`, `docker compose up`)."""
_NOT_MAKERS = frozenset(
    {"git", "mkdir", "rm", "cp", "mv", "kill", "pkill", "killall", "sleep", "chmod", "touch",
     "open", "curl", "wget", "tee", "xargs", "launchctl", "brew", "pip"}
)  # fmt: skip
"""Programs whose runs set up, move, send or query rather than make."""
QUOTED_CHARS = 60
"""A quoted argument of a command shown for redoing it is cut to this many characters."""
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", re.S)
_PROGRAM = re.compile(r"^(?:[a-z][\w.+-]*|[.~/][\w./~-]*)$")
"""What a program's name looks like (not a word of prose, not an option)."""
_BACKGROUND = re.compile(r"(?<![&|])&\s*$")
_OUTPUT_FLAG = re.compile(r"(?:^|\s)(?:--output(?:-file|-dir)?|--out(?:dir|file)?|-o)(?:=|\s+)\S")
_REDIRECT = re.compile(r"(?<![\d&])>{1,2}\s*(?!/dev/null|&)[\w~./$\"'-]")
_COMMIT = re.compile(r"^\[([^\]\s]+)(?: \([\w -]+\))? ([0-9a-f]{7,40})\] (.+)$", re.M)
_STAT = re.compile(r"^\s*(\d+ files? changed.*)$", re.M)


@dataclass(frozen=True, slots=True)
class Commit:
    """A commit a `git commit` output reports."""

    branch: str
    sha: str
    message: str
    stat: str = ""
    """Its "N files changed, …" line, when the output has one."""


def command_words(command: str) -> list[str]:
    """The words of the first part of a command line that runs a program (see the module
    docstring), up to a pipe; empty when there is none."""
    for segment in _SEGMENTS.split(command):
        words = segment.split("|", 1)[0].split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words and words[0] not in _NOT_PROGRAMS and not words[0].startswith("#"):
            return words
    return []


def command_key(command: str) -> str:
    """The program a command runs with its subcommand (`mix test`, `npm run build`,
    `python -m pytest`, `pytest`); "" when it runs none."""
    words = command_words(command)
    if not words:
        return ""
    key = [os.path.basename(words[0])]
    rest = words[1:]
    if rest and rest[0] == "-m" and len(rest) > 1:
        key += rest[:2]
    elif rest and _is_subcommand(rest[0]):
        key.append(rest[0])
        if rest[0] in ("run", "exec", "x") and len(rest) > 1 and _is_subcommand(rest[1]):
            key.append(rest[1])
    return " ".join(key)


def _is_subcommand(word: str) -> bool:
    return bool(_SUBCOMMAND.match(word)) and not _SCRIPT_FILE.search(word)


def is_read_only(command: str) -> bool:
    """Whether a command only shows text (its output may quote errors without failing)."""
    words = command_key(command).split()
    if not words:
        return True
    if words[0] == "git":
        return len(words) > 1 and words[1] in READ_ONLY_GIT
    return words[0] in READ_ONLY_PROGRAMS


def is_check(command: str) -> bool:
    """Whether a command tests, builds or lints (not an install or a plain script run)."""
    words = command_key(command).split()
    if not words:
        return False
    if words[0] in ("python", "python3"):
        return len(words) == 3 and words[1] == "-m"
    if words[0] in SCRIPT_RUNNERS and (len(words) == 1 or words[1:] in (["run"], ["x"], ["exec"])):
        return False
    return words[0] in CHECK_PROGRAMS and not (len(words) > 1 and words[1] in SETUP_SUBCOMMANDS)


def _excerpt(lines: list[str], indexes: list[int]) -> str:
    kept: list[int] = []
    for index in indexes:
        for shown in range(index, min(index + CONTEXT_LINES + 1, len(lines))):
            if shown not in kept:
                kept.append(shown)
    text = "\n".join(lines[i].rstrip() for i in sorted(kept)[:EXCERPT_LINES] if lines[i].strip())
    return text[:EXCERPT_CHARS]


def failure_excerpt(output: str, *, flagged: bool, command: str | None) -> str:
    """The lines of a tool's output that say it failed ("" when it did not).

    A Codex output envelope is read through (`unwrap_output`): its output is what is read,
    and an exit code other than 0 flags it (an empty output then says "exit code N").

    A result the tool flagged as an error always failed: its first line (what failed) with its
    telling lines, else its first lines. An unflagged one failed only for a command that does
    more than read and whose output has a failure line.
    """
    output, exit_code = unwrap_output(output)
    if exit_code is not None and exit_code != 0:
        flagged = True
        if not output.strip():
            return f"exit code {exit_code}"
    if not flagged and (command is None or is_read_only(command)):
        # Told before the output is scanned: a read's output (a file) is often long.
        return ""
    lines = output.splitlines()
    telling = (
        [i for i, line in enumerate(lines) if _FAILURE_LINE.search(line)]
        if any(word in output for word in _FAILURE_WORDS)
        else []
    )
    if command is not None and warns(command):
        telling = sorted({*telling, *_own_warnings(lines)})
    if flagged:
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None:
            return "error"
        if telling:
            return _excerpt(lines, [first, *telling])
        return "\n".join(line.rstrip() for line in lines if line.strip())[:EXCERPT_CHARS]
    if not telling:
        return ""
    return _excerpt(lines, telling)


_BANNER = re.compile(r"^\s*([=*#~_-])\1{2,}")
"""A line a tool opens or closes a block with (`===== test session starts =====`)."""
_GENERIC_FAILURE = re.compile(r"^\s*(?:Traceback \(most recent call last\)|Exit code \d+\s*$)")
"""Telling lines that say only that something failed, not what."""
_DIAGNOSTIC = re.compile(
    r"^\s*(?:--- FAIL: \S"  # go test's failed test
    r"|\S+:\d+:\d+: [A-Z]+\d+\b"  # a linter's rule at a place (ruff, flake8: `a.py:1:8: F401`)
    r"|\S+\(\d+,\d+\): error TS\d+)"  # tsc's type error (`a.ts(3,5): error TS2322`)
)
"""Lines naming what failed that `_FAILURE_LINE` does not find telling (or takes for a banner)."""
_CHAINED = re.compile(
    r"^(?:During handling of the above exception|The above exception was the direct cause)"
)
"""Python's line between chained tracebacks: the one after it was raised last."""


def failure_headline(failure: str) -> str:
    """The line of a failure that says best what failed: its first telling line (an error,
    a failed test, a linter's rule), one that only says something failed (an exit code, a
    traceback's opening) after the others; else its first line that is no banner; else its
    first. Of chained tracebacks, only the last (the exception raised last) is read."""
    lines = [line.strip() for line in failure.splitlines() if line.strip()]
    chained = [index for index, line in enumerate(lines) if _CHAINED.match(line)]
    if chained:
        lines = lines[chained[-1] + 1 :]
    telling = [line for line in lines if _FAILURE_LINE.search(line)]
    said = {line for line in telling if not _GENERIC_FAILURE.match(line)}
    specific = [line for line in lines if line in said or _DIAGNOSTIC.match(line)]
    plain = [line for line in lines if not _BANNER.match(line)]
    return next(iter(specific or telling or plain or lines), "")


def warns(command: str) -> bool:
    """Whether a command's warnings count as failures: a build or lint run (`mix compile`,
    `cargo clippy`, `mix credo`, `npm run lint`), or one told to treat them as errors."""
    words = command_key(command).split()
    return "--warnings-as-errors" in command or (
        is_check(command) and (words[-1] in WARNING_SUBCOMMANDS or words[0] in LINTERS)
    )


def _own_warnings(lines: list[str]) -> list[int]:
    """The warning lines of an output, but those printed while building a dependency (after
    a `==> name` header, as mix prints them)."""
    found: list[int] = []
    in_dependency = False
    for index, line in enumerate(lines):
        if _DEPENDENCY_HEADER.match(line):
            in_dependency = True
        elif _WARNING_LINE.match(line) and not in_dependency:
            found.append(index)
    return found


def outcome_line(output: str, failure: str) -> str:
    """How a run went in one line: its first failure line, else its last line with a number
    in it (a count of tests, files, issues), else its last line."""
    if failure:
        return failure.splitlines()[0].strip()
    output = unwrap_output(output)[0]
    lines = [line.strip() for line in reversed(output.splitlines()) if line.strip()]
    counted = next((line for line in lines if any(ch.isdigit() for ch in line)), None)
    return counted or next(iter(lines), "(no output)")


def makes_something(segment: str) -> bool:
    """Whether one command (a segment of a command line) makes an artifact or starts
    something a successor may have to redo: it runs in the background (`… &`, `nohup`),
    serves, starts or deploys (`npm run dev`, `docker compose up`), or writes to an output
    file (`--output`, `-o`, `> file`); never a read, git, or a check (a build is one: the
    checks are reported apart)."""
    words = command_words(segment)
    if not words or not _PROGRAM.match(words[0]) or words[0] in _NOT_MAKERS:
        return False
    if is_read_only(segment) or (len(words) > 1 and words[1] in SETUP_SUBCOMMANDS):
        return False
    if _BACKGROUND.search(segment.strip()) or segment.split()[0] == "nohup":
        return True
    if any(word in MAKING_SUBCOMMANDS for word in words[1:3]):
        return True
    if is_check(segment):
        return False
    return bool(_OUTPUT_FLAG.search(segment) or _REDIRECT.search(segment))


def shorten_quoted(segment: str, chars: int = QUOTED_CHARS) -> str:
    """A command with each quoted argument longer than `chars` cut to its beginning and a
    marker saying how much was left out, so its program, options and output paths fit."""

    def shorten(match: re.Match[str]) -> str:
        quote, inner = match.group(0)[0], match.group(0)[1:-1]
        if len(inner) <= chars:
            return match.group(0)
        return f"{quote}{inner[:chars]}…[{len(inner) - chars:,} chars]{quote}"

    return _QUOTED.sub(shorten, segment)


def commits_in(output: str) -> list[Commit]:
    """The commits a `git commit` output reports, in order."""
    output = unwrap_output(output)[0]
    found = _STAT.search(output)
    stat = found.group(1) if found else ""
    return [
        Commit(match.group(1), match.group(2), match.group(3).strip(), stat)
        for match in _COMMIT.finditer(output)
    ]


__all__ = [
    "CHECK_PROGRAMS",
    "READ_ONLY_GIT",
    "READ_ONLY_PROGRAMS",
    "SCRIPT_RUNNERS",
    "SETUP_SUBCOMMANDS",
    "Commit",
    "command_key",
    "command_segments",
    "command_words",
    "commits_in",
    "failure_excerpt",
    "failure_headline",
    "is_check",
    "is_read_only",
    "makes_something",
    "outcome_line",
    "shorten_quoted",
    "warns",
]
