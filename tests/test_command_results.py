"""Reading shell output: the program a command runs, failures not flagged as errors, checks,
commits."""

from __future__ import annotations

import pytest

from unbounded.compaction.command_results import (
    EXCERPT_CHARS,
    EXCERPT_LINES,
    Commit,
    command_key,
    command_words,
    commits_in,
    failure_excerpt,
    is_check,
    is_read_only,
    outcome_line,
    warns,
)


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("mix test test/x_test.exs 2>&1 | tail -5", "mix test"),
        ("cd /repo && mix compile --force", "mix compile"),
        ("cd assets; npm install highlight.js", "npm install"),
        ("npm run build -- --watch", "npm run build"),
        ("pnpm exec vitest", "pnpm exec vitest"),
        ("python3 -m pytest -q", "python3 -m pytest"),
        ("pytest tests/test_a.py -q", "pytest"),
        ("pytest -q", "pytest"),
        ("FOO=1 sudo time make test", "make test"),
        ("# restart it\nkill -9 42", "kill"),
        ("export X=1 && /usr/bin/git push origin main", "git push"),
        ("bun CISSpeak.ts carson hello", "bun"),
        ("bun run server.ts", "bun run"),
        ("mix deps.get", "mix deps.get"),
        ("cd /tmp", ""),
        ("", ""),
    ],
)
def test_command_key(command: str, key: str) -> None:
    assert command_key(command) == key


def test_command_words_stop_at_a_pipe() -> None:
    assert command_words("grep -n x a.py | head") == ["grep", "-n", "x", "a.py"]
    assert command_words("cd a && cd b || ls -la") == ["ls", "-la"]


@pytest.mark.parametrize(
    ("command", "read_only"),
    [("cat log.txt", True), ("tail -5 server.log | grep error", True), ("git log --oneline", True),
     ("git status", True), ("git commit -m x", False), ("git", False), ("bd show x-1", True),
     ("mix test", False), ("cd /x", True), ("curl -s http://x", False)],
)  # fmt: skip
def test_read_only_commands(command: str, read_only: bool) -> None:
    assert is_read_only(command) is read_only


@pytest.mark.parametrize(
    ("command", "check"),
    [("mix test", True), ("pytest -q", True), ("npm run build", True), ("npm install x", False),
     ("cargo build", True), ("poetry add x", False), ("python -m pytest", True),
     ("python script.py", False), ("python3 -m", False), ("bun test", True), ("bun run build", True),
     ("bun run server.ts", False), ("bun speak.ts", False), ("npx", False), ("npx tsc", True),
     ("deno x", False), ("ruff check src", True), ("ls", False), ("", False)],
)  # fmt: skip
def test_checks(command: str, check: bool) -> None:
    assert is_check(command) is check


@pytest.mark.parametrize(
    "output",
    [
        "Compiling 3 files (.ex)\nerror: cannot invoke remote function Access.get/2 inside a guard\n  │\n171 │ x",
        "** (CompileError) lib/a.ex:3: undefined function foo/0",
        "Traceback (most recent call last):\n  File \"a.py\"\nValueError: bad",
        "src/a.c:3:5: error: expected ';'",
        "FAILED tests/test_a.py::test_x - assert 1 == 2",
        "FAIL src/a.test.ts",
        "npm ERR! missing script: build",
        "Exit code 2\nmake: *** [all] Error 2",
        "fatal: not a git repository",
        "error[E0425]: cannot find value `x`",
        "TypeError: x is not a function",
        "==== 2 failed, 10 passed in 0.3s ====",
        "410 tests, 3 failures",
        "Found 1 error in 1 file",
        "bash: foo: command not found",
        "cat: a.txt: No such file or directory",
        "warning: undefined function foo/0 (there is no such import)",
        '{"status":"error","message":"voice not found"}',
        '{"error": {"code": 401, "message": "bad key"}}',
        '{"success": false, "reason": "quota"}',
    ],
)
def test_failing_output_of_a_command_is_a_failure(output: str) -> None:
    excerpt = failure_excerpt(output, flagged=False, command="make all")
    assert (excerpt and excerpt in output.replace("\n\n", "\n")) or excerpt.splitlines()[0] in output


@pytest.mark.parametrize(
    "output",
    ["410 tests, 0 failures", "Generated app", "warning: unused variable", "all good: no error found",
     "  Exit code 0", "Errors: none", "error handling improved", '{"status": "ok", "error": null}',
     '{"success": true}', '{"status": "errors-fixed"}'],
)  # fmt: skip
def test_passing_output_is_not_a_failure(output: str) -> None:
    assert failure_excerpt(output, flagged=False, command="mix test") == ""


def test_warnings_fail_a_build_or_lint_run_but_not_a_dependency_s_or_a_test_run() -> None:
    own = "Compiling 2 files (.ex)\nwarning: unused alias Foo\n  lib/a.ex:3\nGenerated app"
    assert failure_excerpt(own, flagged=False, command="mix compile 2>&1 | head") == "warning: unused alias Foo\n  lib/a.ex:3\nGenerated app"
    assert failure_excerpt(own, flagged=False, command="mix credo --strict").startswith("warning: unused alias Foo")
    assert failure_excerpt(own, flagged=False, command="ruff check src").startswith("warning:")
    assert failure_excerpt(own, flagged=False, command="mix test --warnings-as-errors").startswith("warning:")
    assert failure_excerpt(own, flagged=False, command="mix test") == ""
    assert failure_excerpt(own, flagged=False, command="./build.sh") == ""
    dependency = "==> toml\nCompiling 10 files (.ex)\n     warning: single-quoted strings\nGenerated toml app"
    assert failure_excerpt(dependency, flagged=False, command="mix compile") == ""
    assert warns("npm run lint") and warns("cargo clippy") and not warns("npm run dev") and not warns("mix deps.compile")


def test_reading_commands_and_tools_without_a_command_quote_errors_without_failing() -> None:
    log = "error: the server crashed"
    assert failure_excerpt(log, flagged=False, command="tail -5 server.log") == ""
    assert failure_excerpt(log, flagged=False, command=None) == ""
    assert failure_excerpt(log, flagged=False, command="./run.sh") == "error: the server crashed"


def test_a_flagged_result_always_failed() -> None:
    assert failure_excerpt("File does not exist.", flagged=True, command=None) == "File does not exist."
    assert failure_excerpt("", flagged=True, command=None) == "error"
    assert failure_excerpt("\n\nline one\n\nline two", flagged=True, command=None) == "line one\nline two"
    text = "Bash failed for pattern x:\nnoise\nerror: bad thing\n  at a.py:3\n  hint\nmore noise"
    assert failure_excerpt(text, flagged=True, command=None) == "Bash failed for pattern x:\nnoise\nerror: bad thing\n  at a.py:3\n  hint"
    assert failure_excerpt("\n  \nExit code 1\nfatal: no", flagged=True, command=None) == "Exit code 1\nfatal: no"


def test_the_excerpt_keeps_two_lines_of_context_and_its_caps() -> None:
    output = "a\nerror: one\nctx1\nctx2\nctx3\nerror: two\nx\ny\nz"
    assert failure_excerpt(output, flagged=False, command="make") == "error: one\nctx1\nctx2\nerror: two\nx\ny"
    many = "\n".join(f"error: e{i}" for i in range(30))
    assert len(failure_excerpt(many, flagged=False, command="make").splitlines()) == EXCERPT_LINES
    wide = "\n".join("error: " + "w" * 400 for _ in range(3))
    assert len(failure_excerpt(wide, flagged=False, command="make")) == EXCERPT_CHARS


def test_outcome_line() -> None:
    assert outcome_line("Compiling\n\n14 doctests, 410 tests, 0 failures\n", "") == "14 doctests, 410 tests, 0 failures"
    assert outcome_line("5 files checked\nUse `credo explain` for help\n", "") == "5 files checked"
    assert outcome_line("Generated app\n", "") == "Generated app"
    assert outcome_line("", "") == "(no output)"
    assert outcome_line("x", "error: boom\ncontext") == "error: boom"


def test_commits_in_a_commit_output() -> None:
    output = (
        "[spotter-fum b9288c2] feat: rebuild the panel (spotter-fum.2)\n"
        " 3 files changed, 231 insertions(+), 25 deletions(-)\n create mode 100644 a.css\n"
    )
    assert commits_in(output) == [Commit("spotter-fum", "b9288c2", "feat: rebuild the panel (spotter-fum.2)", "3 files changed, 231 insertions(+), 25 deletions(-)")]
    root = "[main (root-commit) 1a2b3c4] first\n 1 file changed, 1 insertion(+)"
    assert commits_in(root) == [Commit("main", "1a2b3c4", "first", "1 file changed, 1 insertion(+)")]
    assert commits_in("[main abc123] too short a sha") == []
    assert commits_in("nothing to commit, working tree clean") == []
    assert commits_in("[dev 0123456789abcdef] msg") == [Commit("dev", "0123456789abcdef", "msg", "")]
