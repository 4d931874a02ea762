"""What a drop-in keeps of the caller's choices (issue 28's leftovers): the summarizer given in
`options=SessionOptions(...)` writes the summaries of the session the wrapper opens, and a
session driven by a blocking entry point refuses `Policy.background_summary` when
`reconfigure` switches it on later, as the constructors refuse it. The SDKs are the real
ones, talking to the local server (tests/apiserver.py)."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import Any

import pytest

from apiserver import ApiServer, api_server_fixture, message, tool_use_block  # noqa: F401  (registers the api_server fixture)
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.integrations import run_agent, wrap
from unbounded.policy import Policy
from unbounded.providers.anthropic import AnthropicProvider
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig
from unbounded.session_options import SessionOptions
from unbounded.sync_session import SyncSession

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

MODEL = "claude-sonnet-4-6"
BACKGROUND = Policy(background_summary=True)


def _client(api_server: ApiServer, sdk: str, *, sync: bool) -> Any:
    if sdk == "anthropic":
        return api_server.anthropic_client(sync=sync)
    return api_server.openai_client(sync=sync)


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
@pytest.mark.parametrize("in_folder", [False, True])
def test_the_summarizer_given_in_options_writes_the_summaries(api_server: ApiServer, tmp_path: Path, sdk: str, in_folder: bool) -> None:
    chosen = ExtractiveSummarizer()
    folder = tmp_path / "s" if in_folder else None
    with wrap(_client(api_server, sdk, sync=True), session_folder=folder, model=MODEL, options=SessionOptions(summarizer=chosen)) as client:
        assert client.session.deps.summarizer is chosen
    with wrap(_client(api_server, sdk, sync=True), model=MODEL) as client:
        assert client.session.deps.summarizer is not chosen  # without it: the client's own


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_summarizer_given_twice_is_refused_at_wrap(api_server: ApiServer, tmp_path: Path, sdk: str) -> None:
    options = SessionOptions(summarizer=ExtractiveSummarizer())
    with pytest.raises(ConfigError, match=r"summarizer twice.*give it in one place"):
        wrap(_client(api_server, sdk, sync=True), session_folder=tmp_path / "s", model=MODEL, summarizer="extractive", options=options)
    assert not (tmp_path / "s").exists()  # refused before the folder was made


def test_a_model_table_given_in_options_names_the_model_of_an_openai_drop_in(api_server: ApiServer) -> None:
    table = load_model_table()
    own = dataclasses.replace(table.get("gpt-5.4"), name="acme-chat-1", context_window=64_000)
    with wrap(api_server.openai_client(sync=True), model="acme-chat-1", options=SessionOptions(model_table=table.with_model(own))) as client:
        assert client.session.model_info.context_window == 64_000
    with pytest.raises(ConfigError, match="'acme-chat-1' is not in the model table"):
        wrap(api_server.openai_client(sync=True), model="acme-chat-1")


def _refused_at_reconfigure(session: Session, advice: str) -> None:
    """`reconfigure` to the background summary raises the constructors' error and changes nothing."""
    before = session.policy
    with pytest.raises(ConfigError, match=rf"needs an event loop running between turns.*{advice}"):
        session.reconfigure(policy=BACKGROUND)
    assert session.policy == before and not session.policy.background_summary


def test_a_session_behind_a_sync_session_refuses_the_background_summary_at_reconfigure() -> None:
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    sync = SyncSession(session)
    _refused_at_reconfigure(session, "use the async Session")
    with pytest.raises(ConfigError, match="use the async Session"):
        sync.reconfigure(policy=BACKGROUND)
    session.reconfigure(policy=Policy(recall_enabled=False))  # any other policy is taken
    assert not session.policy.recall_enabled


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_session_behind_a_blocking_drop_in_refuses_the_background_summary_at_reconfigure(api_server: ApiServer, sdk: str) -> None:
    given = Session(SessionConfig(model=MODEL), policy=Policy())
    client = wrap(_client(api_server, sdk, sync=True), given)
    _refused_at_reconfigure(given, r"wrap the SDK's async client")
    client.close()
    given.reconfigure(policy=BACKGROUND)  # no longer driven by the blocking client
    assert given.policy.background_summary
    with wrap(_client(api_server, sdk, sync=True), model=MODEL, policy=Policy()) as opened:
        _refused_at_reconfigure(opened.session, r"wrap the SDK's async client")  # one it opened too
    mine = Session(SessionConfig(model=MODEL), policy=Policy())
    wrap(_client(api_server, sdk, sync=False), mine)
    mine.reconfigure(policy=BACKGROUND)  # an async client runs it
    assert mine.policy.background_summary


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_a_blocking_drop_in_nobody_closed_stops_driving_the_session_once_collected(api_server: ApiServer, sdk: str) -> None:
    given = Session(SessionConfig(model=MODEL), policy=Policy())
    client = wrap(_client(api_server, sdk, sync=True), given)  # the usual: never closed
    _refused_at_reconfigure(given, r"wrap the SDK's async client")
    del client
    gc.collect()
    given.reconfigure(policy=BACKGROUND)  # the drop-in is gone: nothing blocking drives it
    assert given.policy.background_summary


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_closing_one_blocking_drop_in_twice_keeps_the_other_ones_hold(api_server: ApiServer, sdk: str) -> None:
    given = Session(SessionConfig(model=MODEL), policy=Policy())
    first = wrap(_client(api_server, sdk, sync=True), given)
    second = wrap(_client(api_server, sdk, sync=True), given)
    with first:
        first.close()  # closed, then closed again as the `with` block ends
    _refused_at_reconfigure(given, r"wrap the SDK's async client")  # the second still drives it
    second.close()
    given.reconfigure(policy=BACKGROUND)
    assert given.policy.background_summary


def test_a_session_run_by_the_blocking_agent_loop_refuses_the_background_summary_at_reconfigure(api_server: ApiServer) -> None:
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    refusals: list[str] = []

    def switch_policy() -> str:
        """Switch the session to the background summary."""
        try:
            session.reconfigure(policy=BACKGROUND)
        except ConfigError as error:
            refusals.append(str(error))
        return "tried"

    api_server.anthropic.push(message(tool_use_block("switch_policy", {}), stop_reason="tool_use"), message("Done."))
    result = run_agent(session, AnthropicProvider(api_server.anthropic_client(sync=True)), prompt="Go.", tools=[switch_policy])
    assert result.text == "Done."
    assert len(refusals) == 1 and "use arun_agent or aiter_agent" in refusals[0]
    assert not session.policy.background_summary
    session.reconfigure(policy=BACKGROUND)  # the loop has ended: an async loop may run it
    assert session.policy.background_summary
