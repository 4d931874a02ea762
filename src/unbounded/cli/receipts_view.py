"""The receipts table of `unbounded inspect`: what each compaction took out of the context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from unbounded.cli.app import console
from unbounded.cli.text import markup_safe, plural

if TYPE_CHECKING:
    from unbounded.recall.receipts import Receipt

MAX_ROWS = 40
"""Receipts shown (the most recent); `--json` lists them all."""
HANDLES_SHOWN = 3


def _dropped(receipt: Receipt) -> str:
    parts = []
    if receipt.messages:
        parts.append(plural(receipt.messages, "message"))
    if receipt.tool_results:
        tools: dict[str, int] = {}
        for item in receipt.tool_results:
            tools[str(item.get("tool"))] = tools.get(str(item.get("tool")), 0) + 1
        by_tool = ", ".join(f"{name} {count}" for name, count in tools.items())
        parts.append(f"{plural(len(receipt.tool_results), 'tool result')} ({by_tool})")
    if receipt.files:
        shown = ", ".join(receipt.files[:HANDLES_SHOWN])
        extra = len(receipt.files) - HANDLES_SHOWN
        more = f" +{extra}" if extra > 0 else ""
        parts.append(f"files {shown}{more}")
    return "; ".join(parts) or "-"


def _covered(receipt: Receipt) -> str:
    if receipt.kind != "compaction":
        ids = [str(item["id"]) for item in receipt.tool_results[-HANDLES_SHOWN:]]
        return "recall " + ", ".join(ids) if ids else "-"
    covered = receipt.covered
    named = len(covered.get("filesMentioned") or [])
    missing = len(covered.get("filesNotMentioned") or [])
    summary = f"{covered.get('by', '?')} summary, {int(covered.get('summaryTokens') or 0):,} tok"
    return f"{summary}; names {named}/{named + missing} files" if named + missing else summary


def render_receipts(receipts: Sequence[Receipt]) -> None:
    """Print the receipts table (nothing when the transcript has none)."""
    from rich.table import Table

    if not receipts:
        return
    table = Table(
        title=f"Receipts ({len(receipts)}: what compactions took out)", title_justify="left"
    )
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("kind")
    table.add_column("tokens", justify="right")
    table.add_column("dropped")
    table.add_column("still covered by")
    for receipt in receipts[-MAX_ROWS:]:
        # the kind on two lines at 80 columns: `compaction` / `(manual)`, never cut
        kind = (
            f"compaction\n({receipt.trigger})"
            if receipt.kind == "compaction"
            else f"microcompact\n({receipt.trigger})"
        )
        when = (receipt.time or "")[:16].replace("T", " ")
        # A receipt's tool names, files, ids, trigger and time are read from the session.
        table.add_row(
            markup_safe(when),
            markup_safe(kind),
            f"{receipt.tokens:,}",
            markup_safe(_dropped(receipt)),
            markup_safe(_covered(receipt)),
        )
    console.print(table)
