"""Microcompaction on the real sessions of ../shared/corpus/raw (skipped when absent).

For every recorded API call, the request the agent sent next is rebuilt:
`normalize_messages(messages_after_compact_boundary(main_thread()[:call.first]))`. Every tier
keeps it valid, changes no result of a non-compactable tool, and is idempotent. Then each
session is replayed turn by turn with one persistent state, as an agent would run it, and
what microcompaction did is tabulated (run `pytest tests/test_micro_corpus.py -s -k table`
to print the table that docs/microcompaction.md shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from unbounded import load_transcript
from unbounded.compaction import (
    CLEARED_TOOL_RESULT,
    CompactableTools,
    MicrocompactState,
    cached_microcompact,
    count_based_microcompact,
    last_assistant_time,
    microcompact,
    time_based_microcompact,
)
from unbounded.model.entries import Entry, messages_after_compact_boundary
from unbounded.model.normalize import normalize_messages, validate_request
from unbounded.policy import Policy

pytestmark = pytest.mark.corpus

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
FILES = sorted(CORPUS.glob("*")) if CORPUS.is_dir() else []
TOOLS = CompactableTools.default()
TIGHT = Policy(microcompact_protect_recent_tokens=10_000, microcompact_min_savings=5_000)
"""Lower thresholds, so the count-based tier also fires on the shorter sessions."""


def _skip_if_absent() -> None:
    if not FILES:
        pytest.skip("../shared/corpus/raw is not present")


def call_points(main: list[Entry], transcript: Any) -> list[int]:
    """Where a request was sent: recorded calls, else the start of each assistant turn."""
    calls = transcript.api_calls()
    if calls:
        return [call.first for call in calls]
    return [
        i
        for i, e in enumerate(main)
        if e.type == "assistant" and i > 0 and main[i - 1].type != "assistant"
    ]


def request_before(main: list[Entry], point: int) -> tuple[list[Entry], list[Any]]:
    view = messages_after_compact_boundary(main[:point])
    return view, normalize_messages(view)


def tool_results(messages: list[Any]) -> dict[str, dict[str, Any]]:
    return {
        b["tool_use_id"]: b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }


def tool_names(messages: list[Any]) -> dict[str, str]:
    return {
        b["id"]: b["name"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def check_only_compactable_changed(before: list[Any], after: list[Any]) -> int:
    names = tool_names(before)
    changed = 0
    new = tool_results(after)
    for tool_id, block in tool_results(before).items():
        if new[tool_id] is not block and new[tool_id] != block:
            assert TOOLS.is_compactable(names[tool_id]), names[tool_id]
            assert new[tool_id]["content"] == CLEARED_TOOL_RESULT
            changed += 1
    return changed


RUNS = {
    "count": lambda m, s: count_based_microcompact(m, s),
    "count-tight": lambda m, s: count_based_microcompact(m, s, TIGHT),
    "time": lambda m, s: time_based_microcompact(
        m, s, now=datetime(2030, 1, 1).astimezone(), last_assistant_at=datetime(2000, 1, 1)
    ),
    "cached": lambda m, s: cached_microcompact(m, s, supported=True),
}


@pytest.mark.parametrize("path", FILES or [None], ids=lambda p: p.name if p else "absent")
def test_every_call_prefix_stays_valid_and_idempotent(path: Path | None) -> None:
    _skip_if_absent()
    assert path is not None
    transcript = load_transcript(path)
    main = transcript.main_thread()
    changed = 0
    for point in call_points(main, transcript):
        _, messages = request_before(main, point)
        if not messages:
            continue  # a sub-agent file's first call: its prompt is not in the file
        validate_request(messages)
        for name, run in RUNS.items():
            state = MicrocompactState()
            result = run(messages, state)
            validate_request(result.messages)
            changed += check_only_compactable_changed(messages, result.messages)
            assert run(messages, state).messages == result.messages, name
            if name != "cached":
                assert run(result.messages, MicrocompactState()).messages == result.messages, name
            else:
                assert result.messages == messages
    if path.name.startswith("marot-spotter_4") or path.name.startswith("marot-spotter_8"):
        assert changed > 0


# -- replay -----------------------------------------------------------------------------------


@dataclass
class Replay:
    """What one session's turn-by-turn replay did."""

    session: str
    calls: int
    compactable_results: int
    count_events: int = 0
    time_events: int = 0
    results_cleared: int = 0
    tokens_cleared: int = 0
    cache_breaking_changes: int = 0
    prefix_changes: int = 0
    input_tokens_saved: int = 0
    """Sum over calls of the cleared tokens that call did not send."""
    cache_batches: int = 0
    cache_refs_deleted: int = 0
    cache_tokens_deleted: int = 0
    cache_expiries: int = 0


def replay(
    path: Path,
    *,
    policy: Policy | None = None,
    cached: bool = False,
    entries: list[Entry] | None = None,
) -> tuple[Replay, MicrocompactState]:
    """Run microcompaction before every recorded call with one persistent state."""
    transcript = load_transcript(path)
    main = entries if entries is not None else transcript.main_thread()
    calls = {call.first: call for call in transcript.api_calls()}
    points = call_points(main, transcript)
    state = MicrocompactState()
    boundaries = 0
    seen: set[str] = set()
    report = Replay(session=path.name, calls=len(points), compactable_results=0)
    previous: list[Any] | None = None
    for point in points:
        prefix = main[:point]
        count = sum(1 for e in prefix if e.is_compact_boundary)
        if count != boundaries:  # post-compact cleanup
            state.reset_after_compaction()
            boundaries = count
            previous = None
        view, messages = request_before(main, point)
        if not messages:
            continue  # a sub-agent file's first call: its prompt is not in the file
        result = microcompact(
            messages,
            state,
            policy=policy,
            now=prefix[-1].time if prefix else None,
            last_assistant_at=last_assistant_time(view),
            cache_edits_supported=cached,
        )
        validate_request(result.messages)
        check_only_compactable_changed(messages, result.messages)
        # The part sent last time is unchanged unless a new clear changed it.
        if previous is not None and not result.prefix_changed:
            assert result.messages[: len(previous) - 1] == previous[: len(previous) - 1]
        report.prefix_changes += result.prefix_changed
        previous = result.messages
        seen.update(r.tool_use_id for r in state.ledger.compactable_results())
        report.input_tokens_saved += sum(
            state.cleared.get(i, 0) for i in tool_results(messages)
        ) + sum(state.cached.deleted_tokens.values())
        call = calls.get(point)
        if cached and call is not None:
            state.observe_response(call.usage)
    stats = state.stats
    report.compactable_results = len(seen)
    report.count_events = stats.count_clear_events
    report.time_events = stats.time_clear_events
    report.results_cleared = stats.results_cleared
    report.tokens_cleared = stats.tokens_cleared
    report.cache_breaking_changes = stats.cache_breaking_changes
    report.cache_batches = stats.cache_edit_batches
    report.cache_refs_deleted = stats.cache_refs_deleted
    report.cache_tokens_deleted = stats.cache_tokens_deleted
    report.cache_expiries = stats.cache_expiries
    return report, state


def gap_turns(path: Path) -> int:
    """Calls made more than 60 minutes after the previous assistant message."""
    transcript = load_transcript(path)
    main = transcript.main_thread()
    cold = 0
    for point in call_points(main, transcript):
        prefix = main[:point]
        last = last_assistant_time(prefix)
        now = prefix[-1].time if prefix else None
        if last and now and (now - last) > timedelta(minutes=60):
            cold += 1
    return cold


@pytest.mark.parametrize("path", FILES or [None], ids=lambda p: p.name if p else "absent")
def test_replay_is_cache_aware(path: Path | None) -> None:
    _skip_if_absent()
    assert path is not None
    for policy in (Policy(), TIGHT):
        report, _ = replay(path, policy=policy)
        # Clearing happens in batches of at least the minimum saving, so the number of
        # cache-breaking changes is bounded by the tokens cleared.
        assert report.cache_breaking_changes == report.count_events
        assert (
            report.cache_breaking_changes * policy.microcompact_min_savings <= report.tokens_cleared
        )
        assert report.prefix_changes == report.count_events + report.time_events
        if gap_turns(path) and report.compactable_results > policy.time_based_keep_recent:
            assert report.time_events >= 1
    cached, _ = replay(path, cached=True)
    assert cached.cache_breaking_changes == 0  # cache edits never change the messages
    assert cached.count_events == 0


def test_time_based_fires_on_a_stretched_real_session(corpus: Path) -> None:
    """Shift the later entries of a real session by +2h: the cache is cold, the view clears."""
    path = corpus / "marot-spotter_8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    transcript = load_transcript(path)
    main = transcript.main_thread()
    assert gap_turns(path) == 0  # no natural idle gap in this one
    points = call_points(main, transcript)
    point = points[len(points) // 3]
    _, messages = request_before(main, point)
    assert sum(1 for n in tool_names(messages).values() if TOOLS.is_compactable(n)) > 5
    last_assistant = max(i for i in range(point) if main[i].type == "assistant")
    stretched = [
        e if i <= last_assistant else _shifted(e, timedelta(hours=2)) for i, e in enumerate(main)
    ]
    assert all(
        a.data is b.data for a, b in zip(main[: last_assistant + 1], stretched, strict=False)
    )

    s_view, s_messages = request_before(stretched, point)
    assert s_messages == messages
    now, last = stretched[point - 1].time, last_assistant_time(s_view)
    assert now is not None and last is not None and now - last > timedelta(minutes=60)
    result = microcompact(s_messages, MicrocompactState(), now=now, last_assistant_at=last)
    assert result.tier == "time"
    validate_request(result.messages)
    assert check_only_compactable_changed(messages, result.messages) == len(result.cleared_ids) > 0
    names = tool_names(messages)
    intact = [
        i
        for i, b in tool_results(result.messages).items()
        if TOOLS.is_compactable(names[i]) and b["content"] != CLEARED_TOOL_RESULT
    ]
    assert len(intact) == 5
    assert result.cleared_read_paths  # Reads were among them: the caller drops their state

    # Replayed turn by turn, the stretched session fires exactly once, at that call.
    report, state = replay(path, entries=stretched)
    assert report.time_events == 1
    assert state.stats.time_clear_events == 1
    plain, _ = replay(path)
    assert plain.time_events == 0


def _shifted(entry: Entry, delta: timedelta) -> Entry:
    data = dict(entry.data)
    moment = entry.time
    if moment is not None:
        data["timestamp"] = (
            (moment + delta).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return Entry(data, entry.line)


def test_replay_table(corpus: Path) -> None:
    """Print the per-session tables of docs/microcompaction.md (`-s` to see them)."""
    runs = {
        "default policy (time-based + count-based, real timestamps)": {},
        "tight policy (protect 10,000, min saving 5,000)": {"policy": TIGHT},
        "cached tier (cache_edits supported, recorded usage observed)": {"cached": True},
    }
    out = []
    for title, options in runs.items():
        out += [
            f"\n{title}\n",
            "| session | calls | compactable results | clears count/time | results cleared "
            "| tokens cleared | cache-breaking changes | edit batches | refs deleted "
            "| tokens deleted | expiries | input tokens saved |",
            "|" + "---|" * 12,
        ]
        for path in sorted(corpus.glob("*")):
            r, _ = replay(path, **options)  # type: ignore[arg-type]
            out.append(
                f"| {r.session[:40]} | {r.calls} | {r.compactable_results} "
                f"| {r.count_events}/{r.time_events} | {r.results_cleared} "
                f"| {r.tokens_cleared:,} | {r.cache_breaking_changes} | {r.cache_batches} "
                f"| {r.cache_refs_deleted} | {r.cache_tokens_deleted:,} | {r.cache_expiries} "
                f"| {r.input_tokens_saved:,} |"
            )
    print("\n".join(out))
    rows = [line for line in out if line.startswith("| ") and not line.startswith("| session")]
    assert len(rows) == 3 * len(FILES)
    assert all(int(row.split("|")[2]) > 0 for row in rows)  # every session replayed calls
