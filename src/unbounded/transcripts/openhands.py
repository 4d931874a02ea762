"""OpenHands evaluation output (`output.jsonl`) and event lists, flat and old pair formats.

Each line of `output.jsonl` is one evaluation: `instance_id`, `instruction`, `history`,
`metrics`, `test_result`, `metadata`, `error`, `instance`. `history` is a flat list of event
dicts (current) or a list of `[action, observation]` pairs (older releases). A file that is one
JSON document (an array of events, of pairs or of evaluations, or one pretty-printed evaluation)
is read too; `skip_invalid` only applies to JSON Lines, where a bad line can be left out.

Mapping decisions:

- The `system` action is not a message: its `args.content` goes to `meta["system"]` (and
  `args.tools` to `meta["tools"]`), from the first evaluation that has one. The event itself
  is kept as a progress entry, so the prompts of the other evaluations are not lost.
- A user `message` action becomes a user entry: its text, then its `image_urls` as image
  blocks (URL source; `data:` URLs become base64 sources).
- An action with `tool_call_metadata` becomes an assistant entry: the response text (from
  `model_response`, else the action's `thought`) on the first action of a response only, then
  a `tool_use` block `{id: tool_call_id, name: function_name, input}` where `input` is the
  call's arguments parsed from the `model_response` when it has them, else the action's `args`
  (without `thought`, except for `think`, whose thought is its argument). The actions of one
  response share its `model_response.id` as message id, so normalization merges them into one
  assistant message; the response's usage is set on the first one only, mapped from litellm:
  `input_tokens = prompt_tokens - cached_tokens - cache_creation_input_tokens` (litellm counts
  cache reads and writes inside `prompt_tokens`), `cache_read_input_tokens = cached_tokens`,
  `cache_creation_input_tokens` as litellm reports it (0 when absent), `output_tokens =
  completion_tokens`; nothing when the response has no usage.
- An observation answering such an action (same `tool_call_id`, or `cause` = the action's id)
  becomes a user entry with one `tool_result` block: `content` verbatim, `is_error` when the
  observation is `error` or `user_rejected`, a command's exit code (`extras.metadata.exit_code`,
  legacy `extras.exit_code`) is not 0, `success` is false, or the content starts with "ERROR:".
- An agent `message` action without a tool call becomes assistant text (message id
  `oh_msg_<n>`, no usage: OpenHands records none for it).
- An agent action without `tool_call_metadata` whose type is a tool (`run`, `edit`, `read`…,
  old CodeAct parsed from text) becomes assistant text (its `thought`) and a synthetic
  `tool_use` `{id: "oh_<event id>", name: <action type>, input: <args without thought>}`; the
  observation paired with it (old format) or caused by it is its `tool_result`.
- Every other event (`recall`, `agent_state_changed`, `null`, `condensation`, environment
  events…) is not conversation: it is kept as a `progress` entry with data
  `{"type": "openhands_event", "event": <the event>}`, which normalization drops. An event
  that is neither an action nor an observation is also counted in
  `meta["unknown_record_types"]`.
- A tool call with no observation (OpenHands never answers `finish`) gets the result
  `NO_OBSERVATION` before the next turn or at the end of its evaluation, so the view is a valid
  request; such entries carry `syntheticToolResult: true`. An observation naming a call that
  is already answered is kept as progress, with a warning.
- Timestamps come from the events (normalized to `...Z` with milliseconds); an event without
  one takes the previous entry's. Every entry gets a fresh uuid and `parentUuid` chains it to
  the previous entry of its evaluation; `openhandsEventId` keeps the event id.
- Several evaluations in one file: all are read, in order; each entry carries
  `instanceId`, `meta["instances"]` lists the ids, and the entries of every evaluation but the
  first are marked `isSidechain: true`, so the main thread (and the view) is the first
  evaluation's conversation and the others are `Transcript.sidechains()`.
- Tool-call ids are made unique over the whole file (a suffix `_2`, `_3`… on a clash).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from unbounded.errors import TranscriptError
from unbounded.model.content import usage_from_openai
from unbounded.model.entries import Entry, new_uuid, parse_timestamp
from unbounded.model.record_checks import token_counts_problem
from unbounded.model.transcript import Transcript
from unbounded.transcripts.importing import count_unknown, json_kind, unique_id
from unbounded.transcripts.jsonl import SNIFF_BYTES, ReadReport, check_not_binary, iter_json_lines
from unbounded.transcripts.shapes import looks_like_openhands as looks_like_openhands
from unbounded.transcripts.shapes import refuse_other_format
from unbounded.transcripts.swe_agent import load_json_document

FORMAT = "openhands"

TOOL_ACTIONS: frozenset[str] = frozenset(
    {
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "browse_interactive",
        "think",
        "finish",
        "delegate",
        "mcp",
        "task_tracking",
    }
)
"""Action types that are tool calls even when recorded without `tool_call_metadata`."""

NOT_RESULTS: frozenset[str] = frozenset({"null", "agent_state_changed", "recall", "condense"})
"""Observation types that never answer a tool call."""

NO_OBSERVATION = "[no observation was recorded for this tool call]"
"""Content of the tool result made up for a call the file never answers."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LINE_HINT = "fix or remove the line, or use --skip-invalid"
_DOC_HINT = "an OpenHands file is output.jsonl (one evaluation per line) or a JSON array of events"


# -- detection -----------------------------------------------------------------------------
def looks_like_openhands_events(items: list[Any]) -> bool:
    """A JSON array of events: its first item is an action or observation with a `source`."""
    if not items:
        return False
    first = items[0]
    if isinstance(first, list) and first:  # [action, observation] pairs
        first = first[0]
    if not isinstance(first, dict):
        return False
    if "instance_id" in first and "history" in first:
        return True
    return ("action" in first or "observation" in first) and "source" in first


def sniff_openhands(head: bytes) -> bool:
    """Cheap check of a pretty-printed event array or evaluation from its first bytes."""
    start = head.lstrip()
    if start.startswith(b"["):
        return b'"source"' in start and (b'"action"' in start or b'"observation"' in start)
    if start.startswith(b"{"):
        return b'"instance_id"' in start and (
            b'"history"' in start or b'"test_result"' in start or b'"instruction"' in start
        )
    return False


# -- reading -------------------------------------------------------------------------------
def read_openhands(path: str | Path, *, skip_invalid: bool = False) -> Transcript:
    """Read an OpenHands output.jsonl or event-array file into entries (module docstring)."""
    source = Path(path)
    if not source.exists():
        raise TranscriptError("no such file", path=source, hint="check the path")
    if source.is_dir():
        raise TranscriptError("is a folder, not a transcript file", path=source)
    with source.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head.strip():
        raise TranscriptError("empty file: no records to read", path=source, line=1)
    check_not_binary(source, head)
    report = ReadReport()
    records = list(_records(source, head.lstrip(), skip_invalid, report))
    converter = _Converter(source)
    for index, (line, record) in enumerate(records):
        converter.evaluation(record, index, line)
    if not converter.entries:
        refuse_other_format(source, FORMAT)  # nothing of OpenHands': another agent's file?
    meta: dict[str, Any] = {
        "system": converter.system,
        "tools": converter.tools,
        "instances": [
            str(r["instance_id"]) for _, r in records if r.get("instance_id") is not None
        ],
        "evaluations": [{k: v for k, v in r.items() if k != "history"} for _, r in records],
        **converter.meta,
    }
    return Transcript(
        entries=converter.entries,
        format=FORMAT,
        path=source,
        warnings=report.warnings + converter.warnings,
        skipped_lines=report.skipped_lines,
        meta=meta,
    )


def _records(
    path: Path, start: bytes, skip_invalid: bool, report: ReadReport
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """(line, evaluation) pairs; an event array is one evaluation without an instance id."""
    if start.startswith(b"{") and _first_line_is_json(path):
        yield from iter_json_lines(
            path, skip_invalid=skip_invalid, report=report, validate=_validate_line
        )
        return
    document = load_json_document(path, hint=_DOC_HINT)
    if isinstance(document, dict):
        _validate_evaluation(document, path, None, "")
        yield None, document
        return
    if not isinstance(document, list):
        raise TranscriptError(
            "expected a JSON object per line or a JSON array of events", path=path, hint=_DOC_HINT
        )
    if document and all(isinstance(d, dict) and "instance_id" in d for d in document):
        for index, item in enumerate(document):
            _validate_evaluation(item, path, None, f"[{index}].")
            yield None, item
        return
    _validate_history(document, path, None, "")
    yield None, {"instance_id": None, "history": document}


def _first_line_is_json(path: Path) -> bool:
    """Whether the first non-blank line is a whole JSON value (JSON Lines, not a document).

    The whole line is read: an output.jsonl line often outgrows the 64 KB sniffed head.
    """
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    orjson.loads(raw)
                except orjson.JSONDecodeError:
                    return False
                return True
    return False


# -- validation ----------------------------------------------------------------------------


def _check(
    value: Any,
    types: type | tuple[type, ...],
    field: str,
    expected: str,
    path: Path,
    line: int | None,
    *,
    element: bool = False,
) -> None:
    if value is None and not element:  # a list element is never optional: null is wrong
        return
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise TranscriptError(
            f"field '{field}' should be {expected}, found {json_kind(value)}",
            path=path,
            line=line,
            hint=_LINE_HINT if line is not None else _DOC_HINT,
        )


def _validate_line(record: dict[str, Any], path: Path, line: int) -> None:
    _validate_evaluation(record, path, line, "")


def _validate_evaluation(record: Any, path: Path, line: int | None, prefix: str) -> None:
    _check(record, dict, prefix.rstrip(".") or "evaluation", "an object", path, line, element=True)
    _check(record.get("instance_id"), (str, int), f"{prefix}instance_id", "a string", path, line)
    for name in ("test_result", "metadata", "metrics", "instance"):
        _check(record.get(name), dict, f"{prefix}{name}", "an object", path, line)
    for name in ("instruction", "error"):
        _check(record.get(name), str, f"{prefix}{name}", "a string", path, line)
    history = record.get("history")
    _check(history, list, f"{prefix}history", "a list", path, line)
    if history:
        _validate_history(history, path, line, f"{prefix}history")


def _validate_history(history: list[Any], path: Path, line: int | None, field: str) -> None:
    pairs = bool(history) and isinstance(history[0], list)
    for index, item in enumerate(history):
        where = f"{field}[{index}]"
        if pairs:
            _check(item, list, where, "an [action, observation] pair", path, line, element=True)
            if len(item) != 2:
                raise TranscriptError(
                    f"field '{where}' should be an [action, observation] pair, found "
                    f"{len(item)} items",
                    path=path,
                    line=line,
                    hint=_LINE_HINT if line is not None else _DOC_HINT,
                )
            for position, event in enumerate(item):
                _validate_event(event, path, line, f"{where}[{position}]")
        else:
            _validate_event(item, path, line, where)


def _validate_event(event: Any, path: Path, line: int | None, where: str) -> None:
    _check(event, dict, where, "an event object", path, line, element=True)
    for name in ("action", "observation", "source", "timestamp", "message", "content"):
        _check(event.get(name), str, f"{where}.{name}", "a string", path, line)
    for name in ("id", "cause"):
        _check(event.get(name), int, f"{where}.{name}", "an integer", path, line)
    for name in ("args", "extras"):
        _check(event.get(name), dict, f"{where}.{name}", "an object", path, line)
    _check(event.get("success"), bool, f"{where}.success", "true or false", path, line)
    metadata = event.get("tool_call_metadata")
    _check(metadata, dict, f"{where}.tool_call_metadata", "an object", path, line)
    if isinstance(metadata, dict):
        at = f"{where}.tool_call_metadata"
        for name in ("function_name", "tool_call_id"):
            _check(metadata.get(name), str, f"{at}.{name}", "a string", path, line)
        response = metadata.get("model_response")
        _check(response, dict, f"{at}.model_response", "an object", path, line)
        if isinstance(response, dict):
            problem = token_counts_problem(response.get("usage"), f"{at}.model_response.usage")
            if problem is not None:
                raise TranscriptError(
                    problem,
                    path=path,
                    line=line,
                    hint=_LINE_HINT if line is not None else _DOC_HINT,
                )
    args = event.get("args")
    if isinstance(args, dict):
        _check(args.get("thought"), str, f"{where}.args.thought", "a string", path, line)
        if event.get("action") == "message":
            _check(args.get("content"), str, f"{where}.args.content", "a string", path, line)
            for name in ("image_urls", "images_urls"):
                _check(args.get(name), list, f"{where}.args.{name}", "a list", path, line)


# -- mapping -------------------------------------------------------------------------------
def _image_block(url: str) -> dict[str, Any]:
    match = re.match(r"data:([\w/+.-]+);base64,", url)
    if match:
        source = {"type": "base64", "media_type": match.group(1), "data": url[match.end() :]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _usage(raw: Any) -> dict[str, int] | None:
    """litellm usage -> Anthropic usage names (see the module docstring); None when absent."""
    usage = usage_from_openai(raw)
    return dict(usage) if usage is not None else None  # type: ignore[arg-type]


def _response_message(response: dict[str, Any] | None) -> dict[str, Any]:
    if response is None:
        return {}
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            return message
    return {}


def _call_arguments(message: dict[str, Any], call_id: str | None) -> dict[str, Any] | None:
    calls = message.get("tool_calls")
    if call_id is None or not isinstance(calls, list):
        return None
    for call in calls:
        if not isinstance(call, dict) or call.get("id") != call_id:
            continue
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, dict):
            return arguments
        if not isinstance(arguments, str):
            return None
        if not arguments.strip():
            return {}
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {"raw": arguments}
        return value if isinstance(value, dict) else {"raw": arguments}
    return None


def observation_is_error(event: dict[str, Any]) -> bool:
    """Whether an observation event reports a failure (rules in the module docstring)."""
    kind = event.get("observation")
    if kind in ("error", "user_rejected"):
        return True
    if event.get("success") is False:
        return True
    extras = event.get("extras")
    if isinstance(extras, dict):
        metadata = extras.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        if code is None:
            code = extras.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return True
    content = event.get("content")
    return isinstance(content, str) and content.startswith("ERROR:")


class _Converter:
    """Turns the events of each evaluation into chained entries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.system: str | None = None
        self.tools: list[Any] | None = None
        self.meta: dict[str, Any] = {}
        """Where unknown event kinds are counted (`count_unknown`)."""
        self._used_ids: set[str] = set()
        self._messages = 0
        self._start_evaluation(0, None, None)

    def _start_evaluation(self, index: int, instance_id: str | None, line: int | None) -> None:
        self._index = index
        self._instance = instance_id
        self._line = line
        self._parent: str | None = None
        self._timestamp: str | None = None
        self._pending: dict[str, str] = {}  # tool_use id -> tool name, in call order
        self._by_call: dict[str, str] = {}  # recorded tool_call_id -> tool_use id
        self._by_event: dict[int, str] = {}  # action event id -> tool_use id
        self._response: str | None = None
        self._event_id: int | None = None

    # entries ----------------------------------------------------------------------------
    def _extra(self, **fields: Any) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self._instance is not None:
            extra["instanceId"] = self._instance
        if self._index > 0:
            extra["isSidechain"] = True
        if self._event_id is not None:
            extra["openhandsEventId"] = self._event_id
        extra.update(fields)
        return extra

    def _stamp(self, event: dict[str, Any]) -> str:
        parsed = parse_timestamp(event.get("timestamp"))
        if parsed is not None:
            text = parsed.astimezone(timezone.utc).isoformat(timespec="milliseconds")
            self._timestamp = text.replace("+00:00", "Z")
        elif self._timestamp is None:
            moment = _EPOCH + timedelta(seconds=len(self.entries))
            return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return self._timestamp

    def _add(self, entry: Entry) -> None:
        entry.line = self._line
        self._parent = entry.uuid
        self.entries.append(entry)

    def _user(self, content: Any, event: dict[str, Any], **fields: Any) -> None:
        self._add(
            Entry.user(
                content,
                parent_uuid=self._parent,
                timestamp=self._stamp(event),
                extra=self._extra(**fields),
            )
        )

    def _assistant(
        self,
        blocks: list[dict[str, Any]],
        event: dict[str, Any],
        *,
        message_id: str | None = None,
        model: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> None:
        if message_id is None:
            self._messages += 1
            message_id = f"oh_msg_{self._messages}"
        has_tools = any(b.get("type") == "tool_use" for b in blocks)
        self._add(
            Entry.assistant(
                blocks,
                message_id=message_id,
                model=model,
                usage=usage,
                stop_reason="tool_use" if has_tools else "end_turn",
                parent_uuid=self._parent,
                timestamp=self._stamp(event),
                extra=self._extra(),
            )
        )

    def _progress(self, event: dict[str, Any]) -> None:
        data: dict[str, Any] = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "type": "progress",
            "data": {"type": "openhands_event", "event": event},
            "uuid": new_uuid(),
            "timestamp": self._stamp(event),
        }
        data.update(self._extra())
        self._add(Entry(data))

    def _flush(self, event: dict[str, Any]) -> None:
        """Answer every open call with `NO_OBSERVATION` before the conversation moves on."""
        for tool_use_id in self._pending:
            block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": NO_OBSERVATION}
            self._user([block], event, syntheticToolResult=True)
        self._pending = {}
        self._response = None

    # events -----------------------------------------------------------------------------
    def evaluation(self, record: dict[str, Any], index: int, line: int | None) -> None:
        """Convert one evaluation (one output.jsonl line)."""
        instance = record.get("instance_id")
        self._start_evaluation(index, None if instance is None else str(instance), line)
        history: Sequence[Any] = record.get("history") or []
        last: dict[str, Any] = {}
        for item in history:
            if isinstance(item, list):
                action, observation = item
                tool_use_id = self._event(action)
                self._event(observation, answers=tool_use_id)
                last = observation
            else:
                self._event(item)
                last = item
        self._event_id = None
        self._flush(last)

    def _event(self, event: dict[str, Any], *, answers: str | None = None) -> str | None:
        event_id = event.get("id")
        self._event_id = event_id if isinstance(event_id, int) else None
        if isinstance(event.get("action"), str):
            return self._action(event)
        if isinstance(event.get("observation"), str):
            self._observation(event, answers)
        else:
            kind = event.get("kind") or event.get("type")
            count_unknown(self.meta, [f"event {kind}" if isinstance(kind, str) else "event"])
            self._progress(event)
        return None

    def _action(self, event: dict[str, Any]) -> str | None:
        kind = event["action"]
        args: dict[str, Any] = event.get("args") or {}
        source = event.get("source")
        metadata = event.get("tool_call_metadata")
        if kind == "system":
            if self.system is None and isinstance(args.get("content"), str):
                self.system = args["content"]
                tools = args.get("tools")
                self.tools = tools if isinstance(tools, list) else None
            self._progress(event)
            return None
        if isinstance(metadata, dict):
            return self._tool_call(event, kind, args, metadata)
        if kind == "message" and source in ("user", "agent"):
            text = args.get("content")
            if not isinstance(text, str):
                text = event.get("message") or ""
            urls = args.get("image_urls") or args.get("images_urls") or []
            images = [_image_block(u) for u in urls if isinstance(u, str)]
            if not text.strip() and not images:
                self._progress(event)
                return None
            self._flush(event)
            if source == "user":
                content: Any = text
                if images:
                    content = ([{"type": "text", "text": text}] if text.strip() else []) + images
                self._user(content, event)
            else:
                self._assistant([{"type": "text", "text": text}], event)
            return None
        if source == "agent" and kind in TOOL_ACTIONS:
            return self._synthetic_call(event, kind, args)
        self._progress(event)
        return None

    def _tool_call(
        self, event: dict[str, Any], kind: str, args: dict[str, Any], metadata: dict[str, Any]
    ) -> str:
        response = metadata.get("model_response")
        response = response if isinstance(response, dict) else None
        response_id = response.get("id") if response is not None else None
        response_id = response_id if isinstance(response_id, str) and response_id else None
        first = response_id is None or response_id != self._response
        if first:
            self._flush(event)
            self._response = response_id
        message = _response_message(response)
        blocks: list[dict[str, Any]] = []
        if first:
            for block in message.get("thinking_blocks") or []:
                if isinstance(block, dict) and block.get("type") in (
                    "thinking",
                    "redacted_thinking",
                ):
                    blocks.append(block)
            text = message.get("content")
            if not isinstance(text, str):
                text = "" if kind == "think" else str(args.get("thought") or "")
            if text.strip():
                blocks.append({"type": "text", "text": text})
        call_id = metadata.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        arguments = _call_arguments(message, call_id)
        if arguments is None:
            arguments = {k: v for k, v in args.items() if k != "thought" or kind == "think"}
        name = metadata.get("function_name")
        name = name if isinstance(name, str) and name else kind
        tool_use_id = unique_id(call_id or f"oh_{self._event_id}", self._used_ids)
        if call_id is not None:
            self._by_call[call_id] = tool_use_id
        if self._event_id is not None:
            self._by_event[self._event_id] = tool_use_id
        blocks.append({"type": "tool_use", "id": tool_use_id, "name": name, "input": arguments})
        model = response.get("model") if response is not None else None
        self._assistant(
            blocks,
            event,
            message_id=response_id,
            model=model if isinstance(model, str) else None,
            usage=_usage(response.get("usage")) if first and response is not None else None,
        )
        self._pending[tool_use_id] = name
        return tool_use_id

    def _synthetic_call(self, event: dict[str, Any], kind: str, args: dict[str, Any]) -> str:
        self._flush(event)
        blocks: list[dict[str, Any]] = []
        thought = args.get("thought")
        if kind != "think" and isinstance(thought, str) and thought.strip():
            blocks.append({"type": "text", "text": thought})
        arguments = {k: v for k, v in args.items() if k != "thought" or kind == "think"}
        suffix = self._event_id if self._event_id is not None else len(self.entries)
        tool_use_id = unique_id(f"oh_{suffix}", self._used_ids)
        if self._event_id is not None:
            self._by_event[self._event_id] = tool_use_id
        blocks.append({"type": "tool_use", "id": tool_use_id, "name": kind, "input": arguments})
        self._assistant(blocks, event)
        self._pending[tool_use_id] = kind
        return tool_use_id

    def _observation(self, event: dict[str, Any], answers: str | None) -> None:
        target: str | None = None
        metadata = event.get("tool_call_metadata")
        if event["observation"] not in NOT_RESULTS:
            call_id = metadata.get("tool_call_id") if isinstance(metadata, dict) else None
            cause = event.get("cause")
            for candidate in (
                self._by_call.get(call_id) if isinstance(call_id, str) else None,
                answers,
                self._by_event.get(cause) if isinstance(cause, int) else None,
            ):
                if candidate is not None and candidate in self._pending:
                    target = candidate
                    break
        if target is None:
            if isinstance(metadata, dict):
                self.warnings.append(
                    f"{self.path}:{self._line or 1}: observation {self._event_id} answers no open "
                    "tool call: kept as progress"
                )
            self._progress(event)
            return
        del self._pending[target]
        content = event.get("content")
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": target,
            "content": content if isinstance(content, str) else "",
        }
        if observation_is_error(event):
            block["is_error"] = True
        self._user([block], event)
