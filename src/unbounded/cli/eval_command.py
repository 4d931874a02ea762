"""`unbounded eval PATH...`: what compaction keeps, deterministic by default, probe-and-judge
with `--llm`; many sessions at once (folders, globs, `--jobs`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from unbounded.catalog import DEFAULT_MODEL, load_model_table
from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.batch import JobsOption, expand_paths, located, run_each
from unbounded.cli.compact_command import make_provider
from unbounded.cli.options import (
    FileOrderOption,
    PolicyOption,
    SkipInvalidOption,
    read_transcript,
)
from unbounded.cli.text import plural, shorten_middle
from unbounded.errors import ConfigError
from unbounded.policy import Policy

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from unbounded.evaluation.evaluate import EvalReport
    from unbounded.evaluation.probes import ProbeRunner
    from unbounded.model.transcript import Transcript
    from unbounded.providers.base import Provider


async def run_eval(
    transcripts: list[tuple[str, Transcript]],
    summarizers: list[Provider],
    *,
    model: str | None,
    runner: ProbeRunner | None,
    policy: Policy | None = None,
) -> EvalReport:
    """The deterministic evaluation, then the probes when a runner is given."""
    from unbounded.evaluation.evaluate import evaluate_transcripts

    report = await evaluate_transcripts(transcripts, summarizers, model=model, policy=policy)
    if runner is not None:
        await run_probes(report, runner)
    return report


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """What evaluating one file needs, picklable for a worker process."""

    summarizers: tuple[str, ...]
    model: str | None
    skip_invalid: bool
    file_order: bool
    policy: Policy | None = None


def evaluate_one(settings: EvalSettings, path: str) -> tuple[EvalReport, tuple[str, ...]]:
    """The deterministic evaluation of one file of a batch, and its reader's warnings (runs in
    a worker process with --jobs)."""
    from unbounded.addresses import parse_address
    from unbounded.evaluation.evaluate import evaluate_transcripts

    transcript = read_transcript(
        path, skip_invalid=settings.skip_invalid, file_order=settings.file_order, quiet=True
    )
    model_name = settings.model or transcript.model or DEFAULT_MODEL
    providers = [make_provider(name, model_name) for name in settings.summarizers]
    report = asyncio.run(
        evaluate_transcripts(
            [(parse_address(path).display, transcript)],
            providers,
            model=settings.model,
            policy=settings.policy,
        )
    )
    skipped = transcript.skipped_lines
    notes = (f"skipped {skipped:,} invalid line(s) (--skip-invalid)",) if skipped else ()
    return report, (*transcript.warnings, *notes)


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
        str | None, typer.Option("--model", "-m", help="Model for LLM summaries and probes.")
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="Also run the probe-and-judge evaluation with this provider: anthropic or "
            "openai (key from the environment; OPENAI_BASE_URL / ANTHROPIC_BASE_URL for your "
            "own endpoint).",
        ),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option("--judge-model", help="Model of the judge (default: --model).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    jobs: JobsOption = 1,
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
    policy_file: PolicyOption = None,
) -> None:
    """Measure what compaction keeps at each compaction point of recorded sessions."""
    if not paths:
        raise ConfigError("give at least one session to evaluate")
    table = load_model_table()
    for name in (model, judge_model):
        if name is not None:
            table.get(name)  # an unknown model fails before any work
    names = tuple(dict.fromkeys(summarizer or ["extractive"]))
    for name in names:
        make_provider(name, model or DEFAULT_MODEL)  # unknown names and missing keys, now
    runner: ProbeRunner | None = None
    if llm is not None:
        provider = make_provider(llm, model or DEFAULT_MODEL, option="--llm")
        if provider.name == "extractive":
            raise ConfigError("--llm needs a model provider: anthropic or openai")
    sessions = expand_paths(paths)
    chosen_policy = Policy.from_file(policy_file) if policy_file is not None else None
    settings = EvalSettings(names, model, skip_invalid, file_order, chosen_policy)
    reports: list[EvalReport] = []
    failed: list[tuple[str, str]] = []
    for outcome in run_each(partial(evaluate_one, settings), sessions, jobs):
        if outcome.result is None:
            if len(sessions) == 1:
                raise ConfigError(outcome.error or "failed")
            failed.append((outcome.path, outcome.error or "failed"))
            error_console.print(
                f"[bold red]error:[/] {outcome.error}", highlight=False, soft_wrap=True
            )
            continue
        one, warnings = outcome.result
        reports.append(one)
        for warning in warnings:
            error_console.print(
                f"[yellow]warning:[/] {located(outcome.path, warning)}",
                highlight=False,
                soft_wrap=True,
            )
    report = merge_reports(list(names), reports)
    if llm is not None and reports:
        model_name = model or DEFAULT_MODEL
        provider = make_provider(llm, model_name, option="--llm")
        from unbounded.evaluation.probes import ProbeRunner

        runner = ProbeRunner(provider, provider, model=model_name, judge_model=judge_model)
        if as_json:
            asyncio.run(run_probes(report, runner))
        else:
            with error_console.status("Probing and judging…", spinner="dots"):
                asyncio.run(run_probes(report, runner))
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
    return merged


async def run_probes(report: EvalReport, runner: ProbeRunner) -> None:
    """The probe-and-judge evaluation at every point of the report (`report.llm`)."""
    primary = report.summarizers[0]
    for point in report.points:
        contexts = {"ours": point.ours[primary].post_messages}
        if point.recorded_summary:
            contexts["recorded"] = [{"role": "user", "content": point.recorded_summary}]
        await runner.evaluate_point(point.before, contexts)
    report.llm = runner.result.to_dict()


def render_sessions(reports: list[EvalReport], failed: list[tuple[str, str]]) -> None:
    """One row per session: its points, compression, and the facts each summary kept."""
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


def render_continuation(data: dict[str, Any]) -> None:
    """The continuation measure: what the agent used next that each context still holds."""
    table = Table(
        title=f"Continuation at {data['continuation_points']} recorded compaction(s): of what "
        "the agent used in the next turns and could have known, the share each context holds",
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
                _percent(row["ours_summary"]),
                _percent(row["ours_full"]),
                _percent(row["recorded"]),
            )
            label = ""
    console.print(table)


def render(data: dict[str, Any]) -> None:
    """Print the evaluation with rich."""
    from unbounded.evaluation.retention import FACT_TYPES

    table = Table(
        title=f"Retention at {data['points']} compaction point(s) of {data['sessions']} "
        f"session(s) (summarizer {data['summarizer']})",
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
    llm = data.get("llm")
    if llm:
        judged = Table(
            title=f"Probe and judge ({llm['model']}, judge {llm['judge_model']}; 0-5)",
            title_justify="left",
        )
        judged.add_column("context")
        judged.add_column("overall", justify="right")
        for probe in llm["probes"]:
            judged.add_column(probe, justify="right")
        for name, scores in llm["contexts"].items():
            judged.add_row(
                name,
                "—" if scores["overall"] is None else f"{scores['overall']:.2f}",
                *(
                    f"{scores['probes'][p]:.2f}" if p in scores["probes"] else "—"
                    for p in llm["probes"]
                ),
            )
        console.print(judged)
