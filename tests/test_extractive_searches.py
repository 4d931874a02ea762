"""Which calls the extractive summary lists as searches, and what it says each found."""

from __future__ import annotations

from conversation import bash, user

from unbounded.compaction.extractive import _is_search, _search_outcome
from unbounded.compaction.handover import Call, read_handover


def _calls(*runs: tuple[str, str, bool]) -> list[Call]:
    messages = [user("go")]
    for number, (command, output, error) in enumerate(runs):
        messages.extend(bash(f"c{number}", command, output, error=error))
    return read_handover(messages).calls


def test_a_search_is_known_by_the_program_its_command_starts_with() -> None:
    calls = _calls(("git grep foo", "src/a.py:1:foo", False), ("rg foo", "src/a.py:1:foo", False))
    assert [_is_search(call) for call in calls] == [False, True]


def test_a_failed_search_shows_the_first_line_of_its_failure() -> None:
    failure = "grep: src/x: Permission denied\ngrep: src/y: Is a directory"
    (call,) = _calls(("grep -r foo src", failure, True))
    assert _search_outcome(call) == "failed: grep: src/x: Permission denied"


def test_the_first_line_of_a_search_s_output_says_whether_it_found_anything() -> None:
    none_first = _calls(("rg foo", "No matches found\nsrc/a.py:2: foo", False))[0]
    none_last = _calls(("rg bar", "src/a.py:1:bar\nNo matches found", False))[0]
    assert _search_outcome(none_first) == "no match"
    assert _search_outcome(none_last) == "2 line(s), the first: src/a.py:1:bar"
