"""`unbounded replay [PATH]`: replay a recorded session under unbounded's policy and compare
what it would cost against the recorded session and simple baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from unbounded.addresses import FileAddress, parse_address
from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.compact_command import make_provider
from unbounded.cli.options import (
    FileOrderOption,
    PolicyOption,
    SkipInvalidOption,
    read_transcript,
)
from unbounded.demo import DEMO_SOURCE, demo_transcript
from unbounded.evaluation.replay import ReplayOptions, ReplayReport, replay_session
from unbounded.evaluation.report import render_report_html
from unbounded.evaluation.sources import latest_session
from unbounded.model.transcript import Transcript
from unbounded.models import DEFAULT_MODEL, load_model_table
from unbounded.policy import Policy

_KIND_STYLE = {
    "compaction": "bold magenta",
    "microcompact": "green",
    "cache_break": "yellow",
    "warning": "dark_orange",
    "invalid_request": "bold red",
    "overflow": "bold red",
    "compaction_failed": "red",
}


def pick_session(
    path: str | Path | None, *, skip_invalid: bool = False, file_order: bool = False
) -> tuple[Transcript, str]:
    """The transcript to replay and how to name it: PATH (a file or a database session), else
    the newest session on this machine (Claude Code's ~/.claude/projects or Codex CLI's
    $CODEX_HOME/sessions, by default ~/.codex/sessions), else the built-in demo session."""
    if path is not None:
        address = parse_address(path)
        transcript = read_transcript(address, skip_invalid=skip_invalid, file_order=file_order)
        name = address.path.name if isinstance(address, FileAddress) else address.require_session()
        return transcript, name
    latest = latest_session()
    if latest is not None:
        transcript = read_transcript(latest, skip_invalid=skip_invalid, file_order=file_order)
        return transcript, f"{latest.parent.name}/{latest.name}"
    return demo_transcript(), DEMO_SOURCE


@app.command("replay")
@exits_cleanly
def replay_command(
    path: Annotated[
        str | None,
        typer.Argument(
            help="A recorded session, a file or postgresql://…/db?session=ID (default: your "
            "newest Claude Code or Codex CLI session, else the built-in demo)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Plan and price for this model (default: the transcript's)."
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option("--window", help="Plan for this context window (tokens, >= 8,192)."),
    ] = None,
    summarizer: Annotated[
        str,
        typer.Option("--summarizer", "-s", help="extractive (offline), anthropic or openai."),
    ] = "extractive",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    report_file: Annotated[
        Path | None,
        typer.Option("--report", help="Write a self-contained HTML report to this file."),
    ] = None,
    series: Annotated[
        bool, typer.Option("--series", help="With --json: add the per-call figures.")
    ] = False,
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
    policy_file: PolicyOption = None,
) -> None:
    """Replay a session through unbounded's pipeline and compare costs with baselines."""
    transcript, source = pick_session(path, skip_invalid=skip_invalid, file_order=file_order)
    table = load_model_table()
    if model is not None:
        table.get(model)  # an unknown model fails before any work
    model_name = model or transcript.model or DEFAULT_MODEL
    if table.find(model_name) is None:
        model_name = DEFAULT_MODEL
    provider = make_provider(summarizer, model_name)
    options = ReplayOptions(
        model=model,
        window=window,
        summarizer=provider,
        source=source,
        model_table=table,
        policy=Policy.from_file(policy_file) if policy_file is not None else None,
    )
    if as_json:
        report = replay_session(transcript, options)
    else:
        with Progress(
            TextColumn("[bold]replaying[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("calls"),
            TimeElapsedColumn(),
            console=error_console,
            transient=True,
        ) as progress:
            task = progress.add_task(source, total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            report = replay_session(transcript, options, progress=advance)
    if report_file is not None:
        report_file.write_text(render_report_html(report), encoding="utf-8")
    if as_json:
        print(json.dumps(report.to_dict(series=series), indent=2))
        return
    render(report)
    if report_file is not None:
        console.print(f"report written to [bold]{report_file}[/]")


def render(report: ReplayReport) -> None:
    """Print the replay's timeline and cost table with rich."""
    header = Table.grid(padding=(0, 2))
    header.add_row("session", report.source)
    header.add_row(
        "model",
        f"{report.model} · window {report.context_window:,} · auto-compact at "
        f"{report.thresholds.autocompact:,} · summarizer {report.summarizer}",
    )
    header.add_row(
        "replayed",
        f"{report.calls:,} calls · {report.compactions} compactions "
        f"({report.session_memory_compactions} from session memory, notes updated "
        f"{report.session_memory_updates} times) · "
        f"{report.microcompacts} microcompactions · {report.cache_breaks} cache breaks · "
        f"{report.invalid_requests} invalid requests",
    )
    header.add_row(
        "context",
        f"peak {report.ours.peak_context_tokens:,} tokens · cache read share "
        f"{report.ours.cache_read_share:.1%}",
    )
    others = [f"{name} {count:,}" for name, count in list(report.models.items())[1:]]
    if others:
        header.add_row("other models", f"{', '.join(others)} calls, each priced as its own model")
    console.print(Panel(header, title="unbounded replay", expand=False))

    timeline = Table(title="Timeline", title_justify="left")
    timeline.add_column("call", justify="right")
    timeline.add_column("time (UTC)")
    timeline.add_column("event")
    timeline.add_column("details", overflow="fold")
    shown = [e for e in report.timeline if e.kind != "expected_cache_drop"]
    for event in shown[:60]:
        style = _KIND_STYLE.get(event.kind, "")
        timeline.add_row(
            str(event.call),
            event.to_dict()["time"][11:19],
            f"[{style}]{event.kind}[/]" if style else event.kind,
            event.summary,
        )
    if len(shown) > 60:
        timeline.add_row("", "", "…", f"{len(shown) - 60} more events (see --json or --report)")
    console.print(timeline)

    costs = Table(title="Cost of this session by strategy (USD)", title_justify="left")
    costs.add_column("strategy")
    costs.add_column("cost", justify="right")
    costs.add_column("vs unbounded", justify="right")
    costs.add_column("summary calls", justify="right")
    costs.add_column("overflows", justify="right")
    costs.add_column("cache read share", justify="right")
    costs.add_column("peak context", justify="right")
    ours = report.ours.cost_usd
    if report.recorded_cost is not None:
        if not report.recorded_comparable:
            versus = "not comparable"
        else:
            versus = f"{report.recorded_cost / ours:.2f}×" if ours else ""
        costs.add_row(
            f"recorded ({report.recorded_model})" if not report.recorded_comparable else "recorded",
            f"{report.recorded_cost:,.2f}",
            versus,
            "",
            "",
            f"{report.fidelity.recorded_cache_read_share:.1%}",
            "",
            style="grey50",
        )
    for name, run in {"unbounded": report.ours, **report.baselines}.items():
        costs.add_row(
            name,
            f"{run.cost_usd:,.2f}",
            f"{run.cost_usd / ours:.2f}×" if ours else "",
            str(len(run.side_calls)),
            str(run.overflows),
            f"{run.cache_read_share:.1%}",
            f"{run.peak_context_tokens:,}",
            style="bold" if name == "unbounded" else "",
        )
    console.print(costs)
    retention = report.retention()
    if report.compaction_records:
        kept = " · ".join(
            f"{name.replace('_', ' ')} {value['summary']:.0%}"
            for name, value in retention.items()
            if isinstance(value, dict) and value["summary"] is not None
        )
        console.print(f"retention at our compactions (summary only): {kept}")
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(
        f"[grey50]system prompt + tools modelled as {report.prefix.tokens:,} tokens "
        f"({report.prefix.source}); simulator on the recorded calls: "
        f"{report.fidelity.simulated_cache_read_share:.1%} cache reads vs "
        f"{report.fidelity.recorded_cache_read_share:.1%} recorded[/]"
    )
