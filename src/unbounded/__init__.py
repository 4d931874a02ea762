"""unbounded: keep a long-running agent's conversation inside the model's context window.

The names below are imported on first use (PEP 562), so `import unbounded` (and the
`unbounded` command, which imports only what the command it runs needs) starts fast.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unbounded.catalog import ModelInfo, ModelTable, load_model_table
    from unbounded.errors import (
        AuthenticationError,
        BadRequestError,
        CompactionError,
        ConfigError,
        HookBlockingError,
        InvalidRequestError,
        OverloadedError,
        PromptTooLongError,
        ProviderError,
        RateLimitedError,
        RecallArgumentError,
        RetryableError,
        ServerError,
        SessionClosedError,
        SessionLockedError,
        SettledMessageError,
        StoreDamagedError,
        ToolArgumentError,
        TranscriptError,
        UnboundedError,
    )
    from unbounded.extension import Extension
    from unbounded.model import (
        Entry,
        MessageNormalizer,
        Transcript,
        create_compact_boundary,
        messages_after_compact_boundary,
        normalize_messages,
        validate_request,
    )
    from unbounded.policy import Policy, Thresholds, compute_thresholds
    from unbounded.tokens import (
        ContextCounter,
        build_token_accounting,
        token_count_with_estimation,
    )
    from unbounded.transcripts import detect_format, load_transcript

_EXPORTS: dict[str, str] = {
    "AuthenticationError": "unbounded.errors",
    "BadRequestError": "unbounded.errors",
    "CompactionError": "unbounded.errors",
    "ConfigError": "unbounded.errors",
    "ContextCounter": "unbounded.tokens",
    "Entry": "unbounded.model",
    "Extension": "unbounded.extension",
    "HookBlockingError": "unbounded.errors",
    "InvalidRequestError": "unbounded.errors",
    "MessageNormalizer": "unbounded.model",
    "ModelInfo": "unbounded.catalog",
    "ModelTable": "unbounded.catalog",
    "OverloadedError": "unbounded.errors",
    "Policy": "unbounded.policy",
    "PromptTooLongError": "unbounded.errors",
    "ProviderError": "unbounded.errors",
    "RateLimitedError": "unbounded.errors",
    "RecallArgumentError": "unbounded.errors",
    "RetryableError": "unbounded.errors",
    "ServerError": "unbounded.errors",
    "SessionClosedError": "unbounded.errors",
    "SessionLockedError": "unbounded.errors",
    "SettledMessageError": "unbounded.errors",
    "StoreDamagedError": "unbounded.errors",
    "Thresholds": "unbounded.policy",
    "ToolArgumentError": "unbounded.errors",
    "Transcript": "unbounded.model",
    "TranscriptError": "unbounded.errors",
    "UnboundedError": "unbounded.errors",
    "build_token_accounting": "unbounded.tokens",
    "compute_thresholds": "unbounded.policy",
    "create_compact_boundary": "unbounded.model",
    "detect_format": "unbounded.transcripts",
    "load_model_table": "unbounded.catalog",
    "load_transcript": "unbounded.transcripts",
    "messages_after_compact_boundary": "unbounded.model",
    "normalize_messages": "unbounded.model",
    "token_count_with_estimation": "unbounded.tokens",
    "validate_request": "unbounded.model",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is used."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'unbounded' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "CompactionError",
    "ConfigError",
    "ContextCounter",
    "Entry",
    "Extension",
    "HookBlockingError",
    "InvalidRequestError",
    "MessageNormalizer",
    "ModelInfo",
    "ModelTable",
    "OverloadedError",
    "Policy",
    "PromptTooLongError",
    "ProviderError",
    "RateLimitedError",
    "RecallArgumentError",
    "RetryableError",
    "ServerError",
    "SessionClosedError",
    "SessionLockedError",
    "SettledMessageError",
    "StoreDamagedError",
    "Thresholds",
    "ToolArgumentError",
    "Transcript",
    "TranscriptError",
    "UnboundedError",
    "__version__",
    "build_token_accounting",
    "compute_thresholds",
    "create_compact_boundary",
    "detect_format",
    "load_model_table",
    "load_transcript",
    "messages_after_compact_boundary",
    "normalize_messages",
    "token_count_with_estimation",
    "validate_request",
]

# The library logs (refused side files, for instance) but never prints: quiet until the host
# configures logging.
logging.getLogger(__name__).addHandler(logging.NullHandler())
