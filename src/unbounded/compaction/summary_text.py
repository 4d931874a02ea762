"""Checking a summary reply and turning it into the text the next context starts with.

A reply is refused when it is empty, is an API-error text, was cut off at the output limit,
or holds no summary (a tool call instead of text counts as no summary: the call is never
run).

The summary is taken from the reply's own structure, never from text quoted inside it. A
conversation can hold `<summary>` tags of its own (Claude Code's background-task
notifications carry one), and a model's reply may quote them, in its analysis or in the
summary itself. So the parser does not stop at the first `</summary>`:

1. The summary ends at the reply's last `</summary>` (or at the end of the reply, when it
   has no closing tag).
2. It starts at a `<summary>` after the analysis block (the analysis ends at the last
   `</analysis>` before that end); of those, the first one followed by the first section
   heading ("1." / "Primary Request") is taken, else the first one.
3. A reply with no `<summary>` at all is a plain-text summary: the reply minus its analysis
   block. Whether it is a usable summary is for the sanity guard (`summary_guard`) to say,
   from its size and its sections, not from its tags.

The `<analysis>` scratchpad is dropped and the summary kept under a "Summary:" header (the
newer behaviour of the specification; an older formatter kept the analysis).
"""

from __future__ import annotations

import re

# Defined in unbounded.errors, importable from here, where it used to live.
from unbounded.errors import CompactionError
from unbounded.model.response import ModelResponse

API_ERROR_PREFIXES = ("API Error", "API error:")
SUMMARY_HEADER = "Summary:"
_OPEN_SUMMARY = re.compile(r"<summary>", re.I)
_CLOSE_SUMMARY = re.compile(r"</summary>", re.I)
_OPEN_ANALYSIS = re.compile(r"^\s*<analysis>", re.I)
_CLOSE_ANALYSIS = re.compile(r"</analysis>", re.I)
_FIRST_SECTION = re.compile(r"\s*(?:[#*\s]*)(?:1[.)]|Primary Request)", re.I)


def check_summary_reply(response: ModelResponse) -> str:
    """The reply's text if it can hold a summary, else CompactionError with the reason."""
    text = response.text.strip()
    if not text:
        if response.tool_uses:
            raise CompactionError(
                "the model answered the summary request with a tool call (refused, not run)",
                reason="tool_use",
            )
        raise CompactionError("the summary reply was empty", reason="no_summary")
    if text.startswith(API_ERROR_PREFIXES):
        raise CompactionError(
            f"the summary call returned an error: {text[:200]}", reason="api_error"
        )
    if response.stop_reason == "max_tokens":
        raise CompactionError("the summary was cut off at the output limit", reason="truncated")
    if not extract_summary(text).strip():
        raise CompactionError("the reply holds no summary text", reason="no_summary")
    return text


def _analysis_end(text: str, limit: int) -> int:
    """Where a leading `<analysis>` block ends (0 when the reply does not start with one)."""
    if not _OPEN_ANALYSIS.match(text):
        return 0
    ends = [m.end() for m in _CLOSE_ANALYSIS.finditer(text[:limit])]
    return ends[-1] if ends else 0


def extract_summary(reply: str) -> str:
    """The summary body of a reply (see the module docstring), without tags or analysis."""
    closes = [m.start() for m in _CLOSE_SUMMARY.finditer(reply)]
    end = closes[-1] if closes else len(reply)
    start_floor = _analysis_end(reply, end)
    openings = [m.end() for m in _OPEN_SUMMARY.finditer(reply, start_floor, end)]
    if not openings:
        if closes:  # a stray closing tag and no opening: take what precedes it
            return reply[start_floor:end].strip()
        if _OPEN_ANALYSIS.match(reply) and not _CLOSE_ANALYSIS.search(reply):
            return ""  # only an unfinished analysis: no summary
        return reply[start_floor:].strip()
    start = next(
        (position for position in openings if _FIRST_SECTION.match(reply, position)),
        openings[0],
    )
    return reply[start:end].strip()


def format_compact_summary(raw: str) -> str:
    """Drop the analysis, keep the summary under a "Summary:" header, tidy blank lines."""
    body = extract_summary(raw)
    if body.startswith(SUMMARY_HEADER):
        body = body[len(SUMMARY_HEADER) :].lstrip()
    return re.sub(r"\n{3,}", "\n\n", f"{SUMMARY_HEADER}\n{body}").strip()
