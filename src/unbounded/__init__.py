"""unbounded: keep a long-running agent's conversation inside the model's context window."""

import logging

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
    StoreDamagedError,
    ToolArgumentError,
    TranscriptError,
    UnboundedError,
)
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

__version__ = "0.1.0"

# The library logs (refused side files, for instance) but never prints: quiet until the host
# configures logging.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "CompactionError",
    "ConfigError",
    "ContextCounter",
    "Entry",
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
