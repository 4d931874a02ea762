"""The `unbounded` command starts without importing the engines its commands run: `--help`
and argument errors answer at once. Nothing is timed: what is imported is checked."""

from __future__ import annotations

import json
import subprocess
import sys

ENGINES = (
    "unbounded.session",
    "unbounded.evaluation.replay",
    "unbounded.evaluation.evaluate",
    "unbounded.compaction",
    "unbounded.caching",
    "unbounded.inspection",
    "unbounded.transcripts",
    "unbounded.recall",
)
"""What a command imports when it runs (the message model is light: `--help` may load it)."""


HEAVY = (
    "unbounded.catalog",
    "unbounded.policy",
    "unbounded.model",
    "unbounded.events",
    "unbounded.addresses",
    "unbounded.evaluation",
    "unbounded.fileio",
    "asyncio",
    "concurrent.futures.process",
    "rich.table",
    "rich.panel",
    "rich.progress",
)
"""What only running a command needs: the model table, the policy, the message model, the
event loop, worker processes, the tables a command prints."""


def imported_after(code: str, prefix: str = "unbounded") -> list[str]:
    """The modules (under `prefix`) a fresh interpreter holds after running `code`."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith({prefix!r}))))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_the_command_line_loads_no_engine() -> None:
    loaded = imported_after("import unbounded.cli")
    assert "unbounded.cli.replay_command" in loaded and "unbounded.cli.eval_command" in loaded
    assert [m for m in loaded if m.startswith(ENGINES)] == []


def test_the_command_line_loads_what_only_a_command_run_needs_when_it_runs() -> None:
    loaded = imported_after("import unbounded.cli", prefix="")
    assert "unbounded.cli.compact_command" in loaded and "unbounded.cli.tune_command" in loaded
    assert [m for m in loaded if m in HEAVY or m.startswith(tuple(f"{h}." for h in HEAVY))] == []


def test_the_probes_default_is_the_exams() -> None:
    """`eval --probes` defaults to the exam's own number, written apart for a fast `--help`."""
    from unbounded.cli.eval_command import EXAM_PROBES
    from unbounded.evaluation.probes import DEFAULT_PROBES

    assert EXAM_PROBES == DEFAULT_PROBES


def test_the_package_imports_a_name_when_it_is_used() -> None:
    assert [m for m in imported_after("import unbounded") if m.startswith(ENGINES)] == []
    loaded = imported_after("import unbounded\nunbounded.load_transcript")
    assert "unbounded.transcripts.loader" in loaded


def test_help_lists_every_command() -> None:
    done = subprocess.run([sys.executable, "-m", "unbounded", "--help"], capture_output=True, text=True, check=True)
    for command in ("inspect", "replay", "eval", "compact", "tune", "sessions"):
        assert command in done.stdout
