"""The receipts section of the HTML replay report: at which call each compaction and
microcompaction took what out of the context, and what still covers it."""

from __future__ import annotations

import html

from unbounded.evaluation.replay import ReplayReport
from unbounded.recall.receipts import Receipt

HANDLES_SHOWN = 4


def _dropped(receipt: Receipt) -> str:
    tools: dict[str, int] = {}
    for item in receipt.tool_results:
        name = str(item.get("tool"))
        tools[name] = tools.get(name, 0) + 1
    parts = []
    if receipt.messages:
        parts.append(f"{receipt.messages:,} messages")
    if tools:
        by_tool = ", ".join(f"{name} {count}" for name, count in tools.items())
        parts.append(f"{len(receipt.tool_results)} tool results ({by_tool})")
    if receipt.files:
        shown = ", ".join(receipt.files[:HANDLES_SHOWN])
        extra = len(receipt.files) - HANDLES_SHOWN
        parts.append(f"files: {shown}" + (f" and {extra} more" if extra > 0 else ""))
    return "; ".join(parts) or "—"


def _covered(receipt: Receipt) -> str:
    if receipt.kind != "compaction":
        ids = [str(item["id"]) for item in receipt.tool_results[-HANDLES_SHOWN:]]
        return "recall " + ", ".join(ids) if ids else "—"
    covered = receipt.covered
    named = covered.get("filesMentioned") or []
    missing = covered.get("filesNotMentioned") or []
    text = f"{covered.get('by', '?')} summary of {int(covered.get('summaryTokens') or 0):,} tokens"
    if named or missing:
        text += f"; names {len(named)} of {len(named) + len(missing)} dropped files"
    return text


def receipts_section(report: ReplayReport) -> str:
    """The section's HTML: a table of receipts in call order (a note when there are none)."""
    if not report.receipts:
        return "<p class='meta'>No receipts: nothing was cleared or compacted.</p>"
    rows = [
        "<tr><th>call</th><th>time (UTC)</th><th>receipt</th><th>tokens</th>"
        "<th>taken out</th><th>still covered by</th></tr>"
    ]
    for call, receipt in report.receipts:
        kind = f"{receipt.kind} ({receipt.trigger})"
        when = (receipt.time or "").replace("T", " ")
        rows.append(
            f"<tr><td>{call}</td><td class='text when'>{html.escape(when)}</td>"
            f"<td class='text kind'>{html.escape(kind)}</td><td>{receipt.tokens:,}</td>"
            f"<td class='text'>{html.escape(_dropped(receipt))}</td>"
            f"<td class='text'>{html.escape(_covered(receipt))}</td></tr>"
        )
    return "<table class='timeline receipts'>" + "".join(rows) + "</table>"
