"""The cyclic collector's share of a replay's time per call, at Python's default youngest-
generation threshold and at the one `unbounded replay` sets (`REPLAY_GC_THRESHOLD`).

Replays FILE in this process as the command does (no variants) and prints, every EVERY calls,
the CPU milliseconds a call, the milliseconds a call spent in collections (timed by
`gc.callbacks`, by generation, with their counts) and the resident memory. Run each threshold
on its own, on the same load (generate FILE with `benchmarks/long_session.py --keep DIR`):
python benchmarks/replay_gc.py FILE [--every 2000] [--stop 10000] [--threshold 700|10000]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import time
from typing import Any


def _rss_mib() -> int:
    """Resident memory of this process (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


class _Collections:
    """CPU seconds and counts of the collector's passes, by generation."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        generation = info["generation"]
        self.seconds[generation] += time.process_time() - self._started
        self.counts[generation] += 1


class _Stop(Exception):
    """Ends the replay at --stop."""


def main() -> None:
    """Replay FILE, printing the collector's share per EVERY calls."""
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--every", type=int, default=2000)
    parser.add_argument("--stop", type=int, default=0)
    parser.add_argument("--threshold", type=int, default=700)
    args = parser.parse_args()

    from unbounded.cli.replay_command import ReplaySettings, _options
    from unbounded.evaluation.recording_stream import open_recording
    from unbounded.evaluation.replay import replay_session

    collections = _Collections()
    gc.callbacks.append(collections)
    start = time.process_time()
    recording = open_recording(args.file, skip_invalid=False, file_order=False)
    print(f"opened: {time.process_time() - start:.1f} s CPU, {_rss_mib()} MiB", flush=True)
    settings = ReplaySettings(None, None, "extractive", False, False, True, False, None, False)
    options = _options(settings, recording.model, args.file)
    gc.set_threshold(args.threshold, *gc.get_threshold()[1:])
    last = (time.process_time(), 0, list(collections.seconds), list(collections.counts))

    def progress(done: int, total: int) -> None:
        nonlocal last
        if done % args.every or done == last[1]:
            return
        now, calls = time.process_time(), done - last[1]
        spent = [(a - b) / calls * 1000 for a, b in zip(collections.seconds, last[2], strict=True)]
        counts = [a - b for a, b in zip(collections.counts, last[3], strict=True)]
        print(
            f"{done:>7} calls: {(now - last[0]) / calls * 1000:6.2f} ms/call, collections "
            f"{sum(spent):5.2f} ms/call (by generation {spent[0]:.2f} {spent[1]:.2f} "
            f"{spent[2]:.2f}; {counts} passes), {_rss_mib()} MiB",
            flush=True,
        )
        last = (now, done, list(collections.seconds), list(collections.counts))
        if args.stop and done >= args.stop:
            raise _Stop

    with contextlib.suppress(_Stop):
        replay_session(recording, options, progress=progress)
    print(f"in collections: {sum(collections.seconds):.1f} s of {time.process_time() - start:.1f}")


if __name__ == "__main__":
    main()
