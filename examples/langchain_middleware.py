"""unbounded as a LangChain v1 agent middleware, in place of SummarizationMiddleware.

The agent reads a long document chapter by chapter. The middleware counts the context before
every model call, clears old tool results in cache-friendly batches, and when the window is
nearly full replaces the older messages with unbounded's structured summary (here from the
offline extractive summarizer), keeping the latest tool rounds verbatim. The context window is
set small so that this happens within a few turns.

    pip install 'unbounded[langchain]' langchain-anthropic
    ANTHROPIC_API_KEY=sk-ant-... python examples/langchain_middleware.py
    ANTHROPIC_BASE_URL=http://127.0.0.1:8080 python examples/langchain_middleware.py
"""

from __future__ import annotations

import os
import sys

HOW_TO_RUN = """\
This example runs a LangChain agent on Claude with unbounded's middleware. It needs
langchain>=1.0 and langchain-anthropic:

    pip install 'unbounded[langchain]' langchain-anthropic
    ANTHROPIC_API_KEY=sk-ant-... python examples/langchain_middleware.py

or, against a server speaking the Messages API (the tests use a scripted local one):

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT python examples/langchain_middleware.py
"""

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
CHAPTERS = 8


def read_chapter(number: int) -> str:
    """Read one chapter (1 to 8) of the report."""
    if not 1 <= number <= CHAPTERS:
        raise ValueError(f"there is no chapter {number}")
    body = " ".join(f"Finding {number}.{line}: the cache stayed warm." for line in range(400))
    return f"Chapter {number}\n{body}\nLast word of chapter {number}: {'abcdefgh'[number - 1]}"


def main() -> int:
    """Run the agent and show what the middleware did."""
    if not os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get("ANTHROPIC_BASE_URL"):
        print(HOW_TO_RUN)
        return 0
    try:
        from langchain.agents import create_agent
        from langchain_anthropic import ChatAnthropic
    except ImportError as missing:
        print(f"missing a package ({missing.name}).\n\n{HOW_TO_RUN}")
        return 0

    from unbounded.events import Event
    from unbounded.integrations import UnboundedMiddleware

    def show(event: Event) -> None:
        print(f"  [{event.kind}] {event}")

    model = ChatAnthropic(  # reads ANTHROPIC_BASE_URL from the environment
        model=MODEL,
        max_tokens=1024,
        api_key=os.environ.get("ANTHROPIC_API_KEY") or "no-key-needed",
        max_retries=0,
    )
    middleware = UnboundedMiddleware(MODEL, context_window=20_000, events=show)
    agent = create_agent(
        model,
        tools=[read_chapter],
        system_prompt="You read documents carefully, one chapter per tool call.",
        middleware=[middleware],
    )
    question = (
        f"Read chapters 1 to {CHAPTERS} one at a time, then tell me the last word of "
        f"chapter {CHAPTERS}."
    )
    result = agent.invoke({"messages": [("user", question)]}, {"recursion_limit": 60})
    messages = result["messages"]
    summaries = [m for m in messages if m.additional_kwargs.get("lc_source") == "summarization"]
    print(f"answer: {messages[-1].text}")
    print(f"messages in the state: {len(messages)}; summaries among them: {len(summaries)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
