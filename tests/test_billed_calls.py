"""Every billed call is counted once, and the same way in every command.

`inspect`, `replay`, replay's fidelity block and `eval` report the calls of a session; on every
fixture and every corpus file their figures must equal what an independent reading of the raw
records finds (`tests/helpers/raw_usage.py`, which shares no code with the readers), and the
recorded cost must be that raw usage priced per model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from raw_usage import file_provider, priced, raw_calls
from typer.testing import CliRunner

from conftest import FIXTURES, corpus_files
from unbounded.cli import app

runner = CliRunner()

FIXTURE_SESSIONS = sorted(
    [
        *(FIXTURES / "sessions").glob("*.jsonl"),
        *(p for p in (FIXTURES / "versions").iterdir() if p.name != "openhands-sdk-conversation"),
        FIXTURES / "versions" / "openhands-sdk-conversation",
        *FIXTURES.glob("*.jsonl"),
        *FIXTURES.glob("*.traj"),
    ]
)


def cli_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def check_every_command(path: Path) -> None:
    raw = raw_calls(path)
    inspected = cli_json("inspect", str(path))
    replayed = cli_json("replay", str(path))
    evaluated = cli_json("eval", str(path))
    counts = {
        "raw": len(raw),
        "inspect": inspected["api_calls"],
        "replay": replayed["calls"],
        "fidelity": replayed["fidelity"]["calls"],
        "eval": evaluated["per_session"][0]["calls"],
    }
    assert set(counts.values()) == {len(raw)}, counts
    recorded = replayed["cost"]["recorded"]
    if raw:
        expected = priced(raw, provider=file_provider(path))
        assert recorded == pytest.approx(expected, rel=1e-5, abs=1e-6)  # JSON rounds to 1e-6
        apart = sum(replayed["calls_not_replayed"].values())
        assert replayed["replayed_calls"] + apart == len(raw)
        assert inspected["api_calls_by_place"]["on_thread"] == replayed["replayed_calls"]
    else:
        assert recorded is None


@pytest.mark.parametrize("path", FIXTURE_SESSIONS, ids=lambda p: p.name)
def test_every_command_counts_each_billed_call_of_a_fixture_once(path: Path) -> None:
    check_every_command(path)


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_every_command_counts_each_billed_call_of_a_corpus_file_once(path: Path) -> None:
    check_every_command(path)


def test_the_raw_reading_sees_what_the_fixtures_hold() -> None:
    """The independent reading is itself right where the answer is known by construction."""
    versions = FIXTURES / "versions"
    counts = {p.name: len(raw_calls(p)) for p in versions.iterdir()}
    assert counts["claude-2.1.78-hooks.jsonl"] == 20  # 4 turns of 4 calls and an answer
    assert counts["claude-2.1.92.jsonl"] == 6  # 4 on the thread, 2 on the rewound branch
    assert counts["claude-2.0.2-vscode.jsonl"] == 11  # the synthetic reply is not billed
    assert counts["openhands-sdk-conversation"] == 4  # 3 responses and the condenser's call
    assert counts["codex-0.118.jsonl"] == 3
    assert raw_calls(FIXTURES / "codex_rollout.jsonl")[-1].output_tokens == 30
