"""Answering one `recall` call from the session's own transcript, within a token budget.

- `id`: the result of that tool call, whole (a result that was cut to its head and tail when
  it arrived is read back from the store that kept it on the side).
- `path` / `command`: the same for the latest call that read the file (or, failing that,
  wrote it) / ran the command.
- `query`: the parts of the conversation that were compacted away or cleared (records before
  the last compaction that the model no longer sees, and cleared tool results) that contain
  the query's words, best matches first, each as the lines around the matches.

The answer says where the text came from and how it left the context (from the receipts),
and is within `budget_tokens` as `tokens.budget` counts them (CJK text included; at least
`MIN_BUDGET_TOKENS`); a long output ends with the `start_line` to read on from. What the
answer quotes of the arguments or of the transcript's own fields is cut short. A search uses
at most `MAX_QUERY_TERMS` words of the query, each matched in one pass over the text.

A result that was cut when it arrived is read back whole from the store only when the text
found there is the one it was cut from (`large_output.is_kept_copy_of`); otherwise, or when
the kept copy is gone, the answer is the shortened copy and says that the rest is gone.
Nothing outside the transcript given (and the outputs its store kept) is ever read.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unbounded.compaction.large_output import CHARS_PER_TOKEN, is_kept_copy_of, is_shortened
from unbounded.compaction.tools_registry import is_cleared_text
from unbounded.model.entries import Entry
from unbounded.recall.index import ToolCall, TranscriptIndex, clip
from unbounded.recall.receipts import Receipt, receipts_by_tool_id
from unbounded.recall.schema import RecallRequest
from unbounded.side_outputs import side_output_name
from unbounded.tokens.budget import cut_to_tokens, fits

LoadOutput = Callable[[str], str | None]
"""Reads an output the store kept on the side by name (`SessionStore.load_tool_output`)."""

MIN_BUDGET_TOKENS = 100
"""An answer may always take this many tokens (its header and a few lines)."""
MAX_QUERY_TERMS = 32
"""Words of a query searched for (the first ones; a longer query says the rest were left)."""
_CONTEXT_LINES = 1
_MAX_LINES_PER_MATCH = 40
_FIELD_CHARS = 80
"""A transcript field quoted in a header (a timestamp, a receipt's trigger) is cut to this."""
_WORD = re.compile(r"[\w][\w./:-]*", re.UNICODE)
GONE_NOTE = (
    "[the complete output, kept on the side when it was cut, is gone: this is the shortened "
    "copy the conversation had]"
)
"""Says that a shortened result could not be read back whole."""


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


@dataclass(frozen=True, slots=True)
class ResultText:
    """A call's result as text, and whether a part of it is only its shortened copy."""

    text: str
    gone: bool


def _whole(
    shortened: str, call: ToolCall, part: int, load_output: LoadOutput | None
) -> tuple[str, bool]:
    """The complete text of a result part, and whether it is gone (see the module doc). It
    was kept under the id its result named: the call's name, or the transcript's id when the
    index renamed a repeat (a transcript written before calls were renamed on arrival)."""
    if not is_shortened(shortened):
        return shortened, False
    for tool_id in (call.id, call.transcript_id):
        kept = load_output(side_output_name(tool_id, part)) if load_output and tool_id else None
        if kept is not None and is_kept_copy_of(kept, shortened):
            return kept, False
    return shortened, True


def result_text(call: ToolCall, load_output: LoadOutput | None) -> ResultText:
    """A call's whole result as text: kept-aside originals of capped parts, images named."""
    content = call.result
    if isinstance(content, str):
        text, gone = _whole(content, call, 0, load_output)
        return ResultText(text, gone)
    parts: list[str] = []
    lost = False
    if isinstance(content, list):
        for position, block in enumerate(content):
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                text, gone = _whole(str(block.get("text", "")), call, position, load_output)
                parts.append(text)
                lost = lost or gone
            elif kind in ("image", "document"):
                parts.append(f"[{kind}]")
    return ResultText("\n".join(parts), lost)


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


def _within_budget(build: Callable[[int], str], budget_tokens: int) -> str:
    """The text `build(chars)` makes for the largest character budget whose result fits in
    `budget_tokens` (dense text has more tokens per character than 1/4), cut as a last
    resort."""
    tokens = max(budget_tokens, MIN_BUDGET_TOKENS)
    chars = tokens * CHARS_PER_TOKEN
    for _ in range(8):
        text = build(chars)
        if fits(text, tokens):
            return text
        chars = chars * 3 // 4
    return cut_to_tokens(build(chars), tokens)


def _how_it_left(call: ToolCall, context: RecallContext, by_id: Mapping[str, Receipt]) -> str:
    receipt = by_id.get(call.id)
    if receipt is not None:
        return clip(receipt.describe(), 2 * _FIELD_CHARS)
    if call.id in context.cleared_ids:
        return "cleared from the context"
    return "still in the conversation"


def _call_answer(
    call: ToolCall, request: RecallRequest, context: RecallContext, handle: str
) -> RecallAnswer:
    if call.result_position is None:
        return RecallAnswer(
            f"Tool call {clip(call.id, _FIELD_CHARS)} ({call.describe()}) has no result in "
            "this session.",
            found=False,
            tool_use_id=call.id,
        )
    result = result_text(call, context.load_output)
    where = _how_it_left(call, context, receipts_by_tool_id(context.receipts))
    header = (
        f"[recall: result of {clip(call.id, _FIELD_CHARS)} ({call.describe()}) at "
        f"{clip(call.time or '?', _FIELD_CHARS)}; {where}]"
    )
    if call.is_error:
        header += "\n[the tool reported an error]"
    if result.gone:
        header += "\n" + GONE_NOTE

    def build(chars: int) -> str:
        body, first, last, total = _excerpt(
            result.text, request.start_line, max(1, chars - len(header) - len(handle) - 60)
        )
        footer = ""
        if first > 1 or last < total:
            footer = f"\n[lines {first}-{last} of {total}"
            footer += (
                f"; recall {handle} with start_line={last + 1} for more]"
                if last < total
                else "]"
            )
        return f"{header}\n{body}{footer}"

    text = _within_budget(build, context.budget_tokens)
    return RecallAnswer(text, found=True, tool_use_id=call.id)


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
    results: set[str] = set()
    for position, entry in enumerate(context.entries):
        if entry.type not in ("user", "assistant") or entry.is_sidechain:
            continue
        if entry.uuid in visible:
            continue
        when = clip(entry.timestamp or "?", _FIELD_CHARS)
        content = entry.content
        text = _text_blocks(content)
        if entry.type == "user":
            if text.strip() and not is_cleared_text(text):
                kind = "summary" if entry.is_compact_summary else "user message"
                out.append(_Passage(f"{kind} at {when}", text, position))
        elif text.strip():
            out.append(_Passage(f"assistant at {when}", text, position))
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                    continue
                call = index.get(str(block.get("tool_use_id")))
                if call is not None and call.result_position == position:
                    results.add(call.id)
                    out.append(_result_passage(call, context, position))
    for tool_id in sorted(context.cleared_ids):
        call = index.get(tool_id)
        if call is not None and call.result_position is not None and call.id not in results:
            out.append(_result_passage(call, context, call.result_position))
    return out


def _result_passage(call: ToolCall, context: RecallContext, order: int) -> _Passage:
    label = (
        f"result of {clip(call.id, _FIELD_CHARS)} ({call.describe()}) at "
        f"{clip(call.time or '?', _FIELD_CHARS)}"
    )
    return _Passage(label, result_text(call, context.load_output).text, order)


def _words(query: str) -> list[str]:
    """The query's distinct words of two or more characters, lower-cased, in order."""
    words = (w.lower() for w in _WORD.findall(query))
    return list(dict.fromkeys(w for w in words if len(w) >= 2))


def _terms(words: list[str], query: str) -> list[str]:
    """What a search looks for: the first `MAX_QUERY_TERMS` words (the whole query when it
    has none)."""
    return words[:MAX_QUERY_TERMS] or [query.lower().strip()]


def _matching_lines(text: str, finder: re.Pattern[str]) -> str:
    lines = text.splitlines()
    keep: set[int] = set()
    for number, line in enumerate(lines):
        if finder.search(line.lower()):
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
    words = _words(request.value)
    terms = _terms(words, request.value)
    # One pass per text for all the terms (longest first, so a term that contains another
    # is counted as itself).
    finder = re.compile("|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t))))
    phrase = request.value.lower()
    scored: list[tuple[int, int, _Passage]] = []
    for passage in _passages(context):
        low = passage.text.lower()
        counts: dict[str, int] = {}
        for match in finder.finditer(low):
            counts[match.group()] = counts.get(match.group(), 0) + 1
        if not counts:
            continue
        score = 10 * len(counts) + (20 if phrase in low else 0)
        score += min(10, sum(counts.values()))
        scored.append((score, passage.order, passage))
    shown_query = clip(request.value, _FIELD_CHARS)
    if not scored:
        return _not_found(f"{shown_query!r} in what was compacted away or cleared")
    scored.sort(key=lambda item: (-item[0], -item[1]))
    note = (
        f"; only its first {MAX_QUERY_TERMS} words were searched for"
        if len(words) > MAX_QUERY_TERMS
        else ""
    )
    header = (
        f"[recall: {len(scored)} passage(s) of the compacted or cleared conversation match "
        f"{shown_query!r}{note}; best first]"
    )
    blocks = [
        f"--- {passage.label} ---\n{_matching_lines(passage.text, finder)}"
        for _, _, passage in scored
    ]

    def build(chars: int) -> str:
        parts = [header]
        used = len(header)
        shown = 0
        for block in blocks:
            if used + len(block) + 1 > chars:
                if shown == 0:
                    parts.append(block[: max(0, chars - used - 1)] + "…")
                    shown = 1
                break
            parts.append(block)
            used += len(block) + 1
            shown += 1
        if shown < len(blocks):
            parts.append(
                f"[{len(blocks) - shown} more passage(s) not shown: use more specific words, "
                "or recall a tool result by its id]"
            )
        return "\n".join(parts)

    return RecallAnswer(_within_budget(build, context.budget_tokens), found=True)


def _handle(request: RecallRequest, call: ToolCall) -> str:
    """How the model asks for more of this answer: as it asked, unless that was long."""
    if len(request.value) <= 2 * _FIELD_CHARS:
        return f"{request.kind}={request.value!r}"
    return f"id={clip(call.id, 2 * _FIELD_CHARS)}"


# -- the entry point ----------------------------------------------------------------------------


def answer_recall(request: RecallRequest, context: RecallContext) -> RecallAnswer:
    """The answer to one recall call (see the module docstring)."""
    return dataclasses.replace(_answer(request, context), lookup=request.kind)


def _answer(request: RecallRequest, context: RecallContext) -> RecallAnswer:
    index = context.index
    shown = clip(request.value, _FIELD_CHARS)
    if request.kind == "id":
        call = index.get(request.value)
        if call is None:
            return _not_found(f"tool call id {shown!r}")
        return _call_answer(call, request, context, f"id={clip(call.id, _FIELD_CHARS)}")
    if request.kind == "path":
        calls = [c for c in index.reads_of(request.value) if c.result_position is not None]
        if not calls:
            calls = [c for c in index.touching(request.value) if c.result_position is not None]
        if not calls:
            return _not_found(f"a tool call on the file {shown!r}")
        return _call_answer(calls[-1], request, context, _handle(request, calls[-1]))
    if request.kind == "command":
        calls = [c for c in index.runs_of(request.value) if c.result_position is not None]
        if not calls:
            return _not_found(f"a run of the command {shown!r}")
        return _call_answer(calls[-1], request, context, _handle(request, calls[-1]))
    return _search(request, context)
