"""The words an output is checked for before its lines are scanned for failures
(`command_results._FAILURE_WORDS`): each failure pattern's line holds one, so skipping an
output without any changes no excerpt. Each line below holds the words of one pattern only:
dropping that word from the list loses its line."""

from __future__ import annotations

import pytest

from unbounded.compaction.command_results import _FAILURE_LINE, failure_excerpt

_ONE_LINE_PER_PATTERN = [
    "** (exit) shutdown",
    "error: cannot open the thing",
    "fatal: not a git repository",
    "ValueError: bad value",
    "java.lang.RuntimeException: boom",
    "Traceback (most recent call last):",
    "FAILED tests/test_app.py::test_one",
    "npm ERR! code 1",
    "Exit code 2",
    "bash: frobnicate: command not found",
    "cat: notes.txt: No such file or directory",
    "3 failed, 12 passed in 0.4s",
    "undefined function parse/1 (there is no such import)",
    '{"status": "failure"}',
    '{"ok": false}',
    "Failed to start the server",
    "listen EADDRINUSE: :::3000",
    "bind: address already in use",
    "Is port 4000 in use?",
]


@pytest.mark.parametrize("line", _ONE_LINE_PER_PATTERN)
def test_every_failure_pattern_s_line_is_still_found(line: str) -> None:
    assert _FAILURE_LINE.search(line)
    output = f"building\n{line}\ndone"
    assert failure_excerpt(output, flagged=False, command="make all") == f"{line}\ndone"


def test_an_output_without_those_words_has_no_failure() -> None:
    output = "all good\n" * 50 + "12 passed in 0.4s"
    assert failure_excerpt(output, flagged=False, command="make all") == ""
