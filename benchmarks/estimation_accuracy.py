"""How close token estimates come to the usage the API recorded, on the real corpus sessions.

For every recorded API call of every Claude Code or Codex session in ../shared/corpus/raw:

- from scratch: estimate the messages before the call (the view after the last boundary),
  add one constant per session for the system prompt and tools the transcript does not hold
  (fitted as the median gap), and compare with the recorded prompt
  (input + cache creation + cache read). Done for length/4 and for the o200k_base encoding.
- anchored: `token_count_with_estimation` of the entries before the call (the previous
  response's reported total + the padded estimate of what came after it), compared the same
  way. This is what the pipeline decides with; no constant is fitted.

Calls that recorded no prompt tokens (no usage) are left out. Without the corpus the built-in
demo session is measured (say --corpus DIR for a folder of your own sessions).

Prints a table, or JSON with --json. Run: python benchmarks/estimation_accuracy.py [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from sessions import CORPUS, corpus_sessions, skipped

from unbounded.model.entries import messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages
from unbounded.tokens.estimate import content_tokens, token_count_with_estimation
from unbounded.tokens.exact import TiktokenCounter


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def measure(corpus: Path) -> dict[str, object]:
    """Errors per method, per session and overall."""
    exact = TiktokenCounter("o200k_base")
    methods = ("length/4", "o200k_base", "anchored")
    overall: dict[str, list[float]] = {m: [] for m in methods}
    sessions: dict[str, dict[str, object]] = {}
    for name, transcript in corpus_sessions(corpus):
        main = transcript.main_thread()
        calls = [call for call in transcript.api_calls() if call.prompt_tokens > 0]
        if len(calls) < 2:
            skipped(name, "fewer than two calls with recorded usage")
            continue
        raw: dict[str, list[tuple[int, int]]] = {"length/4": [], "o200k_base": []}
        anchored: list[float] = []
        for call in calls:
            before = main[: call.first]
            view = messages_after_compact_boundary(before)
            messages = normalize_messages(view)
            recorded = call.prompt_tokens
            raw["length/4"].append((sum(content_tokens(m["content"]) for m in messages), recorded))
            raw["o200k_base"].append((exact.count_messages(messages), recorded))
            if any(e.usage is not None for e in view):
                estimate = token_count_with_estimation(view)
                anchored.append(abs(estimate - recorded) / recorded * 100)
        result: dict[str, object] = {"calls": len(calls)}
        for method, pairs in raw.items():
            constant = statistics.median(recorded - estimate for estimate, recorded in pairs)
            errors = [
                abs(estimate + constant - recorded) / recorded * 100 for estimate, recorded in pairs
            ]
            overall[method].extend(errors)
            result[method] = {
                "constant": round(constant),
                "median_error_pct": round(statistics.median(errors), 2),
                "p90_error_pct": round(percentile(errors, 90), 2),
            }
        overall["anchored"].extend(anchored)
        result["anchored"] = {
            "median_error_pct": round(statistics.median(anchored), 2) if anchored else None,
            "p90_error_pct": round(percentile(anchored, 90), 2) if anchored else None,
        }
        sessions[name] = result
    return {
        "sessions": sessions,
        "overall": {
            method: {
                "calls": len(errors),
                "median_error_pct": round(statistics.median(errors), 2),
                "p90_error_pct": round(percentile(errors, 90), 2),
            }
            for method, errors in overall.items()
            if errors
        },
    }


def main() -> int:
    """Run the measurement and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--corpus", type=Path, default=CORPUS, help="folder of sessions (default: the corpus)"
    )
    args = parser.parse_args()
    report = measure(args.corpus)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{'session':45} {'calls':>5}  {'len/4 med/p90':>14}  "
        f"{'o200k med/p90':>14}  {'anchored med/p90':>16}"
    )
    for name, result in report["sessions"].items():  # type: ignore[union-attr]
        cells = []
        for method in ("length/4", "o200k_base", "anchored"):
            figures = result[method]
            cells.append(f"{figures['median_error_pct']}/{figures['p90_error_pct']}")
        print(
            f"{name[:45]:45} {result['calls']:>5}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>16}"
        )
    for method, figures in report["overall"].items():  # type: ignore[union-attr]
        print(
            f"overall {method:12} calls={figures['calls']} "
            f"median={figures['median_error_pct']}% p90={figures['p90_error_pct']}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
