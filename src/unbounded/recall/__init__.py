"""Recall and receipts: nothing a compaction takes out of the context is lost for good.

- `schema`: the `recall` tool (name, description, Anthropic and OpenAI schemas, arguments);
- `index`: the tool calls of a transcript, kept up to date as it grows;
- `receipts`: what each compaction and microcompaction took out, written into the transcript;
- `lookup`: answering one recall call from the session's own transcript, within a budget.

A `Session` offers the tool and answers it (`Session.run_recall`); see docs/recall.md.
"""

from __future__ import annotations

from unbounded.recall.index import ToolCall, TranscriptIndex
from unbounded.recall.lookup import RecallAnswer, RecallContext, answer_recall
from unbounded.recall.receipts import (
    MICROCOMPACT_RECEIPT_SUBTYPE,
    Receipt,
    compaction_receipt,
    microcompact_receipt,
    receipts_in,
)
from unbounded.recall.schema import (
    RECALL_TOOL_NAME,
    RecallRequest,
    recall_tool_schema,
)

__all__ = [
    "MICROCOMPACT_RECEIPT_SUBTYPE",
    "RECALL_TOOL_NAME",
    "RecallAnswer",
    "RecallContext",
    "RecallRequest",
    "Receipt",
    "ToolCall",
    "TranscriptIndex",
    "answer_recall",
    "compaction_receipt",
    "microcompact_receipt",
    "recall_tool_schema",
    "receipts_in",
]
