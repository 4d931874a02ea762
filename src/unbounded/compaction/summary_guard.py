"""The sanity guard every compaction passes before anything is written.

A summary that collapsed (a parser stopped at a quoted tag, a model answered in two lines, a
notes file that was never filled) looks like success to the code around it, and the agent
then goes on with almost nothing. So every compaction's summary (a model's, the offline
one, session notes) is checked, and one that fails is a failed compaction: the summary call
is tried again by the fallback path, then the failure counts towards the circuit breaker;
the history is never replaced by it.

The rule:

- **Size floor**: at least 2 % of the tokens it replaces, never asked to exceed 1,500 tokens
  nor below 300 (`Policy.summary_floor_min_tokens`, scaled down with a small window like
  the policy's other budgets), never more than a quarter of what it replaces (a short
  conversation may have a short summary), never more than the leanest offline summary of the same
  conversation (a conversation of a few huge tool outputs holds few facts: a short summary
  of it lost nothing), and never more than the output budget the summary request gave
  (`max_tokens`: in a small window that room is small, and a summary, the offline fallback
  above all, cannot be refused for fitting the room it was asked to fit). For 50,000 tokens
  replaced that is 1,000 tokens; for 75,000 and more, 1,500. Counts are length / 4.
- **Sections**, for a nine-section summary: at least 7 of the nine headings recognised
  (by their words, in any numbering or markup), and always the three a continuation needs:
  Primary Request, Pending Tasks, Current Work (or "Work Completed" for a partial
  compaction). A sub-agent's continuation summary: 4 of its five parts, always Task
  Overview, Current State and Next Steps.
- **Session notes**: the "Current State" section must hold something.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from unbounded.model.profile import SectionSpec
from unbounded.tokens.estimate import rough_token_count

FLOOR_SHARE = 0.02
FLOOR_MIN_TOKENS = 300
FLOOR_MAX_TOKENS = 1_500
MIN_SECTIONS = 7

SECTIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Primary Request and Intent", re.compile(r"primary\s+request", re.I)),
    ("Key Technical Concepts", re.compile(r"technical\s+concepts", re.I)),
    ("Files and Code Sections", re.compile(r"files\s+and\s+code", re.I)),
    ("Errors and fixes", re.compile(r"errors?\s+and\s+fix", re.I)),
    ("Problem Solving", re.compile(r"problem\s+solving", re.I)),
    ("All user messages", re.compile(r"user\s+messages", re.I)),
    ("Pending Tasks", re.compile(r"pending\s+tasks", re.I)),
    ("Current Work", re.compile(r"current\s+work|work\s+completed", re.I)),
    ("Next Step", re.compile(r"next\s+step|context\s+for\s+continuing", re.I)),
)
"""The nine sections a summary is asked for, and how each heading is recognised."""
REQUIRED_SECTIONS = ("Primary Request and Intent", "Pending Tasks", "Current Work")


NINE_SECTIONS = SectionSpec(SECTIONS, REQUIRED_SECTIONS, MIN_SECTIONS)
"""The full and partial compaction prompts' nine sections."""
CONTINUATION_SECTIONS = SectionSpec(
    (
        ("Task Overview", re.compile(r"task\s+overview", re.I)),
        ("Current State", re.compile(r"current\s+state", re.I)),
        ("Important Discoveries", re.compile(r"discoveries", re.I)),
        ("Next Steps", re.compile(r"next\s+steps?", re.I)),
        ("Context to Preserve", re.compile(r"context\s+to\s+preserve", re.I)),
    ),
    ("Task Overview", "Current State", "Next Steps"),
    4,
)
"""The sub-agent continuation prompt's five parts."""
ANY_SECTIONS = SectionSpec((), (), 0)
"""For a prompt of the caller's own: only the size is checked."""
_NOTES_CURRENT_STATE = re.compile(r"^#\s*Current State\s*$(.*?)(?=^#\s|\Z)", re.M | re.S)

SummaryKind = Literal["summary", "notes"]


@dataclass(frozen=True, slots=True)
class SummaryVerdict:
    """What the guard found: whether the summary passes, and why not."""

    ok: bool
    tokens: int
    floor: int
    missing_sections: tuple[str, ...] = ()
    reason: str = ""


def summary_floor(replaced_tokens: int, *, min_tokens: int = FLOOR_MIN_TOKENS) -> int:
    """The smallest plausible summary of `replaced_tokens` tokens (see the module doc);
    `min_tokens` is the floor's own minimum (`Policy.summary_floor_min_tokens`, scaled for a
    small window)."""
    floor = min(FLOOR_MAX_TOKENS, max(min_tokens, round(replaced_tokens * FLOOR_SHARE)))
    return min(floor, max(1, replaced_tokens // 4))


def missing_sections(text: str, spec: SectionSpec = NINE_SECTIONS) -> tuple[str, ...]:
    """The headings of `spec` this text lacks."""
    return tuple(name for name, pattern in spec.sections if not pattern.search(text))


def _headings_text(text: str) -> str:
    """Only the lines that can be headings: short, not list items."""
    return "\n".join(
        line for line in text.splitlines() if len(line) <= 120 and not line.lstrip().startswith("-")
    )


def check_summary(
    text: str,
    replaced_tokens: int,
    *,
    kind: SummaryKind = "summary",
    spec: SectionSpec = NINE_SECTIONS,
    lean_tokens: Callable[[], int] | None = None,
    room_tokens: int | None = None,
    min_tokens: int = FLOOR_MIN_TOKENS,
) -> SummaryVerdict:
    """Check a compaction's summary (or session notes) against the rule above; `spec` names
    the sections the prompt asked for (a provider may declare its own, `summary_sections`);
    `lean_tokens` gives the leanest offline summary's size, asked only for a small summary;
    `room_tokens` is the output budget the summary request gave (the floor stays under it);
    `min_tokens` the floor's minimum (`Policy.summary_floor_min_tokens`)."""
    tokens = rough_token_count(text)
    floor = summary_floor(replaced_tokens, min_tokens=min_tokens)
    if room_tokens is not None and room_tokens > 0:
        floor = min(floor, room_tokens)
    if tokens < floor and lean_tokens is not None:
        floor = min(floor, lean_tokens())
    if tokens < floor:
        return SummaryVerdict(
            False,
            tokens,
            floor,
            reason=f"the summary holds {tokens:,} tokens for {replaced_tokens:,} replaced "
            f"(at least {floor:,} expected)",
        )
    if kind == "notes":
        match = _NOTES_CURRENT_STATE.search(text)
        body = match.group(1) if match else ""
        filled = [
            line for line in body.splitlines() if line.strip() and not line.strip().startswith("_")
        ]
        if not filled:
            return SummaryVerdict(
                False, tokens, floor, ("Current State",), "the notes' Current State is empty"
            )
        return SummaryVerdict(True, tokens, floor)
    missing = missing_sections(_headings_text(text), spec)
    required = [name for name in spec.required if name in missing]
    if required or len(spec.sections) - len(missing) < spec.minimum:
        return SummaryVerdict(
            False,
            tokens,
            floor,
            missing,
            reason="the summary lacks the section(s) " + ", ".join(required or missing),
        )
    return SummaryVerdict(True, tokens, floor, missing)


__all__ = [
    "ANY_SECTIONS",
    "CONTINUATION_SECTIONS",
    "FLOOR_MAX_TOKENS",
    "FLOOR_MIN_TOKENS",
    "FLOOR_SHARE",
    "MIN_SECTIONS",
    "NINE_SECTIONS",
    "REQUIRED_SECTIONS",
    "SECTIONS",
    "SectionSpec",
    "SummaryVerdict",
    "check_summary",
    "missing_sections",
    "summary_floor",
]
