"""The offline summary's documented budget: at most 4,000 tokens and at least 1,000 by
default (docs/summaries.md, "Budget"), whether it is called directly or as the summarizer."""

from __future__ import annotations

import inspect

from unbounded.compaction.extractive import extractive_summary
from unbounded.providers.extractive import ExtractiveSummarizer


def test_the_default_budget_is_the_documented_one() -> None:
    defaults = inspect.signature(extractive_summary).parameters
    assert (defaults["max_tokens"].default, defaults["min_tokens"].default) == (4_000, 1_000)
    summarizer = ExtractiveSummarizer()
    assert (summarizer.max_tokens, summarizer.min_tokens) == (4_000, 1_000)
