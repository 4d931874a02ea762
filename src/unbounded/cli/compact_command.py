"""`unbounded compact PATH`: compact a recorded session and write the result as a transcript."""

from __future__ import annotations

import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from unbounded.cli.app import app, console, error_console, exits_cleanly
from unbounded.cli.options import (
    FileOrderOption,
    SkipInvalidOption,
    check_output_path,
    file_stamp,
    read_transcript,
)
from unbounded.cli.text import markup_safe
from unbounded.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs (a fast --help)
    from unbounded.events import Event
    from unbounded.model.entries import Entry
    from unbounded.model.transcript import Transcript
    from unbounded.providers.base import Provider

SummarizerName = Literal["extractive", "anthropic", "openai"]


def make_provider(name: str, model: str, *, option: str = "--summarizer") -> Provider:
    """The summarizer (or probe model) by name: extractive (offline), anthropic or openai
    (keys from the environment); `option` is the flag and value errors name."""
    if name == "extractive":
        from unbounded.providers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ConfigError(
                f"{_flag(option, name)} needs ANTHROPIC_API_KEY in the environment: "
                f"export ANTHROPIC_API_KEY=<your key>{_offline_hint(option)}"
            )
        from unbounded.providers.anthropic import AnthropicProvider

        return AnthropicProvider(base_url=os.environ.get("ANTHROPIC_BASE_URL"))
    if name == "openai":
        if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            raise ConfigError(
                f"{_flag(option, name)} needs OPENAI_API_KEY (or OPENAI_BASE_URL) in the "
                f"environment: export OPENAI_API_KEY=<your key>{_offline_hint(option)}"
            )
        from unbounded.providers.openai import OpenAIProvider

        return OpenAIProvider(
            api_key=os.environ.get("OPENAI_API_KEY") or "unused",
            base_url=os.environ.get("OPENAI_BASE_URL"),
        )
    raise ConfigError(f"unknown {option} {name!r}: use extractive, anthropic or openai")


def _flag(option: str, name: str) -> str:
    """The flag as the user wrote it: `--summarizer anthropic`, or `--llm claude-…` as given."""
    return option if " " in option else f"{option} {name}"


def _offline_hint(option: str) -> str:
    """How to go on without a key, where the option allows it (a summarizer can be offline)."""
    return ", or --summarizer extractive to summarize offline" if option == "--summarizer" else ""


def entries_to_compact(transcript: Transcript, at: str) -> tuple[list[Entry], list[Entry]]:
    """(entries to write before the new boundary, the main-thread entries to compact)."""
    from unbounded.model.transcript import Transcript

    if at == "end":
        return list(transcript.entries), transcript.main_thread()
    if at == "boundary":
        boundaries = transcript.boundaries()
        if not boundaries:
            raise ConfigError("--at boundary: this transcript has no recorded compaction boundary")
        cut = transcript.entries.index(boundaries[0])
        prefix = transcript.entries[:cut]
        return prefix, [e for e in Transcript(prefix, transcript.format).main_thread()]
    positions = [i for i, e in enumerate(transcript.entries) if e.uuid == at]
    if not positions:
        raise ConfigError(
            f"--at {at}: no record with that uuid (use end, boundary or a record uuid)"
        )
    prefix = transcript.entries[: positions[0] + 1]
    return prefix, Transcript(prefix, transcript.format).main_thread()


@app.command("compact")
@exits_cleanly
def compact_command(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="The session to compact: a file or postgresql://…/db?session=ID.",
        ),
    ],
    at: Annotated[
        str,
        typer.Option(
            "--at", help="end (like /compact), boundary (the first recorded one) or a record uuid."
        ),
    ] = "end",
    summarizer: Annotated[
        str, typer.Option("--summarizer", "-s", help="extractive (offline), anthropic or openai.")
    ] = "extractive",
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model for the summary call.")
    ] = None,
    instructions: Annotated[
        str | None, typer.Option("--instructions", help="Extra instructions for the summary.")
    ] = None,
    partial: Annotated[
        str | None, typer.Option("--partial", help="up_to or from: summarize around --pivot.")
    ] = None,
    pivot: Annotated[
        str | None, typer.Option("--pivot", help="uuid of the pivot record.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the compacted transcript here (never over the input without --force).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Allow -o to replace the input or a non-transcript file."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    skip_invalid: SkipInvalidOption = False,
    file_order: FileOrderOption = False,
) -> None:
    """Summarize a session (or part of it) and show what the next context would hold."""
    import asyncio

    from rich.table import Table

    from unbounded.addresses import FileAddress, parse_address
    from unbounded.catalog import DEFAULT_MODEL, load_model_table
    from unbounded.compaction.conversation import CacheSafeParams, compact_conversation
    from unbounded.events import CompactionHeartbeat, CompactionRetried
    from unbounded.model.entries import messages_after_compact_boundary
    from unbounded.model.normalize import normalize_messages, validate_request
    from unbounded.policy import Policy
    from unbounded.recall.index import TranscriptIndex
    from unbounded.recall.receipts import RECEIPT_KEY, write_compaction_receipt
    from unbounded.transcripts.claude_code import write_claude_code

    if partial not in (None, "up_to", "from"):
        raise ConfigError("--partial must be up_to or from")
    if (partial is None) != (pivot is None):
        raise ConfigError("--partial and --pivot go together")
    if model is not None:
        load_model_table().get(model)  # an unknown model fails before any work
    address = parse_address(path)
    source = address.path if isinstance(address, FileAddress) else None
    inputs = [source] if source is not None else []
    if output is not None:
        check_output_path(output, inputs, force=force)
    stamp = file_stamp(source) if source is not None else None
    transcript = read_transcript(address, skip_invalid=skip_invalid, file_order=file_order)
    if (
        output is not None
        and source is not None
        and transcript.format != "claude-code"
        and output.exists()
        and os.path.samefile(output, source)
    ):
        raise ConfigError(
            f"{path} is a {transcript.format} file: the compacted session is written as a "
            "Claude Code transcript, which would replace it; choose another -o file"
        )
    prefix, thread = entries_to_compact(transcript, at)
    table = load_model_table()
    model_name = model or transcript.model or DEFAULT_MODEL
    info = table.get(model) if model is not None else table.find(model_name)
    provider = make_provider(summarizer, model_name)
    params = CacheSafeParams(
        model=model_name, max_tokens=min(info.max_output, 32_000) if info else 32_000
    )

    def show(event: Event) -> None:
        if isinstance(event, CompactionHeartbeat) and not as_json:
            error_console.print(f"[grey50]still summarizing… {event.elapsed_seconds:.0f}s[/]")
        elif isinstance(event, CompactionRetried):
            error_console.print(f"[yellow]summary request too long: retry {event.attempt + 1}[/]")

    from unbounded.compaction.glue import default_facts_ledger, rehydrator_for

    policy = Policy.from_env()

    with console.status("Compacting…", spinner="dots") if not as_json else nullcontext():
        result = asyncio.run(
            compact_conversation(
                thread,
                provider,
                params=params,
                trigger="manual",
                instructions=instructions,
                direction=partial,  # type: ignore[arg-type]
                pivot_uuid=pivot,
                transcript_path=str(source) if source is not None else None,
                rehydrate=rehydrator_for(thread, policy=policy),
                facts_ledger=default_facts_ledger,
                policy=policy,
                events=show,
            )
        )
    # The CLI's compaction leaves the same receipt as a session's (what it took out).
    write_compaction_receipt(
        result.boundary,
        messages_after_compact_boundary(thread),
        result.messages_to_keep,
        index=TranscriptIndex().update(thread),
        summary_text=result.summary_text,
        summarizer=result.summarizer,
    )
    messages = normalize_messages(result.view())
    validate_request(messages)
    if output is not None:
        if (
            source is not None
            and output.exists()
            and os.path.samefile(output, source)
            and file_stamp(source) != stamp
        ):
            raise ConfigError(
                f"{path} changed while it was being compacted (a session still running?): "
                "not replaced; write to another -o file"
            )
        write_claude_code([*prefix, *result.new_entries()], output, keep_mode=True)
    report: dict[str, Any] = {
        "path": address.display,
        "at": at,
        "summarizer": result.summarizer,
        "pre_tokens": result.pre_tokens,
        "post_tokens": result.post_tokens,
        "summary_tokens": result.summary_tokens,
        "kept_messages": len(result.messages_to_keep),
        "attachments": len(result.attachments),
        "boundary_uuid": result.boundary.uuid,
        "messages_after": len(messages),
        "compression": round(1 - result.post_tokens / result.pre_tokens, 4)
        if result.pre_tokens
        else 0.0,
        "output": str(output) if output else None,
        "skipped_attachments": result.skipped_attachments,
        "receipt": result.boundary.compact_metadata[RECEIPT_KEY],
    }
    if as_json:
        print(json.dumps(report, indent=2))
        return
    summary = Table(title="Compaction", title_justify="left", show_header=False)
    for key in (
        "summarizer",
        "pre_tokens",
        "post_tokens",
        "summary_tokens",
        "compression",
        "kept_messages",
        "attachments",
        "boundary_uuid",
    ):
        value = report[key]
        summary.add_row(
            key.replace("_", " "), f"{value:,}" if isinstance(value, int) else str(value)
        )
    summary.add_row(
        "output",
        markup_safe(str(output)) if output else "not written (-o FILE writes it)",
    )
    console.print(summary)
    console.print(result.summary_text[:4000], markup=False, highlight=False)
