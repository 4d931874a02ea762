"""A ~1 GB transcript: peak memory of reading it, streaming and whole; and what fsync costs.

1. Generates a Claude Code transcript of `--size-gb` (default 1.0) in a temporary folder,
   streamed to disk record by record (never held in memory): agent turns (a tool call with
   usage, its result of 2-12 KB), a user prompt every 20 turns, a compaction (boundary +
   summary) every 2,000 turns.
2. Measures, each in a fresh child process (so each peak RSS is its own):
   - `stream`: `iter_claude_code` counting records, messages, API calls and boundaries and
     keeping the last usage — what `inspect --json` counts, one line in memory at a time;
   - `load`: `read_claude_code`, which keeps every entry (the Transcript is a list);
   - `inspect`: `unbounded inspect --json` on the file (streamed: two passes, small
     per-record summaries, no message content held);
   - `inspect-loaded`: the report built the way inspect did before streaming (a full load,
     then `inspect_transcript`), for comparison.
3. `--fsync-cost`: what a turn writes (2 transcript appends and 2 state saves) with fsync and
   with fsync made a no-op; and a whole Session turn, folder-backed and in memory.

Run: python benchmarks/big_transcript.py [--size-gb 1.0] [--skip MODE] [--fsync-cost]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

WORDS = ("parser", "reads", "each", "token", "checker", "walks", "tree", "finds", "unused", "name")


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(WORDS)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)


def generate(path: Path, size_bytes: int, seed: int = 1) -> dict[str, int]:
    """Write a Claude Code transcript of about `size_bytes`, streamed; return its counts."""
    rng = random.Random(seed)
    filler = [_text(rng, 12_000) for _ in range(16)]
    counts = {"records": 0, "turns": 0, "boundaries": 0, "bytes": 0}
    parent: str | None = None
    session = str(uuid.UUID(int=seed))
    with path.open("wb", buffering=1 << 20) as handle:

        def put(record: dict[str, Any]) -> None:
            nonlocal parent
            record.setdefault("parentUuid", parent)
            record.setdefault("sessionId", session)
            record.setdefault("timestamp", "2025-06-01T12:00:00.000Z")
            line = orjson.dumps(record) + b"\n"
            handle.write(line)
            counts["records"] += 1
            counts["bytes"] += len(line)
            parent = record["uuid"]

        turn = 0
        while counts["bytes"] < size_bytes:
            if turn % 20 == 0:
                put(
                    {
                        "type": "user",
                        "uuid": str(uuid.uuid4()),
                        "message": {"role": "user", "content": f"Task {turn}: {_text(rng, 200)}"},
                    }
                )
            tool_id = f"toolu_{turn:08d}"
            put(
                {
                    "type": "assistant",
                    "uuid": str(uuid.uuid4()),
                    "message": {
                        "id": f"msg_{turn:08d}",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [
                            {"type": "text", "text": _text(rng, 150)},
                            {
                                "type": "tool_use",
                                "id": tool_id,
                                "name": rng.choice(["Read", "Bash", "Edit"]),
                                "input": {
                                    "file_path": f"/work/src/m{turn % 300}.py",
                                    "command": "make test",
                                },
                            },
                        ],
                        "usage": {
                            "input_tokens": 3,
                            "cache_read_input_tokens": 20_000 + turn % 2000 * 40,
                            "cache_creation_input_tokens": 200,
                            "output_tokens": 80,
                        },
                        "stop_reason": "tool_use",
                    },
                }
            )
            size = rng.randint(2_000, 12_000)
            put(
                {
                    "type": "user",
                    "uuid": str(uuid.uuid4()),
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tool_id,
                                "content": rng.choice(filler)[:size],
                            }
                        ],
                    },
                }
            )
            turn += 1
            if turn % 2_000 == 0:
                boundary = str(uuid.uuid4())
                put(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "uuid": boundary,
                        "parentUuid": None,
                        "logicalParentUuid": parent,
                        "content": "Conversation compacted",
                        "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
                    }
                )
                put(
                    {
                        "type": "user",
                        "uuid": str(uuid.uuid4()),
                        "isCompactSummary": True,
                        "message": {"role": "user", "content": "Summary:\n" + _text(rng, 8_000)},
                    }
                )
                counts["boundaries"] += 1
    counts["turns"] = turn
    return counts


# -- measurements, each in its own process ----------------------------------------------


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(mode: str, path: Path) -> dict[str, Any]:
    """Run one measurement in this process; returns its figures."""
    baseline = _peak_mib()
    started = time.perf_counter()
    figures: dict[str, Any] = {"mode": mode}
    if mode == "stream":
        from unbounded.transcripts.claude_code import iter_claude_code
        from unbounded.transcripts.jsonl import ReadReport

        records = messages = boundaries = 0
        ids: set[str] = set()
        last_usage: dict[str, Any] | None = None
        for entry in iter_claude_code(path, report=ReadReport()):
            records += 1
            if entry.type in ("user", "assistant"):
                messages += 1
            if entry.is_compact_boundary:
                boundaries += 1
            if entry.type == "assistant" and entry.message_id:
                ids.add(entry.message_id)
                last_usage = entry.usage or last_usage
        figures.update(
            records=records,
            messages=messages,
            api_calls=len(ids),
            boundaries=boundaries,
            last_usage=last_usage,
        )
    elif mode == "load":
        from unbounded.transcripts.claude_code import read_claude_code

        transcript = read_claude_code(path)
        figures.update(records=len(transcript.entries), view=len(transcript.view_entries()))
    elif mode == "inspect-loaded":
        from unbounded.inspection import inspect_transcript
        from unbounded.transcripts.claude_code import read_claude_code

        report = inspect_transcript(read_claude_code(path)).to_dict()
        figures.update(records=report["records"], context_tokens=report["context_tokens"])
    elif mode == "inspect":
        from typer.testing import CliRunner

        from unbounded.cli import app, inspect_command  # noqa: F401

        result = CliRunner().invoke(app, ["inspect", str(path), "--json"])
        if result.exit_code != 0:
            raise SystemExit(result.output)
        report = json.loads(result.stdout)
        figures.update(records=report["records"], context_tokens=report["context_tokens"])
    else:
        raise SystemExit(f"unknown mode {mode}")
    figures["seconds"] = round(time.perf_counter() - started, 2)
    figures["baseline_rss_mib"] = round(baseline, 1)
    figures["peak_rss_mib"] = round(_peak_mib(), 1)
    return figures


def run_child(mode: str, path: Path) -> dict[str, Any]:
    """`measure` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", mode, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


# -- fsync cost --------------------------------------------------------------------------


def fsync_cost(turns: int = 300, rounds: int = 3) -> dict[str, float]:
    """Per-turn microseconds of what a Session writes, with and without fsync.

    A turn writes 2 transcript appends (tool results, the response) and 2 state saves
    (prepare, record). Measured on the store alone (median of `turns`, best of `rounds`),
    and for a whole folder-backed Session turn beside a MemoryStore one.
    """
    from unbounded import fileio
    from unbounded.model.entries import Entry
    from unbounded.policy import Policy
    from unbounded.providers.base import ModelResponse
    from unbounded.session import Session, SessionConfig
    from unbounded.storage import FolderStore, MemoryStore

    config = SessionConfig(model="claude-sonnet-4-5", system="bench", context_window=1_000_000)
    result_text = "line of tool output\n" * 200  # ~4 KB
    state = {"microcompact": {"cleared": [f"toolu_{i:05d}" for i in range(60)]}, "turns": 1}

    def store_turns(folder: Path) -> float:
        samples = []
        with FolderStore(folder) as store:
            for turn in range(turns):
                started = time.perf_counter()
                store.append([Entry.user(result_text)])
                store.save_state("session", state)
                store.append([Entry.assistant([{"type": "text", "text": f"turn {turn}"}])])
                store.save_state("session", state)
                samples.append(time.perf_counter() - started)
        return statistics.median(samples) * 1e6

    def session_turns(store: Any) -> float:
        session = Session(config, store=store, policy=Policy(auto_compact_enabled=False))
        session.add_user("go")
        samples = []

        async def run() -> None:
            for turn in range(turns):
                started = time.perf_counter()
                await session.prepare()
                session.record(
                    ModelResponse(
                        [{"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {}}],
                        "tool_use",
                        {"input_tokens": 10, "output_tokens": 5},
                        "m",
                        id=f"m{turn}",
                    )
                )
                session.add_tool_results(
                    [{"type": "tool_result", "tool_use_id": f"t{turn}", "content": result_text}]
                )
                samples.append(time.perf_counter() - started)

        asyncio.run(run())
        return statistics.median(samples) * 1e6

    def without_fsync(function: Any, *args: Any) -> float:
        real = os.fsync
        fileio.os.fsync = lambda descriptor: None  # type: ignore[assignment]
        try:
            return float(function(*args))
        finally:
            fileio.os.fsync = real  # type: ignore[assignment]

    figures: dict[str, list[float]] = {}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder)
            figures.setdefault("store_turn_fsync_us", []).append(store_turns(base / "a"))
            figures.setdefault("store_turn_no_fsync_us", []).append(
                without_fsync(store_turns, base / "b")
            )
            with FolderStore(base / "c") as store:
                figures.setdefault("session_turn_folder_us", []).append(session_turns(store))
            figures.setdefault("session_turn_memory_us", []).append(session_turns(MemoryStore()))
    return {key: round(min(values)) for key, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["stream", "load", "inspect", "inspect-loaded"],
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument(
        "--fsync-cost", action="store_true", help="only measure what fsync costs per turn"
    )
    parser.add_argument("--measure", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]))))
        return
    if args.fsync_cost:
        print(json.dumps(fsync_cost(), indent=2))
        return
    folder = Path(tempfile.mkdtemp(prefix="unbounded-big-"))
    path = folder / "big.jsonl"
    try:
        started = time.perf_counter()
        counts = generate(path, int(args.size_gb * 1024**3))
        mib = counts["bytes"] / 1024**2
        print(
            f"generated {path}: {mib:,.0f} MiB, {counts['records']:,} records, "
            f"{counts['turns']:,} turns, {counts['boundaries']} boundaries "
            f"in {time.perf_counter() - started:.1f} s"
        )
        for mode in ("stream", "load", "inspect", "inspect-loaded"):
            if mode in args.skip:
                continue
            figures = run_child(mode, path)
            print(json.dumps(figures))
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            path.unlink(missing_ok=True)
            folder.rmdir()


if __name__ == "__main__":
    main()
