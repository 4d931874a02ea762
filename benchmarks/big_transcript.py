"""A ~1 GB transcript: peak memory and time of every command on it; and what fsync costs.

1. Writes a Claude Code transcript of `--size-gb` (default 1.0) in a temporary folder,
   streamed to disk record by record (never held in memory). By default (`--source corpus`)
   it concatenates the real Claude Code sessions of the corpus folder, again and again, into
   one conversation: each copy gets fresh uuids and one session id, and its first record is
   chained to the last record of the copy before, so the thread runs through the whole file,
   and its times are moved to start a minute after the copy before ended (real shapes:
   many small progress records, real tool results, recorded compactions).
   `--source generated` writes synthetic agent turns instead (a tool call with usage, its
   result of 2-12 KB, a compaction every 2,000 turns).
2. Measures, each in a fresh child process (so each peak RSS is its own):
   - `stream`: `iter_claude_code` counting records, messages, API calls and boundaries, one
     line in memory at a time;
   - `load`: `read_claude_code`, which keeps every entry (the Transcript is a list);
   - `inspect-loaded`: the inspect report built from a full load, for comparison;
   - `inspect`, `replay`, `eval`: `unbounded inspect|replay|eval FILE --json` as a user runs
     them, in a process of their own: `child_peak_rss_mib` is the command's peak resident
     memory (`peak_rss_mib` is then the measuring process's, which only waits), `seconds`
     the command's wall time from start to exit (interpreter start and imports included),
     `child_cpu_seconds` its user + system CPU time; replay adds `us_per_call` (the wall
     time over the calls it replayed) and `cpu_us_per_call`.
3. `--fsync-cost`: what a turn writes (2 transcript appends and 2 state saves) with fsync and
   with fsync made a no-op; and a whole Session turn, folder-backed and in memory.

Each mode's line gives its `seconds`, `peak_rss_mib` and `us_per_record` (its time over the
file's lines); replay adds `us_per_call`. `--only MODE` runs some modes, `--skip MODE` leaves
some out, and `--file PATH` measures an existing transcript (writing 1 GiB takes a while;
`--keep` keeps the written one for the next run).

Run: python benchmarks/big_transcript.py [--size-gb 1.0] [--source corpus|generated]
     [--skip MODE] [--only MODE] [--file PATH] [--keep] [--corpus DIR] [--fsync-cost]
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
from datetime import datetime, timedelta
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


def concatenate(path: Path, size_bytes: int, corpus: Path, seed: int = 1) -> dict[str, int]:
    """Write the corpus's Claude Code sessions again and again as one conversation of about
    `size_bytes` (module docstring); its counts. Sub-agent files are left out."""
    sources = sorted(
        p for p in corpus.glob("*.jsonl") if "agent-" not in p.name and _is_claude_code(p)
    )
    if not sources:
        raise SystemExit(f"no Claude Code session in {corpus}: use --source generated")
    rng = random.Random(seed)
    session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    counts = {"records": 0, "copies": 0, "bytes": 0, "boundaries": 0}
    last: str | None = None
    latest: datetime | None = None
    with path.open("wb", buffering=1 << 20) as handle:
        while counts["bytes"] < size_bytes:
            for source in sources:
                renamed: dict[str, str] = {}
                chained = False
                lines = source.read_bytes().splitlines()
                # One conversation never goes back in time: each copy starts a minute after
                # the one before ended (repeated times kept cache entries alive forever).
                first = _earliest(lines)
                shift = (
                    latest + timedelta(minutes=1) - first
                    if latest is not None and first is not None
                    else timedelta(0)
                )
                for line in lines:
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if not isinstance(record, dict):
                        continue
                    moved = _moved(record.get("timestamp"), shift)
                    if moved is not None:
                        record["timestamp"] = moved[1]
                        latest = moved[0] if latest is None else max(latest, moved[0])
                    for key in ("uuid", "parentUuid", "logicalParentUuid", "leafUuid"):
                        value = record.get(key)
                        if isinstance(value, str):
                            if value not in renamed:
                                renamed[value] = str(uuid.UUID(int=rng.getrandbits(128)))
                            record[key] = renamed[value]
                    if "sessionId" in record:
                        record["sessionId"] = session
                    _suffix_ids(record.get("message"), f"_{counts['copies']}")
                    if not chained and record.get("uuid"):
                        # Chained to the copy before (whatever the session continued from).
                        record["parentUuid"] = last
                        chained = True
                    if record.get("uuid") and not record.get("isSidechain"):
                        last = record["uuid"]
                    if record.get("subtype") == "compact_boundary":
                        counts["boundaries"] += 1
                    out = orjson.dumps(record) + b"\n"
                    handle.write(out)
                    counts["records"] += 1
                    counts["bytes"] += len(out)
                counts["copies"] += 1
                if counts["bytes"] >= size_bytes:
                    break
    return counts


def _time(value: Any) -> datetime | None:
    """A record's ISO timestamp as a datetime (None when it has none or it does not parse)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _earliest(lines: list[bytes]) -> datetime | None:
    """The earliest timestamp of a session file's records."""
    times = []
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        moment = _time(record.get("timestamp")) if isinstance(record, dict) else None
        if moment is not None:
            times.append(moment)
    return min(times, default=None)


def _moved(value: Any, shift: timedelta) -> tuple[datetime, str] | None:
    """A timestamp moved by `shift`, as a datetime and in the transcripts' form."""
    moment = _time(value)
    if moment is None:
        return None
    moved = moment + shift
    return moved, moved.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _suffix_ids(message: Any, suffix: str) -> None:
    """Make a copy's response and tool call ids its own (a copy's calls are other calls)."""
    if not isinstance(message, dict):
        return
    if isinstance(message.get("id"), str):
        message["id"] += suffix
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            for key in ("id", "tool_use_id"):
                if isinstance(block.get(key), str):
                    block[key] += suffix


def _is_claude_code(path: Path) -> bool:
    from unbounded.transcripts.loader import detect_format

    try:
        return detect_format(path) == "claude-code"
    except Exception:  # an unreadable file is not a session to copy
        return False


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
    elif mode in ("inspect", "replay", "eval"):
        done = subprocess.run(
            [sys.executable, "-m", "unbounded", mode, str(path), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        report = json.loads(done.stdout)
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        figures["child_peak_rss_mib"] = round(child.ru_maxrss / 1024, 1)
        cpu = child.ru_utime + child.ru_stime
        figures["child_cpu_seconds"] = round(cpu, 2)
        if mode == "inspect":
            figures.update(records=report["records"], context_tokens=report["context_tokens"])
        elif mode == "replay":
            figures.update(calls=report["calls"], compactions=report["compactions"])
            seconds = time.perf_counter() - started
            figures["us_per_call"] = round(seconds / max(1, report["calls"]) * 1e6)
            figures["cpu_us_per_call"] = round(cpu / max(1, report["calls"]) * 1e6)
        else:
            figures.update(points=report["points"], sessions=report["sessions"])
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


MODES = ("stream", "load", "inspect", "inspect-loaded", "replay", "eval")
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--source", choices=["corpus", "generated"], default="corpus")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="sessions to concatenate")
    parser.add_argument("--skip", action="append", default=[], choices=list(MODES))
    parser.add_argument(
        "--only", action="append", default=[], choices=list(MODES), help="run only these modes"
    )
    parser.add_argument(
        "--file", type=Path, help="measure this transcript instead of writing one (kept)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated file")
    parser.add_argument(
        "--fsync-cost", action="store_true", help="only measure what fsync costs per turn"
    )
    parser.add_argument("--measure", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]))))
        return
    if args.fsync_cost:
        print(json.dumps(fsync_cost(), indent=2))
        return
    if args.file is not None:
        records = sum(1 for _ in args.file.open("rb"))
        print(json.dumps({"file": str(args.file), "mib": round(args.file.stat().st_size / 2**20)}))
        run_modes(args.file, records, args.only, args.skip)
        return
    folder = Path(tempfile.mkdtemp(prefix="unbounded-big-"))
    path = folder / "big.jsonl"
    try:
        started = time.perf_counter()
        size = int(args.size_gb * 1024**3)
        if args.source == "corpus":
            counts = concatenate(path, size, args.corpus)
        else:
            counts = generate(path, size)
        mib = counts["bytes"] / 1024**2
        described = ", ".join(f"{value:,} {key}" for key, value in counts.items() if key != "bytes")
        print(
            json.dumps(
                {
                    "file": str(path),
                    "source": args.source,
                    "mib": round(mib),
                    "counts": described,
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
        )
        run_modes(path, counts["records"], args.only, args.skip)
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            path.unlink(missing_ok=True)
            folder.rmdir()


def run_modes(path: Path, records: int, only: list[str], skip: list[str]) -> None:
    """Measure each chosen mode in its own process and print its figures, with the time per
    record of the file (lines) beside the time per call replay reports."""
    for mode in MODES:
        if mode in skip or (only and mode not in only):
            continue
        figures = run_child(mode, path)
        figures["us_per_record"] = round(figures["seconds"] / max(1, records) * 1e6, 1)
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
