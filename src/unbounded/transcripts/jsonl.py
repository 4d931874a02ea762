"""Reading JSON Lines safely: binary and encoding checks, torn last lines, skip-invalid mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from unbounded.errors import TranscriptError

SNIFF_BYTES = 65_536


@dataclass(slots=True)
class ReadReport:
    """What a reader noticed while reading: warnings and how many lines it skipped."""

    warnings: list[str] = field(default_factory=list)
    skipped_lines: int = 0


def check_not_binary(path: Path, head: bytes) -> None:
    """Raise a clear error for a file that is plainly not text (NUL bytes in its start)."""
    if b"\x00" in head:
        raise TranscriptError(
            "binary file (contains NUL bytes), not a transcript",
            path=path,
            line=head[: head.index(b"\x00")].count(b"\n") + 1,
            hint="pass a .jsonl or .traj transcript file",
        )


def iter_json_lines(
    path: Path,
    *,
    skip_invalid: bool,
    report: ReadReport,
    validate: Callable[[dict[str, Any], Path, int], None] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line, streaming the file.

    A line that is not a JSON object raises TranscriptError naming the file and line, or is
    counted and skipped with `skip_invalid`. A last line with no newline that does not parse
    is a write in progress or a crash mid-append: it is reported as a warning and left out.
    """
    with path.open("rb") as handle:
        previous: tuple[int, bytes] | None = None
        for number, raw in enumerate(handle, 1):
            if previous is not None:
                yield from _parse_line(path, *previous, skip_invalid, report, validate)
            previous = (number, raw)
        if previous is None:
            return
        last_number, last_raw = previous
        if not last_raw.endswith(b"\n"):
            try:
                orjson.loads(last_raw)
            except orjson.JSONDecodeError:
                report.warnings.append(
                    f"{path}:{last_number}: torn last line ({len(last_raw)} bytes with no "
                    "newline, not valid JSON): left out"
                )
                return
        yield from _parse_line(path, last_number, last_raw, skip_invalid, report, validate)


def _parse_line(
    path: Path,
    number: int,
    raw: bytes,
    skip_invalid: bool,
    report: ReadReport,
    validate: Callable[[dict[str, Any], Path, int], None] | None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    if not raw.strip():
        return
    try:
        if b"\x00" in raw:
            raise TranscriptError(
                "NUL byte in line (binary data, not JSON)", path=path, line=number
            )
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            reason = "not valid UTF-8" if "utf-8" in str(exc).lower() else f"malformed JSON ({exc})"
            raise TranscriptError(
                reason, path=path, line=number, hint="fix or remove the line, or use --skip-invalid"
            ) from None
        if not isinstance(value, dict):
            raise TranscriptError(
                f"expected a JSON object, found {type(value).__name__}",
                path=path,
                line=number,
                hint="each line of a transcript is one JSON object",
            )
        if validate is not None:
            validate(value, path, number)
    except TranscriptError:
        if not skip_invalid:
            raise
        report.skipped_lines += 1
        return
    yield number, value


def dumps_line(record: dict[str, Any]) -> bytes:
    """One record as a compact JSON line (UTF-8, like JSON.stringify), newline included."""
    return orjson.dumps(record) + b"\n"
