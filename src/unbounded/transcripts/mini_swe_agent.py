"""mini-swe-agent trajectories (`<instance>.traj.json`), formats `mini-swe-agent-1` and `-1.1`.

A trajectory is one JSON document: `messages` (the conversation as the model saw it, OpenAI
chat messages with an `extra` field of mini-swe-agent's own), `info` (exit status, submission,
`model_stats` totals, the `config` of agent, model and environment, `mini_version`) and
`trajectory_format`. Version 1 writes `{role, content}` messages (assistant ones with
`extra.response`, the raw litellm response); version 2 (format 1.1) adds `extra.actions` to
model messages, observation details (`raw_output`, `returncode`, `timestamp`) to observation
messages, native tool calls (`tool_calls` and `role: "tool"` messages) with a tool-calling
model, and a closing `role: "exit"` message.

Mapping decisions:

- `system` messages are not messages: their text goes to `meta["system"]`.
- A `user` message becomes a user entry (text, or text and image blocks); the first one is the
  task. One that answers a text action (below) is that action's `tool_result` instead.
- An `assistant` message becomes one assistant entry. With `tool_calls` (tool-calling models):
  its text, then a `tool_use` block per call `{id, name, input: arguments parsed}`, answered by
  the `role: "tool"` messages with the same `tool_call_id`. Without, its action (the command
  of `extra.actions`, else the one fenced block ```` ```bash ```` / ```` ```mswea_bash_command ````
  of the text) becomes a synthetic `tool_use {id: "mini_<n>", name: "bash", input: {command}}`
  after the text (the fence taken out; `<n>` counts the responses), and the next user message
  is its result: `is_error`
  when `extra.returncode` is not 0, or the text says `<returncode>N</returncode>` with N not 0,
  or it reads as an error (`swe_agent.looks_like_error`). A reply without an action is text; the
  format error mini-swe-agent answers it with is a user message.
- A call still unanswered when the next response comes, or at the end, gets `NO_OBSERVATION`
  (`syntheticToolResult: true`).
- Usage and model: `extra.response` is the litellm response: its `id` is the message id, its
  `model` the model (else `info.config.model.model_name`), its `usage` mapped by
  `usage_from_openai` (litellm counts cache reads and writes inside `prompt_tokens`).
- Times: `extra.timestamp` (seconds since the epoch) where a message has it, else
  `extra.response.created`; a message without either takes the time before it (the first
  ones the first time found, or 1970-01-01 plus one second per entry when there is none).
- The `exit` message is kept as a progress entry (data type `mini_swe_agent_exit`); messages
  of other roles too, counted in `meta["unknown_record_types"]`.
- Every entry has a fresh uuid chained to the previous one; `meta["info"]` keeps `info`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

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
from unbounded.transcripts.swe_agent import load_json_document, looks_like_error

FORMAT = "mini-swe-agent"

NO_OBSERVATION = "[no observation was recorded for this tool call]"
"""Content of the tool result made up for a call the file never answers."""

_ACTION = re.compile(r"```(?:bash|mswea_bash_command)[ \t]*\n(.*?)\n```", re.DOTALL)
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_HINT = "a mini-swe-agent .traj.json is a JSON object with a 'messages' list of {role, content}"
_KNOWN_ROLES = frozenset({"system", "user", "assistant", "tool", "exit"})


def looks_like_mini_swe_agent(record: dict[str, Any]) -> bool:
    """A trajectory: a `messages` list with a mini-swe-agent `trajectory_format`, or with an
    `info` that has `mini_version`."""
    if not isinstance(record.get("messages"), list):
        return False
    declared = record.get("trajectory_format")
    if isinstance(declared, str) and declared.startswith("mini-swe-agent"):
        return True
    info = record.get("info")
    return isinstance(info, dict) and "mini_version" in info


def sniff_mini_swe_agent(head: bytes) -> bool:
    """Cheap check of a pretty-printed trajectory from its first bytes."""
    start = head.lstrip()
    if not start.startswith(b"{") or b'"messages"' not in start:
        return False
    return b'"mini-swe-agent' in start or b'"mini_version"' in start


def read_mini_swe_agent(path: str | Path) -> Transcript:
    """Read a mini-swe-agent `.traj.json` into entries (see the module docstring)."""
    source = Path(path)
    document = load_json_document(source, hint=_HINT)
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        found = json_kind(document.get("messages") if isinstance(document, dict) else document)
        raise TranscriptError(
            f"expected an object with a 'messages' list, found {found}",
            path=source,
            line=1,
            hint=_HINT,
        )
    recorded_info = document.get("info")
    info: dict[str, Any] = recorded_info if isinstance(recorded_info, dict) else {}
    builder = _Builder(source, _configured_model(info))
    builder.start_at(document["messages"])
    for index, message in enumerate(document["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TranscriptError(
                f"messages[{index}] should be an object with a string 'role'",
                path=source,
                line=1,
                hint=_HINT,
            )
        usage = _response(message).get("usage")
        problem = token_counts_problem(usage, f"messages[{index}].extra.response.usage")
        if problem is not None:
            raise TranscriptError(problem, path=source, line=1, hint=_HINT)
        builder.message(index, message)
    builder.finish()
    meta: dict[str, Any] = {
        "system": "\n\n".join(builder.system) if builder.system else None,
        "info": info,
        "trajectory_format": document.get("trajectory_format"),
        **builder.meta,
    }
    return Transcript(
        entries=builder.entries,
        format=FORMAT,
        path=source,
        warnings=builder.warnings,
        meta=meta,
    )


def _configured_model(info: dict[str, Any]) -> str | None:
    config = info.get("config")
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _extra(message: dict[str, Any]) -> dict[str, Any]:
    extra = message.get("extra")
    return extra if isinstance(extra, dict) else {}


def _response(message: dict[str, Any]) -> dict[str, Any]:
    response = _extra(message).get("response")
    return response if isinstance(response, dict) else {}


def _seconds_of(message: dict[str, Any]) -> float | None:
    """The time a message records, in seconds since 1970: `extra.timestamp`, else its
    response's `created`; None when neither is a number above 0."""
    seconds = _extra(message).get("timestamp")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        seconds = _response(message).get("created")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
        return seconds
    return None


def _time_of(message: dict[str, Any]) -> datetime | None:
    """When a message was written; None without a time or past what a date can hold."""
    seconds = _seconds_of(message)
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):  # past year 9999 or the platform's time_t
        return None


def _action(message: dict[str, Any], text: str) -> str | None:
    """The command of a text action: `extra.actions`, else the one fenced block."""
    actions = _extra(message).get("actions")
    if isinstance(actions, list) and actions:
        first = actions[0]
        command = first.get("command") if isinstance(first, dict) else None
        if isinstance(command, str):
            return command
    found = _ACTION.findall(text)
    return found[0].strip() if len(found) == 1 else None


def _failed(message: dict[str, Any], text: str) -> bool:
    code = _extra(message).get("returncode")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    match = _RETURN_CODE.search(text)
    if match:
        return int(match.group(1)) != 0
    return looks_like_error(text)


class _Builder:
    """Turns messages into chained entries, pairing actions with their observations."""

    def __init__(self, path: Path, model: str | None) -> None:
        self.path = path
        self.model = model
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.system: list[str] = []
        self.meta: dict[str, Any] = {}
        self._parent: str | None = None
        self._time: datetime | None = None
        self._used_ids: set[str] = set()
        self._pending: list[str] = []  # tool_use ids, in call order
        self._by_call: dict[str, str] = {}  # recorded tool_call id -> tool_use id
        self._text_action: str | None = None  # a synthetic call the next user message answers
        self._responses = 0
        self._index = 0
        self._bad_time = False  # a time out of range was warned about

    # entries ----------------------------------------------------------------------------
    def start_at(self, messages: list[Any]) -> None:
        """Give the messages before the first recorded time that time."""
        for message in messages:
            if isinstance(message, dict) and _time_of(message) is not None:
                self._time = _time_of(message)
                return

    def _stamp(self, message: dict[str, Any]) -> str:
        recorded = _time_of(message)
        if recorded is None and _seconds_of(message) is not None and not self._bad_time:
            self._bad_time = True
            self.warnings.append(
                f"a recorded time out of range ({_seconds_of(message)} seconds since 1970) "
                "was left out: the message before's time is used"
            )
        self._time = recorded or self._time
        moment = self._time or _EPOCH + timedelta(seconds=len(self.entries))
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _add(self, entry: Entry, index: int) -> None:
        entry.data["messageIndex"] = index
        self._parent = entry.uuid
        self.entries.append(entry)

    def _user(self, content: Any, message: dict[str, Any], index: int, **extra: Any) -> None:
        self._add(
            Entry.user(
                content,
                parent_uuid=self._parent,
                timestamp=self._stamp(message),
                extra=extra or None,
            ),
            index,
        )

    def _result(
        self, tool_use_id: str, text: str, message: dict[str, Any], index: int, **extra: Any
    ) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
        if extra.pop("is_error", False):
            block["is_error"] = True
        self._user([block], message, index, **extra)

    def _flush(self, message: dict[str, Any], index: int) -> None:
        for tool_use_id in self._pending:
            self._result(tool_use_id, NO_OBSERVATION, message, index, syntheticToolResult=True)
        self._pending = []
        self._text_action = None

    # messages ---------------------------------------------------------------------------
    def message(self, index: int, message: dict[str, Any]) -> None:
        """Convert one message."""
        self._index = index
        role = message["role"]
        content = message.get("content")
        if role == "system":
            self.system.append(text_of_parts(content))
        elif role == "assistant":
            self._flush(message, index)
            self._assistant(index, message)
        elif role == "tool":
            self._tool_output(index, message)
        elif role == "user":
            if self._text_action is not None:
                text = text_of_parts(content)
                call, self._text_action = self._text_action, None
                self._pending.remove(call)
                self._result(call, text, message, index, is_error=_failed(message, text))
            else:
                self._flush(message, index)
                self._user(content_blocks_of(content), message, index)
        else:
            if role not in _KNOWN_ROLES:
                count_unknown(self.meta, [f"message of role {role}"])
            self._progress(index, message)

    def _progress(self, index: int, message: dict[str, Any]) -> None:
        kind = "mini_swe_agent_exit" if message["role"] == "exit" else "mini_swe_agent_message"
        self._add(
            Entry(
                {
                    "parentUuid": self._parent,
                    "isSidechain": False,
                    "type": "progress",
                    "data": {"type": kind, "message": dict(message)},
                    "uuid": new_uuid(),
                    "timestamp": self._stamp(message),
                }
            ),
            index,
        )

    def _assistant(self, index: int, message: dict[str, Any]) -> None:
        text = text_of_parts(message.get("content"))
        blocks: list[dict[str, Any]] = []
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            if text.strip():
                blocks.append({"type": "text", "text": text})
            for position, call in enumerate(calls):
                if not isinstance(call, dict):
                    continue
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                recorded = call.get("id")
                candidate = recorded if isinstance(recorded, str) and recorded else None
                fallback = f"mini_{self._responses + 1}_{position}"
                tool_use_id = unique_id(candidate or fallback, self._used_ids)
                if candidate is not None:
                    self._by_call[candidate] = tool_use_id
                name = function.get("name")
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tool_use_id,
                        "name": name if isinstance(name, str) and name else "bash",
                        "input": parse_arguments(function.get("arguments")),
                    }
                )
                self._pending.append(tool_use_id)
        else:
            action = _action(message, text)
            if action is not None:
                shown = _ACTION.sub("", text).strip()
                if shown:
                    blocks.append({"type": "text", "text": shown})
                tool_use_id = unique_id(f"mini_{self._responses + 1}", self._used_ids)
                call_input = {"command": action}
                blocks.append(
                    {"type": "tool_use", "id": tool_use_id, "name": "bash", "input": call_input}
                )
                self._pending.append(tool_use_id)
                self._text_action = tool_use_id
            elif text.strip():
                blocks.append({"type": "text", "text": text})
        if not blocks:
            return
        response = _response(message)
        self._responses += 1
        response_id = response.get("id")
        model = response.get("model")
        self._add(
            Entry.assistant(
                blocks,
                message_id=response_id
                if isinstance(response_id, str) and response_id
                else f"mini_msg_{self._responses}",
                model=model if isinstance(model, str) and model else self.model,
                usage=recorded_usage(response.get("usage")),
                stop_reason="tool_use" if self._pending else "end_turn",
                parent_uuid=self._parent,
                timestamp=self._stamp(message),
            ),
            index,
        )

    def _tool_output(self, index: int, message: dict[str, Any]) -> None:
        recorded = message.get("tool_call_id")
        call = self._by_call.get(recorded) if isinstance(recorded, str) else None
        text = text_of_parts(message.get("content"))
        if call is None or call not in self._pending:
            self.warnings.append(
                f"{self.path}: messages[{index}] answers no open tool call: kept as progress"
            )
            self._progress(index, message)
            return
        self._pending.remove(call)
        self._result(call, text, message, index, is_error=_failed(message, text))

    def finish(self) -> None:
        """Answer the calls the trajectory leaves open."""
        self._flush({}, self._index)
