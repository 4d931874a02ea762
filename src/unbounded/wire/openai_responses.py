"""The OpenAI Responses API wire format: the project's Anthropic-shaped request as a
`responses.create` call, and the reply, its stream events and its errors back.

The rules (docs/providers.md lists them with the Chat Completions ones):

- system -> `instructions`; messages -> `input` items (`unbounded.wire.openai_items`, whose
  names are re-exported here): text, images and files as input parts, `tool_use` as
  `function_call`, `tool_result` as `function_call_output`;
- items the library does not read (reasoning, compaction...) travel as `opaque_item` blocks
  and go back exactly as the API returned them;
- `max_tokens` -> `max_output_tokens`; tools with an `input_schema` -> function tools, other
  tools (the API's built-in ones, kept as the caller gave them) as they are;
- `context_management.edits` -> `context_management`: its Responses `compaction` entries
  (`compaction.native`) as they are; Anthropic's edits have no Responses form and are dropped;
- cache_control, betas, cache_edits, thinking and metadata are dropped.

A reply's output items become one assistant message: text from `message` items, `tool_use`
from `function_call` items, everything else opaque. Usage: `input_tokens` counts the tokens
read from the cache (`input_tokens_details.cached_tokens`) and written to it
(`cache_write_tokens`), which are moved to `cache_read_input_tokens` and
`cache_creation_input_tokens`.

Byte-for-byte: an SDK model re-orders an item's keys (its fields' order, not the server's),
so the provider reads a reply from its raw JSON (`response_of` takes the parsed body,
`unbounded.wire.sse.SseDecoder` a stream's raw lines): the opaque items keep the server's
keys, order and values, and go back as the same bytes. A reply given as an SDK object (the
drop-ins') is read the same way, in the order its model gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unbounded.errors import PromptTooLongError, ProviderError, ServerError
from unbounded.model.content import ContentBlock, Usage, usage_from_openai_responses
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.wire.base import (
    ALL_FIELDS,
    InboundMessages,
    is_prompt_too_long_message,
    parse_prompt_too_long,
)
from unbounded.wire.context_edits import RESPONSES_COMPACTION
from unbounded.wire.openai_chat import OpenAIChat
from unbounded.wire.openai_items import (
    OPAQUE_ITEM,
    RESPONSES_FORMAT,
    is_opaque_block,
    items_to_messages,
    messages_to_items,
    opaque_block,
    plain_item,
)

INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
"""`incomplete_details.reason` -> Anthropic stop_reason."""


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions as Responses function tools; a tool without an
    `input_schema` (one of the API's built-in tools) goes as it is."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if "input_schema" not in tool:
            out.append(dict(tool))
            continue
        function: dict[str, Any] = {"type": "function", "name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        out.append(function)
    return out


def convert_tool_choice(choice: Mapping[str, Any]) -> Any:
    """Anthropic tool_choice -> Responses tool_choice."""
    kind = choice.get("type")
    if kind == "any":
        return "required"
    if kind == "tool":
        return {"type": "function", "name": str(choice.get("name", ""))}
    if kind == "none":
        return "none"
    return "auto"


def context_management(request: ProviderRequest) -> list[dict[str, Any]] | None:
    """The Responses `context_management` of a request: its `compaction` edits; None when it
    asks for none."""
    edits = (request.get("context_management") or {}).get("edits") or []
    kept = [
        dict(edit)
        for edit in edits
        if isinstance(edit, Mapping) and edit.get("type") == RESPONSES_COMPACTION
    ]
    return kept or None


def _instructions(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))


def reply_content(output: Sequence[Any]) -> list[ContentBlock]:
    """A reply's output items as the blocks of one assistant message."""
    content: list[Any] = []
    for message in items_to_messages([plain_item(item) for item in output]).messages:
        blocks = message["content"]
        content.extend([{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks)
    return content


def _usage(usage: Any) -> Usage:
    """An SDK reply's usage (an object or its dict) in Anthropic names."""
    if usage is None:
        return usage_from_openai_responses(None)
    return usage_from_openai_responses(usage if isinstance(usage, Mapping) else plain_item(usage))


def _stop_reason(status: str | None, incomplete: Any, content: Sequence[Any]) -> str | None:
    if status == "incomplete":
        reason = getattr(incomplete, "reason", None)
        if reason is None and isinstance(incomplete, Mapping):
            reason = incomplete.get("reason")
        return INCOMPLETE_REASONS.get(str(reason), "max_tokens")
    if any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content):
        return "tool_use"
    return "end_turn" if status in ("completed", None) else status


def _field(value: Any, name: str) -> Any:
    """A field of an SDK object or of its raw JSON (a mapping)."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def response_of(reply: Any) -> ModelResponse:
    """A ModelResponse (Anthropic shape) from a response: its raw JSON (the server's key order
    kept in the opaque items) or an SDK `Response`."""
    content = reply_content(_field(reply, "output") or [])
    return ModelResponse(
        content=content,
        stop_reason=_stop_reason(
            _field(reply, "status"), _field(reply, "incomplete_details"), content
        ),
        usage=_usage(_field(reply, "usage")),
        model=str(_field(reply, "model") or ""),
        id=str(_field(reply, "id") or ""),
        raw=plain_item(reply),
    )


def failure_error(error: Any, request_id: str | None) -> ProviderError:
    """The project's error for a failed response's `error` (or a stream's error event)."""
    data = error if isinstance(error, Mapping) else (plain_item(error) if error else {})
    message = str(data.get("message") or "the response failed")
    code = str(data.get("code") or "")
    if code == "context_length_exceeded" or is_prompt_too_long_message(message):
        parsed = parse_prompt_too_long(message)
        return PromptTooLongError(
            message,
            actual_tokens=parsed[0] if parsed else None,
            limit_tokens=parsed[1] if parsed else None,
            request_id=request_id,
            body=dict(data),
        )
    return ServerError(message, request_id=request_id, body=dict(data))


@dataclass(frozen=True, slots=True)
class OpenAIResponses:
    """The Responses format of `responses.create`."""

    name: str = RESPONSES_FORMAT

    def to_request(
        self, request: ProviderRequest, *, stream: bool, accepted: frozenset[str] = ALL_FIELDS
    ) -> dict[str, Any]:
        """The `responses.create` keyword arguments for a request (every field is named
        explicitly, so `accepted` changes nothing)."""
        kwargs: dict[str, Any] = {
            "model": request["model"],
            "input": messages_to_items(request.get("messages", [])),
        }
        instructions = _instructions(request.get("system"))
        if instructions:
            kwargs["instructions"] = instructions
        if "max_tokens" in request:
            kwargs["max_output_tokens"] = request["max_tokens"]
        if "temperature" in request:
            kwargs["temperature"] = request["temperature"]
        tools = convert_tools(request.get("tools") or [])
        if tools:
            kwargs["tools"] = tools
            choice = request.get("tool_choice")
            if choice:
                kwargs["tool_choice"] = convert_tool_choice(choice)
                if choice.get("disable_parallel_tool_use"):
                    kwargs["parallel_tool_calls"] = False
        compaction = context_management(request)
        if compaction is not None:
            kwargs["context_management"] = compaction
        if stream:
            kwargs["stream"] = True
        return kwargs

    def from_response(self, reply: Any) -> ModelResponse:
        """A ModelResponse (Anthropic shape) from a response's raw JSON or SDK `Response`."""
        return response_of(reply)

    def stream_assembler(self) -> ResponsesStreamAssembler:
        """A fresh fold for the events of one streamed reply."""
        return ResponsesStreamAssembler()

    def map_error(self, exc: BaseException) -> ProviderError | None:
        """The unbounded error for an SDK or transport exception: the same SDK and the same
        error bodies as Chat Completions (`context_length_exceeded` is prompt too long)."""
        return OpenAIChat().map_error(exc)

    def inbound(self, messages: Sequence[Any]) -> InboundMessages:
        """Responses input items as the project's messages (`items_to_messages`)."""
        return items_to_messages(messages)


class ResponsesStreamAssembler:
    """Folds Responses stream events (raw JSON dicts or SDK events) into one reply: the
    terminal event (`response.completed` or `response.incomplete`) carries the whole
    response; a `response.failed` or `error` event is its error."""

    def __init__(self) -> None:
        self.final: Any = None
        self.failure: Any = None
        self.events = 0

    @property
    def stopped(self) -> bool:
        """Whether the terminal event arrived."""
        return self.final is not None or self.failure is not None

    def add(self, event: Any) -> None:
        """Take the next event."""
        self.events += 1
        kind = _field(event, "type")
        if kind in ("response.completed", "response.incomplete"):
            self.final = _field(event, "response")
        elif kind == "response.failed":
            self.failure = _field(_field(event, "response"), "error") or {"message": "failed"}
        elif kind == "error":
            self.failure = {
                "message": _field(event, "message") or "",
                "code": _field(event, "code"),
            }

    def finish(self, request_id: str | None) -> ModelResponse:
        """The whole reply; the failure's error, or a `ServerError` when the stream was cut
        before its terminal event."""
        if self.failure is not None:
            raise failure_error(self.failure, request_id)
        if self.final is None:
            raise ServerError(
                "the stream ended without response.completed (cut mid-reply)",
                request_id=request_id,
            )
        return response_of(self.final)


__all__ = [
    "OPAQUE_ITEM",
    "RESPONSES_FORMAT",
    "OpenAIResponses",
    "ResponsesStreamAssembler",
    "context_management",
    "convert_tool_choice",
    "convert_tools",
    "failure_error",
    "is_opaque_block",
    "items_to_messages",
    "messages_to_items",
    "opaque_block",
    "plain_item",
    "reply_content",
    "response_of",
]
