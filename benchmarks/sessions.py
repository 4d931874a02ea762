"""The sessions a corpus benchmark measures: every loadable file of the corpus folder, or the
built-in demo session when there is no corpus (a fresh clone), said on stderr either way."""

from __future__ import annotations

import sys
from pathlib import Path

from unbounded.cli.demo import DEMO_SOURCE, demo_transcript
from unbounded.errors import UnboundedError
from unbounded.model.transcript import Transcript
from unbounded.transcripts.loader import load_transcript

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "raw"
"""Where the project's real transcripts live next to a checkout (absent in a fresh clone)."""


def corpus_sessions(corpus: Path, pattern: str = "*.jsonl") -> list[tuple[str, Transcript]]:
    """(file name, transcript) per corpus file; files that fail to load are named and skipped."""
    if not corpus.is_dir():
        print(
            f"no corpus at {corpus}: measuring the built-in demo session instead "
            "(pass --corpus DIR to measure a folder of your own sessions)",
            file=sys.stderr,
        )
        return [(DEMO_SOURCE, demo_transcript())]
    sessions = []
    for path in sorted(corpus.glob(pattern)):
        try:
            sessions.append((path.name, load_transcript(path)))
        except UnboundedError as exc:
            skipped(path.name, f"does not load: {exc}")
    if not sessions:
        print(f"no session files ({pattern}) in {corpus}", file=sys.stderr)
    return sessions


def skipped(session: str, reason: str) -> None:
    """Say on stderr that a session is left out of the figures, and why."""
    print(f"skipped {session}: {reason}", file=sys.stderr)
