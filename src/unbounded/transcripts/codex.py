"""OpenAI Codex CLI sessions: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`.

Every line is `{"timestamp", "type", "payload"}` with type `session_meta` (id, cwd,
cli_version, instructions, git), `response_item` (what the model saw or said: `message`,
`reasoning`, `function_call`, `function_call_output`, `custom_tool_call`,
`custom_tool_call_output`, `local_shell_call`, `web_search_call`, …), `event_msg` (UI events:
`token_count` carries the usage; `user_message`, `agent_message`, `agent_reasoning` repeat
response items), `turn_context` (model, cwd, approval and sandbox policy, effort; newer than
0.34) and `compacted` (Codex's own compaction). Rollouts written before the envelope
existed (mid-2025, Codex 0.2x) are not read.

Mapping decisions:

- `session_meta` is not a message: its payload goes to `meta["session"]` (the first one; a
  later one, from a resumed session, is counted in `meta["session_metas"]`); its
  `instructions` (the AGENTS.md text, which Codex also sends as a context message) to
  `meta["instructions"]`, and the system prompt to `meta["system"]` when the rollout records
  it (`base_instructions`, newer versions).
- A `message` of role user becomes a user entry: `input_text` as text, `input_image` as an
  image block. Codex's context messages are not the user's request and are marked `isMeta`:
  roles developer and system, and user messages holding `<environment_context>`,
  `<user_instructions>`, `# AGENTS.md instructions for …`, `<user_shell_command>`,
  `<turn_aborted>`, `<context_update>` or `<subagent_notification>` (`is_context_message`).
- One model response is one assistant message: its items (`output_text` messages, tool
  calls) become assistant entries sharing one message id `codex_msg_<n>`, so normalization
  merges them and every call is answered in the next user message. Responses are told apart
  by `token_count` events, one per response: Codex 0.3x writes it before the response's items
  (and writes each call's output right after the call), later versions after them (outputs
  after the event). The reader looks at which comes first in the file; without usage events a
  tool output also ends a response.
- `function_call` becomes `tool_use {id: call_id, name, input: arguments parsed}`
  (`{"raw": …}` when they are not a JSON object). A shell call whose `command` is an argv list
  (`shell`, `container.exec`, `local_shell_call`) gets `command` as one string, so command
  facts and compactable-tool rules work: the script of `bash -lc <script>`, otherwise the argv
  joined shell-style; the list is kept on the entry as `codexArgv`. `custom_tool_call` (e.g.
  the freeform `apply_patch`) becomes `tool_use {input: {"input": <text>}}`;
  `local_shell_call` is named `local_shell`.
- Outputs (`function_call_output`, `custom_tool_call_output`) become user entries with one
  `tool_result`: the output text as the model saw it (a content-item list becomes text and
  image blocks). `is_error` is set when the format says the call failed (`output_failed`): a
  JSON output whose `metadata.exit_code` is not 0, an `Exit code: N` / `Process exited with
  code N` header with N not 0, an output object with `success: false`, or text starting with
  `error:`, `failed in sandbox`, `execution error`, `failed to parse function arguments` or
  `aborted`. A call still unanswered when the next response starts (or a compaction, or the
  file ends) gets the result `NO_OUTPUT` (`syntheticToolResult: true`); an output for no open
  call is kept as a progress entry with a warning.
- `reasoning` is left out of the request: it becomes a `progress` entry (data type
  `codex_reasoning`: the summary text, the raw text when Codex kept it, and whether encrypted
  content was there), which normalization drops. Its tokens are in the response's reported
  output. `web_search_call` becomes assistant text `[web search: <query>]`.
- Usage: each new `token_count` (`info.last_token_usage`; an event repeating the previous
  one, or with no info, is skipped; without `total_token_usage`, an event equal to the
  previous one is a repeat only when no response item came in between) belongs to the model
  call it reports, and is set on every assistant entry of that response (as Claude Code
  repeats it on each line), mapped with `usage_from_openai`: `input_tokens = input -
  cached`, `cache_read_input_tokens = cached`, `cache_creation_input_tokens = 0`,
  `output_tokens = output` (reasoning included). A usage event with no response items is
  Codex's own summary call (its compaction): billed all the same, it goes to
  `meta["side_calls"]` (usage, model, time, line) and is counted in
  `meta["unattributed_token_counts"]`. `meta["model_context_window"]` is the last window
  reported.
- Provider: `meta["provider"]` is `openai` unless the session meta names another
  `model_provider` than openai or azure (a local server): the model is priced as OpenAI's.
- Model: from the latest `turn_context` (or the session meta when it names one). Rollouts
  written before `turn_context` existed name no model: their calls are attributed to
  `DEFAULT_CODEX_MODEL`, with a warning saying so.
- `compacted`: a compact boundary (`create_compact_boundary`, trigger `auto` unless the record
  says `manual`, preTokens from the last usage), then what Codex put in the history instead:
  the `replacement_history` items when the record has them (the summary among them, or a
  `compaction` item with encrypted content, is the `isCompactSummary` entry); otherwise, as
  older Codex rebuilt it, the context messages again, then one summary entry holding the
  user's earlier messages and the summary text (`message`). Codex's own wording around them
  is not reproduced.
- Other event_msg types (task_started, exec_command_end, turn_aborted, …), `turn_context`,
  `ghost_snapshot` and response items of unknown types are kept as `progress` entries (data
  type `codex_event`, `codex_turn_context` or `codex_item`) that never reach the API; record
  types and response item types the reader does not know (kept as `codex_record` /
  `codex_item` progress) are counted in `meta["unknown_record_types"]`;
  `user_message`, `agent_message` and `agent_reasoning*` events, which repeat response items,
  are dropped.
- Every entry gets a fresh uuid and a `parentUuid` chain to the previous entry, the record's
  timestamp (the previous one when absent) and the session id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import orjson

from unbounded.errors import TranscriptError
from unbounded.model.content import usage_context_total
from unbounded.model.entries import (
    CompactTrigger,
    Entry,
    create_compact_boundary,
    new_uuid,
    parse_timestamp,
)
from unbounded.model.transcript import Transcript
from unbounded.transcripts.codex_items import (
    ARGV_SHELL_TOOLS,
    MODEL_OUTPUT_TYPES,
    OUTPUT_TYPES,
    PASSED_ITEM_TYPES,
    REPEATED_EVENTS,
    ROLLOUT_TYPES,
    as_content,
    codex_usage,
    command_text,
    content_blocks,
    is_context_message,
    item_texts,
    output_content,
    output_failed,
    token_key,
    validate_record,
)
from unbounded.transcripts.importing import count_unknown, parse_arguments, unique_id
from unbounded.transcripts.jsonl import ReadReport, iter_json_lines
from unbounded.transcripts.shapes import refuse_other_format

FORMAT = "codex"

DEFAULT_CODEX_MODEL = "gpt-5"
"""The model of rollouts that name none (the default of the Codex versions that wrote them)."""
MODEL_ASSUMED = "names no model"
"""Part of the warning given when `DEFAULT_CODEX_MODEL` was assumed."""
NO_OUTPUT = "[no output was recorded for this tool call]"
"""Content of the tool result made up for a call the file never answers."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Ordering = Literal["leading", "trailing"]


# -- the converter ---------------------------------------------------------------------------
@dataclass(slots=True)
class _Response:
    """One model response being built: its message id, entries and usage."""

    message_id: str
    model: str
    entries: list[Entry] = field(default_factory=list)
    usage: dict[str, int] | None = None

    def set_usage(self, usage: dict[str, int]) -> None:
        self.usage = usage
        for entry in self.entries:
            message = entry.message
            if message is not None:
                message["usage"] = dict(usage)


class _Converter:
    """Turns rollout records into chained entries (see the module docstring)."""

    def __init__(self, path: Path, ordering: Ordering) -> None:
        self.path = path
        self.ordering = ordering
        self.entries: list[Entry] = []
        self.warnings: list[str] = []
        self.meta: dict[str, Any] = {
            "session": None,
            "session_metas": 0,
            "model_context_window": None,
            "unattributed_token_counts": 0,
            "side_calls": [],
            "turn_contexts": 0,
        }
        self._line: int | None = None
        self._timestamp: str | None = None
        self._parent: str | None = None
        self._session_id: str | None = None
        self._model: str | None = None
        self._model_assumed = False
        self._responses = 0
        self._response: _Response | None = None  # the response being built
        self._unpaid: _Response | None = None  # the last response, still without usage
        self._pending_usage: dict[str, int] | None = None  # leading order: for the next one
        self._pending_at: tuple[str | None, int | None] = (None, None)  # its time and line
        self._last_usage: dict[str, int] | None = None
        self._last_token_key: tuple[Any, ...] | None = None
        self._items_since_usage = False  # model output (or a compaction) since the last event
        self.known_records = 0  # lines of a rollout record type
        self._open_calls: dict[str, str] = {}  # recorded call id -> tool_use id
        self._used_ids: set[str] = set()
        self._view_start = 0  # index of the first entry after the last boundary

    # entries ----------------------------------------------------------------------------
    def _stamp(self, record: Mapping[str, Any]) -> str:
        parsed = parse_timestamp(record.get("timestamp"))
        if parsed is not None:
            text = parsed.astimezone(timezone.utc).isoformat(timespec="milliseconds")
            self._timestamp = text.replace("+00:00", "Z")
        elif self._timestamp is None:
            moment = _EPOCH + timedelta(seconds=len(self.entries))
            return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return self._timestamp

    def _extra(self, **fields: Any) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self._session_id is not None:
            extra["sessionId"] = self._session_id
        extra.update({k: v for k, v in fields.items() if v is not None})
        return extra

    def _add(self, entry: Entry) -> None:
        entry.line = self._line
        self._parent = entry.uuid
        self.entries.append(entry)

    def _user(self, content: Any, record: Mapping[str, Any], **fields: Any) -> None:
        is_meta = bool(fields.pop("is_meta", False))
        summary = bool(fields.pop("is_compact_summary", False))
        self._add(
            Entry.user(
                content,
                parent_uuid=self._parent,
                timestamp=self._stamp(record),
                is_meta=is_meta,
                is_compact_summary=summary,
                extra=self._extra(**fields),
            )
        )

    def _progress(self, data: dict[str, Any], record: Mapping[str, Any]) -> None:
        body: dict[str, Any] = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "type": "progress",
            "data": data,
            "uuid": new_uuid(),
            "timestamp": self._stamp(record),
        }
        body.update(self._extra())
        self._add(Entry(body))

    # responses and usage ----------------------------------------------------------------
    def _current_model(self) -> str:
        if self._model is not None:
            return self._model
        if not self._model_assumed:
            self._model_assumed = True
            self.warnings.append(
                f"{self.path}: the rollout {MODEL_ASSUMED} (no turn_context: an older Codex, "
                f"such as 0.34); its calls are attributed to {DEFAULT_CODEX_MODEL}, Codex's "
                "default then"
            )
        return DEFAULT_CODEX_MODEL

    def _response_for_output(self, record: Mapping[str, Any]) -> _Response:
        """The response a model-output item belongs to, starting a new one when needed."""
        if self._response is None:
            self._answer_open_calls(record)
            self._responses += 1
            response = _Response(f"codex_msg_{self._responses}", self._current_model())
            self._response = response
            if self.ordering == "leading":
                if self._pending_usage is not None:
                    response.usage = self._pending_usage
                    self._pending_usage = None
            else:
                self._unpaid = response
        return self._response

    def _end_response(self) -> None:
        self._response = None

    def _assistant(
        self, blocks: list[dict[str, Any]], record: Mapping[str, Any], **extra: Any
    ) -> None:
        response = self._response_for_output(record)
        has_tools = any(b.get("type") == "tool_use" for b in blocks)
        entry = Entry.assistant(
            blocks,
            message_id=response.message_id,
            model=response.model,
            usage=response.usage,
            stop_reason="tool_use" if has_tools else "end_turn",
            parent_uuid=self._parent,
            timestamp=self._stamp(record),
            extra=self._extra(**extra),
        )
        response.entries.append(entry)
        self._add(entry)

    def _token_count(self, info: Mapping[str, Any]) -> None:
        window = info.get("model_context_window")
        if isinstance(window, int):
            self.meta["model_context_window"] = window
        last = info.get("last_token_usage")
        key = token_key(info)
        items_between, self._items_since_usage = self._items_since_usage, False
        # Totals grow with every call, so equal totals are a repeat (a rate-limit refresh).
        # Without totals, equal last usage is a repeat only with no item in between: two
        # responses of the same size are two calls.
        repeat = key == self._last_token_key and (bool(key[0]) or not items_between)
        if not isinstance(last, dict) or repeat:
            return
        self._last_token_key = key
        usage = codex_usage(last)
        if usage is None or usage_context_total(usage) == 0:
            return
        self._last_usage = usage
        self._end_response()
        if self.ordering == "leading":
            self._drop_pending_usage()
            self._pending_usage = usage
            self._pending_at = (self._timestamp, self._line)
        elif self._unpaid is not None:
            self._unpaid.set_usage(usage)
            self._unpaid = None
        else:
            self._side_call(usage, self._timestamp, self._line)

    def _side_call(self, usage: dict[str, int], timestamp: str | None, line: int | None) -> None:
        """A usage event no response item follows: Codex's own summary call."""
        self.meta["unattributed_token_counts"] += 1
        model = self._current_model()
        call = {"usage": dict(usage), "model": model, "timestamp": timestamp, "line": line}
        self.meta["side_calls"].append(call)

    def _drop_pending_usage(self) -> None:
        """A leading usage event that no response took is a side call."""
        if self._pending_usage is not None:
            self._side_call(self._pending_usage, *self._pending_at)
            self._pending_usage = None

    # tool calls ----------------------------------------------------------------------------
    def _answer_open_calls(self, record: Mapping[str, Any]) -> None:
        """Give every unanswered call the `NO_OUTPUT` result before the conversation moves on."""
        for tool_use_id in self._open_calls.values():
            block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": NO_OUTPUT}
            self._user([block], record, syntheticToolResult=True)
        self._open_calls = {}

    def _tool_use(
        self,
        call_id: str,
        name: str,
        tool_input: dict[str, Any],
        record: Mapping[str, Any],
        **extra: Any,
    ) -> None:
        tool_use_id = unique_id(call_id, self._used_ids)
        if tool_use_id != call_id:
            self.warnings.append(
                f"{self.path}:{self._line}: tool call id {call_id} is used twice; renamed "
                f"{tool_use_id}"
            )
        block = {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}
        self._assistant([block], record, **extra)
        self._open_calls[call_id] = tool_use_id

    def _function_call(self, item: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        name = str(item["name"])
        arguments = parse_arguments(item.get("arguments"))
        argv = arguments.get("command")
        extra: dict[str, Any] = {}
        if (
            name in ARGV_SHELL_TOOLS
            and isinstance(argv, list)
            and all(isinstance(a, str) for a in argv)
        ):
            arguments["command"] = command_text(argv)
            extra["codexArgv"] = argv
        self._tool_use(str(item["call_id"]), name, arguments, record, **extra)

    def _local_shell_call(self, item: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        action = item["action"]
        argv = [str(a) for a in action.get("command") or []]
        tool_input: dict[str, Any] = {"command": command_text(argv)}
        for name in ("working_directory", "timeout_ms"):
            if action.get(name) is not None:
                tool_input[name] = action[name]
        call_id = item.get("call_id") or item.get("id") or f"local_shell_{len(self.entries)}"
        self._tool_use(str(call_id), "local_shell", tool_input, record, codexArgv=argv)

    def _output(self, item: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        call_id = str(item["call_id"])
        tool_use_id = self._open_calls.pop(call_id, None)
        if tool_use_id is None:
            self.warnings.append(
                f"{self.path}:{self._line}: output for call {call_id}, which is not open: kept "
                "as progress"
            )
            self._progress({"type": "codex_item", "item": dict(item)}, record)
            return
        output = item.get("output")
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": output_content(output),
        }
        if output_failed(output):
            block["is_error"] = True
        self._user([block], record)

    # records -------------------------------------------------------------------------------
    def record(self, line: int, record: dict[str, Any]) -> None:
        """Convert one rollout line."""
        self._line = line
        kind = record.get("type")
        payload = record.get("payload")
        if kind not in ROLLOUT_TYPES or not isinstance(payload, dict):
            count_unknown(self.meta, [kind if isinstance(kind, str) else "record without a type"])
            self._progress({"type": "codex_record", "record": record}, record)
            return
        self.known_records += 1
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self.meta["turn_contexts"] += 1
            model = payload.get("model")
            if isinstance(model, str) and model:
                self._model = model
            self._progress({"type": "codex_turn_context", "payload": payload}, record)
        elif kind == "compacted":
            self._items_since_usage = True
            self._compacted(payload, record)
        elif kind == "event_msg":
            self._event(payload, record)
        else:
            # Only the model's own output marks a new response (a user message or a tool's
            # output between two equal events does not: a refresh can follow them).
            if payload.get("type") in MODEL_OUTPUT_TYPES and (
                payload.get("type") != "message" or payload.get("role") == "assistant"
            ):
                self._items_since_usage = True
            self._item(payload, record)

    def _session_meta(self, payload: dict[str, Any]) -> None:
        self.meta["session_metas"] += 1
        if self.meta["session"] is not None:
            return
        self.meta["session"] = payload
        session_id = payload.get("id")
        self._session_id = session_id if isinstance(session_id, str) else None
        model = payload.get("model")
        if self._model is None and isinstance(model, str) and model:
            self._model = model

    def _event(self, payload: dict[str, Any], record: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            info = payload.get("info")
            if isinstance(info, dict):
                self._stamp(record)  # the event's own time, for a side call it reports
                self._token_count(info)
        elif kind not in REPEATED_EVENTS:
            self._progress({"type": "codex_event", "event": payload}, record)

    def _item(self, item: dict[str, Any], record: Mapping[str, Any]) -> None:
        kind = item.get("type")
        role = item.get("role")
        if kind == "message" and role != "assistant":
            self._input_message(item, record)
        elif kind == "message":
            blocks = [b for b in content_blocks(item["content"]) if b["type"] == "text"]
            if any(str(b["text"]).strip() for b in blocks):
                self._assistant(blocks, record)
        elif kind == "reasoning":
            self._response_for_output(record)
            self._progress(_reasoning_data(item), record)
        elif kind == "function_call":
            self._function_call(item, record)
        elif kind == "custom_tool_call":
            tool_input = {"input": item.get("input") or ""}
            self._tool_use(str(item["call_id"]), str(item["name"]), tool_input, record)
        elif kind == "local_shell_call":
            self._local_shell_call(item, record)
        elif kind == "web_search_call":
            action = item.get("action")
            query = action.get("query") if isinstance(action, dict) else None
            text = f"[web search: {query}]" if query else "[web search]"
            self._assistant([{"type": "text", "text": text}], record)
        elif kind in OUTPUT_TYPES:
            if self.ordering != "leading":
                self._end_response()
            self._output(item, record)
        else:
            if kind not in PASSED_ITEM_TYPES:
                count_unknown(self.meta, [f"response_item {kind}"])
            self._progress({"type": "codex_item", "item": item}, record)

    def _input_message(self, item: dict[str, Any], record: Mapping[str, Any]) -> None:
        self._end_response()
        parts = item["content"]
        blocks = content_blocks(parts)
        if not blocks:
            return
        role = str(item.get("role"))
        context = role != "user" or is_context_message(item_texts(parts))
        self._user(
            as_content(blocks),
            record,
            is_meta=context,
            codexRole=role if role != "user" else None,
        )

    # compaction ----------------------------------------------------------------------------
    def _compacted(self, payload: dict[str, Any], record: Mapping[str, Any]) -> None:
        self._end_response()
        self._answer_open_calls(record)
        self._unpaid = None
        self._drop_pending_usage()
        view = self.entries[self._view_start :]
        trigger: CompactTrigger = "manual" if payload.get("trigger") == "manual" else "auto"
        boundary = create_compact_boundary(
            trigger,
            usage_context_total(self._last_usage) if self._last_usage else 0,
            logical_parent_uuid=self._parent,
            session_id=self._session_id,
            timestamp=self._stamp(record),
            extra_metadata={"source": "codex"},
        )
        self._add(boundary)
        self._view_start = len(self.entries) - 1
        summary = payload.get("message") or ""
        history = payload.get("replacement_history")
        if isinstance(history, list):
            self._replacement_history(history, summary, record)
            return
        for entry in view:
            if entry.type == "user" and entry.is_meta and not entry.is_compact_summary:
                fields = {"codexRole": entry.data.get("codexRole")}
                self._user(entry.content, record, is_meta=True, **fields)
        prompts = [_entry_text(e) for e in view if _is_prompt(e)]
        parts = [p for p in prompts if p.strip()]
        text = "\n\n".join([*parts, summary] if summary else parts)
        if text.strip():
            self._user(text, record, is_compact_summary=True)

    def _replacement_history(
        self, history: list[Any], summary: str, record: Mapping[str, Any]
    ) -> None:
        marked = False
        for item in history:
            kind = item.get("type")
            if kind in ("compaction", "compaction_summary"):
                size = len(str(item.get("encrypted_content") or ""))
                text = f"[Codex compaction summary: encrypted, {size:,} characters]"
                self._user(text, record, is_compact_summary=True)
                marked = True
            elif kind == "message":
                blocks = content_blocks(item["content"])
                if not blocks:
                    continue
                role = str(item.get("role"))
                texts = item_texts(item["content"])
                is_summary = not marked and bool(summary) and any(summary in t for t in texts)
                marked = marked or is_summary
                if role == "assistant":
                    # Codex keeps no assistant messages here; if one is, it is context.
                    self._user(as_content(blocks), record, is_meta=True, codexRole=role)
                else:
                    context = not is_summary and (role != "user" or is_context_message(texts))
                    self._user(
                        as_content(blocks),
                        record,
                        is_meta=context,
                        is_compact_summary=is_summary,
                        codexRole=role if role != "user" else None,
                    )
            else:
                self._progress({"type": "codex_item", "item": item}, record)
        if not marked and summary.strip():
            self._user(summary, record, is_compact_summary=True)

    def finish(self) -> None:
        """Answer the calls the file leaves open."""
        self._end_response()
        self._answer_open_calls({"timestamp": self._timestamp})
        self._drop_pending_usage()


def _reasoning_data(item: Mapping[str, Any]) -> dict[str, Any]:
    summary = item_texts(item.get("summary") or [])
    raw = item_texts(item.get("content") or [])
    data: dict[str, Any] = {
        "type": "codex_reasoning",
        "summary": "\n\n".join(summary),
        "encrypted": bool(item.get("encrypted_content")),
    }
    if raw:
        data["text"] = "\n\n".join(raw)
    return data


def _entry_text(entry: Entry) -> str:
    content = entry.content
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _is_prompt(entry: Entry) -> bool:
    """A user message the user typed, or an earlier summary (Codex collects both)."""
    if entry.type != "user" or (entry.is_meta and not entry.is_compact_summary):
        return False
    content = entry.content
    return not (isinstance(content, list) and any(b.get("type") == "tool_result" for b in content))


# -- reading -------------------------------------------------------------------------------
def detect_ordering(path: Path) -> Ordering:
    """Whether usage events come before their response's items (Codex 0.3x) or after.

    The first usage event (with info) that a response item follows decides: a model output
    right after it means it opened a response ("leading"); a tool output or a user message
    means it closed one ("trailing"). Other events, turn contexts and lines that do not parse
    (left to the real reader) are passed over; a compaction forgets the event, which then
    belonged to Codex's own summary call. With no such event: "trailing".
    """
    after_usage = False
    with path.open("rb") as handle:
        for raw in handle:
            if not after_usage and b'"token_count"' not in raw:
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            payload = record.get("payload") if isinstance(record, dict) else None
            if not isinstance(payload, dict):
                continue
            kind = payload.get("type")
            if record.get("type") == "compacted":
                after_usage = False
            elif record.get("type") == "event_msg":
                if kind == "token_count" and isinstance(payload.get("info"), dict):
                    after_usage = True
            elif after_usage and record.get("type") == "response_item":
                if not isinstance(kind, str):
                    continue  # a malformed item: left to the reader's checks (--skip-invalid)
                if kind == "message":
                    return "trailing" if payload.get("role") != "assistant" else "leading"
                if kind in MODEL_OUTPUT_TYPES:
                    return "leading"
                if kind in OUTPUT_TYPES:
                    return "trailing"
    return "trailing"


def read_codex(path: str | Path, *, skip_invalid: bool = False) -> Transcript:
    """Read a Codex CLI rollout into entries (see the module docstring for the mapping)."""
    source = Path(path)
    report = ReadReport()
    records = iter_json_lines(
        source, skip_invalid=skip_invalid, report=report, validate=validate_record
    )
    first = next(records, None)
    if first is None:
        raise TranscriptError("empty file: no records to read", path=source, line=1)
    converter = _Converter(source, detect_ordering(source))
    converter.record(*first)
    for line, record in records:
        converter.record(line, record)
    converter.finish()
    if not converter.known_records:
        refuse_other_format(source, FORMAT)  # nothing of a rollout's: another agent's file?
    meta = converter.meta
    session = meta.get("session") or {}
    base = session.get("base_instructions")
    meta["system"] = base.get("text") if isinstance(base, dict) else None
    meta["instructions"] = session.get("instructions")
    meta["ordering"] = converter.ordering
    # Codex calls OpenAI (or Azure's OpenAI models) unless it was pointed at a local server.
    model_provider = session.get("model_provider")
    meta["provider"] = "openai" if model_provider in (None, "openai", "azure") else None
    return Transcript(
        entries=converter.entries,
        format=FORMAT,
        path=source,
        warnings=report.warnings + converter.warnings,
        skipped_lines=report.skipped_lines,
        meta=meta,
    )
