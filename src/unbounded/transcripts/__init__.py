"""Reading and writing agent transcripts: Claude Code JSONL, Codex CLI rollouts, SWE-agent .traj,
OpenHands output."""

from unbounded.transcripts.claude_code import (
    append_claude_code,
    read_claude_code,
    write_claude_code,
)
from unbounded.transcripts.loader import FORMATS, detect_format, load_transcript

__all__ = [
    "FORMATS",
    "append_claude_code",
    "detect_format",
    "load_transcript",
    "read_claude_code",
    "write_claude_code",
]
