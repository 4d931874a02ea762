"""SWE-agent trajectories (`<instance>.traj`): the 0.x text-action format and 1.x function calling.

A `.traj` file is one JSON document (usually pretty-printed) with `history` (the messages the
model saw), `trajectory` (one step per action: action, observation, response, thought…), `info`
(exit status, submission, `model_stats` totals) and, in 1.x, `replay_config`.

Mapping decisions:

- The system prompt is not a message: it goes to `Transcript.meta["system"]` (several system
  items are joined with a blank line).
- Demonstrations (`is_demo: true` or `message_type: "demonstration"`) of role user become user
  entries with `isMeta: true`; the demonstration assistant turns that 1.x writes with
  `put_demos_in_history` stay assistant text (never tool_use), marked `isDemo: true`.
- An assistant item with `tool_calls` (1.x function calling, litellm dicts) becomes one assistant
  entry holding a text block (the `thought`), then one `tool_use` block per call with the call's
  id and its arguments parsed from JSON (`{"raw": <string>}` when they are not a JSON object).
  `role: "tool"` items answer them by `tool_call_ids` with `tool_result` blocks.
- An assistant item with an `action` but no `tool_calls` (0.x, and 1.x text parsers) becomes a
  text block (the `thought`, or the content with the action's code block removed) and a
  synthetic `tool_use` block `{id: "swe_<n>", name, input: {"command": <the action verbatim>}}`.
  `name` is the action's first word when it is a SWE-agent command (`open`, `edit`, `create`,
  `submit`, …, see `SWE_AGENT_COMMANDS`) and `bash` otherwise (`python x.py` is a shell
  command). The next user (or tool) item is that call's `tool_result`.
- A tool call still unanswered when the next assistant turn, a demonstration or the end of the
  history comes gets a result so the view stays a valid request: at the end, the observation of
  the last `trajectory` step when its action is the same (0.x never writes the `submit`
  observation into the history), otherwise the placeholder `NO_OBSERVATION`; such entries carry
  `syntheticToolResult: true`.
- `is_error` is set on a tool result (see `looks_like_error`) when the observation starts with
  "error" or "usage:" (any case), or contains "Traceback (most recent call last)", "command not
  found" or SWE-agent's "Your proposed edit has introduced new syntax error". It is a heuristic:
  SWE-agent records no exit codes.
- `.traj` files hold no timestamps: entry n gets 1970-01-01T00:00:00.000Z plus n seconds, so
  order is kept and nobody mistakes them for real times. Every entry has a fresh uuid, its
  `parentUuid` is the previous entry's, and `historyIndex` is the index of its history item.
- Assistant messages get the id `swe_msg_<n>`; usage only when the history item carries its own
  `usage` (it normally does not: the totals in `info.model_stats` are kept in `meta["info"]`).
  The model name comes from 1.x `replay_config` when it is there.
- `trajectory` repeats the history step by step; only its length is kept
  (`meta["trajectory_steps"]`).
- A history item of a role the reader does not know is kept as a progress entry (data type
  `swe_agent_item`) that never reaches the API, and counted in `meta["unknown_record_types"]`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry, new_uuid
from unbounded.model.record_checks import token_counts_problem
from unbounded.model.transcript import Transcript
from unbounded.transcripts.importing import (
    content_blocks_of,
    count_unknown,
    json_kind,
    parse_arguments,
    recorded_usage,
    text_of_parts,
    unique_id,
)

FORMAT = "swe-agent"

SWE_AGENT_COMMANDS: frozenset[str] = frozenset(
    {
        # 0.x default, search and edit command files
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "create",
        "submit",
        "search_dir",
        "search_file",
        "find_file",
        "edit",
        "insert",
        "filemap",
        # 1.x tool bundles
        "str_replace_editor",
        "view",
        "undo_edit",
        "review_on_submit",
        # exits the agent writes for itself
        "exit_forfeit",
        "exit_cost",
        "exit_context",
        "exit_api",
        "exit_format",
        "exit_error",
        "skip",
    }
)
"""First words of an action that name a SWE-agent command; any other action runs in bash."""

NO_OBSERVATION = "[no observation was recorded for this tool call]"
"""Content of the tool result made up for a call the file never answers."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_HINT = "a SWE-agent .traj file is a JSON object with a 'history' list of {role, content} items"
_ERROR_MARKERS = (
    "Traceback (most recent call last)",
    "command not found",
    "Your proposed edit has introduced new syntax error",
)
_EMPTY_FENCE = re.compile(r"```[\w-]*\s*```\s*$")


# -- detection -----------------------------------------------------------------------------
def looks_like_swe_agent(record: dict[str, Any]) -> bool:
    """A one-line `.traj`: `trajectory` and `history` keys, or a `history` of role/content items."""
    history = record.get("history")
    if not isinstance(history, list):
        return False
    if "trajectory" in record:
        return True
    first = history[0] if history else None
    return isinstance(first, dict) and "role" in first and "content" in first


def sniff_swe_agent(head: bytes) -> bool:
    """Cheap check of a pretty-printed `.traj` from its first bytes (64 KB)."""
    start = head.lstrip()
    if not start.startswith(b"{") or b'"trajectory"' not in start:
        return False
    # `history` may start after the first 64 KB (1.x steps repeat whole queries); the step keys
    # or the other top-level keys are enough then.
    return (
        b'"history"' in start
        or b'"environment"' in start
        or (b'"action"' in start and b'"observation"' in start)
    )


# -- reading -------------------------------------------------------------------------------
def load_json_document(path: Path, *, hint: str | None = None) -> Any:
    """Parse a whole JSON file; a syntax or encoding error names the file and its line."""
    if not path.exists():
        raise TranscriptError("no such file", path=path, hint="check the path")
    if path.is_dir():
        raise TranscriptError("is a folder, not a transcript file", path=path)
    raw = path.read_bytes()
    if not raw.strip():
        raise TranscriptError("empty file: no records to read", path=path, line=1)
    if b"\x00" in raw:
        raise TranscriptError(
            "binary file (contains NUL bytes), not a transcript",
            path=path,
            line=raw[: raw.index(b"\x00")].count(b"\n") + 1,
        )
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise TranscriptError(
                "not valid UTF-8", path=path, line=raw[: bad.start].count(b"\n") + 1, hint=hint
            ) from None
        # orjson counts lines in the decoded text, which has the same newlines as the bytes.
        line = getattr(exc, "lineno", None)
        if not isinstance(line, int):
            line = raw[: int(getattr(exc, "pos", 0) or 0)].count(b"\n") + 1
        reason = str(getattr(exc, "msg", "") or exc).split(": line ")[0]
        raise TranscriptError(
            f"malformed JSON ({reason})", path=path, line=line, hint=hint
        ) from None


def looks_like_error(text: str) -> bool:
    """Whether an observation reads as a failure (the documented is_error heuristic)."""
    start = text.lstrip().lower()
    if start.startswith(("error", "usage:")):
        return True
    return any(marker in text for marker in _ERROR_MARKERS)


def command_name(action: str) -> str:
    """The tool name for a text action: its first word if a SWE-agent command, else `bash`."""
    words = action.split(None, 1)
    first = words[0] if words else ""
    return first if first in SWE_AGENT_COMMANDS else "bash"


def read_swe_agent(path: str | Path) -> Transcript:
    """Read a SWE-agent `.traj` file (0.x or 1.x) into entries; see the module docstring."""
    source = Path(path)
    document = load_json_document(source, hint=_HINT)
    if not isinstance(document, dict):
        raise TranscriptError(
            f"expected a JSON object, found {json_kind(document)}", path=source, line=1, hint=_HINT
        )
    _validate(document, source)
    builder = _Builder(source, _model_name(document.get("replay_config")))
    builder.run(document["history"], document.get("trajectory") or [])
    info = document.get("info")
    trajectory = document.get("trajectory")
    meta: dict[str, Any] = {
        "system": "\n\n".join(builder.system) if builder.system else None,
        "info": info if isinstance(info, dict) else {},
        "trajectory_steps": len(trajectory) if isinstance(trajectory, list) else 0,
        **builder.meta,
    }
    if isinstance(document.get("environment"), str):
        meta["environment"] = document["environment"]
    if builder.model is not None:
        meta["model"] = builder.model
    return Transcript(
        entries=builder.entries, format=FORMAT, path=source, warnings=builder.warnings, meta=meta
    )


# -- validation ----------------------------------------------------------------------------


def _fail(path: Path, field: str, expected: str, value: Any) -> None:
    raise TranscriptError(
        f"field '{field}' should be {expected}, found {json_kind(value)}", path=path, hint=_HINT
    )


def _check(
    path: Path,
    value: Any,
    field: str,
    types: Any,
    expected: str,
    *,
    required: bool = False,
    element: bool = False,
) -> None:
    if value is None:
        if element:  # a list element is never optional: null is the wrong type
            _fail(path, field, expected, value)
        if required:
            raise TranscriptError(f"field '{field}' is missing", path=path, hint=_HINT)
        return
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        _fail(path, field, expected, value)
    if not isinstance(value, types):
        _fail(path, field, expected, value)


def _validate(document: dict[str, Any], path: Path) -> None:
    _check(path, document.get("history"), "history", list, "a list", required=True)
    _check(path, document.get("trajectory"), "trajectory", list, "a list")
    _check(path, document.get("info"), "info", dict, "an object")
    info = document.get("info")
    if isinstance(info, dict):
        _check(path, info.get("model_stats"), "info.model_stats", dict, "an object")
    for index, step in enumerate(document.get("trajectory") or []):
        where = f"trajectory[{index}]"
        _check(path, step, where, dict, "an object", element=True)
        for name in ("action", "observation", "response", "thought"):
            _check(path, step.get(name), f"{where}.{name}", str, "a string")
    for index, item in enumerate(document["history"]):
        _validate_item(path, item, f"history[{index}]")


def _validate_item(path: Path, item: Any, where: str) -> None:
    _check(path, item, where, dict, "an object", element=True)
    _check(path, item.get("role"), f"{where}.role", str, "a string", required=True)
    content = item.get("content")
    _check(path, content, f"{where}.content", (str, list), "a string or a list")
    if isinstance(content, list):
        for position, block in enumerate(content):
            _check(path, block, f"{where}.content[{position}]", dict, "an object", element=True)
    for name in ("thought", "action", "message_type", "agent"):
        _check(path, item.get(name), f"{where}.{name}", str, "a string")
    _check(path, item.get("is_demo"), f"{where}.is_demo", bool, "true or false")
    problem = token_counts_problem(item.get("usage"), f"{where}.usage")
    if problem is not None:
        raise TranscriptError(problem, path=path, hint=_HINT)
    ids = item.get("tool_call_ids")
    _check(path, ids, f"{where}.tool_call_ids", list, "a list")
    for position, call_id in enumerate(ids or []):
        _check(path, call_id, f"{where}.tool_call_ids[{position}]", str, "a string", element=True)
    blocks = item.get("thinking_blocks")
    _check(path, blocks, f"{where}.thinking_blocks", list, "a list")
    calls = item.get("tool_calls")
    _check(path, calls, f"{where}.tool_calls", list, "a list")
    for position, call in enumerate(calls or []):
        at = f"{where}.tool_calls[{position}]"
        _check(path, call, at, dict, "an object", element=True)
        _check(path, call.get("id"), f"{at}.id", str, "a string", required=True)
        function = call.get("function")
        _check(path, function, f"{at}.function", dict, "an object", required=True)
        _check(path, function.get("name"), f"{at}.function.name", str, "a string", required=True)
        arguments = function.get("arguments")
        _check(path, arguments, f"{at}.function.arguments", (str, dict), "a JSON string")


# -- mapping -------------------------------------------------------------------------------
def _model_name(replay_config: Any) -> str | None:
    config = replay_config
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(config, dict):
        return None
    agent = config.get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


def _without_action(content: str, action: str) -> str:
    """The response text with the action (and the code fence it sat in) taken out."""
    command = action.strip()
    if command:
        cut = content.rfind(command)
        if cut >= 0:
            content = content[:cut] + content[cut + len(command) :]
    return _EMPTY_FENCE.sub("", content.rstrip()).strip()


class _Pending(NamedTuple):
    """A tool call waiting for its result."""

    tool_use_id: str
    synthetic: bool
    key: str
    """The action text of a synthetic call; the recorded call id of a real one."""


class _Builder:
    """Turns history items into chained entries, pairing tool calls with their results."""

    def __init__(self, path: Path, model: str | None) -> None:
        self.path = path
        self.model = model
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.system: list[str] = []
        self.meta: dict[str, Any] = {}
        """Where unknown history item roles are counted (`count_unknown`)."""
        self._parent: str | None = None
        self._used_ids: set[str] = set()
        self._pending: list[_Pending] = []
        self._calls = 0
        self._responses = 0
        self._index = 0

    # entries ----------------------------------------------------------------------------
    def _stamp(self) -> str:
        moment = _EPOCH + timedelta(seconds=len(self.entries))
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _add(self, entry: Entry) -> None:
        self._parent = entry.uuid
        self.entries.append(entry)

    def _user(
        self, content: Any, *, is_meta: bool = False, extra: dict[str, Any] | None = None
    ) -> None:
        fields = {"historyIndex": self._index, **(extra or {})}
        self._add(
            Entry.user(
                content,
                parent_uuid=self._parent,
                timestamp=self._stamp(),
                is_meta=is_meta,
                extra=fields,
            )
        )

    def _result(
        self, tool_use_id: str, content: Any, *, extra: dict[str, Any] | None = None
    ) -> None:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
        }
        if looks_like_error(text_of_parts(content)):
            block["is_error"] = True
        self._user([block], extra=extra)

    # history ----------------------------------------------------------------------------
    def run(self, history: Sequence[dict[str, Any]], trajectory: Sequence[dict[str, Any]]) -> None:
        for index, item in enumerate(history):
            self._index = index
            self._item(item)
        self._index = len(history)
        last_step = trajectory[-1] if trajectory else None
        for pending in self._pending:
            observation = last_step.get("observation") if last_step else None
            if (
                pending.synthetic
                and last_step is not None
                and isinstance(observation, str)
                and str(last_step.get("action", "")).strip() == pending.key.strip()
            ):
                self._result(
                    pending.tool_use_id, observation, extra={"observationFrom": "trajectory"}
                )
            else:
                self._result(
                    pending.tool_use_id, NO_OBSERVATION, extra={"syntheticToolResult": True}
                )
        self._pending = []

    def _flush(self) -> None:
        for pending in self._pending:
            self._result(pending.tool_use_id, NO_OBSERVATION, extra={"syntheticToolResult": True})
        self._pending = []

    def _item(self, item: dict[str, Any]) -> None:
        role = item["role"]
        demo = item.get("is_demo") is True or item.get("message_type") == "demonstration"
        content = item.get("content")
        if role == "system" and not demo:
            self.system.append(text_of_parts(content))
            return
        if demo:
            self._flush()
            if role == "assistant":
                text = text_of_parts(content)
                if text.strip():
                    self._assistant([{"type": "text", "text": text}], None, {"isDemo": True})
            else:
                self._user(content_blocks_of(content), is_meta=True, extra={"isDemo": True})
            return
        if role == "assistant":
            self._flush()
            self._assistant_item(item)
        elif role in ("user", "tool"):
            self._observation(item)
        else:
            # A role this reader does not know: kept (as progress, never sent) and counted.
            count_unknown(self.meta, [f"history item of role {role}"])
            self._add(
                Entry(
                    {
                        "parentUuid": self._parent,
                        "isSidechain": False,
                        "type": "progress",
                        "data": {"type": "swe_agent_item", "item": dict(item)},
                        "uuid": new_uuid(),
                        "timestamp": self._stamp(),
                        "historyIndex": self._index,
                    }
                )
            )

    def _assistant(
        self, blocks: list[dict[str, Any]], usage: dict[str, int] | None, extra: dict[str, Any]
    ) -> None:
        self._responses += 1
        has_tools = any(b.get("type") == "tool_use" for b in blocks)
        self._add(
            Entry.assistant(
                blocks,
                message_id=f"swe_msg_{self._responses}",
                model=self.model,
                usage=usage,
                stop_reason="tool_use" if has_tools else "end_turn",
                parent_uuid=self._parent,
                timestamp=self._stamp(),
                extra={"historyIndex": self._index, **extra},
            )
        )

    def _assistant_item(self, item: dict[str, Any]) -> None:
        blocks: list[dict[str, Any]] = []
        for block in item.get("thinking_blocks") or []:
            if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
                blocks.append(block)
        content = text_of_parts(item.get("content"))
        action = item.get("action") or ""
        thought = item.get("thought") or ""
        calls = item.get("tool_calls") or []
        text = (
            thought if thought.strip() else (content if calls else _without_action(content, action))
        )
        if text.strip():
            blocks.append({"type": "text", "text": text})
        if calls:
            for call in calls:
                function = call["function"]
                tool_id = unique_id(call["id"], self._used_ids)
                if tool_id != call["id"]:
                    self.warnings.append(
                        f"{self.path}: history[{self._index}]: tool call id {call['id']} is used "
                        f"twice; renamed {tool_id}"
                    )
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": function["name"],
                        "input": parse_arguments(function.get("arguments")),
                    }
                )
                self._pending.append(_Pending(tool_id, False, call["id"]))
        elif action.strip():
            self._calls += 1
            tool_id = unique_id(f"swe_{self._calls}", self._used_ids)
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": command_name(action),
                    "input": {"command": action},
                }
            )
            self._pending.append(_Pending(tool_id, True, action))
        if blocks:
            self._assistant(blocks, recorded_usage(item.get("usage")), {})

    def _observation(self, item: dict[str, Any]) -> None:
        content = content_blocks_of(item.get("content"))
        ids = item.get("tool_call_ids") or []
        if ids:
            # 1.x function calling: answer the calls named, by their original ids.
            answered = [p for p in self._pending if p.key in ids and not p.synthetic]
            if answered:
                for pending in answered:
                    self._result(pending.tool_use_id, content)
                self._pending = [p for p in self._pending if p not in answered]
                return
        elif self._pending and (item["role"] == "tool" or all(p.synthetic for p in self._pending)):
            # The observation of a text action (or a tool message without ids): answers the
            # oldest open call.
            self._result(self._pending.pop(0).tool_use_id, content)
            return
        if item["role"] == "tool" or ids:
            self.warnings.append(
                f"{self.path}: history[{self._index}] answers no open tool call: kept as user text"
            )
        self._flush()
        self._user(content)
