"""`unbounded inspect PATH`: a transcript's context breakdown, like Claude Code's `/context`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from unbounded.cli.app import app, console, exits_cleanly
from unbounded.cli.options import (
    FileOrderOption,
    ModelsFileOption,
    SkipInvalidOption,
    check_window,
    print_source_warnings,
    read_transcript,
    require_model,
)
from unbounded.cli.receipts_view import render_receipts
from unbounded.cli.text import markup_safe, shorten_middle

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from rich.text import Text

    from unbounded.addresses import Address
    from unbounded.catalog import ModelTable
    from unbounded.inspection import InspectReport

BAR_WIDTH = 60
_LEVEL_STYLE = {
    "ok": "green",
    "warning": "yellow",
    "error": "dark_orange",
    "autocompact": "red",
    "blocking": "bold red",
}


def _calls_apart(report: InspectReport) -> str:
    """The billed calls that are not on the thread, and the sub-agents' (empty when none)."""
    calls = report.calls
    parts = [
        text
        for count, text in (
            (calls.branch, f"{calls.branch:,} on branches the thread does not follow"),
            (calls.side, f"{calls.side:,} the agent's own summary calls"),
            (calls.subagent, f"+ {calls.subagent:,} by inline sub-agents"),
        )
        if count
    ]
    return f" ({'; '.join(parts)})" if parts else ""


@app.command("inspect")
@exits_cleanly
def inspect_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A Claude Code .jsonl, Codex CLI rollout, SWE-agent .traj or OpenHands "
            "output.jsonl, or a database session: postgresql://…/db?session=ID."
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Plan for this model (default: the transcript's)."),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option("--window", help="Plan for this context window instead (>= 8,192)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    skip_invalid: SkipInvalidOption = False,
    models_file: ModelsFileOption = None,
    file_order: FileOrderOption = False,
) -> None:
    """Show where a session's tokens go and how close it is to compaction."""
    from unbounded.addresses import FileAddress, parse_address
    from unbounded.catalog import load_model_table
    from unbounded.storage import TRANSCRIPT_NAME

    check_window(window)
    table = load_model_table(models_file or ())
    if model is not None:
        require_model(table, model)  # an unknown model fails before the file is read
    address = parse_address(path)
    if isinstance(address, FileAddress) and (address.path / TRANSCRIPT_NAME).is_file():
        # A session folder (Session.open, wrap(session_folder=)): its transcript is the file.
        address = FileAddress(address.path / TRANSCRIPT_NAME)
    report = inspect_address(
        address,
        model=model,
        window=window,
        table=table,
        skip_invalid=skip_invalid,
        file_order=file_order,
    )
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    render(report)


def inspect_address(
    address: Address,
    *,
    model: str | None,
    window: int | None,
    table: ModelTable,
    skip_invalid: bool,
    file_order: bool,
) -> InspectReport:
    """The report for a file or a database session, its warnings printed on stderr.

    A Claude Code file is streamed (`inspect_file`: bounded memory); other formats and
    database sessions are loaded whole.
    """
    from unbounded.addresses import FileAddress
    from unbounded.inspection import inspect_transcript
    from unbounded.inspection_stream import (
        file_order_main_thread,
        inspect_file,
        rebuilt_main_thread,
    )
    from unbounded.transcripts.loader import detect_format

    if isinstance(address, FileAddress) and detect_format(address.path) == "claude-code":
        report = inspect_file(
            address.path,
            model=model,
            window=window,
            table=table,
            skip_invalid=skip_invalid,
            select_thread=file_order_main_thread if file_order else rebuilt_main_thread,
        )
        print_source_warnings(report.source.warnings, report.source.skipped_lines)
        return report
    transcript = read_transcript(address, skip_invalid=skip_invalid, file_order=file_order)
    return inspect_transcript(
        transcript, model=model, window=window, table=table, name=address.display
    )


def _context_bar(report: InspectReport) -> Text:
    from rich.text import Text

    thresholds = report.thresholds
    window = thresholds.context_window
    scale = BAR_WIDTH / window
    filled = min(BAR_WIDTH, round(report.context_tokens * scale))
    marks = {
        min(BAR_WIDTH - 1, round(thresholds.warning * scale)): ("w", "yellow"),
        min(BAR_WIDTH - 1, round(thresholds.autocompact * scale)): ("c", "red"),
        min(BAR_WIDTH - 1, round(thresholds.blocking * scale)): ("b", "bold red"),
    }
    style = _LEVEL_STYLE.get(report.level, "green")
    bar = Text("[")
    for position in range(BAR_WIDTH):
        if position in marks:
            symbol, mark_style = marks[position]
            bar.append(symbol if position >= filled else "█", style=mark_style)
        elif position < filled:
            bar.append("█", style=style)
        else:
            bar.append("·", style="grey50")
    bar.append("]")
    return bar




def render_breakdown(report: InspectReport) -> None:
    """The context size in rows that add up to it, reported and estimated apart."""
    from rich.table import Table

    from unbounded.tokens.breakdown import SYSTEM_AND_TOOLS

    labels = {SYSTEM_AND_TOOLS: "system prompt + tools"}
    breakdown = report.breakdown
    if breakdown.reported:
        caption = (
            "system prompt + tools: the first reported call minus its messages (length/4); "
            "the messages share the rest in proportion to their length/4"
        )
    else:
        caption = (
            "no API usage recorded: every row is length/4, padded by 4/3; the system prompt "
            "and tools are not in the transcript"
        )
    table = Table(
        title=f"Where the tokens go: {breakdown.reported:,} reported by the API + "
        f"{breakdown.estimated:,} estimated",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    table.add_column("category", no_wrap=True)
    table.add_column("tokens", justify="right")
    table.add_column("%", justify="right")
    table.add_column("reported", justify="right")
    table.add_column("estimated", justify="right")
    table.add_column("", no_wrap=True)
    shown = [row for row in breakdown.rows if row.tokens or row.category == SYSTEM_AND_TOOLS]
    for row in sorted(shown, key=lambda row: -row.tokens):
        share = breakdown.percent(row.tokens)
        table.add_row(
            labels.get(row.category, row.category.replace("_", " ")),
            f"{row.tokens:,}",
            str(share),
            f"{row.reported:,}",
            f"{row.estimated:,}",
            "▇" * (share // 10),
        )
    table.add_row(
        "total",
        f"{breakdown.total:,}",
        "100",
        f"{breakdown.reported:,}",
        f"{breakdown.estimated:,}",
        "",
        style="bold",
    )
    console.print(table)


def ranked_tools(results: Mapping[str, int], requests: Mapping[str, int]) -> list[str]:
    """Tool names by tokens (results + requests), most first; ties by name, so the table is the
    same on every run (the names come from sets)."""
    names = set(results) | set(requests)
    return sorted(names, key=lambda n: (-(results.get(n, 0) + requests.get(n, 0)), n))


def render(report: InspectReport) -> None:
    """Print the report with rich."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    source = report.source
    thresholds = report.thresholds
    header = Table.grid(padding=(0, 2))
    header.add_row("file", shorten_middle(str(source.path), max(20, console.width - 17)))
    header.add_row("format", source.format)
    # A model name is the session's own text: `claude-x[/]` would break the markup.
    header.add_row("model", markup_safe(f"{report.model.name} ({report.model_source})"))
    called = report.source.models
    if len(called) > 1:
        header.add_row(
            "calls by model",
            markup_safe(", ".join(f"{name} {count:,}" for name, count in called.items())),
        )
    header.add_row(
        "records",
        f"{source.records:,} records · {report.messages:,} API messages · "
        f"{report.api_calls:,} API calls{_calls_apart(report)} · "
        f"{report.sidechains} sub-agent threads",
    )
    console.print(Panel(header, title="unbounded inspect", expand=False))

    level_style = _LEVEL_STYLE.get(report.level, "green")
    console.print(
        Text.assemble(
            "context ",
            (f"{report.context_tokens:,}", "bold"),
            f" / {thresholds.context_window:,} tokens  ",
            (f"{report.percent_left}% left before auto-compact", level_style),
            f"  (level: {report.level})",
        )
    )
    console.print(_context_bar(report))
    console.print(
        Text.assemble(
            ("w", "yellow"),
            f" warning {thresholds.warning:,}  ",
            ("c", "red"),
            f" auto-compact {thresholds.autocompact:,}  ",
            ("b", "bold red"),
            f" blocking {thresholds.blocking:,}  ",
            (
                f"(reported {report.anchored_tokens:,} + estimated {report.estimated_tokens:,})",
                "grey50",
            ),
        )
    )

    render_breakdown(report)
    accounting = report.accounting
    if accounting.tool_results or accounting.tool_requests:
        tools = Table(title="Top tools", title_justify="left")
        tools.add_column("tool")
        tools.add_column("calls", justify="right")
        tools.add_column("request tokens", justify="right")
        tools.add_column("result tokens", justify="right")
        for name in ranked_tools(accounting.tool_results, accounting.tool_requests)[:10]:
            tools.add_row(
                shorten_middle(name, max(12, console.width - 50)),
                f"{accounting.tool_calls.get(name, 0):,}",
                f"{accounting.tool_requests.get(name, 0):,}",
                f"{accounting.tool_results.get(name, 0):,}",
            )
        console.print(tools)

    if accounting.duplicate_file_reads:
        duplicates = Table(
            title=f"Duplicate file reads: {accounting.duplicate_read_tokens:,} tokens "
            f"({accounting.percent(accounting.duplicate_read_tokens)}% of the messages, "
            "by length/4)",
            title_justify="left",
        )
        duplicates.add_column("file")
        duplicates.add_column("reads", justify="right")
        duplicates.add_column("extra tokens", justify="right")
        ranked_reads = sorted(accounting.duplicate_file_reads.items(), key=lambda kv: -kv[1].tokens)
        path_width = max(20, console.width - 29)  # what the counts and borders leave
        for file_path, duplicate in ranked_reads[:8]:
            duplicates.add_row(
                shorten_middle(file_path, path_width), str(duplicate.count), f"{duplicate.tokens:,}"
            )
        console.print(duplicates)

    if report.boundaries:
        table = Table(title="Compaction boundaries", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("trigger")
        table.add_column("tokens before (recorded)", justify="right")
        table.add_column("counted", justify="right")
        table.add_column("time")
        table.add_column("line", justify="right")
        for number, boundary in enumerate(report.boundaries, 1):
            counted = boundary.counted_pre_tokens
            table.add_row(
                str(number),
                markup_safe(str(boundary.trigger)),
                f"{boundary.pre_tokens:,}" if boundary.pre_tokens is not None else "?",
                f"{counted:,}" if counted is not None else "?",
                markup_safe(boundary.timestamp or ""),
                str(boundary.line or ""),
            )
        console.print(table)
    else:
        console.print("[grey50]no compaction boundaries[/]")
    render_receipts(report.receipts)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {markup_safe(note)}")
