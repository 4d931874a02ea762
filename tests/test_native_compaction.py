"""Anthropic's server-side compaction and context edits as tiers (compaction/native.py),
through the real `anthropic` SDK against the scripted local server."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from summaries import nine_section_summary

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    bad_request,
    compaction_block,
    compaction_usage,
    message,
    tool_use_block,
)
from unbounded.caching.breakpoints import place_cache_breakpoints
from unbounded.catalog import ModelInfo
from unbounded.compaction.auto import SummaryTier, TieredCompaction, TierSlot
from unbounded.compaction.micro import MicrocompactState, count_based_microcompact
from unbounded.compaction.native import (
    ServerCompaction,
    ServerCompactionSettings,
    ServerCompactor,
    arrange_tiers,
    billed_usage,
    last_compaction,
    native_edits,
    native_tiers,
    with_context_edits,
)
from unbounded.compaction.server_blocks import (
    NO_SERVER_SUMMARY,
    SERVER_SUMMARY_HEADER,
    compaction_blocks_as_text,
)
from unbounded.errors import ConfigError
from unbounded.model.entries import Entry
from unbounded.model.normalize import normalize_messages
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.wire.context_edits import (
    ANTHROPIC_CONTEXT_EDITS,
    CLEAR_THINKING_EDIT,
    CLEAR_TOOL_USES_EDIT,
    COMPACT_EDIT,
    COMPACTION_BETA,
    CONTEXT_EDITING_BETA,
)

pytest.importorskip("anthropic")

SUMMARY = nine_section_summary("fix the parser")
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]
NATIVE_MODEL = "claude-sonnet-4-6"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _session(*extensions: Any, model: str = NATIVE_MODEL, **options: Any) -> Session:
    config = SessionConfig(model=model, system="You are a coding agent.", tools=TOOLS)
    return Session(config, store=MemoryStore(), extensions=list(extensions), **options)


def _betas(api: ApiServer, index: int) -> list[str]:
    header = api.requests[index].headers.get("anthropic-beta", "")
    return [b.strip() for b in header.split(",") if b.strip()]


# -- declared support -------------------------------------------------------------------------


def test_the_anthropic_provider_and_the_listed_models_declare_compaction() -> None:
    assert AnthropicProvider.profile.native_context_edits == ANTHROPIC_CONTEXT_EDITS
    session = _session()
    assert session.model_info.native_compaction
    assert native_edits(AnthropicProvider.profile, session.model_info) == ANTHROPIC_CONTEXT_EDITS
    older = _session(model="claude-sonnet-5-5").model_info
    assert not older.native_compaction
    # A model without compaction still gets the provider's context edits, not compaction.
    assert native_edits(AnthropicProvider.profile, older) == {CLEAR_TOOL_USES_EDIT, CLEAR_THINKING_EDIT}
    assert native_edits(MODEL_PROFILE, session.model_info) == frozenset()
    assert native_edits(AnthropicProvider.profile, None) == frozenset()


def test_a_profile_with_bad_edits_is_refused() -> None:
    with pytest.raises(ConfigError, match="native_context_edits"):
        ProviderProfile(native_context_edits={"compact_20260112"})  # type: ignore[arg-type]


@pytest.mark.parametrize("trigger", [49_999, 0, -1])
def test_a_trigger_under_the_servers_minimum_is_refused_at_construction(trigger: int) -> None:
    with pytest.raises(ConfigError, match="50,000"):
        ServerCompactionSettings(trigger_tokens=trigger)
    ServerCompactionSettings(trigger_tokens=50_000)  # the minimum itself is taken


def test_edits_put_clear_thinking_first_and_add_each_beta_once() -> None:
    settings = ServerCompactionSettings(clear_tool_uses_keep=3, clear_thinking_keep=1, instructions="keep names")
    edits = settings.edits(ANTHROPIC_CONTEXT_EDITS, trigger_tokens=80_000)
    assert [e["type"] for e in edits] == [CLEAR_THINKING_EDIT, CLEAR_TOOL_USES_EDIT, COMPACT_EDIT]
    assert edits[2] == {
        "type": COMPACT_EDIT,
        "trigger": {"type": "input_tokens", "value": 80_000},
        "instructions": "keep names",
    }
    request = with_context_edits({"model": "m", "messages": [], "betas": [COMPACTION_BETA]}, edits)  # type: ignore[typeddict-item]
    assert request["betas"] == [COMPACTION_BETA, CONTEXT_EDITING_BETA]  # type: ignore[typeddict-item]
    only_compact = settings.edits(frozenset({COMPACT_EDIT}), trigger_tokens=80_000)
    assert [e["type"] for e in only_compact] == [COMPACT_EDIT]


# -- billing ------------------------------------------------------------------------------------


def test_billed_usage_adds_each_compaction_step_once() -> None:
    usage = compaction_usage(
        {"input_tokens": 90_000, "output_tokens": 2_000, "cache_read_input_tokens": 10},
        {"input_tokens": 3_000, "output_tokens": 50, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 7},
    )
    billed = billed_usage(usage)  # type: ignore[arg-type]
    assert billed["input_tokens"] == 93_000
    assert billed["output_tokens"] == 2_050
    assert billed["cache_read_input_tokens"] == 10
    assert billed["cache_creation_input_tokens"] == 7
    plain = {"input_tokens": 5, "output_tokens": 1}
    assert billed_usage(plain) is plain  # type: ignore[arg-type]


# -- threshold mode: the block kept and sent back ---------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_with_a_compaction_block_is_sent_back_byte_for_byte(api_server: ApiServer, stream: bool) -> None:
    block = compaction_block(SUMMARY, None)  # a null field must come back as null, not vanish
    api_server.anthropic.push(
        message(block, "Going on with the parser.", usage=compaction_usage({"input_tokens": 60_000, "output_tokens": 900})),
        message("Done."),
    )
    extension = ServerCompaction()
    session = _session(extension)
    provider = AnthropicProvider(api_server.anthropic_client())
    session.add_user("Fix the parser in src/parse.py")
    reply = _run(session.call(provider, stream=stream))
    first = api_server.requests[0].json
    assert first["context_management"] == {
        "edits": [{"type": COMPACT_EDIT, "trigger": {"type": "input_tokens", "value": session.thresholds.warning}}]
    }
    assert COMPACTION_BETA in _betas(api_server, 0)
    assert reply.content[0] == block
    assert reply.usage["iterations"][0]["type"] == "compaction"
    assert extension.compactions == 1

    session.add_user("And the tests?")
    _run(session.call(provider, stream=stream))
    second = api_server.requests[1].json
    assert not api_server.rejected  # the server checked the block's signature
    sent = second["messages"][1]["content"]
    assert {k: v for k, v in sent[0].items() if k != "cache_control"} == block
    assert sent[0]["encrypted_content"] is None
    # The facts ledger of what the server closed follows, as a note before the new prompt.
    notes = [b["text"] for b in second["messages"][2]["content"] if b.get("type") == "text"]
    assert any("Fix the parser in src/parse.py" in text and "server compacted" in text for text in notes)
    assert COMPACTION_BETA in _betas(api_server, 1)


def test_our_summary_reads_a_server_compaction_as_its_text(api_server: ApiServer) -> None:
    block = compaction_block(SUMMARY)
    api_server.anthropic.push(message(block, "Going on."), message(nine_section_summary("the parser, again")))
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(ServerCompaction(), summarizer=provider)
    session.add_user("Fix the parser in src/parse.py")
    _run(session.call(provider))
    session.add_user("Summarize now.")
    _run(session.compact())
    summary_request = api_server.requests[1]
    blocks = [b for m in summary_request.json["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert "compaction" not in [b["type"] for b in blocks]
    assert any(b.get("text") == f"{SERVER_SUMMARY_HEADER}\n{SUMMARY}" for b in blocks)
    assert "anthropic-beta" not in summary_request.headers
    assert not api_server.rejected


def test_a_compaction_block_without_a_summary_becomes_a_note() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [compaction_block(None), {"type": "text", "text": "ok"}]},
    ]
    converted = compaction_blocks_as_text(messages)  # type: ignore[arg-type]
    assert converted[0] is messages[0]
    assert converted[1]["content"] == [{"type": "text", "text": NO_SERVER_SUMMARY}, {"type": "text", "text": "ok"}]


def test_an_altered_compaction_block_is_refused_by_the_server(api_server: ApiServer) -> None:
    block = compaction_block(SUMMARY)
    tampered = {**block, "content": SUMMARY + " (edited)"}
    api_server.anthropic.push(message("ok"))
    provider = AnthropicProvider(api_server.anthropic_client())
    request = {
        "model": NATIVE_MODEL,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [tampered]},
            {"role": "user", "content": "go on"},
        ],
    }
    with pytest.raises(Exception, match="signature"):
        _run(provider.create(request))  # type: ignore[arg-type]
    assert COMPACTION_BETA in _betas(api_server, 0)  # the wire added the beta the block needs
    api_server.rejected.clear()


def test_a_model_without_compaction_gets_no_edits(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    api_server.anthropic.push(message("ok"))
    settings = ServerCompactionSettings(clear_tool_uses_keep=4)
    session = _session(ServerCompaction(), model="claude-sonnet-5-5")
    session.add_user("hello")
    provider = AnthropicProvider(api_server.anthropic_client())
    _run(session.call(provider))
    assert "context_management" not in api_server.requests[0].json
    # Its context edits are still sent when asked for, with their own beta.
    edited = _session(ServerCompaction(settings), model="claude-sonnet-5-5")
    edited.add_user("hello")
    _run(edited.call(provider))
    edits = api_server.requests[1].json["context_management"]["edits"]
    assert [edit["type"] for edit in edits] == [CLEAR_TOOL_USES_EDIT]
    assert _betas(api_server, 1) == [CONTEXT_EDITING_BETA]


def test_a_provider_without_native_edits_gets_none(api_server: ApiServer) -> None:
    api_server.anthropic.push(message("ok"))
    session = _session(ServerCompaction(profile=MODEL_PROFILE))
    session.add_user("hello")
    _run(session.call(AnthropicProvider(api_server.anthropic_client())))
    assert "context_management" not in api_server.requests[0].json
    assert "anthropic-beta" not in api_server.requests[0].headers


# -- on demand: the tier and its fallbacks -------------------------------------------------------


def _long_conversation(session: Session) -> None:
    for n in range(3):
        session.add_user(f"Step {n}: please explain the parser " + "in detail " * 30)
        session.record(message_response(f"Explained step {n}. " + "details " * 40, input_tokens=60_000 + n))
    session.add_user("Now summarize where we are.")


def message_response(text: str, *, input_tokens: int) -> Any:
    from unbounded.model.response import ModelResponse

    return ModelResponse([{"type": "text", "text": text}], "end_turn", {"input_tokens": input_tokens, "output_tokens": 5}, NATIVE_MODEL)


def test_the_default_tiers_put_native_first_for_a_provider_that_has_it(api_server: ApiServer) -> None:
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(summarizer=provider)
    names = [type(slot.tier).__name__ if isinstance(slot, TierSlot) else type(slot).__name__ for slot in session.compaction_tiers()]
    assert names == ["NativeCompactionTier", "CacheSharingSummaryTier", "DirectSummaryTier", "CacheSharingSummaryTier", "DirectSummaryTier"]
    older = _session(model="claude-sonnet-5-5", summarizer=provider)
    assert "NativeCompactionTier" not in [type(getattr(s, "tier", s)).__name__ for s in older.compaction_tiers()]
    summary_first = _session(summarizer=provider, policy=Policy(compaction_tier_order=("summary", "native", "offline")))
    assert [type(getattr(s, "tier", s)).__name__ for s in summary_first.compaction_tiers()][:3] == [
        "CacheSharingSummaryTier", "DirectSummaryTier", "NativeCompactionTier"
    ]


def test_the_native_tier_compacts_on_the_server_with_our_prompt_as_instructions(api_server: ApiServer) -> None:
    api_server.anthropic.push(
        message(compaction_block(SUMMARY), stop_reason="compaction", usage=compaction_usage({"input_tokens": 61_000, "output_tokens": 800}, {"input_tokens": 0, "output_tokens": 0}))
    )
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(summarizer=provider)
    _long_conversation(session)
    result = _run(session.auto_compact())
    assert result is not None and result.summarizer == "anthropic-server-compaction"
    assert "fix the parser" in result.summary_text.lower()
    sent = api_server.requests[0].json
    edit = sent["context_management"]["edits"][0]
    assert edit["type"] == COMPACT_EDIT and edit["pause_after_compaction"] is True
    assert edit["trigger"] == {"type": "input_tokens", "value": 50_000}
    assert "summary" in edit["instructions"].lower()
    assert sent["messages"][-1]["content"] != edit["instructions"]  # the prompt moved, not sent twice
    assert result.usage is not None and result.usage["input_tokens"] == 61_000  # the compaction step, billed


@pytest.mark.parametrize(
    "server_reply",
    [
        pytest.param(lambda: bad_request("context_management: unknown edit"), id="error"),
        pytest.param(lambda: message("I did not compact."), id="no-compaction-block"),
    ],
)
def test_the_native_tier_falls_back_to_our_summary(api_server: ApiServer, server_reply: Any) -> None:
    api_server.anthropic.push(server_reply(), message(SUMMARY))
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(summarizer=provider)
    _long_conversation(session)
    result = _run(session.auto_compact())
    assert result is not None and result.summarizer == "anthropic"
    assert "context_management" not in api_server.requests[1].json
    api_server.rejected.clear()


def test_under_the_servers_minimum_the_native_tier_is_not_tried(api_server: ApiServer) -> None:
    api_server.anthropic.push(message(SUMMARY))
    provider = AnthropicProvider(api_server.anthropic_client())
    session = _session(summarizer=provider)
    session.add_user("short " * 50)
    session.record(message_response("ok " * 200, input_tokens=40_000))
    session.add_user("go on")
    result = _run(session.auto_compact())
    assert result is not None and result.summarizer == "anthropic"
    assert len(api_server.requests) == 1 and "context_management" not in api_server.requests[0].json


def test_without_native_or_summary_the_offline_hand_over_runs_throughout() -> None:
    offline = SummaryTier(ExtractiveSummarizer())
    tiers = arrange_tiers(("native", "offline"), native=(), summary=(), offline=(TierSlot(offline, "open"),))
    assert [slot.when_breaker for slot in tiers] == ["any"]  # type: ignore[union-attr]
    result = _run(TieredCompaction(tiers).run(_context_with_history()))
    assert result.result is not None


def _context_with_history() -> Any:
    session = _session()
    _long_conversation(session)
    return session.compaction_context()


@pytest.mark.parametrize("order", [(), ("native", "native"), ("cloud",)])
def test_a_bad_tier_order_is_refused(order: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="compaction_tier_order"):
        Policy(compaction_tier_order=order)


def test_the_server_compactor_refuses_a_conversation_too_short() -> None:
    compactor = ServerCompactor(ExtractiveSummarizer())
    with pytest.raises(Exception, match="nothing for the server"):
        _run(compactor.create({"model": "m", "messages": [{"role": "user", "content": "x"}]}))  # type: ignore[typeddict-item]


def test_native_tiers_is_empty_without_support() -> None:
    model = ModelInfo("x", "anthropic", 200_000, 8_000, 1.0, 1.0)
    assert native_tiers(ExtractiveSummarizer(), model) == ()


# -- our transforms keep a compaction block whole (property) ------------------------------------


_texts = st.text(alphabet="abcdef xyz", min_size=1, max_size=30).filter(str.strip)


@st.composite
def conversations(draw: st.DrawFn) -> list[Entry]:
    """A conversation with tool rounds and one server compaction reply somewhere in it."""
    entries: list[Entry] = [Entry.user(draw(_texts))]
    rounds = draw(st.integers(min_value=1, max_value=6))
    at = draw(st.integers(min_value=0, max_value=rounds - 1))
    for n in range(rounds):
        content: list[dict[str, Any]] = []
        if n == at:
            content.append(compaction_block(draw(_texts), draw(st.one_of(st.none(), _texts))))
        content.append({"type": "text", "text": draw(_texts)})
        content.append(tool_use_block("Read", {"file_path": f"/w/f{n}.py"}, id=f"toolu_{n}"))
        entries.append(Entry.assistant(content, message_id=f"msg_{n}"))
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "line\n" * draw(st.integers(1, 4000))}
        entries.append(Entry.user([result]))
    return entries


@settings(max_examples=40, deadline=None)
@given(conversations())
def test_normalizing_clearing_and_marking_never_split_or_alter_a_compaction_block(entries: list[Entry]) -> None:
    originals = [copy.deepcopy(b) for e in entries if e.message for b in (e.message.get("content") or []) if isinstance(b, dict) and b.get("type") == "compaction"]
    messages = normalize_messages(entries)
    cleared = count_based_microcompact(messages, MicrocompactState(), policy=Policy(microcompact_min_savings=0, microcompact_protect_recent_tokens=0, microcompact_keep_recent=0)).messages
    request = place_cache_breakpoints({"model": NATIVE_MODEL, "max_tokens": 100, "messages": cleared})  # type: ignore[typeddict-item]
    for stage in (messages, cleared, request["messages"]):
        position = last_compaction(stage)
        assert position is not None
        message_index, block_index = position
        found = {k: v for k, v in stage[message_index]["content"][block_index].items() if k != "cache_control"}
        assert found == originals[-1]
        assert stage[message_index]["role"] == "assistant"
        # What followed the block in its reply is still right after it, in the same message.
        follows = stage[message_index]["content"][block_index + 1]
        assert follows["type"] == "text"
