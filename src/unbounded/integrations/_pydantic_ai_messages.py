"""pydantic-ai's message types as unbounded's (Anthropic-shaped) messages, and back.

    ModelRequest:  SystemPromptPart      -> the system prompt (kept out of the messages)
                   UserPromptPart        -> text blocks (other content: a placeholder text)
                   ToolReturnPart        -> tool_result (is_error unless its outcome is success)
                   RetryFeedbackPart     -> text (RetryPromptPart of older versions likewise)
    ModelResponse: TextPart              -> text
                   ThinkingPart          -> thinking (with its signature)
                   ToolCallPart          -> tool_use (tool call id and arguments kept)
                   usage                 -> Anthropic usage (cache reads and writes apart)

`MessageMap` remembers which pydantic-ai message each converted message came from, so a
message the pipeline left unchanged goes back as the very object it was (nothing of it is
lost: timestamps, provider details, media); only a message the pipeline rewrote (a cleared
tool result, the summary, a synthetic result) is built anew from its blocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from unbounded.compaction.conversation import media_placeholder
from unbounded.model.content import Usage, usage_from_inclusive_counts


def _user_content_text(item: object) -> str:
    """One item of a `UserPromptPart`'s content as text (media as a placeholder)."""
    if isinstance(item, str):
        return item
    if isinstance(item, pai.CachePoint):
        return ""
    kind = "image" if getattr(item, "is_image", False) else "document"
    url = getattr(item, "url", None)
    return media_placeholder({"type": kind, "source": {"url": url} if url else {}})


_RETRY_PROMPT: Any = getattr(pai, "RetryPromptPart", None)
"""Retries before pydantic-ai 2 answered tool calls with this part (deprecated since)."""
_RETRY_FEEDBACK: Any = getattr(pai, "RetryFeedbackPart", None)
"""A retry that answers no tool call (pydantic-ai 2)."""
_HAS_OUTCOME = "outcome" in getattr(pai.ToolReturnPart, "__dataclass_fields__", {})
"""A tool return says how the call went (`outcome`): pydantic-ai 2."""


def request_blocks(message: pai.ModelRequest) -> list[dict[str, Any]]:
    """The content blocks of a pydantic-ai request (its system prompt parts left out)."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, pai.UserPromptPart):
            items = [part.content] if isinstance(part.content, str) else list(part.content)
            for item in items:
                text = _user_content_text(item)
                if text:
                    blocks.append({"type": "text", "text": text})
        elif isinstance(part, pai.ToolReturnPart):
            failed = getattr(part, "outcome", "success") != "success"
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id,
                # is_error is Anthropic's error channel: the text goes unwrapped.
                "content": part.model_response_str(wrap_if_error=False)
                if failed
                else part.model_response_str(),
            }
            if failed:
                block["is_error"] = True
            blocks.append(block)
        elif _RETRY_FEEDBACK is not None and isinstance(part, _RETRY_FEEDBACK):
            blocks.append({"type": "text", "text": part.model_response()})
        elif _RETRY_PROMPT is not None and isinstance(part, _RETRY_PROMPT):
            if part.tool_name is None:
                blocks.append({"type": "text", "text": part.model_response()})
            else:
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": part.tool_call_id,
                        "content": part.model_response(),
                        "is_error": True,
                    }
                )
    return blocks


def response_blocks(message: pai.ModelResponse) -> list[dict[str, Any]]:
    """The content blocks of a pydantic-ai response."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, pai.TextPart):
            if part.content:
                blocks.append({"type": "text", "text": part.content})
        elif isinstance(part, pai.ThinkingPart):
            blocks.append(
                {"type": "thinking", "thinking": part.content, "signature": part.signature or ""}
            )
        elif isinstance(part, pai.ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": part.args_as_dict(),
                }
            )
    return blocks


def system_prompt(messages: Sequence[pai.ModelMessage]) -> str:
    """The system prompt parts of a history, joined (pydantic-ai puts them in its requests)."""
    texts = [
        part.content
        for message in messages
        if isinstance(message, pai.ModelRequest)
        for part in message.parts
        if isinstance(part, pai.SystemPromptPart)
    ]
    return "\n\n".join(texts)


def anthropic_usage(usage: RequestUsage) -> Usage:
    """pydantic-ai's usage (whose input count includes cache reads and writes) in Anthropic's
    names (where it does not)."""
    return usage_from_inclusive_counts(
        usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens
    )


def pydantic_usage(usage: Mapping[str, Any]) -> RequestUsage:
    """Anthropic usage as pydantic-ai's `RequestUsage`."""
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return RequestUsage(
        input_tokens=int(usage.get("input_tokens") or 0) + read + write,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=int(usage.get("output_tokens") or 0),
    )


def _plain(block: Mapping[str, Any]) -> dict[str, Any]:
    """A block without its cache marker (markers never decide what a message is)."""
    return {key: value for key, value in block.items() if key != "cache_control"}


def _key(role: str, content: Any) -> str:
    """A message's identity by content: its role and blocks, markers aside."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return json.dumps(
        [role, [_plain(block) for block in content]], sort_keys=True, ensure_ascii=False
    )


def _text_of(content: Any) -> str:
    """A tool_result's content as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping)
        )
    return str(content)


@dataclass
class MessageMap:
    """Converted messages remembered by content, and each tool call's name by its id."""

    originals: dict[str, pai.ModelMessage] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    _previous: dict[int, tuple[Mapping[str, Any], pai.ModelMessage]] = field(default_factory=dict)
    """The last call's messages by identity (each kept with its dict, so an id is not reused)."""

    def remember(
        self, role: str, blocks: Sequence[Mapping[str, Any]], original: pai.ModelMessage
    ) -> None:
        """Note that `blocks` (as `role`) came from `original`."""
        self.originals[_key(role, list(blocks))] = original
        for block in blocks:
            if block.get("type") == "tool_use":
                self.tool_names[str(block["id"])] = str(block["name"])

    def to_pydantic(self, messages: Sequence[Mapping[str, Any]]) -> list[pai.ModelMessage]:
        """Anthropic-shaped messages as pydantic-ai's: the remembered original where the
        message is unchanged, else one built from its blocks. A message dict given to the
        previous call again (the pipeline keeps the ones it did not change) is not read
        again: each call costs the messages new to it."""
        out: list[pai.ModelMessage] = []
        current: dict[int, tuple[Mapping[str, Any], pai.ModelMessage]] = {}
        for message in messages:
            hit = self._previous.get(id(message))
            converted = hit[1] if hit is not None and hit[0] is message else None
            if converted is None:
                converted = self._convert(message)
            current[id(message)] = (message, converted)
            out.append(converted)
        self._previous = current
        return out

    def _convert(self, message: Mapping[str, Any]) -> pai.ModelMessage:
        """One message: the remembered original, or one built from its blocks."""
        role, content = str(message["role"]), message["content"]
        original = self.originals.get(_key(role, content))
        if original is not None:
            return original
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        for block in blocks:
            if block.get("type") == "tool_use":
                self.tool_names[str(block["id"])] = str(block["name"])
        if role == "assistant":
            return self.build_response(blocks)
        return self.build_request(blocks)

    def build_request(self, blocks: Sequence[Mapping[str, Any]]) -> pai.ModelRequest:
        """A pydantic-ai request of user blocks."""
        parts: list[pai.ModelRequestPart] = []
        texts: list[str] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result":
                call_id = str(block["tool_use_id"])
                name = self.tool_names.get(call_id, "unknown_tool")
                text = _text_of(block.get("content", ""))
                if block.get("is_error") and _HAS_OUTCOME:
                    failed: Any = {"outcome": "failed"}
                    parts.append(
                        pai.ToolReturnPart(
                            tool_name=name, content=text, tool_call_id=call_id, **failed
                        )
                    )
                elif block.get("is_error") and _RETRY_PROMPT is not None:
                    parts.append(_RETRY_PROMPT(content=text, tool_name=name, tool_call_id=call_id))
                else:
                    parts.append(
                        pai.ToolReturnPart(tool_name=name, content=text, tool_call_id=call_id)
                    )
            elif kind == "text":
                texts.append(str(block.get("text", "")))
        if texts:
            parts.append(pai.UserPromptPart(content="\n\n".join(texts)))
        return pai.ModelRequest(parts=parts)

    @staticmethod
    def build_response(
        blocks: Sequence[Mapping[str, Any]],
        usage: Mapping[str, Any] | None = None,
        model_name: str | None = None,
    ) -> pai.ModelResponse:
        """A pydantic-ai response of assistant blocks."""
        parts: list[pai.ModelResponsePart] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                parts.append(pai.TextPart(content=str(block.get("text", ""))))
            elif kind == "thinking":
                parts.append(
                    pai.ThinkingPart(
                        content=str(block.get("thinking", "")),
                        signature=block.get("signature") or None,
                    )
                )
            elif kind == "tool_use":
                parts.append(
                    pai.ToolCallPart(
                        tool_name=str(block["name"]),
                        args=dict(block.get("input") or {}),
                        tool_call_id=str(block["id"]),
                    )
                )
        return pai.ModelResponse(
            parts=parts,
            usage=pydantic_usage(usage or {}),
            model_name=model_name,
        )


__all__ = [
    "MessageMap",
    "anthropic_usage",
    "pydantic_usage",
    "request_blocks",
    "response_blocks",
    "system_prompt",
]
