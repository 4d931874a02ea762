"""Model providers: the protocol, the errors, and the Anthropic, OpenAI and offline ones.

`AnthropicProvider` and `OpenAIProvider` import their SDK only when one is built: the SDKs
are optional extras, and importing this package never needs them.
"""

from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.response import ProviderWrapper
from unbounded.providers.anthropic import AnthropicProvider
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
from unbounded.providers.openai import OpenAIProvider

__all__ = [
    "MODEL_PROFILE",
    "AnthropicProvider",
    "AuthenticationError",
    "BadRequestError",
    "ModelResponse",
    "OpenAIProvider",
    "OverloadedError",
    "PromptTooLongError",
    "Provider",
    "ProviderError",
    "ProviderProfile",
    "ProviderWrapper",
    "RateLimitedError",
    "RetryableError",
    "ServerError",
    "parse_prompt_too_long",
]
