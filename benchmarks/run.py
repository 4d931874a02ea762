"""The replay benchmark: the pipeline's per-turn cost, a whole replay's speed, and the per-call
cost of every entry point against history length.

- `replay_turn_us_median`: the pipeline's work for one turn (`Session.prepare` + `record`)
  while the largest corpus session is replayed, median over the `LONGEST_TURNS` turns with
  the largest requests (turns that compacted left out), best of 3 replays; those turns hold
  `replay_turn_messages` messages (the replay compacts, so this is a small history: the
  per-call figures below are the ones at thousands of messages).
- `json_dumps_us_median`: stdlib `json.dumps` of those same requests; `per_turn_ratio` is the
  first over the second (the pipeline against serialising the request it builds).
- `replay_cli_seconds`, `replay_calls`, `replay_calls_per_s`: `unbounded replay FILE --json`
  on that session in a fresh process, as a user runs it (reading the file included).
- `session_us_at_N`, `dropin_us_at_N`, `middleware_us_at_N`, `langchain_us_at_N` (and their
  `_max_`, `_ratio_N_to_200`, `_growth`): the per-call time of `Session`, the Anthropic
  drop-in, the LangChain middleware inside `create_agent` and LangChain's own stack on the
  same messages, at N messages of a tool loop with 1-3 KB results, all in this one run: the
  median of the timed calls, warm-up rounds left out, the marks interleaved so that load on
  the machine falls on all of them alike (`benchmarks/turn_speed.py` says what each times);
  `_ratio_3000_to_200` is the figure the per-turn target reads (at most 1.5);
  `middleware_speedup_vs_langchain_at_N` is LangChain's time over ours there. The rows
  `middleware_clearing` (clearing due), `middleware_first_call` and
  `middleware_first_call_clearing` (a new middleware's first call) are the same run's; without
  --json they print as one table with the 3x and 20 ms checks.
- `peak_rss_mb`: this process's peak resident memory.

Without the corpus (../shared/corpus/raw) the built-in demo session is used.
Run: python benchmarks/run.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import turn_speed  # beside this script

from unbounded.cli.demo import DEMO_SOURCE, demo_transcript
from unbounded.evaluation.replay import ReplayOptions
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.claude_code import write_claude_code
from unbounded.transcripts.loader import load_transcript

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
LONGEST_TURNS = 20
QUICK_MARKS = (20, 60)
"""History sizes of the per-call figures in a --quick run."""


def largest_session(corpus: Path) -> tuple[str, Transcript]:
    """The largest Claude Code main session of the corpus, else the demo session."""
    if corpus.is_dir():
        candidates = sorted(
            (p for p in corpus.glob("*.jsonl") if "agent-" not in p.name),
            key=lambda p: p.stat().st_size,
        )
        if candidates:
            return candidates[-1].name, load_transcript(candidates[-1])
    print(
        f"no Claude Code session in {corpus}: measuring the built-in demo session instead "
        "(pass --corpus DIR to measure a folder of your own sessions)",
        file=sys.stderr,
    )
    return DEMO_SOURCE, demo_transcript()


def per_turn(transcript: Transcript, turns: int, replays: int = 3) -> dict[str, Any]:
    """Time prepare + record per turn while replaying; figures at the longest turns.

    The session is replayed `replays` times and the quietest replay counts (the lowest
    median), as timeit takes the best of its repeats: on a shared machine the other figures
    are the same work plus noise. json.dumps is timed the same way on the same requests."""
    runs = [_per_turn_once(transcript, turns) for _ in range(replays)]
    best = min(runs, key=lambda figures: float(figures["replay_turn_us_median"]))
    dumps_us = min(float(figures["json_dumps_us_median"]) for figures in runs)
    turn_us = float(best["replay_turn_us_median"])
    return {
        **best,
        "json_dumps_us_median": dumps_us,
        "per_turn_ratio": round(turn_us / dumps_us, 3) if dumps_us else None,
    }


def _per_turn_once(transcript: Transcript, turns: int) -> dict[str, Any]:
    """One replay: median prepare + record over the `turns` largest turns, and json.dumps."""
    from unbounded.evaluation import replay as replay_module
    from unbounded.evaluation.replay_recording import ReplayRecording

    replayer = replay_module._Replayer(  # the replay engine, driven step by step here
        ReplayRecording.of(transcript), ReplayOptions(policy=Policy(), baselines=False)
    )
    session = replayer.session
    samples: list[tuple[int, float, dict[str, Any]]] = []
    original_prepare, original_record = session.prepare, session.record
    timing: dict[str, float] = {}

    async def timed_prepare() -> Any:
        start = time.perf_counter()
        request = await original_prepare()
        timing["prepare"] = time.perf_counter() - start
        timing["request"] = 0.0
        timing_requests.append(request)
        return request

    def timed_record(response: Any) -> Any:
        start = time.perf_counter()
        entry = original_record(response)
        timing["record"] = time.perf_counter() - start
        return entry

    timing_requests: list[Any] = []
    session.prepare = timed_prepare  # type: ignore[method-assign]
    session.record = timed_record  # type: ignore[method-assign]

    async def run() -> None:
        for step in replayer.script.steps:
            compactions = len(replayer.records)
            await replayer._step(step.before, step.call, step.after)
            if len(replayer.records) == compactions:
                request = timing_requests[-1]
                size = replayer.points[-1].context_tokens
                samples.append((size, timing["prepare"] + timing["record"], request))

    asyncio.run(run())
    session.close()
    longest = sorted(samples, key=lambda item: item[0])[-turns:]
    turn_us = statistics.median(t for _, t, _ in longest) * 1e6
    dumps: list[float] = []
    for _, _, request in longest:
        for _ in range(3):
            start = time.perf_counter()
            json.dumps(request)
            dumps.append(time.perf_counter() - start)
    dumps_us = statistics.median(dumps) * 1e6
    return {
        "replay_turn_us_median": round(turn_us, 1),
        "json_dumps_us_median": round(dumps_us, 1),
        "replay_turn_context_tokens": max((size for size, _, _ in longest), default=0),
        "replay_turn_messages": len(longest[-1][2]["messages"]) if longest else 0,
        "_longest_messages": longest[-1][2]["messages"] if longest else [],
    }


def replay_cli(path: Path) -> dict[str, Any]:
    """`unbounded replay PATH --json` in a fresh process: seconds, calls, calls per second."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "unbounded", "replay", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"replay of {path} failed:\n{done.stderr[-2000:]}")
    calls = int(json.loads(done.stdout)["calls"])
    return {
        "replay_cli_seconds": round(seconds, 2),
        "replay_calls": calls,
        "replay_calls_per_s": round(calls / seconds, 1) if seconds else None,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print the figures (JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder")
    args = parser.parse_args(argv)
    name, transcript = largest_session(args.corpus)
    if args.quick:  # a smoke run: the first third of the session
        cut = len(transcript.entries) // 3
        transcript = Transcript(transcript.entries[:cut], transcript.format, transcript.path)
    figures: dict[str, Any] = {"session": name}
    turn = per_turn(transcript, 5 if args.quick else LONGEST_TURNS, 1 if args.quick else 3)
    turn.pop("_longest_messages")
    figures.update(turn)
    with tempfile.TemporaryDirectory(prefix="unbounded-run-") as folder:
        # The command reads a file: the session's own, or the quick cut or demo written out.
        path = transcript.path
        if args.quick or path is None:
            path = Path(folder) / "session.jsonl"
            write_claude_code(transcript.entries, path)
        figures.update(replay_cli(path))
    marks = QUICK_MARKS if args.quick else turn_speed.MARKS
    speeds = turn_speed.run(marks, 3 if args.quick else turn_speed.SAMPLES)
    figures.update(speeds)
    for mark in marks:
        ours, theirs = speeds.get(f"middleware_us_at_{mark}"), speeds.get(f"langchain_us_at_{mark}")
        if ours and theirs:
            figures[f"middleware_speedup_vs_langchain_at_{mark}"] = round(theirs / ours, 2)
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            if key not in speeds:
                print(f"{key:40s} {value}")
        print(turn_speed.table(speeds, marks))
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
