"""Rules of model/shell_files.py each held by a test that fails when the rule is flipped."""

from __future__ import annotations

from unbounded.model.shell_files import (
    Hunk,
    WrittenFile,
    parse_patch,
    patches_in_command,
)


def _update(*lines: str) -> WrittenFile:
    (found,) = parse_patch("\n".join(["*** Begin Patch", "*** Update File: f.py", *lines]))
    return found


def test_a_hunk_is_placed_where_all_its_old_lines_stand_not_just_its_first() -> None:
    change = _update("@@", "-a", "-b", "+B", "*** End Patch")
    # the first `a` is followed by `c`: the hunk's lines stand at the second `a`
    assert change.applied_to("a\nc\na\nb\n") == "a\nc\nB\n"


def test_lines_after_the_end_of_a_patch_are_not_the_patch() -> None:
    (added,) = parse_patch("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n+y")
    assert added == WrittenFile("a.txt", "add", "x\n")


def test_a_hunk_after_an_end_of_file_marker_is_still_the_files() -> None:
    change = _update("@@", "-a", "+A", "*** End of File", "@@", "-b", "+B", "*** End Patch")
    assert change.hunks == (Hunk(("a",), ("A",)), Hunk(("b",), ("B",)))


def test_an_empty_line_in_a_hunk_is_an_empty_context_line() -> None:
    change = _update("@@", " a", "", "-b", "+c", "*** End Patch")
    assert change.hunks == (Hunk(("a", "", "b"), ("a", "", "c")),)
    assert change.applied_to("a\n\nb\n") == "a\n\nc\n"
    # a line with no hunk prefix is no line of the hunk
    assert _update("@@", "-a", "stray", "+b", "*** End Patch").hunks == (Hunk(("a",), ("b",)),)


def test_a_double_quoted_patch_argument_is_read_as_the_shell_unquotes_it() -> None:
    command = (
        'apply_patch "*** Begin Patch\n*** Add File: a.sh\n+say \\"hi\\" \\$HOME\n*** End Patch"'
    )
    assert patches_in_command(command) == [
        '*** Begin Patch\n*** Add File: a.sh\n+say "hi" $HOME\n*** End Patch'
    ]
