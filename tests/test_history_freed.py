"""A history a strategy lets go (a summary replaces it) is freed at once with its messages,
not left to the cyclic collector: the CLI collects seldom while it replays, and a replaced
history of real sessions held megabytes until a full collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from unbounded.evaluation.baselines import History, MessageTokens, _GivenLists
from unbounded.model.entries import Entry


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _left_for_the_collector() -> list[str]:
    """The histories and their parts only the cyclic collector would have freed (objects of
    other tests, e.g. a failed test's traceback, do not count)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        kinds = (History, _GivenLists, MessageTokens)
        return [type(o).__name__ for o in gc.garbage if isinstance(o, kinds)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _turns(history: History, count: int) -> None:
    history.normalizer.append(Entry.user("go"))
    for n in range(count):
        call = {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {"path": f"f{n}"}}
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x"}
        history.normalizer.append(Entry.assistant([call], message_id=f"r{n}"))
        history.messages()
        history.normalizer.append(Entry.user([result]))
        history.tokens.counts(history.messages())  # the counter compares through the history


def test_a_history_in_use_leaves_no_cycle_behind(no_collector: None) -> None:
    history = History(1.0, [Entry.user("earlier")])
    _turns(history, 20)
    assert history.tokens.total(history.messages()) > 0
    del history
    assert _left_for_the_collector() == []  # all freed by count


def test_a_replaced_history_goes_with_its_messages(no_collector: None) -> None:
    history = History(1.0)
    _turns(history, 5)
    kept = history.messages()[1]  # a message held elsewhere stays
    history = History(1.0, [Entry.user("a summary")])  # what `replace_history` does
    assert _left_for_the_collector() == []
    assert kept["role"] == "assistant"
