"""The rules added when the session-file readers were attacked (session 15) that
tests/test_readers_attack15.py does not reach on its own: the sums of counts in every
agent's usage names, and a batch that survives one session's unexpected crash."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.model.record_checks import (
    COUNT_LIMIT,
    count_problem,
    token_counts_problem,
    usage_problem,
)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": COUNT_LIMIT // 2, "completion_tokens": COUNT_LIMIT // 2},
        {"prompt_tokens_details": {"cached_tokens": COUNT_LIMIT - 1, "audio_tokens": 1}},
    ],
    ids=["top-level", "details"],
)
def test_counts_of_one_usage_that_add_up_past_the_limit_are_named(usage: dict[str, Any]) -> None:
    problem = token_counts_problem(usage, "response.usage")
    assert problem is not None and "add up to" in problem and "response.usage." in problem


def test_counts_that_add_up_to_just_below_the_limit_pass() -> None:
    usage = {"prompt_tokens": COUNT_LIMIT // 2, "completion_tokens": COUNT_LIMIT // 2 - 1}
    assert token_counts_problem(usage, "response.usage") is None
    assert usage_problem({"input_tokens": COUNT_LIMIT - 1}) is None


def test_a_cache_creation_split_that_adds_up_past_the_limit_is_named() -> None:
    split = {
        "ephemeral_5m_input_tokens": COUNT_LIMIT // 2,
        "ephemeral_1h_input_tokens": COUNT_LIMIT // 2,
    }
    problem = usage_problem({"input_tokens": 1, "cache_creation": split})
    assert problem is not None and "message.usage.cache_creation.ephemeral_1h" in problem


def test_a_cache_creation_split_that_is_not_an_object_is_named() -> None:
    problem = usage_problem({"input_tokens": 1, "cache_creation": [5]})
    assert problem == "field 'message.usage.cache_creation' should be an object, found list"


def test_a_single_count_past_the_limit_is_named_on_its_own() -> None:
    # compactMetadata.preTokens and receipt counts are checked alone, with no sum after.
    assert count_problem(COUNT_LIMIT - 1, "compactMetadata.preTokens") is None
    problem = count_problem(COUNT_LIMIT, "compactMetadata.preTokens")
    assert problem is not None and "'compactMetadata.preTokens' is too large" in problem
