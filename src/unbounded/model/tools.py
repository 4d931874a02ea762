"""What a tool call does to files and the shell, across agents' tool vocabularies.

Claude Code names its tools Read, Write, Edit, MultiEdit, NotebookEdit, Bash…; SWE-agent and
OpenHands use an editor tool with a `command` (view, create, str_replace, insert) and shell
tools under other names, and Codex CLI a `shell` tool (whose argv our importer joins into one
`command` string) or `exec_command`. These helpers read a tool_use block and say which file it
read or wrote and which command it ran, whatever the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def _path(tool_input: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
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
        return _path(tool_input)
    if name in EDITOR_TOOLS and _command(tool_input) == "view":
        return _path(tool_input)
    return None


def file_write_path(block: Mapping[str, Any]) -> str | None:
    """The file a tool_use creates or modifies (Write, Edit, an editor's str_replace…)."""
    name = block.get("name")
    tool_input = _input(block)
    if name in WRITE_TOOLS:
        return _path(tool_input)
    if name in EDITOR_TOOLS and _command(tool_input) in EDITOR_WRITE_COMMANDS:
        return _path(tool_input)
    return None


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
