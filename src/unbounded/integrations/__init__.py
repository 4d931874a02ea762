"""Drop-ins for the code people already have: the Anthropic and OpenAI SDK clients (`wrap`
returns an `UnboundedAnthropic` / `UnboundedOpenAI`, or their async twins), a tool-calling
agent loop over Python functions, and a LangChain agent middleware. The pydantic-ai
capability and the OpenAI Agents SDK session are in their modules
(`unbounded.integrations.pydantic_ai`, `unbounded.integrations.openai_agents`).

    from unbounded.integrations import wrap, run_agent, UnboundedMiddleware

Importing this package imports no SDK or framework: `wrap` uses the client you give it
(`anthropic` or `openai`), `UnboundedMiddleware` needs `langchain>=1.0` (`pip install
'unbounded[langchain]'`), loaded when first named; without it a `ConfigError` names the pip
command.
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
from unbounded.integrations.openai_client import AsyncUnboundedOpenAI, UnboundedOpenAI

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
    "AsyncUnboundedOpenAI",
    "ChatModelSummarizer",
    "Tool",
    "UnboundedAnthropic",
    "UnboundedMiddleware",
    "UnboundedOpenAI",
    "aiter_agent",
    "arun_agent",
    "iter_agent",
    "run_agent",
    "tool",
    "tool_schema",
    "wrap",
]
