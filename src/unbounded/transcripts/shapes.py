"""The shapes of the JSON Lines formats' records, kept apart from their readers so that each
reader can tell when it was given another agent's file (the readers would import each other).

A reader that finds none of its own records in a file asks `refuse_other_format`: when the
file's first lines have another JSON Lines format's shape, reading it as an empty session
would be silently wrong, so it is an error naming the file and the format it looks like.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from unbounded.errors import TranscriptError
from unbounded.transcripts.codex_items import looks_like_codex
from unbounded.transcripts.jsonl import SNIFF_BYTES

RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "attachment",
        "progress",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
    }
)
"""Record types seen in Claude Code files; a line with one of these marks the format."""


def looks_like_claude_code(record: dict[str, Any]) -> bool:
    """Whether a first JSON record has the shape of a Claude Code line."""
    kind = record.get("type")
    if not isinstance(kind, str) or kind not in RECORD_TYPES:
        return False
    return any(key in record for key in ("uuid", "sessionId", "leafUuid", "messageId", "operation"))


def looks_like_openhands(record: dict[str, Any]) -> bool:
    """An output.jsonl line: an evaluation with `instance_id` and `history`."""
    return "instance_id" in record and "history" in record


_LINE_FORMATS: tuple[tuple[str, str, Callable[[dict[str, Any]], bool]], ...] = (
    ("claude-code", "a Claude Code session", looks_like_claude_code),
    ("codex", "a Codex CLI rollout", looks_like_codex),
    ("openhands", "an OpenHands output.jsonl", looks_like_openhands),
)


def refuse_other_format(path: Path, own: str) -> None:
    """Raise a TranscriptError when the file's first lines (64 KB) have the shape of another
    JSON Lines format than `own`; return when they do not."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    lines = head.split(b"\n")
    for raw in lines[:-1] or lines:  # complete lines only (the only one without a newline)
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        for name, described, looks_like in _LINE_FORMATS:
            if name != own and looks_like(record):
                mine = next(text for key, text, _ in _LINE_FORMATS if key == own)
                raise TranscriptError(
                    f"this is not {mine}: it looks like {described} (format '{name}')",
                    path=path,
                    hint="read it with load_transcript, which detects the format, as every "
                    "unbounded command does",
                )
