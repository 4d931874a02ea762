"""The offline summarizer as a provider: answers a summary request without a model.

`ExtractiveSummarizer` takes the same request a model would get (the conversation, then the
summary prompt as the last user message), drops the prompt, and answers with
`unbounded.compaction.extractive.extractive_summary` of the rest: the nine sections written
from the conversation's structure. Its answer is the final summary text (no `<analysis>`, no
`<summary>` tags), and it says so (`writes_final_summary`), so compaction uses it as it is.
A prompt asking for "Work Completed" (a partial compaction `up_to`) gets sections 8 and 9
named as that prompt names them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from unbounded.compaction.extractive import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    DEFAULT_MIN_SUMMARY_TOKENS,
    DEFAULT_TARGET_RATIO,
    extractive_summary,
)
from unbounded.compaction.prompts import PREVIOUS_SUMMARY_PREFIXES
from unbounded.errors import ConfigError
from unbounded.model.content import ContentBlock, Usage
from unbounded.model.profile import ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.providers.base import Heartbeat, ModelResponse
from unbounded.tokens.estimate import content_tokens, rough_token_count

DEFAULT_SUMMARY_PROMPT_MARKER = "<summary>"
"""Text whose presence in the last user message marks it as the summary prompt."""


def split_summary_prompt(
    messages: Sequence[Mapping[str, Any]], marker: str = DEFAULT_SUMMARY_PROMPT_MARKER
) -> tuple[list[Mapping[str, Any]], str | None]:
    """The conversation without its trailing summary prompt, and that prompt (None if absent).

    The prompt is the text of the last message when it is a user message containing
    `marker`; when normalization merged it into a message of tool results, only the text
    blocks holding the marker are removed.
    """
    conversation = list(messages)
    if not conversation or not marker:
        return conversation, None
    last = conversation[-1]
    if last.get("role") != "user":
        return conversation, None
    content = last.get("content")
    if isinstance(content, str):
        if marker in content:
            return conversation[:-1], content
        return conversation, None
    if not isinstance(content, list):
        return conversation, None
    prompt_blocks = [
        b
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and marker in str(b.get("text", ""))
    ]
    if not prompt_blocks:
        return conversation, None
    rest = [b for b in content if not any(b is p for p in prompt_blocks)]
    prompt = "\n".join(str(b.get("text", "")) for b in prompt_blocks)
    if rest:
        conversation[-1] = {**last, "content": rest}
    else:
        conversation.pop()
    return conversation, prompt


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


class ExtractiveSummarizer:
    """A Provider that writes a nine-section summary offline, deterministically, without a model."""

    name = "extractive"
    profile = ProviderProfile(writes_final_summary=True, includes_facts=True, offline=True)
    """Its answer is the summary text itself (no tags to parse), built from the facts (no
    separate facts ledger is appended), and it sends nothing to a model: the fallback when
    there is none, or it failed."""
    supports_cache_edits = False

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
        target_ratio: float = DEFAULT_TARGET_RATIO,
        min_tokens: int = DEFAULT_MIN_SUMMARY_TOKENS,
        summary_prompt_marker: str = DEFAULT_SUMMARY_PROMPT_MARKER,
        model: str = "extractive",
    ) -> None:
        if max_tokens <= 0:
            raise ConfigError("ExtractiveSummarizer max_tokens must be > 0")
        if not 0 < target_ratio <= 1:
            raise ConfigError("ExtractiveSummarizer target_ratio must be in (0, 1]")
        self.max_tokens = max_tokens
        self.target_ratio = target_ratio
        self.min_tokens = max(0, min_tokens)
        self.summary_prompt_marker = summary_prompt_marker
        self.model = model

    def summarize(self, request: ProviderRequest) -> ModelResponse:
        """Answer a summary request (the pure computation behind `create`)."""
        messages: Sequence[Mapping[str, Any]] = request.get("messages", [])
        conversation, prompt = split_summary_prompt(messages, self.summary_prompt_marker)
        # The request's output budget is the summary's too (small windows get small summaries).
        asked = request.get("max_tokens")
        limit = min(self.max_tokens, asked) if isinstance(asked, int) and asked > 0 else None
        text = extractive_summary(
            conversation,
            max_tokens=limit or self.max_tokens,
            target_ratio=self.target_ratio,
            min_tokens=self.min_tokens,
            up_to=prompt is not None and "Work Completed" in prompt,
        )
        input_tokens = rough_token_count(_system_text(request.get("system"))) + sum(
            content_tokens(m.get("content")) for m in messages
        )
        usage: Usage = {"input_tokens": input_tokens, "output_tokens": rough_token_count(text)}
        block: ContentBlock = {"type": "text", "text": text}
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        return ModelResponse(
            content=[block],
            stop_reason="end_turn",
            usage=usage,
            model=self.model,
            id=f"msg_extractive_{digest}",
        )

    async def create(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Answer a summary request; `stream` and `heartbeat` are accepted and unused."""
        return self.summarize(request)

    def create_sync(
        self,
        request: ProviderRequest,
        *,
        stream: bool = False,
        heartbeat: Heartbeat | None = None,
    ) -> ModelResponse:
        """Synchronous `create` (no event loop needed: nothing here waits)."""
        return self.summarize(request)


__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "DEFAULT_MIN_SUMMARY_TOKENS",
    "DEFAULT_SUMMARY_PROMPT_MARKER",
    "DEFAULT_TARGET_RATIO",
    "PREVIOUS_SUMMARY_PREFIXES",
    "ExtractiveSummarizer",
    "split_summary_prompt",
]
