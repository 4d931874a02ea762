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

import re
from array import array
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal

import orjson

from unbounded.compaction.recorded_files import AppendedSince
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


def _receipt_part(
    entry: Entry, index: TranscriptIndex, items: list[dict[str, Any]]
) -> tuple[int, int]:
    """What one dropped record adds to a compaction's receipt: (messages, tokens), and the
    items of its results appended to `items` (without `alreadyCleared`: that is the
    compaction's own say)."""
    kind = entry.type
    if kind != "user":
        return kind == "assistant", entry_tokens(entry)
    content = entry.content
    if isinstance(content, str):
        return 1, rough_token_count(content)
    tokens = 0
    # One walk of the blocks gives both the entry's tokens (`entry_tokens`: the blocks'
    # estimates, of a list only) and its results' items, each result estimated once.
    counted = isinstance(content, list)
    for block in content:
        if not isinstance(block, dict):
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                tool_id = str(block.get("tool_use_id"))
                tokens_of = tool_result_tokens(block)
                items.append(tool_result_item(index.get(tool_id), tool_id, tokens_of))
            continue
        if block.get("type") != "tool_result":
            tokens += block_tokens(block) if counted else 0
            continue
        tool_id = str(block.get("tool_use_id"))
        result_tokens = tool_result_tokens(block)
        tokens += result_tokens if counted else 0
        items.append(tool_result_item(index.get(tool_id), tool_id, result_tokens))
    return 1, tokens


def _encodes(item: Mapping[str, Any]) -> bool:
    """The item encodes as JSON (no lone surrogate in its strings)."""
    try:
        orjson.dumps(item)
    except TypeError:
        return False
    return True


def _mark_cleared(items: list[dict[str, Any]], already_cleared: Collection[str]) -> None:
    """Flag the items whose results microcompaction had already cleared."""
    if already_cleared:
        for item in items:
            if item["id"] in already_cleared:
                item["alreadyCleared"] = True


def _receipt(
    messages: int,
    tokens: int,
    items: list[dict[str, Any]],
    files: list[str],
    summary_text: str,
    summarizer: str,
) -> dict[str, Any]:
    """A compaction's receipt from what its dropped records add up to (`files`: the items'
    paths, `_files(items)`)."""
    mentioned = _mentioned(summary_text, files)
    named = set(mentioned)
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
            "filesNotMentioned": [p for p in files if p not in named],
        },
    }


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
        more_messages, more_tokens = _receipt_part(entry, index, items)
        messages += more_messages
        tokens += more_tokens
    _mark_cleared(items, already_cleared)
    return _receipt(messages, tokens, items, _files(items), summary_text, summarizer)


class RunningReceipt:
    """The receipt's sums over a session's view, kept up to date as the view grows, so the
    compacting call reads them at its cut instead of walking every record it drops.

    Per record of the view it keeps the running totals up to it (messages, tokens, items:
    three 8-byte numbers), the items of its results (built as `compaction_receipt` builds
    them; one whose call the index did not hold yet is built again at the cut), its uuid in
    a set (to tell that no dropped record shares a uuid with a kept one), and each path the
    first time an item names it. A view that is not the one last grown (a compaction, a
    rewind, a load), or an index that started over, starts the sums over; so does a read,
    which hands its items over to the receipt. A record the sums cannot take (an odd shape)
    stops them until then, and the cut is read the old way."""

    def __init__(self) -> None:
        self._since = AppendedSince()
        self._restart(None)

    def _restart(self, index: TranscriptIndex | None) -> None:
        """Start the sums over (None: not before the next call, which starts them on its
        index)."""
        self._rows: object = index.rows if index is not None else None
        self._messages = array("q", [0])
        self._tokens = array("q", [0])
        self._item_ends = array("q", [0])
        self._items: list[dict[str, Any]] = []
        self._unresolved: list[int] = []
        """Items whose call the index did not hold when they were built."""
        self._uuids: set[str] = set()
        self._repeated_at = -1
        """The last position whose uuid an earlier record of the view has (-1: none)."""
        self._paths: dict[str, int] = {}
        """Each path the items name, with the item that named it first (in item order)."""
        self._places: dict[str, int] = {}
        """Each tool id the items name, with the first item that names it."""
        self._repeats: dict[str, list[int]] = {}
        """The later items of an id that more than one names (rare)."""
        self._stopped = False
        self._encodes = True
        """Every item built so far encodes as JSON (each is checked once, as it is built)."""
        self.checked: list[dict[str, Any]] | None = None
        """The items the last read handed over, when each was checked to encode as JSON: the
        transcript need not check them again in the boundary (None: check them)."""
        self._marked = array("q")
        """The items flagged `alreadyCleared` (to take the flags back)."""
        self._cleared: tuple[dict[str, Any], int] | None = None
        """The cleared ids followed (the caller's mapping, which only grows) and how many of
        them, in their order, were taken in."""

    def _unmark(self) -> None:
        """Take back every `alreadyCleared` flag the sums set, and follow no cleared ids."""
        items = self._items
        for place in self._marked:
            items[place].pop("alreadyCleared", None)
        self._marked = array("q")
        self._cleared = None

    def _mark(self, place: int) -> None:
        item = self._items[place]
        if "alreadyCleared" not in item:
            item["alreadyCleared"] = True
            self._marked.append(place)

    def _follow(self, cleared: dict[str, Any] | None) -> None:
        """Flag the items of the ids `cleared` gained since the last call (None: flag none),
        so a compaction finds them flagged instead of looking up every item it drops. The
        mapping is the microcompaction's: in clearing order, it only grows (a new mapping
        replaces it when it starts over: the flags are then set again from it)."""
        seen = self._cleared
        if cleared is None or seen is None or seen[0] is not cleared or seen[1] > len(cleared):
            self._unmark()
            if cleared is None:
                return
            added: Iterable[str] = cleared
        else:
            added = islice(reversed(cleared), len(cleared) - seen[1])
        places, repeats = self._places, self._repeats
        for tool_id in added:
            place = places.get(tool_id)
            if place is not None:
                self._mark(place)
                for later in repeats.get(tool_id, ()):
                    self._mark(later)
        self._cleared = (cleared, len(cleared))

    @property
    def records(self) -> int:
        """How many records of the view the sums hold."""
        return len(self._messages) - 1

    def advance(
        self,
        view: Sequence[Entry],
        index: TranscriptIndex,
        cleared: dict[str, Any] | None = None,
    ) -> None:
        """Take in the records appended to `view` since the last call (`index`: the
        transcript's, already brought up to date); `cleared`: the ids microcompaction cleared
        (in clearing order), whose items are flagged as they come (`_follow`)."""
        start = self._since.start(view)
        if start is None or index.rows is not self._rows:
            self._restart(index)
            start = 0
        if self._stopped:
            return
        self._follow(cleared)
        items, paths = self._items, self._paths
        places, repeats = self._places, self._repeats
        for position in range(start, len(view)):
            entry = view[position]
            uuid = entry.uuid
            if uuid:
                if uuid in self._uuids:
                    self._repeated_at = position
                self._uuids.add(uuid)
            before = len(items)
            try:
                messages, tokens = (
                    (0, 0) if entry.is_compact_boundary else _receipt_part(entry, index, items)
                )
            except Exception:  # the old walk meets it at the cut, and decides there
                del items[before:]
                self._stopped = True
                return
            for place in range(before, len(items)):
                item = items[place]
                if item["tool"] == "?":
                    self._unresolved.append(place)
                tool_id = item["id"]
                if tool_id in places:
                    repeats.setdefault(tool_id, []).append(place)
                else:
                    places[tool_id] = place
                if cleared is not None and tool_id in cleared:
                    self._mark(place)
                if self._encodes:
                    self._encodes = _encodes(item)
                path = item.get("path")
                if path and path not in paths:
                    paths[path] = place
            self._messages.append(self._messages[-1] + messages)
            self._tokens.append(self._tokens[-1] + tokens)
            self._item_ends.append(len(items))

    def read(
        self,
        view: Sequence[Entry],
        kept: Sequence[Entry],
        index: TranscriptIndex,
        already_cleared: Collection[str],
    ) -> tuple[int, int, list[dict[str, Any]], list[str]] | None:
        """(messages, tokens, items, files) of the records `write_compaction_receipt` drops
        from `view` keeping `kept`, or None when the sums cannot say (the caller walks them):
        `kept` must be the view's tail, each with a uuid no earlier record has. The items
        are handed over (the sums start over at the next call). `already_cleared` given as
        the mapping the calls followed (`advance`'s `cleared`) finds its items flagged."""
        followed = already_cleared if isinstance(already_cleared, dict) else None
        self.advance(view, index, followed)
        cut = len(view) - len(kept)
        if self._stopped or cut < 0 or len(self._messages) != len(view) + 1:
            return None
        # The view's own tail, or records equal to it (the kept records are read for their
        # uuids only): the summary's view is derived again, copying a partial compaction's
        # kept records without their usage. A list compares by identity first.
        if self._repeated_at >= cut or list(kept) != list(view[cut:]):
            return None
        if not all(entry.uuid for entry in kept):
            return None  # a kept record without a uuid is dropped as well
        end = self._item_ends[cut]
        items = self._items[:end]
        encodes = self._encodes
        files: list[str] | None = [path for path, place in self._paths.items() if place < end]
        for place in self._unresolved:
            if place >= end:
                break
            item = items[place]
            call = index.get(item["id"])
            if call is not None:
                items[place] = tool_result_item(call, item["id"], item["tokens"])
                if "alreadyCleared" in item:
                    items[place]["alreadyCleared"] = True
                files = None  # a path it names now may come first
                encodes = encodes and _encodes(items[place])
        if followed is None:
            _mark_cleared(items, already_cleared)
        messages, tokens = self._messages[cut], self._tokens[cut]
        self._restart(None)  # its items are the receipt's now: the next call starts over
        self.checked = items if encodes else None
        return messages, tokens, items, _files(items) if files is None else files


def write_compaction_receipt(
    boundary: Entry,
    view: Sequence[Entry],
    kept: Sequence[Entry],
    *,
    index: TranscriptIndex,
    summary_text: str,
    summarizer: str,
    already_cleared: Collection[str] = (),
    running: RunningReceipt | None = None,
) -> dict[str, Any]:
    """Write the receipt of a compaction into its boundary (`compactMetadata.receipt`) and
    return it: what it dropped is the view before it (`view`) less the records it keeps
    verbatim (`kept`). Every compaction writes one: the session's and the CLI's alike.
    `running`: the sums kept over this view as it grew (read at the cut when they apply)."""
    summed = running.read(view, kept, index, already_cleared) if running is not None else None
    if summed is not None:
        receipt = _receipt(*summed, summary_text, summarizer)
    else:
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


_WORD_RUN = re.compile(r"[\w.\-]+")
"""A run of the characters most file names are made of."""
WORDS_FROM_FILES = 32
"""From this many files on, names are looked for in the text's distinct runs (`_mentioned`)."""


def _mentioned(text: str, paths: Sequence[str]) -> list[str]:
    """The paths a summary mentions, in order: the path itself, or its file name when that
    is 4 characters or more. A path whose name is not in the text is not either (the name
    ends the path), so each name is looked for once, however many paths end with it. With
    many files, a name made only of run characters (`_WORD_RUN`) is looked for in the
    text's distinct runs, one a line, instead of the whole text: such a name can only
    occur inside one run, and a summary repeats most of its words."""
    words: str | None = None
    found: dict[str, bool] = {}
    out: list[str] = []
    for path in paths:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        present = found.get(name)
        if present is None:
            if len(paths) >= WORDS_FROM_FILES and _WORD_RUN.fullmatch(name):
                if words is None:
                    words = "\n".join(dict.fromkeys(_WORD_RUN.findall(text)))
                present = name in words
            else:
                present = name in text
            found[name] = present
        if present and (len(name) >= 4 or path in text):
            out.append(path)
    return out


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
