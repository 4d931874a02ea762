"""Which tools' results microcompaction may clear, across agents' tool vocabularies.

Seed 004 "Compactable Tools": only results that can be reproduced, or whose text is
disposable, are cleared — file reads (the file can be re-read), shell output (ephemeral),
grep/glob results (the search can be re-run), web fetches and searches (can be re-fetched) and
file edits/writes (the confirmation is disposable). Claude Code names these Read, Bash, Grep,
Glob, WebFetch, WebSearch, Edit and Write (seed 002 `pD5` COMPACTABLE_TOOLS). Results of every
other tool — questions to the user, todo and task tools, notebook edits, plan-mode switches,
sub-agent reports, MCP tools — are never cleared: their content may be unreproducible.

Other agents call the same tools by other names; an alias maps such a name to the canonical
tool whose rule it follows:

- SWE-agent, as named by `unbounded.transcripts.swe_agent` (`SWE_AGENT_COMMANDS`, and `bash`
  for any other action): open/goto/scroll_up/scroll_down/view/filemap read files;
  search_file/search_dir search (Grep); find_file finds files (Glob); create writes;
  edit/insert/str_replace_editor/undo_edit edit; bash runs a shell. `submit`, `exit_*`,
  `skip` and `review_on_submit` are not aliased: they end the run and must stay readable.
- OpenHands function-calling tools: execute_bash and execute_ipython_cell (shell-like
  output), str_replace_editor and edit_file (the editor; its `view` command reads, the others
  write), browser and web_read (web pages). Old CodeAct action types recorded as tool names
  (run, run_ipython, read, write, edit, browse, browse_interactive) are aliased the same way.
  `think`, `finish`, `delegate`, `task_tracking` and MCP calls are not.
- Codex CLI: shell, container.exec, local_shell, shell_command and exec_command run a shell;
  apply_patch edits files. `update_plan` (its todo list) and MCP calls are not aliased.

`CompactableTools.default()` is that registry; `with_tools`, `with_aliases` and `without`
return extended copies (the registry is immutable). Names are matched exactly (tool names are
case-sensitive in the API: `Bash` and `bash` are two names, both registered).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from unbounded.errors import ConfigError
from unbounded.model.tools import file_read_path

CLEARED_TOOL_RESULT = "[Old tool result content cleared]"
"""What a cleared tool result's content becomes (seeds 002, 003, 004)."""
_HANDLE_PREFIX = "[Old tool result content cleared — recall id="


def cleared_stub(tool_use_id: str | None = None) -> str:
    """The placeholder of a cleared result: the seeds' text, or, when the session offers the
    `recall` tool, that text naming the handle that brings the result back. It depends only on
    the id, so a result is cleared to the same bytes every turn (the cached prefix holds)."""
    if tool_use_id is None:
        return CLEARED_TOOL_RESULT
    return f"{_HANDLE_PREFIX}{tool_use_id}]"


def is_cleared_text(text: object) -> bool:
    """Whether a tool result's text is a cleared placeholder (with or without a handle)."""
    if not isinstance(text, str):
        return False
    return text == CLEARED_TOOL_RESULT or (text.startswith(_HANDLE_PREFIX) and text.endswith("]"))


DEFAULT_COMPACTABLE_TOOLS: tuple[str, ...] = (
    "Read",
    "Bash",
    "Grep",
    "Glob",
    "WebFetch",
    "WebSearch",
    "Edit",
    "Write",
)
"""Claude Code's compactable tools (seed 004 allowlist)."""

SWE_AGENT_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "open": "Read",
        "goto": "Read",
        "scroll_up": "Read",
        "scroll_down": "Read",
        "view": "Read",
        "filemap": "Read",
        "search_file": "Grep",
        "search_dir": "Grep",
        "find_file": "Glob",
        "create": "Write",
        "edit": "Edit",
        "insert": "Edit",
        "undo_edit": "Edit",
        "str_replace_editor": "Edit",
        "bash": "Bash",
    }
)
"""SWE-agent command names (as our importer writes them) -> the canonical tool."""

OPENHANDS_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "execute_bash": "Bash",
        "execute_ipython_cell": "Bash",
        "str_replace_editor": "Edit",
        "edit_file": "Edit",
        "browser": "WebFetch",
        "web_read": "WebFetch",
        # CodeAct action types recorded as tool names (no tool_call_metadata).
        "run": "Bash",
        "run_ipython": "Bash",
        "read": "Read",
        "write": "Write",
        "edit": "Edit",
        "browse": "WebFetch",
        "browse_interactive": "WebFetch",
    }
)
"""OpenHands tool and action names -> the canonical tool."""

CODEX_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "shell": "Bash",
        "container.exec": "Bash",
        "local_shell": "Bash",
        "shell_command": "Bash",
        "exec_command": "Bash",
        "apply_patch": "Edit",
    }
)
"""Codex CLI tool names (as `unbounded.transcripts.codex` writes them) -> the canonical tool."""

def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{what} must be a non-empty string, not {name!r}")
    return name


class CompactableTools:
    """An immutable registry: tool name -> the canonical compactable tool it stands for."""

    __slots__ = ("_lookup", "_saved")

    _lookup: Mapping[str, str]
    _saved: dict[str, Any]

    def __init__(
        self,
        tools: Iterable[str] = DEFAULT_COMPACTABLE_TOOLS,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(tools, str):
            raise ConfigError("tools must be an iterable of tool names, not a single string")
        lookup: dict[str, str] = {}
        for name in tools:
            checked = _check_name(name, "a compactable tool name")
            lookup[checked] = checked
        for alias, target in (aliases or {}).items():
            _check_name(alias, "an alias")
            _check_name(target, f"the target of alias {alias!r}")
            if target not in lookup or lookup[target] != target:
                raise ConfigError(
                    f"alias {alias!r} points to {target!r}, which is not a registered "
                    f"compactable tool (registered: {', '.join(sorted(self._canonical(lookup)))})"
                )
            if alias in lookup and lookup[alias] == alias and alias != target:
                raise ConfigError(f"{alias!r} is a compactable tool itself; it cannot be an alias")
            lookup[alias] = target
        object.__setattr__(self, "_lookup", MappingProxyType(lookup))
        # Saved with the session state every turn: built once (the registry never changes).
        object.__setattr__(
            self,
            "_saved",
            {"tools": list(self.canonical_tools), "aliases": dict(self._aliases())},
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CompactableTools is immutable; use with_tools/with_aliases")

    def __reduce__(self) -> tuple[type[CompactableTools], tuple[tuple[str, ...], dict[str, str]]]:
        return (CompactableTools, (self.canonical_tools, self._aliases()))

    @staticmethod
    def _canonical(lookup: Mapping[str, str]) -> set[str]:
        return {name for name, target in lookup.items() if name == target}

    @classmethod
    def default(cls) -> CompactableTools:
        """Claude Code's eight tools plus the SWE-agent, OpenHands and Codex aliases."""
        return cls(
            DEFAULT_COMPACTABLE_TOOLS,
            {**SWE_AGENT_ALIASES, **OPENHANDS_ALIASES, **CODEX_ALIASES},
        )

    @classmethod
    def claude_code_only(cls) -> CompactableTools:
        """Only Claude Code's eight tool names, no aliases."""
        return cls(DEFAULT_COMPACTABLE_TOOLS)

    def with_tools(self, *names: str) -> CompactableTools:
        """A copy with more canonical compactable tools (your own tools)."""
        return CompactableTools([*self.canonical_tools, *names], self._aliases())

    def with_aliases(self, aliases: Mapping[str, str]) -> CompactableTools:
        """A copy where each alias name follows the rule of a registered canonical tool."""
        return CompactableTools(self.canonical_tools, {**self._aliases(), **aliases})

    def without(self, *names: str) -> CompactableTools:
        """A copy without these names (a canonical tool takes its aliases with it)."""
        drop = set(names)
        tools = [name for name in self.canonical_tools if name not in drop]
        aliases = {
            alias: target
            for alias, target in self._aliases().items()
            if alias not in drop and target not in drop
        }
        return CompactableTools(tools, aliases)

    def _aliases(self) -> dict[str, str]:
        return {name: target for name, target in self._lookup.items() if name != target}

    def to_dict(self) -> dict[str, Any]:
        """`{"tools": [...], "aliases": {...}}` as session state keeps it (read-only)."""
        return self._saved

    @property
    def canonical_tools(self) -> tuple[str, ...]:
        """The canonical tool names, in registration order."""
        return tuple(name for name, target in self._lookup.items() if name == target)

    @property
    def aliases(self) -> Mapping[str, str]:
        """Alias name -> canonical tool."""
        return MappingProxyType(self._aliases())

    def canonical(self, name: str) -> str | None:
        """The canonical tool a name stands for, or None when it is not compactable."""
        return self._lookup.get(name)

    def is_compactable(self, name: object) -> bool:
        """Whether results of the tool with this name may be cleared."""
        return isinstance(name, str) and name in self._lookup

    def read_path(self, block: Mapping[str, Any]) -> str | None:
        """The file a compactable tool_use read (so its read-file state can be dropped).

        Claude Code's Read, editors' `view` command and the SWE-agent `open <path> [line]`
        text command, via `unbounded.model.tools.file_read_path`.
        """
        return file_read_path(block)

    def __contains__(self, name: object) -> bool:
        return self.is_compactable(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._lookup)

    def __len__(self) -> int:
        return len(self._lookup)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompactableTools) and dict(self._lookup) == dict(other._lookup)

    def __hash__(self) -> int:
        return hash(frozenset(self._lookup.items()))

    def __repr__(self) -> str:
        return (
            f"CompactableTools(tools={list(self.canonical_tools)!r}, "
            f"aliases={len(self._lookup) - len(self.canonical_tools)})"
        )
