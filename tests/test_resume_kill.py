"""Resume after SIGKILL: a child process drives a session in a folder past a (session-memory)
compaction, prints what it sees and is killed at once; the session loaded from the folder
must show the same view and state, and go on working.

Run as a script (`python tests/test_resume_kill.py --child FOLDER`) it is the child.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig
from unbounded.tokens.estimate import estimate_messages_tokens

CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=[{"name": "Bash", "input_schema": {"type": "object"}}],
    context_window=60_000,
)
POLICY = Policy(
    session_memory_init_tokens=3_000,
    session_memory_min_tokens_between_updates=2_000,
    session_memory_keep_min_tokens=3_000,
    session_memory_keep_min_text_messages=2,
    session_memory_keep_max_tokens=8_000,
)


def open_session(folder: Path) -> tuple[Session, SessionMemory]:
    memory = SessionMemory(background=False)  # the offline updater: no model needed
    return Session.open(folder, CONFIG, policy=POLICY, extensions=[memory]), memory


async def turn(session: Session, number: int) -> None:
    request = await session.prepare()
    validate_request(request["messages"])
    size = estimate_messages_tokens(request["messages"]) + 300
    if number % 6 == 5:
        session.record(ModelResponse([{"type": "text", "text": f"Finished part {number}."}], "end_turn", {"input_tokens": size, "output_tokens": 20}, "claude-sonnet-4-5", id=f"msg_{number}"))
        session.add_user(f"Now part {number + 1}, please.")
        return
    call = {"type": "tool_use", "id": f"t{number}", "name": "Bash", "input": {"command": f"make part{number}"}}
    session.record(ModelResponse([call], "tool_use", {"input_tokens": 40, "cache_read_input_tokens": size, "output_tokens": 30}, "claude-sonnet-4-5", id=f"msg_{number}"))
    session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{number}", "content": f"built part {number}\n" + "log line\n" * 600}])


def snapshot(session: Session, memory: SessionMemory) -> dict[str, Any]:
    return json.loads(
        json.dumps(
            {
                "messages": normalize_messages(session.view),
                "status": dataclasses.asdict(session.status()),
                "micro": session.micro.to_dict(),
                "tracking": session.tracking.to_dict(),
                "ttl": session.ttl_latch.to_dict(),
                "memory": memory.state.to_dict(),
                "notes": session.store.read_memory(),
                "entries": len(session.entries),
            }
        )
    )


async def child(folder: Path) -> None:
    session, memory = open_session(folder)
    session.add_user("Build all the parts of the release.")
    number = 0
    while session.status().compactions == 0 or number % 6 == 5:
        await turn(session, number)
        number += 1
    await turn(session, number)  # one more turn after the compaction
    print(json.dumps({"turns": number + 1, **snapshot(session, memory)}), flush=True)
    print("READY", flush=True)
    await asyncio.sleep(3600)


def test_killed_after_a_compaction_resumes_exactly(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        seen = process.stdout.readline()
        ready = process.stdout.readline()
        assert ready.strip() == "READY", (seen, ready, process.stderr.read() if process.poll() is not None else "")
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    before = json.loads(seen)
    assert before["status"]["compactions"] >= 1 and before["notes"]

    session, memory = open_session(folder)
    after = snapshot(session, memory)
    for key in ("messages", "status", "micro", "tracking", "ttl", "memory", "notes", "entries"):
        assert after[key] == before[key], key
    compaction = [e for e in session.entries if e.is_compact_boundary][-1]
    assert compaction.compact_metadata.get("sessionMemory") is True  # it came from the notes

    async def go_on() -> None:
        for number in range(before["turns"], before["turns"] + 40):
            await turn(session, number)

    asyncio.run(go_on())
    assert session.status().compactions > before["status"]["compactions"]
    validate_request(normalize_messages(session.view))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    asyncio.run(child(Path(sys.argv[2])))
