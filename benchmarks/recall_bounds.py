"""What a hostile `recall` costs: CPU time of the worst queries, and the size of the answers.

A prompt-injected model can ask anything of `recall`. This times (process CPU, the best of 3)
over one session whose cleared output is 60,000 lines:

- `query_max_words_cpu_ms`: a query as long as an argument may be (10,000 characters, about
  1,600 words; only the first 32 are searched);
- `query_refused_cpu_ms`: a 10,000-word query (refused: too long);
- `id_answer_cpu_ms`: recalling the 60,000-line output by id (the first page);
- `cjk_answer_tokens` / `cjk_answer_cap`: a Chinese output recalled by id, counted as the cap
  counts (`tokens.budget`), against `Policy.recall_max_tokens`.

Run: python benchmarks/recall_bounds.py [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from unbounded.errors import RecallArgumentError
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.recall import RecallContext, RecallRequest, TranscriptIndex, answer_recall
from unbounded.tokens.budget import cap_token_count

LINES = 60_000


def cpu_ms(function: Callable[[], Any], repeat: int = 3) -> float:
    """The least process CPU time of `repeat` runs, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best * 1_000


def context_for(output: str, budget: int) -> RecallContext:
    """A session whose one tool output was compacted away."""
    entries = [
        Entry.user("look at the log"),
        Entry.assistant(
            [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Bash",
                    "input": {"command": "cat build.log"},
                }
            ]
        ),
        Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": output}]),
    ]
    index = TranscriptIndex().update(entries)
    return RecallContext(
        entries=entries, view=[], cleared_ids=(), index=index, budget_tokens=budget
    )


def measure() -> dict[str, Any]:
    """The figures of the module docstring."""
    budget = Policy().recall_max_tokens
    log = "".join(f"w{n % 50} step {n}: compiled module_{n} in {n % 7} ms\n" for n in range(LINES))
    context = context_for(log, budget)
    # Words that match everywhere first (the worst case), then padding to the longest query.
    long_query = " ".join([*(f"w{n}" for n in range(50)), *(f"word{n}" for n in range(2_000))])
    long_query = long_query[:10_000]
    huge_query = " ".join(f"word{n}" for n in range(10_000))

    def refused() -> None:
        try:
            RecallRequest.from_input({"query": huge_query})
        except RecallArgumentError:
            return
        raise AssertionError("a 10,000-word query was taken")

    cjk = "".join(
        f"第{n}行：上下文窗口压缩测试，中文文本的分词密度远高于英文。\n" for n in range(3_000)
    )
    cjk_answer = answer_recall(RecallRequest("id", "t1"), context_for(cjk, budget)).text
    return {
        "lines": LINES,
        "query_max_words_cpu_ms": round(
            cpu_ms(lambda: answer_recall(RecallRequest.from_input({"query": long_query}), context)),
            1,
        ),
        "query_refused_cpu_ms": round(cpu_ms(refused), 3),
        "id_answer_cpu_ms": round(
            cpu_ms(lambda: answer_recall(RecallRequest("id", "t1"), context)), 1
        ),
        "cjk_answer_tokens": cap_token_count(cjk_answer),
        "cjk_answer_cap": budget,
    }


def main() -> None:
    """Print the figures (a table, or JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    figures = measure()
    if options.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        print(f"{name:28} {value:>12}")


if __name__ == "__main__":
    main()
