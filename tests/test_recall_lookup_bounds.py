"""Boundaries of recall's answers (`unbounded.recall.lookup`) the mutation check found unheld:
the character budget a result or a search answer is built to, how it shrinks when the text is
dense, what is left when the header takes the whole budget, and how matches are ranked."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.large_output import CHARS_PER_TOKEN
from unbounded.model.entries import Entry
from unbounded.recall import RecallContext, RecallRequest, TranscriptIndex
from unbounded.recall.lookup import MIN_BUDGET_TOKENS, answer_recall
from unbounded.tokens.budget import cap_token_count, fits

WHEN = "2025-06-01T12:00:00.000Z"
FOOTER_ROOM = 60
"""Characters a result answer keeps free for its footer (`_call_answer`)."""


def context_of(entries: list[Entry], view: list[Entry], budget: int) -> RecallContext:
    return RecallContext(
        entries=entries,
        view=view,
        cleared_ids=(),
        index=TranscriptIndex().update(entries),
        budget_tokens=budget,
    )


def call(tool_id: str, command: str, output: Any) -> list[Entry]:
    return [
        Entry.assistant(
            [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}],
            timestamp=WHEN,
        ),
        Entry.user(
            [{"type": "tool_result", "tool_use_id": tool_id, "content": output}], timestamp=WHEN
        ),
    ]


# -- a result's answer --------------------------------------------------------------------------


def test_a_line_longer_than_the_budget_is_cut_to_what_the_header_and_footer_leave() -> None:
    budget = 300
    entries = [Entry.user("go"), *call("a", "yes", "y" * 10_000)]
    text = answer_recall(RecallRequest("id", "a"), context_of(entries, entries, budget)).text
    header, body = text.split("\n")
    room = CHARS_PER_TOKEN * budget - len(header) - len("id=a") - FOOTER_ROOM
    assert body == "y" * (room - 1) + "…"


def test_a_header_that_leaves_no_room_keeps_only_the_cut_mark_of_the_output() -> None:
    # A long command and id make the header and footer alone more than the minimum budget:
    # the output shrinks to its cut mark, and the answer is cut to the budget after it.
    tool_id = "call_" + "x" * 30
    output = "\n".join(f"line {n}" for n in range(3_000))
    entries = [Entry.user("go"), *call(tool_id, " ".join(["make test"] * 20), output)]
    text = answer_recall(
        RecallRequest("id", tool_id), context_of(entries, entries, MIN_BUDGET_TOKENS)
    ).text
    assert fits(text, MIN_BUDGET_TOKENS)
    lines = text.split("\n")
    assert (
        lines[0].startswith("[recall: result of ")
        and lines[1] == "…"
        and lines[2].startswith("[lines 1-1 of 3000; recall id=call_")
    )


def test_a_dense_result_shrinks_by_a_quarter_until_it_fits_and_keeps_its_footer() -> None:
    budget = 400
    output = "\n".join("数据" * 12 + f" {n}" for n in range(2_000))
    entries = [Entry.user("go"), *call("a", "dump", output)]
    text = answer_recall(RecallRequest("id", "a"), context_of(entries, entries, budget)).text
    assert fits(text, budget) and text.endswith("for more]")
    # One more quarter off would have been needed only if this one did not fit: the answer
    # takes more than three quarters of what fits, less what a line and the footer take.
    assert cap_token_count(text) > budget * 3 // 4 - 40


# -- a search's answer --------------------------------------------------------------------------


def passages(*texts: str) -> tuple[list[Entry], list[Entry]]:
    """User messages the model no longer sees (outside the view), then one it does."""
    entries = [Entry.user(text, timestamp=WHEN) for text in texts] + [
        Entry.user("now", timestamp=WHEN)
    ]
    return entries, entries[-1:]


def search(entries: list[Entry], view: list[Entry], query: str, budget: int = 2_000) -> str:
    return answer_recall(RecallRequest("query", query), context_of(entries, view, budget)).text


def order_of(text: str, *markers: str) -> list[str]:
    return sorted(markers, key=text.index)


def test_more_counted_matches_rank_first_up_to_ten() -> None:
    # Two words each time; the count share is the matches, at most 10, ties to the later one.
    entries, view = passages("nine " + "alpha " * 8 + "beta", "eight " + "alpha " * 7 + "beta")
    assert order_of(search(entries, view, "alpha beta"), "nine", "eight") == ["nine", "eight"]
    entries, view = passages("eleven " + "alpha " * 10 + "beta", "ten " + "alpha " * 9 + "beta")
    assert order_of(search(entries, view, "alpha beta"), "eleven", "ten") == ["ten", "eleven"]


def test_the_whole_query_as_a_phrase_ranks_first() -> None:
    entries, view = passages("phrase alpha beta", "apart " + "alpha x beta " * 5)
    assert order_of(search(entries, view, "alpha beta"), "phrase", "apart") == ["phrase", "apart"]


def test_passages_that_fill_the_budget_exactly_are_all_shown() -> None:
    budget = MIN_BUDGET_TOKENS
    entries, view = passages("needle one", "needle two")
    pad = CHARS_PER_TOKEN * budget - len(search(entries, view, "needle", budget))
    filler = (" wording" * 100)[:pad]
    entries, view = passages("needle one" + filler, "needle two")
    text = search(entries, view, "needle", budget)
    assert len(text) == CHARS_PER_TOKEN * budget and text.endswith("\nneedle one" + filler)
    assert "\nneedle two\n" in text and "not shown" not in text


def test_passages_past_the_budget_are_counted_not_shown() -> None:
    # Equal scores: the later passage first, so the long one comes last and does not fit.
    entries, view = passages("needle three " + "z " * 2_000, "needle one", "needle two")
    text = search(entries, view, "needle", MIN_BUDGET_TOKENS)
    assert (
        order_of(text, "needle two", "needle one") == ["needle two", "needle one"]
        and "needle three" not in text
    )
    assert text.endswith(
        "\n[1 more passage(s) not shown: use more specific words, or recall a tool result by its id]"
    )


def test_a_first_passage_past_the_budget_is_cut_to_what_the_header_leaves() -> None:
    budget = MIN_BUDGET_TOKENS
    entries, view = passages("needle needle" + " wording" * 600, "other needle")
    text = search(entries, view, "needle", budget)
    header, label, cut, note = text.split("\n")
    assert header.startswith("[recall: 2 passage(s)") and label.startswith("--- user message")
    assert (
        note
        == "[1 more passage(s) not shown: use more specific words, or recall a tool result by its id]"
    )
    # The whole budget does not fit with the note; three quarters of it does, the first
    # passage's block cut to what the header leaves.
    assert len(text) - len(note) - 1 == CHARS_PER_TOKEN * budget * 3 // 4 + 1 and cut.endswith("…")


def test_a_search_header_that_leaves_no_room_keeps_only_the_cut_mark() -> None:
    # A long, dense query fills the header; a dense first passage keeps the answer over budget
    # until the character budget is below the header's length.
    query = "needle 鬱龜鑿驪 " + " ".join(f"w{n}" for n in range(32))
    entries, view = passages("needle needle " + "数据" * 190, "needle")
    text = search(entries, view, query, MIN_BUDGET_TOKENS)
    assert fits(text, MIN_BUDGET_TOKENS)
    lines = text.split("\n")
    assert lines[1] == "…" and lines[2].startswith("[1 more passage(s) not shown")
