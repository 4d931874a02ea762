"""A server compaction block and everything before it are one unit (compaction/server_blocks.py):
our summary's cut never falls before the latest block, the kept records never hold a block
without all it stands for, the summary request reads the unit as the server's summary alone,
and every request before and after our compaction is one the API takes, the block unchanged."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    anthropic_compaction_error,
    anthropic_request_error,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    compaction_block,
    message,
    text_block,
    tool_use_block,
)
from unbounded.compaction.conversation import CacheSafeParams, compact_conversation, safe_pivot
from unbounded.compaction.cut import turn_tail_start
from unbounded.compaction.memory_compact import plan_messages_to_keep
from unbounded.compaction.server_blocks import (
    SERVER_SUMMARY_HEADER,
    from_last_server_compaction,
    kept_holds_server_compaction,
    server_compaction_record,
)
from unbounded.errors import ConfigError
from unbounded.events import BackgroundSummaryDiscarded, Event
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.session import Session, SessionConfig
from unbounded.wire.context_edits import COMPACTION_BETA

MODEL = "claude-sonnet-4-6"
PARAMS = CacheSafeParams(model=MODEL, system="You are a coding agent.")


class RecordingSummarizer:
    """Answers every summary request with a nine-section summary and keeps the requests."""

    name = "recording"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def create(self, request: Any, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.requests.append(copy.deepcopy(dict(request)))
        text = nine_section_summary("the parser work", chars=1_200)
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {"input_tokens": 900, "output_tokens": 300}, MODEL)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Entry], int]:
    """A conversation of rounds (a reply, then tool results or a new prompt), one reply opening
    with a server compaction block; every record's text names the record (`marker-N`)."""
    entries: list[Entry] = [Entry.user("marker-0 fix the parser")]
    rounds = draw(st.integers(min_value=2, max_value=7))
    at = draw(st.integers(min_value=0, max_value=rounds - 1))
    for n in range(rounds):
        content: list[dict[str, Any]] = []
        if n == at:
            content.append(compaction_block(f"the server's summary of rounds before {n}"))
        content.append({"type": "text", "text": f"marker-{len(entries)} reply {n}"})
        calls = draw(st.booleans())
        if calls:
            content.append(tool_use_block("Read", {"file_path": f"/w/f{n}.py"}, id=f"toolu_{n}"))
        entries.append(Entry.assistant(content, message_id=f"msg_{n}"))
        if calls:
            result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"marker-{len(entries)} file {n}"}
            entries.append(Entry.user([result]))
        else:
            entries.append(Entry.user(f"marker-{len(entries)} go on with step {n}"))
    return entries, draw(st.integers(min_value=0, max_value=len(entries) - 1))


def _texts(messages: list[Any]) -> str:
    return json.dumps(messages)


def _valid(messages: list[Any]) -> None:
    """The request these messages make is one the Messages API takes."""
    # The agent's requests declare its tools (the API refuses tool blocks without them).
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    body = json.loads(
        json.dumps({"model": MODEL, "max_tokens": 1_000, "tools": tools, "messages": messages})
    )
    assert anthropic_request_error(body, None, 0) is None
    assert anthropic_compaction_error(body, {"anthropic-beta": COMPACTION_BETA}) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from(["all", "turn", "up_to", "from"]))
def test_our_cut_never_splits_a_server_compaction_from_what_it_stands_for(history: tuple[list[Entry], int], cut: str) -> None:
    entries, pick = history
    block_at = server_compaction_record(entries)
    assert block_at is not None
    original = copy.deepcopy(entries[block_at].content[0])  # type: ignore[index]
    _valid(normalize_messages(entries))  # the history itself is valid
    summarizer = RecordingSummarizer()
    options: dict[str, Any] = {}
    if cut == "turn":
        options = {"trigger": "auto", "keep_from": turn_tail_start(entries, entries) or None}
    elif cut in ("up_to", "from"):
        options = {"direction": cut, "pivot_uuid": entries[pick].uuid}
    try:
        result = asyncio.run(compact_conversation(entries, summarizer, params=PARAMS, **options))
    except ConfigError as refused:
        # Only a pivot that falls at or before the block's record is refused for the block.
        if "server compaction" not in str(refused):
            return  # a pivot with nothing on one side: refused before our rule
        assert safe_pivot(entries, entries[pick].uuid or "") <= block_at
        return
    if cut in ("up_to", "from"):
        assert safe_pivot(entries, entries[pick].uuid or "") > block_at

    # The summary request reads the unit as the server's summary alone, and is valid.
    sent = summarizer.requests[-1]["messages"]
    assert sent[0]["role"] == "user"
    assert f"{SERVER_SUMMARY_HEADER}\\n{original['content']}" in _texts(sent)
    assert '"compaction"' not in _texts(sent)
    for n in range(block_at):
        assert f"marker-{n} " not in _texts(sent), f"record {n}, before the block, was sent again"
    _valid(sent)

    # After our compaction: the block, when kept, comes with everything before it, unchanged.
    kept = result.messages_to_keep
    if kept_holds_server_compaction(kept):
        assert cut == "from"
        assert kept == entries[: len(kept)] and len(kept) > block_at
    after = normalize_messages(result.view())
    _valid(after)
    blocks = [b for m in after if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "compaction"]
    assert all({k: v for k, v in b.items() if k != "cache_control"} == original for b in blocks)
    if blocks:  # nothing of ours before the block: the server would drop it
        assert SERVER_SUMMARY_HEADER not in _texts(after) and "Summary:" not in _texts(after[: _block_message(after) + 1])


def _block_message(messages: list[Any]) -> int:
    return next(i for i, m in enumerate(messages) if isinstance(m["content"], list) and any(b.get("type") == "compaction" for b in m["content"]))


def test_an_automatic_compaction_whose_turn_holds_the_block_keeps_nothing_verbatim() -> None:
    entries = [
        Entry.user("marker-0 fix the parser"),
        Entry.assistant([{"type": "text", "text": "marker-1 reading"}], message_id="msg_0"),
        Entry.user("marker-2 and the tests"),
        Entry.assistant([compaction_block("the parser so far"), tool_use_block("Read", {"file_path": "/w/t.py"}, id="toolu_9")], message_id="msg_1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "toolu_9", "content": "marker-4 tests"}]),
    ]
    keep_from = turn_tail_start(entries, entries)
    assert keep_from == entries[3].uuid  # the reply whose call the results answer, block and all
    result = asyncio.run(compact_conversation(entries, RecordingSummarizer(), params=PARAMS, trigger="auto", keep_from=keep_from))
    assert result.messages_to_keep == []
    assert "compaction" not in _texts(normalize_messages(result.view()))


def _notes_history(calls: bool) -> list[Entry]:
    """Three rounds, the second reply opening with a server compaction block (record 3) and,
    with `calls`, calling a tool whose result is record 4."""
    reply: list[dict[str, Any]] = [compaction_block("the parser so far"), text_block("marker-3 reading the tests")]
    answer: Entry = Entry.user("marker-4 now the docs")
    if calls:
        reply.append(tool_use_block("Read", {"file_path": "/w/t.py"}, id="toolu_9"))
        answer = Entry.user([{"type": "tool_result", "tool_use_id": "toolu_9", "content": "marker-4 tests"}])
    return [
        Entry.user("marker-0 fix the parser"),
        Entry.assistant([text_block("marker-1 reading")], message_id="msg_0"),
        Entry.user("marker-2 and the tests"),
        Entry.assistant(reply, message_id="msg_1"),
        answer,
        Entry.assistant([text_block("marker-5 docs")], message_id="msg_2"),
        Entry.user("marker-6 done?"),
        Entry.assistant([text_block("marker-7 yes")], message_id="msg_3"),
    ]


@pytest.mark.parametrize(("calls", "start"), [(False, 4), (True, 5)])
def test_the_notes_tier_keeps_only_records_after_the_block(calls: bool, start: int) -> None:
    entries = _notes_history(calls)
    # The notes cover records 0-5; the keep limits alone would keep everything, block and all.
    plan = plan_messages_to_keep(entries, entries, entries[5].uuid, Policy())
    assert plan == start  # the first start after the block with every tool call kept whole
    assert not kept_holds_server_compaction(entries[start:])
    _valid(normalize_messages(entries[start:]))


def test_the_notes_tier_gives_way_when_the_notes_do_not_cover_the_block() -> None:
    entries = _notes_history(calls=True)
    # Through record 3 the notes cover the block, but its call's result (record 4) must stay
    # with the call, and they do not cover the result: no start loses nothing.
    assert isinstance(plan_messages_to_keep(entries, entries, entries[3].uuid, Policy()), str)
    # Through record 2 they stop before it: only our summary tier can summarize the unit whole.
    assert isinstance(plan_messages_to_keep(entries, entries, entries[2].uuid, Policy()), str)
    # Through record 4 they cover the result too: keep from the next reply.
    assert plan_messages_to_keep(entries, entries, entries[4].uuid, Policy()) == 5


@pytest.mark.parametrize("direction", ["up_to", "from"])
def test_a_pivot_before_the_block_is_refused_saying_where_it_is(direction: str) -> None:
    entries = [
        Entry.user("marker-0 fix the parser"),
        Entry.assistant([{"type": "text", "text": "marker-1 reading"}], message_id="msg_0"),
        Entry.user("marker-2 and the tests"),
        Entry.assistant([compaction_block("the parser so far"), {"type": "text", "text": "ok"}], message_id="msg_1"),
        Entry.user("marker-4 now the docs"),
        Entry.assistant([{"type": "text", "text": "marker-5 docs"}], message_id="msg_2"),
        Entry.user("marker-6 done?"),
    ]
    with pytest.raises(ConfigError, match=f"server compaction in record {entries[3].uuid}"):
        asyncio.run(compact_conversation(entries, RecordingSummarizer(), params=PARAMS, direction=direction, pivot_uuid=entries[2].uuid))  # type: ignore[arg-type]
    result = asyncio.run(compact_conversation(entries, RecordingSummarizer(), params=PARAMS, direction=direction, pivot_uuid=entries[4].uuid))  # type: ignore[arg-type]
    assert result.summary_text


def test_the_summary_request_starts_at_the_block_as_a_user_message() -> None:
    block = compaction_block("what came before")
    messages: list[Any] = [
        {"role": "user", "content": "marker-0"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": "marker-2 go on"},
    ]
    opening = {"type": "text", "text": f"{SERVER_SUMMARY_HEADER}\nwhat came before"}
    assert from_last_server_compaction(messages) == [{"role": "user", "content": [opening, {"type": "text", "text": "marker-2 go on"}]}]
    followed = [messages[0], {"role": "assistant", "content": [block, {"type": "text", "text": "ok"}]}]
    assert from_last_server_compaction(followed) == [
        {"role": "user", "content": [opening]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    unchanged = messages[:1]
    assert from_last_server_compaction(unchanged) is unchanged


BACKGROUND = Policy(autocompact_pct_override=5, background_summary=True, background_summary_fraction=0.5)
LOG = "Here is the log:\n" + "a line of the build log\n" * 800


def test_a_background_summary_is_stale_once_the_server_compacted_after_its_snapshot(api_server: ApiServer, tmp_path: Path) -> None:
    """A reply carrying a compaction block recorded while the summary ran: the summary would
    go before the block, so it is discarded, and the one written again starts at the block."""
    events: list[Event] = []
    provider = AnthropicProvider(api_server.anthropic_client())
    config = SessionConfig(model="claude-sonnet-5-5", system="You are careful.", context_window=200_000)
    session = Session.open(tmp_path / "s", config, policy=BACKGROUND, summarizer=provider, events=events.append)
    summary = message(text_block(nine_section_summary("the build")), chunk_size=400)
    api_server.anthropic.push(summary, summary)
    block = compaction_block("the build so far")

    async def scenario() -> None:
        session.add_user("marker-old " + LOG)
        session.record({"content": [{"type": "text", "text": "The link step fails."}], "usage": {"input_tokens": 5_000, "output_tokens": 10}})
        session.add_user("Fix it.")
        await session.prepare()  # past the mark: the summary starts
        await session.background.settle()
        session.record({"content": [block, {"type": "text", "text": "Fixed."}], "usage": {"input_tokens": 9_500, "output_tokens": 10}})
        session.add_user("Next.")
        await session.prepare()
        await session.background.settle()

    asyncio.run(scenario())
    assert [e.reason for e in events if isinstance(e, BackgroundSummaryDiscarded)] == ["stale"]
    assert session.status().compactions == 0
    again = api_server.requests[1].json["messages"]
    assert "marker-old" not in json.dumps(again) and "the build so far" in json.dumps(again)
    session.close()
