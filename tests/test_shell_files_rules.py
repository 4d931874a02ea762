"""Rules of model/shell_files.py each held by a test that fails when the rule is flipped."""

from __future__ import annotations

import shlex

from unbounded.model.shell_files import (
    Hunk,
    ShellRead,
    WrittenFile,
    command_segments,
    heredoc_writes,
    in_place_edits,
    parse_patch,
    patch_writes,
    patches_in_command,
    shell_reads,
    unwrap_output,
    without_heredocs,
)

PATCH = "*** Begin Patch\n*** Delete File: b.txt\n*** End Patch"


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


def test_a_patch_tool_input_without_a_begin_marker_is_read_whole() -> None:
    assert patch_writes("*** Add File: a.txt\n+x\n") == (WrittenFile("a.txt", "add", "x\n"),)
    # with markers only what stands between them is the patch
    text = "*** Delete File: before.txt\n*** Begin Patch\n*** Delete File: in.txt\n*** End Patch"
    assert patch_writes(text) == (WrittenFile("in.txt", "delete"),)


def test_a_patch_whose_end_marker_is_missing_runs_to_the_end_of_the_text() -> None:
    text = "*** Begin Patch\n*** Add File: a.txt\n+x\n+y"
    assert patch_writes(text) == (WrittenFile("a.txt", "add", "x\ny\n"),)
    assert patch_writes(f"{PATCH}\n{text}") == (
        WrittenFile("b.txt", "delete"),
        WrittenFile("a.txt", "add", "x\ny\n"),
    )


def test_command_segments_split_at_each_separator_and_keep_the_next_command_whole() -> None:
    assert command_segments("a;b\nc&&d||e") == ["a", "b", "c", "d", "e"]


def test_an_escaped_double_quote_keeps_a_double_quoted_argument_open() -> None:
    command = 'echo "say \\"hi && bye\\"" && ls'
    assert command_segments(command) == ['echo "say \\"hi && bye\\""', "ls"]
    assert command_segments('echo "abc" && ls') == ['echo "abc"', "ls"]


def test_a_backslash_inside_single_quotes_escapes_nothing() -> None:
    assert command_segments("echo 'a\\' && ls") == ["echo 'a\\'", "ls"]


def test_a_backslash_ending_an_open_double_quote_is_kept() -> None:
    assert command_segments('echo "a\\') == ['echo "a\\']


def test_a_here_document_marker_on_the_last_line_opens_no_body() -> None:
    assert without_heredocs("ls && cat > f.txt << EOF") == "ls && cat > f.txt << EOF"
    assert heredoc_writes("cat > f.txt << EOF") == ()


def test_a_here_document_at_the_start_of_a_command_is_data_too() -> None:
    command = "<<'EOF'\ncat notes.md\nEOF\nls"
    assert without_heredocs(command) == "<<'EOF'\n\nls"
    assert shell_reads(command) == ()


def test_a_word_holding_cd_is_no_directory_change() -> None:
    written = WrittenFile("f.txt", "write", "x\n")
    assert heredoc_writes("echo abcd && cat > f.txt << 'EOF'\nx\nEOF") == (written,)
    # every directory change named before: still after a cd
    assert heredoc_writes("pushd a; popd; cd b && cat > f.txt << 'EOF'\nx\nEOF") == ()


def test_a_here_document_with_no_command_before_it_writes_nothing() -> None:
    assert heredoc_writes("ls; <<EOF\nx\nEOF") == ()


def test_tee_appends_with_its_append_option_and_writes_one_file_only() -> None:
    for option in ("-a", "--append"):
        command = f"tee {option} log.txt << 'EOF'\nx\nEOF"
        assert heredoc_writes(command) == (WrittenFile("log.txt", "append"),), option
    assert heredoc_writes("tee a.txt b.txt << 'EOF'\nx\nEOF") == ()
    assert heredoc_writes("tee -a a.txt b.txt << 'EOF'\nx\nEOF") == ()


def test_sed_in_place_edits_of_unsplittable_and_piped_commands() -> None:
    assert in_place_edits("sed -i 's/a/b f.py") == ()  # an open quote: no words
    assert in_place_edits("sed -i 's/a/b/' f.py | tee log") == (WrittenFile("f.py", "edit"),)


def test_sed_in_place_edit_files_are_its_operands_but_the_script() -> None:
    edit = WrittenFile("x.py", "edit")
    # the script before the option is still the first operand
    assert in_place_edits("sed 's/a/b/g' -i x.py") == (edit,)
    # a script given by -e is no operand, and the word after it is a file
    assert in_place_edits("sed -i -e 's/a/b/g' x.py") == (edit,)
    assert in_place_edits("sed -i -e 's/a/b/g' -e 's/c/d/g' x.py") == (edit,)
    assert in_place_edits("sed -i -f fix.sed x.py") == (edit,)


def test_words_after_a_double_dash_are_files_even_when_they_look_like_options() -> None:
    assert shell_reads("tail -- +notes.md") == (ShellRead("+notes.md", False),)


def test_sed_prints_with_its_script_after_e_and_only_one_script() -> None:
    assert shell_reads("sed -n -e '1,5p' f.py") == (ShellRead("f.py", False),)
    assert shell_reads("sed -e '1,5p' -n f.py") == (ShellRead("f.py", False),)
    # a second script is not read as a file
    assert shell_reads("sed -n -e '1,5p' -e '9p' f.py") == ()
    assert shell_reads("sed -n '1,5p' f.py '*.py'") == ()


def test_a_pipe_into_nothing_or_into_a_sed_edit_of_the_text_is_no_read() -> None:
    assert shell_reads("cat a.py |") == ()
    assert shell_reads("cat a.py | sed 's/x/y/'") == ()  # the text shown is changed
    assert shell_reads("cat a.py | sed -n '2,4p'") == (ShellRead("a.py", False),)


def test_an_assignment_before_a_program_that_reads_no_file_is_no_read() -> None:
    assert shell_reads("LC_ALL=C python tail.py") == ()
    assert shell_reads("LC_ALL=C cat run.py") == (ShellRead("run.py", True),)


def test_a_begin_patch_marker_given_to_no_apply_patch_leaves_the_reads() -> None:
    command = "grep -c '*** Begin Patch' p.diff && cat p.diff"
    assert shell_reads(command) == (ShellRead("p.diff", False),)


def test_an_exit_code_that_is_no_integer_is_no_exit_code() -> None:
    for code in ("true", '"1"', "1.0", "null"):
        text = f'{{"output": "x", "metadata": {{"exit_code": {code}}}}}'
        assert unwrap_output(text) == ("x", None), code
    assert unwrap_output('{"output": "x", "metadata": {"exit_code": 2}}') == ("x", 2)


def test_a_context_header_finds_an_indented_line() -> None:
    change = _update("@@     def m(self):", "-        x = 1", "+        x = 2", "*** End Patch")
    assert change.hunks[0].context == "def m(self):"
    before = "x = 1\nclass A:\n    def m(self):\n        x = 1\n"
    assert change.applied_to(before) == "x = 1\nclass A:\n    def m(self):\n        x = 2\n"


def test_a_hunk_that_stands_nowhere_leaves_the_text_unknown() -> None:
    change = _update("@@", "-z", "+Z", "*** End Patch")
    assert change.applied_to("a\nb") is None
    assert change.applied_to("a\nz") == "a\nZ"  # its line is the last one, with no line end


def test_a_patch_that_adds_a_line_holding_the_end_marker_is_not_cut_there() -> None:
    text = "*** Begin Patch\n*** Add File: notes.md\n+*** End Patch\n+after\n*** End Patch"
    assert patches_in_command(shlex.join(["apply_patch", text])) == [text]
    assert patch_writes(text) == (WrittenFile("notes.md", "add", "*** End Patch\nafter\n"),)
