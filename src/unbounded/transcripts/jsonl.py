"""Reading JSON Lines safely: binary and encoding checks, torn last lines, skip-invalid mode.

Damage that leaves the content readable is repaired with a warning naming the line, not
refused: a UTF-8 byte order mark, lone UTF-16 surrogates (`\ud83d` from an emoji cut in half)
and bytes that are not UTF-8 (a Latin-1 file name) become U+FFFD; lines before the first JSON
record that are not JSON at all (a banner a tool printed into the file) are skipped.

Hostile input is bounded: the file is streamed one line at a time, a line longer than
`max_line_bytes` (default `MAX_LINE_BYTES`, 256 MiB, or `UNBOUNDED_MAX_LINE_BYTES`) is an
error that never holds more than the limit in memory, and a record nested deeper than
`max_depth` (default `MAX_DEPTH`, 200) is refused: orjson reads 1,024 levels but writes only
254, so a deeper record could be read and then fail when it is written back or sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from unbounded.errors import ConfigError, TranscriptError
from unbounded.model.text import repair_value

SNIFF_BYTES = 65_536
BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 256 * 1024 * 1024
"""Longest line read (newline excluded); `UNBOUNDED_MAX_LINE_BYTES` overrides it."""
MAX_DEPTH = 200
"""Deepest nesting of arrays and objects in one record (orjson writes at most 254 levels)."""
_SKIP_CHUNK = 1 << 20


def max_line_bytes_default() -> int:
    """The line-size limit: `UNBOUNDED_MAX_LINE_BYTES` when set, else `MAX_LINE_BYTES`."""
    value = os.environ.get("UNBOUNDED_MAX_LINE_BYTES")
    if not value:
        return MAX_LINE_BYTES
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise ConfigError(f"UNBOUNDED_MAX_LINE_BYTES must be a positive integer, not {value!r}")
    return limit


def nesting_depth(value: Any) -> int:
    """How deep arrays and objects nest in `value` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest


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


def _skip_rest_of_line(handle: IO[bytes]) -> bool:
    """Read past the rest of an over-long line in bounded chunks; True if a newline ended it."""
    while True:
        chunk = handle.readline(_SKIP_CHUNK)
        if not chunk:
            return False
        if chunk.endswith(b"\n"):
            return True


def iter_json_lines(
    path: Path,
    *,
    skip_invalid: bool,
    report: ReadReport,
    validate: Callable[[dict[str, Any], Path, int], None] | None = None,
    max_line_bytes: int | None = None,
    max_depth: int | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line, streaming the file.

    A line that is not a JSON object raises TranscriptError naming the file and line, or is
    counted and skipped with `skip_invalid`; so does a line over `max_line_bytes` (read in
    bounded chunks, never held whole) or a record nested deeper than `max_depth`. A last line
    with no newline that does not parse is a write in progress or a crash mid-append: it is
    reported as a warning and left out.
    """
    for line in iter_json_records(
        path,
        skip_invalid=skip_invalid,
        report=report,
        validate=validate,
        max_line_bytes=max_line_bytes,
        max_depth=max_depth,
    ):
        yield line.number, line.value


@dataclass(frozen=True, slots=True)
class JsonLine:
    """One record read from a JSON Lines file: where it was, its exact bytes, its value."""

    number: int
    """1-based line number."""
    offset: int
    """Byte offset of the line's start in the file."""
    raw: bytes
    """The line exactly as stored, its newline included when it had one."""
    value: dict[str, Any]


def iter_json_records(
    path: Path,
    *,
    skip_invalid: bool,
    report: ReadReport,
    validate: Callable[[dict[str, Any], Path, int], None] | None = None,
    max_line_bytes: int | None = None,
    max_depth: int | None = None,
) -> Iterator[JsonLine]:
    """`iter_json_lines` that also tells each record's byte offset and exact line bytes."""
    limit = max_line_bytes if max_line_bytes is not None else max_line_bytes_default()
    depth = max_depth if max_depth is not None else MAX_DEPTH
    if limit <= 0 or depth <= 0:
        raise ConfigError("max_line_bytes and max_depth must be positive")

    def parsed(number: int, offset: int, raw: bytes) -> Iterator[JsonLine]:
        for _, value in _parse_line(path, number, raw, skip_invalid, report, validate, depth):
            yield JsonLine(number, offset, raw, value)

    with path.open("rb") as handle:
        previous: tuple[int, int, bytes] | None = None
        number = 0
        offset = 0
        started = False  # a JSON record was seen: no more leading lines to skip
        while True:
            raw = handle.readline(limit + 1)
            if not raw:
                break
            number += 1
            start, offset = offset, offset + len(raw)
            if previous is not None:
                if not started and _leading_junk(previous[2]):
                    report.warnings.append(
                        f"{path}:{previous[0]}: not JSON, before the first record: skipped"
                    )
                    previous = None
                else:
                    started = True
                    yield from parsed(*previous)
                    previous = None
            if len(raw) > limit and not raw.endswith(b"\n"):
                ended = _skip_rest_of_line(handle)
                offset = handle.tell()
                if not ended:
                    report.warnings.append(
                        f"{path}:{number}: torn last line (over {limit:,} bytes with no "
                        "newline): left out"
                    )
                    return
                if not skip_invalid:
                    raise TranscriptError(
                        f"line longer than {limit:,} bytes",
                        path=path,
                        line=number,
                        hint="raise the limit with max_line_bytes= or UNBOUNDED_MAX_LINE_BYTES, "
                        "or use --skip-invalid",
                    )
                report.skipped_lines += 1
                continue
            previous = (number, start, raw)
        if previous is None:
            return
        last_number, last_offset, last_raw = previous
        if not last_raw.endswith(b"\n"):
            try:
                orjson.loads(last_raw)
            except orjson.JSONDecodeError:
                report.warnings.append(
                    f"{path}:{last_number}: torn last line ({len(last_raw)} bytes with no "
                    "newline, not valid JSON): left out"
                )
                return
        yield from parsed(last_number, last_offset, last_raw)


def _leading_junk(raw: bytes) -> bool:
    """A line that is plainly not a JSON record (does not start with `{`), or is blank."""
    text = raw.strip()
    if text.startswith(BOM):
        text = text[len(BOM) :].strip()
    return not text.startswith(b"{")


def parse_lenient(raw: bytes) -> tuple[Any, str] | None:
    """Parse a line orjson refused for its encoding: BOM removed, invalid UTF-8 bytes and lone
    surrogates repaired to U+FFFD. Returns (value, what was repaired) or None."""
    notes: list[str] = []
    if raw.startswith(BOM):
        raw = raw[len(BOM) :]
        notes.append("UTF-8 byte order mark removed")
    text = raw.decode("utf-8", errors="replace")
    bad_bytes = text.count("\ufffd") - raw.count("\ufffd".encode())
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    value, surrogates = repair_value(value)
    if bad_bytes > 0:
        notes.append(f"{bad_bytes} byte(s) that are not UTF-8 replaced by U+FFFD")
    if surrogates:
        notes.append(f"lone surrogates in {surrogates} string(s) replaced by U+FFFD")
    return value, "; ".join(notes)


def _too_deep(raw: bytes, value: Any, max_depth: int) -> bool:
    # Counting brackets is cheap and bounds the depth from above; walk only when it might be.
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False
    return nesting_depth(value) > max_depth


def _parse_line(
    path: Path,
    number: int,
    raw: bytes,
    skip_invalid: bool,
    report: ReadReport,
    validate: Callable[[dict[str, Any], Path, int], None] | None,
    max_depth: int = MAX_DEPTH,
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
            text = str(exc).lower()
            lenient = (
                parse_lenient(raw)
                if "depth" not in text and "recursion" not in text
                else None
            )
            if lenient is not None and lenient[1]:
                value, note = lenient
                report.warnings.append(f"{path}:{number}: {note}")
            else:
                if "depth" in text or "recursion" in text:
                    reason = f"nested deeper than {max_depth} levels"
                elif "utf-8" in text or "surrogate" in text:
                    reason = "not valid UTF-8"
                else:
                    reason = f"malformed JSON ({exc})"
                raise TranscriptError(
                    reason,
                    path=path,
                    line=number,
                    hint="fix or remove the line, or use --skip-invalid",
                ) from None
        if _too_deep(raw, value, max_depth):
            raise TranscriptError(
                f"nested deeper than {max_depth} levels",
                path=path,
                line=number,
                hint="fix or remove the line, or use --skip-invalid",
            )
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
    """One record as a compact JSON line (UTF-8, like JSON.stringify), newline included.

    A record holding lone surrogates (which UTF-8 cannot encode) is repaired in place first:
    they become U+FFFD, so what is written is what the record now says.
    """
    try:
        return orjson.dumps(record) + b"\n"
    except TypeError:
        repaired, changed = repair_value(record)
        if not changed:
            raise
        record.clear()
        record.update(repaired)
        return orjson.dumps(record) + b"\n"
