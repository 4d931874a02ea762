"""`unbounded compact` on the real sessions that recorded a compaction, and on our fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import corpus_files
from unbounded import load_transcript
from unbounded.cli import app
from unbounded.model.normalize import normalize_messages, validate_request

runner = CliRunner()
COMPACTED = [p for p in corpus_files("marot-spotter_*.jsonl") if load_transcript(p).boundaries()]
KEYS = {"pre_tokens", "post_tokens", "summary_tokens", "kept_messages", "attachments", "boundary_uuid"}


def compact(*args: str) -> dict[str, object]:
    from unbounded.cli import compact_command  # noqa: F401  (registers the command)

    result = runner.invoke(app, ["compact", *args, "--json"])
    assert result.exit_code == 0, result.stderr or result.stdout
    data: dict[str, object] = json.loads(result.stdout)
    assert set(data) >= KEYS
    return data


def check_written(path: Path, data: dict[str, object]) -> None:
    written = load_transcript(path)
    view = written.view_entries()
    assert view[0].uuid == data["boundary_uuid"]
    messages = normalize_messages(view)
    validate_request(messages)
    assert len(messages) == data["messages_after"]
    assert "This session continues an earlier conversation" in str(messages[0]["content"])


@pytest.mark.parametrize("path", COMPACTED or [None], ids=lambda p: p.name[:30] if p else "absent")
def test_compact_at_the_recorded_boundary(path: Path | None, tmp_path: Path) -> None:
    if path is None:
        pytest.skip("../shared/corpus/raw is not present")
    out = tmp_path / "compacted.jsonl"
    data = compact(str(path), "--at", "boundary", "--summarizer", "extractive", "-o", str(out))
    recorded_pre = load_transcript(path).boundaries()[0].compact_metadata["preTokens"]
    assert abs(int(data["pre_tokens"]) - recorded_pre) / recorded_pre < 0.05  # type: ignore[arg-type]
    assert int(data["post_tokens"]) < int(data["pre_tokens"]) // 20  # type: ignore[arg-type]
    check_written(out, data)


def test_compact_fixture_end_and_partial(session_2_1: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    data = compact(str(session_2_1), "--at", "end", "-o", str(out))
    check_written(out, data)
    transcript = load_transcript(session_2_1)
    pivot = next(e for e in transcript.view_entries() if e.type == "user" and not e.is_compact_summary
                 and isinstance(e.content, list) and e.content[0].get("type") == "tool_result")
    assert pivot.uuid
    from unbounded.cli import compact_command  # noqa: F401

    # After the recorded boundary the only user prompt is the summary: nothing to pivot on.
    result = runner.invoke(app, ["compact", str(session_2_1), "--partial", "up_to", "--pivot", pivot.uuid])
    assert result.exit_code == 2 and "leaves nothing on one side" in result.stderr


def test_compact_bad_options(session_2_1: Path) -> None:
    from unbounded.cli import compact_command  # noqa: F401

    result = runner.invoke(app, ["compact", str(session_2_1), "--partial", "sideways", "--pivot", "x"])
    assert result.exit_code == 2 and "--partial" in result.stderr
    result = runner.invoke(app, ["compact", str(session_2_1), "--at", "nope"])
    assert result.exit_code == 2 and "--at nope" in result.stderr
    result = runner.invoke(app, ["compact", str(session_2_1), "--summarizer", "anthropic"], env={"ANTHROPIC_API_KEY": ""})
    assert result.exit_code == 2 and "ANTHROPIC_API_KEY" in result.stderr


ID_FIELDS = ("uuid", "parentUuid", "logicalParentUuid", "leafUuid", "timestamp", "sessionId", "messageId")


def _without_ids(path: Path) -> list[object]:
    """The records of a transcript with the fields a new record gets fresh (ids, times)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for field in ID_FIELDS:
            record.pop(field, None)
        message = record.get("message")
        if isinstance(message, dict):
            message.pop("id", None)
        records.append(record)
    return records


@pytest.mark.parametrize(
    "name", ["fixture", *(["corpus"] if COMPACTED else [])]
)
def test_two_runs_of_compact_write_the_same_records(name: str, session_2_1: Path, tmp_path: Path) -> None:
    """Under different hash seeds (set and dict order), the same input gives the same output
    apart from the new records' ids and times."""
    source = session_2_1 if name == "fixture" else COMPACTED[0]
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        args = [sys.executable, "-m", "unbounded", "compact", str(source), "--at", "boundary" if name == "corpus" else "end", "-o", str(out)]
        subprocess.run(args, check=True, capture_output=True, env=env)
        outputs.append(_without_ids(out))
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) > 2


def test_compact_writes_its_receipt(session_2_1: Path, tmp_path: Path) -> None:
    """`compact -o` leaves a receipt in its boundary, as every session compaction does."""
    from unbounded.recall.receipts import receipts_in

    out = tmp_path / "compacted.jsonl"
    data = compact(str(session_2_1), "--at", "end", "-o", str(out))
    written = load_transcript(out)
    receipts = receipts_in(written.entries)
    assert [r.uuid for r in receipts if r.kind == "compaction"][-1:] == [data["boundary_uuid"]]
    receipt = data["receipt"]
    assert isinstance(receipt, dict)
    thread = load_transcript(session_2_1).view_entries()
    summarized = [e for e in thread if e.type in ("user", "assistant")]
    assert receipt["messages"] == len(summarized) - int(data["kept_messages"])  # type: ignore[call-overload]
    assert receipt["covered"]["by"] == data["summarizer"]
