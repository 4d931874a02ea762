"""Open any supported transcript: the format is detected from the content, not the file name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import orjson

from unbounded.errors import TranscriptError
from unbounded.model.transcript import Transcript
from unbounded.transcripts import (
    claude_code,
    codex,
    codex_items,
    mini_swe_agent,
    openhands,
    openhands_sdk,
    swe_agent,
)
from unbounded.transcripts.jsonl import BOM, SNIFF_BYTES, check_not_binary, parse_lenient

TranscriptFormat = Literal[
    "claude-code", "swe-agent", "openhands", "codex", "mini-swe-agent", "openhands-sdk"
]
FORMATS: tuple[TranscriptFormat, ...] = (
    "claude-code",
    "swe-agent",
    "openhands",
    "codex",
    "mini-swe-agent",
    "openhands-sdk",
)


def detect_format(path: str | Path) -> TranscriptFormat:
    """Tell which agent wrote a transcript from its content.

    The first records that any format recognises decide: records of a type no reader knows
    (a newer agent's metadata line, say) are passed over, so a file is refused only when none
    of its first records (the first 64 KB) has the shape of a conversation.
    """
    source = Path(path)
    if not source.exists():
        raise TranscriptError("no such file", path=source, hint="check the path")
    if source.is_dir():
        if openhands_sdk.conversation_folder(source) is not None:
            return "openhands-sdk"
        raise TranscriptError(
            "is a folder, not a transcript file",
            path=source,
            hint="pass a session file, or an OpenHands conversation folder (events/event-*.json)",
        )
    with source.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head.strip():
        raise TranscriptError("empty file: no records to read", path=source, line=1)
    check_not_binary(source, head)
    stripped = head.lstrip()
    if stripped.startswith(BOM):
        stripped = stripped[len(BOM) :].lstrip()
    parsed_any = False
    for record in _head_records(stripped):
        parsed_any = True
        detected = _format_of(record)
        if detected is not None:
            return detected
    if not parsed_any and stripped[:1] in (b"{", b"["):
        # A pretty-printed JSON document: a SWE-agent .traj, a mini-swe-agent .traj.json, an
        # OpenHands event list or evaluation, or an OpenHands SDK event (list).
        if mini_swe_agent.sniff_mini_swe_agent(stripped):
            return "mini-swe-agent"
        if swe_agent.sniff_swe_agent(stripped):
            return "swe-agent"
        if openhands_sdk.sniff_sdk_events(stripped):
            return "openhands-sdk"
        if openhands.sniff_openhands(stripped):
            return "openhands"
    raise TranscriptError(
        "unknown transcript format: no conversation record in the file's first 64 KB",
        path=source,
        line=1,
        hint="expected a Claude Code session (.jsonl), a Codex CLI rollout (rollout-*.jsonl), "
        "a SWE-agent (.traj) or mini-swe-agent (.traj.json) trajectory, an OpenHands "
        "output.jsonl, or an OpenHands SDK conversation (folder or event list)",
    )


def _head_records(head: bytes) -> Iterator[object]:
    """The JSON values of the complete lines in a file's first bytes (the only line when
    there is no newline); lines that are not JSON (a banner) are passed over."""
    lines = head.split(b"\n")
    complete = lines[:-1] or lines
    for line in complete:
        candidate = line.strip()
        if not candidate.startswith((b"{", b"[")):
            continue
        try:
            yield orjson.loads(candidate)
        except orjson.JSONDecodeError:
            lenient = parse_lenient(candidate)
            if lenient is not None:
                yield lenient[0]


def _format_of(record: object) -> TranscriptFormat | None:
    """The format one record belongs to, or None when no reader recognises it."""
    if isinstance(record, dict):
        if claude_code.looks_like_claude_code(record):
            return "claude-code"
        if codex_items.looks_like_codex(record):
            return "codex"
        if openhands.looks_like_openhands(record):
            return "openhands"
        if mini_swe_agent.looks_like_mini_swe_agent(record):
            return "mini-swe-agent"
        if swe_agent.looks_like_swe_agent(record):
            return "swe-agent"
        if openhands_sdk.looks_like_sdk_event(record):
            return "openhands-sdk"
    if isinstance(record, list):
        if openhands_sdk.looks_like_sdk_events(record):
            return "openhands-sdk"
        if openhands.looks_like_openhands_events(record):
            return "openhands"
    return None


def load_transcript(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    format: TranscriptFormat | None = None,
    file_order: bool = False,
) -> Transcript:
    """Read a transcript of any supported format into entries.

    The main thread is rebuilt from parent links (see `unbounded.model.thread`); what that
    leaves out is reported in the warnings. `file_order=True` takes every record in file
    order instead (for debugging).
    """
    source = Path(path)
    detected = format or detect_format(source)
    if detected == "claude-code":
        transcript = claude_code.read_claude_code(source, skip_invalid=skip_invalid)
    elif detected == "swe-agent":
        transcript = swe_agent.read_swe_agent(source)
    elif detected == "openhands":
        transcript = openhands.read_openhands(source, skip_invalid=skip_invalid)
    elif detected == "codex":
        transcript = codex.read_codex(source, skip_invalid=skip_invalid)
    elif detected == "mini-swe-agent":
        transcript = mini_swe_agent.read_mini_swe_agent(source)
    elif detected == "openhands-sdk":
        transcript = openhands_sdk.read_openhands_sdk(source, skip_invalid=skip_invalid)
    else:
        raise TranscriptError(f"unsupported format {detected!r}", path=source)
    if file_order:
        transcript.thread_order = "file"
    transcript.warnings.extend(transcript.thread_report().warnings())
    return transcript
