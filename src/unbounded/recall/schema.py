"""The `recall` tool as the model sees it: its name, description, input schema (Anthropic and
OpenAI shapes) and the checked arguments of one call.

A call names exactly one thing to bring back: `id` (a tool call whose result was cleared or
summarized), `path` (the latest output that read a file), `command` (the latest output of a
shell command) or `query` (words to find in the part of the conversation that was compacted
away); `start_line` pages through a long output.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# Defined in unbounded.errors, importable from here, where it used to live.
from unbounded.errors import RecallArgumentError

RECALL_TOOL_NAME = "recall"
"""The tool's name in requests and in the model's tool calls."""

RECALL_DESCRIPTION = (
    "Bring back the exact text of an earlier part of this conversation that was cleared or "
    "summarized to save context. Give exactly one of: `id`, a tool call id named by a cleared "
    "result ('recall id=...') or by the summary; `path`, a file path, for the latest output "
    "that read that file; `command`, a shell command, for its latest output; `query`, words "
    "to search for in the summarized part of the conversation. Only this session's own "
    "record is searched, and the answer is cut to a budget: pass `start_line` to read a long "
    "output further. Use it instead of re-running a command or re-reading a file when the "
    "earlier output is what you need."
)

RECALL_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {
            "type": "string",
            "description": "The tool call id whose result to bring back (e.g. toolu_...).",
        },
        "path": {
            "type": "string",
            "description": "A file path: the latest tool output that read this file.",
        },
        "command": {
            "type": "string",
            "description": "A shell command: the latest output of this command.",
        },
        "query": {
            "type": "string",
            "description": "Words to search for in the summarized part of the conversation.",
        },
        "start_line": {
            "type": "integer",
            "minimum": 1,
            "description": "First line to return of a long output (default 1).",
        },
    },
    "additionalProperties": False,
}

RecallApi = Literal["anthropic", "openai"]
RecallKind = Literal["id", "path", "command", "query"]
_KINDS: tuple[RecallKind, ...] = ("id", "path", "command", "query")


def recall_tool_schema(api: RecallApi = "anthropic") -> dict[str, Any]:
    """The tool definition for a request's `tools`: the Messages API shape (`anthropic`) or
    the Chat Completions function shape (`openai`). A fresh copy each call."""
    if api == "anthropic":
        return {
            "name": RECALL_TOOL_NAME,
            "description": RECALL_DESCRIPTION,
            "input_schema": copy.deepcopy(RECALL_INPUT_SCHEMA),
        }
    if api == "openai":
        return {
            "type": "function",
            "function": {
                "name": RECALL_TOOL_NAME,
                "description": RECALL_DESCRIPTION,
                "parameters": copy.deepcopy(RECALL_INPUT_SCHEMA),
            },
        }
    raise RecallArgumentError(f"api must be 'anthropic' or 'openai', not {api!r}")


MAX_ARGUMENT_CHARS = 10_000
"""The longest `id`, `path`, `command` or `query` taken (a model may be told to send more)."""
MAX_START_LINE = 1_000_000_000
_SHOWN_CHARS = 60
"""An argument echoed in an error is cut to this many characters."""


def _shown(value: object) -> str:
    """A value as an error message may quote it: its type for a non-string, else cut short."""
    if not isinstance(value, str):
        return f"a value of type {type(value).__name__}"
    text = value if len(value) <= _SHOWN_CHARS else value[: _SHOWN_CHARS - 1] + "…"
    return repr(text)


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """One checked `recall` call: what to find (`kind`, `value`) and where to start reading."""

    kind: RecallKind
    value: str
    start_line: int = 1

    @classmethod
    def from_input(cls, arguments: object) -> RecallRequest:
        """Check the model's arguments (a JSON object); RecallArgumentError says what is wrong
        (quoting at most a few dozen characters of what it was given)."""
        if not isinstance(arguments, Mapping):
            raise RecallArgumentError("the input of recall must be a JSON object")
        unknown = sorted(str(key) for key in arguments if key not in (*_KINDS, "start_line"))
        if unknown:
            named = ", ".join(_shown(key)[1:-1] for key in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise RecallArgumentError(
                f"recall takes id, path, command, query and start_line, not {named}{more}"
            )
        given = [kind for kind in _KINDS if arguments.get(kind) not in (None, "")]
        if len(given) != 1:
            raise RecallArgumentError(
                "give exactly one of id, path, command or query"
                + (f" (got {', '.join(given)})" if given else "")
            )
        (kind,) = given
        value = arguments[kind]
        if not isinstance(value, str) or not value.strip():
            raise RecallArgumentError(f"{kind} must be a non-empty string, not {_shown(value)}")
        if len(value) > MAX_ARGUMENT_CHARS:
            raise RecallArgumentError(
                f"{kind} is {len(value):,} characters long; give at most "
                f"{MAX_ARGUMENT_CHARS:,} (for query: a few distinctive words)"
            )
        start = arguments.get("start_line", 1)
        if start is None:
            start = 1
        if (
            not isinstance(start, int)
            or isinstance(start, bool)
            or not 1 <= start <= MAX_START_LINE
        ):
            shown = str(start) if isinstance(start, int) and abs(start) < 10**12 else _shown(start)
            raise RecallArgumentError(
                f"start_line must be a whole number from 1 to {MAX_START_LINE:,}, not {shown}"
            )
        return cls(kind, value.strip(), start)
