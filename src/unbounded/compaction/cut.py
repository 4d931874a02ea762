"""Where a compaction cuts: which records stay verbatim after its summary.

One definition each, used by every compaction:

- `turn_tail_start`: the records an automatic compaction keeps (the messages that trigger
  the next turn), as the uuid `compact_conversation(keep_from=...)` takes.
- `is_one_run` / `contiguous_tail_start`: whether kept records are one run of the
  transcript, and from where the view is one. A compact boundary relinks one segment only,
  so the records after an earlier partial compaction's splice cannot be kept with those
  before it (`compaction/conversation.py`, `compaction/memory_compact.py`, `Session`).
- `kept_rounds_start`: where the kept tail starts when older rounds join the newest one
  within a budget of messages and tokens (the LangChain middleware's `keep`).
- `discovered_tools`: the tools the summarized records called, which a boundary lists.
"""

from __future__ import annotations

from collections.abc import Sequence

from unbounded.model.entries import Entry
from unbounded.tokens.estimate import entry_tokens, pad_estimate


def _carries_results(entry: Entry) -> bool:
    """Whether this record is a user message carrying a tool_result."""
    if entry.type != "user":
        return False
    content = entry.content
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def has_tool_results(entries: Sequence[Entry]) -> bool:
    """Whether any of these records is a user message carrying a tool_result."""
    return any(_carries_results(e) for e in entries)


def is_one_run(entries: Sequence[Entry], kept: Sequence[Entry]) -> bool:
    """Whether `kept` is one run of `entries` in file order (each record with a uuid)."""
    if not kept or kept[0].uuid is None:
        return False
    first = kept[0].uuid
    for position in range(len(entries) - len(kept), -1, -1):
        if entries[position].uuid == first:
            run = entries[position : position + len(kept)]
            return [e.uuid for e in run] == [e.uuid for e in kept]
    return False


def contiguous_tail_start(entries: Sequence[Entry], view: Sequence[Entry]) -> int:
    """The smallest view index from which the view is one run of `entries` (file order):
    `len(view)` when its last record is not in `entries` at all."""
    if not view:
        return 0
    positions = LastPositions(entries)
    start = len(view) - 1
    if positions.get(view[start].uuid) is None:
        return len(view)
    while start > 0:
        here = positions.get(view[start].uuid)
        before = positions.get(view[start - 1].uuid)
        if here is None or before is None or before != here - 1:
            break
        start -= 1
    return start


class LastPositions:
    """uuid -> the position of its last record in `entries`, found by reading the entries
    from the end only as far as a lookup needs: the view is usually the transcript's tail,
    so a compaction reads that tail, not the whole history."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self._entries = entries
        self._next = len(entries) - 1
        self._found: dict[str, int] = {}

    def get(self, uuid: str | None) -> int | None:
        """The last position of `uuid`; None when no record has it (or it is None)."""
        if not uuid:
            return None
        while uuid not in self._found and self._next >= 0:
            other = self._entries[self._next].uuid
            if other and other not in self._found:
                self._found[other] = self._next
            self._next -= 1
        return self._found.get(uuid)


def reply_start(view: Sequence[Entry], end: int) -> int:
    """Index of the first line of the reply that ends just before `end` (lines of one
    response share a message id; their tool results may sit between them)."""
    reply_id = view[end - 1].message_id
    start = end - 1
    index = start
    while reply_id is not None and index > 0:
        entry = view[index - 1]
        if entry.type == "assistant":
            if entry.message_id != reply_id:
                break
            start = index - 1
        elif entry.type not in ("attachment", "progress") and not (
            entry.type == "user" and has_tool_results([entry])
        ):
            break
        index -= 1
    return start


def turn_tail_start(entries: Sequence[Entry], view: Sequence[Entry]) -> str | None:
    """The uuid of the first record an automatic compaction keeps verbatim: the messages
    that trigger the next turn (the last user message; with tool results, the reply whose
    calls they answer too), so the newest message is never known only through a summary.

    None when the view does not end with a user message (nothing to keep); "" when those
    messages are all there is (nothing to summarize), or they are not one run of the
    transcript (a boundary could not relink them).
    """
    start = len(view)
    while start > 0:
        entry = view[start - 1]
        if entry.type == "assistant" or entry.is_compact_boundary or entry.is_compact_summary:
            break
        start -= 1
    tail = view[start:]
    if not any(e.type == "user" and not e.is_meta for e in tail):
        return None
    candidates = [start]
    if start > 0 and view[start - 1].type == "assistant" and has_tool_results(tail):
        candidates.insert(0, reply_start(view, start))
    for index in candidates:
        if not any(e.type in ("user", "assistant") for e in view[:index]):
            continue
        if is_one_run(entries, view[index:]):
            return view[index].uuid or None
    return ""


def round_starts(view: Sequence[Entry | None]) -> list[int]:
    """Indexes where a round may start: every record but one carrying tool results (a cut
    there would leave results whose calls were summarized)."""
    # Asked of every record of the view: one record at a time, no list made for each.
    return [i for i, entry in enumerate(view) if entry is None or not _carries_results(entry)]


def kept_rounds_start(
    view: Sequence[Entry | None],
    *,
    first: int = 0,
    keep_messages: int | None,
    keep_tokens: int | None,
) -> int | None:
    """Index of the first record kept verbatim, never between a tool call and its result.

    The newest round (from the last record that is not a tool result: the last user message,
    or the reply whose calls the last results answer) is always kept whole; older rounds join
    it while the kept records stay within `keep_messages` records and `keep_tokens` tokens
    (estimates padded as the trigger's count is; None: no limit of that kind). Records before
    `first` are never summarized alone (a summary already there). When everything older fits
    the budget yet a compaction is due (a large system prompt or tool set), the oldest round
    after `first` is summarized still, never the newest. None when nothing is left to
    summarize.
    """
    starts = round_starts(view)
    if not starts:
        return None
    newest = starts[-1]
    cut = newest
    tokens = _padded_tokens(view[newest:])
    for start in reversed(starts[:-1]):
        tokens += _padded_tokens(view[start:cut])
        over_messages = keep_messages is not None and len(view) - start > keep_messages
        if over_messages or (keep_tokens is not None and tokens > keep_tokens):
            break
        cut = start
    if cut > first:
        return cut
    later = [i for i in starts if first < i <= newest]
    return later[0] if later else None


def _padded_tokens(entries: Sequence[Entry | None]) -> int:
    return pad_estimate(sum(entry_tokens(e) for e in entries if e is not None))


def discovered_tools(entries: Sequence[Entry]) -> list[str]:
    """The names of the tools these records called, sorted."""
    names: set[str] = set()
    for entry in entries:
        if entry.type == "assistant" and isinstance(entry.content, list):
            names.update(str(b.get("name")) for b in entry.content if b.get("type") == "tool_use")
    return sorted(names)


__all__ = [
    "LastPositions",
    "contiguous_tail_start",
    "discovered_tools",
    "has_tool_results",
    "is_one_run",
    "kept_rounds_start",
    "reply_start",
    "round_starts",
    "turn_tail_start",
]
