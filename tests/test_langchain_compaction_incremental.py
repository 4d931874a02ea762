"""A warm middleware's compacting call takes what its view kept up to date call by call (each
cleared result's message with its placeholder swapped in, made when it was cleared) and reads
only the tail its cut needs (`kept_tail_start`): over random conversations going through
clearing batches and several compactions, every summary request and every compacted update
is the same bytes as the from-scratch path (the summarized messages normalized again, the
cut found over the whole view)."""

from __future__ import annotations

import json
import random
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

import unbounded.integrations._langchain_trigger as trigger_module
import unbounded.integrations._langchain_view as view_module
import unbounded.integrations.langchain as middleware_module
import unbounded.model.entries as entries_module
from test_compaction_request_golden import _UUID, Capturing, numbered
from unbounded.compaction.cut import kept_rounds_start
from unbounded.compaction.tools_registry import cleared_stub
from unbounded.integrations._langchain_trigger import kept_tail_start
from unbounded.integrations._langchain_view import ConversationView
from unbounded.integrations.langchain import UnboundedMiddleware, message_to_entry
from unbounded.model.entries import Entry
from unbounded.policy import Policy

MODEL = "claude-sonnet-4-6"
# Clearing from the first token (a huge warning buffer), in small batches.
SMALL_BATCHES = Policy(
    microcompact_min_savings=2_000, microcompact_protect_recent_tokens=3_000, warning_buffer=10**9
)


def conversation(seed: int, rounds: int) -> list[BaseMessage]:
    """A random agent conversation: rounds of one to three parallel tool calls (their results
    join one user message), results of random sizes (some errors), human words now and then."""
    pick = random.Random(seed)
    out: list[BaseMessage] = [HumanMessage("Work through the modules.", id="h-0")]
    for n in range(1, rounds + 1):
        calls = [
            {
                "id": f"call-{n}-{k}",
                "name": pick.choice(["read", "grep", "bash"]),
                "args": {"path": f"src/m{pick.randrange(12)}.py"},
            }
            for k in range(pick.choice([1, 1, 2, 3]))
        ]
        prompt = 1_500 + 400 * n
        out.append(
            AIMessage(
                content=pick.choice([f"Step {n}.", "", f"Looking at part {n}."]),
                tool_calls=calls,
                id=f"ai-{n}",
                usage_metadata={
                    "input_tokens": prompt,
                    "output_tokens": 30,
                    "total_tokens": prompt + 30,
                },
            )
        )
        for call in calls:
            out.append(
                ToolMessage(
                    content=f"{call['id']} output line\n" * pick.randrange(5, 160),
                    tool_call_id=call["id"],
                    id=f"tool-{call['id']}",
                    status="error" if pick.random() < 0.1 else "success",
                )
            )
        if pick.random() < 0.15:
            out.append(HumanMessage(f"Also check part {n}.", id=f"h-{n}"))
    return out


def drive(
    monkeypatch: pytest.MonkeyPatch, seed: int, *, from_scratch: bool
) -> tuple[list[str], list[str], int]:
    """One warm middleware called after each round of a random conversation, its updates
    applied as the agent applies them: the summary requests, every compacting update (as
    JSON), and how many compactions took the view's messages. `from_scratch`: the view gives
    no messages (the summarized ones are normalized again) and the cut reads the whole view."""
    taken: list[bool] = []
    real_head = ConversationView.normalized_head

    def head(self: ConversationView, entries: Any) -> Any:
        out = None if from_scratch else real_head(self, entries)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(ConversationView, "normalized_head", head)
    if from_scratch:
        monkeypatch.setattr(middleware_module, "kept_tail_start", kept_rounds_start)
        # The call after a compaction builds the view again from the messages.
        monkeypatch.setattr(ConversationView, "rebase", lambda self, messages: None)
    for module in (view_module, middleware_module, entries_module):
        # One clock reading for every entry: the two runs' records compare byte for byte.
        monkeypatch.setattr(module, "now_iso", lambda: "2026-11-29T12:00:00.000Z")
    summarizer = Capturing()
    middleware = UnboundedMiddleware(
        MODEL,
        context_window=1_000_000,
        trigger=("messages", 90),
        keep=("messages", 12),
        summarizer=summarizer,
        summary_retries=0,
        policy=SMALL_BATCHES,
    )
    every = conversation(seed, 150)
    state: dict[str, Any] = {"messages": []}
    compacted: list[str] = []
    for position, message in enumerate(every):
        state["messages"] = [*state["messages"], message]
        following = every[position + 1] if position + 1 < len(every) else None
        if isinstance(following, ToolMessage | HumanMessage) or not (
            position == 0 or isinstance(message, ToolMessage)
        ):
            continue  # a model call comes after a round's results (and the human's words)
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        if not update:
            continue
        written = update.get("messages") or []
        if any(m.type == "remove" for m in written):
            text = json.dumps(
                {k: messages_to_dict(v) if k == "messages" else v for k, v in update.items()},
                ensure_ascii=False,
                default=repr,
            )
            compacted.append(numbered(_UUID, "uuid", text))
            state["messages"] = list(written[1:])
        elif written:
            by_id = {m.id: m for m in written}
            state["messages"] = [by_id.get(m.id, m) for m in state["messages"]]
        if "unbounded" in update:
            state["unbounded"] = update["unbounded"]
    monkeypatch.undo()
    return summarizer.requests, compacted, sum(taken)


@pytest.mark.parametrize("seed", range(6))
def test_every_compaction_of_a_warm_middleware_is_the_from_scratch_bytes(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    requests, compacted, taken = drive(monkeypatch, seed, from_scratch=False)
    scratch_requests, scratch_compacted, scratch_taken = drive(monkeypatch, seed, from_scratch=True)
    assert len(compacted) >= 2  # the view restarted after a compaction and compacted again
    assert taken >= 2 and scratch_taken == 0  # the view's messages were taken, not rebuilt
    assert requests == scratch_requests
    assert compacted == scratch_compacted


# -- the swaps the view keeps, on a view alone


def parallel_rounds(count: int) -> list[BaseMessage]:
    """Rounds of two parallel calls (their results make one user message)."""
    out: list[BaseMessage] = [HumanMessage("Read them.", id="h")]
    for n in range(count):
        calls = [{"name": "read", "args": {"path": f"m{n}{k}.py"}, "id": f"c{n}{k}"} for k in "ab"]
        usage = {"input_tokens": 900 + 600 * n, "output_tokens": 10, "total_tokens": 910 + 600 * n}
        out.append(
            AIMessage(content=f"Step {n}.", tool_calls=calls, id=f"ai{n}", usage_metadata=usage)
        )
        out.extend(
            ToolMessage(content=f"body {n}{k} " * 30, tool_call_id=f"c{n}{k}", id=f"t{n}{k}")
            for k in "ab"
        )
    return out


def cleared_copy(message: BaseMessage) -> ToolMessage:
    assert isinstance(message, ToolMessage)
    return message.model_copy(update={"content": cleared_stub(message.tool_call_id)})


def cleared(message: BaseMessage) -> tuple[str, Entry | None]:
    copy = cleared_copy(message)
    return copy.tool_call_id, message_to_entry(copy)


def fresh(head: list[Entry | None]) -> str:
    from unbounded.model.normalize import normalize_messages

    return json.dumps(normalize_messages([e for e in head if e is not None]))


def test_one_result_of_a_message_cleared_now_another_earlier() -> None:
    # Message 2 (results t0a, t0b): t0a cleared by an earlier call, t0b by this call. The head
    # holds t0b as it was, so the message is swapped for t0a's placeholder only.
    messages = parallel_rounds(4)
    view = ConversationView(middleware_module._convert)
    view.sync(messages, frozenset())
    view.clear_results({2: cleared(messages[2])})
    head = list(view.entries[:7])  # what this call's plan holds: t0a's placeholder
    view.clear_results({3: cleared(messages[3])})
    got = view.normalized_head(head)
    assert got is not None and json.dumps(got) == fresh(head)
    text = json.dumps(got)
    assert "recall id=c0a" in text and "recall id=c0b" not in text and "body 0b" in text


def test_a_message_that_changed_since_its_swap_is_swapped_again() -> None:
    messages = parallel_rounds(3)
    view = ConversationView(middleware_module._convert)
    view.sync(messages[:3], frozenset())  # the round's first result only
    view.clear_results({2: cleared(messages[2])})
    # The agent applied the clear; the second result joins the message swapped before.
    view.sync([*messages[:2], cleared_copy(messages[2]), *messages[3:]], frozenset())
    head = list(view.entries[:7])
    got = view.normalized_head(head)
    assert got is not None and json.dumps(got) == fresh(head)
    assert "recall id=c0a" in json.dumps(got) and "body 0b" in json.dumps(got)


# -- the view after a compaction


def counting_view() -> tuple[ConversationView, list[str]]:
    """A view whose conversions are listed (message ids)."""
    converted: list[str] = []

    def convert(message: BaseMessage, anchored: bool, stamp: str) -> Entry | None:
        converted.append(str(message.id))
        return middleware_module._convert(message, anchored, stamp)

    return ConversationView(convert, lambda called: tuple(called)), converted


def compacted(messages: list[BaseMessage]) -> list[BaseMessage]:
    """A summary and the last round, its result cleared (the state a compaction leaves)."""
    summary = HumanMessage(
        "Summary of the work.", id="summary", additional_kwargs={"lc_source": "summarization"}
    )
    return [summary, messages[-2], cleared_copy(messages[-1])]


def test_the_call_after_a_compaction_builds_the_view_whole_then_adds_what_is_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        view_module, "now_iso", lambda: "2026-11-29T12:00:00.000Z"
    )  # entries compared
    messages = parallel_rounds(6)[:-1]  # the last round's one result
    view, converted = counting_view()
    view.sync(messages, frozenset())
    left = compacted(messages)
    done = len(converted)
    view.rebase(left)
    assert len(converted) == done  # nothing converted by the rebase itself
    later = [*left, AIMessage("Next.", id="ai-next"), HumanMessage("Go on.", id="go")]
    view.sync(later, frozenset())
    # No settled prefix left out (a view built from these messages would leave the summary
    # and the cleared round out): every message is held.
    built, _ = counting_view()
    built.sync(later, frozenset())
    assert built.base > 0
    assert view.base == 0 and len(view.entries) == len(later)
    assert converted[done:] == [m.id for m in later]
    view.sync([*later, HumanMessage("More.", id="more")], frozenset())
    assert converted[done + len(later) :] == ["more"]
    whole = ConversationView(middleware_module._convert)
    whole.sync([*later, HumanMessage("More.", id="more")], frozenset())
    assert view.entries == whole.entries
    assert view.counter.total == whole.counter.total


def test_a_compaction_the_agent_did_not_apply_leaves_the_view_to_the_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        view_module, "now_iso", lambda: "2026-11-29T12:00:00.000Z"
    )  # entries compared
    messages = parallel_rounds(6)[:-1]
    view, converted = counting_view()
    view.sync(messages, frozenset())
    view.rebase(compacted(messages))
    done = len(converted)
    more = [*messages, HumanMessage("Go on.", id="go")]
    view.sync(more, frozenset())  # the old messages came back: the view adds what is new
    assert converted[done:] == ["go"]
    left = compacted(messages)
    other = [*left[:2], cleared_copy(messages[-1]).model_copy(update={"id": "t-other"})]
    other.append(HumanMessage("Go on.", id="go"))
    view.rebase(left)
    view.sync(other, frozenset())  # the same first ids, another message after them
    built, _ = counting_view()
    built.sync(other, frozenset())
    assert built.base > 0  # a view built from the messages leaves the settled prefix out
    assert view.base == built.base and view.entries == built.entries


# -- the cut read from the tail


def random_view(pick: random.Random, size: int) -> list[Entry | None]:
    """Records of rounds: a prompt or a reply, results, now and then a record never sent."""
    view: list[Entry | None] = []
    while len(view) < size:
        roll = pick.random()
        if roll < 0.1:
            view.append(None)
        elif roll < 0.3:
            view.append(Entry.user("go on " * pick.randrange(1, 40)))
        elif roll < 0.6:
            view.append(Entry.assistant([{"type": "text", "text": "ok " * pick.randrange(60)}]))
        else:
            result = {
                "type": "tool_result",
                "tool_use_id": "x",
                "content": "r " * pick.randrange(300),
            }
            view.append(Entry.user([result]))
    return view


@pytest.mark.parametrize("seed", range(4))
def test_the_cut_read_from_the_tail_is_the_whole_views(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(trigger_module, "TAIL_WINDOW", 2)  # widened often
    pick = random.Random(seed)
    budgets = [None, 0, 1, 2, 3, 5, 8, 20, 60, 400]
    tokens = [None, 0, 50, 300, 1_000, 4_000, 10**6]
    for _ in range(300):
        view = random_view(pick, pick.randrange(0, 90))
        first = pick.choice([0, 0, 1, pick.randrange(len(view) + 1)])
        keep_messages, keep_tokens = pick.choice(budgets), pick.choice(tokens)
        assert kept_tail_start(
            view, first=first, keep_messages=keep_messages, keep_tokens=keep_tokens
        ) == kept_rounds_start(
            view, first=first, keep_messages=keep_messages, keep_tokens=keep_tokens
        )
