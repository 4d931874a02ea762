"""The replay command gives free heap pages back every few calls (`unbounded.cli.heap`)."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import unbounded.cli.replay_command as replay_command
from unbounded.cli import app
from unbounded.cli.app import main as _main  # noqa: F401  (registers the commands)
from unbounded.cli.heap import (
    MMAP_THRESHOLD,
    HeapTrimmer,
    glibc_malloc_trim,
    glibc_mallopt,
    map_large_blocks,
)
from unbounded.errors import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "sessions" / "mixed_models.jsonl"
ON_GLIBC = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim and mallopt are glibc's",
)


class FakeTrim:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, pad: int) -> int:
        self.calls.append(pad)
        return 1


def test_it_trims_at_every_multiple_of_its_period() -> None:
    trim = FakeTrim()
    trimmer = HeapTrimmer(every=3, trim=trim)
    for done in range(1, 11):
        trimmer(done, 10)
    assert trim.calls == [0, 0, 0] and trimmer.trims == 3  # after calls 3, 6 and 9


def test_around_trims_and_still_reports_progress() -> None:
    trim, seen = FakeTrim(), []
    hook = HeapTrimmer(every=2, trim=trim).around(lambda done, total: seen.append((done, total)))
    for done in range(1, 5):
        hook(done, 4)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)] and len(trim.calls) == 2
    alone = HeapTrimmer(every=2, trim=trim)
    assert alone.around(None) is alone


def test_a_period_under_one_call_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match="at least 1 call"):
        HeapTrimmer(every=0, trim=FakeTrim())


@ON_GLIBC
def test_glibc_has_malloc_trim_and_it_runs() -> None:
    trim = glibc_malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)  # 1 when memory was given back


@pytest.mark.parametrize("as_json", [True, False])
def test_the_replay_command_trims_while_it_replays(
    as_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    trim = FakeTrim()
    monkeypatch.setattr(replay_command, "HeapTrimmer", lambda: HeapTrimmer(every=1, trim=trim))
    args = ["replay", str(FIXTURE), "--no-variants"] + (["--json"] if as_json else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    calls = json.loads(result.stdout)["calls"] if as_json else None
    assert trim.calls and (calls is None or len(trim.calls) == calls)


def test_a_batch_replay_trims_too(monkeypatch: pytest.MonkeyPatch) -> None:
    trim = FakeTrim()
    monkeypatch.setattr(replay_command, "HeapTrimmer", lambda: HeapTrimmer(every=1, trim=trim))
    other = FIXTURE.with_name("rewound.jsonl")
    result = CliRunner().invoke(app, ["replay", str(FIXTURE), str(other), "--no-variants"])
    assert result.exit_code == 0, result.output
    assert len(trim.calls) >= 2


def test_without_ctypes_nothing_is_trimmed_and_the_command_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ctypes", None)  # an interpreter built without it
    assert glibc_malloc_trim() is None
    trimmer = HeapTrimmer(every=1)
    trimmer(1, 1)
    assert trimmer.trims == 0


def test_the_command_s_trimmer_trims_every_200_calls_as_documented() -> None:
    """docs/cli.md and the CHANGELOG say every 200 calls: after call 200 and 400, no other."""
    trim = FakeTrim()
    trimmer = HeapTrimmer(trim=trim)
    trimmed = []
    for done in range(1, 451):
        before = len(trim.calls)
        trimmer(done, 450)
        if len(trim.calls) > before:
            trimmed.append(done)
    assert trimmed == [200, 400]


def test_elsewhere_than_linux_there_is_no_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS or Windows: no trim is looked up, so the C library is never asked for one."""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert glibc_malloc_trim() is None
    trimmer = HeapTrimmer(every=1)
    trimmer(1, 1)
    assert trimmer.trims == 0


class FakeMallopt:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


def test_a_trimmer_fixes_the_mmap_threshold_once_made() -> None:
    mallopt = FakeMallopt()
    trimmer = HeapTrimmer(every=5, trim=FakeTrim(), mallopt=mallopt)
    assert mallopt.calls == [(-3, MMAP_THRESHOLD)]  # M_MMAP_THRESHOLD in glibc's malloc.h
    assert trimmer.mapped
    for done in range(1, 11):
        trimmer(done, 10)
    assert len(mallopt.calls) == 1  # set once, not per call


def test_a_refused_threshold_is_reported_unset() -> None:
    assert not map_large_blocks(mallopt=FakeMallopt(answer=0))
    assert map_large_blocks(4096, mallopt=FakeMallopt())


def test_the_threshold_lies_between_small_lines_and_a_recorded_image_line() -> None:
    # A recorded line holding an image is about 1 MB; lines far smaller stay on the heap.
    assert 64 * 1024 < MMAP_THRESHOLD <= 512 * 1024


@ON_GLIBC
def test_glibc_has_mallopt_and_takes_the_threshold() -> None:
    mallopt = glibc_mallopt()
    assert mallopt is not None
    assert mallopt(-3, MMAP_THRESHOLD) == 1


def test_the_replay_command_fixes_the_threshold_and_the_library_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import unbounded.cli.heap as heap
    from unbounded.evaluation.recording_stream import open_recording
    from unbounded.evaluation.replay import ReplayOptions, replay_session

    mallopt = FakeMallopt()
    monkeypatch.setattr(heap, "glibc_mallopt", lambda: mallopt)
    recording = open_recording(str(FIXTURE), skip_invalid=False, file_order=False)
    replay_session(recording, ReplayOptions(variants=False))
    assert mallopt.calls == []  # the library leaves the process's allocator alone
    result = CliRunner().invoke(app, ["replay", str(FIXTURE), "--no-variants", "--json"])
    assert result.exit_code == 0, result.output
    assert (-3, MMAP_THRESHOLD) in mallopt.calls


@pytest.mark.parametrize("batch", [False, True])
def test_the_threshold_is_fixed_before_the_recording_is_opened(
    batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import unbounded.cli.heap as heap

    events: list[str] = []

    class OrderedMallopt(FakeMallopt):
        def __call__(self, parameter: int, value: int) -> int:
            events.append("mallopt")
            return super().__call__(parameter, value)

    opener = "open_address" if batch else "pick_session"
    opens = getattr(replay_command, opener)

    def opening(*args: object, **kwargs: object) -> object:
        events.append("open")
        return opens(*args, **kwargs)

    monkeypatch.setattr(heap, "glibc_mallopt", lambda: OrderedMallopt())
    monkeypatch.setattr(replay_command, opener, opening)
    files = [str(FIXTURE)] + ([str(FIXTURE.with_name("rewound.jsonl"))] if batch else [])
    result = CliRunner().invoke(app, ["replay", *files, "--no-variants", "--json"])
    assert result.exit_code == 0, result.output
    # the opening pass reads every line, a recorded image's ~1 MB ones included
    assert events[:2] == ["mallopt", "open"] and events.count("open") == len(files)
