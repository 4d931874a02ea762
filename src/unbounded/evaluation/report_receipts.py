"""The receipts section of the HTML replay report: at which call each compaction and
microcompaction took what out of the context, and what still covers it."""

from __future__ import annotations

import html

from unbounded.evaluation.receipt_lines import HANDLES_SHOWN, ReceiptLine
from unbounded.evaluation.replay import ReplayReport


def _dropped(line: ReceiptLine) -> str:
    parts = []
    if line.messages:
        parts.append(f"{line.messages:,} messages")
    if line.tools:
        by_tool = ", ".join(f"{name} {count}" for name, count in line.tools)
        parts.append(f"{line.tool_results} tool results ({by_tool})")
    if line.file_count:
        shown = ", ".join(line.files)
        extra = line.file_count - HANDLES_SHOWN
        parts.append(f"files: {shown}" + (f" and {extra} more" if extra > 0 else ""))
    return "; ".join(parts) or "—"


def _covered(line: ReceiptLine) -> str:
    if line.kind != "compaction":
        return "recall " + ", ".join(line.last_ids) if line.last_ids else "—"
    text = f"{line.covered_by} summary of {line.summary_tokens:,} tokens"
    if line.files_named or line.files_not_named:
        text += (
            f"; names {line.files_named} of {line.files_named + line.files_not_named} dropped files"
        )
    return text


def receipts_section(report: ReplayReport) -> str:
    """The section's HTML: a table of receipts in call order (a note when there are none)."""
    if not report.receipts:
        return "<p class='meta'>No receipts: nothing was cleared or compacted.</p>"
    rows = [
        "<tr><th>call</th><th>time (UTC)</th><th>receipt</th><th>tokens</th>"
        "<th>taken out</th><th>still covered by</th></tr>"
    ]
    for line in report.receipts:
        kind = f"{line.kind} ({line.trigger})"
        when = (line.time or "").replace("T", " ")
        rows.append(
            f"<tr><td>{line.call}</td><td class='text when'>{html.escape(when)}</td>"
            f"<td class='text kind'>{html.escape(kind)}</td><td>{line.tokens:,}</td>"
            f"<td class='text'>{html.escape(_dropped(line))}</td>"
            f"<td class='text'>{html.escape(_covered(line))}</td></tr>"
        )
    return "<table class='timeline receipts'>" + "".join(rows) + "</table>"
