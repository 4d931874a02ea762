"""Drop-ins for the code people already have: the Anthropic SDK client, a tool-calling agent
loop over Python functions, and a LangChain agent middleware.

    from unbounded.integrations import wrap, run_agent, UnboundedMiddleware

Nothing here imports an SDK or a framework until it is used: `wrap` needs `anthropic`,
`UnboundedMiddleware` needs `langchain>=1.0` (`pip install 'unbounded[langchain]'`); without
them a `ConfigError` names the pip command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unbounded.integrations._schema import tool_schema
from unbounded.integrations.agent_loop import (
    AgentOptions,
    AgentResult,
    Tool,
    aiter_agent,
    arun_agent,
    iter_agent,
    run_agent,
    tool,
)
from unbounded.integrations.anthropic_client import AsyncUnboundedAnthropic, UnboundedAnthropic
from unbounded.integrations.dropin import wrap

if TYPE_CHECKING:
    from unbounded.integrations.langchain import ChatModelSummarizer, UnboundedMiddleware

_LANGCHAIN_NAMES = ("ChatModelSummarizer", "UnboundedMiddleware")


def __getattr__(name: str) -> Any:
    if name in _LANGCHAIN_NAMES:
        from unbounded.integrations import langchain

        return getattr(langchain, name)
    raise AttributeError(f"module 'unbounded.integrations' has no attribute {name!r}")


__all__ = [
    "AgentOptions",
    "AgentResult",
    "AsyncUnboundedAnthropic",
    "ChatModelSummarizer",
    "Tool",
    "UnboundedAnthropic",
    "UnboundedMiddleware",
    "aiter_agent",
    "arun_agent",
    "iter_agent",
    "run_agent",
    "tool",
    "tool_schema",
    "wrap",
]
