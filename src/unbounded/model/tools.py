"""What a tool call does to files and the shell, across agents' tool vocabularies.

Claude Code names its tools Read, Write, Edit, MultiEdit, NotebookEdit, Bash…; SWE-agent and
OpenHands use an editor tool with a `command` (view, create, str_replace, insert) and shell
tools under other names, and Codex CLI a `shell` tool (whose argv our importer joins into one
`command` string) or `exec_command`, and edits files with `apply_patch` (its own tool, or a
shell command: `unbounded.model.shell_files`). These helpers read a tool_use block and say which
file it read or wrote and which command it ran, whatever the agent.

The one-path functions (`file_read_path`, `file_write_path`) name the file a file tool
declares (SWE-agent's `open <path>` and `create <path>` text commands included), and a
patch's first file; the plural ones (`file_read_paths`, `file_write_paths`) add every file of
a patch and what shell commands read (`cat f`, `sed -n 'a,bp' f`…), write from a
here-document or edit with `sed -i`. Claude Code restores after a compaction only the files
its own tools read or wrote, so those that follow it take the singular ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from unbounded.model.shell_files import (
    PATCH_TOOLS,
    ShellRead,
    WrittenFile,
    command_patch_writes,
    heredoc_writes,
    in_place_edits,
    patch_writes,
    shell_reads,
)

READ_TOOLS = frozenset({"Read", "read_file", "ReadFile", "view_file", "open", "read"})
WRITE_TOOLS = frozenset(
    {
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "write_file",
        "edit_file",
        "create",
        "edit",
        "write",
    }
)
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "editor"})
EDITOR_WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write"})
SHELL_TOOLS = frozenset(
    {"Bash", "bash", "execute_bash", "shell", "run", "run_command", "terminal", "execute_command"}
    # Codex CLI: shell (argv), container.exec, local_shell, shell_command and exec_command
    | {"container.exec", "local_shell", "shell_command", "exec_command"}
)
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename")
_PATH_FIRST_COMMANDS = frozenset({"open", "create"})
"""SWE-agent commands whose first argument is the file (`open`: a read, `create`: a write)."""


def _path(tool_input: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _text_command_path(name: object, tool_input: Mapping[str, Any]) -> str | None:
    """The path of a SWE-agent text command naming its file first (`open <path> [line]`,
    `create <path>`): the tool's input holds only that command line."""
    if name not in _PATH_FIRST_COMMANDS or _path(tool_input) is not None:
        return None
    command = _command(tool_input)
    words = command.split() if command else []
    if len(words) >= 2 and words[0] == name:
        return words[1].strip("\"'") or None
    return None


def _command(tool_input: Mapping[str, Any]) -> str | None:
    value = tool_input.get("command")
    return value if isinstance(value, str) else None


def _input(block: Mapping[str, Any]) -> Mapping[str, Any]:
    value = block.get("input")
    return value if isinstance(value, Mapping) else {}


def file_read_path(block: Mapping[str, Any]) -> str | None:
    """The file a tool_use reads (Read, an editor's view…), else None."""
    name = block.get("name")
    tool_input = _input(block)
    if name in READ_TOOLS:
        return _path(tool_input) or _text_command_path(name, tool_input)
    if name in EDITOR_TOOLS and _command(tool_input) == "view":
        return _path(tool_input)
    return None


def _declared_write_path(block: Mapping[str, Any], tool_input: Mapping[str, Any]) -> str | None:
    name = block.get("name")
    if name in WRITE_TOOLS:
        return _path(tool_input) or _text_command_path(name, tool_input)
    if name in EDITOR_TOOLS and _command(tool_input) in EDITOR_WRITE_COMMANDS:
        return _path(tool_input)
    return None


def _patch_writes(block: Mapping[str, Any]) -> tuple[WrittenFile, ...]:
    """The files an apply_patch call (the tool, or a shell command running it) changes."""
    if block.get("name") in PATCH_TOOLS:
        tool_input = _input(block)
        for key in ("input", "patch", "raw"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return patch_writes(value)
        return ()
    command = shell_command(block)
    if command is None or "*** Begin Patch" not in command:
        return ()
    return command_patch_writes(command)


def file_write_path(block: Mapping[str, Any]) -> str | None:
    """The file a tool_use creates or modifies (Write, Edit, an editor's str_replace…, the
    first file of an apply_patch)."""
    declared = _declared_write_path(block, _input(block))
    if declared is not None:
        return declared
    patched = _patch_writes(block)
    return patched[0].path if patched else None


def file_writes(block: Mapping[str, Any]) -> tuple[WrittenFile, ...]:
    """What an apply_patch call or a shell command writes, file by file (its patches, its
    here-documents, then its `sed -i` edits); empty for any other call (a file tool's write is
    `file_write_path`)."""
    patched = _patch_writes(block)
    command = shell_command(block)
    if command is None:
        return patched
    return (*patched, *heredoc_writes(command), *in_place_edits(command))


def file_write_paths(block: Mapping[str, Any]) -> tuple[str, ...]:
    """Every file a tool_use creates, modifies, moves or deletes: a file tool's, a patch's
    files, a shell command's here-document targets."""
    declared = _declared_write_path(block, _input(block))
    if declared is not None:
        return (declared,)
    return tuple(dict.fromkeys(path for written in file_writes(block) for path in written.paths))


def file_shell_reads(block: Mapping[str, Any]) -> tuple[ShellRead, ...]:
    """The files a shell tool_use shows (`cat f`, `sed -n '1,80p' f`, `nl -ba f`…)."""
    command = shell_command(block)
    return shell_reads(command) if command is not None else ()


def file_read_paths(block: Mapping[str, Any]) -> tuple[str, ...]:
    """Every file a tool_use reads: a file tool's, or those a shell command shows."""
    path = file_read_path(block)
    if path is not None:
        return (path,)
    return tuple(dict.fromkeys(read.path for read in file_shell_reads(block)))


def shell_command(block: Mapping[str, Any]) -> str | None:
    """The shell command a tool_use runs (Bash and equivalents), else None."""
    if block.get("name") not in SHELL_TOOLS:
        return None
    tool_input = _input(block)
    for key in ("command", "cmd", "code"):
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return None
