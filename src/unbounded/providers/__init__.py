"""Model providers: the protocol, the errors, and the Anthropic, OpenAI and offline ones."""

from unbounded.providers.base import (
    AuthenticationError,
    BadRequestError,
    ModelResponse,
    OverloadedError,
    PromptTooLongError,
    Provider,
    ProviderError,
    RateLimitedError,
    RetryableError,
    ServerError,
    parse_prompt_too_long,
)

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ModelResponse",
    "OverloadedError",
    "PromptTooLongError",
    "Provider",
    "ProviderError",
    "RateLimitedError",
    "RetryableError",
    "ServerError",
    "parse_prompt_too_long",
]
