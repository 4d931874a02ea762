"""The background summary and idle compaction at every entry point (issue 28, points 1 and 2).

The blocking entry points (the drop-ins over `anthropic.Anthropic` / `openai.OpenAI`, `run_agent`
/ `iter_agent`) run their event loop only inside each call, so a background summary would be
frozen between turns: they refuse `Policy.background_summary` before opening anything, and
their async twins run it. The LangChain middleware has no background summary and refuses it.
Every drop-in gives the host `idle_deadline()` and `idle()`. The SDKs are the real ones,
talking to the local server (tests/apiserver.py).
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from summaries import nine_section_summary

from apiserver import GATE_LIMIT, ApiServer, Message, RecordedRequest, api_server_fixture, message  # noqa: F401  (registers the api_server fixture)
from unbounded.errors import ConfigError
from unbounded.events import (
    BackgroundSummaryStarted,
    BackgroundSummarySwapped,
    Event,
    IdleCompaction,
    SummaryStall,
)
from unbounded.integrations import iter_agent, run_agent, wrap
from unbounded.integrations.agent_loop import arun_agent
from unbounded.model.normalize import validate_request
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig
from unbounded.session_options import SessionOptions

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

MODEL = "claude-sonnet-4-6"
BACKGROUND = Policy(background_summary=True)
LOG = "Here is the log:\n" + "a line of the build log\n" * 2_000


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def _clients(api_server: ApiServer, *, sync: bool) -> list[Any]:
    return [api_server.anthropic_client(sync=sync), api_server.openai_client(sync=sync)]


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_blocking_drop_in_refuses_the_background_summary_before_it_opens_the_folder(api_server: ApiServer, tmp_path: Path, sdk: str) -> None:
    client = api_server.anthropic_client(sync=True) if sdk == "anthropic" else api_server.openai_client(sync=True)
    with pytest.raises(ConfigError, match="wrap the SDK's async client"):
        wrap(client, session_folder=tmp_path / "s", model=MODEL, policy=BACKGROUND)
    Session.open(tmp_path / "s", SessionConfig(model=MODEL)).close()  # its lock was never taken
    given = Session(SessionConfig(model=MODEL), policy=BACKGROUND)
    with pytest.raises(ConfigError, match="background_summary"):
        wrap(client, given)
    wrap(client, model=MODEL, policy=Policy()).close()  # without it: wrapped


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_drop_in_runs_the_policy_given_in_options(api_server: ApiServer, tmp_path: Path, sdk: str) -> None:
    blocking = api_server.anthropic_client(sync=True) if sdk == "anthropic" else api_server.openai_client(sync=True)
    with pytest.raises(ConfigError, match="wrap the SDK's async client"):
        wrap(blocking, session_folder=tmp_path / "s", model=MODEL, options=SessionOptions(policy=BACKGROUND))
    Session.open(tmp_path / "s", SessionConfig(model=MODEL)).close()  # its lock was never taken
    asynchronous = api_server.anthropic_client(sync=False) if sdk == "anthropic" else api_server.openai_client(sync=False)
    wrapped = wrap(asynchronous, model=MODEL, options=SessionOptions(policy=BACKGROUND))
    assert wrapped.session.policy.background_summary  # not blanked by wrap()'s own policy=None


def test_the_async_drop_ins_run_the_background_summary(api_server: ApiServer) -> None:
    for client in _clients(api_server, sync=False):
        wrapped = wrap(client, model=MODEL, policy=BACKGROUND)
        assert wrapped.session.policy.background_summary
        asyncio.run(wrapped.close())


def test_the_blocking_agent_loop_refuses_the_background_summary_and_the_async_loop_runs_it(api_server: ApiServer) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    config = SessionConfig(model=MODEL, system="You are careful.")
    blocking = AnthropicProvider(api_server.anthropic_client(sync=True))
    with pytest.raises(ConfigError, match="use arun_agent or aiter_agent"):
        run_agent(config, blocking, prompt="Go.", policy=BACKGROUND)
    with pytest.raises(ConfigError, match="use arun_agent or aiter_agent"):
        iter_agent(Session(config, policy=BACKGROUND), blocking, prompt="Go.")  # refused at the call, not at the first step
    assert api_server.requests == []
    api_server.anthropic.push(message("Done."))

    async def run() -> Any:
        return await arun_agent(config, AnthropicProvider(api_server.anthropic_client()), prompt="Go.", policy=BACKGROUND)

    result = asyncio.run(run())
    assert result.text == "Done." and result.session.policy.background_summary


def test_the_langchain_middleware_refuses_the_background_summary() -> None:
    pytest.importorskip("langchain")
    from unbounded.integrations.langchain import UnboundedMiddleware

    with pytest.raises(ConfigError, match=r"LangChain middleware .* has no background summary"):
        UnboundedMiddleware(MODEL, context_window=200_000, policy=BACKGROUND)
    assert not UnboundedMiddleware(MODEL, context_window=200_000, policy=Policy()).policy.background_summary


def _create(client: Any, history: list[dict[str, Any]]) -> Any:
    return client.messages.create(model=MODEL, max_tokens=1024, messages=history)


def _conversation(api_server: ApiServer) -> list[dict[str, Any]]:
    """Two turns' replies queued (the second at 120,000 tokens); the opening history."""
    api_server.anthropic.push(
        message("The build fails at the link step.", usage={"input_tokens": 60_000}),
        message("Linker flags fixed.", usage={"input_tokens": 120_000}),
        message("The tests pass now.", usage={"input_tokens": 9_000}),
    )
    return [{"role": "user", "content": LOG}]


def test_the_blocking_drop_in_tells_the_host_when_to_call_idle_and_compacts_then(api_server: ApiServer) -> None:
    clock, events = Clock(), []  # type: ignore[var-annotated]
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, policy=Policy(), summarizer="extractive", clock=clock, events=events.append)
    assert client.idle_deadline() is None and client.idle() is None  # no reply yet
    history = _conversation(api_server)
    reply = _create(client, history)
    history += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Fix it."}]
    reply = _create(client, history)
    deadline = client.idle_deadline()
    assert deadline == clock.now + timedelta(seconds=0.9 * 300)  # 4.5 minutes of the 5-minute cache
    clock.now = deadline  # the host polled, and the deadline came
    result = client.idle()
    assert result is not None and client.status().compactions == 1
    [idle] = [e for e in events if isinstance(e, IdleCompaction)]
    assert idle.tokens >= 120_000
    history += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Run the tests."}]
    _create(client, history)
    sent = api_server.requests[-1].json["messages"]
    assert "a line of the build log\\na line" not in str(sent)  # the resume reads the summary
    assert "Run the tests." in str(sent[-1]["content"])
    client.close()


def test_the_async_drop_in_idles_the_same_way(api_server: ApiServer) -> None:
    clock = Clock()

    async def scenario() -> tuple[int, Any]:
        client = wrap(api_server.openai_client(), model=MODEL, policy=Policy(), summarizer="extractive", clock=clock)
        assert client.idle_deadline() is None and await client.idle() is None
        api_server.openai.push(
            message("The build fails.", usage={"input_tokens": 60_000}),
            message("Flags fixed.", usage={"input_tokens": 120_000}),
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": LOG}]
        await client.chat.completions.create(model=MODEL, messages=history)
        history += [{"role": "assistant", "content": "The build fails."}, {"role": "user", "content": "Fix it."}]
        await client.chat.completions.create(model=MODEL, messages=history)
        deadline = client.idle_deadline()
        clock.now = deadline
        result = await client.idle()
        await client.close()
        return client.status().compactions, result

    compactions, result = asyncio.run(scenario())
    assert compactions == 1 and result is not None


def test_the_async_drop_in_swaps_in_the_background_summary_and_keeps_the_turns_recorded_meanwhile(api_server: ApiServer) -> None:
    """The caller's own loop over `AsyncAnthropic`: the summary starts past the mark and is
    written while the next turns run; at the threshold it is swapped in without a wait, those
    turns kept verbatim after it, once."""
    events: list[Event] = []
    policy = Policy(autocompact_pct_override=5, background_summary=True, background_summary_fraction=0.5)
    turns = iter([("The build fails at the link step.", 5_000), ("Linker flags updated.", 6_000), ("Tests: 3 failures in test_io.", 9_500), ("Fixed test_io.", 4_000)])

    written = threading.Event()  # the summary's reply waits for it: in flight while turns run

    def answer(request: RecordedRequest) -> Message:
        if "<summary>" in str(request.json["messages"][-1]):
            written.wait(GATE_LIMIT)
            return message(nine_section_summary("the build"), chunk_size=400)
        text, tokens = next(turns)
        return message(text, usage={"input_tokens": tokens, "output_tokens": 10})

    api_server.anthropic.push(*[answer] * 5)
    prompts = [LOG, "Fix it.", "Now run the tests, please.", "Fix test_io."]

    async def scenario() -> Any:
        client = wrap(api_server.anthropic_client(), model=MODEL, context_window=200_000, policy=policy, events=events.append)
        history: list[dict[str, Any]] = []
        for prompt in prompts:
            history.append({"role": "user", "content": prompt})
            reply = await client.messages.create(model=MODEL, max_tokens=1024, messages=history)
            history.append({"role": "assistant", "content": reply.content})
            if prompt == prompts[2]:
                assert client.session.background.pending  # still being written as the turns ran
                written.set()
                await client.session.background.settle()
        await client.close()
        return client.status().compactions

    compactions = asyncio.run(scenario())
    assert [type(e) for e in events].count(BackgroundSummaryStarted) == 1
    [swapped] = [e for e in events if isinstance(e, BackgroundSummarySwapped)]
    assert swapped.kept_since >= 2 and compactions == 1
    assert not any(isinstance(e, SummaryStall) for e in events)
    last = api_server.requests[-1].json["messages"]
    validate_request(last)
    sent = str(last)
    assert "a line of the build log\\na line" not in sent  # summarized away
    for said in ("Now run the tests, please.", "Tests: 3 failures in test_io.", "Fix test_io."):
        assert sent.count(said) == 1, said
