"""The provider request as plain data: what the pipeline builds, the simulator prices and the
cache-break detector fingerprints.

It is the Anthropic Messages API body (model, system, tools, messages, thinking,
context_management…), plus two fields of unbounded's own that never reach the wire as they
are: `betas` (sent as the `anthropic-beta` header) and `cache_edits` (cached-microcompact
deletions, seed 004: tool results to drop from the cached prefix by their cache reference,
the tool_use id). A provider adapter translates these for the API that supports them and
leaves them out otherwise.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from unbounded.model.content import CacheControl, MessageParam


class SystemBlock(TypedDict):
    """One block of the system prompt."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl | dict[str, Any]]


class CacheEdit(TypedDict):
    """Delete one tool result from the cached prefix (seed 004 cached microcompact)."""

    type: Literal["delete"]
    cache_reference: str


class ProviderRequest(TypedDict, total=False):
    """A Messages API request body, with unbounded's `betas` and `cache_edits`."""

    model: str
    max_tokens: int
    system: str | list[SystemBlock]
    tools: list[dict[str, Any]]
    messages: list[MessageParam]
    thinking: dict[str, Any]
    context_management: dict[str, Any]
    metadata: dict[str, Any]
    temperature: float
    tool_choice: dict[str, Any]
    betas: list[str]
    cache_edits: list[CacheEdit]
