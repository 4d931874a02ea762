"""Token counting: usage-anchored estimation, exact counters, and accounting by category."""

from unbounded.tokens.accounting import TokenAccounting, build_token_accounting
from unbounded.tokens.estimate import (
    ContextCounter,
    estimate_messages_tokens,
    rough_token_count,
    token_count_with_estimation,
)
from unbounded.tokens.exact import (
    AnthropicCounter,
    RoughCounter,
    TiktokenCounter,
    TokenCounter,
    counter_for,
    get_encoding,
)

__all__ = [
    "AnthropicCounter",
    "ContextCounter",
    "RoughCounter",
    "TiktokenCounter",
    "TokenAccounting",
    "TokenCounter",
    "build_token_accounting",
    "counter_for",
    "estimate_messages_tokens",
    "get_encoding",
    "rough_token_count",
    "token_count_with_estimation",
]
