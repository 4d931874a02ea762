"""The normalizer's cache of repaired messages is keyed by the message object itself: a
message replaced since (a merge makes a new dict) is repaired again, even when the new dict
took the freed one's address (as CPython reuses freed memory; a replay that frees its
per-call objects early met it: the repaired copy of an older message was sent)."""

from __future__ import annotations

import pytest

from unbounded.model import normalize
from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer


def test_a_repaired_message_replaced_since_is_repaired_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every object seen at one address: what a freed message and its replacement share.
    monkeypatch.setattr(normalize, "id", lambda _: 0, raising=False)
    normalizer = MessageNormalizer([Entry.user("start")])
    use = {"type": "tool_use", "id": "a", "name": "Read", "input": {}}
    normalizer.append(Entry.assistant([use], message_id="m1"))
    normalizer.append(Entry.user([{"type": "tool_result", "tool_use_id": "b", "content": "stray"}]))
    before = normalizer.messages[-1]  # the stray result repaired; the copy cached
    normalizer.append(Entry.user("and a note"))  # merged into that user message: a new dict
    after = normalizer.messages[-1]
    assert "and a note" in str(after["content"])
    assert "and a note" not in str(before["content"])
