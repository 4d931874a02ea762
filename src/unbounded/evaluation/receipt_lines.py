"""What a replay report keeps of each receipt: one line's figures, not the receipt.

A compaction's receipt lists every tool result it took out; a replay of thousands of calls
would hold one dict per tool call of the whole run if it kept the receipts. The report's
receipts table needs only counts, the first files and the last handles, so that is what a
`ReceiptLine` holds: its size follows the handles shown, not the results taken out.
"""

from __future__ import annotations

from dataclasses import dataclass

from unbounded.recall.receipts import Receipt, ReceiptKind

HANDLES_SHOWN = 4
"""Files and recall handles a line names (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class ReceiptLine:
    """One receipt of a replay, as its report shows it."""

    call: int
    """The replayed call whose prepare wrote it."""
    kind: ReceiptKind
    trigger: str
    time: str | None
    tokens: int
    messages: int
    tools: tuple[tuple[str, int], ...]
    """Tool results taken out, per tool name, in the order the receipt first names each."""
    files: tuple[str, ...]
    """The first `HANDLES_SHOWN` files it names."""
    file_count: int
    last_ids: tuple[str, ...]
    """The ids of its last `HANDLES_SHOWN` tool results (what `recall` takes)."""
    covered_by: str
    summary_tokens: int
    files_named: int
    """Dropped files the compaction's summary names."""
    files_not_named: int

    @property
    def tool_results(self) -> int:
        """Tool results it took out."""
        return sum(count for _, count in self.tools)

    @classmethod
    def of(cls, call: int, receipt: Receipt) -> ReceiptLine:
        """The line of a receipt written at a replayed call."""
        tools: dict[str, int] = {}
        for item in receipt.tool_results:
            name = str(item.get("tool"))
            tools[name] = tools.get(name, 0) + 1
        covered = receipt.covered
        shown_ids = receipt.tool_results[-HANDLES_SHOWN:]
        return cls(
            call=call,
            kind=receipt.kind,
            trigger=receipt.trigger,
            time=receipt.time,
            tokens=receipt.tokens,
            messages=receipt.messages,
            tools=tuple(tools.items()),
            files=receipt.files[:HANDLES_SHOWN],
            file_count=len(receipt.files),
            last_ids=tuple(str(item["id"]) for item in shown_ids),
            covered_by=str(covered.get("by", "?")),
            summary_tokens=int(covered.get("summaryTokens") or 0),
            files_named=len(covered.get("filesMentioned") or []),
            files_not_named=len(covered.get("filesNotMentioned") or []),
        )


__all__ = ["HANDLES_SHOWN", "ReceiptLine"]
