"""The replay benchmark: the pipeline's per-turn cost and the speed of a whole replay.

- `per_turn_us_median`: the pipeline's work for one turn (`Session.prepare` + `record`) on
  the largest corpus session at its longest point: the session is replayed through the
  pipeline and the 20 turns with the largest requests are timed (turns that compacted are
  left out: a compaction is a different, rarer cost); the best of 3 replays (the lowest
  median: on a shared machine the others are the same work plus noise).
- `json_dumps_us_median`: stdlib `json.dumps` of those same requests (3 times each, the
  median; the best of the 3 replays as well); `per_turn_ratio` is the first over the second
  (target <= 0.5: the pipeline costs at most half of serialising the request it builds).
- `replay_calls_per_s`, `replay_seconds`: a whole `unbounded replay` of that session
  (pipeline, simulator, four baselines, fidelity), as the command runs it.
- `peak_rss_mb`: the process's peak resident memory.
- LangChain (only when it is installed), on the conversation of the longest timed turn
  turned into LangChain messages (`langchain_messages` of them), each side through the entry
  point its user runs before every model call, no model call (below the triggers):
  `langchain_per_call_us_median` is `SummarizationMiddleware.before_model` plus
  `ContextEditingMiddleware(ClearToolUsesEdit).wrap_model_call` (the stack
  `UnboundedMiddleware` replaces), `langchain_summarization_per_call_us_median` the first
  alone, `unbounded_middleware_per_call_us_median` is `UnboundedMiddleware.before_model` on
  an agent step (the previous call saw all but the last round; what it saw is reused, the
  new messages are converted and appended; its first call's clearing applied to the state,
  as the agent applies it), `unbounded_middleware_first_call_us_median` the same on a new
  middleware (every message converted and counted), and `middleware_speedup_vs_langchain`
  the stack's time over ours per step (above 1: ours is faster). LangChain's side keeps no
  state between calls: each of its calls does the whole work.
- `per_turn_us_at_200`, `per_turn_us_at_3000`, `dropin_per_call_us_at_3000`,
  `langchain_middleware_per_call_us_at_3000`: the per-turn cost against history length on a
  synthetic tool-heavy session (`benchmarks/turn_speed.py` says what each times).

Without the corpus (../shared/corpus/raw) the built-in demo session is used.
Run: python benchmarks/run.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import turn_speed  # beside this script

from unbounded.cli.demo import DEMO_SOURCE, demo_transcript
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
LONGEST_TURNS = 20


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
    best = min(runs, key=lambda figures: float(figures["per_turn_us_median"]))
    dumps_us = min(float(figures["json_dumps_us_median"]) for figures in runs)
    turn_us = float(best["per_turn_us_median"])
    return {
        **best,
        "json_dumps_us_median": dumps_us,
        "per_turn_ratio": round(turn_us / dumps_us, 3) if dumps_us else None,
    }


def _per_turn_once(transcript: Transcript, turns: int) -> dict[str, Any]:
    """One replay: median prepare + record over the `turns` largest turns, and json.dumps."""
    from unbounded.evaluation import replay as replay_module

    replayer = replay_module._Replayer(  # the replay engine, driven step by step here
        transcript, ReplayOptions(policy=Policy(), baselines=False)
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
        "per_turn_us_median": round(turn_us, 1),
        "json_dumps_us_median": round(dumps_us, 1),
        "longest_turn_context_tokens": max((size for size, _, _ in longest), default=0),
        "longest_turn_messages": len(longest[-1][2]["messages"]) if longest else 0,
        "_longest_messages": longest[-1][2]["messages"] if longest else [],
    }


def langchain_messages(conversation: list[dict[str, Any]]) -> list[Any] | None:
    """The conversation as LangChain messages (None when LangChain is not installed)."""
    try:
        from langchain_core.messages import (  # type: ignore[import-not-found]
            AIMessage,
            HumanMessage,
            ToolMessage,
        )
    except ImportError:
        return None
    messages: list[Any] = []
    for index, message in enumerate(conversation):
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            calls = [
                {"id": b["id"], "name": b["name"], "args": b.get("input", {})}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            messages.append(AIMessage(content=text, tool_calls=calls, id=f"ai_{index}"))
            continue
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_result":
                body = block.get("content")
                text = body if isinstance(body, str) else json.dumps(body, default=str)
                messages.append(
                    ToolMessage(
                        content=text, tool_call_id=block["tool_use_id"], id=f"t_{index}_{position}"
                    )
                )
            elif block.get("type") == "text":
                messages.append(
                    HumanMessage(content=str(block.get("text", "")), id=f"h_{index}_{position}")
                )
    return messages


def _median_us(work: Any, repeats: int) -> float:
    samples: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def langchain_per_call(messages: list[Any], repeats: int) -> dict[str, float]:
    """Median µs per model call of LangChain's SummarizationMiddleware.before_model plus
    ContextEditingMiddleware(ClearToolUsesEdit).wrap_model_call (the stack this middleware
    replaces), and of the summarization alone. No model call: below the trigger."""
    from langchain.agents.middleware import (  # type: ignore[import-not-found]
        ClearToolUsesEdit,
        ContextEditingMiddleware,
        SummarizationMiddleware,
    )
    from langchain.agents.middleware.types import ModelRequest  # type: ignore[import-not-found]
    from langchain_core.language_models.fake_chat_models import (  # type: ignore[import-not-found]
        FakeListChatModel,
    )

    model = FakeListChatModel(responses=["summary"])
    summarization = SummarizationMiddleware(model=model, trigger=("tokens", 10_000_000))
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit()])
    state = {"messages": list(messages)}

    def stack() -> None:
        summarization.before_model(state, None)  # type: ignore[arg-type]
        request = ModelRequest(model=model, messages=list(messages), state=state)  # type: ignore[arg-type]
        editing.wrap_model_call(request, lambda edited: None)  # type: ignore[arg-type,return-value]

    return {
        "langchain_per_call_us_median": round(_median_us(stack, repeats), 1),
        "langchain_summarization_per_call_us_median": round(
            _median_us(lambda: summarization.before_model(state, None), repeats),  # type: ignore[arg-type]
            1,
        ),
    }


def unbounded_middleware_per_call(messages: list[Any], repeats: int) -> dict[str, float]:
    """Median µs of `UnboundedMiddleware.before_model` on the same messages: an agent step
    (the previous call saw all but the last round, whose messages are new: what an agent's
    next model call brings), and a first call (a new middleware, every message converted).
    The first call's clearing is applied to the state beforehand, as the agent applies the
    update; no compaction (a window the conversation fits)."""
    from unbounded.integrations.langchain import UnboundedMiddleware

    def fresh() -> Any:
        return UnboundedMiddleware("claude-sonnet-4-6", context_window=1_000_000)

    state: dict[str, Any] = {"messages": list(messages)}
    update = fresh().before_model(state, None)  # type: ignore[arg-type]
    if update and "messages" in update:
        replaced = {m.id: m for m in update["messages"]}
        state["messages"] = [replaced.get(m.id, m) for m in messages]
    # The last round: the last AI message and what follows it.
    ai_positions = [i for i, m in enumerate(state["messages"]) if m.type == "ai"]
    cut = ai_positions[-1] if ai_positions else len(messages) - 1
    before = {"messages": state["messages"][:cut]}
    step: list[float] = []
    for _ in range(repeats):
        middleware = fresh()
        middleware.before_model(before, None)  # type: ignore[arg-type]
        started = time.perf_counter()
        middleware.before_model(state, None)  # type: ignore[arg-type]
        step.append(time.perf_counter() - started)
    unused = [fresh() for _ in range(repeats)]  # built beforehand: only the call is timed
    first = _median_us(lambda: unused.pop().before_model(state, None), repeats)  # type: ignore[arg-type]
    return {
        "unbounded_middleware_per_call_us_median": round(statistics.median(step) * 1e6, 1),
        "unbounded_middleware_first_call_us_median": round(first, 1),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print the figures (JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (for tests)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder")
    args = parser.parse_args(argv)
    name, transcript = largest_session(args.corpus)
    if args.quick:  # a smoke run: the first third of the session
        cut = len(transcript.entries) // 3
        transcript = Transcript(transcript.entries[:cut], transcript.format, transcript.path)
    figures: dict[str, Any] = {"session": name}
    turn = per_turn(transcript, 5 if args.quick else LONGEST_TURNS, 1 if args.quick else 3)
    conversation = turn.pop("_longest_messages")
    figures.update(turn)
    start = time.perf_counter()
    report = replay_session(transcript, ReplayOptions(policy=Policy()))
    elapsed = time.perf_counter() - start
    figures["replay_seconds"] = round(elapsed, 2)
    figures["replay_calls"] = report.calls
    figures["replay_calls_per_s"] = round(report.calls / elapsed, 1) if elapsed else None
    messages = langchain_messages(conversation)
    if messages is not None:
        repeats = 3 if args.quick else 20
        figures["langchain_messages"] = len(messages)
        figures.update(langchain_per_call(messages, repeats))
        figures.update(unbounded_middleware_per_call(messages, repeats))
        figures["middleware_speedup_vs_langchain"] = round(
            figures["langchain_per_call_us_median"]
            / figures["unbounded_middleware_per_call_us_median"],
            2,
        )
    figures.update(turn_speed.run(args.quick))
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:32s} {value}")
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
