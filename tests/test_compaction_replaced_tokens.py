"""What a summary replaces (`SummaryJob`'s count for the plausibility floor) is the count of
the messages it summarizes: taken from `pre_tokens` for a full compaction (it summarizes the
whole view, a kept tail included), counted anew for a partial one."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.compaction.conversation import CacheSafeParams, SummaryJob, start_summary
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.tokens.estimate import token_count_with_estimation

MODEL = "claude-sonnet-4-6"
PARAMS = CacheSafeParams(model=MODEL, system="You are a coding agent.")


class _Unused:
    """A summarizer the preparation never calls."""

    name = "unused"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> Any:
        raise AssertionError("the preparation sends nothing")


def _history(sizes: list[int], reported: list[int | None]) -> list[Entry]:
    """Rounds of a prompt and a reply of `sizes[n]` words, the reply reporting `reported[n]`
    input tokens (None: no usage)."""
    entries: list[Entry] = []
    for n, (size, tokens) in enumerate(zip(sizes, reported, strict=True)):
        entries.append(Entry.user(f"prompt {n} " + "word " * size))
        usage = None if tokens is None else {"input_tokens": tokens, "output_tokens": 20}
        entries.append(
            Entry.assistant(
                [{"type": "text", "text": f"reply {n} " + "word " * size}],
                message_id=f"msg_{n}",
                usage=usage,
            )
        )
    return entries


def _prepared(entries: list[Entry], **how: Any) -> SummaryJob:
    return asyncio.run(start_summary(entries, _Unused(), params=PARAMS, trigger="auto", **how))


@settings(max_examples=40, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=300),
            st.one_of(st.none(), st.integers(min_value=100, max_value=90_000)),
        ),
        min_size=2,
        max_size=8,
    ),
    keep=st.integers(min_value=-1, max_value=7),
    partial=st.sampled_from([None, "up_to", "from"]),
)
def test_the_replaced_count_is_the_count_of_what_is_summarized(
    rounds: list[tuple[int, int | None]], keep: int, partial: str | None
) -> None:
    entries = _history([size for size, _ in rounds], [tokens for _, tokens in rounds])
    how: dict[str, Any] = {}
    # A later round's prompt: where a kept tail or a partial compaction starts (-1: none).
    at = 2 * (1 + keep % (len(rounds) - 1)) if keep >= 0 else None
    if at is not None and partial is None:
        how["keep_from"] = entries[at].uuid
    elif at is not None:
        how["direction"], how["pivot_uuid"] = partial, entries[at].uuid
    job = _prepared(entries, **how)
    assert job._replaced_tokens == token_count_with_estimation(job.summarized)


def test_a_partial_compaction_counts_only_what_it_summarizes() -> None:
    entries = _history([50, 60, 70], [5_000, 9_000, 14_000])
    whole = _prepared(entries)
    earlier = _prepared(entries, direction="up_to", pivot_uuid=entries[4].uuid)
    assert whole._replaced_tokens == whole.pre_tokens == token_count_with_estimation(entries)
    assert earlier.pre_tokens == whole.pre_tokens
    assert earlier._replaced_tokens == token_count_with_estimation(entries[:4]) == 9_020
