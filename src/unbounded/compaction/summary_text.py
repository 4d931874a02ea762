"""Checking a summary reply and turning it into the text the next context starts with.

A reply is refused when it is empty, is an API-error text, was cut off at the output limit,
or holds no summary (a tool call instead of text counts as no summary: the call is never
run). Formatting keeps the `<summary>` body under a "Summary:" header and drops the
`<analysis>` scratchpad: seed 004 says the analysis is stripped before delivery (seed 002's
older formatter kept it as "Analysis:"; the newer behaviour is followed, as the issue asks).
"""

from __future__ import annotations

import re

from unbounded.errors import UnboundedError
from unbounded.providers.base import ModelResponse

_ANALYSIS = re.compile(r"<analysis>.*?(?:</analysis>|$)", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|$)", re.S)
API_ERROR_PREFIXES = ("API Error", "API error:")


class CompactionError(UnboundedError):
    """A compaction could not produce a usable summary; the history is left untouched."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_summary_reply(response: ModelResponse) -> str:
    """The reply's text if it is a usable summary, else CompactionError with the reason."""
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
    if "<summary>" not in text and not _looks_like_sections(text):
        raise CompactionError("the reply holds no <summary> block", reason="no_summary")
    return text


def _looks_like_sections(text: str) -> bool:
    return "Primary Request" in text and "Pending Tasks" in text


def format_compact_summary(raw: str) -> str:
    """Drop the analysis, keep the summary under a "Summary:" header, tidy blank lines."""
    match = _SUMMARY.search(raw)
    body = "Summary:\n" + match.group(1).strip() if match else _ANALYSIS.sub("", raw).strip()
    return re.sub(r"\n{3,}", "\n\n", body).strip()
