"""Section 6 of the offline summary over many compactions: the user messages each summary
carries from the one before stay within the level's bound and the token budget, keeping the
first request (the task) and the newest, with a count of those left out between."""

from __future__ import annotations

import re

from conversation import read, says, user

from unbounded.compaction.carried import carried_user_messages, left_out_user_messages
from unbounded.compaction.extractive import _LEVELS, extractive_summary
from unbounded.compaction.prompts import summary_message_text
from unbounded.tokens.estimate import rough_token_count

MAX_TOKENS = 4_000
PER_PART = 3
TIGHT_TOKENS = 900


def _request(part: int, number: int) -> str:
    # Long enough that a few dozen of them fill the 4,000-token budget on their own.
    return f"Request {part}.{number}: " + " ".join(f"step{part}x{number}w{w}" for w in range(30))


def _part(previous: str | None, part: int) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = []
    if previous is not None:
        messages += [user(summary_message_text(previous)), says("Continuing.")]
    for number in range(PER_PART):
        messages += [user(_request(part, number)), *read(f"r{part}-{number}", f"/w/m{number}.py")]
    return messages


def _summaries(compactions: int) -> list[str]:
    summaries: list[str] = []
    previous: str | None = None
    for part in range(compactions + 1):
        previous = extractive_summary(_part(previous, part), max_tokens=MAX_TOKENS)
        summaries.append(previous)
    return summaries


def _section_six(summary: str) -> str:
    return summary.split("6. All user messages:", 1)[1].split("7. Pending Tasks:", 1)[0]


def test_a_summary_after_many_compactions_stays_within_its_budget() -> None:
    summaries = _summaries(40)
    assert max(rough_token_count(s) for s in summaries) <= MAX_TOKENS
    last = summaries[-1]
    listed = carried_user_messages(last)
    # The task and the newest requests stay; the ones between are counted, not listed.
    assert listed[0].startswith("Request 0.0:")
    assert listed[-1].startswith(f"Request 40.{PER_PART - 1}:")
    assert any(m.startswith(f"Request 39.{PER_PART - 1}:") for m in listed)
    assert len(listed) + left_out_user_messages(last) == 41 * PER_PART
    assert not any(m.startswith("Request 20.") for m in listed)


def test_the_carried_list_keeps_the_levels_bound() -> None:
    # With few requests per part the summary fits at the richest level, whose bound decides.
    last = _summaries(40)[-1]
    section = _section_six(last)
    carried = section.split("Listed by the previous summary:", 1)[1]
    items = re.findall(r"^   - (.*)$", carried, re.M)
    quoted = [i for i in items if i.startswith('"Request')]
    bounds = [level.carried_messages for level in _LEVELS]
    assert len(quoted) - PER_PART in bounds


def test_a_short_history_is_carried_whole() -> None:
    # Two compactions: every request listed, nothing counted as left out.
    last = _summaries(2)[-1]
    listed = carried_user_messages(last)
    # Quotes are clipped to the level's length; their labels tell them apart.
    assert [m.split(":")[0] for m in listed] == [
        f"Request {p}.{n}" for p in range(3) for n in range(PER_PART)
    ]
    assert left_out_user_messages(last) == 0
    assert "more)" not in _section_six(last)


def test_a_tight_budget_cuts_the_carried_list_below_the_lean_bound() -> None:
    # Past the lean level the carried list is cut like the other lists, down to the task.
    previous = _summaries(40)[-1]
    lean = extractive_summary(_part(previous, 41), max_tokens=MAX_TOKENS)
    tight = extractive_summary(_part(previous, 41), max_tokens=TIGHT_TOKENS)
    assert rough_token_count(tight) <= TIGHT_TOKENS < rough_token_count(lean)
    carried = _section_six(tight).split("Listed by the previous summary:", 1)[1]
    assert (
        len(re.findall(r'^   - "Request [0-9]+\.', carried, re.M))
        < 1 + _LEVELS[-1].carried_messages
    )
    listed = carried_user_messages(tight)
    assert listed[0].startswith("Request 0.0:")
    assert len(listed) + left_out_user_messages(tight) == 42 * PER_PART
