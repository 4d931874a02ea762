"""`unbounded eval PATH...`: what compaction keeps (../shared/RETENTION.md), deterministic by
default, probe-and-judge with `--llm`."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.table import Table

from unbounded.addresses import parse_address
from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.compact_command import make_provider
from unbounded.cli.options import (
    FileOrderOption,
    PolicyOption,
    SkipInvalidOption,
    read_transcript,
)
from unbounded.errors import ConfigError
from unbounded.evaluation.evaluate import EvalReport, evaluate_transcripts
from unbounded.evaluation.probes import ProbeRunner
from unbounded.evaluation.retention import FACT_TYPES
from unbounded.model.transcript import Transcript
from unbounded.models import DEFAULT_MODEL
from unbounded.policy import Policy
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
    report = await evaluate_transcripts(transcripts, summarizers, model=model, policy=policy)
    if runner is not None:
        primary = summarizers[0].name
        for point in report.points:
            contexts = {"ours": point.ours[primary].post_messages}
            if point.recorded_summary:
                contexts["recorded"] = [{"role": "user", "content": point.recorded_summary}]
            await runner.evaluate_point(point.before, contexts)
        report.llm = runner.result.to_dict()
    return report


@app.command("eval")
@exits_cleanly
def eval_command(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Recorded sessions to evaluate: files or postgresql://…/db?session=ID."
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
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
    policy_file: PolicyOption = None,
) -> None:
    """Measure what compaction keeps at each compaction point of recorded sessions."""
    chosen_policy = Policy.from_file(policy_file) if policy_file is not None else None
    if not paths:
        raise ConfigError("give at least one session to evaluate")
    transcripts = [
        (
            parse_address(path).display,
            read_transcript(path, skip_invalid=skip_invalid, file_order=file_order),
        )
        for path in paths
    ]
    model_name = model or transcripts[0][1].model or DEFAULT_MODEL
    names = summarizer or ["extractive"]
    providers = [make_provider(name, model_name) for name in dict.fromkeys(names)]
    runner: ProbeRunner | None = None
    if llm is not None:
        provider = make_provider(llm, model_name)
        if provider.name == "extractive":
            raise ConfigError("--llm needs a model provider: anthropic or openai")
        runner = ProbeRunner(provider, provider, model=model_name, judge_model=judge_model)
    job = run_eval(transcripts, providers, model=model, runner=runner, policy=chosen_policy)
    if as_json or runner is None:
        report = asyncio.run(job)
    else:
        with error_console.status("Probing and judging…", spinner="dots"):
            report = asyncio.run(job)
    data = report.to_dict()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    render(data)


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
