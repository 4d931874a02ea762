"""The words an output is checked for before its lines are scanned for failures
(`command_results._FAILURE_WORDS`): each failure pattern's line holds one, so skipping an
output without any changes no excerpt. Each line below holds the words of one pattern only:
dropping that word from the list loses its line. The pattern itself is parsed to check that
each of its alternatives holds a word, so one added without a word fails here too."""

from __future__ import annotations

import re
import re._constants as sre
import re._parser as sre_parse
from typing import Any

import pytest

from unbounded.compaction import command_results
from unbounded.compaction.command_results import _FAILURE_LINE, _FAILURE_WORDS, failure_excerpt

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


class _CountingPattern:
    """`_FAILURE_LINE`, counting the lines it is run on."""

    def __init__(self) -> None:
        self.lines = 0

    def search(self, line: str) -> re.Match[str] | None:
        self.lines += 1
        return _FAILURE_LINE.search(line)


def test_an_output_without_those_words_is_not_scanned_line_by_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = _CountingPattern()
    monkeypatch.setattr(command_results, "_FAILURE_LINE", counting)
    quiet = "all good\n" * 50 + "12 passed in 0.4s"
    assert failure_excerpt(quiet, flagged=False, command="make all") == ""
    assert counting.lines == 0
    # An output with a word is scanned (the count is wired to the scan).
    failing = "all good\n" * 50 + "1 failed, 11 passed in 0.4s"
    assert (
        failure_excerpt(failing, flagged=False, command="make all") == "1 failed, 11 passed in 0.4s"
    )
    assert counting.lines == 51


def _shown(items: Any) -> str:
    """An alternative as its literal characters, anything else as '…' (for a failure message)."""
    return "".join(chr(av) if op is sre.LITERAL else "…" for op, av in items)


def _wordless(items: Any, words: tuple[str, ...], prefix: str = "") -> list[str]:
    """The alternatives of a parsed pattern that a match can satisfy without holding any of
    the words; [] when every match holds one. A word counts when it lies in a run of
    literal characters every match has, or in a part every match has (a group, a repeat of at
    least one, a branch whose every alternative holds a word). The literals just before a
    branch go with each of its alternatives: the parser moves a prefix they share out of them
    (`Error|Exception` is `E` then `rror|xception`)."""
    run = prefix
    parts: list[str | list[str]] = []
    for op, av in items:
        if op is sre.LITERAL:
            run += chr(av)
            continue
        if op is sre.BRANCH:
            parts.append(
                [missing for alternative in av[1] for missing in _wordless(alternative, words, run)]
            )
        else:
            parts.append(run)
            if op is sre.SUBPATTERN:
                parts.append(_wordless(av[3], words))
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and av[0] >= 1:
                parts.append(_wordless(av[2], words))
        run = ""
    parts.append(run)
    if any(
        part == [] or (isinstance(part, str) and any(w in part for w in words)) for part in parts
    ):
        return []
    inner = [missing for part in parts if isinstance(part, list) for missing in part]
    return inner or [prefix + _shown(items)]


def test_every_failure_pattern_holds_one_of_the_words() -> None:
    # A pattern added to `_FAILURE_LINE` without a word in `_FAILURE_WORDS` would never be
    # run (the output is skipped before its lines are scanned).
    assert _wordless(sre_parse.parse(_FAILURE_LINE.pattern), _FAILURE_WORDS) == []


@pytest.mark.parametrize(
    ("pattern", "wordless"),
    [
        (r"^\s*(?:error:|FAILED\b)|: command not found", []),
        (r"^\s*(?:error:|panicked at)|: command not found", ["panicked at"]),
        (r"^\s*(?:error:|FAILED)|\bsegfault\b", ["…segfault…"]),
        (r"[1-9] (?:failed|passed)", [" passed"]),
        (r"x(?:fail)?y", ["x…y"]),
    ],
)
def test_a_pattern_without_a_word_is_found(pattern: str, wordless: list[str]) -> None:
    words = ("rror", "FAIL", "fail", "command not found")
    assert _wordless(sre_parse.parse(pattern), words) == wordless
