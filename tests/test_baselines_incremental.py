"""The baselines' per-call work reuses the last call's: truncate keeps its note message while
its cut stays, and what it sends equals the request built from scratch."""

from __future__ import annotations

from unbounded.catalog import ModelInfo
from unbounded.evaluation.baselines import (
    TRUNCATION_NOTE,
    History,
    ReplaySettings,
    TruncateBaseline,
)
from unbounded.evaluation.prefix import OpaquePrefix
from unbounded.evaluation.recorded import RecordedCall
from unbounded.model.entries import Entry

MODEL = ModelInfo("claude-sonnet-4-6", "anthropic", 200_000, 64_000, 3.0, 15.0)
CHUNK = "parser detail " * 1_500  # about 5,000 tokens


def _settings(threshold: int) -> ReplaySettings:
    return ReplaySettings(
        model=MODEL,
        model_name=MODEL.name,
        prefix=OpaquePrefix(2_000),
        ttl="5m",
        context_window=200_000,
        threshold=threshold,
        start_time=0.0,
    )


def _call(index: int) -> RecordedCall:
    return RecordedCall(
        index, f"m{index}", (index,), index, index, None, MODEL.name, float(index), float(index), ()
    )


def _turn(n: int) -> list[Entry]:
    return [
        Entry.user(f"question {n}"),
        Entry.assistant([{"type": "text", "text": f"answer {n} " + CHUNK}], message_id=f"m{n}"),
    ]


def test_truncate_sends_the_same_note_message_while_its_cut_stays() -> None:
    truncate = TruncateBaseline(_settings(30_000))
    for n in range(10):
        truncate.feed(_turn(n))
    first = truncate.plan(_call(0))
    again = truncate.plan(_call(1))
    assert first.changed and again.changed
    assert again.messages[0] is first.messages[0]
    assert again.messages[0]["content"][0] == {"type": "text", "text": TRUNCATION_NOTE}
    assert again.messages[1:] == first.messages[1:]
    truncate.feed(_turn(10))
    moved = truncate.plan(_call(2))
    assert truncate.cut > 0
    assert moved.messages[0] is not first.messages[0]
    assert moved.messages[0]["content"][1:] == [{"type": "text", "text": f"question {truncate.cut // 2}"}]


def test_a_history_gives_one_list_per_state_and_a_new_one_after_any_append() -> None:
    """Strategies sharing a history read one list until it is fed; an entry merged into the
    last message (the length does not change) still gives a new list."""
    history = History(1.0)
    history.normalizer.append(Entry.user("first"))
    once = history.messages()
    assert history.messages() is once
    history.normalizer.append(Entry.user("second"))  # merged into the first user message
    merged = history.messages()
    assert merged is not once
    assert merged == history.normalizer.messages
    assert len(merged) == len(once) == 1
    counts = history.tokens.counts(merged)
    assert history.tokens.counts(merged) is counts
    assert history.tokens.total(merged) == sum(counts) > history.tokens.total(once)
