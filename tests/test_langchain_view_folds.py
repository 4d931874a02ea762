"""The middleware hands a compaction the folds its view kept of the summarized messages
(`PrefixFolds.folds_of`): the summary does not walk them for the tools called and the
message count, and the folds are those a walk of them gives."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

import unbounded.compaction.auto as auto_module
import unbounded.compaction.conversation as conversation_module
from test_langchain_compaction_incremental import drive
from unbounded.compaction.view_folds import ViewFolds


@pytest.mark.parametrize("seed", range(3))
def test_every_compaction_of_a_warm_middleware_takes_the_views_folds(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    given: list[tuple[Any, Any]] = []
    walks: list[int] = []
    real_start = auto_module.start_summary
    real_tools = conversation_module.discovered_tools

    async def start(*args: Any, **kwargs: Any) -> Any:
        folds, view = kwargs.get("folds"), kwargs.get("view")
        fresh = None
        if view is not None:
            fresh = ViewFolds()
            fresh.advance(list(view))
        given.append((folds, fresh))
        return await real_start(*args, **kwargs)

    def tools(entries: Any) -> list[str]:
        walks.append(len(entries))
        return real_tools(entries)

    monkeypatch.setattr(auto_module, "start_summary", start)
    monkeypatch.setattr(conversation_module, "discovered_tools", tools)
    _, compacted, _ = drive(monkeypatch, seed, from_scratch=False)
    assert len(compacted) >= 2 and len(given) == len(compacted)
    for folds, fresh in given:
        assert folds is not None and fresh is not None
        assert folds.facts() == fresh.facts()
    assert walks == []  # no compaction walked its view for the tools


def _round(n: int, tool: str) -> list[Any]:
    from langchain_core.messages import AIMessage, ToolMessage

    call = {"id": f"c{n}", "name": tool, "args": {}}
    usage = {"input_tokens": 100 * n, "output_tokens": 5, "total_tokens": 100 * n + 5}
    return [
        AIMessage(content=f"step {n}", tool_calls=[call], id=f"ai{n}", usage_metadata=usage),
        ToolMessage(content=f"out {n}", tool_call_id=f"c{n}", id=f"t{n}"),
    ]


def _view_of(messages: list[Any]) -> Any:
    from unbounded.integrations._langchain_view import ConversationView
    from unbounded.integrations.langchain import _convert

    view = ConversationView(_convert)
    view.sync(messages, frozenset())
    return view


def _folds(view: Any) -> Any:
    entries = list(view.entries)
    return view.folds.folds_of(entries, view.entries, [e for e in entries if e is not None])


def test_a_view_built_again_folds_its_new_messages_from_their_start() -> None:
    from langchain_core.messages import HumanMessage

    first = [HumanMessage("go", id="h"), *_round(1, "read"), *_round(2, "grep")]
    view = _view_of(first)
    assert _folds(view).facts() == (["grep", "read"], 5, False)
    other = [HumanMessage("again", id="h2"), *_round(9, "bash")]  # another conversation
    view.sync(other, frozenset())
    assert _folds(view).facts() == (["bash"], 3, False)


def test_a_record_the_view_replaces_by_one_of_another_kind_stops_its_folds() -> None:
    from langchain_core.messages import HumanMessage

    from unbounded.model.entries import Entry

    messages = [HumanMessage("go", id="h"), *_round(1, "read"), *_round(2, "grep")]
    view = _view_of(messages)
    assert _folds(view) is not None
    odd = Entry.assistant([{"type": "text", "text": "x"}], message_id="m")
    view.clear_results({2: ("c1", odd)})  # (the middleware's own clears are user records)
    assert _folds(view) is None


@pytest.mark.parametrize("seed", range(2))
def test_the_summary_requests_markers_are_placed_from_the_views_unmarked_messages(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    from unbounded.caching import breakpoints

    defaults: list[int] = []
    during: list[int] = []
    forking = [False]
    real_default = conversation_module.place_fork_breakpoint
    real_fork = breakpoints.CacheBreakpointPlanner.plan_fork
    real_unmarked = breakpoints._unmarked_messages

    def default(request: Any, skip: bool) -> Any:
        defaults.append(1)
        return real_default(request, skip)

    def unmarked(messages: Any) -> Any:
        if forking[0]:
            during.append(len(messages or []))
        return real_unmarked(messages)

    import unbounded.integrations.langchain as middleware_module

    checked: list[int] = []

    def checking(planner: Any) -> Any:
        def place(request: Any, skip: bool) -> Any:
            # The whole plan (the markers' flat positions too) is the from-scratch one.
            forking[0] = True
            try:
                planned = real_fork(planner, request, skip_cache_write=skip)
            finally:
                forking[0] = False
            assert planned == breakpoints.plan_cache_breakpoints(request, skip_cache_write=skip)
            checked.append(1)
            return planned.request

        return place

    from unbounded.integrations._langchain_view import ConversationView

    real_forked = ConversationView.fork_planner
    forks: list[tuple[int, int]] = []

    def fork_planner(self: ConversationView, messages: Any) -> Any:
        before = len(during)
        forking[0] = True
        try:
            return real_forked(self, messages)
        finally:
            forking[0] = False
            forks.append((len(during) - before, len(self._swaps)))

    monkeypatch.setattr(ConversationView, "fork_planner", fork_planner)
    monkeypatch.setattr(middleware_module, "_fork_planner", checking)
    monkeypatch.setattr(conversation_module, "place_fork_breakpoint", default)
    monkeypatch.setattr(breakpoints, "_unmarked_messages", unmarked)
    _, compacted, taken = drive(monkeypatch, seed, from_scratch=False)
    assert len(compacted) >= 2 and taken >= 2
    # Every summary request that repeats the view's messages was planned by its planner.
    assert len(defaults) == len(compacted) - taken == len(compacted) - len(checked)
    assert during and max(during) == 1  # and read only its prompt for markers
    # The swaps made when results were cleared are taken as the view unmarked them (only a
    # message swapped anew at the compaction, for this call's clears, is read).
    assert forks and all(swaps >= 8 and reads <= 2 for reads, swaps in forks)
