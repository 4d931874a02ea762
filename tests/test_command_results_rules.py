"""Rules of reading shell commands and their output that the mutation check found unheld: the
excerpt's limits at their exact values, a linter's warnings, what makes something, operators
without spaces."""

from __future__ import annotations

from unbounded.compaction.command_results import (
    command_segments,
    failure_excerpt,
    failure_headline,
    makes_something,
    warns,
)


def test_a_failure_excerpt_keeps_eight_lines() -> None:
    output = "\n".join(f"error: e{i}" for i in range(12))
    assert failure_excerpt(output, flagged=False, command="make").splitlines() == [
        f"error: e{i}" for i in range(8)
    ]


def test_a_failure_excerpt_keeps_600_characters() -> None:
    output = "\n".join("error: " + "w" * 400 for _ in range(3))
    excerpt = failure_excerpt(output, flagged=False, command="make")
    assert excerpt == output[:600]


def test_a_linter_s_warnings_count_whatever_its_argument() -> None:
    output = "warning: unused import os\n  src/a.py:1"
    # `mypy src` has the key "mypy src": the program, not the last word, makes it a lint run.
    assert warns("mypy src") and warns("tsc app")
    assert failure_excerpt(output, flagged=False, command="mypy src") == output


def test_an_install_makes_nothing_even_in_the_background_or_written_to_a_log() -> None:
    assert not makes_something("npm install left-pad > install.log")
    assert not makes_something("nohup npm install")
    assert makes_something("nohup npm ci-build")  # not a setup subcommand: it keeps running


def test_a_making_word_counts_only_as_the_subcommand_or_the_word_after_it() -> None:
    assert makes_something("npm run dev") and makes_something("docker compose up")
    assert not makes_something("cargo test --test deploy")  # a test target named deploy


def test_segments_split_at_operators_without_spaces() -> None:
    assert command_segments("make&&make test||echo failed;ls") == [
        "make",
        "make test",
        "echo failed",
        "ls",
    ]


def test_a_failure_s_headline_is_its_first_line_saying_what_failed() -> None:
    pytest_run = (
        "============================= test session starts ==============================\n"
        "platform darwin -- Python 3.12.7, pytest-8.4.0\n"
        "FAILED test/test_link.py::test_link - AssertionError: no link\n"
        "1 failed, 4 passed in 0.31s"
    )
    assert failure_headline(pytest_run) == "FAILED test/test_link.py::test_link - AssertionError: no link"
    # An exit code or a traceback's opening says only that it failed: the error line wins.
    traceback = "Exit code 1\nTraceback (most recent call last):\n  File \"x.py\", line 3\nImportError: no name 'load'"
    assert failure_headline(traceback) == "ImportError: no name 'load'"
    assert failure_headline("Exit code 2") == "Exit code 2"
    # Nothing telling: the first line that is no banner.
    assert failure_headline("=====\nthe build stopped\n=====") == "the build stopped"
