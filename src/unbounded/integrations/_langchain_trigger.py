"""The compaction trigger and kept tail a LangChain user sets, in the shapes LangChain's
`SummarizationMiddleware` takes them, for `UnboundedMiddleware`.

    trigger=("tokens", 3_000)                     at 3,000 tokens of context
    trigger=("fraction", 0.8)                     at 80 % of the model's input window
    trigger=("messages", 50)                      at 50 messages
    trigger={"tokens": 4_000, "messages": 10}     both reached (AND)
    trigger=[("fraction", 0.8), ("messages", 100)]  either one (OR)
    keep=("messages", 20) | ("tokens", 2_000) | ("fraction", 0.1)

A trigger is a setting of the user's, at any size: it does not depend on the model's window
(which only sizes a fraction). Each token level is turned into the auto-compact threshold
of a `Thresholds`, so the decision itself stays `compaction/decisions.py::should_auto_compact`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from unbounded.compaction.cut import kept_rounds_start, round_starts
from unbounded.compaction.decisions import should_auto_compact
from unbounded.errors import ConfigError
from unbounded.model.entries import Entry
from unbounded.policy import Policy, Thresholds

SizeKind = Literal["tokens", "fraction", "messages"]
_KINDS: tuple[SizeKind, ...] = ("tokens", "fraction", "messages")


def context_size(value: Any, parameter: str) -> tuple[SizeKind, float]:
    """A checked `(kind, number)` pair; ConfigError saying what is wrong and what is taken."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise ConfigError(
            f"{parameter} must be a (kind, number) pair such as ('tokens', 3000), "
            f"('fraction', 0.8) or ('messages', 20), not {value!r}"
        )
    kind, number = value
    return _checked(kind, number, parameter)


def _checked(kind: Any, number: Any, parameter: str) -> tuple[SizeKind, float]:
    if kind not in _KINDS:
        raise ConfigError(
            f"{parameter}: unknown size kind {kind!r}; use 'tokens', 'fraction' or 'messages'"
        )
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ConfigError(f"{parameter}: the {kind} value must be a number, not {number!r}")
    if kind == "fraction":
        if not 0 < number <= 1:
            raise ConfigError(f"{parameter}: a fraction must be in (0, 1], not {number}")
    elif not isinstance(number, int) or number <= 0:
        raise ConfigError(f"{parameter}: {kind} must be a whole number > 0, not {number!r}")
    return kind, number


@dataclass(frozen=True, slots=True)
class TriggerClause:
    """Levels that must all be reached for the clause to fire (None: not part of it)."""

    thresholds: Thresholds | None
    """The token level (from "tokens" or "fraction") as an auto-compact threshold."""
    messages: int | None


@dataclass(frozen=True, slots=True)
class CompactionTrigger:
    """When the middleware compacts: any clause reached (see the module docstring); no
    clause (an empty list) never compacts automatically."""

    clauses: tuple[TriggerClause, ...]

    @classmethod
    def parse(cls, trigger: Any, *, base: Thresholds, context_window: int) -> CompactionTrigger:
        """The trigger the user gave; a fraction is of `context_window` (the model's input
        window), each level becomes the auto-compact threshold of a copy of `base`."""
        items: Sequence[Any] = trigger if isinstance(trigger, list) else [trigger]
        clauses: list[TriggerClause] = []
        for item in items:
            if isinstance(item, Mapping):
                if not item:
                    raise ConfigError("trigger: a {kind: number} clause needs at least one level")
                sizes = [_checked(kind, number, "trigger") for kind, number in item.items()]
            else:
                sizes = [context_size(item, "trigger")]
            clauses.append(_clause(sizes, base, context_window))
        return cls(tuple(clauses))

    @classmethod
    def of_thresholds(cls, thresholds: Thresholds) -> CompactionTrigger:
        """The model's own trigger: its auto-compact threshold."""
        return cls((TriggerClause(thresholds, None),))

    def lowest(self) -> Thresholds | None:
        """The thresholds of the lowest token level of any clause (None: the trigger counts
        only messages)."""
        levels = [c.thresholds for c in self.clauses if c.thresholds is not None]
        return min(levels, key=lambda t: t.autocompact) if levels else None

    def lowest_tokens(self) -> int | None:
        """The lowest token level of any clause (None: the trigger counts only messages)."""
        lowest = self.lowest()
        return lowest.autocompact if lowest is not None else None

    def reached(self, policy: Policy, tokens: int, messages: int) -> bool:
        """Whether some clause has every one of its levels reached."""
        for clause in self.clauses:
            if clause.messages is not None and messages < clause.messages:
                continue
            if clause.thresholds is None:
                if policy.compact_enabled and policy.auto_compact_enabled:
                    return True
                continue
            if should_auto_compact(policy, clause.thresholds, tokens):
                return True
        return False


def _clause(
    sizes: Sequence[tuple[SizeKind, float]], base: Thresholds, context_window: int
) -> TriggerClause:
    level: int | None = None
    messages: int | None = None
    for kind, number in sizes:
        if kind == "messages":
            messages = int(number)
            continue
        tokens = int(number) if kind == "tokens" else max(1, int(context_window * number))
        level = tokens if level is None else max(level, tokens)  # both must be reached
    if level is None:
        return TriggerClause(None, messages)
    # The warning level (where count-based clearing stops holding back) is never above it.
    thresholds = dataclasses.replace(base, autocompact=level, warning=min(base.warning, level))
    return TriggerClause(thresholds, messages)


@dataclass(frozen=True, slots=True)
class KeptTail:
    """How much of the conversation a compaction keeps verbatim (None: no limit of that kind)."""

    messages: int | None
    tokens: int | None

    @classmethod
    def parse(cls, keep: Any, *, context_window: int) -> KeptTail:
        """`keep=` in LangChain's shape: the last messages, tokens, or share of the window."""
        kind, number = context_size(keep, "keep")
        if kind == "messages":
            return cls(int(number), None)
        if kind == "tokens":
            return cls(None, int(number))
        return cls(None, max(1, int(context_window * number)))


TAIL_WINDOW = 64
"""The records `kept_tail_start` reads first (four times as many at each widening)."""


def kept_tail_start(
    view: Sequence[Entry | None],
    *,
    first: int,
    keep_messages: int | None,
    keep_tokens: int | None,
) -> int | None:
    """`kept_rounds_start(view, ...)`, read from the newest records only as far back as the
    answer needs: a compaction keeps a few rounds, and reading the round starts of the whole
    history cost more than the rest of the cut.

    `kept_rounds_start` walks the round starts from the newest back, and stops at the first
    round the budget cannot take: on a tail of the view (shifted by its offset, `first` too,
    which may then be negative) it walks the same rounds with the same sums (the budget
    counts records from the end). Its answer is the whole view's when it lies after the
    tail's first round start: either the walk stopped inside the tail, or it reached that
    start without stopping and still fell back to the first round after `first`, which is
    then inside the tail too. Otherwise the tail is widened, up to the whole view."""
    size = len(view)
    window = TAIL_WINDOW
    while window < size:
        offset = size - window
        tail = view[offset:]
        found = kept_rounds_start(
            tail, first=first - offset, keep_messages=keep_messages, keep_tokens=keep_tokens
        )
        starts = round_starts(tail)
        if found is not None and starts and found > starts[0]:
            return offset + found
        window *= 4
    return kept_rounds_start(
        view, first=first, keep_messages=keep_messages, keep_tokens=keep_tokens
    )


__all__ = [
    "TAIL_WINDOW",
    "CompactionTrigger",
    "KeptTail",
    "TriggerClause",
    "context_size",
    "kept_tail_start",
]
