"""OpenAI-style usage in Anthropic names (`model/content.py`): one conversion per shape (Chat
Completions / litellm, Responses), both through `usage_from_inclusive_counts`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from unbounded.model.content import (
    usage_from_inclusive_counts,
    usage_from_openai,
    usage_from_openai_responses,
    usage_prompt_total,
)

counts = st.integers(min_value=0, max_value=10**7)


@given(counts, counts, counts, counts)
def test_inclusive_counts_keep_the_prompt_whole(
    uncached: int, read: int, written: int, output: int
) -> None:
    usage = usage_from_inclusive_counts(uncached + read + written, read, written, output)
    assert usage == {
        "input_tokens": uncached,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": output,
    }
    assert usage_prompt_total(usage) == uncached + read + written


def test_inclusive_counts_never_go_below_zero_and_output_is_optional() -> None:
    assert usage_from_inclusive_counts(10, 8, 5) == {
        "input_tokens": 0,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 8,
    }


def test_chat_completions_usage() -> None:
    raw = {
        "prompt_tokens": 1200,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150},
    }
    assert usage_from_openai(raw) == {
        "input_tokens": 50,
        "cache_creation_input_tokens": 150,
        "cache_read_input_tokens": 1000,
        "output_tokens": 40,
    }


def test_litellm_usage_names_and_partial_counts() -> None:
    raw = {
        "prompt_tokens": 900,
        "cache_read_input_tokens": 600,
        "cache_creation_input_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": None},
    }
    assert usage_from_openai(raw) == {
        "input_tokens": 100,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 600,
    }
    assert usage_from_openai({"completion_tokens": 7}) == {"output_tokens": 7}
    assert usage_from_openai({"total_tokens": 7}) is None
    assert usage_from_openai([("prompt_tokens", 1)]) is None


def test_responses_usage() -> None:
    raw = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 800},
        "output_tokens": 120,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 5120,
    }
    assert usage_from_openai_responses(raw) == {
        "input_tokens": 104,
        "cache_creation_input_tokens": 800,
        "cache_read_input_tokens": 4096,
        "output_tokens": 120,
    }


def test_responses_usage_missing_parts_count_zero() -> None:
    zeros = {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
    assert usage_from_openai_responses(None) == zeros
    bare = usage_from_openai_responses({"input_tokens": 30, "input_tokens_details": None})
    assert bare == {**zeros, "input_tokens": 30}
    odd = usage_from_openai_responses({"input_tokens": 30, "input_tokens_details": [1]})
    assert odd == {**zeros, "input_tokens": 30}
