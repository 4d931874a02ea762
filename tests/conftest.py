"""Shared test fixtures: the corpus location and the project's own fixture files."""

from __future__ import annotations

from pathlib import Path

import pytest

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
