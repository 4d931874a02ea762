"""`replay --json` is written in pieces (`ReplayReport.json_text`), the series a point at a
time, and the pieces are the same bytes as the whole object dumped at once; the command holds
no list of every point's dict while it writes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.cli import app
from unbounded.cli.replay_command import open_address
from unbounded.evaluation import call_series
from unbounded.evaluation.replay import ReplayReport, replay_session

runner = CliRunner()
SESSIONS = sorted((FIXTURES / "sessions").glob("*.jsonl"))


def _report(name: str) -> ReplayReport:
    recording, _ = open_address(
        str(FIXTURES / "sessions" / name), skip_invalid=False, file_order=False, quiet=True
    )
    return replay_session(recording)


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
@pytest.mark.parametrize("series", [True, False])
def test_the_pieces_are_the_whole_object_dumped_at_once(path: Any, series: bool) -> None:
    report = _report(path.name)
    whole = json.dumps(report.to_dict(series=series), indent=2)
    assert "".join(report.json_text(series=series)) == whole


@pytest.mark.parametrize("points", [0, 1])
def test_an_empty_or_one_point_series_is_dumped_as_at_once(points: int) -> None:
    report = _report("rewound.jsonl")
    report = replace(report, points=list(report.points)[:points])
    whole = json.dumps(report.to_dict(series=True), indent=2)
    assert "".join(report.json_text(series=True)) == whole
    assert json.loads(whole)["series"] == [p.to_dict() for p in report.points]


def test_the_command_writes_the_series_without_a_list_of_every_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No point's dict is made while another's is still held: each is written, then let go."""
    live: list[int] = []
    most = [0]
    real = call_series.CallPoint.to_dict

    class Counted(dict[str, Any]):
        def __del__(self) -> None:
            live.pop()

    def counted(point: call_series.CallPoint) -> dict[str, Any]:
        live.append(1)
        most[0] = max(most[0], len(live))
        return Counted(real(point))

    monkeypatch.setattr(call_series.CallPoint, "to_dict", counted)
    session = str(FIXTURES / "sessions" / "resumed.jsonl")
    result = runner.invoke(app, ["replay", session, "--json", "--series"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["series"]) > 3
    assert most[0] == 1
