"""Many workers, one database: 8 processes drive 40 sessions through PostgresStore while
random workers are SIGKILLed. Nothing committed is lost or duplicated, no two writers are
ever inside one session, and every session reloads into a valid request."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parent / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

pytestmark = pytest.mark.postgres

WORKERS = 8
SESSIONS = 40
STEPS = 50
KILLS = 5


def test_eight_killed_and_restarted_workers_lose_and_duplicate_nothing(postgres_url: str, tmp_path: Path) -> None:
    import store_workers

    run = store_workers.run_fleet(
        "postgres",
        postgres_url,
        tmp_path / "logs",
        workers=WORKERS,
        steps=STEPS,
        sessions=SESSIONS,
        kills=KILLS,
        holders=postgres_url,
    )
    assert run.failures == []
    assert len(run.killed) == KILLS
    check = store_workers.check_fleet(
        "postgres", postgres_url, run, sessions=SESSIONS, holders=postgres_url
    )
    assert check.lost == []
    assert check.duplicated == []
    assert set(check.unlogged) <= set(check.unfinished)
    assert len(check.unfinished) <= KILLS
    assert check.overlaps == []
    assert check.invalid == []
    # Survivors and replacements finished their steps; the killed ones some of theirs.
    assert check.committed >= WORKERS * STEPS - KILLS
    assert check.compactions > 0, "no step compacted: the workload no longer exercises compaction"
    assert statistics.median(check.store_seconds) > 0


def test_the_checks_catch_writers_without_the_lock(postgres_url: str, tmp_path: Path) -> None:
    """Negative control: stores that take no lock (and so keep nothing) must fail the checks."""
    import store_workers

    with store_workers.open_store("postgres", postgres_url, "session-000"):
        pass  # the session exists, so the unlocked readers find it
    run = store_workers.run_fleet(
        "postgres-unlocked", postgres_url, tmp_path / "logs", workers=4, steps=10, sessions=1,
        holders=postgres_url,
    )
    assert run.failures == []
    check = store_workers.check_fleet(
        "postgres", postgres_url, run, sessions=1, holders=postgres_url
    )
    assert len(check.lost) == check.committed == 40
    assert check.overlaps, "four writers on one session without a lock never overlapped"
