"""The Anthropic format adds the compaction beta when a request's messages carry a server
compaction block, reading only the messages the previous request did not have."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from unbounded.wire.anthropic import AnthropicMessages
from unbounded.wire.context_edits import COMPACTION_BETA


class CountingMessage(dict[str, Any]):
    """A message dict that counts how often its content is read."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        if key == "content":
            CountingMessage.reads += 1
        return super().get(key, default)


def turn(n: int) -> list[dict[str, Any]]:
    return [
        CountingMessage(role="assistant", content=[{"type": "tool_use", "id": f"t{n}", "name": "read", "input": {}}]),
        CountingMessage(role="user", content=[{"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}]),
    ]


def betas(wire: AnthropicMessages, messages: list[dict[str, Any]]) -> list[str]:
    return wire.betas({"model": "m", "messages": messages})  # type: ignore[typeddict-item]


COMPACTION = {"role": "assistant", "content": [{"type": "compaction", "content": "summary"}]}


def test_a_growing_history_is_read_once_not_every_call() -> None:
    wire = AnthropicMessages()
    history = [CountingMessage(role="user", content="start")]
    for n in range(50):
        history += turn(n)
        assert betas(wire, history) == []
    # Each message read once: 101 messages, not 2 + 4 + ... + 101.
    assert CountingMessage.reads == len(history)


def test_a_compaction_block_is_found_wherever_it_comes() -> None:
    wire = AnthropicMessages()
    history = [{"role": "user", "content": "start"}, *turn(0)]
    assert betas(wire, history) == []
    with_block = [*history, COMPACTION, {"role": "user", "content": "go on"}]
    assert betas(wire, with_block) == [COMPACTION_BETA]
    assert betas(wire, with_block) == [COMPACTION_BETA]  # found again, not remembered as plain
    # An earlier message replaced by a new dict that carries the block is read again.
    replaced = [history[0], COMPACTION, history[2]]
    assert betas(wire, replaced) == [COMPACTION_BETA]
    # Back to a history without it: no beta.
    assert betas(wire, history) == []
    # A beta the request names already is not added twice.
    assert wire.betas({"model": "m", "messages": with_block, "betas": [COMPACTION_BETA]}) == [COMPACTION_BETA]  # type: ignore[typeddict-item]


def test_a_copied_format_compares_equal_and_starts_afresh() -> None:
    wire = AnthropicMessages(cache_edits=True)
    betas(wire, [{"role": "user", "content": "start"}])
    for other in (copy.deepcopy(wire), pickle.loads(pickle.dumps(wire))):
        assert other == wire and hash(other) == hash(wire)
        assert betas(other, [COMPACTION]) == [COMPACTION_BETA]
