"""The offline summary's documented budget: at most 4,000 tokens and at least 1,000 by
default (docs/summaries.md, "Budget"), whether it is called directly or as the summarizer; and the slack
within which an agent text is shown as its plan alone."""

from __future__ import annotations

import inspect

from conversation import says, user

from unbounded.compaction.extractive import extractive_summary
from unbounded.compaction.handover import read_handover
from unbounded.providers.extractive import ExtractiveSummarizer


def test_the_default_budget_is_the_documented_one() -> None:
    defaults = inspect.signature(extractive_summary).parameters
    assert (defaults["max_tokens"].default, defaults["min_tokens"].default) == (4_000, 1_000)
    summarizer = ExtractiveSummarizer()
    assert (summarizer.max_tokens, summarizer.min_tokens) == (4_000, 1_000)


def _plan_with_more(more: int) -> str:
    """An agent text holding a two-item plan and `more` characters besides its intro and
    items (the list's numbering, line breaks and a padding paragraph after a blank line,
    which ends the list rather than joining its last item)."""
    head = "Next I will do these:\n1. Write the parser\n2. Test the parser\n\n"
    counted = len("Next I will do these:") + len("Write the parser") + len("Test the parser")
    padding = "PADDING " + "p" * more
    return head + padding[: more - (len(head) - counted)]


def test_a_text_is_shown_as_its_plan_alone_up_to_the_slack() -> None:
    # The slack is 200 characters: 199 more than the plan and the plan stands for the text,
    # whose padding is not quoted; 200 more and the text is quoted as the agent's words.
    # (Literal figures: a boundary read from PLAN_ONLY_SLACK would move with it.)
    for more, quoted in ((199, False), (200, True)):
        text = _plan_with_more(more)
        messages = [user("please do it"), says(text)]
        plan = read_handover(messages).plan
        assert plan is not None and [item.text for item in plan.items] == [
            "Write the parser",
            "Test the parser",
        ]
        planned = len(plan.intro) + sum(len(item.text) for item in plan.items)
        assert len(text) - planned == more
        assert ("PADDING" in extractive_summary(messages)) is quoted, more
