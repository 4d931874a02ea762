"""A session's recall plumbing: answering `recall` calls, and the receipts of what
compactions and microcompactions take out (docs/recall.md).

`SessionRecall` holds the session's `TranscriptIndex` (its tool calls, brought up to date on
use) and turns what the session gives it (its transcript, microcompaction state, policy)
into a recall answer, a microcompaction's receipt record, or the receipt a compaction's
boundary carries. It appends and emits nothing itself: the session does, so its transcript
has one writer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from unbounded.compaction.conversation import CompactionResult
from unbounded.compaction.micro import MicrocompactResult, MicrocompactState
from unbounded.events import RecallServed, ReceiptWritten
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.lookup import RecallContext
from unbounded.recall.offer import answer_tokens, offers_recall, recall_tool_result
from unbounded.recall.receipts import (
    RunningReceipt,
    microcompact_receipt,
    microcompact_receipt_entry,
    recall_note,
    receipts_in,
    write_compaction_receipt,
)
from unbounded.recall.schema import RECALL_TOOL_NAME
from unbounded.redaction import Redactor


class SessionRecall:
    """Recall answers and receipts over one session's transcript."""

    def __init__(self) -> None:
        self.index = TranscriptIndex()
        """The transcript's tool calls, for recall and receipts (brought up to date on use)."""
        self.running_receipt = RunningReceipt()
        """A compaction receipt's sums over the view, kept up to date call by call (`advance`)."""

    def advance(
        self, entries: Sequence[Entry], view: Sequence[Entry], micro: MicrocompactState
    ) -> None:
        """Bring the receipt's sums up to date with what the view gained since the last call
        (and the results microcompaction cleared), so the compacting call reads them instead
        of walking every record it drops."""
        self.running_receipt.advance(view, self.index.update(entries), micro.cleared)

    def answer(
        self,
        tool_use: Mapping[str, Any],
        *,
        entries: Sequence[Entry],
        view: list[Entry],
        micro: MicrocompactState,
        policy: Policy,
        load_output: Callable[[str], str | None],
    ) -> tuple[dict[str, Any], RecallServed]:
        """The tool_result answering a `recall` call, and the event that reports it."""
        context = RecallContext(
            entries=entries,
            view=view,
            cleared_ids=micro.cleared_ids,
            index=self.index.update(entries),
            budget_tokens=policy.recall_max_tokens,
            load_output=load_output,
            receipts=receipts_in(entries),
        )
        result, answer = recall_tool_result(tool_use, context)
        served = RecallServed(
            tool_use_id=str(result["tool_use_id"]),
            lookup=answer.lookup if answer is not None else "invalid",
            found=answer is not None and answer.found,
            tokens=answer_tokens(result),
        )
        return result, served

    @staticmethod
    def prepare_handles(
        micro: MicrocompactState, tools: Sequence[Mapping[str, Any]], policy: Policy
    ) -> None:
        """Placeholders name recall handles while the tool is offered, and recall's own
        results may be cleared again like any reproducible output."""
        # Whatever is cleared turns recall on (offers_recall), so placeholders name handles
        # from the first clear on and read the same bytes every turn after it.
        offered = offers_recall(tools, policy)
        micro.name_handles = offered
        if offered:
            micro.register_compactable(RECALL_TOOL_NAME)

    def microcompact_receipt(
        self,
        result: MicrocompactResult,
        *,
        entries: Sequence[Entry],
        micro: MicrocompactState,
        redactor: Redactor | None,
        timestamp: str,
    ) -> tuple[Entry, ReceiptWritten] | None:
        """The system record holding the receipt of a microcompaction that took results
        out, and the event that reports it (None when it took nothing out)."""
        ids = tuple(result.cleared_ids) + tuple(result.deleted_ids)
        if not ids:
            return None
        ledger = micro.ledger
        tokens = {}
        for tool_id in ids:
            record = ledger.get(tool_id)
            tokens[tool_id] = record.tokens if record is not None else 0
        receipt = microcompact_receipt(
            result.tier,
            ids,
            index=self.index.update(entries),
            tokens=tokens,
            tokens_saved=result.tokens_saved,
            breaks_cache=result.breaks_cache,
        )
        if redactor is not None:
            receipt = redactor.redact_data(receipt)
        entry = microcompact_receipt_entry(receipt, timestamp=timestamp)
        event = ReceiptWritten(
            source="microcompaction",
            trigger=result.tier,
            tool_results=len(ids),
            tokens=result.tokens_saved,
            files=tuple(receipt["files"]),
            record_uuid=entry.uuid,
        )
        return entry, event

    def compaction_receipt(
        self,
        result: CompactionResult,
        *,
        entries: Sequence[Entry],
        view: list[Entry],
        micro: MicrocompactState,
        tools: Sequence[Mapping[str, Any]],
        policy: Policy,
    ) -> dict[str, Any]:
        """Write the receipt into the compaction's boundary, and the recall note into its
        summary while recall can be offered; returns the receipt."""
        receipt = write_compaction_receipt(
            result.boundary,
            view,
            result.messages_to_keep,
            index=self.index.update(entries),
            summary_text=result.summary_text,
            summarizer=result.summarizer,
            # The mapping `advance` followed: its items are flagged already (no copy, no walk).
            already_cleared=micro.cleared,
            running=self.running_receipt,
        )
        # This compaction takes history out: recall is offered from now on (offers_recall).
        if offers_recall(tools, policy) and result.summary_messages:
            summary = result.summary_messages[0]
            message = summary.message
            if message is not None and isinstance(message.get("content"), str):
                message["content"] = f"{message['content']}\n\n{recall_note(receipt)}"
        return receipt


def compaction_receipt_event(
    result: CompactionResult, receipt: Mapping[str, Any]
) -> ReceiptWritten:
    """The event reporting the receipt a compaction's boundary carries."""
    return ReceiptWritten(
        source="compaction",
        trigger=str(result.boundary.compact_metadata.get("trigger") or "?"),
        tool_results=len(receipt["toolResults"]),
        tokens=int(receipt["tokens"]),
        files=tuple(receipt["files"]),
        record_uuid=result.boundary.uuid,
    )


__all__ = ["SessionRecall", "compaction_receipt_event"]
