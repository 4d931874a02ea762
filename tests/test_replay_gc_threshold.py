"""`unbounded replay` collects the youngest generation of the cyclic collector every 10,000
allocations while it replays (`replay_command.fewer_collections`), and gives the process its
thresholds back afterwards; the library itself never changes them."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from unbounded.cli import app
from unbounded.cli.replay_command import REPLAY_GC_THRESHOLD, fewer_collections
from unbounded.evaluation import replay

runner = CliRunner()
SESSION = FIXTURES / "sessions" / "rewound.jsonl"


@pytest.fixture
def thresholds_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """The collector's thresholds each time the replay runs."""
    seen: list[tuple[int, ...]] = []
    real = replay.replay_session

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(replay, "replay_session", spy)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield seen
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("as_json", [True, False])
def test_the_command_replays_with_fewer_young_collections(
    thresholds_seen: list[tuple[int, ...]], as_json: bool
) -> None:
    result = runner.invoke(app, ["replay", str(SESSION), *(["--json"] if as_json else [])])
    assert result.exit_code == 0, result.output
    assert thresholds_seen == [(REPLAY_GC_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_library_leaves_the_thresholds_alone(
    thresholds_seen: list[tuple[int, ...]],
) -> None:
    from unbounded.cli.replay_command import open_address

    recording, _ = open_address(str(SESSION), skip_invalid=False, file_order=False, quiet=True)
    replay.replay_session(recording)
    assert thresholds_seen == [(700, 10, 10)]


def test_a_higher_threshold_or_a_collector_turned_off_is_kept() -> None:
    before = gc.get_threshold()
    try:
        for kept in ((0, 10, 10), (50_000, 5, 5)):
            gc.set_threshold(*kept)
            with fewer_collections():
                assert gc.get_threshold() == kept
            assert gc.get_threshold() == kept
        gc.set_threshold(700, 3, 4)
        with pytest.raises(RuntimeError), fewer_collections():
            assert gc.get_threshold() == (REPLAY_GC_THRESHOLD, 3, 4)
            raise RuntimeError("the replay failed")
        assert gc.get_threshold() == (700, 3, 4)
    finally:
        gc.set_threshold(*before)
