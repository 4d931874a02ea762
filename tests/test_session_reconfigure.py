"""`Session.reconfigure`: the one door for config and policy changes, and what it recomputes.

The drop-in client and the agent loop change a session's tools after it was opened; every
value derived from the config (the prefix overhead, thresholds, the scaled policy) must then
be what a session opened with that config has.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
)
from unbounded.errors import ConfigError
from unbounded.integrations import wrap
from unbounded.integrations.agent_loop import Tool, _install_tools
from unbounded.policy import Policy
from unbounded.session import Session, SessionConfig

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."
TOOLS = [
    {
        "name": f"tool_{n}",
        "description": f"Tool number {n}: " + "does a careful thing with its input. " * 20,
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for n in range(20)
]


def fresh_overhead(config: SessionConfig, policy: Policy | None = None) -> int:
    return Session(config, policy=policy or Policy()).estimate_request_tokens([])


def test_the_drop_in_installing_tools_counts_them_like_a_fresh_session(api_server: ApiServer) -> None:
    # wrap(model=...) opens the session before the first call, without tools or system.
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, policy=Policy())
    before = client.session.estimate_request_tokens([])
    api_server.anthropic.push(message("ok", id="msg_1"))
    client.messages.create(
        model=MODEL, max_tokens=1024, system=SYSTEM, tools=TOOLS,
        messages=[{"role": "user", "content": "Go."}],
    )
    wanted = fresh_overhead(SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=1024))
    assert wanted > 10 * before  # twenty described tools weigh thousands of tokens
    # After the reply the calibration (reported/estimated) applies to both alike: compare the
    # raw overhead the session counts from, then the estimate before any usage.
    session = client.session
    assert session.config.tools == TOOLS
    fresh = Session(SessionConfig(model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=1024), policy=Policy())
    fresh.state.calibration = session.calibration
    assert session.estimate_request_tokens([]) == fresh.estimate_request_tokens([])


def test_the_drop_in_changing_model_takes_the_new_models_window(api_server: ApiServer) -> None:
    client = wrap(api_server.anthropic_client(sync=True), model=MODEL, policy=Policy())
    api_server.anthropic.push(message("ok", id="msg_1"))
    client.messages.create(
        model="claude-3-5-haiku-20241022", max_tokens=1024,
        messages=[{"role": "user", "content": "Go."}],
    )
    fresh = Session(SessionConfig(model="claude-3-5-haiku-20241022", max_tokens=1024), policy=Policy())
    assert client.session.model_info == fresh.model_info
    assert client.session.thresholds == fresh.thresholds


def test_the_agent_loop_installing_tools_counts_them() -> None:
    session = Session(SessionConfig(model=MODEL, system=SYSTEM), policy=Policy())

    def read_file(path: str) -> str:
        """Read a file."""
        return path

    tools = [Tool.from_function(read_file)]
    _install_tools(session, tools)
    fresh = Session(SessionConfig(model=MODEL, system=SYSTEM, tools=[tools[0].definition()]), policy=Policy())
    assert session.estimate_request_tokens([]) == fresh.estimate_request_tokens([])
    assert session.estimate_request_tokens([]) > fresh_overhead(SessionConfig(model=MODEL, system=SYSTEM))


def test_reconfigure_recomputes_window_policy_and_thresholds() -> None:
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    small = SessionConfig(model=MODEL, context_window=40_000)
    session.reconfigure(small)
    fresh = Session(small, policy=Policy())
    assert session.model_info.context_window == 40_000
    assert session.thresholds == fresh.thresholds
    assert session.policy == fresh.policy
    assert session.policy != Policy()  # scaled for the small window


def test_reconfigure_with_a_policy_rescales_it() -> None:
    session = Session(SessionConfig(model=MODEL, context_window=40_000), policy=Policy())
    session.reconfigure(policy=Policy(microcompact_keep_recent=7))
    assert session.policy.microcompact_keep_recent == 7
    assert session.policy == Policy(microcompact_keep_recent=7).for_window(40_000)
    assert session.detector.policy is session.policy


def test_a_config_the_window_cannot_hold_is_refused_and_changes_nothing() -> None:
    session = Session(SessionConfig(model=MODEL, context_window=40_000), policy=Policy())
    config, thresholds = session.config, session.thresholds
    huge = dataclasses.replace(config, system="word " * 200_000)
    with pytest.raises(ConfigError, match="no compaction can make room"):
        session.reconfigure(huge)
    assert session.config is config and session.thresholds is thresholds


@pytest.mark.parametrize("name", ["config", "model_info", "policy", "thresholds"])
def test_derived_settings_are_read_only(name: str) -> None:
    session = Session(SessionConfig(model=MODEL), policy=Policy())
    value: Any = getattr(session, name)
    with pytest.raises(AttributeError):
        setattr(session, name, value)
