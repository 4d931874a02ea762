"""The drop-in: an ordinary Anthropic SDK tool loop, with unbounded's context management.

The loop below is the SDK's usual one: it keeps the whole conversation in `messages` and sends
it every time. Wrapping the client is the only change: the wrapper appends what is new to an
unbounded session (kept in a folder), sends the session's prepared request (compacted when the
window fills, cache breakpoints placed) and hands back the SDK's own objects.

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_dropin.py    # the real API
    ANTHROPIC_BASE_URL=http://127.0.0.1:8080 python examples/anthropic_dropin.py  # a test server
"""

from __future__ import annotations

import ast
import operator
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HOW_TO_RUN = """\
This example talks to Claude through the official SDK. Run it with a key:

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_dropin.py

or against a server speaking the Messages API (the tests use a scripted local one):

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT python examples/anthropic_dropin.py
"""

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-6")
SYSTEM = "You are a precise assistant. Use the calculator for arithmetic."
TOOLS = [
    {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression such as '640 * 0.125'.",
        "input_schema": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    }
]


OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def calculator(expression: str) -> str:
    """Evaluate + - * / on numbers (nothing else is allowed)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only arithmetic is allowed")

    try:
        result = value(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError) as error:
        return f"error: {error}"
    return f"{result:g}"


def main() -> int:
    """Run a short tool-using conversation through the wrapped client."""
    if not os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get("ANTHROPIC_BASE_URL"):
        print(HOW_TO_RUN)
        return 0
    import anthropic

    from unbounded.integrations import wrap

    folder = Path(tempfile.mkdtemp(prefix="unbounded-dropin-")) / "session"
    base = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY") or "no-key-needed")
    client = wrap(base, session_folder=folder)  # the only line that differs from plain SDK code

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is 12.5% of 640? Use the calculator."}
    ]
    while True:
        reply = client.messages.create(
            model=MODEL, max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=messages
        )
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            break
        results = []
        for block in reply.content:
            if block.type == "tool_use":
                output = calculator(str(block.input.get("expression", "")))
                print(f"  [calculator] {block.input.get('expression')} = {output}")
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": output})
        messages.append({"role": "user", "content": results})
    print("Claude:", "".join(b.text for b in reply.content if b.type == "text"))

    # Streaming works the same way: the SDK's MessageStream, recorded once read.
    messages.append({"role": "user", "content": "Say in one sentence how you got it."})
    print("Claude (streamed): ", end="")
    with client.messages.stream(
        model=MODEL, max_tokens=512, system=SYSTEM, tools=TOOLS, messages=messages
    ) as stream:
        for text in stream.text_stream:
            print(text, end="", flush=True)
    print()

    status = client.status()
    print(
        f"context: {status.tokens:,} tokens, {status.percent_left}% left before auto-compaction, "
        f"{status.compactions} compaction(s); transcript: {folder / 'transcript.jsonl'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
