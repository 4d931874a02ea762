"""`unbounded tune PATH...`: search the policy on your own sessions and write the best."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.options import check_output_file
from unbounded.cli.text import markup_safe, printable
from unbounded.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from unbounded.evaluation.tune import Candidate, TuneReport
    from unbounded.policy import Policy


@app.command("tune")
@exits_cleanly
def tune_command(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH", help="Recorded session files to tune the policy on (no folders)."
        ),
    ],
    trials: Annotated[
        int, typer.Option("--trials", min=0, help="Policies to try besides the default.")
    ] = 16,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Processes to use.")] = 2,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Seed of the search: the same seed draws the same candidates."),
    ] = 0,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Where to write the chosen policy (TOML)."),
    ] = Path("unbounded-policy.toml"),
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="The policy the candidates are drawn around and compared against (a policy "
            "file, TOML; default: the built-in policy with UNBOUNDED_* overrides).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Find the cheapest policy for these sessions that keeps at least what the default
    keeps (the continuation measure), and write it as a policy file."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    from unbounded.fileio import write_output_chunks
    from unbounded.policy import Policy

    files = [session_file(path) for path in paths]
    # Its folder is made; one of the sessions is refused.
    check_output_file("--output", output, makes_folder=True, inputs=files)
    from unbounded.evaluation.tune import tune_policy

    base = Policy.from_file(policy_file) if policy_file is not None else Policy.from_env()
    if as_json:
        report = tune_policy(files, trials=trials, jobs=jobs, seed=seed, base=base)
    else:
        with Progress(
            TextColumn("[bold]tuning[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("replays"),
            TimeElapsedColumn(),
            console=error_console,
            transient=True,
        ) as progress:
            task = progress.add_task("tune", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            report = tune_policy(
                files, trials=trials, jobs=jobs, seed=seed, base=base, progress=advance
            )
    text = report.policy().to_toml()
    write_output_chunks(output, [text.encode("utf-8")])
    if as_json:
        print(json.dumps({**report.to_dict(), "output": str(output)}, indent=2))
        return
    render(report)
    for skipped_path, why in report.skipped.items():
        console.print(f"[yellow]skipped[/] {markup_safe(f'{skipped_path}: {why}')}")
    console.print(
        Text.assemble(
            "policy written to ",
            (printable(str(output)), "bold"),
            " (use it with --policy or Session(policy=...))",
        )
    )


def session_file(given: str) -> Path:
    """A PATH argument as the session file it must be; a database address, a folder or a
    missing file is refused, named as given."""
    from unbounded.addresses import is_database_address
    from unbounded.redaction import redact_url

    if is_database_address(given):
        raise ConfigError(
            f"{redact_url(given)}: tune takes session files, not a database session: export "
            "it first (unbounded export URL -o FILE) and tune the file"
        )
    path = Path(given)
    if path.is_dir():
        raise ConfigError(
            f"{given}: is a folder; tune takes session files: give them "
            f"(e.g. {path / '*.jsonl'}, expanded by your shell)"
        )
    if not path.is_file():
        raise ConfigError(f"{given}: no such session file")
    return path


def _label(candidate: Candidate, base: Policy) -> str:
    """The candidate's changes from the base policy, in short names."""
    from unbounded.evaluation.tune import SEARCH_SPACE

    changes = {
        name: value for name, value in candidate.changes.items() if getattr(base, name) != value
    }
    if not changes:
        return "default"
    short = {
        "early_compact_fraction": "early",
        "cold_cache_compact_fraction": "cold",
        "cold_cache_compact_min_saving": "cold-saving",
        "session_memory_keep_max_tokens": "keep",
        "session_memory_keep_min_text_messages": "keep-texts",
        "rehydrate_total_file_tokens": "files",
        "rehydrate_min_uses": "file-uses",
        "compact_instead_of_clearing": "compact-not-clear",
    }
    return " ".join(
        f"{short.get(name, name)}={changes[name]}" for name in SEARCH_SPACE if name in changes
    )


def render(report: TuneReport) -> None:
    """The table of every policy tried, cheapest first."""
    from rich.table import Table

    table = Table(
        title="Policies tried (cost summed over the sessions; continuation: share of what the "
        "agent used next that the compacted context kept)",
        title_justify="left",
    )
    table.add_column("policy", overflow="fold")
    table.add_column("cost", justify="right")
    table.add_column("vs recorded", justify="right")
    table.add_column("continuation", justify="right")
    table.add_column("compactions", justify="right")
    floor = report.default.continuation
    for candidate in sorted(report.candidates, key=lambda c: c.cost):
        recorded = candidate.recorded_cost
        if candidate is report.best:
            style = "bold green"
        else:
            style = "" if candidate.continuation >= floor else "grey50"
        table.add_row(
            _label(candidate, report.base),
            f"${candidate.cost:,.2f}",
            f"{candidate.cost / recorded:.2f}×" if recorded else "n/a",
            f"{candidate.continuation:.2f}",
            str(candidate.compactions),
            style=style,
        )
    console.print(table)
    console.print(
        f"chosen: {_label(report.best, report.base)} — the cheapest whose continuation is at "
        f"least the default's ({floor:.2f}); greyed rows keep less"
    )
