"""Anthropic Messages API shapes as typed dicts: the one message shape used inside unbounded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict


class CacheControl(TypedDict):
    """A prompt-cache breakpoint marker."""

    type: Literal["ephemeral"]
    ttl: NotRequired[Literal["5m", "1h"]]


class TextBlock(TypedDict):
    """Plain text."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class ImageBlock(TypedDict):
    """An image (base64 or URL source)."""

    type: Literal["image"]
    source: dict[str, Any]
    cache_control: NotRequired[CacheControl]


class DocumentBlock(TypedDict):
    """A document such as a PDF."""

    type: Literal["document"]
    source: dict[str, Any]
    cache_control: NotRequired[CacheControl]


class ToolUseBlock(TypedDict):
    """A tool call made by the assistant."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: NotRequired[CacheControl]


class ToolResultBlock(TypedDict):
    """The answer to a tool call, sent by the user side."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: NotRequired[str | list[TextBlock | ImageBlock | DocumentBlock]]
    is_error: NotRequired[bool]
    cache_control: NotRequired[CacheControl]


class ThinkingBlock(TypedDict):
    """Extended-thinking output, with its signature."""

    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]


class RedactedThinkingBlock(TypedDict):
    """Thinking the API returned encrypted."""

    type: Literal["redacted_thinking"]
    data: str


ContentBlock = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
)

Role = Literal["user", "assistant"]


class MessageParam(TypedDict):
    """One message of a Messages API request."""

    role: Role
    content: str | list[ContentBlock]


class Usage(TypedDict, total=False):
    """Token usage the API reports on a response."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cache_creation: dict[str, int]
    cache_deleted_input_tokens: int
    iterations: list[dict[str, Any]]
    """Anthropic's per-iteration usage (`usage.iterations`): a server-side compaction's own
    step is a `compaction` entry, billed but not counted in the fields above."""
    reasoning_output_tokens: int
    """Of `output_tokens`, the reasoning a Chat Completions reply billed that the API never
    carries into the next prompt (`completion_tokens_details.reasoning_tokens`): output, not
    context. Set only where that holds (the Chat Completions drop-in)."""


def usage_from_inclusive_counts(
    prompt: int, cache_read: int, cache_write: int, output: int | None = None
) -> Usage:
    """Usage counted OpenAI's way (the prompt count includes the tokens read from the cache
    and written to it) in Anthropic's names, where `input_tokens` is only the uncached rest;
    `output_tokens` when `output` is given. Every OpenAI-style usage shape comes through here."""
    usage: Usage = {
        "input_tokens": max(0, prompt - cache_read - cache_write),
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
    }
    if output is not None:
        usage["output_tokens"] = output
    return usage


def usage_from_openai(raw: Any) -> Usage | None:
    """Chat Completions / litellm usage (prompt_tokens, completion_tokens, cached details) in
    Anthropic names; None when it holds neither count.

    litellm and OpenAI count cache reads and writes inside prompt_tokens, so both are
    subtracted from the uncached input (writes: litellm's `cache_creation_input_tokens`, or
    OpenAI's `prompt_tokens_details.cache_write_tokens`).
    """
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    output = completion if isinstance(completion, int) else None
    if not isinstance(prompt, int):
        if output is None:
            return None
        only_output: Usage = {"output_tokens": output}
        return only_output
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if not isinstance(cached, int):
        cached = raw.get("cache_read_input_tokens")
    creation = raw.get("cache_creation_input_tokens")
    if not isinstance(creation, int) and isinstance(details, dict):
        creation = details.get("cache_write_tokens")  # OpenAI's own name for cache writes
    return usage_from_inclusive_counts(
        prompt,
        cached if isinstance(cached, int) else 0,
        creation if isinstance(creation, int) else 0,
        output,
    )


def usage_from_openai_responses(raw: Mapping[str, Any] | None) -> Usage:
    """Responses API usage (input_tokens, output_tokens, `input_tokens_details` with
    cached_tokens and cache_write_tokens) in Anthropic names; zeros when there is none.

    The Responses input count includes the tokens read from the cache and written to it."""
    if raw is None:
        return usage_from_inclusive_counts(0, 0, 0, 0)
    details = raw.get("input_tokens_details") or {}
    if not isinstance(details, Mapping):
        details = {}
    return usage_from_inclusive_counts(
        int(raw.get("input_tokens") or 0),
        int(details.get("cached_tokens") or 0),
        int(details.get("cache_write_tokens") or 0),
        int(raw.get("output_tokens") or 0),
    )


def usage_context_total(usage: Usage | dict[str, Any]) -> int:
    """Tokens a response occupied in the window: input + cache creation + cache read + output,
    less the output's reasoning that the next prompt does not carry (`reasoning_output_tokens`).

    Using input_tokens alone would undercount: cached tokens still occupy the window (seed 004).
    """
    output = int(usage.get("output_tokens") or 0)
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
        + max(0, output - int(usage.get("reasoning_output_tokens") or 0))
    )


def usage_prompt_total(usage: Usage | dict[str, Any]) -> int:
    """Tokens of the request itself: input + cache creation + cache read (no output)."""
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
    )


def content_blocks(
    content: str | list[ContentBlock] | list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Content as a list of block dicts (a bare string becomes one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)  # type: ignore[arg-type]
