"""Token counting anchored on API usage (seed 004 "Token Counting").

The canonical context size is `token_count_with_estimation`: the exact total the API reported
on the last response (input + cache creation + cache read + output), plus a rough estimate of
what was added after it (text length / 4; images and documents 2,000; a tool call as its name
plus its JSON input), padded by 4/3.

When the model calls tools in parallel, Claude Code writes the response as several assistant
lines sharing one message id, with tool results between them. The anchor is therefore the
*first* line of the last response: anchoring on its last line would skip the results that
arrived between its lines. Lines of the anchor response itself are not estimated again (their
tokens are in the reported output).

`ContextCounter` keeps these sums as entries arrive, so recounting after a new message costs
O(that message), not O(history).

Claude models before Opus 4.5 (`keeps_previous_thinking = false` in the model table) drop the
thinking of earlier turns once a user message that is not only tool results starts a new turn;
within a tool loop the current turn's thinking stays. The model of the last assistant entry
decides (looked up in the counter's model table: the session's own when it has one, else the
packaged table and UNBOUNDED_MODELS_FILE; `<synthetic>` entries, which Claude Code writes
itself, decide nothing): while it drops thinking, the estimated part and the raw whole-context
estimate leave out the thinking of turns before the current one; when a model that keeps it
answers later, that thinking is counted again (the blocks were never removed from the request).
The reported usage of the last response is exact and kept as it is: it still holds that
response's own thinking until the next usage replaces it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from unbounded.catalog import ModelTable, keeps_previous_thinking
from unbounded.model.attachments import attachment_to_content
from unbounded.model.content import usage_context_total
from unbounded.model.entries import SYNTHETIC_MODEL, Entry, messages_after_compact_boundary

CHARS_PER_TOKEN = 4
"""The rough estimate's divisor: one token per ~4 characters of text."""
TOKENS_PER_IMAGE = 2_000
"""Flat estimate for an image or a document block."""
ESTIMATE_PADDING = 4 / 3
"""Conservative padding applied to a whole estimate."""


def _divide_round(length: int) -> int:
    # JavaScript's Math.round (halves up), as the seeds' approximateTokenCount uses; Python's
    # round() would round halves to even.
    return (length + CHARS_PER_TOKEN // 2) // CHARS_PER_TOKEN


def rough_token_count(text: str) -> int:
    """length / 4, rounded half up: the quick estimate used where a count need not be exact."""
    return _divide_round(len(text))


def _json_length(value: Any) -> int:
    """Characters of the compact JSON text (like JSON.stringify(...).length)."""
    try:
        return len(orjson.dumps(value).decode())
    except TypeError:
        return len(str(value))


def tool_result_tokens(block: Mapping[str, Any]) -> int:
    """Estimated tokens of one tool_result block's content (images 2,000 each)."""
    content = block.get("content")
    if not content:
        return 0
    if isinstance(content, str):
        return rough_token_count(content)
    total = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                total += rough_token_count(str(part.get("text", "")))
            elif kind in ("image", "document"):
                total += TOKENS_PER_IMAGE
    return total


def block_tokens(block: Mapping[str, Any]) -> int:
    """Estimated tokens of one content block, unpadded."""
    kind = block.get("type")
    if kind == "text":
        return rough_token_count(str(block.get("text", "")))
    if kind == "tool_result":
        return tool_result_tokens(block)
    if kind in ("image", "document"):
        return TOKENS_PER_IMAGE
    if kind == "tool_use":
        name = str(block.get("name", ""))
        return _divide_round(len(name) + _json_length(block.get("input", {})))
    if kind == "thinking":
        return rough_token_count(str(block.get("thinking", "")))
    if kind == "redacted_thinking":
        return rough_token_count(str(block.get("data", "")))
    return _divide_round(_json_length(block))


def content_tokens(content: Any) -> int:
    """Estimated tokens of message content (a string or a block list), unpadded."""
    if isinstance(content, str):
        return rough_token_count(content)
    if isinstance(content, list):
        return sum(block_tokens(b) for b in content if isinstance(b, dict))
    return 0


def entry_tokens(entry: Entry) -> int:
    """Estimated tokens an entry adds to the request, unpadded (0 for records never sent)."""
    kind = entry.type
    if kind in ("user", "assistant"):
        if entry.is_synthetic_api_error:
            return 0
        return content_tokens(entry.content)
    if kind == "attachment":
        attachment = entry.attachment
        return content_tokens(attachment_to_content(attachment)) if attachment else 0
    return 0


def _thinking_tokens(entry: Entry) -> int:
    """Estimated tokens of an assistant entry's thinking blocks, unpadded."""
    content = entry.content
    if not isinstance(content, list):
        return 0
    return sum(
        block_tokens(b)
        for b in content
        if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
    )


def _starts_turn(entry: Entry) -> bool:
    """Whether an entry sends user content that is not only tool results (it starts a new
    turn: a model that drops earlier thinking drops it from here on)."""
    if entry.type == "attachment":
        attachment = entry.attachment
        content: Any = attachment_to_content(attachment) if attachment else None
    elif entry.type == "user":
        content = entry.content
    else:
        return False
    if isinstance(content, str):
        return bool(content)
    if isinstance(content, list):
        return any(isinstance(b, dict) and b.get("type") != "tool_result" for b in content)
    return False


def pad_estimate(raw_tokens: int) -> int:
    """Apply the 4/3 conservative padding to an unpadded estimate."""
    return math.ceil(raw_tokens * ESTIMATE_PADDING)


def estimate_messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Padded estimate for plain API messages ({role, content})."""
    return pad_estimate(sum(content_tokens(m.get("content")) for m in messages))


class ContextCounter:
    """Running `token_count_with_estimation` over entries appended one at a time (`models`:
    the table that says which models drop earlier turns' thinking; None: the packaged table
    and UNBOUNDED_MODELS_FILE's rows)."""

    __slots__ = (
        "_anchor_id",
        "_anchor_total",
        "_earlier",
        "_earlier_estimated",
        "_earlier_since",
        "_estimate",
        "_keeps",
        "_models",
        "_raw_at_anchor",
        "_raw_total",
        "_response_id",
        "_since_response",
        "_strips_thinking",
        "_thinking",
        "_thinking_estimated",
        "_thinking_since",
        "entries_seen",
    )
    _anchor_id: str | None
    _anchor_total: int | None
    _estimate: int  # unpadded estimate of what the anchor's usage does not cover
    _response_id: str | None  # the response whose lines arrived last
    _since_response: int  # unpadded estimate of non-response entries since its first line
    _strips_thinking: bool  # the last assistant entry's model drops earlier turns' thinking
    # Thinking (unpadded) in all, the part in `_estimate`, the part in `_since_response`:
    # `_earlier*` from turns before the current one (left out of those sums while
    # `_strips_thinking`), `_thinking*` from the current turn (always in them).
    _earlier: int
    _earlier_estimated: int
    _earlier_since: int
    _thinking: int
    _thinking_estimated: int
    _thinking_since: int
    entries_seen: int

    def __init__(self, entries: Iterable[Entry] = (), *, models: ModelTable | None = None) -> None:
        self._models = models
        self._keeps: dict[str, bool] = {}
        self.reset()
        for entry in entries:
            self.append(entry)

    def _keeps_thinking(self, model: str) -> bool:
        """Whether `model` keeps earlier turns' thinking (a model the table lacks keeps it)."""
        if self._models is None:
            return keeps_previous_thinking(model)  # cached there, by the variable's value
        known = self._keeps.get(model)
        if known is None:
            found = self._models.find(model)
            known = True if found is None else found.keeps_previous_thinking
            self._keeps[model] = known
        return known

    def append(self, entry: Entry) -> None:
        """Account for one more entry."""
        if entry.is_synthetic_api_error:
            self.entries_seen += 1
            return  # never sent, and its id must not end the response it interrupted
        assistant = entry.type == "assistant"
        strips = self._strips_thinking
        if assistant:
            model = entry.model
            if model and model != SYNTHETIC_MODEL:
                # Looked up before anything changes: a lookup that raises leaves the count whole.
                strips = not self._keeps_thinking(model)
        self.entries_seen += 1
        tokens = entry_tokens(entry)
        thinking = 0
        if assistant:
            if strips != self._strips_thinking:
                self._shift_earlier(-1 if strips else 1)
                self._strips_thinking = strips
            thinking = _thinking_tokens(entry)
            self._thinking += thinking
        elif self._thinking and _starts_turn(entry):
            self._end_turn()
        self._raw_total += tokens
        message_id = entry.message_id
        if message_id is not None and message_id != self._response_id:
            # The first line of a new response: results arriving from here on are not in
            # its usage, even when only a later line of it carries that usage.
            self._response_id = message_id
            self._since_response = 0
            self._thinking_since = self._earlier_since = 0
        usage = entry.usage
        if usage is not None:
            self._anchor_id = message_id
            self._anchor_total = usage_context_total(usage)
            if message_id is not None:
                self._estimate = self._since_response
                self._thinking_estimated = self._thinking_since
                self._earlier_estimated = self._earlier_since
            else:
                self._estimate = self._thinking_estimated = self._earlier_estimated = 0
            self._raw_at_anchor = self._raw_total - self._estimate
            return
        if message_id is not None and message_id == self._response_id:
            # A line of the current response: its tokens are in the reported output once that
            # response's usage is known, so it is estimated only until then.
            if message_id != self._anchor_id:
                self._estimate += tokens
                self._thinking_estimated += thinking
            return
        self._estimate += tokens
        self._since_response += tokens
        self._thinking_estimated += thinking
        self._thinking_since += thinking

    def _shift_earlier(self, sign: int) -> None:
        """Leave the earlier turns' thinking out of the sums (-1) or count it again (+1)."""
        self._raw_total += sign * self._earlier
        self._estimate += sign * self._earlier_estimated
        self._since_response += sign * self._earlier_since

    def _end_turn(self) -> None:
        """A new turn starts: the current turn's thinking becomes earlier turns' thinking (left
        out at once when the last model drops it; the anchor's usage stays as reported)."""
        if self._strips_thinking:
            self._raw_total -= self._thinking
            self._estimate -= self._thinking_estimated
            self._since_response -= self._thinking_since
        self._earlier += self._thinking
        self._earlier_estimated += self._thinking_estimated
        self._earlier_since += self._thinking_since
        self._thinking = self._thinking_estimated = self._thinking_since = 0

    def replace_estimated(self, old: Entry, new: Entry, *, in_response: bool) -> None:
        """Count `new` in place of `old`, an entry after the anchor (no reported usage covers
        it; `in_response`: it came after the current response's first line), as when a
        result is cleared before any usage covered it."""
        delta = entry_tokens(new) - entry_tokens(old)
        self._raw_total += delta
        self._estimate += delta
        if in_response:
            self._since_response += delta

    def reset(self) -> None:
        """Forget everything (after a compaction replaced the history)."""
        self._anchor_id = None
        self._anchor_total = None
        self._estimate = 0
        self._response_id = None
        self._since_response = 0
        self._raw_total = 0
        self._raw_at_anchor = 0
        self._strips_thinking = False
        self._earlier = self._earlier_estimated = self._earlier_since = 0
        self._thinking = self._thinking_estimated = self._thinking_since = 0
        self.entries_seen = 0

    @property
    def anchored(self) -> bool:
        """Whether an API usage anchors the count."""
        return self._anchor_total is not None

    @property
    def anchor_tokens(self) -> int:
        """The exact part: the last response's reported total (0 when unanchored)."""
        return self._anchor_total or 0

    @property
    def raw_estimate_at_anchor(self) -> int:
        """The unpadded length estimate of the messages the anchor's usage covers (0 when
        unanchored): set against `anchor_tokens`, it tells how far length/4 is off here."""
        return self._raw_at_anchor if self._anchor_total is not None else 0

    @property
    def estimated_tokens(self) -> int:
        """The estimated part, padded by 4/3."""
        return pad_estimate(self._estimate)

    @property
    def total(self) -> int:
        """The context size: anchor + padded estimate of what came after."""
        return self.anchor_tokens + self.estimated_tokens


def token_count_with_estimation(
    entries: Sequence[Entry], *, models: ModelTable | None = None
) -> int:
    """The context size of these entries, anchored on the last API usage (see module doc;
    `models` as `ContextCounter` takes it). Only the entries from the first line of the last
    response reporting usage on are read: nothing before it changes the total (`ContextCounter`
    over them all gives the same)."""
    start = _last_anchor_start(entries)
    chosen = (entries[index] for index in range(start, len(entries)))
    return ContextCounter(chosen, models=models).total


def _last_anchor_start(entries: Sequence[Entry]) -> int:
    """Index of the first line of the last response reporting usage (0 when none does): a
    counter started there sets the same anchor and estimate as one that read everything."""
    anchor = len(entries) - 1
    while anchor >= 0 and (entries[anchor].usage is None or entries[anchor].is_synthetic_api_error):
        anchor -= 1
    if anchor < 0:
        return 0
    response = entries[anchor].message_id
    if response is None:
        return anchor
    start = anchor
    for index in range(anchor - 1, -1, -1):
        entry = entries[index]
        if entry.is_synthetic_api_error:
            continue  # never sent, and it does not end the response it interrupted
        message_id = entry.message_id
        if message_id is None:
            continue  # a tool result between two lines of the response
        if message_id != response:
            break
        start = index
    return start


def pre_compaction_tokens(entries: Sequence[Entry]) -> int:
    """The context a compaction at the end of `entries` replaces, counted the one way a context
    is counted here: `token_count_with_estimation` of the view (the entries from the last
    compact boundary on): the last response's reported usage, which covers the system prompt
    and tools, plus the padded estimate of what came after it.

    `compact`, `eval` and `inspect` report it as `pre_tokens` at a compaction point. A recorded
    boundary's `preTokens` is Claude Code's own count at that moment, made the same way but
    from what Claude Code held then (attachments and hook output it had not written yet, its
    own estimate of the tail): the two agree to within a few thousand tokens.
    """
    return token_count_with_estimation(messages_after_compact_boundary(entries))


def last_usage_tokens(entries: Sequence[Entry]) -> int:
    """The total the last response reported, without estimation (seed 002 `countTotalTokens`)."""
    for entry in reversed(entries):
        usage = entry.usage
        if usage is not None:
            return usage_context_total(usage)
    return 0
