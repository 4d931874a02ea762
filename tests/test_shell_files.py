"""Files of shell-driven agents: apply_patch texts, shell reads, here-document writes, Codex
output envelopes, and what facts, recorded files and command results make of them."""

from __future__ import annotations

import itertools
import json
import shlex
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.compaction.command_results import (
    command_segments,
    commits_in,
    failure_excerpt,
    outcome_line,
)
from unbounded.compaction.facts import extract_facts
from unbounded.compaction.recorded_files import recorded_files
from unbounded.model.entries import Entry
from unbounded.model.shell_files import (
    Hunk,
    WrittenFile,
    heredoc_writes,
    in_place_edits,
    parse_patch,
    patches_in_command,
    shell_reads,
    unwrap_output,
    without_heredocs,
)
from unbounded.model.tools import (
    file_read_path,
    file_read_paths,
    file_write_path,
    file_write_paths,
    file_writes,
)

PATCH = (
    "*** Begin Patch\n"
    "*** Add File: pkg/new.py\n"
    "+def made() -> int:\n"
    "+    return 1\n"
    "*** Update File: pkg/old.py\n"
    "*** Move to: pkg/renamed.py\n"
    "@@ def f():\n"
    " a = 1\n"
    "-b = 2\n"
    "+b = 3\n"
    "*** End of File\n"
    "*** Delete File: pkg/gone.py\n"
    "*** End Patch"
)


def _shell(command: str, call_id: str = "c1", name: str = "shell") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"command": command}}


# -- the patch parser -------------------------------------------------------------------------


def test_a_patch_gives_each_file_with_its_action_text_and_hunks() -> None:
    added, updated, deleted = parse_patch(PATCH)
    assert added == WrittenFile("pkg/new.py", "add", "def made() -> int:\n    return 1\n")
    assert updated == WrittenFile(
        "pkg/old.py", "update", hunks=(Hunk(("a = 1", "b = 2"), ("a = 1", "b = 3"), "def f():"),),
        moved_to="pkg/renamed.py",
    )  # fmt: skip
    assert updated.paths == ("pkg/old.py", "pkg/renamed.py")
    assert deleted == WrittenFile("pkg/gone.py", "delete")


def test_hunks_apply_in_order_and_an_unfound_hunk_makes_the_text_unknown() -> None:
    (change,) = parse_patch(
        "*** Begin Patch\n*** Update File: f\n@@\n x\n-y\n+Y\n@@\n-z\n+Z\n*** End Patch"
    )
    assert change.applied_to("x\ny\nq\nz\n") == "x\nY\nq\nZ\n"
    assert change.applied_to("x\nq\n") is None
    assert change.applied_to(None) is None
    # a hunk of added lines only has nothing to be placed by
    (bare,) = parse_patch("*** Begin Patch\n*** Update File: f\n@@\n+new\n*** End Patch")
    assert bare.applied_to("old\n") is None


@given(st.text())
@settings(max_examples=300, deadline=None)
def test_the_parser_never_raises(text: str) -> None:
    for found in parse_patch(text):
        assert found.action in ("add", "update", "delete")
    patches_in_command(text)
    heredoc_writes(text)
    shell_reads(text)


_PATH = st.from_regex(r"\A[a-z]{1,8}(/[a-z_]{1,8}){0,2}\.(py|md|json)\Z")
_LINE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)
_FILE = st.tuples(st.sampled_from(["add", "update", "delete"]), _PATH, st.lists(_LINE, max_size=5))


@given(st.lists(_FILE, max_size=6, unique_by=lambda f: f[1]))
@settings(max_examples=200, deadline=None)
def test_a_generated_patch_gives_its_files_back(files: list[tuple[str, str, list[str]]]) -> None:
    lines = ["*** Begin Patch"]
    for action, path, body in files:
        lines.append(f"*** {action.capitalize()} File: {path}")
        if action == "add":
            lines += [f"+{line}" for line in body]
        elif action == "update":
            lines += ["@@", *(f"-{line}" for line in body), *(f"+{line}!" for line in body)]
    lines.append("*** End Patch")
    text = "\n".join(lines)
    found = parse_patch(text)
    assert [(f.action, f.path) for f in found] == [(a, p) for a, p, _ in files]
    for written, (action, _, body) in zip(found, files, strict=True):
        if action == "add":
            assert written.text == "".join(f"{line}\n" for line in body)
        if action == "update" and body:
            assert written.hunks == (Hunk(tuple(body), tuple(f"{line}!" for line in body)),)
    # the same patch inside a shell command, quoted as Codex's importer joins an argv
    assert patches_in_command(shlex.join(["apply_patch", text])) == [text]


def test_patches_are_found_in_here_documents_and_quoted_arguments_of_apply_patch() -> None:
    heredoc = f"apply_patch << 'PATCH'\n{PATCH}\nPATCH"
    assert patches_in_command(heredoc) == [PATCH]
    quoted = shlex.join(["apply_patch", PATCH.replace("a = 1", "a = 'one'")])
    assert "'\"'\"'" in quoted
    assert patches_in_command(quoted) == [PATCH.replace("a = 1", "a = 'one'")]
    # a patch text that no apply_patch is given is no patch applied
    assert patches_in_command(f"cat notes.md # {PATCH}") == []
    assert patches_in_command(PATCH) == []


def test_the_patch_tool_and_a_shell_apply_patch_are_writes_of_every_file() -> None:
    tool = {"type": "tool_use", "id": "p", "name": "apply_patch", "input": {"input": PATCH}}
    expected = ("pkg/new.py", "pkg/old.py", "pkg/renamed.py", "pkg/gone.py")
    assert file_write_paths(tool) == expected
    assert file_write_path(tool) == "pkg/new.py"
    shell = _shell(f"mkdir -p pkg && apply_patch << 'PATCH'\n{PATCH}\nPATCH")
    assert file_write_paths(shell) == expected
    assert file_write_path(shell) == "pkg/new.py"
    # after a cd its paths name another directory's files
    assert file_write_paths(_shell(f"cd repo && apply_patch << 'PATCH'\n{PATCH}\nPATCH")) == ()
    assert file_write_paths(_shell("git status")) == ()
    assert file_write_path(_shell("git status")) is None


# -- here-documents ---------------------------------------------------------------------------


def test_here_document_writes() -> None:
    assert heredoc_writes("cat > src/a.py << 'EOF'\nx = 1\nEOF") == (
        WrittenFile("src/a.py", "write", "x = 1\n"),
    )
    assert heredoc_writes("mkdir -p d && cat <<EOF > d/b.txt\nhi\nEOF\nls d") == (
        WrittenFile("d/b.txt", "write", "hi\n"),
    )
    assert heredoc_writes("cat >> log.txt <<EOF\nmore\nEOF") == (WrittenFile("log.txt", "append"),)
    assert heredoc_writes("tee conf.ini <<-END\n\tk=v\n\tEND") == (
        WrittenFile("conf.ini", "write", "k=v\n"),
    )
    # feeding a program is no file write
    assert heredoc_writes("python - <<'PY'\nopen('x','w').write('y')\nPY") == ()
    assert heredoc_writes("cat <<EOF\nshown only\nEOF") == ()
    assert heredoc_writes("cat > *.py <<EOF\nx\nEOF") == ()
    written = _shell("cat > notes.md << 'EOF'\n# Notes\nEOF", name="bash")
    assert file_write_paths(written) == ("notes.md",)
    # a Claude-Code-like single path stays the file tools' (a here-document is no such tool)
    assert file_write_path(written) is None


def test_a_here_document_body_is_data_not_commands() -> None:
    command = "cat > run.sh << 'EOF'\ncat secrets.txt\nsed -n '1,2p' x.py\nEOF\ncat run.sh"
    assert without_heredocs(command) == "cat > run.sh << 'EOF'\n\ncat run.sh"
    assert [read.path for read in shell_reads(command)] == ["run.sh"]


# -- shell reads ------------------------------------------------------------------------------


def _reads(command: str) -> list[str]:
    return [read.path for read in shell_reads(command)]


def test_shell_reads_of_file_paths() -> None:
    assert _reads("cat README.md") == ["README.md"]
    assert _reads("cat -n a.py b.py") == ["a.py", "b.py"]
    assert _reads("sed -n '1,200p' opk/cli/__main__.py") == ["opk/cli/__main__.py"]
    assert _reads("sed -n '5p;9,$p' f.txt") == ["f.txt"]
    assert _reads("nl -ba -w1 -s': ' -v1 schemas/pdl.json | sed -n '70,110p'") == [
        "schemas/pdl.json"
    ]
    assert _reads("head -n 20 log.txt") == ["log.txt"]
    assert _reads("tail -50 log.txt 2>/dev/null") == ["log.txt"]
    assert _reads("less +10 notes.md") == ["notes.md"]
    assert _reads("ls -la && sed -n '1,80p' a.md && cat b.md | wc -l") == ["a.md", "b.md"]
    assert _reads("LC_ALL=C cat a.txt") == ["a.txt"]


def test_what_is_no_shell_read() -> None:
    for command in (
        "cat > f.txt",  # a write
        "cat f.txt > g.txt",  # a copy
        "cat a.txt >> b.txt",
        "sed -i 's/a/b/' f.py",  # an edit
        "sed -n -i '1,5p' f.py",  # prints into the file: a write
        "sed -n 's/a/b/p' f.py",  # a substitution shown
        "sed 's/a/b/' f.py",
        "sed '1,5p' f.py",  # without -n every line is shown: not what the agent read
        "cat *.py",  # a glob
        "cat $FILE",  # a variable
        "cat ~/notes",
        "cat src/",
        "cat",  # stdin
        "cat -",
        "cat f.txt | tee copy.txt",  # piped into a write
        "cat f.txt | sh",
        "cat f.txt | sed -i 's/a/b/' g",
        "cd sub && cat f.txt",  # another directory
        "echo hi | cat",
        "cat < f.txt",
        "grep -n x f.py",
        "git show HEAD:f.py",
        "cat 'unclosed",
        "(cat f.txt)",
        "cat f.txt &",
    ):
        assert _reads(command) == [], command


def test_a_shell_read_is_whole_only_for_a_plain_cat_of_one_file() -> None:
    assert [r.whole for r in shell_reads("cat a.py")] == [True]
    assert [r.whole for r in shell_reads("cat -n a.py")] == [False]
    assert [r.whole for r in shell_reads("cat a.py | head")] == [False]
    assert [r.whole for r in shell_reads("sed -n '1,9p' a.py")] == [False]


def test_file_read_paths_add_shell_reads_but_file_read_path_stays_the_tools() -> None:
    block = _shell("sed -n '1,200p' README.md", name="exec_command")
    assert file_read_paths(block) == ("README.md",)
    assert file_read_path(block) is None  # Claude Code restores only its tools' reads
    read = {"type": "tool_use", "id": "r", "name": "Read", "input": {"file_path": "/a.py"}}
    assert file_read_paths(read) == ("/a.py",)
    assert (
        file_read_paths({"type": "tool_use", "name": "Grep", "input": {"command": "cat x"}}) == ()
    )


def test_command_segments_is_still_importable_from_command_results() -> None:
    assert command_segments("a && b; c") == ["a", "b", "c"]


# -- output envelopes -------------------------------------------------------------------------


def _envelope(output: str, code: int) -> str:
    return json.dumps({"output": output, "metadata": {"exit_code": code, "duration_seconds": 1}})


def test_unwrap_output_reads_both_codex_envelopes() -> None:
    assert unwrap_output(_envelope("34 passed\n", 0)) == ("34 passed\n", 0)
    assert unwrap_output("Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom\n") == ("boom\n", 2)
    assert unwrap_output("Exit code: 0\nOutput:\nok") == ("ok", 0)
    assert unwrap_output('{"output": 3}') == ('{"output": 3}', None)
    assert unwrap_output('{"output": "x"') == ('{"output": "x"', None)
    assert unwrap_output("plain text") == ("plain text", None)
    tagged = "<returncode>1</returncode>\n<output>\nF.\n1 failed\n</output>"
    assert unwrap_output(tagged) == ("F.\n1 failed\n", 1)
    # a truncated mini-swe-agent output (a warning, head and tail) is left as it is
    warned = "<returncode>0</returncode>\n<warning>long</warning>\n<output_head>a</output_head>"
    assert unwrap_output(warned) == (warned, None)
    trailing = "<returncode>0</returncode>\n<output>\na\n</output>\n<note>more</note>"
    assert unwrap_output(trailing) == (trailing, None)
    assert unwrap_output("Exit code: 1 but no header") == ("Exit code: 1 but no header", None)


def test_command_results_read_the_output_inside_the_envelope() -> None:
    passed = _envelope("....\n34 passed in 0.38s\n", 0)
    assert failure_excerpt(passed, flagged=False, command="pytest -q") == ""
    assert outcome_line(passed, "") == "34 passed in 0.38s"
    failed = _envelope("F.\nE   assert 1 == 2\n1 failed, 1 passed\n", 1)
    assert failure_excerpt(failed, flagged=False, command="pytest -q").startswith("F.")
    # a non-zero exit code is a failure even when the output says nothing telling
    quiet = _envelope("", 1)
    assert failure_excerpt(quiet, flagged=False, command="make build") == "exit code 1"
    texted = "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nsomething odd\n"
    assert failure_excerpt(texted, flagged=False, command="./run.sh") == "something odd"
    quiet_exec = "Wall time: 0.1 seconds\nProcess exited with code 3\nOutput:\n"
    assert failure_excerpt(quiet_exec, flagged=False, command="make") == "exit code 3"
    commit = _envelope("[main 225c5a1] cli: add rules\n 3 files changed, 70 insertions(+)\n", 0)
    (found,) = commits_in(commit)
    assert (found.branch, found.sha, found.message) == ("main", "225c5a1", "cli: add rules")
    assert found.stat == "3 files changed, 70 insertions(+)"


# -- facts and recorded files -----------------------------------------------------------------

_ids = itertools.count()


def _call(command: str, output: str, *, error: bool = False) -> list[Entry]:
    call_id = f"call_{next(_ids)}"
    use = Entry.assistant([_shell(command, call_id)])
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if error:
        result["is_error"] = True
    return [use, Entry.user([result])]


def test_facts_count_patched_and_shell_read_files() -> None:
    entries = [
        *_call("sed -n '1,200p' README.md", _envelope("# Title\n", 0)),
        *_call(shlex.join(["apply_patch", PATCH]), _envelope("Success.", 0)),
        *_call("cat > notes.md << 'EOF'\nhi\nEOF", _envelope("", 0)),
    ]
    facts = extract_facts(entries)
    assert facts.files_read == ("README.md",)
    assert facts.files_modified == (
        "pkg/new.py", "pkg/old.py", "pkg/renamed.py", "pkg/gone.py", "notes.md",
    )  # fmt: skip


def test_recorded_files_follow_patches_reads_and_here_documents() -> None:
    update = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    entries = [
        *_call("cat app.py", _envelope("x = 1\ny = 0\n", 0)),
        *_call("cat pkg/old.py", _envelope("def f():\na = 1\nb = 2\n", 0)),
        *_call(f"apply_patch << 'PATCH'\n{update}\nPATCH", _envelope("Success.", 0)),
        *_call(shlex.join(["apply_patch", PATCH]), "Exit code: 0\nOutput:\nSuccess."),
        *_call("cat > notes.md << 'EOF'\nhi\nEOF", _envelope("", 0)),
        *_call("sed -n '1,2p' long.md", _envelope("one\ntwo\n", 0)),
    ]
    files = recorded_files(entries)
    assert files["app.py"].text == "x = 2\ny = 0\n"
    assert (files["app.py"].partial, files["long.md"].partial) == (False, True)
    assert files["pkg/new.py"].text == "def made() -> int:\n    return 1\n"
    assert files["notes.md"].text == "hi\n"
    assert files["long.md"].text == "one\ntwo\n"
    # moved, with its hunk applied
    assert files["pkg/renamed.py"].text == "def f():\na = 1\nb = 3\n"
    assert "pkg/old.py" not in files and "pkg/gone.py" not in files


def test_recorded_files_skip_failed_calls_and_reads_of_several_files() -> None:
    entries = [
        *_call("cat a.py", _envelope("a = 1\n", 0)),
        *_call("cat a.py", _envelope("cat: a.py: denied", 1)),  # exit code: not its text
        *_call("cat a.py b.py", _envelope("a = 9\nb = 9\n", 0)),  # two files: not one text
        *_call(
            "apply_patch << 'P'\n*** Begin Patch\n*** Delete File: a.py\n*** End Patch\nP",
            "error: sandbox denied",
            error=True,
        ),
    ]
    assert recorded_files(entries)["a.py"].text == "a = 1\n"


def test_file_writes_list_patches_then_here_documents() -> None:
    command = f"apply_patch << 'PATCH'\n{PATCH}\nPATCH\ncat > z.txt << 'EOF'\nz\nEOF"
    assert [w.path for w in file_writes(_shell(command))] == [
        "pkg/new.py", "pkg/old.py", "pkg/gone.py", "z.txt",
    ]  # fmt: skip


# -- in-place edits and SWE-agent text commands -----------------------------------------------


def test_sed_in_place_edits_are_writes_of_unknown_text() -> None:
    block = _shell("sed -i '1i import re' lib/text.py && pytest -q", name="bash")
    assert file_writes(block) == (WrittenFile("lib/text.py", "edit"),)
    assert file_write_paths(_shell("sed -i.bak -e 's/a/b/' -e 's/c/d/' x.py y.py")) == (
        "x.py",
        "y.py",
    )
    assert file_write_paths(_shell("sed -n '1p' f.py")) == ()
    assert file_write_paths(_shell("sed -n '1,5p' f.py && grep -i x g.py")) == ()
    assert file_write_paths(_shell("sed -i 's/a/b/' *.py")) == ()
    entries = [
        *_call("cat lib/text.py", _envelope("def slugify(s): ...\n", 0)),
        *_call("sed -i '1i import re' lib/text.py", _envelope("", 0)),
    ]
    # the copy read before is stale: never restored as current
    assert recorded_files(entries)["lib/text.py"].text is None


def test_swe_agent_open_and_create_name_their_file() -> None:
    def command(name: str, line: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": "s", "name": name, "input": {"command": line}}

    assert file_read_path(command("open", "open pydicom/handler.py 293\n")) == "pydicom/handler.py"
    assert file_write_path(command("create", "create reproduce_bug.py\n")) == "reproduce_bug.py"
    assert file_write_path(command("edit", "edit 1:1\nimport numpy")) is None
    assert file_read_path(command("open", "goto 20")) is None
    assert file_write_path(command("create", "create")) is None


def test_a_cat_whose_output_codex_cut_is_not_the_whole_file() -> None:
    cut = "a\n[... omitted 4 of 260 lines ...]\nz\n"
    entries = [
        *_call("cat big.py", _envelope(cut, 0)),
        *_call("cat small.py", _envelope("a\n[... omitted 0 of 2 lines ...]\nb\n", 0)),
    ]
    files = recorded_files(entries)
    assert (files["big.py"].partial, files["small.py"].partial) == (True, False)


# -- review rev17c: the rules around its fixes ------------------------------------------------


def test_only_stderr_sent_away_keeps_a_read() -> None:
    assert _reads("cat a.py 2>&1") == ["a.py"]
    assert _reads("cat a.py 1>/dev/null") == []
    assert _reads("cat a.py 1>&2") == []  # the file goes to stderr: not the output shown


def test_a_here_document_keeps_its_text_when_quoted_or_free_of_expansions() -> None:
    body = "cost=$HOME `id` \\$\n"
    for head in ("<< 'EOF'", '<< "EOF"', "<< \\EOF"):
        assert heredoc_writes(f"cat > f.txt {head}\n{body}EOF") == (
            WrittenFile("f.txt", "write", body),
        )
    # a lone `$` and a backslash before another letter are kept as they are
    assert heredoc_writes("cat > f.txt << EOF\nprice: 5 $ \\n\nEOF") == (
        WrittenFile("f.txt", "write", "price: 5 $ \\n\n"),
    )
    for expanded in ("a=${X}", "b=$(date)", "c=`date`", "d=\\$HOME", "e=$1"):
        (written,) = heredoc_writes(f"cat > f.txt << EOF\n{expanded}\nEOF")
        assert written.text is None
        assert written.applied_to("old\n") is None


def test_a_tab_stripping_here_document_strips_only_leading_tabs() -> None:
    (written,) = heredoc_writes("cat > f.py <<-EOF\n\t\tif x:\n\t\t    y\n\tEOF\n")
    assert written.text == "if x:\n    y\n"


def test_writes_before_a_cd_stay_and_those_after_it_go() -> None:
    command = "cat > a.txt << 'EOF'\n1\nEOF\ncd sub\ncat > b.txt << 'EOF'\n2\nEOF"
    assert heredoc_writes(command) == (WrittenFile("a.txt", "write", "1\n"),)
    assert heredoc_writes("pushd sub && tee b.txt << 'EOF'\n2\nEOF") == ()
    assert in_place_edits("sed -i 's/a/b/' a.py && cd sub && sed -i 's/a/b/' b.py") == (
        WrittenFile("a.py", "edit"),
    )
    patch = "*** Begin Patch\n*** Delete File: x.py\n*** End Patch"
    assert patches_in_command(f"cd sub && apply_patch '{patch}'") == [patch]  # still no commands
    shell = _shell(f"cd sub && apply_patch '{patch}'")
    assert file_writes(shell) == ()


def test_a_hunk_context_header_that_is_not_found_makes_the_text_unknown() -> None:
    (update,) = parse_patch(
        "*** Begin Patch\n*** Update File: f.py\n@@ def h():\n-x\n+y\n*** End Patch"
    )
    assert update.applied_to("def g():\nx\n") is None
    assert update.applied_to("def h():\nx\n") == "def h():\ny\n"
    # the hunk after the context line, not the one before it
    assert update.applied_to("x\ndef h():\nx\n") == "x\ndef h():\ny\n"


def test_a_command_that_exits_non_zero_leaves_its_other_writes_unknown() -> None:
    entries = [
        *_call("cat notes.md", _envelope("old\n", 0)),
        *_call("cat app.py", _envelope("x = 1\n", 0)),
        *_call("cat > notes.md << 'EOF'\nnew\nEOF\npython run.py", _envelope("boom", 1)),
        *_call("sed -i 's/1/2/' app.py; false", _envelope("", 1)),
    ]
    files = recorded_files(entries)
    assert files["notes.md"].text is None  # it may have been written before the failure
    assert files["app.py"].text is None


def test_exec_command_headers_give_the_output_and_its_exit_code() -> None:
    header = "Chunk ID: 4f2a\nWall time: 0.0500 seconds\nProcess exited with code 2\n"
    assert unwrap_output(f"{header}Original token count: 3\nOutput:\nboom\n") == ("boom\n", 2)
    assert unwrap_output("Process exited with code 0\nOutput:\nok") == ("ok", 0)
    running = "Wall time: 1.0 seconds\nProcess running with session ID 7\nOutput:\nhalf"
    assert unwrap_output(running) == (running, None)
    entries = [
        *_call("cat a.py", _envelope("a = 1\n", 0)),
        *_call("cat a.py", "Process exited with code 1\nOutput:\ncat: a.py: denied\n"),
    ]
    assert recorded_files(entries)["a.py"].text == "a = 1\n"


def test_a_read_among_other_commands_is_partial() -> None:
    assert [read.whole for read in shell_reads("cat a.py")] == [True]
    assert [read.whole for read in shell_reads("cat a.py; echo done")] == [False]
    assert [read.whole for read in shell_reads("cat > b << 'EOF'\nx\nEOF\ncat a.py")] == [False]


def test_a_quoted_patch_line_that_holds_a_shell_quote_escape_stays_as_written() -> None:
    patch = "*** Begin Patch\n*** Add File: a.sh\n+echo 'it'\\''s'\n*** End Patch"
    assert patches_in_command(shlex.join(["apply_patch", patch])) == [patch]
