"""A managed side call fits its own model's window: the session's view is cut from its oldest
rounds for that request only when the side model's window is smaller than the session's, or
when the side call's own messages push a view near the limit over it. Driven through the real
SDKs against the local server, which refuses a request over its window."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    RecordedRequest,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
    tool_use_block,
)
from unbounded.catalog import ModelInfo, load_model_table
from unbounded.integrations import wrap
from unbounded.integrations._side_calls import SIDE_CUT_MARKER, fit_side_view

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5.4"
WINDOW = 20_000
SMALL = 8_192
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = [{"name": "Read", "description": "read a file", "input_schema": SCHEMA}]


def _result_text(n: int) -> str:
    return f"file {n}: " + "lorem ipsum dolor sit amet " * (40 + (n * 37) % 80)


def _replies(queue: Any, turns: int) -> None:
    """A tool call per request, its usage the server's own size estimate (bytes / 4)."""
    ids = itertools.count()

    def reply(request: RecordedRequest) -> Any:
        n = next(ids)
        usage = {"input_tokens": len(request.body) // 4, "output_tokens": 30}
        call = tool_use_block("Read", {"path": f"f{n}"}, id=f"toolu_{n}")
        return message(f"reading f{n}", call, id=f"msg_{n}", usage=usage)

    queue.push(*[reply] * turns)


def _anthropic_conversation(api_server: ApiServer, client: Any, turns: int) -> list[Any]:
    """`turns` tool rounds on one system prompt; the caller's list, its last call answered."""
    _replies(api_server.anthropic, turns)
    messages: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(turns):
        reply = client.messages.create(
            model=CLAUDE, max_tokens=1000, system="You are an agent.", tools=READ,
            messages=messages,
        )
        call = next(b for b in reply.content if b.type == "tool_use")
        answer = {"type": "tool_result", "tool_use_id": call.id, "content": _result_text(n)}
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": [answer]},
        ]
    while len(api_server.anthropic):
        api_server.anthropic.pop()
    return messages


def _asking(messages: list[Any], question: str) -> list[Any]:
    """The caller's list with `question` added to its last user message (after the result)."""
    last = messages[-1]
    return [*messages[:-1], {"role": "user", "content": [*last["content"], {"type": "text", "text": question}]}]


def test_a_side_call_to_a_smaller_model_is_cut_to_its_window(api_server: ApiServer) -> None:
    """A title asked of a model whose window is smaller than the conversation's: the view is
    cut for that request (its opening and last round kept, a marker where the cut is), it
    fits the small window, nothing is recorded."""
    api_server.context_window = WINDOW
    table = load_model_table().with_model(
        ModelInfo(name="small-judge", provider="anthropic", context_window=SMALL, max_output=1_024,
                  input_per_mtok=0.0, output_per_mtok=0.0)
    )
    client = wrap(api_server.anthropic_client(sync=True), context_window=WINDOW,
                  summarizer="extractive", model_table=table)
    messages = _anthropic_conversation(api_server, client, 40)
    entries = len(client.session.entries)
    api_server.anthropic.push(message("A title", id="msg_title"))
    reply = client.messages.create(
        model="small-judge", max_tokens=200, system="Write a title.",
        messages=_asking(messages, "A title for this?"),
    )
    assert reply.content[0].text == "A title"
    sent = api_server.last
    assert len(sent.body) // 4 + 200 <= SMALL
    text = json.dumps(sent.json["messages"])
    assert SIDE_CUT_MARKER in text
    assert sent.json["messages"][-1]["content"][-1]["text"] == "A title for this?"
    assert sent.json["messages"][0]["role"] == "user"
    assert api_server.rejected == []
    assert len(client.session.entries) == entries


def test_a_big_side_message_over_a_view_near_the_limit_is_cut_to_fit(api_server: ApiServer) -> None:
    """The same model, but the side call's own message (a document to judge) would take the
    view past the window: the view is cut, the side call's message is sent whole."""
    api_server.context_window = WINDOW
    client = wrap(api_server.anthropic_client(sync=True), context_window=WINDOW,
                  summarizer="extractive")
    messages = _anthropic_conversation(api_server, client, 40)
    view = sum(len(json.dumps(m["content"])) for m in client.session.messages) // 4
    document = "the document says " + "words of the document " * 2_200  # about 12,000 tokens
    assert view + len(document) // 4 > WINDOW  # whole, it would not fit
    api_server.anthropic.push(message("Judged", id="msg_judge"))
    client.messages.create(
        model=CLAUDE, max_tokens=500, system="You judge.", messages=_asking(messages, document)
    )
    sent = api_server.last
    assert len(sent.body) // 4 + 500 <= WINDOW
    assert SIDE_CUT_MARKER in json.dumps(sent.json["messages"])
    assert sent.json["messages"][-1]["content"][-1]["text"] == document
    assert api_server.rejected == []


def test_an_openai_side_call_is_cut_to_fit_too(api_server: ApiServer) -> None:
    """Chat Completions: a judge call whose long message would take the view past the window
    goes with the view cut; the request fits and stays valid (calls with their results)."""
    api_server.context_window = WINDOW
    client = wrap(api_server.openai_client(sync=True), context_window=WINDOW,
                  summarizer="extractive")
    _replies(api_server.openai, 40)
    tools = [{"type": "function", "function": {"name": "Read", "description": "read", "parameters": SCHEMA}}]
    system = {"role": "system", "content": "You are an agent."}
    history: list[Any] = [{"role": "user", "content": "read every file"}]
    for n in range(40):
        said = client.chat.completions.create(
            model=GPT, max_completion_tokens=1000, tools=tools, messages=[system, *history]
        ).choices[0].message
        history += [
            said.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": said.tool_calls[0].id, "content": _result_text(n)},
        ]
    while len(api_server.openai):
        api_server.openai.pop()
    document = "the document says " + "words of the document " * 2_200
    api_server.openai.push(message("Judged"))
    client.chat.completions.create(
        model=GPT, max_completion_tokens=500,
        messages=[{"role": "system", "content": "You judge."}, *history, {"role": "user", "content": document}],
    )
    sent = api_server.last
    assert len(sent.body) // 4 + 500 <= WINDOW
    assert SIDE_CUT_MARKER in json.dumps(sent.json["messages"])
    assert sent.json["messages"][-1]["content"] == document
    assert api_server.rejected == []


def _round(n: int, size: int) -> list[Any]:
    call = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * size}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def _length(messages: list[Any]) -> int:
    return len(json.dumps(messages))


def test_the_cut_keeps_the_opening_and_the_last_round_and_drops_the_oldest_first() -> None:
    view: list[Any] = [{"role": "user", "content": "the task"}]
    for n in range(5):
        view += _round(n, 100)
    fresh: list[Any] = [{"role": "user", "content": "judge"}]
    whole, left_out = fit_side_view(view, fresh, 10_000, _length)
    assert whole == [*view, *fresh] and left_out == 0
    fits = _length([view[0], *view[5:], *fresh]) + 200  # the last three rounds and the marker
    cut, left_out = fit_side_view(view, fresh, fits, _length)
    assert left_out == 4  # rounds 0 and 1 went, the oldest first
    assert cut[0]["content"][0]["text"] == "the task"
    assert cut[0]["content"][-1]["text"] == SIDE_CUT_MARKER
    assert cut[1:] == [*view[5:], *fresh]
    # No room for the opening: it goes too, the last round stays after a marker.
    tight = _length([*view[-2:], *fresh]) + 150
    cut, left_out = fit_side_view(view, fresh, tight, _length)
    assert cut == [{"role": "user", "content": SIDE_CUT_MARKER}, *view[-2:], *fresh]
    assert left_out == len(view) - 2
    # No cut is enough: nothing is cut (the API refuses the whole as it would the shortest
    # cut, and no context is lost).
    assert fit_side_view(view, fresh, 10, _length) == ([*view, *fresh], 0)


def test_a_side_call_runs_no_turn_hooks_and_asks_no_server_compaction(api_server: ApiServer) -> None:
    """Extensions' `before_request` is a step of a turn (docs/integrations.md, side calls): a
    managed side call runs none, so the server's compaction edits stay off a request whose
    reply is never recorded, while the turns carry them."""
    from unbounded.compaction.native import ServerCompaction
    from unbounded.extension import Extension, ExtensionHost
    from unbounded.turn import TurnContext

    class Counting(Extension):
        calls = 0

        async def before_request(self, session: ExtensionHost, turn: TurnContext) -> None:
            Counting.calls += 1

    client = wrap(api_server.anthropic_client(sync=True), summarizer="extractive",
                  extensions=[ServerCompaction(), Counting()])
    api_server.anthropic.push(message("a0", id="msg_0"), message("judged", id="msg_j"))
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    reply = client.messages.create(model=CLAUDE, max_tokens=100, system="A", messages=messages)
    assert "context_management" in api_server.last.json and Counting.calls == 1
    messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Right?"}]
    client.messages.create(model=CLAUDE, max_tokens=100, system="You judge.", messages=messages)
    assert len(api_server.last.json["messages"]) == 3  # managed: the view and its own message
    assert "context_management" not in api_server.last.json
    assert Counting.calls == 1


def _session(model: str, window: int, table: Any = None) -> Any:
    from unbounded.session import Session, SessionConfig
    from unbounded.storage import MemoryStore

    config = SessionConfig(model=model, system="You are an agent.", context_window=window)
    return Session(config, store=MemoryStore(), model_table=table or load_model_table())


def test_the_side_budget_reserves_output_as_a_turn_does() -> None:
    """The conversation's model keeps its window; the output reserved is the turn's (the
    model's max output, at most `output_reserve_cap`), or a smaller `max_tokens`."""
    from unbounded.integrations._side_calls import side_budget

    session = _session(CLAUDE, 100_000)
    turn_limit = session.thresholds.effective_window
    assert side_budget(session, CLAUDE, 90_000).budget == turn_limit  # not 100,000 - 90,000
    assert side_budget(session, CLAUDE, 500).budget == 100_000 - 500
    assert side_budget(session, CLAUDE, None).budget == turn_limit
    assert side_budget(session, CLAUDE, 90_000).window == 100_000


def test_a_dated_name_of_a_model_the_table_lacks_keeps_the_sessions_window() -> None:
    """A model the table does not list, planned with the window given, and its dated or
    undated name: the same model. Another name the table lacks gets the session's window
    too; a listed model its own."""
    from unbounded.integrations._side_calls import same_model, side_budget

    table = load_model_table().with_model(
        ModelInfo(name="acme-judge", provider="anthropic", context_window=SMALL, max_output=1_024,
                  input_per_mtok=0.0, output_per_mtok=0.0)
    )
    session = _session("acme-agent-20260101", 50_000, table)
    models = session.deps.model_table
    assert same_model(session, "acme-agent", models)
    assert same_model(session, "acme-agent-2026-01-01", models)
    assert not same_model(session, "acme-agent-2", models)
    assert not same_model(session, "acme-judge", models)
    assert side_budget(session, "acme-agent", 100).window == 50_000
    assert side_budget(session, "acme-judge", 100).window == SMALL
