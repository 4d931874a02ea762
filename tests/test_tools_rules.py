"""Rules of model/tools.py, each held by a test that fails when the rule is flipped: which
file a tool call reads or writes and which command it runs, across agents' vocabularies."""

from __future__ import annotations

from typing import Any

from unbounded.model.shell_files import ShellRead, WrittenFile
from unbounded.model.tools import (
    file_read_path,
    file_read_paths,
    file_shell_reads,
    file_write_path,
    file_write_paths,
    file_writes,
    shell_command,
)

PATCH = "*** Begin Patch\n*** Add File: a.py\n+x\n*** Delete File: b.py\n*** End Patch"


def _use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "t", "name": name, "input": tool_input}


def test_the_path_keys_are_read_in_order_and_an_empty_one_is_skipped() -> None:
    assert file_read_path(_use("Read", file_path="a.py", path="b.py")) == "a.py"
    assert file_read_path(_use("Read", file_path="", path="b.py")) == "b.py"
    assert file_read_path(_use("Read", file_path=3, notebook_path="n.ipynb")) == "n.ipynb"
    assert file_write_path(_use("Write", filename="w.txt")) == "w.txt"
    assert file_read_path(_use("Read")) is None


def test_an_input_that_is_no_mapping_names_no_file() -> None:
    block = {"type": "tool_use", "id": "t", "name": "Read", "input": "a.py"}
    assert file_read_path(block) is None
    assert shell_command({"type": "tool_use", "name": "bash", "input": ["ls"]}) is None


def test_an_editor_tool_reads_on_view_and_writes_on_its_edit_commands() -> None:
    view = _use("str_replace_editor", command="view", path="/r/a.py")
    assert file_read_path(view) == "/r/a.py"
    assert file_write_path(view) is None
    for command in ("create", "str_replace", "insert", "undo_edit", "write"):
        edit = _use("str_replace_based_edit_tool", command=command, path="/r/b.py")
        assert file_write_path(edit) == "/r/b.py", command
        assert file_write_paths(edit) == ("/r/b.py",), command
        assert file_read_path(edit) is None, command
    assert file_read_path(_use("str_replace_editor", command="find", path="/r/c.py")) is None
    assert file_write_path(_use("editor", command="find", path="/r/c.py")) is None


def test_a_text_command_names_its_file_only_when_it_is_that_command() -> None:
    assert file_read_path(_use("open", command='open "src/a.py" 20')) == "src/a.py"
    assert file_read_path(_use("open", command="open 'x.py'")) == "x.py"
    assert file_read_path(_use("open", command="open ''")) is None  # quotes round nothing
    assert file_read_path(_use("open", command="create x.py")) is None
    # a declared path wins over the command line
    assert file_read_path(_use("open", path="p.py", command="open q.py")) == "p.py"
    # a read tool that is no text command reads only its declared path
    assert file_read_path(_use("read_file", command="open q.py")) is None
    assert file_write_path(_use("write_file", command="create q.py")) is None
    assert file_write_path(_use("create", command=["create", "q.py"])) is None


def test_the_patch_tool_reads_its_patch_from_the_first_key_that_holds_one() -> None:
    other = "*** Begin Patch\n*** Delete File: z.py\n*** End Patch"
    assert file_write_paths(_use("apply_patch", input=PATCH, patch=other)) == ("a.py", "b.py")
    assert file_write_paths(_use("applypatch", input="", patch=other)) == ("z.py",)
    assert file_write_paths(_use("apply_patch", input=5, raw=other)) == ("z.py",)
    assert file_write_paths(_use("apply_patch", command=other)) == ()
    assert file_writes(_use("apply_patch", input=PATCH)) == (
        WrittenFile("a.py", "add", "x\n"),
        WrittenFile("b.py", "delete"),
    )


def test_a_shell_command_without_a_patch_marker_applies_no_patch() -> None:
    # the patch's lines without `*** Begin Patch` are no patch a shell command gives
    loose = "apply_patch << 'P'\n*** Delete File: a.py\nP"
    assert file_writes(_use("bash", command=loose)) == ()
    assert file_write_path(_use("bash", command=loose)) is None


def test_file_writes_of_a_shell_command_add_here_documents_and_sed_edits_after_patches() -> None:
    command = f"apply_patch << 'P'\n{PATCH}\nP\nsed -i 's/a/b/' c.py\ncat > d.txt << 'E'\nd\nE"
    assert file_writes(_use("exec_command", cmd=command)) == (
        WrittenFile("a.py", "add", "x\n"),
        WrittenFile("b.py", "delete"),
        WrittenFile("d.txt", "write", "d\n"),
        WrittenFile("c.py", "edit"),
    )
    # a tool that runs no command writes nothing here (a file tool's write is the singular)
    assert file_writes(_use("Write", file_path="w.py", command="sed -i 's/a/b/' c.py")) == ()


def test_file_write_paths_name_each_file_once_and_a_move_twice() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n"
        "*** Update File: a.py\n@@\n-y\n+z\n*** End Patch"
    )
    assert file_write_paths(_use("apply_patch", input=patch)) == ("a.py", "b.py")
    # a declared write path is the only one, whatever the command holds
    assert file_write_paths(_use("Edit", file_path="e.py", command=f"apply_patch '{PATCH}'")) == (
        "e.py",
    )


def test_shell_reads_come_only_from_shell_tools() -> None:
    assert file_shell_reads(_use("bash", command="cat a.py")) == (ShellRead("a.py", True),)
    assert file_shell_reads(_use("Grep", command="cat a.py")) == ()
    assert file_read_paths(_use("run", command="cat a.py b.py a.py")) == ("a.py", "b.py")
    assert file_read_paths(_use("Read", file_path="r.py")) == ("r.py",)
    assert file_read_paths(_use("Read")) == ()


def test_the_command_is_read_from_the_first_key_that_holds_one() -> None:
    assert shell_command(_use("Bash", command="ls", cmd="pwd")) == "ls"
    assert shell_command(_use("exec_command", command="", cmd="pwd")) == "pwd"
    assert shell_command(_use("execute_bash", command=["ls"], code="x = 1")) == "x = 1"
    assert shell_command(_use("container.exec")) is None
    assert shell_command(_use("Read", command="ls")) is None
