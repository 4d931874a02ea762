"""OpenHands agent-SDK conversations (the OpenHands CLI and software-agent SDK, V1).

The SDK persists a conversation as a folder: `base_state.json` (agent settings and `stats`)
and `events/event-<index>-<id>.json`, one typed event per file (`kind` names the class). This
reader takes the conversation folder, its `events` folder, a JSON file holding a list of such
events, or a JSON Lines file with one event per line. The events:

- `SystemPromptEvent`: `system_prompt.text` (and `dynamic_context.text`) go to
  `meta["system"]`, `tools` to `meta["tools"]`; kept as a progress entry.
- `MessageEvent`: `llm_message` (`role`, `content` parts) plus `extended_content`. From the
  user: a user entry. From the agent: assistant text, message id `llm_response_id`. From the
  environment (a nudge the SDK sends): a user entry marked `isMeta`.
- `ActionEvent`: one tool call of a response. The actions of one response share its
  `llm_response_id` and become assistant entries with that message id (normalization merges
  them): its `thought` text (first action of a response only), then `tool_use {id:
  tool_call_id, name: tool_name, input: tool_call.arguments parsed}` (the `action` fields
  without `kind` when the call has no arguments).
- `ObservationEvent`, `UserRejectObservation`, `AgentErrorEvent` answer a call by
  `tool_call_id`: a user entry with one `tool_result` (the observation's text content;
  "Action rejected: <reason>"; the error), `is_error` when the observation says so (`is_error`,
  a non-zero `exit_code`), for a rejection and for an agent error.
- Other kinds the SDK writes (state updates, condensation requests and results, pauses, token
  ids, hooks) are kept as progress entries (data type `openhands_sdk_event`) that never reach
  the API; a kind the reader does not know is also counted in `meta["unknown_record_types"]`.
  A `Condensation` (the condenser forgetting events) is kept that way: the view is the whole
  history, not the condenser's.
- Usage: the SDK records it per call in its stats (`usage_to_metrics.<usage id>.token_usages`,
  in `base_state.json` and in `stats` state updates): each `response_id` of a response in the
  events gets its usage on that response's first entry, mapped like litellm usage (`input =
  prompt_tokens - cache_read_tokens - cache_write_tokens`). Token usages of responses that are
  not in the events (the condenser's summary calls) are the agent's side calls
  (`meta["side_calls"]`: billed, not conversation). The model comes from the usage record, else
  `base_state.json`'s `agent.llm.model`.
- A call no observation answers gets `NO_OBSERVATION` before the next response (or at the end);
  times come from each event's `timestamp`; entries get fresh uuids chained in event order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry, new_uuid, parse_timestamp
from unbounded.model.record_checks import token_counts_problem
from unbounded.model.transcript import Transcript
from unbounded.transcripts.importing import (
    count_unknown,
    image_source,
    json_kind,
    parse_arguments,
    recorded_usage,
    unique_id,
)
from unbounded.transcripts.jsonl import ReadReport, iter_json_lines
from unbounded.transcripts.swe_agent import load_json_document

FORMAT = "openhands-sdk"

NO_OBSERVATION = "[no observation was recorded for this tool call]"
"""Content of the tool result made up for a call the file never answers."""

EVENT_KINDS: frozenset[str] = frozenset(
    {
        "SystemPromptEvent",
        "MessageEvent",
        "ActionEvent",
        "ObservationEvent",
        "UserRejectObservation",
        "AgentErrorEvent",
    }
)
"""Event kinds that carry the conversation."""
PASSED_KINDS: frozenset[str] = frozenset(
    {
        "ConversationStateUpdateEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "PauseEvent",
        "TokenEvent",
        "ConversationErrorEvent",
        "HookExecutionEvent",
        "SecurityAnalyzerEvent",
        "StreamingDeltaEvent",
    }
)
"""Event kinds the reader knows and keeps as progress (never sent to the model)."""
_FILE_NAME = re.compile(r"^event-(\d+)(?:-.*)?\.json$")
_HINT = (
    "an OpenHands SDK conversation is a folder with base_state.json and events/event-*.json, "
    "or a JSON list (or JSON Lines) of its events"
)


# -- detection -----------------------------------------------------------------------------
def looks_like_sdk_event(record: object) -> bool:
    """One SDK event: a known `kind` with an `id` (or `source`)."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("kind"), str)
        and record["kind"] in EVENT_KINDS | PASSED_KINDS
        and ("id" in record or "source" in record)
    )


def looks_like_sdk_events(items: list[Any]) -> bool:
    """A JSON list of SDK events."""
    return bool(items) and looks_like_sdk_event(items[0])


def sniff_sdk_events(head: bytes) -> bool:
    """Cheap check of a pretty-printed event list or event from its first bytes."""
    start = head.lstrip()
    return start[:1] in (b"[", b"{") and any(
        f'"kind": "{kind}"'.encode() in start or f'"kind":"{kind}"'.encode() in start
        for kind in EVENT_KINDS
    )


def conversation_folder(path: Path) -> Path | None:
    """The events folder of an SDK conversation folder (or the events folder itself), None
    when `path` is neither."""
    for candidate in (path / "events", path):
        if candidate.is_dir() and any(_FILE_NAME.match(p.name) for p in candidate.iterdir()):
            return candidate
    return None


# -- reading -------------------------------------------------------------------------------
def read_openhands_sdk(path: str | Path, *, skip_invalid: bool = False) -> Transcript:
    """Read an SDK conversation (folder, event list or event lines; module docstring)."""
    source = Path(path)
    report = ReadReport()
    state: dict[str, Any] = {}
    state_path: Path | None = None
    if source.is_dir():
        folder = conversation_folder(source)
        if folder is None:
            raise TranscriptError(
                "the folder holds no OpenHands event files", path=source, hint=_HINT
            )
        base = folder.parent / "base_state.json" if folder.name == "events" else None
        if base is not None and base.is_file():
            loaded = load_json_document(base, hint=_HINT)
            state = loaded if isinstance(loaded, dict) else {}
            state_path = base
        events = list(_folder_events(folder))
    else:
        events = list(_file_events(source, skip_invalid, report))
    converter = _Converter(source, state, state_path)
    for number, (where, event) in enumerate(events, 1):
        converter.event(number, where, event)
    converter.finish()
    meta: dict[str, Any] = {
        "system": converter.system,
        "tools": converter.tools,
        "side_calls": converter.side_calls(),
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


def _folder_events(folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    files = sorted(
        (int(match.group(1)), p.name, p)
        for p in folder.iterdir()
        if (match := _FILE_NAME.match(p.name)) is not None
    )
    for _, name, file in files:
        event = load_json_document(file, hint=_HINT)
        if not isinstance(event, dict):
            raise TranscriptError(
                f"an event file should hold a JSON object, found {json_kind(event)}",
                path=file,
                line=1,
                hint=_HINT,
            )
        yield name, event


def _file_events(
    path: Path, skip_invalid: bool, report: ReadReport
) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open("rb") as handle:
        head = handle.read(64).lstrip()
    if head.startswith(b"["):
        document = load_json_document(path, hint=_HINT)
        if not isinstance(document, list):
            raise TranscriptError("expected a JSON list of events", path=path, line=1, hint=_HINT)
        for index, event in enumerate(document):
            if not isinstance(event, dict):
                raise TranscriptError(
                    f"events[{index}] should be an object, found {json_kind(event)}",
                    path=path,
                    line=1,
                    hint=_HINT,
                )
            yield f"events[{index}]", event
        return
    first = next(iter_json_lines(path, skip_invalid=skip_invalid, report=ReadReport()), None)
    if first is not None and not looks_like_sdk_event(first[1]):
        # One pretty-printed event, not JSON Lines.
        document = load_json_document(path, hint=_HINT)
        if isinstance(document, dict):
            yield "event", document
            return
    for line, event in iter_json_lines(path, skip_invalid=skip_invalid, report=report):
        yield f"line {line}", event


def _text_parts(parts: Any) -> list[dict[str, Any]]:
    """SDK content parts (TextContent, ImageContent) as API blocks."""
    blocks: list[dict[str, Any]] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and part.get("type", "text") == "text":
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image":
            for url in part.get("image_urls") or []:
                if isinstance(url, str):
                    blocks.append({"type": "image", "source": image_source(url)})
    return blocks


def _text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b["text"]) for b in blocks if b["type"] == "text")


def _token_usages(stats: Any, path: Path, where: str, field: str) -> list[dict[str, Any]]:
    """Every per-call usage record in SDK stats, with the usage id it was filed under; a
    count that is negative or not a whole number is a TranscriptError naming the field."""
    found: list[dict[str, Any]] = []
    metrics = stats.get("usage_to_metrics") if isinstance(stats, dict) else None
    for usage_id, entry in (metrics or {}).items() if isinstance(metrics, dict) else ():
        usages = entry.get("token_usages") if isinstance(entry, dict) else None
        for position, usage in enumerate(usages if isinstance(usages, list) else []):
            at = f"{field}.usage_to_metrics.{usage_id}.token_usages[{position}]"
            problem = token_counts_problem(usage, at)
            if problem is not None:
                raise TranscriptError(f"{where}{problem}", path=path, hint=_HINT)
            if isinstance(usage, dict):
                found.append({**usage, "usage_id": usage_id})
    return found


def _sdk_usage(record: dict[str, Any]) -> dict[str, int] | None:
    """A TokenUsage record in Anthropic names (`prompt_tokens` counts cache reads and writes)."""
    read = record.get("cache_read_tokens")
    write = record.get("cache_write_tokens")
    return recorded_usage(
        {
            "prompt_tokens": record.get("prompt_tokens"),
            "completion_tokens": record.get("completion_tokens"),
            "cache_read_input_tokens": read if isinstance(read, int) else 0,
            "cache_creation_input_tokens": write if isinstance(write, int) else 0,
        }
    )


class _Converter:
    """Turns SDK events into chained entries (see the module docstring)."""

    def __init__(self, path: Path, state: dict[str, Any], state_path: Path | None = None) -> None:
        self.path = path
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.meta: dict[str, Any] = {}
        self.system: str | None = None
        self.tools: list[Any] | None = None
        agent = state.get("agent") if isinstance(state.get("agent"), dict) else {}
        llm = agent.get("llm") if isinstance(agent, dict) else None
        model = llm.get("model") if isinstance(llm, dict) else None
        self.model = model if isinstance(model, str) and model else None
        self._usages: dict[str, dict[str, Any]] = {}
        state_file = state_path if state_path is not None else path
        for record in _token_usages(state.get("stats"), state_file, "", "stats"):
            self._remember_usage(record)
        self._parent: str | None = None
        self._timestamp: str | None = None
        self._used_ids: set[str] = set()
        self._by_call: dict[str, str] = {}  # recorded tool_call_id -> tool_use id
        self._pending: list[str] = []
        self._response: str | None = None
        self._responses: set[str] = set()  # response ids of the events
        self._first_entry: dict[str, Entry] = {}  # response id -> its first assistant entry
        self._where = ""
        self._number = 0

    def _remember_usage(self, record: dict[str, Any]) -> None:
        response = record.get("response_id")
        if isinstance(response, str) and response:
            self._usages[response] = record

    # entries ----------------------------------------------------------------------------
    def _stamp(self, event: dict[str, Any]) -> str:
        parsed = parse_timestamp(event.get("timestamp"))
        if parsed is not None:
            text = parsed.isoformat(timespec="milliseconds")
            self._timestamp = text.replace("+00:00", "Z")
        return self._timestamp or "1970-01-01T00:00:00.000Z"

    def _add(self, entry: Entry, event: dict[str, Any]) -> None:
        entry.line = self._number
        event_id = event.get("id")
        if isinstance(event_id, str):
            entry.data["openhandsEventId"] = event_id
        self._parent = entry.uuid
        self.entries.append(entry)

    def _user(self, content: Any, event: dict[str, Any], **extra: Any) -> None:
        is_meta = bool(extra.pop("is_meta", False))
        entry = Entry.user(
            content,
            parent_uuid=self._parent,
            timestamp=self._stamp(event),
            is_meta=is_meta,
            extra=extra or None,
        )
        self._add(entry, event)

    def _progress(self, event: dict[str, Any]) -> None:
        body = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "type": "progress",
            "data": {"type": "openhands_sdk_event", "event": event},
            "uuid": new_uuid(),
            "timestamp": self._stamp(event),
        }
        self._add(Entry(body), event)

    def _assistant(self, blocks: list[dict[str, Any]], event: dict[str, Any]) -> None:
        response = event.get("llm_response_id")
        response = response if isinstance(response, str) and response else None
        if response is None or response != self._response:
            self._flush(event)
        self._response = response
        message_id = response or f"oh_sdk_msg_{len(self.entries)}"
        has_tools = any(b["type"] == "tool_use" for b in blocks)
        entry = Entry.assistant(
            blocks,
            message_id=message_id,
            model=self.model,
            stop_reason="tool_use" if has_tools else "end_turn",
            parent_uuid=self._parent,
            timestamp=self._stamp(event),
        )
        if response is not None:
            self._responses.add(response)
            self._first_entry.setdefault(response, entry)
        self._add(entry, event)

    def _flush(self, event: dict[str, Any]) -> None:
        for tool_use_id in self._pending:
            block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": NO_OBSERVATION}
            self._user([block], event, syntheticToolResult=True)
        self._pending = []

    # events -----------------------------------------------------------------------------
    def event(self, number: int, where: str, event: dict[str, Any]) -> None:
        """Convert one event (`number`: its 1-based place, kept as the entries' line)."""
        self._where = where
        self._number = number
        for name in ("kind", "timestamp"):  # both read before any other check
            value = event.get(name)
            if value is not None and not isinstance(value, str):
                raise TranscriptError(
                    f"{where}: field '{name}' should be a string, found {json_kind(value)}",
                    path=self.path,
                    hint=_HINT,
                )
        kind = event.get("kind")
        if kind == "SystemPromptEvent":
            self._system(event)
        elif kind == "MessageEvent":
            self._message(event)
        elif kind == "ActionEvent":
            self._action(event)
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            self._observation(event)
        else:
            if kind == "ConversationStateUpdateEvent" and event.get("key") == "stats":
                usages = _token_usages(event.get("value"), self.path, f"{where}: ", "value")
                for record in usages:
                    self._remember_usage(record)
            if kind not in PASSED_KINDS:
                count_unknown(self.meta, [f"event {kind}" if isinstance(kind, str) else "event"])
            self._progress(event)

    def _system(self, event: dict[str, Any]) -> None:
        texts = [
            part.get("text")
            for part in (event.get("system_prompt"), event.get("dynamic_context"))
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        if self.system is None and texts:
            self.system = "\n\n".join(str(t) for t in texts)
            tools = event.get("tools")
            self.tools = tools if isinstance(tools, list) else None
        self._progress(event)

    def _message(self, event: dict[str, Any]) -> None:
        message = event.get("llm_message")
        message = message if isinstance(message, dict) else {}
        blocks = _text_parts(message.get("content")) + _text_parts(event.get("extended_content"))
        if not blocks:
            self._progress(event)
            return
        source = event.get("source")
        if source == "agent" or message.get("role") == "assistant":
            self._assistant(blocks, event)
            return
        self._flush(event)
        self._response = None
        content: Any = _text(blocks) if all(b["type"] == "text" for b in blocks) else blocks
        self._user(content, event, is_meta=source == "environment")

    def _action(self, event: dict[str, Any]) -> None:
        blocks: list[dict[str, Any]] = []
        response = event.get("llm_response_id")
        if response is None or response != self._response:
            thought = _text(_text_parts(event.get("thought")))
            if thought.strip():
                blocks.append({"type": "text", "text": thought})
        recorded_call = event.get("tool_call")
        call: dict[str, Any] = recorded_call if isinstance(recorded_call, dict) else {}
        recorded = event.get("tool_call_id") or call.get("id")
        name = event.get("tool_name") or call.get("name") or "tool"
        arguments = parse_arguments(call.get("arguments"))
        if not arguments and isinstance(event.get("action"), dict):
            arguments = {k: v for k, v in event["action"].items() if k != "kind"}
        tool_use_id = unique_id(
            recorded if isinstance(recorded, str) and recorded else f"oh_sdk_{len(self.entries)}",
            self._used_ids,
        )
        if isinstance(recorded, str):
            self._by_call[recorded] = tool_use_id
        blocks.append(
            {"type": "tool_use", "id": tool_use_id, "name": str(name), "input": arguments}
        )
        self._assistant(blocks, event)
        self._pending.append(tool_use_id)

    def _observation(self, event: dict[str, Any]) -> None:
        recorded = event.get("tool_call_id")
        target = self._by_call.get(recorded) if isinstance(recorded, str) else None
        if target is None or target not in self._pending:
            self.warnings.append(
                f"{self.path} ({self._where}): observation answers no open tool call: kept as "
                "progress"
            )
            self._progress(event)
            return
        self._pending.remove(target)
        kind = event.get("kind")
        error = kind != "ObservationEvent"
        if kind == "UserRejectObservation":
            text = f"Action rejected: {event.get('rejection_reason') or 'rejected by the user'}"
        elif kind == "AgentErrorEvent":
            text = str(event.get("error") or "")
        else:
            observation = event.get("observation")
            observation = observation if isinstance(observation, dict) else {}
            text = _text(_text_parts(observation.get("content")))
            if not text and isinstance(observation.get("output"), str):
                text = observation["output"]  # SDK versions before `content`
            code = observation.get("exit_code")
            error = observation.get("is_error") is True or (
                isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)
            )
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": target, "content": text}
        if error:
            block["is_error"] = True
        self._user([block], event)

    def finish(self) -> None:
        """Answer the calls left open and set each response's recorded usage."""
        self._flush({})
        for response, entry in self._first_entry.items():
            record = self._usages.get(response)
            usage = _sdk_usage(record) if record is not None else None
            message = entry.message
            if usage is None or message is None:
                continue
            message["usage"] = usage
            model = record.get("model") if record is not None else None
            if isinstance(model, str) and model:
                message["model"] = model

    def side_calls(self) -> list[dict[str, Any]]:
        """The recorded calls that are no response of the events (a condenser's summaries)."""
        calls: list[dict[str, Any]] = []
        for response, record in self._usages.items():
            if response in self._responses:
                continue
            usage = _sdk_usage(record)
            if usage is None:
                continue
            model = record.get("model")
            calls.append(
                {
                    "usage": usage,
                    "model": model if isinstance(model, str) and model else self.model,
                    "timestamp": self._timestamp,
                    "line": None,
                    "usage_id": record.get("usage_id"),
                }
            )
        return calls
