"""Review 16c of the last fixes (i36z side calls with a new system, i36y model names and
redaction): each confirmed bug is a strict xfail."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
)
from unbounded.events import Event
from unbounded.integrations import wrap

anthropic = pytest.importorskip("anthropic")

CLAUDE = "claude-sonnet-4-6"


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events if e.kind in ("side_call_passed", "cache_params_changed")]


def test_a_system_prompt_with_a_time_line_changing_every_turn_is_recorded(
    api_server: ApiServer,
) -> None:
    """An agent whose system prompt carries the current time changes it at every call: each
    call is then a first call with a new system, a side call, and nothing after the first
    turn is ever recorded (no compaction, no cache plan)."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(5):
        api_server.anthropic.push(message(f"a{n}", id=f"msg_{n}"))
        reply = client.messages.create(
            model=CLAUDE,
            max_tokens=100,
            system=f"You are A. Time: 10:0{n}",
            messages=messages,
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"u{n + 1}"},
        ]
    assert len(client.session.entries) == 10


def test_two_judge_calls_in_a_row_do_not_take_over_the_conversation(
    api_server: ApiServer,
) -> None:
    """A tool-less agent asks a judge twice over the conversation (an input check, then an
    output check) with the judge's system: the second judge call is adopted as a change of
    system, its question recorded, and the main agent's next calls are side calls."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(2):
        api_server.anthropic.push(message(f"a{n}", id=f"msg_{n}"))
        reply = client.messages.create(
            model=CLAUDE, max_tokens=100, system="You are A.", messages=messages
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"u{n + 1}"},
        ]
    for check in ("Is the input safe?", "Is the output safe?"):
        api_server.anthropic.push(message("yes", id=f"msg_j{len(check)}"))
        client.messages.create(
            model=CLAUDE,
            max_tokens=10,
            system="You are a judge.",
            messages=[*messages[:-1], {"role": "user", "content": check}],
        )
    api_server.anthropic.push(message("a2", id="msg_a2"))
    client.messages.create(model=CLAUDE, max_tokens=100, system="You are A.", messages=messages)
    assert client.session.config.system == "You are A."
    assert len(client.session.entries) == 6  # u0 a0 u1 a1 u2 a2
    assert _kinds(events) == ["side_call_passed", "side_call_passed"]


def test_history_new_caller_changes_its_system(api_server: ApiServer) -> None:
    """A `history="new"` caller sends only its new messages, each call continuing the
    conversation: a new system is a change of system at once (recorded, `CacheParamsChanged`),
    not a side call."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append, history="new")
    system = "You are A."
    for n in range(4):
        if n == 2:
            system = "You are B."
        api_server.anthropic.push(message(f"a{n}", id=f"msg_{n}"))
        client.messages.create(
            model=CLAUDE,
            max_tokens=100,
            system=system,
            messages=[{"role": "user", "content": f"u{n}"}],
        )
    assert client.session.config.system == "You are B."
    assert len(client.session.entries) == 8
    assert [e.kind for e in events if e.kind in ("side_call_passed", "cache_params_changed")] == [
        "cache_params_changed"
    ]


# ------------------------------------------------------------------ model names with a ":tag"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-sonnet-4-6-20250929:beta", "claude-sonnet-4-6"),  # f0a5812 found it
    ],
)
def test_a_tag_after_a_known_model_name_still_finds_it(name: str, expected: str) -> None:
    """A `:tag` after a model name (OpenRouter's `:beta`, `:thinking`; ollama's `:latest`) is
    read as a LangChain `provider:` prefix and the model name dropped: `beta` is looked up."""
    from unbounded.catalog import load_model_table

    info = load_model_table().find(name)
    assert info is not None and info.name == expected


@pytest.mark.parametrize(
    "name",
    [
        "claude-sonnet-4-6:beta",
        "claude-opus-4-6:thinking",
        "openrouter/anthropic/claude-sonnet-4-6:beta",
    ],
)
def test_a_claude_name_with_a_tag_is_anthropic(name: str) -> None:
    """f0a5812 read these as Anthropic; now `provider_of_name` is None, so a drop-in plans
    such a model the table lacks with no prices (its costs counted as 0)."""
    from unbounded.catalog import provider_of_name

    assert provider_of_name(name) == "anthropic"


# ------------------------------------------------------------------ redact_url on an ordinary URL


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://db.example.com:5432/app?user=admin@myserver&sslmode=require",
        "postgresql://[::1]:5432/app?application_name=me@laptop",
        "postgresql://db:5432/app?options=-c%20search_path=a@b",
    ],
)
def test_redact_url_leaves_a_url_without_a_password_as_it_is(url: str) -> None:
    """No password in the URL, a port, and an `@` in a query value (Azure's `user@server`
    user name, an application name): the host's `:port/path?...` up to that `@` is taken
    for `user:password` and masked, hiding the host, port, database and query."""
    from unbounded.redaction import redact_url

    assert redact_url(url) == url


def test_redact_address_secrets_leaves_the_user_name_of_a_url_without_a_password() -> None:
    """The same misreading makes `5432/app?user=admin` a password of the address, so the
    quoted user name of libpq's reason is masked although the address holds no password."""
    from unbounded.redaction import redact_address_secrets

    reason = 'password authentication failed for user "admin"'
    address = "postgresql://db.example.com:5432/app?user=admin@myserver&sslmode=require"
    assert redact_address_secrets(reason, address) == reason


def test_a_reply_regenerated_with_a_new_system_then_continued_is_recorded(
    api_server: ApiServer,
) -> None:
    """The user edits the system prompt and regenerates the last reply, then goes on with the
    new system: the regenerate (a retry with a new system) is a side call, is not remembered,
    and the history that goes on from its reply breaks off from the recorded one, so no later
    call is ever recorded."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), events=events.append)
    messages: list[Any] = [{"role": "user", "content": "u0"}]
    for n in range(2):
        api_server.anthropic.push(message(f"a{n}", id=f"msg_{n}"))
        reply = client.messages.create(
            model=CLAUDE, max_tokens=100, system="You are A.", messages=messages
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"u{n + 1}"},
        ]
    messages = messages[:-2]  # the last call's messages: regenerate its reply
    for n in range(3):
        api_server.anthropic.push(message(f"b{n}", id=f"msg_b{n}"))
        reply = client.messages.create(
            model=CLAUDE, max_tokens=100, system="You are B.", messages=messages
        )
        messages += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"v{n}"},
        ]
    assert client.session.config.system == "You are B."
