"""What a replay holds while it runs: its session's store keeps no second copy of the entries
(evaluation/replay_store.py), and the strategies that send the recorded history share one
(evaluation/baselines.py `History`, `feed_strategies`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from recorded_calls import long_tool_session
from replay_settings import MODEL, recorded_call, replay_settings

from unbounded.caching.blocks import content_blocks_of, message_block_digest
from unbounded.caching.husks import HuskedBlock, HuskedMessage
from unbounded.errors import ConfigError
from unbounded.evaluation.baselines import (
    History,
    NoneBaseline,
    feed_strategies,
    make_baselines,
    run_baselines,
)
from unbounded.evaluation.native_strategies import native_strategies
from unbounded.evaluation.replay import ReplayOptions, _Replayer
from unbounded.evaluation.replay_recording import ReplayRecording
from unbounded.evaluation.replay_store import ReplayStore
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript


def _long_session(calls: int) -> Transcript:
    """A recorded session of `calls` API calls with tiny content: a prompt, then per call one
    response with a tool call and its result."""
    return long_tool_session(calls, result=lambda n: f"line {n}", written=40, model=MODEL.name)


def test_the_replayed_session_store_keeps_no_entry_however_long_the_session() -> None:
    recording = ReplayRecording.of(_long_session(500))
    replayer = _Replayer(recording, ReplayOptions(baselines=False, session_memory=False))
    asyncio.run(replayer.run(None))
    session = replayer.session
    store = session.store
    assert isinstance(store, ReplayStore)
    # Every recorded entry went through the store (the last result follows the last call).
    assert len(session.entries) == 1 + 2 * 500 - 1
    assert store.appended == len(session.entries)
    assert store.entries == []  # and none of them is held a second time


def test_a_replay_store_cannot_be_reopened_once_it_was_written() -> None:
    store = ReplayStore()
    assert store.load().entries == []
    store.append([Entry.user("one"), Entry.user("two")])
    assert store.appended == 2
    with pytest.raises(ConfigError, match="kept none of its 2 entries"):
        store.load()




def _blocks(content: Any) -> list[Any]:
    """A message's blocks, husked ones included (they are no dicts)."""
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict) or type(b) is HuskedBlock]
    return content_blocks_of(content)


def _as_sent(messages: list[Any]) -> list[tuple[str, list[bytes]]]:
    """Each message's role and its blocks' digests (a husked block's is the one it carries):
    what a request sends of it, as the cache simulator sees it."""
    return [
        (
            message["role"],
            [block.digest for block in message.blocks()]
            if type(message) is HuskedMessage
            else [
                block.digest
                if type(block) is HuskedBlock
                else message_block_digest(block, message["role"], first=position == 0)
                for position, block in enumerate(_blocks(message["content"]))
            ],
        )
        for message in messages
    ]


def test_strategies_share_one_history_fed_once_until_one_replaces_its_own() -> None:
    settings = replay_settings(60_000)
    history = History(settings.prefix.scale)
    strategies = [*make_baselines(settings, history), *native_strategies(settings, history)]
    alone = NoneBaseline(settings)  # fed on its own: what every shared strategy must see
    chunk = "parser detail " * 1_500  # about 5,000 tokens a turn
    opening = [Entry.user("Fix the parser.")]
    feed_strategies(strategies, opening)
    alone.feed(opening)
    summarized = None
    for n in range(16):
        run_baselines(strategies, recorded_call(n))
        reply = [Entry.assistant([{"type": "text", "text": f"step {n} " + chunk}], message_id=f"m{n}"), Entry.user(f"go on {n}")]
        feed_strategies(strategies, reply)
        alone.feed(reply)
        own = [s for s in strategies if s.history is not history]
        if own and summarized is None:
            summarized = n
    # Every strategy still sending the recorded history reads the one shared history, fed
    # once per entry (two messages a turn, not one per strategy), equal to a lone strategy's.
    sharing = [s for s in strategies if s.history is history]
    assert [s.name for s in sharing] == ["none", "truncate", "clear_every_turn"]
    # (Settled messages of the shared one are husked: equal as sent.)
    assert _as_sent(history.normalizer.messages) == _as_sent(alone.normalizer.messages)
    assert len(history.normalizer.messages) == 1 + 2 * 16
    # The two that summarized took a history of their own, fed from then on like the rest.
    assert summarized is not None
    replaced = {s.name: s for s in strategies if s.history is not history}
    assert sorted(replaced) == ["server_compaction", "summarize_no_cache"]
    for strategy in replaced.values():
        messages = strategy.normalizer.messages
        assert messages[-1] == {"role": "user", "content": "go on 15"}
        assert len(messages) < len(history.normalizer.messages)
