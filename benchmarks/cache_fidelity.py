"""How closely the cache simulator reproduces recorded sessions, and what the lookback bridge
is worth.

For every Claude Code or Codex session in ../shared/corpus/raw, `simulate_recorded_session`
lays out each recorded call as the agent sent it (opaque system+tools prefix, one marker on
the last message, ignored by OpenAI's automatic caching) and simulates the cache; the
recorded and simulated cache-read shares are printed for the rough estimate (length / 4) and
the o200k_base counter, with the largest number of blocks one turn appended (the API looks
back 20). Those figures are in-sample: the prefix, scale and TTLs are fitted on the calls they
are judged on. The held-out figure fits on the first half of the calls and judges the second
half ("held out"), next to the in-sample error on the same second half ("2nd half").

Then a synthetic agent that makes N parallel tool calls per turn (2N blocks a turn) is
simulated with Claude Code's placement and with the lookback bridge (breakpoints.py), to
measure what the intermediate marker changes.

Sessions that cannot be simulated (a model missing from the model table, no recorded usage)
are named on stderr and left out. Without the corpus the built-in demo session is measured.

Run: python benchmarks/cache_fidelity.py [--json] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sessions import CORPUS, corpus_sessions, skipped

from unbounded.caching.blocks import flatten_request
from unbounded.caching.breakpoints import plan_cache_breakpoints
from unbounded.caching.fidelity import FidelityCall, simulate_recorded_session
from unbounded.caching.simulator import CacheSimulator
from unbounded.catalog import as_provider, load_model_table, resolve_recorded_model
from unbounded.errors import ConfigError
from unbounded.model.entries import messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages
from unbounded.model.request import ProviderRequest
from unbounded.model.transcript import Transcript
from unbounded.tokens.exact import TiktokenCounter


def widest_turn(transcript: Transcript) -> int:
    """The most message blocks one recorded call added over the previous one."""
    main = transcript.main_thread()
    widest, previous = 0, None
    for call in transcript.api_calls():
        view = normalize_messages(messages_after_compact_boundary(main[: call.first]))
        blocks = len(flatten_request({"messages": view}))
        if previous is not None and blocks >= previous:
            widest = max(widest, blocks - previous)
        previous = blocks
    return widest


def fidelity(corpus: Path) -> list[dict[str, Any]]:
    """Per-session recorded vs simulated cache-read share."""
    rows = []
    exact = TiktokenCounter("o200k_base")
    table = load_model_table()
    for name, transcript in corpus_sessions(corpus):
        if sum(call.prompt_tokens > 0 for call in transcript.api_calls()) < 2:
            skipped(name, "fewer than two calls with recorded usage")
            continue
        recorded = transcript.model
        _, how, _ = resolve_recorded_model(
            table, recorded, provider=as_provider(transcript.provider)
        )
        if how == "assumed":  # its prices and cache rules would only be assumed
            skipped(name, f"unknown model {recorded!r}: its figures would only be assumed")
            continue
        try:
            rough = simulate_recorded_session(transcript)
        except ConfigError as exc:
            skipped(name, str(exc))
            continue
        precise = simulate_recorded_session(transcript, counter=exact)
        fit_calls = len(rough.calls) // 2
        held_out = simulate_recorded_session(transcript, fit_calls=fit_calls)
        ttls = sorted({call.ttl for call in rough.calls})
        rows.append(
            {
                "session": name,
                "model": rough.model,
                "calls": len(rough.calls),
                "ttl": "/".join(ttls),
                "compactions": rough.compactions,
                "prefix_changes": len(rough.prefix_changes),
                "widest_turn_blocks": widest_turn(transcript),
                "recorded_share": rough.recorded_cache_read_share,
                "simulated_share": rough.simulated_cache_read_share,
                "error_pp": rough.share_error * 100,
                "simulated_share_o200k": precise.simulated_cache_read_share,
                "error_pp_o200k": precise.share_error * 100,
                "recorded_cost_usd": rough.recorded_cost_usd,
                "simulated_cost_usd": rough.simulated_cost_usd,
                "held_out_fit_calls": fit_calls,
                "held_out_recorded_share": held_out.recorded_cache_read_share,
                "held_out_simulated_share": held_out.simulated_cache_read_share,
                "held_out_error_pp": held_out.share_error * 100,
                "in_sample_error_pp_on_held_out_calls": _share_error(rough.calls[fit_calls:]) * 100,
            }
        )
    return rows


def _share_error(calls: Sequence[FidelityCall]) -> float:
    """Simulated minus recorded cache-read share over these calls."""
    recorded = sum(c.recorded.cache_read_input_tokens for c in calls) / max(
        1, sum(c.recorded.prompt_tokens for c in calls)
    )
    simulated = sum(c.simulated.cache_read_input_tokens for c in calls) / max(
        1, sum(c.simulated.prompt_tokens for c in calls)
    )
    return simulated - recorded


def _wide_session(width: int, turns: int) -> list[list[dict[str, Any]]]:
    conversations = []
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refactor the module. " * 100}]
    for turn in range(turns):
        ids = [f"toolu_{turn}_{k}" for k in range(width)]
        messages = [
            *messages,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": i}}
                    for i in ids
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": "line of code\n" * 60}
                    for i in ids
                ],
            },
        ]
        conversations.append(messages)
    return conversations


def bridge(width: int, turns: int = 20) -> dict[str, Any]:
    """Cache-read share and cost of a wide-turn agent, without and with the bridge."""
    model = load_model_table().get("claude-sonnet-4-5")
    tools = [
        {"name": f"tool{i}", "description": "does things " * 20, "input_schema": {"type": "object"}}
        for i in range(15)
    ]
    result: dict[str, Any] = {"width": width, "blocks_per_turn": 2 * width, "turns": turns}
    for label, use_bridge in (("claude_code", False), ("bridge", True)):
        simulator = CacheSimulator(model)
        previous: int | None = None
        read = total = 0
        cost = 0.0
        for index, messages in enumerate(_wide_session(width, turns)):
            body: ProviderRequest = {
                "model": model.name,
                "tools": tools,
                "system": "You are a careful agent. " * 200,
                "messages": messages,  # type: ignore[typeddict-item]
            }
            plan = plan_cache_breakpoints(
                body, previous_message_breakpoint=previous if use_bridge else None
            )
            call = simulator.step(index * 15.0, plan.request, output_tokens=200)
            previous = plan.message_breakpoint
            read += call.cache_read_input_tokens
            total += call.prompt_tokens
            cost += call.cost_usd
        result[label] = {"cache_read_share": read / total, "cost_usd": cost}
    return result


def main() -> int:
    """Run the measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--corpus", type=Path, default=CORPUS, help="folder of sessions (default: the corpus)"
    )
    args = parser.parse_args()
    rows = fidelity(args.corpus)
    bridges = [bridge(width) for width in (5, 10, 11, 15, 25)]
    if args.json:
        print(json.dumps({"fidelity": rows, "lookback_bridge": bridges}, indent=2))
        return 0
    print(
        f"{'session':42} {'calls':>5} {'ttl':>5} {'cmp':>3} {'chg':>3} {'wide':>4} "
        f"{'recorded':>8} {'sim len/4':>9} {'err pp':>6} {'sim o200k':>9} {'err pp':>6} "
        f"{'$ rec':>7} {'$ sim':>7} {'held out':>8} {'2nd half':>8}"
    )
    for row in rows:
        print(
            f"{row['session'][:42]:42} {row['calls']:>5} {row['ttl']:>5} "
            f"{row['compactions']:>3} {row['prefix_changes']:>3} {row['widest_turn_blocks']:>4} "
            f"{row['recorded_share']:>8.2%} {row['simulated_share']:>9.2%} "
            f"{row['error_pp']:>+6.2f} {row['simulated_share_o200k']:>9.2%} "
            f"{row['error_pp_o200k']:>+6.2f} {row['recorded_cost_usd']:>7.2f} "
            f"{row['simulated_cost_usd']:>7.2f} {row['held_out_error_pp']:>+8.2f} "
            f"{row['in_sample_error_pp_on_held_out_calls']:>+8.2f}"
        )
    print()
    print("lookback bridge (synthetic agent, parallel tool calls, 20 turns):")
    for item in bridges:
        plain, bridged = item["claude_code"], item["bridge"]
        print(
            f"  {item['blocks_per_turn']:>3} blocks/turn: read share "
            f"{plain['cache_read_share']:.2%} -> {bridged['cache_read_share']:.2%}, "
            f"cost ${plain['cost_usd']:.3f} -> ${bridged['cost_usd']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
