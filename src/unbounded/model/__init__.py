"""The conversation model: content blocks, transcript entries, normalization and validation."""

from unbounded.model.content import (
    ContentBlock,
    MessageParam,
    Usage,
    usage_context_total,
    usage_prompt_total,
)
from unbounded.model.entries import (
    Entry,
    create_compact_boundary,
    last_compact_boundary_index,
    messages_after_compact_boundary,
)
from unbounded.model.normalize import (
    MessageNormalizer,
    normalize_messages,
    normalize_plain_messages,
    validate_request,
)
from unbounded.model.transcript import ApiCall, Transcript, api_calls

__all__ = [
    "ApiCall",
    "ContentBlock",
    "Entry",
    "MessageNormalizer",
    "MessageParam",
    "Transcript",
    "Usage",
    "api_calls",
    "create_compact_boundary",
    "last_compact_boundary_index",
    "messages_after_compact_boundary",
    "normalize_messages",
    "normalize_plain_messages",
    "usage_context_total",
    "usage_prompt_total",
    "validate_request",
]
