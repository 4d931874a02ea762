"""Rules of the LangChain middleware's conversation view (`integrations/_langchain_view.py`)
that the mutation check found no test holding: a grown conversation is matched by its two
ends, a changed or shrunk one keeps what still matches and converts only the rest (to the
same count a new view gives), messages without ids are matched by the messages themselves,
and the tail count anchors on the newest reported usage of a response of its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from test_langchain_view import history
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.integrations import _langchain_view
from unbounded.integrations._langchain_view import ConversationView, tail_count
from unbounded.integrations.langchain import _convert
from unbounded.model.entries import Entry

NO_STALE: frozenset[str] = frozenset()


def _counting() -> tuple[list[BaseMessage], Any]:
    converted: list[BaseMessage] = []

    def convert(message: BaseMessage, anchored: bool, stamp: str) -> Entry | None:
        converted.append(message)
        return _convert(message, anchored, stamp)

    return converted, convert


def _fresh_total(messages: list[BaseMessage]) -> int:
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    return view.counter.total


def test_a_grown_conversation_is_matched_by_its_two_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    converted, convert = _counting()
    view = ConversationView(convert)
    messages = history(12)
    view.sync(messages[:-4], NO_STALE)
    compared: list[int] = []
    real = _langchain_view.shared_prefix_length

    def counting(*args: Any) -> int:
        compared.append(1)
        return real(*args)

    monkeypatch.setattr(_langchain_view, "shared_prefix_length", counting)
    converted.clear()
    copies = [message.model_copy() for message in messages]  # a checkpoint's copies
    view.sync(copies, NO_STALE)
    assert compared == [] and converted == copies[-4:]
    assert view.held == len(messages) and view.counter.total == _fresh_total(messages)


def test_a_changed_tail_converts_only_the_new_messages_to_a_new_view_s_count() -> None:
    converted, convert = _counting()
    view = ConversationView(convert)
    messages = history(12)
    view.sync(messages, NO_STALE)
    changed = [*messages[:-2], *history(14)[-2:]]
    changed[-2].id, changed[-1].id = "ai_new", "tool_new"
    converted.clear()
    view.sync(changed, NO_STALE)
    assert [m.id for m in converted] == ["ai_new", "tool_new"]
    assert view.keys == [m.id for m in changed]
    assert view.counter.total == _fresh_total(changed)
    assert len(view.normalizer.messages) == len(_fresh_view(changed).normalizer.messages)


def _fresh_view(messages: list[BaseMessage]) -> ConversationView:
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    return view


def test_a_shrunk_conversation_keeps_what_still_matches() -> None:
    converted, convert = _counting()
    view = ConversationView(convert)
    messages = history(12)
    view.sync(messages, NO_STALE)
    converted.clear()
    view.sync(messages[:9], NO_STALE)  # a compaction cut it, say
    assert converted == [] and view.held == 9
    assert view.counter.total == _fresh_total(messages[:9])


def test_without_a_clearing_rule_nothing_is_left_out_as_settled() -> None:
    messages: list[BaseMessage] = [HumanMessage("Hello.", id="h0")]
    for n in range(6):
        reply = AIMessage(content=f"Answer {n}. " * 40, id=f"ai_{n}")
        reply.usage_metadata = {
            "input_tokens": 900 + 300 * n,
            "output_tokens": 90,
            "total_tokens": 990 + 300 * n,
        }
        messages += [reply, HumanMessage(f"Question {n}.", id=f"h{n + 1}")]
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    assert view.base == 0 and len(view.entries) == len(messages)
    assert view.settled_after_clears(messages, 0) == 0
    clearing = ConversationView(_convert, lambda names: list(names))
    clearing.sync(messages, NO_STALE)
    assert clearing.base > 0  # what a clearing rule may leave out, for contrast
    assert clearing.settled_after_clears(messages, 0) > 0


def test_messages_without_ids_are_matched_by_the_messages_themselves() -> None:
    converted, convert = _counting()
    view = ConversationView(convert)
    messages: list[BaseMessage] = [HumanMessage("Read the modules."), AIMessage("Which ones?")]
    view.sync(messages, NO_STALE)
    replaced = [messages[0], AIMessage("All of them, one by one.")]
    converted.clear()
    view.sync(replaced, NO_STALE)
    assert converted == [replaced[1]]
    assert view.counter.total == _fresh_total(replaced) != _fresh_total(messages)
    # Kept across a change (the view restarts from what still matches), and matched again
    # when the conversation grows.
    changed = [*replaced, HumanMessage("Start with the parser.")]
    view.sync(changed, NO_STALE)
    changed[-1] = HumanMessage("Start with the lexer.")
    converted.clear()
    view.sync(changed, NO_STALE)
    grown = [*changed, AIMessage("Reading the lexer.")]
    view.sync(grown, NO_STALE)
    assert converted == changed[-1:] + grown[-1:]
    assert view.counter.total == _fresh_total(grown)


def _reply(id_: str, tokens: int | None, *, calls: int = 0) -> AIMessage:
    reply = AIMessage(
        content="ok",
        tool_calls=[
            {"name": "read_file", "args": {}, "id": f"{id_}_call_{n}"} for n in range(calls)
        ],
        id=id_,
    )
    if tokens is not None:
        reply.usage_metadata = {
            "input_tokens": tokens,
            "output_tokens": 10,
            "total_tokens": tokens + 10,
        }
    return reply


def test_the_tail_count_anchors_on_the_newest_usage_wherever_it_stands() -> None:
    human = HumanMessage("Go.", id="h0")
    last = [human, _reply("a1", 5_000)]
    assert tail_count(last, NO_STALE, _convert) == _fresh_total(last)
    one_back = [
        human,
        _reply("a1", 5_000, calls=1),
        ToolMessage("x" * 400, tool_call_id="a1_call_0", id="t1"),
    ]
    assert tail_count(one_back, NO_STALE, _convert) == _fresh_total(one_back)
    two_back = [*one_back[:2], *one_back[2:], HumanMessage("And then?", id="h1")]
    assert tail_count(two_back, NO_STALE, _convert) == _fresh_total(two_back)


def test_a_reply_that_never_anchors_gives_way_to_the_one_before() -> None:
    messages = [
        HumanMessage("Go.", id="h0"),
        _reply("a1", 5_000),
        HumanMessage("More.", id="h1"),
        _reply("a2", 9_000),
    ]

    def synthetic_last(message: BaseMessage, anchored: bool, stamp: str) -> Entry | None:
        entry = _convert(message, anchored, stamp)
        if message.id == "a2" and entry is not None:
            entry.message.pop("usage", None)  # type: ignore[union-attr]
        return entry

    count = tail_count(messages, NO_STALE, synthetic_last)
    view = ConversationView(synthetic_last)
    view.sync(messages, NO_STALE)
    assert count == view.counter.total  # what a view of them holds: a1's usage and after
    assert count is not None and count > 5_000


def test_a_later_line_of_a_response_leaves_the_count_to_the_view() -> None:
    human = HumanMessage("Go.", id="h0")
    first_line = _reply("same", None, calls=1)
    result = ToolMessage("x" * 400, tool_call_id="same_call_0", id="t1")
    second_line = _reply("same", 6_000)
    assert tail_count([human, first_line, result, second_line], NO_STALE, _convert) is None
    assert tail_count([human, first_line, second_line], NO_STALE, _convert) is None
    other = _reply("other", 6_000)
    assert tail_count([human, first_line, result, other], NO_STALE, _convert) is not None


def _cleared(message: BaseMessage) -> ToolMessage:
    assert isinstance(message, ToolMessage)
    return message.model_copy(update={"content": cleared_stub()})


@pytest.mark.parametrize("at", [2, 12, 24])  # early results, and the newest one
def test_a_cleared_result_leaves_the_count_a_new_view_of_the_cleared_messages_gives(
    at: int,
) -> None:
    messages = history(12)
    assert isinstance(messages[at], ToolMessage)
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    before = view.counter.total
    cleared = list(messages)
    cleared[at] = _cleared(messages[at])
    tool_id = messages[at].tool_call_id  # type: ignore[attr-defined]
    view.clear_results({at: (tool_id, _convert(cleared[at], True, view.stamp))})
    assert view.counter.total == _fresh_total(cleared)
    # A result the newest usage covers counts in it; only one after it is estimated.
    assert (view.counter.total < before) == (at == 24)


def test_a_result_cleared_before_its_response_reports_usage_counts_cleared_after() -> None:
    """The result came after the response's first line: when a later line of that response
    reports usage, the result (cleared) is what is estimated after it."""
    first_line = _reply("resp", None, calls=1)
    result = ToolMessage("y" * 4_000, tool_call_id="resp_call_0", id="t0")
    messages: list[BaseMessage] = [HumanMessage("Go.", id="h0"), first_line, result]
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    cleared = [*messages[:2], _cleared(result)]
    view.clear_results({2: ("resp_call_0", _convert(cleared[2], True, view.stamp))})
    later_line = _reply("resp", 7_000)
    view.sync([*cleared, later_line], NO_STALE)
    assert view.counter.total == _fresh_total([*cleared, later_line])


def _left_by_a_compaction(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What a compaction leaves: its summary and the last round."""
    summary = HumanMessage(
        "Summary of the work.", id="summary", additional_kwargs={"lc_source": "summarization"}
    )
    return [summary, *messages[-2:]]


def test_the_messages_a_compaction_left_are_reused_whole_not_matched_with_the_old_ones() -> None:
    """`reused` (the middleware's test for a call that needs the view) answers how many the
    compaction left, though none of them is the first message the view saw: the call after a
    compaction builds the view, not only a count of the tail."""
    view = ConversationView(_convert)
    messages = history(6)
    view.sync(messages, NO_STALE)
    left = _left_by_a_compaction(messages)
    view.rebase(left)
    later = [*left, HumanMessage("Go on.", id="go")]
    assert view.reused(later, NO_STALE) == len(left)
    other = [HumanMessage("Another summary.", id="other"), *later[1:]]
    assert view.reused(other, NO_STALE) == 0  # (what matching them with the old ones answers)


def test_the_summary_a_compaction_left_is_converted_not_taken_from_the_old_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view built from what a compaction left converts every message of it: the entry
    at its first position is the summary's, not the entry the old view held there (the old
    first message's), and the count is a new view's."""
    monkeypatch.setattr(_langchain_view, "now_iso", lambda: "2026-11-29T12:00:00.000Z")
    converted, convert = _counting()
    view = ConversationView(convert)  # no clearing rule: the old view held its first message
    messages = history(6)
    view.sync(messages, NO_STALE)
    assert view.base == 0
    left = _left_by_a_compaction(messages)
    view.rebase(left)
    later = [*left, HumanMessage("Go on.", id="go")]
    converted.clear()
    view.sync(later, NO_STALE)
    assert converted == later
    fresh = _fresh_view(later)
    assert view.entries == fresh.entries
    assert view.counter.total == fresh.counter.total


def _settled_then_open(rounds: int) -> list[BaseMessage]:
    """Rounds of one read each, reporting usage, but for round 10 (none): the results before
    it cleared, the rest not (a view leaves the rounds before round 10 out as settled)."""
    messages: list[BaseMessage] = [HumanMessage("Read the modules.", id="h0")]
    for n in range(rounds):
        usage: Any = None
        if n != 10:
            usage = {"input_tokens": 2_000 + 500 * n, "output_tokens": 10}
            usage["total_tokens"] = usage["input_tokens"] + 10
        call = {"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"ai_{n}", usage_metadata=usage))
        content = cleared_stub() if n < 10 else "x = 1\n" * 200
        messages.append(ToolMessage(content, tool_call_id=f"call_{n}", id=f"t_{n}"))
    return messages


@pytest.mark.parametrize("stale", [NO_STALE, frozenset({"ai_9"})], ids=["fresh", "stale-usage"])
def test_a_rewound_thread_converts_what_it_left_out_with_its_usage_anchoring_as_before(
    monkeypatch: pytest.MonkeyPatch, stale: frozenset[str]
) -> None:
    """The thread is rewound to before the newest usage (a checkpoint gone back to): the
    settled prefix then ends earlier, and the messages the view had left out from there are
    converted, a usage anchoring the count unless it is stale (as a new view of them does)."""
    monkeypatch.setattr(_langchain_view, "now_iso", lambda: "2026-11-29T12:00:00.000Z")
    converted, convert = _counting()
    clearing = lambda called: tuple(called)  # noqa: E731
    view = ConversationView(convert, clearing)
    messages = _settled_then_open(14)
    view.sync(messages, stale)
    assert view.base == 21  # round 10's response: its result is not cleared
    rewound = messages[:23]  # to round 10's result: the newest usage is round 9's (or 8's)
    converted.clear()
    view.sync(rewound, stale)
    fresh = ConversationView(_convert, clearing)
    fresh.sync(rewound, stale)
    assert view.base == fresh.base < 21
    assert converted == rewound[view.base : 21]  # what had been left out, nothing after it
    assert view.entries == fresh.entries
    assert view.counter.total == fresh.counter.total


def test_a_view_leaving_a_settled_prefix_out_makes_no_swaps_of_its_clears() -> None:
    """The swapped messages are read only by `normalized_head`, which gives nothing while a
    settled prefix is left out: such a view does not make them as it clears (a view of the
    whole conversation does)."""
    messages = _settled_then_open(14)
    at = 24  # round 11's result, after the settled prefix
    assert isinstance(messages[at], ToolMessage)
    for clearing, base in ((lambda called: tuple(called), 21), (None, 0)):
        view = ConversationView(_convert, clearing)
        view.sync(messages, NO_STALE)
        assert view.base == base
        placeholder = _convert(_cleared(messages[at]), True, view.stamp)
        view.clear_results({at: ("call_11", placeholder)})
        assert bool(view._swaps) == (base == 0)
        if base:  # (why none is made: nothing would read it)
            assert view.normalized_head(view.entries[: at - base]) is None


def test_results_of_one_message_cleared_by_two_calls_are_both_swapped_in() -> None:
    """Two results of one response are one normalizer message: a call clearing the second
    after another call cleared the first makes that message again with both placeholders,
    what normalizing the head anew builds."""
    from test_langchain_normalized_head import exact_or_none, placeholder

    calls = [{"name": "read", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"} for n in (0, 1)]
    messages: list[BaseMessage] = [
        HumanMessage("Read them.", id="h"),
        AIMessage("Both.", tool_calls=calls, id="ai_0"),
        *(
            ToolMessage(f"body of m{n}.py " * 20, tool_call_id=f"call_{n}", id=f"t_{n}")
            for n in (0, 1)
        ),
        AIMessage("Next.", id="ai_1"),
        HumanMessage("Go on.", id="h1"),
    ]
    view = ConversationView(_convert)
    view.sync(messages, NO_STALE)
    view.clear_results({2: ("call_0", placeholder(messages[2], "[first]"))})
    view.clear_results({3: ("call_1", placeholder(messages[3], "[second]"))})
    got = exact_or_none(view, list(view.entries[:4]))
    assert got is not None and len(got) == 3
    assert "[first]" in json.dumps(got[2]) and "[second]" in json.dumps(got[2])
