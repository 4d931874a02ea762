"""Receipts: what each compaction and microcompaction took out of the context.

A compaction's receipt is written into its boundary record, as `compactMetadata.receipt`; a
microcompaction's is a `system` record of subtype `microcompact_receipt` appended to the
transcript (a subtype of unbounded's own: readers that do not know it skip it, and it never
reaches the API). Both hold:

- `toolResults`: each result taken out, `{"id", "tool", "tokens"}` plus the `path` it read or
  wrote or the `command` it ran (the handles `recall` takes);
- `files`: the files those calls read or wrote;
- `tokens`: the estimated tokens taken out;

and a compaction's also `messages` (records summarized) and `covered`: who wrote the summary,
its size, and which of the dropped files it still names (`filesMentioned`) or not
(`filesNotMentioned`). `receipts_in(entries)` reads them back as `Receipt`s, for `inspect`,
the HTML report and `recall`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from unbounded.errors import TranscriptError
from unbounded.model.entries import Entry, new_uuid

# The record keys are defined with the readers' checks, importable from here too.
from unbounded.model.record_checks import MICROCOMPACT_RECEIPT_FIELD as MICROCOMPACT_RECEIPT_FIELD
from unbounded.model.record_checks import (
    MICROCOMPACT_RECEIPT_SUBTYPE as MICROCOMPACT_RECEIPT_SUBTYPE,
)
from unbounded.model.record_checks import RECEIPT_KEY as RECEIPT_KEY
from unbounded.model.record_checks import receipt_problem
from unbounded.recall.index import ToolCall, TranscriptIndex, clip
from unbounded.tokens.estimate import (
    block_tokens,
    entry_tokens,
    rough_token_count,
    tool_result_tokens,
)

RECEIPT_VERSION = 1
NOTE_HANDLES = 8
"""Handles a summary's recall note names (the most recent results it replaced)."""

ReceiptKind = Literal["compaction", "microcompaction"]


def tool_result_item(call: ToolCall | None, tool_use_id: str, tokens: int) -> dict[str, Any]:
    """One dropped result: id, tool, tokens, and the path or command that names it."""
    item: dict[str, Any] = {
        "id": tool_use_id,
        "tool": call.name if call is not None else "?",
        "tokens": tokens,
    }
    if call is not None:
        if call.command is not None:
            item["command"] = clip(call.command, 200)
        path = call.read_path or call.write_path
        if path is not None:
            item["path"] = path
    return item


def _files(items: Iterable[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(i["path"]) for i in items if i.get("path")))


def microcompact_receipt(
    tier: str,
    tool_use_ids: Sequence[str],
    *,
    index: TranscriptIndex,
    tokens: Mapping[str, int],
    tokens_saved: int,
    breaks_cache: bool,
) -> dict[str, Any]:
    """The receipt of one microcompaction that cleared (or deleted from the cache) these
    results."""
    items = [
        tool_result_item(index.get(tool_id), tool_id, int(tokens.get(tool_id, 0)))
        for tool_id in tool_use_ids
    ]
    return {
        "version": RECEIPT_VERSION,
        "tier": tier,
        "toolResults": items,
        "files": _files(items),
        "tokens": tokens_saved,
        "breaksCache": breaks_cache,
    }


def microcompact_receipt_entry(receipt: Mapping[str, Any], *, timestamp: str) -> Entry:
    """The system record that carries a microcompaction's receipt in the transcript."""
    count = len(receipt.get("toolResults") or [])
    verb = "deleted from the prompt cache" if receipt.get("tier") == "cached" else "cleared"
    return Entry(
        {
            "parentUuid": None,
            "isSidechain": False,
            "type": "system",
            "subtype": MICROCOMPACT_RECEIPT_SUBTYPE,
            "content": (
                f"{count} old tool result(s) {verb} (~{int(receipt.get('tokens') or 0):,} tokens)"
            ),
            "isMeta": True,
            "level": "info",
            "timestamp": timestamp,
            "uuid": new_uuid(),
            MICROCOMPACT_RECEIPT_FIELD: dict(receipt),
        }
    )


def compaction_receipt(
    dropped: Sequence[Entry],
    *,
    index: TranscriptIndex,
    summary_text: str,
    summarizer: str,
    already_cleared: Collection[str] = (),
) -> dict[str, Any]:
    """The receipt of a compaction that replaced `dropped` (the records of the view it
    summarized) with `summary_text`."""
    items: list[dict[str, Any]] = []
    messages = 0
    tokens = 0
    for entry in dropped:
        kind = entry.type
        if kind != "user":
            messages += kind == "assistant"
            tokens += entry_tokens(entry)
            continue
        messages += 1
        content = entry.content
        if isinstance(content, str):
            tokens += rough_token_count(content)
            continue
        # One walk of the blocks gives both the entry's tokens (`entry_tokens`: the blocks'
        # estimates, of a list only) and its results' items, each result estimated once.
        counted = isinstance(content, list)
        for block in content:
            if not isinstance(block, dict):
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    tool_id = str(block.get("tool_use_id"))
                    item = tool_result_item(index.get(tool_id), tool_id, tool_result_tokens(block))
                    if tool_id in already_cleared:
                        item["alreadyCleared"] = True
                    items.append(item)
                continue
            if block.get("type") != "tool_result":
                tokens += block_tokens(block) if counted else 0
                continue
            tool_id = str(block.get("tool_use_id"))
            result_tokens = tool_result_tokens(block)
            tokens += result_tokens if counted else 0
            item = tool_result_item(index.get(tool_id), tool_id, result_tokens)
            if tool_id in already_cleared:
                item["alreadyCleared"] = True
            items.append(item)
    files = _files(items)
    mentioned = [path for path in files if _mentions(summary_text, path)]
    return {
        "version": RECEIPT_VERSION,
        "messages": messages,
        "tokens": tokens,
        "toolResults": items,
        "files": files,
        "covered": {
            "by": summarizer,
            "summaryTokens": rough_token_count(summary_text),
            "filesMentioned": mentioned,
            "filesNotMentioned": [p for p in files if p not in mentioned],
        },
    }


def write_compaction_receipt(
    boundary: Entry,
    view: Sequence[Entry],
    kept: Sequence[Entry],
    *,
    index: TranscriptIndex,
    summary_text: str,
    summarizer: str,
    already_cleared: Collection[str] = (),
) -> dict[str, Any]:
    """Write the receipt of a compaction into its boundary (`compactMetadata.receipt`) and
    return it: what it dropped is the view before it (`view`) less the records it keeps
    verbatim (`kept`). Every compaction writes one: the session's and the CLI's alike."""
    kept_ids = {entry.uuid for entry in kept if entry.uuid}
    dropped = [e for e in view if e.uuid not in kept_ids and not e.is_compact_boundary]
    receipt = compaction_receipt(
        dropped,
        index=index,
        summary_text=summary_text,
        summarizer=summarizer,
        already_cleared=already_cleared,
    )
    boundary.compact_metadata[RECEIPT_KEY] = receipt
    return receipt


def _mentions(text: str, path: str) -> bool:
    if path in text:
        return True
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return len(name) >= 4 and name in text


def recall_note(receipt: Mapping[str, Any]) -> str:
    """The lines a summary ends with when the session offers `recall`: the handles of the most
    recent results it replaced, and how to ask for the rest."""
    items = list(receipt.get("toolResults") or [])[-NOTE_HANDLES:]
    lines = [
        "The messages this summary replaces are still in this session's record: call the "
        "`recall` tool for their exact text (`id` for a tool result, `path` for a file's "
        "latest output, `command` for a command's latest output, `query` to search)."
    ]
    if items:
        lines.append("Recent tool results it replaced:")
        for item in reversed(items):
            what = item.get("command") or item.get("path") or ""
            detail = f" {clip(str(what), 100)}" if what else ""
            lines.append(f"- recall id={item['id']}: {item['tool']}{detail}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Receipt:
    """A receipt read back from a transcript."""

    kind: ReceiptKind
    uuid: str | None
    time: str | None
    trigger: str
    """auto / manual for a compaction; the tier (count, time, cached) for a microcompaction."""
    tokens: int
    tool_results: tuple[dict[str, Any], ...]
    files: tuple[str, ...]
    messages: int = 0
    covered: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """How the results it lists left the context, in a few words."""
        when = self.time or "?"
        if self.kind == "compaction":
            return f"summarized by the {self.trigger} compaction at {when}"
        if self.trigger == "cached":
            return f"deleted from the prompt cache by microcompaction at {when}"
        return f"cleared by microcompaction ({self.trigger} tier) at {when}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`inspect --json`)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "uuid": self.uuid,
            "time": self.time,
            "trigger": self.trigger,
            "tokens": self.tokens,
            "tool_results": [dict(item) for item in self.tool_results],
            "files": list(self.files),
        }
        if self.kind == "compaction":
            data["messages"] = self.messages
            data["covered"] = dict(self.covered)
        return data

    @classmethod
    def from_entry(cls, entry: Entry) -> Receipt | None:
        """The receipt an entry carries, or None."""
        if entry.type != "system":
            return None
        if entry.is_compact_boundary:
            metadata = entry.compact_metadata
            data = _checked(entry, metadata.get(RECEIPT_KEY), f"compactMetadata.{RECEIPT_KEY}")
            if data is None:
                return None
            return cls._build("compaction", entry, str(metadata.get("trigger") or "?"), data)
        if entry.subtype == MICROCOMPACT_RECEIPT_SUBTYPE:
            data = _checked(
                entry, entry.data.get(MICROCOMPACT_RECEIPT_FIELD), MICROCOMPACT_RECEIPT_FIELD
            )
            if data is None:
                return None
            return cls._build("microcompaction", entry, str(data.get("tier") or "?"), data)
        return None

    @classmethod
    def _build(
        cls, kind: ReceiptKind, entry: Entry, trigger: str, data: Mapping[str, Any]
    ) -> Receipt:
        # `_checked` vouched for the types: counts are whole numbers, lists hold what they say.
        return cls(
            kind=kind,
            uuid=entry.uuid,
            time=entry.timestamp,
            trigger=trigger,
            tokens=data.get("tokens") or 0,
            tool_results=tuple(dict(item) for item in data.get("toolResults") or ()),
            files=tuple(data.get("files") or ()),
            messages=data.get("messages") or 0,
            covered=dict(data.get("covered") or {}),
        )


def _checked(entry: Entry, data: object, where: str) -> Mapping[str, Any] | None:
    """The receipt an entry holds (None when it holds none); a TranscriptError naming the
    record's line and the field when its fields have the wrong types (a reader refuses such a
    record already; this covers records a host built in memory)."""
    problem = receipt_problem(data, where)
    if problem is not None:
        raise TranscriptError(
            problem,
            line=entry.line,
            hint=f"fix or remove the record (its uuid: {str(entry.uuid)[:40]})",
        )
    return data if isinstance(data, Mapping) else None


def receipts_in(entries: Iterable[Entry]) -> list[Receipt]:
    """Every receipt in these records, in transcript order."""
    out: list[Receipt] = []
    for entry in entries:
        receipt = Receipt.from_entry(entry)
        if receipt is not None:
            out.append(receipt)
    return out


def receipts_by_tool_id(receipts: Iterable[Receipt]) -> dict[str, Receipt]:
    """For each tool call named by a receipt, the latest receipt naming it."""
    out: dict[str, Receipt] = {}
    for receipt in receipts:
        for item in receipt.tool_results:
            out[str(item["id"])] = receipt
    return out
