"""Server compaction's rules (compaction/native.py), each stated as what a caller sees: which
settings are refused, what a compaction reply is billed, what the on-demand compactor sends
and reads back, when the native tier steps aside, and what the threshold extension adds to
a session's requests. Found by the mutation check of `compaction/native.py` (each test fails
when the rule it states is flipped or dropped)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import compaction_block
from unbounded.compaction.auto import SummaryTier, TierSlot
from unbounded.compaction.native import (
    LEDGER_NOTE,
    NativeCompactionTier,
    ServerCompaction,
    ServerCompactionSettings,
    ServerCompactor,
    arrange_tiers,
    billed_usage,
    compact_edit,
)
from unbounded.errors import BadRequestError, CompactionError, ConfigError, ProviderError
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import Heartbeat, ModelResponse
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.wire.context_edits import ANTHROPIC_CONTEXT_EDITS, COMPACT_EDIT

NATIVE_MODEL = "claude-sonnet-4-6"
SUMMARY = nine_section_summary("fix the parser")


class Scripted:
    """A provider declaring a given profile (Anthropic's by default) that answers (or fails)
    from a list and keeps each request it was sent."""

    name = "scripted"
    supports_cache_edits = False

    def __init__(self, *replies: ModelResponse | ProviderError, profile: ProviderProfile = AnthropicProvider.profile) -> None:
        self.replies = list(replies)
        self.sent: list[ProviderRequest] = []
        self._profile = profile

    @property
    def profile(self) -> ProviderProfile:
        """The profile it was given."""
        return self._profile

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Heartbeat | None = None) -> ModelResponse:
        """The next scripted reply."""
        self.sent.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, ProviderError):
            raise reply
        return reply


def _reply(*content: Any, usage: dict[str, Any] | None = None) -> ModelResponse:
    blocks = [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]
    return ModelResponse(blocks, "end_turn", usage or {"input_tokens": 10, "output_tokens": 2}, NATIVE_MODEL)  # type: ignore[arg-type]


def _session(**options: Any) -> Session:
    config = SessionConfig(model=NATIVE_MODEL, system="You are a coding agent.")
    return Session(config, store=MemoryStore(), **options)


# -- settings --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["clear_tool_uses_keep", "clear_thinking_keep"])
def test_a_negative_or_boolean_keep_count_is_refused_and_zero_is_taken(name: str) -> None:
    for bad in (-1, True):
        with pytest.raises(ConfigError, match=f"ServerCompactionSettings.{name} must be >= 0"):
            ServerCompactionSettings(**{name: bad})
    assert getattr(ServerCompactionSettings(**{name: 0}), name) == 0


def test_blank_instructions_are_refused() -> None:
    with pytest.raises(ConfigError, match="instructions must not be blank"):
        ServerCompactionSettings(instructions=" \n ")


def test_a_compact_edit_under_the_servers_minimum_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 50,000 tokens, not 49,999"):
        compact_edit(49_999, None, False)
    assert compact_edit(50_000, None, False) == {"type": COMPACT_EDIT, "trigger": {"type": "input_tokens", "value": 50_000}}


def test_server_compaction_refuses_settings_and_profiles_of_other_types() -> None:
    with pytest.raises(ConfigError, match="takes a ServerCompactionSettings"):
        ServerCompaction({"trigger_tokens": 60_000})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="profile must be a ProviderProfile"):
        ServerCompaction(profile="anthropic")  # type: ignore[arg-type]


# -- billing ---------------------------------------------------------------------------------------


def test_billed_usage_adds_the_compaction_steps_cache_writes_by_ttl() -> None:
    usage = {
        "input_tokens": 3_000,
        "output_tokens": 50,
        "cache_creation": {"ephemeral_5m_input_tokens": 100},
        "iterations": [
            {"type": "compaction", "input_tokens": 90_000, "output_tokens": 2_000, "cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 7}},
            {"type": "compaction", "input_tokens": 0, "output_tokens": 0, "cache_creation": {"ephemeral_1h_input_tokens": None}},
            {"type": "message", "input_tokens": 3_000, "output_tokens": 50},
        ],
    }
    billed = billed_usage(usage)  # type: ignore[arg-type]
    assert billed["cache_creation"] == {"ephemeral_5m_input_tokens": 140, "ephemeral_1h_input_tokens": 7}  # type: ignore[typeddict-item]
    # A reply whose split is only in its compaction step gets the step's split.
    only_step = {"input_tokens": 1, "output_tokens": 1, "iterations": [{"type": "compaction", "cache_creation": {"ephemeral_5m_input_tokens": 9}}]}
    assert billed_usage(only_step)["cache_creation"] == {"ephemeral_5m_input_tokens": 9}  # type: ignore[arg-type, typeddict-item]
    # No split anywhere: none is made up.
    bare = {"input_tokens": 1, "output_tokens": 1, "iterations": [{"type": "compaction", "input_tokens": 5}]}
    assert "cache_creation" not in billed_usage(bare)  # type: ignore[arg-type]


# -- on demand: the compactor ------------------------------------------------------------------------


def test_the_compactor_sends_the_prompt_as_instructions_and_reads_the_last_compaction() -> None:
    """A conversation of one message and the summary prompt is enough; the prompt's text
    blocks (not its other blocks) become the instructions; the reply's last compaction block
    is the summary."""
    provider = Scripted(_reply(compaction_block("an older summary"), compaction_block(SUMMARY), "paused"))
    prompt = {"role": "user", "content": [{"type": "text", "text": "Summarize."}, {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}, {"type": "text", "text": "Keep file names."}]}
    request: Any = {"model": NATIVE_MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "Fix the parser"}, prompt]}
    answer = asyncio.run(ServerCompactor(provider).create(request))
    assert answer.content == [{"type": "text", "text": SUMMARY}]
    (sent,) = provider.sent
    assert sent["messages"] == [{"role": "user", "content": "Fix the parser"}]
    (edit,) = sent["context_management"]["edits"]  # type: ignore[typeddict-item]
    assert edit["instructions"] == "Summarize.\nKeep file names." and edit["pause_after_compaction"] is True


@pytest.mark.parametrize("summary", [None, "  \n "])
def test_a_compaction_without_text_is_no_summary(summary: str | None) -> None:
    provider = Scripted(_reply(compaction_block(summary), "paused"))
    request: Any = {"model": NATIVE_MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "Fix the parser"}, {"role": "user", "content": "Summarize."}]}
    with pytest.raises(CompactionError, match="without a compaction") as caught:
        asyncio.run(ServerCompactor(provider).create(request))
    assert caught.value.reason == "no_summary"


# -- on demand: the tier -----------------------------------------------------------------------------


def _long_context(session: Session) -> Any:
    for n in range(3):
        session.add_user(f"Step {n}: please explain the parser " + "in detail " * 30)
        session.record(_reply(f"Explained step {n}. " + "details " * 40, usage={"input_tokens": 60_000 + n, "output_tokens": 5}))
    session.add_user("Now summarize where we are.")
    return session.compaction_context()


def test_the_native_tier_steps_aside_for_a_provider_without_compaction_without_a_call() -> None:
    session = _session()
    context = _long_context(session)
    plain = Scripted(_reply(compaction_block(SUMMARY)), profile=MODEL_PROFILE)
    assert asyncio.run(NativeCompactionTier(plain, session.model_info).compact(context)) is None
    assert plain.sent == []


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        pytest.param(BadRequestError("context_management: unknown edit", status=400), "unknown edit", id="refused"),
        pytest.param(_reply("I did not compact."), "without a compaction", id="no-compaction-block"),
    ],
)
def test_a_failed_server_compaction_is_logged_and_left_to_our_summary(caplog: pytest.LogCaptureFixture, failure: Any, said: str) -> None:
    """A refused request is handed over (as a cache-sharing summary's would be) and one
    without a compaction fails outright: either way the tier says why and gives way."""
    session = _session()
    context = _long_context(session)
    provider = Scripted(failure)
    with caplog.at_level(logging.WARNING, logger="unbounded.compaction.native"):
        assert asyncio.run(NativeCompactionTier(provider, session.model_info).compact(context)) is None
    assert len(provider.sent) == 1
    native = [r.getMessage() for r in caplog.records if r.name == "unbounded.compaction.native"]
    assert len(native) == 1 and native[0].startswith("the server compaction failed") and said in native[0]


def test_arrange_tiers_refuses_an_unknown_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown compaction tiers \['cloud'\]"):
        arrange_tiers(("native", "cloud"), native=(), summary=(), offline=())


def test_a_native_tier_runs_while_the_breaker_is_closed_unless_slotted_otherwise() -> None:
    bare = SummaryTier(ExtractiveSummarizer())
    slotted = TierSlot(SummaryTier(ExtractiveSummarizer()), "any")
    tiers = arrange_tiers(("native",), native=(bare, slotted), summary=(), offline=())
    assert tiers == (TierSlot(bare, "closed"), slotted)


# -- threshold: the extension ------------------------------------------------------------------------


def test_before_any_call_the_summary_models_provider_decides_the_edits() -> None:
    extension = ServerCompaction()
    assert extension.supported(_session(extensions=[extension], summarizer=Scripted())) == ANTHROPIC_CONTEXT_EDITS
    for nobody in (_session(extensions=[extension]), _session(extensions=[extension], summarizer=ExtractiveSummarizer())):
        assert extension.supported(nobody) == frozenset()


def test_no_ledger_note_is_added_while_the_server_has_not_compacted() -> None:
    provider = Scripted(_reply("Looking at src/parse.py."), _reply("Done."))
    session = _session(extensions=[ServerCompaction()])
    session.add_user("Fix the parser in src/parse.py")
    asyncio.run(session.call(provider))
    session.add_user("And the tests?")
    asyncio.run(session.call(provider))
    texts = [str(m["content"]) for request in provider.sent for m in request["messages"]]
    assert not any(LEDGER_NOTE in text for text in texts)
    assert [r["context_management"]["edits"][0]["type"] for r in provider.sent] == [COMPACT_EDIT, COMPACT_EDIT]  # type: ignore[typeddict-item]
