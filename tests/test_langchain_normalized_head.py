"""A warm middleware's compaction takes the messages its view already normalized
(`ConversationView.normalized_head`) only where they are what normalizing the summarized
messages anew builds: the summary request and the compacted history are the same bytes as
the path that normalizes them again, and each case the view's messages are not exact falls
back to that path."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_to_dict,
)

import unbounded.compaction.conversation as conversation_module
import unbounded.integrations._langchain_view as view_module
import unbounded.integrations.langchain as middleware_module
import unbounded.model.entries as entries_module
from test_compaction_request_golden import _UUID, Capturing, langchain_messages, numbered
from unbounded.integrations._langchain_view import ConversationView
from unbounded.integrations.langchain import UnboundedMiddleware, _convert, message_to_entry
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
# Clearing may run from the first token (a huge warning buffer) in small batches.
SMALL_BATCHES = Policy(
    microcompact_min_savings=3_000, microcompact_protect_recent_tokens=4_000, warning_buffer=10**9
)


def apply(state: dict[str, Any], update: dict[str, Any] | None) -> None:
    """What the agent does with a before_model update (add_messages replaces by id)."""
    if update and "messages" in update:
        by_id = {m.id: m for m in update["messages"]}
        state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
    if update and "unbounded" in update:
        state["unbounded"] = update["unbounded"]


normalized: list[int] = []
"""How many entries each normalization of the compaction's was given (the last run's)."""


def run_until_compacted(
    monkeypatch: pytest.MonkeyPatch, *, from_view: bool, trigger: int
) -> tuple[list[str], str, list[bool]]:
    """One middleware called turn after turn on the golden conversation (clearing batches
    land) until it compacts: the summary requests, the compacted update, and for each
    compaction whether the view's messages were taken. `from_view=False` makes the view give
    none (the path that normalizes the summarized messages again)."""
    taken: list[bool] = []
    normalized.clear()
    real = ConversationView.normalized_head

    def spied(self: ConversationView, head: Any) -> Any:
        out = real(self, head) if from_view else None
        taken.append(out is not None)
        return out

    monkeypatch.setattr(ConversationView, "normalized_head", spied)
    real_normalize = conversation_module.normalize_messages

    def normalizing(entries: Any) -> Any:
        given = list(entries)
        normalized.append(len(given))
        return real_normalize(given)

    monkeypatch.setattr(conversation_module, "normalize_messages", normalizing)
    for module in (view_module, middleware_module, entries_module):
        # One clock reading for every entry: the two runs' records then compare byte for byte.
        monkeypatch.setattr(module, "now_iso", lambda: "2026-11-29T12:00:00.000Z")
    summarizer = Capturing()
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=("messages", trigger),
        summarizer=summarizer,
        summary_retries=0,
        policy=SMALL_BATCHES,
    )
    every = langchain_messages(120)
    state: dict[str, Any] = {"messages": every[:1]}
    apply(state, middleware.before_model(state, None))  # type: ignore[arg-type]
    cleared = 0
    for end in range(2, len(every) + 1):
        state["messages"] = [*state["messages"], every[end - 1]]
        if not isinstance(every[end - 1], ToolMessage) or (
            end < len(every) and isinstance(every[end], HumanMessage)
        ):
            continue  # a model call comes after a round's results (and the human's words)
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        if update and any(m.type == "remove" for m in update.get("messages", [])):
            written = {
                key: messages_to_dict(value) if key == "messages" else value
                for key, value in update.items()
            }
            after = json.dumps(written, ensure_ascii=False, indent=1, default=repr)
            assert cleared > 1  # clearing batches landed in the view before it compacted
            return summarizer.requests, numbered(_UUID, "uuid", after), taken
        if update and update.get("messages"):
            cleared += 1
        apply(state, update)
    raise AssertionError("the middleware never compacted")


@pytest.mark.parametrize("trigger", [150, 160])
def test_a_warm_compaction_sends_and_leaves_what_normalizing_anew_does(
    monkeypatch: pytest.MonkeyPatch, trigger: int
) -> None:
    requests, after, taken = run_until_compacted(monkeypatch, from_view=True, trigger=trigger)
    assert taken == [True]  # the view's messages were exact here, and were taken
    assert max(normalized) < 100  # the summarized messages were not normalized again
    monkeypatch.undo()
    cold_requests, cold_after, cold_taken = run_until_compacted(
        monkeypatch, from_view=False, trigger=trigger
    )
    assert cold_taken == [False]
    assert max(normalized) > 100
    assert requests and requests == cold_requests
    assert after == cold_after


# -- the rules, on a view alone: what it gives is None or exactly the fresh normalization


def rounds(count: int, *, first: int = 0) -> list[BaseMessage]:
    """`count` tool rounds: an AI message calling a tool, and its result."""
    out: list[BaseMessage] = []
    for n in range(first, first + count):
        out.append(
            AIMessage(
                content=f"Step {n}.",
                tool_calls=[{"name": "read", "args": {"path": f"m{n}.py"}, "id": f"call_{n}"}],
                id=f"ai_{n}",
                usage_metadata={
                    "input_tokens": 900 + 300 * n,
                    "output_tokens": 10,
                    "total_tokens": 910 + 300 * n,
                },
            )
        )
        out.append(
            ToolMessage(content=f"body of m{n}.py " * 20, tool_call_id=f"call_{n}", id=f"tool_{n}")
        )
    return out


def view_of(messages: list[BaseMessage]) -> ConversationView:
    view = ConversationView(_convert)
    view.sync(messages, frozenset())
    return view


def placeholder(message: BaseMessage, text: str = "[cleared]") -> Entry:
    assert isinstance(message, ToolMessage)
    entry = message_to_entry(message.model_copy(update={"content": text}))
    assert entry is not None
    return entry


def exact_or_none(view: ConversationView, head: list[Entry | None]) -> list[Any] | None:
    """The view's messages for `head`, checked: None, or what normalizing `head` builds."""
    got = view.normalized_head(head)
    if got is not None:
        fresh = normalize_messages([e for e in head if e is not None])
        assert json.dumps(got) == json.dumps(fresh)
    return got


def test_the_head_before_an_ai_message_is_the_views_own_messages() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    for cut in (3, 5, 11):  # before ai_1, ai_2, ai_5
        assert exact_or_none(view, view.entries[:cut]) is not None


def test_a_head_of_every_message_or_of_none_is_normalized_anew() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(3)]
    view = view_of(messages)
    assert exact_or_none(view, list(view.entries)) is None  # nothing after it to tell by
    assert exact_or_none(view, []) is None


def test_results_cleared_by_an_earlier_call_are_their_placeholders() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    view.clear_results(
        {2: ("call_0", placeholder(messages[2])), 4: ("call_1", placeholder(messages[4]))}
    )
    got = exact_or_none(view, list(view.entries[:9]))
    assert got is not None and "[cleared]" in json.dumps(got)


def test_results_this_call_clears_are_summarized_as_they_were() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    before = list(view.entries)  # what the plan holds: taken before this call's clears
    view.clear_results({2: ("call_0", placeholder(messages[2]))})
    got = exact_or_none(view, before[:9])
    assert got is not None and "[cleared]" not in json.dumps(got)


@pytest.mark.parametrize(
    "swap",
    [
        "another call's result",  # an orphan: normalization turns it into text
        "two blocks",
        "a blank text",
        "an AI message",
        "never sent",
        "not a block",
        "a one-character text",
    ],
)
def test_a_placeholder_that_is_not_one_result_of_the_same_call_is_not_swapped_in(swap: str) -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    result = {"type": "tool_result", "tool_use_id": "call_0", "content": "[cleared]"}
    entries: dict[str, Entry | None] = {
        "another call's result": placeholder(messages[4]),
        "two blocks": Entry.user([result, {"type": "text", "text": "note"}]),
        # Blocks that carry the call's id but are not a result it gave.
        "a blank text": Entry.user([{"type": "text", "text": "  ", "tool_use_id": "call_0"}]),
        "an AI message": Entry.assistant([result], message_id="x"),
        "never sent": None,
        "not a block": Entry.user(["[cleared]"]),  # type: ignore[list-item]
        "a one-character text": Entry.user("x"),
    }
    view.clear_results({2: ("call_0", entries[swap])})
    assert exact_or_none(view, list(view.entries[:5])) is None


def test_a_cleared_message_that_was_not_a_result_is_not_swapped() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    view.clear_results({1: ("call_0", placeholder(messages[2]))})  # the AI message's index
    assert exact_or_none(view, list(view.entries[:5])) is None


def test_a_head_of_another_entry_where_a_message_that_was_not_a_result_was_cleared() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    head = list(view.entries[:5])
    view.clear_results({1: ("call_0", placeholder(messages[2]))})  # the AI message's index
    head[1] = message_to_entry(AIMessage("Another step.", id="ai_other"))
    assert exact_or_none(view, head) is None


@pytest.mark.parametrize("cleared", [False, True])
def test_a_head_of_other_entries_is_normalized_anew(cleared: bool) -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    head = list(view.entries[:5])
    if cleared:  # by this call: neither its original nor its placeholder is in the head
        view.clear_results({2: ("call_0", placeholder(messages[2]))})
    head[2] = message_to_entry(messages[2].model_copy(update={"content": "another body"}))
    assert exact_or_none(view, head) is None


def test_a_result_cleared_twice_is_swapped_for_its_last_placeholder() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    view = view_of(messages)
    view.clear_results({2: ("call_0", placeholder(messages[2], "[first]"))})
    view.clear_results({2: ("call_0", placeholder(messages[2], "[second]"))})
    got = exact_or_none(view, list(view.entries[:5]))
    assert got is not None and "[second]" in json.dumps(got)


def test_a_cut_whose_next_message_joins_the_heads_last_is_normalized_anew() -> None:
    # The human's words join the results before them into one user message.
    messages = [
        HumanMessage("Read them.", id="h"),
        *rounds(2),
        HumanMessage("Now the tests.", id="h2"),
        *rounds(2, first=2),
    ]
    view = view_of(messages)
    assert exact_or_none(view, view.entries[:5]) is None


def test_a_head_that_ends_with_an_ai_message_is_normalized_anew() -> None:
    # The last message is trimmed at its end as the last one: not in the whole conversation.
    messages = [
        HumanMessage("Read them.", id="h"),
        *rounds(2),
        AIMessage("All read.  \n", id="ai_x"),
        HumanMessage("Go on.", id="h2"),
        *rounds(2, first=2),
    ]
    view = view_of(messages)
    assert exact_or_none(view, view.entries[:6]) is None


@pytest.mark.parametrize("cut", [2, 3, 4])
def test_a_conversation_that_needs_a_repair_is_normalized_anew(cut: int) -> None:
    # No human message first: normalization puts a placeholder user message first.
    messages = rounds(6)
    view = view_of(messages)
    assert exact_or_none(view, view.entries[:cut]) is None


def test_a_view_without_its_settled_prefix_is_normalized_anew() -> None:
    messages = [HumanMessage("Read them.", id="h"), *rounds(6)]
    cleared = [
        m.model_copy(update={"content": "[Old tool result content cleared]"})
        if isinstance(m, ToolMessage) and m.id in ("tool_0", "tool_1")
        else m
        for m in messages
    ]
    view = ConversationView(_convert, lambda called: tuple(called))
    view.sync(cleared, frozenset())
    assert view.base > 0  # the settled messages are not held
    for cut in range(1, len(view.entries)):
        assert view.normalized_head(list(view.entries[:cut])) is None
