"""`unbounded tune`: the cheapest policy for your own sessions that loses no more of the task.

Teams run very different workloads: long pauses or none, huge tool outputs or small ones,
one task per session or many. The policy's numbers (when to compact early, how much to keep
after a compaction, how much to re-read) trade cost against what the agent keeps, and the
best trade-off depends on the sessions. `tune_policy(paths)` searches it on the user's own
recorded sessions:

1. Every candidate policy replays every session (`unbounded replay`'s engine, baselines
   off, the same model, window and summarizer) and is scored on two figures:
   - **cost**: the sum of the sessions' replayed costs (USD);
   - **continuation**: at each of its compactions, of the files, code tokens and commands
     the recorded agent went on to use in the next 30 turns (and could have known before),
     the share its full post-compaction context still holds (the recall of
     `unbounded.evaluation.continuation`), summed over the sessions and averaged over the
     three kinds (a policy that never compacts keeps everything: 1.0). The candidates share
     one summarizer, so this compares what the policies keep, not how summaries are written.
2. The candidates are the default policy, then `trials` others drawn from the search space
   (`SEARCH_SPACE`: a grid of values per field, sampled with a fixed seed so a run can be
   repeated), evaluated in `jobs` processes.
3. The winner is the cheapest candidate whose continuation is at least the default's. It is
   returned with the table of every candidate, and `Policy.to_toml()` writes it as a file
   `Session(policy=...)`, `replay --policy` and `eval --policy` read.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unbounded.errors import ConfigError, UnboundedError
from unbounded.policy import Policy

SEARCH_SPACE: dict[str, tuple[Any, ...]] = {
    "early_compact_fraction": (0.3, 0.45, 0.5, 0.7, 1.0),
    "cold_cache_compact_fraction": (0.0, 0.2, 0.4),
    "cold_cache_compact_min_saving": (0.05, 0.1, 0.2),
    "session_memory_keep_max_tokens": (4_000, 6_000, 8_000, 15_000, 40_000),
    "session_memory_keep_min_text_messages": (3, 5),
    "rehydrate_total_file_tokens": (5_000, 10_000, 25_000, 50_000),
    "rehydrate_min_uses": (1, 2),
    "compact_instead_of_clearing": (True, False),
    "prefix_ttl_1h": (True, False),
    "prefix_ttl_1h_after_pauses": (0, 1, 2),
}
"""Policy fields the search varies, and the values it tries for each."""
KEEP_MIN_SHARE = 0.4
"""The keep minimum follows the keep maximum: this share of it."""


@dataclass(frozen=True, slots=True)
class SessionScore:
    """One policy on one session."""

    cost: float
    recorded_cost: float | None
    cache_read_share: float
    compactions: int
    continuation: dict[str, tuple[int, int]]
    """kind -> (held, used and knowable), full context, next 30 turns, summed over points."""


@dataclass(slots=True)
class Candidate:
    """A policy tried, and how it did over all the sessions."""

    changes: dict[str, Any]
    scores: list[SessionScore] = field(default_factory=list)

    @property
    def cost(self) -> float:
        """Total replayed cost (USD)."""
        return sum(s.cost for s in self.scores)

    @property
    def recorded_cost(self) -> float | None:
        """Total recorded cost of the sessions that have one."""
        known = [s.recorded_cost for s in self.scores if s.recorded_cost is not None]
        return sum(known) if known else None

    @property
    def continuation(self) -> float:
        """Mean over files, names and commands of the kept share (1.0 with no compaction)."""
        totals: dict[str, list[int]] = {}
        for score in self.scores:
            for kind, (kept, total) in score.continuation.items():
                pair = totals.setdefault(kind, [0, 0])
                pair[0] += kept
                pair[1] += total
        shares = [kept / total for kept, total in totals.values() if total]
        return sum(shares) / len(shares) if shares else 1.0

    @property
    def compactions(self) -> int:
        """Compactions over all sessions."""
        return sum(s.compactions for s in self.scores)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready row."""
        recorded = self.recorded_cost
        return {
            "changes": dict(self.changes),
            "cost": round(self.cost, 4),
            "recorded_cost": round(recorded, 4) if recorded is not None else None,
            "ratio": round(self.cost / recorded, 4) if recorded else None,
            "continuation": round(self.continuation, 4),
            "compactions": self.compactions,
            "cache_read_share": [round(s.cache_read_share, 4) for s in self.scores],
        }


@dataclass(slots=True)
class TuneReport:
    """Every candidate, the default first, and the one chosen."""

    candidates: list[Candidate]
    best: Candidate
    base: Policy
    skipped: dict[str, str] = field(default_factory=dict)
    """Sessions left out, and why (a replay of them under the default policy failed)."""

    @property
    def default(self) -> Candidate:
        """The base policy's row."""
        return self.candidates[0]

    def policy(self) -> Policy:
        """The chosen policy."""
        return self.base.with_changes(**self.best.changes)

    def to_dict(self) -> dict[str, Any]:
        """The `tune --json` object."""
        return {
            "default": self.default.to_dict(),
            "best": self.best.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "policy_toml": self.policy().to_toml(),
            "skipped": dict(self.skipped),
        }


def with_keep(changes: Mapping[str, Any], base: Policy) -> dict[str, Any]:
    """The changes with the keep minimum following the keep maximum."""
    out = dict(changes)
    keep_max = out.get("session_memory_keep_max_tokens")
    if isinstance(keep_max, int):
        out["session_memory_keep_min_tokens"] = int(keep_max * KEEP_MIN_SHARE)
    return out


def draw_candidates(
    trials: int, *, seed: int, space: Mapping[str, Sequence[Any]] = SEARCH_SPACE
) -> list[dict[str, Any]]:
    """`trials` distinct settings drawn from the space (deterministic for a seed)."""
    if trials < 0:
        raise ConfigError("trials must be >= 0")
    rng = random.Random(seed)
    size = 1
    for values in space.values():
        size *= len(values)
    drawn: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    while len(drawn) < min(trials, size):
        choice = {name: rng.choice(list(values)) for name, values in space.items()}
        key = tuple(choice[name] for name in space)
        if key not in seen:
            seen.add(key)
            drawn.append(choice)
    return drawn


def score_or_error(path: str, policy_fields: dict[str, Any]) -> SessionScore | str:
    """`score_session`, or the message of the error that stopped it (such a session cannot
    be replayed at all: a compaction side call's own transcript, a prefix over the window)."""
    try:
        return score_session(path, policy_fields)
    except UnboundedError as exc:
        return str(exc)


def score_session(path: str, policy_fields: dict[str, Any]) -> SessionScore:
    """Replay one session under one policy (runs in a worker process)."""
    from unbounded.evaluation.replay import ReplayOptions, replay_session
    from unbounded.transcripts.loader import load_transcript

    transcript = _cached_transcript(path, load_transcript)
    report = replay_session(
        transcript, ReplayOptions(policy=Policy(**policy_fields), baselines=False)
    )
    continuation: dict[str, tuple[int, int]] = {}
    for record in report.compaction_records:
        for kind, counts in record.continuation.get("full", {}).items():
            old = continuation.get(kind, (0, 0))
            continuation[kind] = (old[0] + counts.held, old[1] + counts.used)
    return SessionScore(
        cost=report.ours.cost_usd,
        recorded_cost=report.recorded_cost,
        cache_read_share=report.ours.cache_read_share,
        compactions=report.compactions,
        continuation=continuation,
    )


_TRANSCRIPTS: dict[str, Any] = {}


def _cached_transcript(path: str, load: Callable[[str], Any]) -> Any:
    """Each worker process reads each session once."""
    if path not in _TRANSCRIPTS:
        _TRANSCRIPTS[path] = load(path)
    return _TRANSCRIPTS[path]


def _policy_fields(policy: Policy) -> dict[str, Any]:
    from dataclasses import fields

    return {spec.name: getattr(policy, spec.name) for spec in fields(policy)}


Progress = Callable[[int, int], None]


def tune_policy(
    paths: Sequence[str | Path],
    *,
    trials: int = 16,
    jobs: int = 1,
    seed: int = 0,
    base: Policy | None = None,
    progress: Progress | None = None,
) -> TuneReport:
    """Search the policy on these sessions (see the module docstring)."""
    if not paths:
        raise ConfigError("give at least one recorded session to tune on")
    if jobs < 1:
        raise ConfigError("jobs must be >= 1")
    start = base or Policy.from_env()
    candidates = [Candidate({})]
    for changes in draw_candidates(trials, seed=seed):
        candidates.append(Candidate(with_keep(changes, start)))
    skipped: dict[str, str] = {}
    kept_paths = [str(path) for path in paths]
    total = len(candidates) * len(kept_paths)
    done = 0

    def advance() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    def run(tasks: list[tuple[int, str, dict[str, Any]]]) -> dict[tuple[int, str], Any]:
        results: dict[tuple[int, str], SessionScore | str] = {}
        if pool is None:
            for index, path, policy_fields in tasks:
                results[(index, path)] = score_or_error(path, policy_fields)
                advance()
            return results
        futures = {
            pool.submit(score_or_error, path, policy_fields): (index, path)
            for index, path, policy_fields in tasks
        }
        for future in futures:
            results[futures[future]] = future.result()
            advance()
        return results

    # One pool for both rounds: each worker keeps the sessions it has read.
    pool = ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else None
    try:
        first = run([(0, path, _policy_fields(start)) for path in kept_paths])
        # The default first: a session it cannot replay is left out of every candidate.
        for path in list(kept_paths):
            outcome = first[(0, path)]
            if isinstance(outcome, str):
                skipped[path] = outcome
                kept_paths.remove(path)
                total -= len(candidates) - 1
            else:
                candidates[0].scores.append(outcome)
        if progress is not None:
            progress(done, total)
        if not kept_paths:
            raise ConfigError(
                "none of the sessions can be replayed: "
                + "; ".join(f"{path}: {why}" for path, why in skipped.items())
            )
        results = run(
            [
                (index, path, _policy_fields(start.with_changes(**candidate.changes)))
                for index, candidate in enumerate(candidates)
                if index
                for path in kept_paths
            ]
        )
    finally:
        if pool is not None:
            pool.shutdown()
    tried = [candidates[0]]
    for index, candidate in enumerate(candidates[1:], start=1):
        outcomes = [results[(index, path)] for path in kept_paths]
        # A candidate that breaks a replay the default survives is not a candidate.
        if all(isinstance(outcome, SessionScore) for outcome in outcomes):
            candidate.scores = [o for o in outcomes if isinstance(o, SessionScore)]
            tried.append(candidate)
    candidates = tried
    floor = candidates[0].continuation
    eligible = [c for c in candidates if c.continuation >= floor]
    best = min(eligible, key=lambda c: (c.cost, -c.continuation))
    return TuneReport(candidates=candidates, best=best, base=start, skipped=skipped)


__all__ = [
    "SEARCH_SPACE",
    "Candidate",
    "SessionScore",
    "TuneReport",
    "draw_candidates",
    "score_or_error",
    "score_session",
    "tune_policy",
    "with_keep",
]
