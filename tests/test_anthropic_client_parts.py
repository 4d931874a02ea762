"""The drop-in's per-call shortcuts against their from-scratch definitions.

Each call of a wrapped client reuses what the previous one computed: the echo of the last reply
is known without dumping or printing it (`_ReplyEcho`), the caller's list is compared with a
kept copy extended in place, the config is not rebuilt while the call's parameters equal it,
and caller markers are put back copying only what changes. Each shortcut is checked here
against the plain computation it replaces.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver import (
    ApiServer,
    api_server_fixture,  # noqa: F401  (registers the api_server fixture)
    message,
)
from unbounded.errors import ConfigError
from unbounded.events import CacheParamsChanged, Event
from unbounded.integrations import wrap
from unbounded.integrations._anthropic_markers import honor_caller_markers, message_markers
from unbounded.integrations._anthropic_prints import SeenMessages, message_print
from unbounded.integrations.anthropic_client import _config_fields, _same_config
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.session import SessionConfig

anthropic = pytest.importorskip("anthropic")

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = "claude-sonnet-4-6"


# -- the echo of the last reply ---------------------------------------------------------


def sdk_reply(blocks: list[dict[str, Any]]) -> Any:
    """An SDK `Message` holding these blocks, as the SDK parses a reply."""
    from anthropic.types import Message

    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


REPLIES = [
    [{"type": "text", "text": "Reading it."}],
    [
        {"type": "thinking", "thinking": "which file?", "signature": "sig"},
        {"type": "text", "text": " Reading it. "},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/a.py"}},
    ],
    [{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "done"}],
    [
        {
            "type": "text",
            "text": "As the page says.",
            "citations": [
                {
                    "type": "web_search_result_location",
                    "url": "https://example.com",
                    "title": "Example",
                    "encrypted_index": "x",
                    "cited_text": "says",
                }
            ],
        }
    ],
    [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.com",
                    "title": "Example",
                    "encrypted_content": "e",
                    "page_age": None,
                }
            ],
        },
    ],
    [
        {"type": "tool_use", "id": "toolu_r", "name": "recall", "input": {"query": "port"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "ls"}},
    ],
]


def dumped(content: Sequence[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", exclude_none=True) for block in content]


@pytest.mark.parametrize("blocks", REPLIES)
def test_the_kept_reply_print_is_the_print_of_its_echo(blocks: list[dict[str, Any]]) -> None:
    """The print made from the recorded (plain) reply equals the print of the caller's echo
    of the SDK message, dumped and read from scratch."""
    from unbounded.providers.anthropic import AnthropicProvider

    reply = sdk_reply(blocks)
    plain = AnthropicProvider(anthropic.Anthropic(api_key="x")).wire.from_response(reply).content
    seen = SeenMessages()
    assert seen.remember_reply(reply.content, plain) == message_print(
        "assistant", dumped(reply.content)
    )


@pytest.mark.parametrize("blocks", REPLIES)
@pytest.mark.parametrize("recall_ids", [set(), {"toolu_r"}])
def test_reading_an_echo_gives_what_reading_it_from_scratch_gives(
    blocks: list[dict[str, Any]], recall_ids: set[str]
) -> None:
    from unbounded.providers.anthropic import AnthropicProvider

    reply = sdk_reply(blocks)
    plain = AnthropicProvider(anthropic.Anthropic(api_key="x")).wire.from_response(reply).content
    prompt = {
        "role": "user",
        "content": [
            {"type": "text", "text": "go", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
    }
    answer = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_r", "content": "x"}],
    }
    kept, scratch = SeenMessages(), SeenMessages()
    for seen in (kept, scratch):
        seen.read([prompt], recall_ids)
    kept.remember_reply(reply.content, plain)
    echo = {"role": "assistant", "content": reply.content}
    messages = [prompt, echo, answer]
    assert kept.reply is not None and kept.reply.is_echoed_by(echo)
    assert kept.read(messages, recall_ids) == scratch.read(messages, recall_ids)
    assert kept.prints == scratch.prints
    assert (kept.markers, kept.long_markers) == (scratch.markers, scratch.long_markers)
    assert kept.longest_ttl == scratch.longest_ttl == "1h"
    assert kept.recall_calls == scratch.recall_calls and kept.ids == scratch.ids
    # The echo's fields and canonical blocks are the dumped message's, read when asked.
    assert kept.fields(1, echo) == scratch.fields(1, echo) == ("assistant", dumped(reply.content))
    assert kept.canonical(1, echo) == scratch.canonical(1, echo)


def test_only_the_very_reply_content_is_an_echo() -> None:
    reply = sdk_reply(REPLIES[1])
    seen = SeenMessages()
    seen.remember_reply(reply.content, dumped(reply.content))
    echo = seen.reply
    assert echo is not None
    assert echo.is_echoed_by({"role": "assistant", "content": reply.content})
    assert not echo.is_echoed_by({"role": "user", "content": reply.content})
    assert not echo.is_echoed_by({"role": "assistant", "content": list(reply.content)})
    replaced = reply.content[0].model_copy()
    reply.content[0] = replaced  # a block swapped in the same list: read again
    assert not echo.is_echoed_by({"role": "assistant", "content": reply.content})
    reply.content.append(replaced)
    assert not echo.is_echoed_by({"role": "assistant", "content": reply.content})
    seen.remember_reply("text", [])  # a content that is not a list is never an echo
    assert seen.reply is None


# -- the kept copy of the caller's list -------------------------------------------------


def test_a_refused_list_leaves_the_kept_state_as_it_was() -> None:
    """A call whose new message is invalid raises, and the next call reads as if it had not
    happened (the copy extended for the comparison is cut back)."""
    first = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    seen = SeenMessages()
    seen.read(list(first), set())
    with pytest.raises(ConfigError):
        seen.read([*first, {"role": "system", "content": "c"}], set())
    assert seen.copies == first
    following = [*first, {"role": "user", "content": "c"}]
    scratch = SeenMessages()
    assert seen.read(following, set()) == 2
    scratch.read(following, set())
    assert seen.prints == scratch.prints and seen.markers == scratch.markers


def test_a_list_that_only_grew_is_compared_without_a_new_copy() -> None:
    messages: list[Any] = [{"role": "user", "content": "a"}]
    seen = SeenMessages()
    seen.read(messages, set())
    kept = seen.copies
    messages.append({"role": "assistant", "content": "b"})
    messages.append({"role": "user", "content": "c"})
    assert seen.read(messages, set()) == 1
    assert seen.copies is kept and kept == messages and kept is not messages
    shorter = messages[:1]
    assert seen.read(shorter, set()) == 1
    assert seen.copies == shorter and seen.copies is not kept


# -- the config fast path ---------------------------------------------------------------

TOOL = {"name": "Read", "input_schema": {"type": "object"}}
OTHER_TOOL = {"name": "Bash", "input_schema": {"type": "object"}}
text_blocks = st.lists(
    st.builds(lambda text: {"type": "text", "text": text}, st.sampled_from(["a", "b"])),
    min_size=1,
    max_size=2,
)
systems = st.one_of(st.none(), st.sampled_from(["", "sys", "other"]), text_blocks)
tool_lists = st.lists(st.sampled_from([TOOL, OTHER_TOOL]), max_size=2)
thinkings = st.one_of(st.none(), st.just({"type": "enabled", "budget_tokens": 2048}))
max_tokens_values = st.sampled_from([None, 1, 1024, 1024.0, True, 0, -1, "1024"])
models = st.sampled_from([MODEL, "claude-haiku-4-5", "", None, 3])


def as_given(value: Any, shape: str) -> Any:
    """A parameter as a caller may give it: as is, a tuple, or blocks as SDK objects."""
    if shape == "tuple" and isinstance(value, list):
        return tuple(value)
    if shape == "sdk" and isinstance(value, list) and value and "text" in value[0]:
        from anthropic.types import TextBlock

        return [TextBlock(type="text", text=block["text"]) for block in value]
    return copy.deepcopy(value)


@SETTINGS
@given(
    config_values=st.tuples(systems, tool_lists, thinkings, st.sampled_from([None, 1024])),
    call=st.tuples(models, systems, tool_lists, thinkings, max_tokens_values),
    shapes=st.tuples(*[st.sampled_from(["plain", "tuple", "sdk"])] * 2),
    same=st.booleans(),
)
def test_the_config_is_kept_only_when_rebuilding_it_gives_it_back(
    config_values: tuple[Any, ...], call: tuple[Any, ...], shapes: tuple[str, str], same: bool
) -> None:
    system, tools, thinking, max_tokens = config_values
    config = SessionConfig(
        model=MODEL, system=system, tools=tools, thinking=thinking, max_tokens=max_tokens
    )
    if same:  # the usual call: the very values the config was built from
        call = (MODEL, system, tools, thinking, max_tokens)
    model, system, tools, thinking, max_tokens = call
    params = {
        "model": model,
        "system": as_given(system, shapes[0]),
        "tools": as_given(tools, shapes[1]),
        "thinking": thinking,
        "max_tokens": max_tokens,
    }
    params = {k: v for k, v in params.items() if v is not None}
    if _same_config(params, config):
        assert dataclasses.replace(config, **_config_fields(params)) == config
    if same and shapes == ("plain", "plain"):
        assert _same_config(params, config)


def test_a_tool_list_changed_in_place_still_changes_the_config(api_server: ApiServer) -> None:
    """The caller appends a tool to the very list it sent before: the config follows and the
    change is reported, as when a new list is sent."""
    events: list[Event] = []
    client = wrap(api_server.anthropic_client(sync=True), policy=Policy(), events=events.append)
    api_server.anthropic.push(message("one", id="msg_1"), message("two", id="msg_2"))
    tools: list[dict[str, Any]] = [dict(TOOL)]
    messages: list[Any] = [{"role": "user", "content": "first"}]
    call = {"model": MODEL, "max_tokens": 1024, "system": "sys", "tools": tools}
    reply = client.messages.create(**call, messages=messages)
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "next"},
    ]
    tools.append(dict(OTHER_TOOL))
    client.messages.create(**call, messages=messages)
    assert [e.fields for e in events if isinstance(e, CacheParamsChanged)] == [("tools",)]
    assert client.session.config.tools == [TOOL, OTHER_TOOL]
    assert [t["name"] for t in api_server.last.json["tools"]][:2] == ["Read", "Bash"]
    client.close()


# -- caller markers ---------------------------------------------------------------------

markers = st.one_of(
    st.none(),
    st.just({"type": "ephemeral"}),
    st.just({"type": "ephemeral", "ttl": "5m"}),
    st.just({"type": "ephemeral", "ttl": "1h"}),
)


def with_marker(block: dict[str, Any], marker: dict[str, Any] | None) -> dict[str, Any]:
    return block if marker is None else {**block, "cache_control": marker}


blocks = st.builds(with_marker, st.just({"type": "text", "text": "x"}), markers)
tools_given = st.lists(
    st.builds(with_marker, st.sampled_from([TOOL, OTHER_TOOL]), markers), max_size=3
)
messages_sent = st.lists(
    st.builds(
        lambda role, content: {"role": role, "content": content},
        st.sampled_from(["user", "assistant"]),
        st.one_of(st.just("text"), st.lists(blocks, max_size=3)),
    ),
    max_size=5,
)


def ttl_of(block: Any) -> str | None:
    marker = block.get("cache_control") if isinstance(block, Mapping) else None
    if not isinstance(marker, Mapping):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


def set_ttl(block: dict[str, Any], ttl: str) -> None:
    marker = {k: v for k, v in block["cache_control"].items() if k != "ttl"}
    block["cache_control"] = {**marker, "ttl": "1h"} if ttl == "1h" else marker


def markers_put_back(
    request: Mapping[str, Any],
    system: Any,
    tools: Sequence[Mapping[str, Any]],
    messages_ttl: str | None,
    marked: Sequence[int] | None,
) -> dict[str, Any]:
    """`honor_caller_markers` from scratch: a deep copy of the request, changed in place."""
    body = copy.deepcopy(dict(request))
    slots: list[dict[str, Any]] = []
    sent_tools = body.get("tools") or []
    if sent_tools and isinstance(sent_tools[-1].get("cache_control"), Mapping):
        wanted = [ttl for ttl in map(ttl_of, tools) if ttl is not None]
        if wanted:
            set_ttl(sent_tools[-1], "1h" if "1h" in wanted else "5m")
        slots.append(sent_tools[-1])
    sent_system = body.get("system")
    for index, block in enumerate(sent_system if isinstance(sent_system, list) else []):
        if isinstance(block.get("cache_control"), Mapping):
            own = (
                system[index].get("cache_control")
                if isinstance(system, list) and index < len(system)
                else None
            )
            if isinstance(own, Mapping):
                block["cache_control"] = dict(own)
            slots.append(block)
    sent = body["messages"]
    for index in range(len(sent)) if marked is None else sorted(marked):
        content = sent[index]["content"] if index < len(sent) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block.get("cache_control"), Mapping):
                if messages_ttl is not None:
                    set_ttl(block, messages_ttl)
                slots.append(block)
    ttls = [ttl_of(block) for block in slots]
    if "1h" in ttls:
        last_long = max(i for i, ttl in enumerate(ttls) if ttl == "1h")
        for block in slots[:last_long]:
            set_ttl(block, "1h")
    return body


@SETTINGS
@given(
    tools=tools_given,
    tools_sent=st.lists(
        st.builds(with_marker, st.sampled_from([TOOL, OTHER_TOOL]), markers), max_size=3
    ),
    system=st.one_of(st.none(), st.just("sys"), st.lists(blocks, min_size=1, max_size=3)),
    system_sent=st.one_of(st.none(), st.lists(blocks, min_size=1, max_size=3)),
    messages=messages_sent,
    messages_ttl=st.sampled_from([None, "5m", "1h"]),
    marked=st.one_of(st.none(), st.lists(st.integers(0, 5), max_size=3, unique=True)),
)
def test_caller_markers_are_put_back_as_from_scratch(
    tools: list[dict[str, Any]],
    tools_sent: list[dict[str, Any]],
    system: Any,
    system_sent: list[dict[str, Any]] | None,
    messages: list[dict[str, Any]],
    messages_ttl: str | None,
    marked: list[int] | None,
) -> None:
    request: dict[str, Any] = {"model": MODEL, "messages": messages}
    if tools_sent:
        request["tools"] = tools_sent
    if system_sent is not None:
        request["system"] = system_sent
    before = copy.deepcopy(request)
    result = honor_caller_markers(
        ProviderRequest(**request),  # type: ignore[typeddict-item]
        system,
        tools,
        messages_ttl,
        marked_messages=marked,
    )
    assert request == before  # the input is untouched
    assert result == markers_put_back(request, system, tools, messages_ttl, marked)
    # The message markers `message_markers` reads are those the caller put on messages.
    assert len(message_markers(messages)) == sum(
        1
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    )
