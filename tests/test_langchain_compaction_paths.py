"""The middleware's compacting call takes the view's folds (`PrefixFolds.folds_of`) and its
unmarked messages (`ConversationView.fork_planner`); without them the summary walks the
summarized records and unmarks every message again. Over the random conversations of
`langchain_compaction_differential` (media, errors, messages without ids or replaced by id,
removals, serialized copies, a new middleware on the state, a kept tail of 0, message and
token triggers, failing summaries, Anthropic-shaped replies, leading system messages), both
ways send the same summary requests and write the same updates, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

import langchain_compaction_differential as driver
import unbounded.integrations.langchain as middleware_module
from unbounded.compaction.conversation import place_fork_breakpoint
from unbounded.compaction.view_folds import PrefixFolds


def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """One clock reading for every record (the two runs' records compare byte for byte)."""
    import unbounded.integrations._langchain_view as view_module
    import unbounded.model.entries as entries_module

    for module in (view_module, middleware_module, entries_module):
        monkeypatch.setattr(module, "now_iso", lambda: "2026-11-29T12:00:00.000Z")


def without_the_views_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary walks the records and unmarks the messages itself."""
    monkeypatch.setattr(PrefixFolds, "folds_of", lambda self, *args: None)
    monkeypatch.setattr(middleware_module, "_fork_planner", lambda planner: place_fork_breakpoint)


@pytest.mark.parametrize("seed", [2, 6, 13, 45])
def test_the_views_folds_and_unmarked_messages_change_no_byte(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    fixed_clock(monkeypatch)
    driver.TAKEN[0] = 0
    monkeypatch.setattr(driver, "FULL", True)
    real_folds = PrefixFolds.folds_of
    taken: list[bool] = []

    def counted(self: PrefixFolds, *args: Any) -> Any:
        out = real_folds(self, *args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(PrefixFolds, "folds_of", counted)
    fast = driver.run(seed)
    without_the_views_work(monkeypatch)
    slow = driver.run(seed)
    assert sum(taken) >= 2  # compactions took the view's folds
    assert len(fast["requests"]) >= 2
    assert fast["requests"] == slow["requests"]
    assert fast["events"] == slow["events"]
