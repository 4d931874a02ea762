"""benchmarks/big_transcript.py's concatenation is one conversation going forward in time."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
from pathlib import Path
from types import ModuleType

import orjson

from conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "big_transcript", ROOT / "benchmarks" / "big_transcript.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["big_transcript"] = module
    spec.loader.exec_module(module)
    return module


def test_each_copy_starts_after_the_one_before_ended(tmp_path: Path) -> None:
    """Repeating a session's own times made the replay's cache simulators keep every entry
    written late in a copy (its time is ahead of the next copy's): the copies are shifted."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    source = FIXTURES / "sessions" / "resumed.jsonl"
    shutil.copy(source, corpus / source.name)
    size = source.stat().st_size
    big = _module()
    out = tmp_path / "big.jsonl"
    counts = big.concatenate(out, size * 3, corpus)
    assert counts["copies"] >= 3
    copies: list[list[str]] = [[] for _ in range(counts["copies"])]
    per_copy = counts["records"] // counts["copies"]
    for number, line in enumerate(out.read_bytes().splitlines()):
        stamp = orjson.loads(line).get("timestamp")
        if isinstance(stamp, str):
            copies[number // per_copy].append(stamp)
    assert all(copies)
    for before, after in itertools.pairwise(copies):
        assert max(before) < min(after)
    # The times within a copy keep their gaps (the record's own form, moved).
    original = [
        orjson.loads(line).get("timestamp") for line in source.read_bytes().splitlines() if line
    ]
    assert copies[0] == [stamp for stamp in original if isinstance(stamp, str)]
