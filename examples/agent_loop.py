"""A small tool-using agent: Python functions as tools, unbounded's session every turn.

The tools are plain functions; their schemas come from the signatures and docstrings. The
loop streams each reply, runs the tool calls (an exception becomes an error result the model
can react to), and stops when the model answers without calling a tool. Auto-compaction and
microcompaction happen inside the session; their events come out of the same iterator.

    ANTHROPIC_API_KEY=sk-ant-... python examples/agent_loop.py
    ANTHROPIC_BASE_URL=http://127.0.0.1:8080 python examples/agent_loop.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HOW_TO_RUN = """\
This example runs a small agent on Claude. Run it with a key:

    ANTHROPIC_API_KEY=sk-ant-... python examples/agent_loop.py

or against a server speaking the Messages API (the tests use a scripted local one):

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT python examples/agent_loop.py
"""

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
WORKSPACE = Path(".")  # set by main() to a fresh temporary folder


def list_files() -> list[str]:
    """List the files in the workspace."""
    return sorted(p.name for p in WORKSPACE.iterdir())


def read_file(name: str) -> str:
    """Read one file of the workspace.

    Args:
        name: The file name, as list_files gives it.
    """
    path = (WORKSPACE / name).resolve()
    if path.parent != WORKSPACE.resolve():
        raise PermissionError(f"{name} is outside the workspace")
    return path.read_text()


def count_word(name: str, word: str) -> int:
    """How many times a word occurs in a file (case-insensitive)."""
    return read_file(name).lower().split().count(word.lower())


def main() -> int:
    """Set up a workspace and let the agent answer a question about it."""
    if not os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get("ANTHROPIC_BASE_URL"):
        print(HOW_TO_RUN)
        return 0
    import anthropic

    from unbounded.events import AgentFinished, ModelTurn, ToolExecuted
    from unbounded.integrations import Tool, iter_agent
    from unbounded.providers import AnthropicProvider
    from unbounded.session import SessionConfig

    global WORKSPACE
    WORKSPACE = Path(tempfile.mkdtemp(prefix="unbounded-agent-"))
    (WORKSPACE / "notes.md").write_text("context windows are finite\nagents are not\n")
    (WORKSPACE / "plan.md").write_text("keep the cache warm\nkeep the cache warm again\n")
    (WORKSPACE / "todo.md").write_text("write the summary\n")

    client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY") or "no-key-needed")
    provider = AnthropicProvider(client)
    config = SessionConfig(
        model=MODEL, system="You answer questions about the files in a workspace.", max_tokens=2048
    )
    tools = [list_files, Tool.from_function(read_file, compactable=True), count_word]
    prompt = "Which file says 'cache' most often, and how many times?"
    for event in iter_agent(config, provider, tools=tools, prompt=prompt, max_turns=8):
        if isinstance(event, ModelTurn):
            calls = ", ".join(b["name"] for b in event.response.tool_uses) or "no tool calls"
            print(f"turn {event.turn}: {calls}")
        elif isinstance(event, ToolExecuted):
            flag = " (error)" if event.is_error else ""
            print(f"  {event.name}({event.input}){flag} -> {str(event.content)[:60]!r}")
        elif isinstance(event, AgentFinished):
            print(f"answer after {event.turns} turn(s) [{event.stop_reason}]: {event.text}")
        else:  # the pipeline's own events: compaction, microcompaction, cache breaks
            print(f"  [{event.kind}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
