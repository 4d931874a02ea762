"""Provider profiles: what each provider declares, and that every wrapper in the package has
the profile of the provider it wraps (a wrapper that loses it changes how a summary is read:
the offline hand-over parsed for tags, or a second facts ledger appended)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

import pytest
from summaries import continuation_summary, nine_section_summary

import unbounded
from unbounded.compaction.conversation import CacheSafeParams, compact_conversation
from unbounded.compaction.glue import default_facts_ledger
from unbounded.compaction.summary_guard import ANY_SECTIONS, CONTINUATION_SECTIONS, NINE_SECTIONS
from unbounded.errors import CompactionError, ConfigError
from unbounded.evaluation.replay import RecordingProvider
from unbounded.extensions.subagents import ContinuationSummarizer
from unbounded.integrations.anthropic_client import _CallerHeaders, _CallerState
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE, ProviderProfile
from unbounded.model.request import ProviderRequest
from unbounded.model.response import ModelResponse, Provider, ProviderWrapper
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.providers.retry import RetryingProvider

DECLARED = ProviderProfile(writes_final_summary=True, includes_facts=True, summary_sections=NINE_SECTIONS, offline=True)
"""A profile unlike the default in every field, so a wrapper that drops any one shows."""


class Declaring:
    """A provider declaring `DECLARED`, with a name and cache-edit support of its own."""

    name = "declaring"
    supports_cache_edits = True
    profile = DECLARED

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        return ModelResponse([{"type": "text", "text": "ok"}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def _no_wait(delay: float) -> Any:
    return asyncio.sleep(0)


def _traced(inner: Provider) -> Any:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider

    from unbounded.telemetry import Telemetry

    return Telemetry(tracer_provider=TracerProvider()).traced(inner)


WRAPS: dict[str, Callable[[Provider], Any]] = {
    "unbounded.evaluation.replay.RecordingProvider": RecordingProvider,
    "unbounded.providers.retry.RetryingProvider": lambda inner: RetryingProvider(inner, sleep=_no_wait),
    "unbounded.telemetry._TracedProvider": _traced,
    "unbounded.extensions.subagents.ContinuationSummarizer": ContinuationSummarizer,
    "unbounded.integrations.anthropic_client._CallerHeaders": lambda inner: _CallerHeaders(
        inner, None, lambda client: inner, _CallerState(["context-1m-2025-08-07"]), betas=True
    ),
}
"""How to build each wrapper of the package around a provider (every one must be here)."""

BUILT_ON = {"unbounded.compaction.native.ServerCompactor"}
"""Providers built on another that are not wrappers: they send something else (a server-side
compaction instead of a summary request) and declare a profile of their own."""

OWN_SECTIONS = {"unbounded.extensions.subagents.ContinuationSummarizer": CONTINUATION_SECTIONS}
"""Wrappers that declare the sections of their own prompt instead of the inner ones."""


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _package_classes() -> list[type]:
    """Every class defined in the package, modules imported in name order."""
    classes: dict[str, type] = {}
    for info in sorted(pkgutil.walk_packages(unbounded.__path__, "unbounded."), key=lambda i: i.name):
        if info.name.endswith("__main__"):  # runs the CLI when imported
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                classes[_qualified(cls)] = cls
    return [classes[name] for name in sorted(classes)]


def _wraps_a_provider(cls: type) -> bool:
    """A provider (it has `create`) built around another one (its constructor takes one)."""
    if not callable(getattr(cls, "create", None)) or cls.__init__ is object.__init__:
        return False
    parameters = inspect.signature(cls.__init__).parameters.values()
    return any(str(p.annotation).split("|")[0].strip() in ("Provider", "'Provider'") for p in parameters)


def _wrappers() -> list[str]:
    classes = _package_classes()
    found = {_qualified(c) for c in classes if _wraps_a_provider(c)}
    found |= {_qualified(c) for c in classes if issubclass(c, ProviderWrapper) and c is not ProviderWrapper}
    return sorted(found)


def test_every_provider_wrapper_in_the_package_is_a_provider_wrapper_and_listed_here() -> None:
    found = [name for name in _wrappers() if name not in BUILT_ON]
    assert found == sorted(WRAPS), "a new wrapper: subclass ProviderWrapper and add it to WRAPS"
    by_name = {_qualified(c): c for c in _package_classes()}
    assert [name for name in found if not issubclass(by_name[name], ProviderWrapper)] == []


@pytest.mark.parametrize("wrapper", sorted(WRAPS))
def test_a_wrapper_has_the_profile_name_and_cache_edits_of_what_it_wraps(wrapper: str) -> None:
    wrapped = WRAPS[wrapper](Declaring())
    sections = OWN_SECTIONS.get(wrapper, DECLARED.summary_sections)
    assert wrapped.profile == dataclasses.replace(DECLARED, summary_sections=sections)
    assert (wrapped.name, wrapped.supports_cache_edits) == ("declaring", True)
    assert isinstance(wrapped, Provider)


@pytest.mark.parametrize("outer", sorted(WRAPS))
@pytest.mark.parametrize("inner", sorted(WRAPS))
def test_the_profile_survives_any_two_wrappers_nested(outer: str, inner: str) -> None:
    wrapped = WRAPS[outer](WRAPS[inner](ExtractiveSummarizer()))
    expected = ExtractiveSummarizer.profile
    own = OWN_SECTIONS.get(outer) or OWN_SECTIONS.get(inner)
    if own is not None:
        expected = dataclasses.replace(expected, summary_sections=own)
    assert wrapped.profile == expected


def test_a_recorded_offline_summarizer_writes_its_final_summary() -> None:
    """Replay's default summarizer, recorded, must not go through the tag parser."""
    assert RecordingProvider(ExtractiveSummarizer()).profile.writes_final_summary is True


def test_a_retried_offline_summarizer_still_lists_the_facts() -> None:
    """Else the facts ledger would be appended a second time."""
    assert RetryingProvider(ExtractiveSummarizer()).profile.includes_facts is True


def test_what_the_shipped_providers_declare() -> None:
    assert ExtractiveSummarizer.profile == ProviderProfile(writes_final_summary=True, includes_facts=True, offline=True)
    pytest.importorskip("anthropic")
    pytest.importorskip("openai")
    from unbounded.providers import AnthropicProvider, OpenAIProvider

    assert OpenAIProvider(api_key="k").profile == MODEL_PROFILE
    # The Anthropic API also runs context edits and compaction on the server (a tier of ours).
    assert AnthropicProvider(api_key="k").profile == dataclasses.replace(
        MODEL_PROFILE,
        native_context_edits=frozenset(
            {"compact_20260112", "clear_thinking_20251015", "clear_tool_uses_20250919"}
        ),
    )
    assert ProviderProfile(writes_final_summary=False, includes_facts=False, summary_sections=None, offline=False) == MODEL_PROFILE


def test_a_continuation_with_a_prompt_of_its_own_checks_only_the_size() -> None:
    assert ContinuationSummarizer(Declaring(), prompt="Sum it up <summary>").profile.summary_sections is ANY_SECTIONS
    assert ContinuationSummarizer(Declaring()).profile.summary_sections is CONTINUATION_SECTIONS


def test_a_wrapper_refuses_what_is_not_a_provider_when_built() -> None:
    with pytest.raises(ConfigError, match="RetryingProvider wraps a Provider"):
        RetryingProvider(object())  # type: ignore[arg-type]


def test_a_provider_without_a_profile_is_not_a_provider() -> None:
    class Undeclared:
        name = "undeclared"
        supports_cache_edits = False

        async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
            raise NotImplementedError

    assert not isinstance(Undeclared(), Provider)
    assert isinstance(Declaring(), Provider)


@pytest.mark.parametrize("flag", ["writes_final_summary", "includes_facts", "offline"])
def test_a_profile_takes_only_booleans_for_its_flags(flag: str) -> None:
    with pytest.raises(ConfigError, match=f"ProviderProfile.{flag} must be True or False, not 1"):
        ProviderProfile(**{flag: 1})


def test_a_profile_takes_only_a_section_spec_for_its_sections() -> None:
    with pytest.raises(ConfigError, match="summary_sections must be a SectionSpec or None, not tuple"):
        ProviderProfile(summary_sections=("Task",))  # type: ignore[arg-type]


def test_a_profile_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODEL_PROFILE.offline = True  # type: ignore[misc]


# -- what compaction reads of a profile -------------------------------------------------------------

VIEW = [
    Entry.user("Fix parser.py: parse_header fails on empty lines."),
    Entry.assistant([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest tests/test_parser.py"}}], message_id="m1"),
    Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "FAILED test_empty_line", "is_error": True}]),
    Entry.assistant([{"type": "text", "text": "The parser skips nothing: I will fix parse_header. " * 40}], message_id="m2"),
    Entry.user("Go on."),
]


class Replying(Declaring):
    """A provider declaring `profile` that replies `text`."""

    def __init__(self, profile: ProviderProfile, text: str) -> None:
        self.profile = profile  # type: ignore[misc]
        self.text = text

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        return ModelResponse([{"type": "text", "text": self.text}], "end_turn", {"input_tokens": 1, "output_tokens": 1}, "m")


def _summary(profile: ProviderProfile, text: str) -> str:
    result = asyncio.run(
        compact_conversation(VIEW, Replying(profile, text), params=CacheSafeParams(model="claude-sonnet-4-5"), facts_ledger=default_facts_ledger, policy=Policy())
    )
    return result.summary_text


def test_a_final_summary_is_used_as_it_is_and_another_is_parsed_for_its_tags() -> None:
    reply = nine_section_summary("the parser")
    assert "<analysis>" in reply
    assert "<analysis>" in _summary(ProviderProfile(writes_final_summary=True, includes_facts=True), reply)
    assert "<analysis>" not in _summary(ProviderProfile(includes_facts=True), reply)


def test_the_facts_ledger_is_appended_only_to_a_summary_without_the_facts() -> None:
    reply = nine_section_summary("the parser", analysis=False)
    with_facts, without = _summary(ProviderProfile(includes_facts=True), reply), _summary(MODEL_PROFILE, reply)
    assert without.startswith(with_facts) and "parser.py" in without[len(with_facts):]


def test_the_guard_checks_the_sections_the_profile_declares() -> None:
    continuation = continuation_summary("the parser")
    assert _summary(ProviderProfile(includes_facts=True, summary_sections=CONTINUATION_SECTIONS), continuation)
    with pytest.raises(CompactionError):
        _summary(ProviderProfile(includes_facts=True), continuation)


def test_a_provider_built_on_another_declares_its_own_profile_whatever_it_wraps() -> None:
    from unbounded.compaction.native import ServerCompactor

    assert [name for name in BUILT_ON if name in _wrappers()] == sorted(BUILT_ON)
    assert not issubclass(ServerCompactor, ProviderWrapper)
    assert ServerCompactor(Declaring()).profile == MODEL_PROFILE != DECLARED
