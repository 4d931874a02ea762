"""Speed of the core: load + normalize + count, and the per-turn cost at 2,000 messages.

1. The largest corpus session: load it, normalize its view, count its context, each timed,
   beside `json.dumps` of the request those messages make.
2. A conversation grown to 2,000 API messages: the per-turn work (append one entry to the
   incremental normalizer and counter, read the message list and the count) beside
   `json.dumps` of the whole request at that size. Target: per-turn <= one json.dumps.

Without the corpus, a generated conversation is used. Run: python benchmarks/core_speed.py
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer, normalize_messages
from unbounded.tokens.estimate import ContextCounter, token_count_with_estimation
from unbounded.transcripts.loader import load_transcript

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
SYSTEM = "You are a coding agent. " * 200


def timed(function: Callable[[], Any], repeat: int) -> float:
    """Median wall time of `repeat` runs, in microseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def request_of(messages: list[Any], model: str) -> dict[str, Any]:
    """The request body those messages make."""
    return {"model": model, "max_tokens": 32000, "system": SYSTEM, "messages": messages}


def generated_turn(index: int) -> list[Entry]:
    """One generated agent turn: a tool call with output, then its result."""
    message_id = f"msg_gen_{index}"
    tool_id = f"toolu_gen_{index}"
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1000 + 40 * index, "output_tokens": 60}
    call = Entry.assistant(
        [
            {
                "type": "text",
                "text": f"Step {index}: reading the next module to check its callers.",
            },
            {
                "type": "tool_use",
                "id": tool_id,
                "name": "Read",
                "input": {"file_path": f"/src/m{index}.py"},
            },
        ],
        message_id=message_id,
        usage=usage,
    )
    body = "\n".join(
        f"{n:>6}\tdef function_{index}_{n}(value): return value * {n}" for n in range(30)
    )
    result = Entry.user([{"type": "tool_result", "tool_use_id": tool_id, "content": body}])
    return [call, result]


def grow_entries(seed: list[Entry], target_messages: int) -> list[Entry]:
    """Repeat seed entries with fresh ids until the view has `target_messages` messages."""
    grown: list[Entry] = [Entry.user("Start the task.")]
    normalizer = MessageNormalizer(grown)
    round_number = 0
    while len(normalizer) < target_messages:
        round_number += 1
        for entry in seed:
            data = copy.deepcopy(entry.data)
            _rename_ids(data, f"r{round_number}_")
            clone = Entry(data)
            grown.append(clone)
            normalizer.append(clone)
            if len(normalizer) >= target_messages and clone.type == "user":
                break
    return grown


def _rename_ids(value: Any, prefix: str) -> None:
    if isinstance(value, dict):
        for key in ("id", "tool_use_id"):
            if isinstance(value.get(key), str):
                value[key] = prefix + value[key]
        for child in value.values():
            _rename_ids(child, prefix)
    elif isinstance(value, list):
        for child in value:
            _rename_ids(child, prefix)


def run(corpus: Path) -> dict[str, Any]:
    """Measure and return the figures."""
    report: dict[str, Any] = {}
    sessions = (
        sorted(corpus.glob("*.jsonl"), key=lambda p: p.stat().st_size) if corpus.is_dir() else []
    )
    if sessions:
        largest = sessions[-1]
        transcript = load_transcript(largest)
        view = transcript.view_entries()
        messages = normalize_messages(view)
        model = transcript.model or "claude-sonnet-4-5"
        report["largest_session"] = {
            "file": largest.name,
            "records": transcript.records,
            "bytes": largest.stat().st_size,
            "messages": len(messages),
            "load_us": round(timed(lambda: load_transcript(largest), 5)),
            "normalize_us": round(timed(lambda: normalize_messages(view), 20)),
            "count_us": round(timed(lambda: token_count_with_estimation(view), 20)),
            "json_dumps_us": round(timed(lambda: json.dumps(request_of(messages, model)), 20)),
        }
        seed = [
            e for e in transcript.main_thread() if e.type in ("user", "assistant", "attachment")
        ]
        seed = [e for e in seed if not e.is_compact_summary]
    else:
        seed = [entry for index in range(50) for entry in generated_turn(index)]
        model = "claude-sonnet-4-5"
    entries = grow_entries(seed, 2_000)
    head, tail = entries[:-200], entries[-200:]
    normalizer = MessageNormalizer(head)
    counter = ContextCounter(head)
    per_turn: list[float] = []
    for entry in tail:
        start = time.perf_counter()
        normalizer.append(entry)
        counter.append(entry)
        messages = normalizer.messages
        _ = counter.total
        per_turn.append((time.perf_counter() - start) * 1e6)
    messages = normalizer.messages
    dumps = timed(lambda: json.dumps(request_of(messages, model)), 20)
    per_turn_median = statistics.median(per_turn)
    report["at_2000_messages"] = {
        "messages": len(messages),
        "per_turn_us_median": round(per_turn_median, 1),
        "per_turn_us_p90": round(sorted(per_turn)[int(len(per_turn) * 0.9)], 1),
        "json_dumps_us_median": round(dumps, 1),
        "per_turn_ratio": round(per_turn_median / dumps, 4),
        "batch_normalize_us": round(timed(lambda: normalize_messages(entries), 5)),
        "batch_count_us": round(timed(lambda: token_count_with_estimation(entries), 5)),
    }
    return report


def main() -> int:
    """Run and print the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    print(json.dumps(run(args.corpus), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
