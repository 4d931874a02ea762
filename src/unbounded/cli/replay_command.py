"""`unbounded replay [PATH...]`: replay recorded sessions under unbounded's policy and compare
what it would cost against the recorded session and simple baselines."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.batch import JobsOption, expand_paths, located, run_each
from unbounded.cli.compact_command import make_provider
from unbounded.cli.heap import HeapTrimmer
from unbounded.cli.options import (
    FileOrderOption,
    ModelsFileOption,
    PolicyOption,
    SkipInvalidOption,
    check_output_file,
    check_window,
    print_source_warnings,
    print_warnings,
    read_transcript,
    require_model,
)
from unbounded.cli.text import markup_safe, plural, printable, shorten_middle, times
from unbounded.errors import ConfigError, UnboundedError

if TYPE_CHECKING:  # the command imports the replay engine when it runs (a fast --help)
    from unbounded.addresses import Address
    from unbounded.cli.batch_totals import BilledShares, Repeats
    from unbounded.evaluation.replay import ReplayOptions, ReplayReport
    from unbounded.evaluation.replay_recording import ReplayRecording
    from unbounded.model.transcript import Transcript
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


def has_conversation(transcript: Transcript) -> bool:
    """Whether the main thread holds a model reply (an empty file, or one holding only file
    snapshots or a title, has nothing to replay)."""
    return any(
        entry.type == "assistant" and not entry.is_synthetic_api_error
        for entry in transcript.main_thread()
    )


def require_conversation(recording: ReplayRecording, name: str) -> None:
    """Refuse a session with nothing to replay, saying so (not an all-zero report)."""
    if not recording.replies:
        raise ConfigError(
            f"{name}: no conversation to replay (no model reply in it: an empty session, or "
            "file snapshots only)"
        )


def open_address(
    path: str | Path, *, skip_invalid: bool = False, file_order: bool = False, quiet: bool = False
) -> tuple[ReplayRecording, Address]:
    """The recording at an address, its reader's warnings printed (unless quiet): a Claude
    Code file is read in two passes and never held whole (`open_recording`); other
    formats and database sessions are loaded."""
    from unbounded.addresses import FileAddress, parse_address
    from unbounded.evaluation.recording_stream import open_recording
    from unbounded.evaluation.replay_recording import ReplayRecording
    from unbounded.transcripts.loader import detect_format

    address = parse_address(path)
    if isinstance(address, FileAddress) and detect_format(address.path) == "claude-code":
        recording = open_recording(address.path, skip_invalid=skip_invalid, file_order=file_order)
        if not quiet:
            print_source_warnings(list(recording.warnings), recording.skipped_lines)
    else:
        transcript = read_transcript(
            address, skip_invalid=skip_invalid, file_order=file_order, quiet=quiet
        )
        recording = ReplayRecording.of(transcript)
    require_conversation(recording, address.display)
    return recording, address


def pick_session(
    path: str | Path | None, *, skip_invalid: bool = False, file_order: bool = False
) -> tuple[ReplayRecording, str]:
    """The recording to replay and how to name it: PATH (a file or a database session), else
    the newest session on this machine with a conversation (Claude Code's ~/.claude/projects
    or Codex CLI's $CODEX_HOME/sessions, by default ~/.codex/sessions), else the built-in
    demo session."""
    from unbounded.addresses import FileAddress
    from unbounded.cli.demo import DEMO_SOURCE, demo_transcript
    from unbounded.evaluation.replay_recording import ReplayRecording
    from unbounded.evaluation.sources import sessions_newest_first

    if path is not None:
        recording, address = open_address(path, skip_invalid=skip_invalid, file_order=file_order)
        name = address.path.name if isinstance(address, FileAddress) else address.require_session()
        return recording, name
    skipped = 0
    for candidate in sessions_newest_first():
        try:
            found = read_transcript(
                candidate, skip_invalid=skip_invalid, file_order=file_order, quiet=True
            )
        except UnboundedError:
            found = None
        if found is None or not has_conversation(found):
            skipped += 1
            continue
        transcript = found
        if skipped:
            error_console.print(
                f"[grey50]skipped {plural(skipped, 'newer session')} with no conversation "
                "(empty, unreadable, or file snapshots only)[/]",
                highlight=False,
            )
        print_warnings(transcript)
        return ReplayRecording.of(transcript), f"{candidate.parent.name}/{candidate.name}"
    return ReplayRecording.of(demo_transcript()), DEMO_SOURCE


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """What a replay of one file needs, picklable for a worker process."""

    model: str | None
    window: int | None
    summarizer: str
    skip_invalid: bool
    file_order: bool
    as_json: bool
    series: bool
    policy: Policy | None = None
    variants: bool = True
    models_files: tuple[str, ...] = ()
    """Extra model tables (`--models-file`), read again by each worker process."""


@dataclass(frozen=True, slots=True)
class ReplayRow:
    """One session of a batch replay: the summary table's figures, its JSON when asked."""

    source: str
    calls: int
    compactions: int
    cost: float
    recorded_cost: float | None
    cache_read_share: float
    warnings: tuple[str, ...]
    data: dict[str, Any] | None
    billed_calls: int = 0
    shares: BilledShares | None = None
    """Each billed call's response id and figures (Claude Code files), for the total."""


REPLAY_GC_THRESHOLD = 10_000
"""Net container allocations between two collections of the cyclic collector's youngest
generation while the command replays (Python's default is 700, reached every 12 calls or
so). On a generated 10,000-call session the collections took 0.07 ms a call at 2,000-4,000
calls and 0.18 at 8,000-10,000 (1-2.5% of the call, growing with the run); at 10,000 (a pass
every 300-400 calls) they take 0.01-0.05 ms, flat (`benchmarks/replay_gc.py`). Set by the
command, not the library: the threshold is the whole process's."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect the youngest generation every `REPLAY_GC_THRESHOLD` allocations in the block
    (unless it already is as seldom, or the collector is off); the thresholds come back after."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= REPLAY_GC_THRESHOLD:
        yield
        return
    gc.set_threshold(REPLAY_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def replay_one(settings: ReplaySettings, path: str) -> ReplayRow:
    """Replay one file of a batch (runs in a worker process with --jobs)."""
    from unbounded.evaluation.replay import replay_session

    trimmer = HeapTrimmer()  # before the file is opened: its first pass reads large lines too
    recording, address = open_address(
        path, skip_invalid=settings.skip_invalid, file_order=settings.file_order, quiet=True
    )
    source = address.display
    options = _options(settings, recording.model, source)
    warnings = (*recording.warnings, *_skipped(recording.skipped_lines))
    with fewer_collections():
        report = replay_session(recording, options, progress=trimmer)
    return ReplayRow(
        source=source,
        calls=report.calls,
        compactions=report.compactions,
        cost=report.ours.cost_usd,
        recorded_cost=report.recorded_cost if report.recorded_comparable else None,
        cache_read_share=report.ours.cache_read_share,
        warnings=warnings,
        data=report.to_dict(series=settings.series) if settings.as_json else None,
        billed_calls=report.recorded_calls,
        shares=_shares(address, recording, report),
    )


def _shares(
    address: Address, recording: ReplayRecording, report: ReplayReport
) -> BilledShares | None:
    """A Claude Code file's calls by response id (other formats have no provider id a call)."""
    from unbounded.addresses import FileAddress
    from unbounded.cli.batch_totals import billed_shares
    from unbounded.transcripts.loader import detect_format

    if isinstance(address, FileAddress) and detect_format(address.path) == "claude-code":
        return billed_shares(address.path, recording, report)
    return None


def _skipped(lines: int) -> tuple[str, ...]:
    return (f"skipped {plural(lines, 'invalid line')} (--skip-invalid)",) if lines else ()


def _options(settings: ReplaySettings, recorded_model: str | None, source: str) -> ReplayOptions:
    from unbounded.catalog import DEFAULT_MODEL, load_model_table
    from unbounded.evaluation.replay import ReplayOptions

    table = load_model_table(settings.models_files)
    # An LLM summarizer asks for the recorded model by name, even one the table lacks (the
    # replay plans that one with its provider's figures).
    model_name = settings.model or recorded_model or DEFAULT_MODEL
    return ReplayOptions(
        model=settings.model,
        window=settings.window,
        summarizer=make_provider(settings.summarizer, model_name),
        source=source,
        model_table=table,
        policy=settings.policy,
        variants=settings.variants,
    )


@app.command("replay")
@exits_cleanly
def replay_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH",
            help="Recorded sessions: files, folders (every .jsonl and .traj file in them), "
            "globs, or postgresql://…/db?session=ID (default: your newest Claude Code or "
            "Codex CLI session with a conversation, else the built-in demo).",
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
        typer.Option(
            "--window",
            help="Plan for this context window (tokens, >= 8,192; default: the window the "
            "transcript reports, else the model's).",
        ),
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
    jobs: JobsOption = 1,
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
    policy_file: PolicyOption = None,
    models_file: ModelsFileOption = None,
    variants: Annotated[
        bool,
        typer.Option(
            "--variants/--no-variants",
            help="Also replay with the background summary on (when a turn waited for a "
            "summary) and with idle compaction (when the session pauses past the cache TTL).",
        ),
    ] = True,
) -> None:
    """Replay sessions through unbounded's pipeline and compare costs with baselines."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from unbounded.catalog import DEFAULT_MODEL, load_model_table
    from unbounded.evaluation.replay import replay_session
    from unbounded.evaluation.report import render_report_html
    from unbounded.fileio import write_output_chunks
    from unbounded.policy import Policy

    if series and not as_json:
        raise ConfigError("--series adds the per-call figures to the JSON output: add --json")
    check_window(window)
    models_files = tuple(str(path) for path in models_file or ())
    table = load_model_table(models_files)
    if model is not None:
        require_model(table, model)  # an unknown model fails before any work
    make_provider(summarizer, model or DEFAULT_MODEL)  # an unknown summarizer or missing key too
    sessions = expand_paths(paths or [])
    if report_file is not None:  # a folder, or one of the sessions, refused before any work
        from unbounded.evaluation.sources import sessions_newest_first

        # Without PATH the session is picked among this machine's: none of them may be replaced.
        inputs = [Path(name) for name in sessions] if sessions else sessions_newest_first()
        check_output_file("--report", report_file, inputs=inputs)
    chosen_policy = Policy.from_file(policy_file) if policy_file is not None else None
    settings = ReplaySettings(
        model,
        window,
        summarizer,
        skip_invalid,
        file_order,
        as_json,
        series,
        chosen_policy,
        variants,
        models_files,
    )
    if len(sessions) > 1:
        if report_file is not None:
            raise ConfigError(
                f"--report writes one session's page: give one session, not {len(sessions)}"
            )
        replay_batch(sessions, settings, jobs)
        return
    trimmer = HeapTrimmer()  # before the file is opened: its first pass reads large lines too
    recording, source = pick_session(
        sessions[0] if sessions else None, skip_invalid=skip_invalid, file_order=file_order
    )
    options = _options(settings, recording.model, source)
    if as_json:
        with fewer_collections():
            report = replay_session(recording, options, progress=trimmer)
    else:
        with Progress(
            TextColumn("[bold]replaying[/] {task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("calls"),
            TimeElapsedColumn(),
            console=error_console,
            transient=True,
        ) as progress:
            # The name is cut to what the bar and the counts leave of the line.
            name = shorten_middle(source, max(12, error_console.width - 58))
            task = progress.add_task(name, total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            with fewer_collections():
                report = replay_session(recording, options, progress=trimmer.around(advance))
    if report_file is not None:
        # Whole or not at all (temp file + rename; a pipe or device written directly); a name
        # that is not UTF-8 backslash-escaped.
        page = render_report_html(report).encode("utf-8", "backslashreplace")
        write_output_chunks(report_file, [page])
    if as_json:
        # Written in pieces: a long replay's series built whole as text held its every point.
        for piece in report.json_text(series=series):
            sys.stdout.write(piece)
        sys.stdout.write("\n")
        return
    render(report)
    if report_file is not None:
        from rich.text import Text

        console.print(Text.assemble("report written to ", (printable(str(report_file)), "bold")))


def replay_batch(sessions: list[str], settings: ReplaySettings, jobs: int) -> None:
    """Replay every session, then print a table across them (or one JSON object); a file that
    fails is reported and the others still run; exit status 2 when one failed."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    rows: list[ReplayRow] = []
    failed: list[tuple[str, str]] = []
    with Progress(
        TextColumn("[bold]replaying[/]"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        TimeElapsedColumn(),
        console=error_console,
        transient=True,
        disable=settings.as_json,
    ) as progress:
        task = progress.add_task("", total=len(sessions))
        for outcome in run_each(partial(replay_one, settings), sessions, jobs):
            progress.advance(task)
            if outcome.result is None:
                failed.append((outcome.path, outcome.error or "failed"))
                error_console.print(
                    f"[bold red]error:[/] {markup_safe(outcome.error or 'failed')}",
                    highlight=False,
                    soft_wrap=True,
                )
                continue
            rows.append(outcome.result)
            for warning in outcome.result.warnings:
                error_console.print(
                    f"[yellow]warning:[/] {markup_safe(located(outcome.path, warning))}",
                    highlight=False,
                    soft_wrap=True,
                )
    from unbounded.cli.batch_totals import find_repeats

    repeats = find_repeats([(row.source, row.shares) for row in rows])
    if settings.as_json:
        print(json.dumps(batch_json(rows, failed, repeats), indent=2))
    else:
        render_batch(rows, failed, repeats)
    if failed:
        raise typer.Exit(code=2)


def batch_json(
    rows: list[ReplayRow], failed: list[tuple[str, str]], repeats: list[Repeats | None]
) -> dict[str, Any]:
    """The batch's JSON object: the sessions, a total counting every billed call once, the
    files that failed. When a file repeats another's calls (a resumed or forked session),
    each entry says how many of its calls do and of which files."""
    data: dict[str, Any] = {"sessions": [row.data for row in rows]}
    if any(repeats):
        data["sessions"] = [
            {
                **(row.data or {}),
                "repeated_calls": found.calls if found else 0,
                "repeats": list(found.of) if found else [],
            }
            for row, found in zip(rows, repeats, strict=True)
        ]
    data["total"] = _total(rows, repeats)
    data["failed"] = [{"path": path, "error": error} for path, error in failed]
    return data


def _total(rows: list[ReplayRow], repeats: list[Repeats | None]) -> dict[str, Any]:
    """The batch's figures with each repeated call counted once (in the file it came first)."""
    found = [r for r in repeats if r is not None]
    recorded: float | None = None
    if all(row.recorded_cost is not None for row in rows) and all(r.recorded_priced for r in found):
        recorded = sum(row.recorded_cost or 0.0 for row in rows) - sum(
            r.recorded_cost for r in found
        )
    return {
        "calls": sum(row.billed_calls for row in rows) - sum(r.calls for r in found),
        "replayed_calls": sum(row.calls for row in rows) - sum(r.replayed_calls for r in found),
        "repeated_calls": sum(r.calls for r in found),
        "compactions": sum(row.compactions for row in rows) - sum(r.compactions for r in found),
        "cost": round(sum(row.cost for row in rows) - sum(r.cost for r in found), 6),
        "recorded_cost": None if recorded is None else round(recorded, 6),
    }


def render_batch(
    rows: list[ReplayRow],
    failed: list[tuple[str, str]],
    repeats: list[Repeats | None] | None = None,
) -> None:
    """The table across sessions: calls, compactions, our cost against the recorded one (the
    baselines are in each session's own report); a file's calls that repeat another's count
    once in the total, a line under the table says which."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"Replayed {plural(len(rows), 'session')}"
        + (f" ({len(failed):,} failed, see above)" if failed else "")
        + ": cost in USD, saved = 1 - unbounded / recorded",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("session", no_wrap=True)
    for heading, width in (
        ("calls", 6),
        ("compactions", 11),
        ("unbounded", 9),
        ("recorded", 8),
        ("saved", 6),
    ):
        table.add_column(heading, justify="right", width=width)
    width = max(16, console.width - 53)  # what the figures leave of the line
    for row in rows:
        saved = f"{1 - row.cost / row.recorded_cost:.0%}" if row.recorded_cost else "—"
        table.add_row(
            shorten_middle(row.source, width),
            f"{row.calls:,}",
            f"{row.compactions:,}",
            f"{row.cost:,.2f}",
            "—" if row.recorded_cost is None else f"{row.recorded_cost:,.2f}",
            saved,
        )
    found = [r for r in repeats or () if r is not None]
    if len(rows) > 1:
        table.add_row(
            "total",
            f"{sum(row.calls for row in rows) - sum(r.replayed_calls for r in found):,}",
            f"{sum(row.compactions for row in rows) - sum(r.compactions for r in found):,}",
            f"{sum(row.cost for row in rows) - sum(r.cost for r in found):,.2f}",
            style="bold",
        )
    console.print(table)
    for row, repeated in zip(rows, repeats or (), strict=True):
        if repeated is not None:
            recorded = (
                f", recorded ${repeated.recorded_cost:,.2f}" if repeated.recorded_priced else ""
            )
            console.print(
                f"{printable(row.source)} repeats {plural(repeated.calls, 'billed call')} of "
                f"{', '.join(map(printable, repeated.of))} (a resumed or forked session's "
                f"copy): the total counts them once (unbounded ${repeated.cost:,.2f}{recorded} "
                "left out)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def render(report: ReplayReport) -> None:
    """Print the replay's timeline and cost table with rich."""
    from rich.panel import Panel
    from rich.table import Table

    header = Table.grid(padding=(0, 2))
    header.add_row("session", shorten_middle(report.source, max(20, console.width - 18)))
    # The model (and an LLM summarizer's) is the session's own text: escaped for the markup.
    header.add_row(
        "model",
        markup_safe(
            f"{report.model} · window {report.context_window:,} · auto-compact at "
            f"{report.thresholds.autocompact:,} · summarizer {report.summarizer}"
        ),
    )
    apart = sum(report.not_replayed.values())
    if apart:
        header.add_row(
            "recorded",
            f"{plural(report.recorded_calls, 'billed call')}, {apart:,} not replayed "
            "(see the notes)",
        )
    header.add_row(
        "replayed",
        f"{plural(report.calls, 'call')} · {plural(report.compactions, 'compaction')} "
        f"({report.session_memory_compactions:,} from session memory; notes updated "
        f"{times(report.session_memory_updates)}) · "
        f"{plural(report.microcompacts, 'microcompaction')} · "
        f"{plural(report.cache_breaks, 'cache break')} · "
        f"{plural(report.invalid_requests, 'invalid request')}",
    )
    header.add_row("waits", _waits(report))
    header.add_row(
        "context",
        f"peak {report.ours.peak_context_tokens:,} tokens · cache read share "
        f"{report.ours.cache_read_share:.1%}",
    )
    others = [f"{name} {count:,}" for name, count in list(report.models.items())[1:]]
    if others:
        header.add_row(
            "other models",
            markup_safe(f"{', '.join(others)} calls, each priced as its own model"),
        )
    console.print(Panel(header, title="unbounded replay", expand=False))
    render_timeline(report)
    render_costs(report)
    for name, variant in report.variants.items():
        console.print(
            f"with {name.replace('_', ' ')}: ${variant.run.cost_usd:,.2f} "
            f"(ours ${report.ours.cost_usd:,.2f}) · {plural(variant.stalls, 'stall')} · "
            f"{plural(variant.idle_compactions, 'idle compaction')}"
        )
    retention = report.retention()
    if report.compaction_records:
        kept = " · ".join(
            f"{name.replace('_', ' ')} {value['summary']:.0%}"
            for name, value in retention.items()
            if isinstance(value, dict) and value["summary"] is not None
        )
        console.print(f"retention at our compactions (summary only): {kept}")
        used = " · ".join(
            f"{kind} {figures['recall']:.0%} / {figures['precision'] or 0:.0%}"
            for kind, contexts in report.continuation().items()
            if (figures := contexts.get("summary")) and figures["recall"] is not None
        )
        if used:
            console.print(
                "continuation, a diagnostic (of what the next 30 turns used, the share the "
                f"summary holds / of what it lists, the share used): {used}"
            )
    for note in report.notes:
        console.print(f"[yellow]note:[/] {markup_safe(note)}")
    fidelity = report.fidelity
    if any(call.recorded.prompt_tokens for call in fidelity.calls):
        simulated = (
            f"simulator on the recorded calls: {fidelity.simulated_cache_read_share:.1%} cache "
            f"reads vs {fidelity.recorded_cache_read_share:.1%} recorded"
        )
    else:
        simulated = "the recording reports no usage to check the simulator against (n/a)"
    console.print(
        f"[grey50]system prompt + tools modelled as {report.prefix.tokens:,} tokens "
        f"({report.prefix.source}); {simulated}[/]"
    )


def _waits(report: ReplayReport) -> str:
    """The header's line on turns that waited for a summary call."""
    line = f"{plural(report.stalls, 'turn')} waited for a summary call"
    background = report.background
    if background.get("enabled"):
        line += (
            f" · background summary: {background.get('started', 0):,} started, "
            f"{background.get('swapped', 0):,} swapped in"
        )
    if report.idle_compactions:
        line += f" · {plural(report.idle_compactions, 'idle compaction')}"
    return line


STRATEGY_LINES = {
    "unbounded": "this library: clears stale output in batches, compacts from its notes "
    "early when that pays, else summarizes at the threshold sharing the cache; caches the "
    "tools and system prompt for an hour",
    "none": "sends everything (an overflow is a call the API would refuse)",
    "truncate": "drops the oldest turns to fit: the cache is missed almost every call",
    "summarize_no_cache": "summarizes at the threshold in a separate request without cache",
    "clear_every_turn": "over 100K, clears all but the 3 newest tool results every call",
}
"""One line per strategy of the cost table."""


def render_cost_parts(report: ReplayReport) -> None:
    """Where each strategy's cost goes, and what each strategy is."""
    from rich import box
    from rich.table import Table

    parts = Table(
        title="Where the cost goes (USD)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    parts.add_column("strategy")
    for heading in ("cache writes", "cache reads", "input + output", "summary calls"):
        parts.add_column(heading, justify="right")
    for name, run in {"unbounded": report.ours, **report.baselines}.items():
        split = run.cost_parts()
        parts.add_row(
            name,
            f"{split['cache_writes']:,.2f}",
            f"{split['cache_reads']:,.2f}",
            f"{split['input_and_output']:,.2f}",
            f"{split['summary_calls']:,.2f}",
            style="bold" if name == "unbounded" else "",
        )
    console.print(parts)
    for name in ["unbounded", *report.baselines]:
        if name in STRATEGY_LINES:
            console.print(f"[grey50]{name}: {STRATEGY_LINES[name]}[/]", highlight=False)


def render_timeline(report: ReplayReport) -> None:
    """The replay's events, at most 60 of them (none: one line saying so)."""
    from rich.table import Table

    shown = [e for e in report.timeline if e.kind != "expected_cache_drop"]
    if not shown:
        console.print("Timeline: no compaction, microcompaction, cache break or warning")
        return
    timeline = Table(title="Timeline", title_justify="left")
    timeline.add_column("call", justify="right")
    timeline.add_column("time (UTC)", no_wrap=True)
    timeline.add_column("event", no_wrap=True)
    timeline.add_column("details", overflow="fold")
    for event in shown[:60]:
        style = _KIND_STYLE.get(event.kind, "")
        timeline.add_row(
            str(event.call),
            event.to_dict()["time"][11:19],
            f"[{style}]{event.kind}[/]" if style else event.kind,
            markup_safe(event.summary),  # tool names, paths, commands from the session
        )
    if len(shown) > 60:
        timeline.add_row("", "", "…", f"{len(shown) - 60} more events (see --json or --report)")
    console.print(timeline)


def render_costs(report: ReplayReport) -> None:
    """The cost table: the recorded session, ours and every baseline."""
    from rich import box
    from rich.table import Table

    names = ["unbounded", *report.baselines]
    # Lines between rows only: seven columns and every strategy name whole in 80 columns.
    costs = Table(
        title="Cost of this session by strategy (USD)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    # Fixed widths, headings on two lines, no side borders: 76 columns with every strategy
    # name and every heading word whole (rich would otherwise cut words to fit 80).
    costs.add_column("strategy", width=max(len(name) for name in [*names, "recorded *"]))
    for heading, width in (
        ("cost", 8),
        ("vs unbounded", 9),
        ("summary calls", 7),
        ("overflows", 9),
        ("cache reads", 6),
        ("peak context", 7),
    ):
        costs.add_column(heading, justify="right", width=width)
    ours = report.ours.cost_usd
    if report.recorded_cost is not None:
        if not report.recorded_comparable:
            versus = "n/a"
        else:
            versus = f"{report.recorded_cost / ours:.2f}×" if ours else ""
        costs.add_row(
            "recorded" if report.recorded_comparable else "recorded *",
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
    render_cost_parts(report)
    if report.recorded_cost is not None and not report.recorded_comparable:
        console.print(
            f"* recorded on {markup_safe(str(report.recorded_model))}: its cost is not "
            "comparable with the replay's"
        )
