"""Streamed `eval`: the report of the loaded transcript, holding a bounded window of records."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, corpus_files
from unbounded.evaluation.evaluate import EvalReport, evaluate_transcripts
from unbounded.evaluation.streamed import evaluate_stream, open_session
from unbounded.model.entries import Entry
from unbounded.providers.base import ProviderRequest
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.transcripts.claude_code import write_claude_code
from unbounded.transcripts.loader import detect_format, load_transcript


def _claude_code_files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        try:
            if detect_format(path) == "claude-code":
                found.append(path)
        except Exception:  # not a session file (a fixture of another kind)
            continue
    return found


def _streamed(path: Path, *, file_order: bool = False) -> dict[str, Any]:
    session = open_session(path, file_order=file_order)
    report = asyncio.run(evaluate_stream(session, [ExtractiveSummarizer()], name=path.name))
    return report.to_dict()


def _loaded(path: Path, *, file_order: bool = False) -> dict[str, Any]:
    transcript = load_transcript(path, file_order=file_order)
    report = asyncio.run(evaluate_transcripts([(path.name, transcript)], [ExtractiveSummarizer()]))
    return report.to_dict()


@pytest.mark.parametrize(
    "path", _claude_code_files(sorted(FIXTURES.rglob("*.jsonl"))), ids=lambda p: p.name
)
def test_the_streamed_eval_equals_the_loaded_one_on_fixtures(path: Path) -> None:
    assert json.dumps(_streamed(path)) == json.dumps(_loaded(path))
    in_file_order = _streamed(path, file_order=True)
    assert json.dumps(in_file_order) == json.dumps(_loaded(path, file_order=True))


@pytest.mark.corpus
@pytest.mark.parametrize(
    "path", _claude_code_files(corpus_files("marot-spotter_[48]*.jsonl")), ids=lambda p: p.name
)
def test_the_streamed_eval_equals_the_loaded_one_on_compacted_corpus_sessions(path: Path) -> None:
    assert json.dumps(_streamed(path)) == json.dumps(_loaded(path))


def _compacting_session(path: Path, *, compactions: int, turns: int) -> int:
    """A session of `compactions` + 1 stretches of `turns` tool calls, a recorded compaction
    between each two; returns its number of records."""
    entries: list[Entry] = []

    def add(entry: Entry) -> None:
        if entry.data.get("parentUuid") is None and entries and not entry.is_compact_boundary:
            entry.data["parentUuid"] = entries[-1].uuid
        entries.append(entry)

    for stretch in range(compactions + 1):
        if stretch:
            add(
                Entry(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "uuid": f"boundary-{stretch}",
                        "parentUuid": None,
                        "logicalParentUuid": entries[-1].uuid,
                        "timestamp": "2026-01-01T00:00:00.000Z",
                        "compactMetadata": {"trigger": "auto", "preTokens": 1_000 * stretch},
                    }
                )
            )
            add(Entry.user(f"Summary of stretch {stretch}", is_compact_summary=True))
        add(Entry.user(f"Task {stretch}: read the modules"))
        for turn in range(turns):
            tool_id = f"toolu_{stretch}_{turn}"
            call = {"type": "tool_use", "id": tool_id, "name": "Read"}
            add(
                Entry.assistant(
                    [{**call, "input": {"file_path": f"/src/m{stretch}_{turn}.py"}}],
                    message_id=f"msg_{stretch}_{turn}",
                    usage={"input_tokens": 100 + turn, "output_tokens": 10},
                )
            )
            result = {"type": "tool_result", "tool_use_id": tool_id, "content": "x = 1\n" * 20}
            add(Entry.user([result]))
    write_claude_code(entries, path)
    return len(entries)


def _alive() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is Entry)


class _CountingSummarizer(ExtractiveSummarizer):
    """The extractive summarizer, noting how many records are alive when it is called."""

    def __init__(self) -> None:
        super().__init__()
        self.alive: list[int] = []
        # Records other tests left alive in this process are not this eval's.
        self.baseline = _alive()

    def note_alive(self) -> None:
        """Note the records alive now beyond those alive before the eval began."""
        self.alive.append(_alive() - self.baseline)

    def summarize(self, request: ProviderRequest) -> Any:
        self.note_alive()
        return super().summarize(request)


def _records_alive(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], EvalReport]:
    """Records alive at each summary request and after each stretch is read."""
    from unbounded.evaluation import streamed

    summarizer = _CountingSummarizer()
    real = streamed.read_records

    def counted(*args: Any) -> Iterator[Entry]:
        yield from real(*args)
        summarizer.note_alive()

    monkeypatch.setattr(streamed, "read_records", counted)
    report = asyncio.run(evaluate_stream(open_session(path), [summarizer], name=path.name))
    return summarizer.alive, report


def test_a_long_eval_holds_two_stretches_of_records_whatever_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = 30
    stretch = 2 * turns + 3  # prompt, calls and results, boundary and summary
    short, long = tmp_path / "short.jsonl", tmp_path / "long.jsonl"
    _compacting_session(short, compactions=2, turns=turns)
    records = _compacting_session(long, compactions=12, turns=turns)
    alive_short, _ = _records_alive(short, monkeypatch)
    alive_long, report = _records_alive(long, monkeypatch)
    assert len(report.points) == 12
    # The report keeps no records, and what is alive while a point is read or compacted is
    # the stretch it compacts and the one after it (and the recorded summary, read again on
    # its own), however many came before.
    assert all(not p.before and not p.after for p in report.points)
    assert max(alive_long) <= 2 * stretch + 1 < records
    assert max(alive_long) == max(alive_short)
