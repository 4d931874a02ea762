"""Replay of long sessions: time per call and peak memory at 1,000, 10,000 and 100,000 calls.

1. Generates Claude Code 2.1 sessions of real-session shape, streamed to disk record by
   record (never held in memory), one per size (`--calls`): each API call is an assistant
   line of text and one of its tool call (sharing the message id and usage, as Claude Code
   writes them), two or three hook progress records, and a tool result of 1-3 KB; a user
   prompt every 25 calls, a pause of 6 to 40 minutes every 150 calls, a file-history
   snapshot now and then. The recorded usage grows with what was sent; when it passes
   160,000 tokens the recording compacts (a compact boundary and a summary), as Claude Code
   does on a 200,000-token window.
2. Runs `unbounded replay FILE --json` on each in a fresh process, as a user runs it, and
   reports per size: the calls replayed; `seconds`, the wall time of that process from start
   to exit (interpreter start and imports, preparing the file in two passes and simulating
   the recording, the replay of every call through our pipeline and the baselines, any
   variant replays, the JSON), and `us_per_call` (it over the calls); `cpu_seconds` and
   `cpu_us_per_call`, the process's own user + system CPU time (steadier than wall time on a
   shared machine); and the process's peak resident memory (`peak_rss_mib`). Then
   `per_call_growth` and `cpu_per_call_growth` (the largest size's time per call over the
   smallest's) and the largest peak.

`--keep DIR` writes the files there and keeps them; with `--reuse`, a file already there is
replayed as it is (the files are the same for a size: the generator is seeded). Each size's
row is also printed to stderr, as one JSON line, as soon as it is measured. Run:
python benchmarks/long_session.py [--calls 1000,10000,100000] [--keep DIR [--reuse]] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

SIZES = (1_000, 10_000, 100_000)
MODEL = "claude-sonnet-4-5-20250929"
SESSION = "0bd7c5e1-0000-4000-8000-00000000b0b0"
START = datetime(2026, 2, 1, 9, 0, tzinfo=timezone.utc)
CODE = [
    f"    def handle_{n}(self, request):\n        return self.route(request, {n})\n"
    for n in range(300)
]
TOOLS = ("Read", "Bash", "Grep", "Edit", "Read", "Bash")
PROMPT_EVERY = 25
PAUSE_EVERY = 150
COMPACT_AT = 160_000
"""Recorded context (tokens) past which the recording compacts."""


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    out: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(CODE)
        out.append(line)
        total += len(line)
    return "".join(out)[:size]


class _Writer:
    """Appends records to the file, chaining uuids and moving the clock."""

    def __init__(self, handle: Any, rng: random.Random) -> None:
        self.handle = handle
        self.rng = rng
        self.parent: str | None = None
        self.now = START
        self.bytes = 0
        self.records = 0

    def put(self, record: dict[str, Any], *, seconds: float = 1.0) -> str:
        self.now += timedelta(seconds=seconds)
        record_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        line = orjson.dumps(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/dev/service",
                "sessionId": SESSION,
                "version": "2.1.39",
                "gitBranch": "main",
                **record,
                "uuid": record_id,
                "timestamp": self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            }
        )
        self.handle.write(line + b"\n")
        self.bytes += len(line) + 1
        self.records += 1
        if record.get("type") != "progress":
            self.parent = record_id
        return record_id


def generate(path: Path, calls: int, seed: int = 29) -> dict[str, int]:
    """Write a session of `calls` API calls (module docstring); its counts."""
    rng = random.Random(seed)
    context = 20_000
    boundaries = 0
    with path.open("wb", buffering=1 << 20) as handle:
        out = _Writer(handle, rng)
        for call in range(calls):
            if call % PROMPT_EVERY == 0:
                prompt = f"Task {call // PROMPT_EVERY}: " + _text(rng, 80, 400)
                out.put({"type": "user", "message": {"role": "user", "content": prompt}})
                context += len(prompt) // 4
            if call and call % PAUSE_EVERY == 0:
                out.now += timedelta(minutes=rng.randint(6, 40))
            if call % 40 == 0:
                out.put({"type": "file-history-snapshot", "messageId": str(call), "snapshot": {}})
            message_id = f"msg_{seed:02d}{call:08d}"
            tool_id = f"toolu_{seed:02d}{call:08d}"
            tool = TOOLS[call % len(TOOLS)]
            created = rng.randint(200, 1_500)
            usage = {
                "input_tokens": 3,
                "cache_creation_input_tokens": created,
                "cache_read_input_tokens": context,
                "output_tokens": rng.randint(40, 400),
            }
            message = {"id": message_id, "model": MODEL, "type": "message", "role": "assistant"}
            said = f"Step {call}: " + _text(rng, 40, 240)
            out.put(
                {
                    "type": "assistant",
                    "message": {
                        **message,
                        "content": [{"type": "text", "text": said}],
                        "stop_reason": None,
                        "usage": usage,
                    },
                },
                seconds=rng.uniform(2, 9),
            )
            path_name = f"/home/dev/service/app/module_{rng.randint(0, 400)}.py"
            arguments = (
                {"command": f"pytest -q tests/test_{call % 97}.py", "description": "run tests"}
                if tool == "Bash"
                else {"file_path": path_name, "pattern": "route"}
            )
            out.put(
                {
                    "type": "assistant",
                    "message": {
                        **message,
                        "content": [
                            {"type": "tool_use", "id": tool_id, "name": tool, "input": arguments}
                        ],
                        "stop_reason": "tool_use",
                        "usage": usage,
                    },
                },
                seconds=0.3,
            )
            for hook in range(rng.randint(2, 3)):
                out.put(
                    {
                        "type": "progress",
                        "data": {
                            "type": "hook_progress",
                            "hookEvent": "PostToolUse",
                            "hookName": f"PostToolUse:{tool}",
                            "command": f"/home/dev/.claude/hooks/check-{hook}.sh {path_name}",
                        },
                        "parentToolUseID": tool_id,
                        "toolUseID": tool_id,
                    },
                    seconds=0.2,
                )
            result = _text(rng, 1_000, 3_000)
            out.put(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": tool_id, "content": result}
                        ],
                    },
                    "toolUseResult": {"stdout": result[:200], "stderr": "", "interrupted": False},
                },
                seconds=rng.uniform(0.5, 4),
            )
            context += created + len(said) // 4 + len(result) // 4
            if context > COMPACT_AT:
                boundary = out.put(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "content": "Conversation compacted",
                        "isMeta": False,
                        "level": "info",
                        "compactMetadata": {"trigger": "auto", "preTokens": context},
                        "logicalParentUuid": out.parent,
                    }
                )
                del boundary
                summary = "This session is being continued.\n" + _text(rng, 6_000, 9_000)
                out.put(
                    {
                        "type": "user",
                        "isCompactSummary": True,
                        "isVisibleInTranscriptOnly": True,
                        "message": {"role": "user", "content": summary},
                    }
                )
                context = 20_000 + len(summary) // 4
                boundaries += 1
    return {"calls": calls, "records": out.records, "bytes": out.bytes, "boundaries": boundaries}


def _children() -> tuple[float, float]:
    """Peak resident memory (MiB) and CPU seconds (user + system) of the finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # Linux: KiB


def replay(path: Path) -> dict[str, Any]:
    """`unbounded replay FILE --json` in a fresh process: calls, wall and CPU seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "unbounded", "replay", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"replay of {path.name} failed:\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    cpu = _children()[1]
    return {
        "calls": report["calls"],
        "seconds": round(seconds, 2),
        "us_per_call": round(seconds / max(1, report["calls"]) * 1e6),
        "cpu_seconds": round(cpu, 2),
        "cpu_us_per_call": round(cpu / max(1, report["calls"]) * 1e6),
        "compactions": report["compactions"],
        "invalid_requests": report["invalid_requests"],
    }


def _counted(path: Path) -> dict[str, int]:
    """The counts `generate` returns, of a file it wrote before."""
    records = boundaries = size = 0
    with path.open("rb") as handle:
        for line in handle:
            size += len(line)
            records += bool(line.strip())
            boundaries += b'"subtype":"compact_boundary"' in line
    return {"records": records, "bytes": size, "boundaries": boundaries}


def _measured(path: Path) -> dict[str, Any]:
    """`replay` in a child whose own peak memory is reported (one child per file)."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def run(sizes: Sequence[int], folder: Path, *, reuse: bool = False) -> dict[str, Any]:
    """Generate (or, with `reuse`, take the file already in `folder`) and replay each size;
    the figures."""
    figures: dict[str, Any] = {"sizes": {}}
    for calls in sizes:
        path = folder / f"long-{calls}.jsonl"
        counts = _counted(path) if reuse and path.exists() else generate(path, calls)
        row = {
            "file_mib": round(counts["bytes"] / 1024**2, 1),
            "records": counts["records"],
            "recorded_compactions": counts["boundaries"],
        }
        row.update(_measured(path))
        figures["sizes"][str(calls)] = row
        # Each size's row as soon as it is measured: a run stopped at a larger size (the
        # 100,000-call replay takes many minutes on a shared machine) keeps the smaller ones.
        print(json.dumps({"calls": calls, **row}), file=sys.stderr, flush=True)
    rows = [figures["sizes"][str(calls)] for calls in sizes]
    figures["per_call_growth"] = round(rows[-1]["us_per_call"] / max(1, rows[0]["us_per_call"]), 2)
    figures["cpu_per_call_growth"] = round(
        rows[-1]["cpu_us_per_call"] / max(1, rows[0]["cpu_us_per_call"]), 2
    )
    figures["peak_rss_mib"] = max(row["peak_rss_mib"] for row in rows)
    return figures


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default=",".join(map(str, SIZES)), help="session sizes")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: replay the files already there"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        figures = replay(args.measure)
        figures["peak_rss_mib"] = round(_children()[0], 1)
        print(json.dumps(figures))
        return figures
    sizes = sorted(int(size) for size in args.calls.split(","))
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        figures = run(sizes, args.keep, reuse=args.reuse)
    else:
        with tempfile.TemporaryDirectory(prefix="unbounded-long-") as folder:
            figures = run(sizes, Path(folder))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for calls, row in figures["sizes"].items():
            print(f"{calls:>7} calls: {json.dumps(row)}")
        growth, peak = figures["per_call_growth"], figures["peak_rss_mib"]
        cpu_growth = figures["cpu_per_call_growth"]
        print(f"per_call_growth {growth}  cpu_per_call_growth {cpu_growth}  peak_rss_mib {peak}")
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
