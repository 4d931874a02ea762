"""The OpenAI Chat Completions wire format: the project's Anthropic-shaped request as a
`chat.completions.create` call, and the reply, its stream chunks and its errors back.

Works for OpenAI and any server speaking Chat Completions (vLLM, Ollama, llama.cpp server,
LiteLLM...). The rules (docs/providers.md lists them all):

- system (a string or text blocks) -> one `system` message;
- user text/image blocks -> content parts (base64 images as `data:` URLs);
- user `tool_result` blocks -> `tool` messages, before the rest of that user message; images
  inside a result -> a following user message carrying them;
- assistant text + `tool_use` -> one assistant message with `tool_calls`; thinking dropped;
- tools -> `{"type": "function", "function": {name, description, parameters}}`;
- cache_control, betas, cache_edits, context_management, thinking and metadata are dropped.

`inbound` goes the other way for a caller holding Chat Completions messages: the system and
developer messages before the conversation make the system prompt; one inside it (a
reminder) is kept where it was, as an `opaque_item` block of the user side, and sent back
unchanged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unbounded.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    OverloadedError,
    PromptTooLongError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from unbounded.model.content import ContentBlock, MessageParam, Usage, usage_from_openai
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse
from unbounded.wire.base import (
    ALL_FIELDS,
    InboundMessages,
    connection_failure,
    is_prompt_too_long_message,
    is_transport_error,
    parse_prompt_too_long,
    retry_after_seconds,
)
from unbounded.wire.openai_items import OPAQUE_ITEM

CHAT_FORMAT = "openai-chat"
"""The `format` of an `opaque_item` block carrying a Chat Completions message as given."""

FINISH_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
"""Chat Completions finish_reason -> Anthropic stop_reason."""


def _text_of(system: str | list[Any] | None) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(str(block.get("text", "")) for block in system if isinstance(block, dict))


def _image_part(source: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = source.get("type")
    if kind == "base64":
        media_type = source.get("media_type") or "image/png"
        return {
            "type": "image_url",
            "image_url": {"url": f"data:{media_type};base64,{source.get('data', '')}"},
        }
    if kind == "url" and source.get("url"):
        return {"type": "image_url", "image_url": {"url": str(source["url"])}}
    return None


def _document_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "text":
        return {"type": "text", "text": str(source.get("data", ""))}
    if source.get("type") == "base64":
        media_type = source.get("media_type") or "application/pdf"
        return {
            "type": "file",
            "file": {
                "filename": str(block.get("title") or "document.pdf"),
                "file_data": f"data:{media_type};base64,{source.get('data', '')}",
            },
        }
    where = source.get("url") or source.get("file_id") or ""
    return {"type": "text", "text": f"[document: {where}]"}


def _user_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """One user content part, or None for blocks Chat Completions cannot carry."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image":
        return _image_part(block.get("source") or {})
    if kind == "document":
        return _document_part(block)
    return None


def _user_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(parts) == 1 and parts[0]["type"] == "text":
        return {"role": "user", "content": parts[0]["text"]}
    return {"role": "user", "content": parts}


def _tool_result(block: Mapping[str, Any], images: list[dict[str, Any]]) -> dict[str, Any]:
    """A `tool` message; images found in the result are appended to `images`."""
    content = block.get("content")
    if isinstance(content, str) or content is None:
        text = content or ""
    else:
        texts: list[str] = []
        found = 0
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") in ("image", "document"):
                converted = _user_part(part)
                if converted is None:
                    continue
                if converted["type"] == "text":
                    texts.append(converted["text"])
                else:
                    images.append(converted)
                    found += 1
        if found:
            plural = "s" if found > 1 else ""
            texts.append(f"[{found} attachment{plural} in the next user message]")
        text = "\n".join(texts)
    return {"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")), "content": text}


def _arguments(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def convert_messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """The Chat Completions `messages` for an Anthropic-shaped request."""
    out: list[dict[str, Any]] = []
    system = _text_of(request.get("system"))
    if system:
        out.append({"role": "system", "content": system})
    for message in request.get("messages", []):
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        blocks: list[Mapping[str, Any]] = [b for b in content if isinstance(b, Mapping)]
        if role == "assistant":
            out.append(_assistant_message(blocks))
            continue
        tool_images: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        for block in blocks:
            item = _chat_item(block)
            if block.get("type") == "tool_result":
                out.append(_tool_result(block, tool_images))
            elif item is not None:  # a message kept in place: what came before it goes first
                _flush_user(out, tool_images, parts)
                out.append(item)
            else:
                part = _user_part(block)
                if part is not None:
                    parts.append(part)
        _flush_user(out, tool_images, parts)
    return out


def _flush_user(
    out: list[dict[str, Any]], tool_images: list[dict[str, Any]], parts: list[dict[str, Any]]
) -> None:
    """Append the user messages gathered (tool result images, then the parts), emptying both."""
    if tool_images:
        out.append({"role": "user", "content": list(tool_images)})
        tool_images.clear()
    if parts:
        out.append(_user_message(list(parts)))
        parts.clear()


def _assistant_message(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    calls = [
        {
            "id": str(b.get("id", "")),
            "type": "function",
            "function": {"name": str(b.get("name", "")), "arguments": _arguments(b.get("input"))},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    text = "\n\n".join(t for t in texts if t)
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def convert_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions as Chat Completions functions (server tools are skipped)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if "input_schema" not in tool:
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        out.append({"type": "function", "function": function})
    return out


def convert_tool_choice(choice: Mapping[str, Any]) -> Any:
    """Anthropic tool_choice → Chat Completions tool_choice."""
    kind = choice.get("type")
    if kind == "any":
        return "required"
    if kind == "tool":
        return {"type": "function", "function": {"name": str(choice.get("name", ""))}}
    if kind == "none":
        return "none"
    return "auto"


# --------------------------------------------------------------------------- inbound


def inbound_messages(messages: Sequence[Any]) -> InboundMessages:
    """Chat Completions messages as the project's system prompt and messages (see
    `OpenAIChat.inbound`); a message that is not a Chat Completions one is a `ConfigError`
    naming its index."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise ConfigError(
            f"messages is a list of Chat Completions messages, got {type(messages).__name__}: "
            "pass [{'role': 'user', 'content': '...'}]"
        )
    system: list[str] = []
    out: list[MessageParam] = []
    results_open = False  # the last user message holds tool results a user message may join
    for index, given in enumerate(messages):
        # SDK messages (a reply's `choices[0].message` appended as it is) read as their dicts.
        message = given if isinstance(given, Mapping) else _sdk_dict(given)
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ConfigError(
                f"message {index}: a Chat Completions message is a dict with a role, "
                f"not {message!r:.80}"
            )
        role = message["role"]
        if role in ("system", "developer") and not out:
            system.append(_inbound_text(message.get("content"), index))
        elif role in ("system", "developer"):
            # A system message inside the conversation (a reminder) stays where it was: the
            # user side carries it (`chat_item_block`), the messages after it join it.
            _inbound_text(message.get("content"), index)  # a content it can read, else refused
            kept = chat_item_block(message)
            last = out[-1]
            if last["role"] == "user":
                if isinstance(last["content"], str):
                    last["content"] = [{"type": "text", "text": last["content"]}]
                _blocks(last).append(kept)
            else:
                out.append({"role": "user", "content": [kept]})  # type: ignore[list-item]
            results_open = True
            continue
        elif role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": _inbound_text(message.get("content"), index),
            }
            if results_open:
                _blocks(out[-1]).append(block)
            else:
                out.append({"role": "user", "content": [block]})  # type: ignore[list-item]
            results_open = True
            continue
        elif role == "user":
            content = _inbound_user(message.get("content"), index)
            if results_open:
                joined = _blocks(out[-1])
                joined.extend(
                    [{"type": "text", "text": content}] if isinstance(content, str) else content
                )
            else:
                out.append({"role": "user", "content": content})  # type: ignore[typeddict-item]
        elif role == "assistant":
            out.append({"role": "assistant", "content": _inbound_assistant(message, index)})
        elif role == "function":
            raise ConfigError(
                f"message {index}: role 'function' is the deprecated function calling (functions=, "
                "function_call), which the wrapper does not read: pass tools= and send each "
                "result as a 'tool' message with its tool_call_id"
            )
        else:
            raise ConfigError(
                f"message {index}: role {role!r} is not a Chat Completions role (system, "
                "developer, user, assistant, tool)"
            )
        results_open = False
    return InboundMessages("\n\n".join(t for t in system if t), out)


def chat_item_block(message: Mapping[str, Any]) -> dict[str, Any]:
    """The block carrying a Chat Completions message the conversation keeps in place as it
    was given (a system message inside the conversation), sent back unchanged."""
    return {"type": OPAQUE_ITEM, "format": CHAT_FORMAT, "item": dict(message)}


def _chat_item(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message a `chat_item_block` carries; None for any other block."""
    if block.get("type") != OPAQUE_ITEM or block.get("format") != CHAT_FORMAT:
        return None
    item = block.get("item")
    return dict(item) if isinstance(item, Mapping) else None


def _sdk_dict(value: Any) -> Any:
    """An SDK model as the dict of the fields it was given; anything else unchanged."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict(mode="json") if callable(to_dict) else value


def _blocks(message: MessageParam) -> list[Any]:
    content = message["content"]
    assert isinstance(content, list)  # tool results are always a list of blocks
    return content


def _inbound_text(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    raise ConfigError(f"message {index}: content must be a string or a list of parts")


def _inbound_user(content: Any, index: int) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ConfigError(f"message {index}: content must be a string or a list of parts")
    return [_inbound_part(part, index) for part in content]


def _inbound_part(part: Any, index: int) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        return {"type": "image", "source": _inbound_source(url, "image/png")}
    if kind == "file":
        file = part.get("file") or {}
        block: dict[str, Any] = {
            "type": "document",
            "source": _inbound_source(str(file.get("file_data", "")), "application/pdf"),
        }
        if file.get("filename"):
            block["title"] = str(file["filename"])
        return block
    raise ConfigError(
        f"message {index}: user content part {kind!r} is not one Chat Completions sends "
        "(text, image_url, file)"
    )


def _inbound_source(url: str, default_type: str) -> dict[str, Any]:
    """A `data:` URL as a base64 source, any other URL as a url source."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[len("data:") :].split(";base64,", 1)
        return {"type": "base64", "media_type": media_type or default_type, "data": data}
    return {"type": "url", "url": url}


def _inbound_assistant(message: Mapping[str, Any], index: int) -> list[ContentBlock]:
    text = _inbound_text(message.get("content"), index)
    calls = [
        (str(call.get("id", "")), str(fn.get("name", "")), fn.get("arguments"))
        for call in message.get("tool_calls") or []
        if isinstance(call, Mapping) and isinstance(fn := call.get("function"), Mapping)
    ]
    return _content(text, calls)


# --------------------------------------------------------------------------- the format


@dataclass(frozen=True, slots=True)
class OpenAIChat:
    """The Chat Completions format of `chat.completions.create`."""

    max_tokens_param: str = "max_tokens"
    """`max_tokens` (vLLM, Ollama, llama.cpp) or `max_completion_tokens` (OpenAI's reasoning
    models)."""
    stream_usage: bool = True
    """Ask for the final usage chunk when streaming (`stream_options.include_usage`)."""
    name: str = "openai-chat"

    def __post_init__(self) -> None:
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError(
                f"max_tokens_param must be max_tokens or max_completion_tokens, "
                f"not {self.max_tokens_param!r}"
            )

    def to_request(
        self, request: ProviderRequest, *, stream: bool, accepted: frozenset[str] = ALL_FIELDS
    ) -> dict[str, Any]:
        """The `chat.completions.create` keyword arguments for a request (every field is named
        explicitly, so `accepted` changes nothing)."""
        kwargs: dict[str, Any] = {
            "model": request["model"],
            "messages": convert_messages(request),
        }
        if "max_tokens" in request:
            kwargs[self.max_tokens_param] = request["max_tokens"]
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
        if stream:
            kwargs["stream"] = True
            if self.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def from_response(self, completion: Any) -> ModelResponse:
        """A ModelResponse (Anthropic shape) from an SDK `ChatCompletion`."""
        choices = completion.choices or []
        if not choices:
            raise ServerError("the reply has no choices", body=completion.model_dump(mode="json"))
        choice = choices[0]
        message = choice.message
        calls = [
            (call.id, call.function.name, call.function.arguments)
            for call in (message.tool_calls or [])
            if getattr(call, "function", None) is not None
        ]
        return ModelResponse(
            content=_content(message.content, calls),
            stop_reason=_stop_reason(choice.finish_reason, bool(calls)),
            usage=_usage(completion.usage),
            model=str(completion.model or ""),
            id=str(completion.id or ""),
            raw=completion.model_dump(mode="json"),
        )

    def map_error(self, exc: BaseException) -> ProviderError | None:
        """The unbounded error for an SDK or transport exception (None: not a provider error)."""
        sdk = sys.modules.get("openai")
        if sdk is None:  # the SDK was never imported: no exception can be one of its own
            return _generic_error(exc)
        if isinstance(exc, sdk.APIStatusError):
            return _status_error(exc, exc.status_code, exc.request_id)
        if isinstance(exc, sdk.APITimeoutError):
            return ServerError(f"request timed out: {exc}")
        if isinstance(exc, sdk.APIConnectionError):
            return ServerError(
                connection_failure(exc, str(exc.__cause__ or exc), OPENAI_ADDRESS)
            )
        if isinstance(exc, sdk.APIResponseValidationError):
            return ServerError(f"malformed response: {exc}", status=exc.status_code, body=exc.body)
        if isinstance(exc, sdk.APIError):  # an error event inside a stream
            return _status_error(exc, None, None)
        if isinstance(exc, sdk.OpenAIError):
            return AuthenticationError(str(exc), status=None)
        return _generic_error(exc)

    def stream_assembler(self) -> ChatStreamAssembler:
        """A fresh fold for the chunks of one streamed reply."""
        return ChatStreamAssembler()

    def inbound(self, messages: Sequence[Any]) -> InboundMessages:
        """Chat Completions messages as the project's: system and developer messages become
        the system prompt, `tool` messages `tool_result` blocks of one user message (with the
        user message right after them), `tool_calls` `tool_use` blocks."""
        return inbound_messages(messages)


OPENAI_ADDRESS = "OPENAI_BASE_URL, or the client's base_url"
"""Where the address an OpenAI client connects to comes from (named when it fails)."""


def _generic_error(exc: BaseException) -> ProviderError | None:
    """The mapping of exceptions that are not the SDK's own."""
    if is_transport_error(exc):
        return ServerError(
            connection_failure(exc, f"{type(exc).__name__}: {exc}", OPENAI_ADDRESS)
        )
    if isinstance(exc, json.JSONDecodeError):
        return ServerError(f"malformed response (not JSON): {exc}")
    return None


def _status_error(exc: Any, status: int | None, request_id: str | None) -> ProviderError:
    body = exc.body
    error = body if isinstance(body, Mapping) else {}
    message = str(error.get("message") or exc.message or exc)
    code = str(error.get("code") or "")
    kind = str(error.get("type") or "")
    headers = getattr(getattr(exc, "response", None), "headers", None)
    retry_after = retry_after_seconds(headers)
    common: dict[str, Any] = {"status": status, "request_id": request_id, "body": body}
    if code == "context_length_exceeded" or (
        status in (None, 400, 413, 422) and is_prompt_too_long_message(message)
    ):
        parsed = parse_prompt_too_long(message)
        return PromptTooLongError(
            message,
            actual_tokens=parsed[0] if parsed else None,
            limit_tokens=parsed[1] if parsed else None,
            **common,
        )
    if status in (401, 403) or code == "invalid_api_key":
        return AuthenticationError(message, **common)
    if status == 429 or "rate_limit" in kind or code == "rate_limit_exceeded":
        if code == "insufficient_quota":  # billing, not a transient limit: never retried
            return ProviderError(message, **common)
        return RateLimitedError(message, retry_after=retry_after, **common)
    if status in (503, 529) or "overloaded" in kind:
        return OverloadedError(message, retry_after=retry_after, **common)
    if status is None or status >= 500 or status in (408, 409):
        return ServerError(message, retry_after=retry_after, **common)
    return BadRequestError(message, **common)


def _content(text: str | None, calls: Sequence[tuple[str, str, str | None]]) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    if text:
        blocks.append({"type": "text", "text": text})
    for call_id, name, arguments in calls:
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": _parse(arguments)})
    return blocks


def _parse(arguments: str | None) -> dict[str, Any]:
    if not arguments or not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"raw": arguments}
    return value if isinstance(value, dict) else {"raw": arguments}


def _stop_reason(finish_reason: str | None, has_calls: bool) -> str | None:
    if finish_reason is None:
        return None
    if has_calls and finish_reason == "stop":  # some servers (Ollama) say stop with tool calls
        return "tool_use"
    return FINISH_REASONS.get(finish_reason, finish_reason)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return {}
    data: dict[str, Any] = usage.model_dump(mode="json") if hasattr(usage, "model_dump") else {}
    counts: Usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    counts.update(usage_from_openai(data) or {})
    # A Chat Completions reply's reasoning is billed but never sent back: not context.
    details = data.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if isinstance(reasoning, int) and reasoning > 0:
        counts["reasoning_output_tokens"] = reasoning
    return counts


class ChatStreamAssembler:
    """Folds `ChatCompletionChunk`s into one reply."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.text: list[str] = []
        self.calls: dict[int, list[Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.chunks = 0

    @property
    def stopped(self) -> bool:
        """Never: a Chat Completions stream has no terminal chunk (the usage chunk may follow
        the finish reason); it ends at `[DONE]`, which the SSE decoder reports."""
        return False

    def add(self, chunk: Any) -> None:
        """Take the next chunk."""
        self.chunks += 1
        self.id = self.id or str(chunk.id or "")
        self.model = self.model or str(chunk.model or "")
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None and delta.content:
                self.text.append(delta.content)
            for call in (delta.tool_calls if delta is not None else None) or []:
                slot = self.calls.setdefault(call.index, ["", "", []])
                if call.id:
                    slot[0] = call.id
                if call.function is not None:
                    if call.function.name:
                        slot[1] += call.function.name
                    if call.function.arguments:
                        slot[2].append(call.function.arguments)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def finish(self, request_id: str | None) -> ModelResponse:
        """The whole reply; a `ServerError` when no chunk said why the reply ended."""
        if self.finish_reason is None:
            raise ServerError(
                "the stream ended without a finish_reason (cut mid-reply)", request_id=request_id
            )
        calls = [(slot[0], slot[1], "".join(slot[2])) for _, slot in sorted(self.calls.items())]
        text = "".join(self.text)
        return ModelResponse(
            content=_content(text, calls),
            stop_reason=_stop_reason(self.finish_reason, bool(calls)),
            usage=_usage(self.usage),
            model=self.model,
            id=self.id,
            raw={
                "id": self.id,
                "model": self.model,
                "finish_reason": self.finish_reason,
                "content": text,
                "tool_calls": calls,
                "usage": None if self.usage is None else self.usage.model_dump(mode="json"),
            },
        )
