"""`unbounded eval PATH...`: the probe exam of each compaction point's hand-overs with
`--llm MODEL`, and deterministic diagnostics (retention, continuation) always; many sessions
at once (folders, globs, `--jobs`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer

from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.batch import JobsOption, expand_paths, located, run_each
from unbounded.cli.compact_command import make_provider
from unbounded.cli.options import (
    FileOrderOption,
    PolicyOption,
    SkipInvalidOption,
    read_transcript,
)
from unbounded.cli.text import markup_safe, plural, shorten_middle
from unbounded.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from unbounded.evaluation.evaluate import EvalReport
    from unbounded.evaluation.probes import ProbeExam
    from unbounded.model.transcript import Transcript
    from unbounded.policy import Policy
    from unbounded.providers.base import Provider

EXAM_PROBES = 10
"""`--probes`'s default: the exam's `DEFAULT_PROBES` (a test holds them equal; the exam's
module is not imported for `--help`)."""


async def run_eval(
    transcripts: list[tuple[str, Transcript]],
    summarizers: list[Provider],
    *,
    model: str | None,
    exam: ProbeExam | None,
    policy: Policy | None = None,
) -> EvalReport:
    """The deterministic evaluation, then the probe exam when one is given."""
    from unbounded.evaluation.evaluate import evaluate_transcripts

    report = await evaluate_transcripts(transcripts, summarizers, model=model, policy=policy)
    if exam is not None:
        await run_exam(report, exam)
    return report


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """What evaluating one file needs, picklable for a worker process."""

    summarizers: tuple[str, ...]
    model: str | None
    skip_invalid: bool
    file_order: bool
    policy: Policy | None = None
    keep_entries: bool = True
    """Keep each point's records on the report: the probe exam reads them."""


def evaluate_one(settings: EvalSettings, path: str) -> tuple[EvalReport, tuple[str, ...]]:
    """The deterministic evaluation of one file of a batch, and its reader's warnings (runs in
    a worker process with --jobs). A Claude Code file is streamed (bounded memory, see
    `unbounded.evaluation.streamed`); other formats and database sessions are loaded whole."""
    import asyncio

    from unbounded.addresses import FileAddress, parse_address
    from unbounded.catalog import DEFAULT_MODEL
    from unbounded.evaluation.evaluate import evaluate_transcripts
    from unbounded.evaluation.streamed import evaluate_stream, open_session
    from unbounded.transcripts.loader import detect_format

    address = parse_address(path)
    if isinstance(address, FileAddress) and detect_format(address.path) == "claude-code":
        session = open_session(
            address.path, skip_invalid=settings.skip_invalid, file_order=settings.file_order
        )
        model_name = settings.model or session.model or DEFAULT_MODEL
        providers = [make_provider(name, model_name) for name in settings.summarizers]
        report = asyncio.run(
            evaluate_stream(
                session,
                providers,
                name=address.display,
                model=settings.model,
                policy=settings.policy,
                keep_entries=settings.keep_entries,
            )
        )
        warnings, skipped = session.warnings, session.skipped_lines
    else:
        transcript = read_transcript(
            address, skip_invalid=settings.skip_invalid, file_order=settings.file_order, quiet=True
        )
        model_name = settings.model or transcript.model or DEFAULT_MODEL
        providers = [make_provider(name, model_name) for name in settings.summarizers]
        report = asyncio.run(
            evaluate_transcripts(
                [(address.display, transcript)],
                providers,
                model=settings.model,
                policy=settings.policy,
            )
        )
        warnings, skipped = transcript.warnings, transcript.skipped_lines
    notes = (f"skipped {skipped:,} invalid line(s) (--skip-invalid)",) if skipped else ()
    return report, (*warnings, *notes)


@app.command("eval")
@exits_cleanly
def eval_command(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH",
            help="Recorded sessions to evaluate: files, folders (every .jsonl and .traj file "
            "in them), globs, or postgresql://…/db?session=ID.",
        ),
    ],
    summarizer: Annotated[
        list[str] | None,
        typer.Option(
            "--summarizer",
            "-s",
            help="Our summarizer(s): extractive (default), anthropic, openai. Repeatable; the "
            "first is the headline.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model the summary requests name (anthropic / openai summarizers; default: "
            "the transcript's). The exam runs on --llm.",
        ),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            metavar="MODEL",
            help="Also hold the probe exam with this model, an Anthropic or OpenAI model of "
            "the model table (key from the environment; ANTHROPIC_BASE_URL / OPENAI_BASE_URL "
            "for your own endpoint).",
        ),
    ] = None,
    grader_model: Annotated[
        str | None,
        typer.Option("--grader-model", help="Model that grades the answers (default: --llm)."),
    ] = None,
    probes: Annotated[
        int,
        typer.Option(
            "--probes",
            help="Questions the examiner writes per point (at least 6: one per probe category).",
        ),
    ] = EXAM_PROBES,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the order the grader sees the answers in.")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    jobs: JobsOption = 1,
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
    policy_file: PolicyOption = None,
) -> None:
    """Examine the hand-overs of recorded sessions' compaction points (--llm), and report
    what compaction keeps (deterministic diagnostics)."""
    import asyncio

    from unbounded.catalog import DEFAULT_MODEL, load_model_table
    from unbounded.policy import Policy

    if not paths:
        raise ConfigError("give at least one session to evaluate")
    table = load_model_table()
    for name in (model,):
        if name is not None:
            table.get(name)  # an unknown model fails before any work
    names = tuple(dict.fromkeys(summarizer or ["extractive"]))
    for name in names:
        make_provider(name, model or DEFAULT_MODEL)  # unknown names and missing keys, now
    exam: ProbeExam | None = None
    if llm is not None:
        exam = make_exam(llm, grader_model, probes=probes, seed=seed)
    elif grader_model is not None:
        raise ConfigError("--grader-model grades the probe exam: give --llm MODEL too")
    sessions = expand_paths(paths)
    chosen_policy = Policy.from_file(policy_file) if policy_file is not None else None
    settings = EvalSettings(
        names, model, skip_invalid, file_order, chosen_policy, keep_entries=exam is not None
    )
    reports: list[EvalReport] = []
    failed: list[tuple[str, str]] = []
    for outcome in run_each(partial(evaluate_one, settings), sessions, jobs):
        if outcome.result is None:
            if len(sessions) == 1:
                raise ConfigError(outcome.error or "failed")
            failed.append((outcome.path, outcome.error or "failed"))
            error_console.print(
                f"[bold red]error:[/] {markup_safe(outcome.error or 'failed')}",
                highlight=False,
                soft_wrap=True,
            )
            continue
        one, warnings = outcome.result
        reports.append(one)
        for warning in warnings:
            error_console.print(
                f"[yellow]warning:[/] {markup_safe(located(outcome.path, warning))}",
                highlight=False,
                soft_wrap=True,
            )
    report = merge_reports(list(names), reports)
    if exam is not None and reports:
        if as_json:
            asyncio.run(run_exam(report, exam))
        else:
            with error_console.status("Holding the probe exam…", spinner="dots"):
                asyncio.run(run_exam(report, exam))
    data = report.to_dict()
    if failed:
        data["failed"] = [{"path": path, "error": error} for path, error in failed]
    if as_json:
        data["by_session"] = {one.sessions[0]: one.to_dict() for one in reports if one.sessions}
        print(json.dumps(data, indent=2))
    else:
        if len(reports) > 1 or failed:
            render_sessions(reports, failed)
        render(data)
    if failed:
        raise typer.Exit(code=2)


def merge_reports(summarizers: list[str], reports: list[EvalReport]) -> EvalReport:
    """One report over the sessions of several (points and sessions in order)."""
    from unbounded.evaluation.evaluate import EvalReport

    merged = EvalReport(summarizers=summarizers)
    for one in reports:
        merged.points.extend(one.points)
        merged.sessions.extend(one.sessions)
        merged.calls.update(one.calls)
    return merged


def exam_provider(model: str, option: str) -> Provider:
    """The provider of a model of the model table (Anthropic or OpenAI)."""
    from unbounded.catalog import load_model_table

    info = load_model_table().get(model)
    if info.provider not in ("anthropic", "openai"):
        raise ConfigError(
            f"{option} {model}: the exam runs on an Anthropic or OpenAI model, and the model "
            f"table says this one is {info.provider!r}"
        )
    vendor = "an Anthropic" if info.provider == "anthropic" else "an OpenAI"
    return make_provider(info.provider, model, option=f"{option} {model} ({vendor} model)")


def make_exam(llm: str, grader_model: str | None, *, probes: int, seed: int) -> ProbeExam:
    """The exam with `llm` as examiner and answerer, and `grader_model` (or `llm`) grading."""
    provider = exam_provider(llm, "--llm")
    grader = exam_provider(grader_model, "--grader-model") if grader_model else provider
    from unbounded.evaluation.probes import ProbeExam

    return ProbeExam(
        provider, provider, grader, model=llm, grader_model=grader_model, probes=probes, seed=seed
    )


async def run_exam(report: EvalReport, exam: ProbeExam) -> None:
    """The probe exam at every point of the report with turns after it (`report.llm`): our
    summary, the recorded one and the naive baseline, each examined blind."""
    primary = report.summarizers[0]
    for point in report.points:
        handovers = {"ours": point.ours[primary].summary_text}
        if point.recorded_summary:
            handovers["recorded"] = point.recorded_summary
        await exam.examine(f"{point.session} {point.point}", point.before, point.after, handovers)
    report.llm = exam.report.to_dict()


def render_sessions(reports: list[EvalReport], failed: list[tuple[str, str]]) -> None:
    """One row per session: its points, compression, and the facts each summary kept."""
    from rich.table import Table

    table = Table(
        title=f"{plural(len(reports), 'session')} evaluated"
        + (f" ({len(failed):,} failed, see above)" if failed else "")
        + ": facts kept, all types together",
        title_justify="left",
    )
    table.add_column("session", no_wrap=True)
    table.add_column("points", justify="right")
    table.add_column("compression", justify="right")
    table.add_column("ours", justify="right")
    table.add_column("recorded", justify="right")
    width = max(16, console.width - 52)
    for one in reports:
        primary = one.summarizers[0]
        ours = _overall(one.tally(primary, "summary").scores)
        recorded = _overall(one.recorded_tally().scores) if one.recorded_tally().points else None
        table.add_row(
            shorten_middle(one.sessions[0] if one.sessions else "?", width),
            str(len(one.points)),
            _percent(one.compression(primary)),
            _percent(ours),
            _percent(recorded),
        )
    console.print(table)


def _overall(scores: dict[str, tuple[int, int]]) -> float | None:
    kept = sum(pair[0] for pair in scores.values())
    total = sum(pair[1] for pair in scores.values())
    return kept / total if total else None


def _percent(value: Any) -> str:
    return "—" if value is None else f"{value:.0%}"


def _recall_precision(figures: dict[str, Any]) -> str:
    if figures.get("recall") is None:
        return "—"
    return f"{_percent(figures['recall'])} / {_percent(figures.get('precision'))}"


def render_continuation(data: dict[str, Any]) -> None:
    """The continuation diagnostics: what the agent used next that each context holds, and
    what it lists that the agent used."""
    from rich.table import Table

    table = Table(
        title=f"Continuation at {data['continuation_points']} recorded compaction(s), a "
        "diagnostic: of what the agent used in the next turns and could have known, the share "
        "each context holds / of what the context lists, the share the agent used",
        title_justify="left",
    )
    table.add_column("turns")
    table.add_column("kind")
    table.add_column("ours: summary", justify="right")
    table.add_column("ours: full", justify="right")
    table.add_column("recorded summary", justify="right")
    for horizon, kinds in data["continuation_by_horizon"].items():
        label = horizon.replace("next_", "next ")
        for kind, row in kinds.items():
            table.add_row(
                label,
                kind,
                _recall_precision(row["ours_summary"]),
                _recall_precision(row["ours_full"]),
                _recall_precision(row["recorded"]),
            )
            label = ""
    console.print(table)


def render_exam(llm: dict[str, Any]) -> None:
    """The probe exam: points earned per hand-over, overall and per category."""
    from rich.table import Table

    from unbounded.evaluation.probes import CATEGORIES, CATEGORY_LABELS

    table = Table(
        # Model names can come from a --models-file: escaped for the title's markup.
        title=f"Probe exam at {llm['points_examined']} compaction point(s) "
        f"({markup_safe(str(llm['model']))}; graded by {markup_safe(str(llm['grader_model']))})"
        f": share of the points earned, and mean points per category (of {llm['max_points']})",
        title_justify="left",
    )
    table.add_column("hand-over")
    table.add_column("points earned", justify="right")
    for category in CATEGORIES:
        table.add_column(CATEGORY_LABELS[category], justify="right")
    for name, scores in llm["handovers"].items():
        table.add_row(
            name,
            _percent(scores["score"]),
            *(
                "—" if scores["categories"][c] is None else f"{scores['categories'][c]:.2f}"
                for c in CATEGORIES
            ),
        )
    console.print(table)
    for skipped in llm.get("skipped", []):
        console.print(f"[yellow]not examined:[/] {markup_safe(str(skipped))}", highlight=False)


def render(data: dict[str, Any]) -> None:
    """Print the evaluation with rich: the exam first when there is one, then the
    deterministic diagnostics."""
    from rich.table import Table

    from unbounded.evaluation.retention import FACT_TYPES

    llm = data.get("llm")
    if llm:
        render_exam(llm)
    table = Table(
        title=f"Retention at {data['points']} compaction point(s) of {data['sessions']} "
        f"session(s) (summarizer {data['summarizer']}), a diagnostic",
        title_justify="left",
    )
    table.add_column("fact type")
    table.add_column("facts", justify="right")
    table.add_column("ours: summary", justify="right")
    table.add_column("ours: full context", justify="right")
    table.add_column("recorded summary", justify="right")
    for name in FACT_TYPES:
        row = data[name]
        table.add_row(
            name.replace("_", " "),
            str(row["facts"]),
            _percent(row["ours_summary"]),
            _percent(row["ours_full"]),
            _percent(row["recorded"]),
        )
    console.print(table)
    console.print(
        f"compression (1 - post/pre tokens): ours {_percent(data['compression'])}, recorded "
        f"summaries {_percent(data['recorded_compression'])}"
    )
    if data.get("continuation_points"):
        render_continuation(data)
