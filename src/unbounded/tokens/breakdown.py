"""Where the context's tokens go, in rows that add up to the context size.

The context size (`ContextCounter.total`) has two parts: the total the API reported on the
last response (the anchor), and a padded length / 4 estimate of what was added after it. The
token accounting, on the other hand, measures every message by length / 4 and knows nothing
of the system prompt and the tools, which the transcript does not hold. This module puts the
two together, in one pass over the entries:

- **system prompt + tools**: what the first API call in the entries reported, minus the
  length / 4 of the messages it was sent (that call's prompt is the system prompt, the tools
  and those messages); at most the last reported total.
- **the message categories**: the rest of the reported total, shared among the categories in
  proportion to their length / 4 in the messages the anchor covers, plus the estimated part,
  shared in proportion to their length / 4 in the messages after the anchor.

Shares are whole tokens given out by largest remainder, so every column adds up exactly:
the rows' reported tokens to the reported total, their estimated tokens to the estimate.
Which entries the anchor covers follows `ContextCounter` exactly (the lines of the anchor's
own response are in its output; results arriving between them are not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from unbounded.model.entries import Entry
from unbounded.tokens.accounting import TokenAccountant, TokenAccounting
from unbounded.tokens.estimate import ContextCounter

SYSTEM_AND_TOOLS = "system_and_tools"
"""The row for the system prompt and the tool definitions."""

MESSAGE_CATEGORIES = (
    "user_messages",
    "assistant_messages",
    "tool_requests",
    "tool_results",
    "local_command_output",
    "attachments",
    "other",
)
"""The accounting's categories, in the order `TokenAccounting.categories` gives them."""


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """One category: its share of the reported total and of the estimate."""

    category: str
    reported: int
    estimated: int

    @property
    def tokens(self) -> int:
        """reported + estimated."""
        return self.reported + self.estimated


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Rows that add up to the context size, the system prompt + tools first."""

    rows: tuple[BreakdownRow, ...]
    reported: int
    estimated: int

    @property
    def total(self) -> int:
        """The context size: reported + estimated."""
        return self.reported + self.estimated

    def percent(self, tokens: int) -> int:
        """tokens as a rounded percentage of the context size."""
        return round(tokens / self.total * 100) if self.total else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: totals and per-category tokens, reported and estimated."""
        return {
            "total": self.total,
            "reported": self.reported,
            "estimated": self.estimated,
            "categories": {
                row.category: {
                    "tokens": row.tokens,
                    "reported": row.reported,
                    "estimated": row.estimated,
                }
                for row in self.rows
            },
        }


def share_out(amount: int, weights: Mapping[str, int], fallback: str) -> dict[str, int]:
    """`amount` split over `weights` in proportion, in whole tokens that add up to `amount`
    (largest remainder; ties go to the earlier key). No weight: all of it to `fallback`."""
    positive = {key: weight for key, weight in weights.items() if weight > 0}
    weight_sum = sum(positive.values())
    if amount <= 0:
        return {}
    if weight_sum == 0:
        return {fallback: amount}
    shares = {key: amount * weight // weight_sum for key, weight in positive.items()}
    left = amount - sum(shares.values())
    order = sorted(
        positive, key=lambda key: -(amount * positive[key] % weight_sum)
    )  # stable sort: equal remainders keep the weights' order
    for key in order[:left]:
        shares[key] += 1
    return shares


def _merge(into: dict[str, int], added: Mapping[str, int]) -> None:
    for key, tokens in added.items():
        into[key] = into.get(key, 0) + tokens


class ContextBreakdown:
    """`ContextCounter` and `TokenAccountant` over the same entries, appended one at a time,
    with the split between what the last reported usage covers and what was added after it."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.counter = ContextCounter()
        self._accountant = TokenAccountant()
        self._response_id: str | None = None
        self._anchor_id: str | None = None
        self._since_response: dict[str, int] = {}
        self._after_anchor: dict[str, int] = {}
        self._prefix: int | None = None
        for entry in entries:
            self.append(entry)

    def append(self, entry: Entry) -> None:
        """Account for one more entry (the same rules as `ContextCounter.append`)."""
        added = self._accountant.add(entry)
        self.counter.append(entry)
        if entry.is_synthetic_api_error:
            return
        message_id = entry.message_id
        if message_id is not None and message_id != self._response_id:
            self._response_id = message_id
            self._since_response = {}
        if entry.usage is not None:
            self._anchor_id = message_id
            self._after_anchor = dict(self._since_response) if message_id is not None else {}
            if self._prefix is None:
                counter = self.counter
                self._prefix = max(0, counter.anchor_tokens - counter.raw_estimate_at_anchor)
            return
        if message_id is not None and message_id == self._response_id:
            if message_id != self._anchor_id:
                _merge(self._after_anchor, added)
            return
        _merge(self._after_anchor, added)
        _merge(self._since_response, added)

    @property
    def accounting(self) -> TokenAccounting:
        """The length / 4 accounting of every entry so far."""
        return self._accountant.finish()

    def breakdown(self) -> Breakdown:
        """The rows as of the entries so far (see the module docstring)."""
        counter = self.counter
        reported, estimated = counter.anchor_tokens, counter.estimated_tokens
        system_and_tools = min(self._prefix or 0, reported)
        everything = self._accountant.stats.categories()
        covered = {
            name: max(0, everything[name] - self._after_anchor.get(name, 0))
            for name in MESSAGE_CATEGORIES
        }
        reported_shares = share_out(reported - system_and_tools, covered, "other")
        estimated_shares = share_out(estimated, self._after_anchor, "other")
        rows = [BreakdownRow(SYSTEM_AND_TOOLS, system_and_tools, 0)]
        rows += [
            BreakdownRow(name, reported_shares.get(name, 0), estimated_shares.get(name, 0))
            for name in MESSAGE_CATEGORIES
        ]
        return Breakdown(tuple(rows), reported, estimated)
