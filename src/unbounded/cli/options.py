"""Options and input handling shared by every command that reads a transcript."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from unbounded.cli.app import error_console
from unbounded.cli.text import markup_safe
from unbounded.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from unbounded.addresses import Address
    from unbounded.catalog import ModelTable
    from unbounded.model.transcript import Transcript

SkipInvalidOption = Annotated[
    bool,
    typer.Option(
        "--skip-invalid", help="Skip lines that cannot be read (with a warning saying how many)."
    ),
]
PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="A policy file (TOML, `field = value` lines under \\[policy]; see `unbounded tune`).",
    ),
]
ModelsFileOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--models-file",
        help="Extra model table (TOML, in the shape of unbounded/data/models.toml; may repeat).",
    ),
]
FileOrderOption = Annotated[
    bool,
    typer.Option(
        "--file-order",
        help="Take every record in file order instead of rebuilding the conversation thread "
        "from its parent links (for debugging rewound or resumed sessions).",
    ),
]


def require_model(table: ModelTable, name: str) -> None:
    """Refuse an unknown `--model` before any work, advising this command's `--models-file`."""
    try:
        table.get(name)
    except ConfigError as exc:
        raise ConfigError(f"{exc} On the command line: --models-file FILE.") from None


def check_window(window: int | None) -> None:
    """Refuse a `--window` below the smallest one unbounded works in, before any file is read."""
    from unbounded.catalog import MIN_CONTEXT_WINDOW, window_too_small

    if window is not None and window < MIN_CONTEXT_WINDOW:
        raise ConfigError(f"--window {window}: {window_too_small(window)}")


def check_output_file(
    option: str, path: Path, *, makes_folder: bool = False, inputs: Iterable[Path] = ()
) -> None:
    """Refuse an output path that cannot be written (a folder, or in a folder that does not
    exist unless the command makes it: `makes_folder`) or that is one of the command's input
    files (or a link to one), before the work it would hold."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give a file path (e.g. {path / 'out'})")
    if path.exists():
        for source in inputs:
            if source.exists() and os.path.samefile(path, source):
                raise ConfigError(
                    f"{option} {path} is the session {source} this command reads: writing "
                    f"there would replace the recording; choose another {option} file"
                )
    if not makes_folder and not path.parent.is_dir():
        raise ConfigError(
            f"{option} {path}: the folder {path.parent} does not exist; create it first "
            "(mkdir -p) or give a path in an existing folder"
        )


def read_transcript(
    path: str | Path | Address,
    *,
    skip_invalid: bool = False,
    file_order: bool = False,
    quiet: bool = False,
) -> Transcript:
    """Load a transcript for a command, from a file or a database session (see
    `unbounded.addresses`), and print its warnings on stderr (unless quiet)."""
    from unbounded.addresses import load_address

    transcript, _ = load_address(path, skip_invalid=skip_invalid, file_order=file_order)
    if not quiet:
        print_warnings(transcript)
    return transcript


def print_warnings(transcript: Transcript) -> None:
    """Print what the reader noticed: repaired lines, left-out records, skipped lines."""
    print_source_warnings(transcript.warnings, transcript.skipped_lines)


def print_source_warnings(warnings: list[str], skipped_lines: int) -> None:
    """Print a reader's warnings and how many lines it skipped, on stderr."""
    for warning in warnings:
        error_console.print(
            f"[yellow]warning:[/] {markup_safe(warning)}", highlight=False, soft_wrap=True
        )
    if skipped_lines:
        error_console.print(
            f"[yellow]warning:[/] skipped {skipped_lines} invalid line(s) (--skip-invalid)",
            highlight=False,
        )


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(size, modification time in ns) of a file, or None when it does not exist."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_size, status.st_mtime_ns


def check_output_path(output: Path, inputs: list[Path], *, force: bool) -> None:
    """Refuse to write over an input, or over an existing file that is not a Claude Code
    transcript, unless forced."""
    if not output.exists():
        return
    if output.is_dir():
        raise ConfigError(f"{output} is a folder: give a file name for the output")
    for source in inputs:
        if source.exists() and os.path.samefile(output, source):
            if not force:
                raise ConfigError(
                    f"{output} is the input file: writing there would replace the session "
                    "(and lose lines a running agent appends meanwhile); choose another "
                    "-o file, or pass --force to replace it"
                )
            return
    if force or not stat.S_ISREG(output.stat().st_mode):
        # Only a regular file is read to tell its format: opening a named pipe waits for a
        # writer, and a pipe or device written to replaces nothing.
        return
    from unbounded.transcripts.loader import detect_format

    try:
        kind = detect_format(output)
    except Exception:  # any unreadable file counts as "not a transcript" here
        kind = None
    if kind != "claude-code":
        raise ConfigError(
            f"{output} exists and is not a Claude Code transcript; choose another -o file, "
            "or pass --force to replace it"
        )
