"""Answering one `recall` call from the session's own transcript, within a token budget.

- `id`: the result of that tool call, whole (a result that was cut to its head and tail when
  it arrived is read back from the store that kept it on the side).
- `path` / `command`: the same for the latest call that read the file (or, failing that,
  wrote it) / ran the command.
- `query`: the parts of the conversation that were compacted away or cleared (records before
  the last compaction that the model no longer sees, and cleared tool results) that contain
  the query's words, best matches first, each as the lines around the matches.

The answer says where the text came from and how it left the context (from the receipts),
and is cut to `budget_tokens` (4 characters a token); a long output ends with the
`start_line` to read on from. Nothing outside the transcript given (and the outputs its store
kept) is ever read.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.large_output import CHARS_PER_TOKEN
from unbounded.compaction.tools_registry import is_cleared_text
from unbounded.model.entries import Entry
from unbounded.recall.index import ToolCall, TranscriptIndex, clip
from unbounded.recall.receipts import Receipt, receipts_by_tool_id
from unbounded.recall.schema import RecallRequest

LoadOutput = Callable[[str], str | None]
"""Reads an output the store kept on the side by key (`SessionStore.load_tool_output`)."""

MIN_BUDGET_CHARS = 400
_CONTEXT_LINES = 1
_MAX_LINES_PER_MATCH = 40
_WORD = re.compile(r"[\w][\w./:-]*", re.UNICODE)


@dataclass(frozen=True, slots=True)
class RecallContext:
    """What a recall may read: this session's transcript and what its store kept."""

    entries: Sequence[Entry]
    """The main thread, from the first record on."""
    view: Sequence[Entry]
    """What the model sees now (from the last compaction boundary on)."""
    cleared_ids: Collection[str]
    """Tool calls whose results are cleared in the view."""
    index: TranscriptIndex
    budget_tokens: int
    load_output: LoadOutput | None = None
    receipts: Sequence[Receipt] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    """The text of a recall's tool result and what it found."""

    text: str
    found: bool
    tool_use_id: str | None = None
    """The tool call whose result was brought back (id, path and command recalls)."""
    lookup: str = ""
    """What was asked for: id, path, command or query."""


def result_text(call: ToolCall, load_output: LoadOutput | None) -> str:
    """A call's whole result as text: kept-aside originals of capped parts, images named."""
    content = call.result
    if isinstance(content, str):
        kept = load_output(call.id) if load_output is not None else None
        return kept if kept is not None else content
    parts: list[str] = []
    if isinstance(content, list):
        for position, block in enumerate(content):
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                key = call.id if position == 0 else f"{call.id}-{position}"
                kept = load_output(key) if load_output is not None else None
                parts.append(kept if kept is not None else str(block.get("text", "")))
            elif kind in ("image", "document"):
                parts.append(f"[{kind}]")
    return "\n".join(parts)


def _excerpt(text: str, start_line: int, budget_chars: int) -> tuple[str, int, int, int]:
    """Lines from `start_line` within the budget: (text, first, last, total lines)."""
    lines = text.splitlines() or [""]
    total = len(lines)
    first = min(start_line, total)
    taken: list[str] = []
    used = 0
    last = first - 1
    for number in range(first, total + 1):
        line = lines[number - 1]
        if used + len(line) + 1 > budget_chars:
            if not taken:  # one line longer than the budget: its start
                taken.append(line[: max(0, budget_chars - 1)] + "…")
                last = number
            break
        taken.append(line)
        used += len(line) + 1
        last = number
    return "\n".join(taken), first, last, total


def _how_it_left(call: ToolCall, context: RecallContext, by_id: Mapping[str, Receipt]) -> str:
    receipt = by_id.get(call.id)
    if receipt is not None:
        return receipt.describe()
    if call.id in context.cleared_ids:
        return "cleared from the context"
    return "still in the conversation"


def _call_answer(
    call: ToolCall, request: RecallRequest, context: RecallContext, handle: str
) -> RecallAnswer:
    if call.result_position is None:
        return RecallAnswer(
            f"Tool call {call.id} ({call.describe()}) has no result in this session.",
            found=False,
            tool_use_id=call.id,
        )
    text = result_text(call, context.load_output)
    budget = max(MIN_BUDGET_CHARS, context.budget_tokens * CHARS_PER_TOKEN)
    where = _how_it_left(call, context, receipts_by_tool_id(context.receipts))
    header = f"[recall: result of {call.id} ({call.describe()}) at {call.time or '?'}; {where}]"
    if call.is_error:
        header += "\n[the tool reported an error]"
    body, first, last, total = _excerpt(text, request.start_line, budget - len(header))
    footer = ""
    if first > 1 or last < total:
        footer = f"\n[lines {first}-{last} of {total}"
        footer += (
            f"; recall {handle} with start_line={last + 1} for more]" if last < total else "]"
        )
    return RecallAnswer(f"{header}\n{body}{footer}", found=True, tool_use_id=call.id)


def _not_found(what: str) -> RecallAnswer:
    return RecallAnswer(f"Nothing in this session matches {what}.", found=False)


# -- search -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Passage:
    label: str
    text: str
    order: int


def _text_blocks(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def _passages(context: RecallContext) -> list[_Passage]:
    """The text the model can no longer see: records outside the view, cleared results."""
    index = context.index
    visible = {entry.uuid for entry in context.view if entry.uuid}
    out: list[_Passage] = []
    for position, entry in enumerate(context.entries):
        if entry.type not in ("user", "assistant") or entry.is_sidechain:
            continue
        if entry.uuid in visible:
            continue
        when = entry.timestamp or "?"
        content = entry.content
        if entry.type == "user":
            text = _text_blocks(content)
            if text.strip() and not is_cleared_text(text):
                kind = "summary" if entry.is_compact_summary else "user message"
                out.append(_Passage(f"{kind} at {when}", text, position))
        else:
            text = _text_blocks(content)
            if text.strip():
                out.append(_Passage(f"assistant at {when}", text, position))
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                    continue
                call = index.get(str(block.get("tool_use_id")))
                if call is not None:
                    out.append(_result_passage(call, context, position))
    for tool_id in context.cleared_ids:
        call = index.get(tool_id)
        if call is not None and call.result_position is not None:
            out.append(_result_passage(call, context, call.result_position))
    return out


def _result_passage(call: ToolCall, context: RecallContext, order: int) -> _Passage:
    label = f"result of {call.id} ({call.describe()}) at {call.time or '?'}"
    return _Passage(label, result_text(call, context.load_output), order)


def _terms(query: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(query)]
    return list(dict.fromkeys(w for w in words if len(w) >= 2)) or [query.lower().strip()]


def _matching_lines(text: str, terms: Sequence[str]) -> str:
    lines = text.splitlines()
    keep: set[int] = set()
    for number, line in enumerate(lines):
        low = line.lower()
        if any(term in low for term in terms):
            keep.update(range(max(0, number - _CONTEXT_LINES), number + _CONTEXT_LINES + 1))
    chosen = sorted(n for n in keep if n < len(lines))[:_MAX_LINES_PER_MATCH]
    out: list[str] = []
    previous = -2
    for number in chosen:
        if number != previous + 1 and out:
            out.append("…")
        out.append(clip(lines[number], 400))
        previous = number
    return "\n".join(out)


def _search(request: RecallRequest, context: RecallContext) -> RecallAnswer:
    terms = _terms(request.value)
    phrase = request.value.lower()
    scored: list[tuple[int, int, _Passage]] = []
    for passage in _passages(context):
        low = passage.text.lower()
        hits = [t for t in terms if t in low]
        if not hits:
            continue
        score = 10 * len(hits) + (20 if phrase in low else 0)
        score += min(10, sum(low.count(t) for t in hits))
        scored.append((score, passage.order, passage))
    if not scored:
        return _not_found(f"{request.value!r} in what was compacted away or cleared")
    scored.sort(key=lambda item: (-item[0], -item[1]))
    budget = max(MIN_BUDGET_CHARS, context.budget_tokens * CHARS_PER_TOKEN)
    header = (
        f"[recall: {len(scored)} passage(s) of the compacted or cleared conversation match "
        f"{clip(request.value, 80)!r}; best first]"
    )
    parts = [header]
    used = len(header)
    shown = 0
    for _, _, passage in scored:
        block = f"--- {passage.label} ---\n{_matching_lines(passage.text, terms)}"
        if used + len(block) + 1 > budget:
            if shown == 0:
                parts.append(block[: budget - used - 1] + "…")
                shown = 1
            break
        parts.append(block)
        used += len(block) + 1
        shown += 1
    if shown < len(scored):
        parts.append(
            f"[{len(scored) - shown} more passage(s) not shown: use more specific words, or "
            "recall a tool result by its id]"
        )
    return RecallAnswer("\n".join(parts), found=True)


# -- the entry point ----------------------------------------------------------------------------


def answer_recall(request: RecallRequest, context: RecallContext) -> RecallAnswer:
    """The answer to one recall call (see the module docstring)."""
    return dataclasses.replace(_answer(request, context), lookup=request.kind)


def _answer(request: RecallRequest, context: RecallContext) -> RecallAnswer:
    index = context.index
    if request.kind == "id":
        call = index.get(request.value)
        if call is None:
            return _not_found(f"tool call id {request.value!r}")
        return _call_answer(call, request, context, f"id={call.id}")
    if request.kind == "path":
        calls = [c for c in index.reads_of(request.value) if c.result_position is not None]
        if not calls:
            calls = [c for c in index.touching(request.value) if c.result_position is not None]
        if not calls:
            return _not_found(f"a tool call on the file {request.value!r}")
        return _call_answer(calls[-1], request, context, f"path={request.value!r}")
    if request.kind == "command":
        calls = [c for c in index.runs_of(request.value) if c.result_position is not None]
        if not calls:
            return _not_found(f"a run of the command {request.value!r}")
        return _call_answer(calls[-1], request, context, f"command={request.value!r}")
    return _search(request, context)
