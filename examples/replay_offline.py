"""unbounded as a library, fully offline: no key, no server, no model.

1. A scripted stand-in for a model drives a `Session` for 40 turns of tool calls in a small
   context window. The session counts tokens from the usage each reply reports, clears old
   tool results, and compacts automatically with the offline extractive summarizer; the
   events say when.
2. Given a recorded session (a Claude Code `.jsonl`, a SWE-agent `.traj` or an OpenHands
   `output.jsonl`), it continues it in a temporary folder and compacts it the same way, then
   shows the summary that would replace the history.

    python examples/replay_offline.py
    python examples/replay_offline.py ~/.claude/projects/<project>/<session>.jsonl
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from unbounded.events import Event
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers import MODEL_PROFILE, ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.tokens.estimate import estimate_messages_tokens

MODEL = "claude-sonnet-4-6"
BASH_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}


class ScriptedModel:
    """Answers every request with the next shell command, reporting a realistic usage."""

    name = "scripted"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.turn = 0

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        """One reply: a Bash tool call, with the prompt size as cached input."""
        self.turn += 1
        prompt = estimate_messages_tokens(request["messages"]) + 3_000  # + system and tools
        return ModelResponse(
            [
                {"type": "text", "text": f"Step {self.turn}: running the next check."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{self.turn:03d}",
                    "name": "Bash",
                    "input": {"command": f"pytest tests/test_step_{self.turn}.py"},
                },
            ],
            "tool_use",
            {"input_tokens": 200, "cache_read_input_tokens": prompt - 200, "output_tokens": 60},
            MODEL,
            id=f"msg_{self.turn:03d}",
        )


def show(event: Event) -> None:
    """Print the pipeline's events as they happen."""
    print(f"    [{event.kind}] {event}")


async def drive_a_session() -> None:
    """Part 1: 40 turns in a 60,000-token window."""
    config = SessionConfig(
        model=MODEL,
        system="You are a coding agent.",
        tools=[{"name": "Bash", "description": "Run a command", "input_schema": BASH_SCHEMA}],
        context_window=60_000,
    )
    session = Session(config, policy=Policy(), events=show)  # in memory; Session.open(folder, ...)
    model = ScriptedModel()
    session.add_user("Make every test in tests/ pass, one file at a time.")
    for turn in range(1, 41):
        response = await session.call(model)  # prepare -> model -> record
        tool = response.tool_uses[0]
        output = f"collected 12 items\n{'.' * 12}\n" + "PASSED line\n" * 500
        session.add_tool_results(
            [{"type": "tool_result", "tool_use_id": tool["id"], "content": output}]
        )
        if turn % 10 == 0:
            status = session.status()
            print(
                f"turn {turn}: {status.tokens:,} tokens, {status.percent_left}% left, "
                f"{status.compactions} compaction(s), {status.microcompacts} microcompaction(s)"
            )


async def compact_a_recording(path: Path) -> None:
    """Part 2: continue a recorded session and compact it offline."""
    folder = Path(tempfile.mkdtemp(prefix="unbounded-replay-")) / "session"
    session = Session.from_transcript(path, folder, policy=Policy())
    before = session.status()
    print(f"{path.name}: {len(session.entries)} records, {before.tokens:,} tokens in context")
    result = await session.compact()  # no summarizer given: the extractive one
    after = session.status()
    print(
        f"compacted by {result.summarizer}: {result.pre_tokens:,} -> {after.tokens:,} tokens "
        f"(summary {result.summary_tokens:,}); transcript: {folder / 'transcript.jsonl'}"
    )
    print("--- the summary's first lines ---")
    print("\n".join(result.summary_text.splitlines()[:12]))


def main() -> int:
    """Run part 1, and part 2 when a transcript is given."""
    print("1. A scripted agent in a small window (extractive summaries, no model):")
    asyncio.run(drive_a_session())
    if len(sys.argv) > 1:
        print("\n2. A recorded session, compacted offline:")
        asyncio.run(compact_a_recording(Path(sys.argv[1]).expanduser()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
