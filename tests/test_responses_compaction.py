"""OpenAI's Responses compaction as a native tier (compaction/native.py, threshold form),
through the real `openai` SDK against the scripted local server: `context_management` sent
for a model that has it, the compaction item kept and sent back byte-for-byte, the facts
ledger after it, and nothing sent for a model or an API without it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver import (  # noqa: F401  (api_server_fixture registers the api_server fixture)
    ApiServer,
    api_server_fixture,
    compacted_response,
    message,
    responses_compaction_item,
)
from older_openai_sdk import with_older_responses
from unbounded.compaction.native import (
    LEDGER_NOTE,
    ServerCompaction,
    ServerCompactionSettings,
    native_edits,
    native_tiers,
    with_context_edits,
)
from unbounded.compaction.server_blocks import responses_compaction_items
from unbounded.providers.openai import RESPONSES_PROFILE
from unbounded.session import Session, SessionConfig
from unbounded.storage import MemoryStore
from unbounded.wire.context_edits import COMPACT_EDIT, OPENAI_CONTEXT_EDITS, RESPONSES_COMPACTION
from unbounded.wire.openai_items import opaque_block
from unbounded.wire.openai_responses import OpenAIResponses, context_management

openai = pytest.importorskip("openai")

NATIVE_MODEL = "gpt-5.4"
PLAIN_MODEL = "gpt-4.1"


def _provider(api_server: ApiServer, api: str = "responses") -> Any:
    from unbounded.providers.openai import OpenAIProvider

    return OpenAIProvider(api_server.openai_client(), api=api)  # type: ignore[arg-type]


def _session(extension: ServerCompaction, model: str = NATIVE_MODEL) -> Session:
    config = SessionConfig(model=model, system="You are a coding agent.")
    return Session(config, store=MemoryStore(), extensions=[extension])


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# -- declared support -------------------------------------------------------------------------


def test_the_responses_api_and_its_newer_models_declare_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    from unbounded.providers.openai import OpenAIProvider

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    responses = OpenAIProvider(api="responses", api_key="sk-test")  # OpenAI's own API
    chat = OpenAIProvider(api="chat", api_key="sk-test")
    assert responses.profile is RESPONSES_PROFILE
    native = _session(ServerCompaction()).model_info
    plain = _session(ServerCompaction(), PLAIN_MODEL).model_info
    assert native.native_compaction and not plain.native_compaction
    assert native_edits(responses.profile, native) == OPENAI_CONTEXT_EDITS == {RESPONSES_COMPACTION}
    assert native_edits(responses.profile, plain) == frozenset()
    assert native_edits(chat.profile, native) == frozenset()
    # The on-demand tier reads a summary from the reply; the Responses item has none to read.
    assert native_tiers(responses, native) == ()


@pytest.mark.parametrize(
    ("base_url", "env", "declared"),
    [
        (None, None, True),
        ("https://api.openai.com/v1", None, True),
        (None, "https://api.openai.com/v1/", True),
        ("https://openrouter.ai/api/v1", None, False),
        ("http://localhost:4000/v1", None, False),  # a LiteLLM proxy
        (None, "https://openrouter.ai/api/v1", False),
        ("https://api.openai.com.example.net/v1", None, False),
    ],
)
def test_server_compaction_is_declared_on_openais_own_api_only(monkeypatch: pytest.MonkeyPatch, base_url: str | None, env: str | None, declared: bool) -> None:
    from unbounded.providers.openai import OpenAIProvider

    if env is None:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", env)
    provider = OpenAIProvider(api="responses", api_key="sk-test", base_url=base_url)
    assert (provider.profile is RESPONSES_PROFILE) is declared
    assert (native_edits(provider.profile, _session(ServerCompaction()).model_info) == OPENAI_CONTEXT_EDITS) is declared


@pytest.mark.parametrize("opted_in", [False, True])
def test_another_responses_server_gets_context_management_only_when_asked(api_server: ApiServer, opted_in: bool) -> None:
    """The local server stands for OpenRouter or LiteLLM: not OpenAI's host, so nothing is
    sent unless the extension is given the Responses profile."""
    api_server.responses.push(message("ok"))
    session = _session(ServerCompaction(profile=RESPONSES_PROFILE if opted_in else None))
    session.add_user("hello")
    asyncio.run(session.call(_provider(api_server)))
    assert ("context_management" in api_server.requests[0].json) is opted_in


def test_the_settings_ask_the_responses_api_for_its_threshold_only() -> None:
    settings = ServerCompactionSettings(instructions="keep names", pause_after_compaction=True, clear_tool_uses_keep=2)
    edits = settings.edits(OPENAI_CONTEXT_EDITS, trigger_tokens=90_000)
    assert edits == [{"type": RESPONSES_COMPACTION, "compact_threshold": 90_000}]
    request = with_context_edits({"model": "m", "messages": []}, edits)  # type: ignore[typeddict-item]
    assert request["betas"] == []  # the Responses entry needs no Anthropic beta
    kwargs = OpenAIResponses().to_request(request, stream=False)
    assert kwargs["context_management"] == [{"type": "compaction", "compact_threshold": 90_000}]


def test_anthropic_edits_never_reach_the_responses_api() -> None:
    anthropic_only = {"edits": [{"type": COMPACT_EDIT, "trigger": {"type": "input_tokens", "value": 60_000}}]}
    request: Any = {"model": "m", "messages": [], "context_management": anthropic_only}
    assert context_management(request) is None
    assert "context_management" not in OpenAIResponses().to_request(request, stream=False)


# -- threshold form: the item kept and sent back -----------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_past_its_threshold_the_server_compacts_and_the_item_goes_back_byte_for_byte(api_server: ApiServer, stream: bool) -> None:
    api_server.responses.push(message("Going on with the parser."), message("Done."))
    extension = ServerCompaction(ServerCompactionSettings(trigger_tokens=50_000), profile=RESPONSES_PROFILE)
    session = _session(extension)
    provider = _provider(api_server)
    for part in range(3):  # ~66,000 tokens as the server counts them (bytes / 4)
        session.add_user(f"Fix the parser in src/parse.py, part {part}: " + "context " * 11_000)
    reply = asyncio.run(session.call(provider, stream=stream))
    first = api_server.requests[0].json
    assert first["context_management"] == [{"type": "compaction", "compact_threshold": 50_000}]
    items = responses_compaction_items(reply.content)
    assert len(items) == 1 and extension.compactions == 1
    item = items[0]["item"]
    assert _compact(item) in api_server.requests[0].reply

    session.add_user("And the tests?")
    asyncio.run(session.call(provider, stream=stream))
    assert not api_server.rejected  # the server checked the item came back unaltered
    assert _compact(item) in api_server.requests[1].body
    # The facts ledger of what the server closed follows it, before the new prompt.
    texts = [
        part.get("text", "")
        for entry in api_server.requests[1].json["input"]
        if entry.get("role") == "user" and isinstance(entry.get("content"), list)
        for part in entry["content"]
    ]
    assert any(LEDGER_NOTE in text and "Fix the parser in src/parse.py" in text for text in texts)


def test_under_its_threshold_the_server_does_not_compact(api_server: ApiServer) -> None:
    api_server.responses.push(message("ok"))
    extension = ServerCompaction(profile=RESPONSES_PROFILE)
    session = _session(extension)
    session.add_user("hello")
    reply = asyncio.run(session.call(_provider(api_server)))
    threshold = session.thresholds.warning
    assert api_server.requests[0].json["context_management"] == [{"type": "compaction", "compact_threshold": threshold}]
    assert responses_compaction_items(reply.content) == [] and extension.compactions == 0


@pytest.mark.parametrize(("model", "api"), [(PLAIN_MODEL, "responses"), (NATIVE_MODEL, "chat")])
def test_a_model_or_api_without_it_gets_no_context_management(api_server: ApiServer, model: str, api: str) -> None:
    queue = api_server.responses if api == "responses" else api_server.openai
    queue.push(message("ok"))
    session = _session(ServerCompaction(), model)
    session.add_user("hello")
    asyncio.run(session.call(_provider(api_server, api)))
    assert "context_management" not in api_server.requests[0].json


def test_an_altered_compaction_item_is_refused_by_the_server(api_server: ApiServer) -> None:
    item = responses_compaction_item("auto:state-1")
    tampered = {**item, "encrypted_content": "auto:state-2"}
    request: Any = {
        "model": NATIVE_MODEL,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [opaque_block(tampered)]},
            {"role": "user", "content": "go on"},
        ],
    }
    with pytest.raises(Exception, match="send it back unchanged"):
        asyncio.run(_provider(api_server).create(request))
    api_server.rejected.clear()


def test_the_compact_endpoint_answers_through_the_sdk(api_server: ApiServer) -> None:
    client = api_server.openai_client(sync=True)
    user = {"role": "user", "content": "Fix the parser"}
    answer = client.responses.compact(model=NATIVE_MODEL, input=[user, {"role": "assistant", "content": "On it."}])
    assert answer.object == "response.compaction"
    assert [item.type for item in answer.output] == ["message", "compaction"]
    assert answer.usage.input_tokens > 0
    assert answer.output[1].id == responses_compaction_item(answer.output[1].encrypted_content)["id"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant", "compaction"]), min_size=1, max_size=8))
def test_compaction_items_survive_the_wire_in_place(kinds: list[str]) -> None:
    """Every compaction item of a conversation reaches the request unchanged and in order."""
    messages: list[Any] = []
    expected: list[dict[str, Any]] = []
    for index, kind in enumerate(kinds):
        if kind == "compaction":
            item = responses_compaction_item(f"state-{index}")
            expected.append(item)
            messages.append({"role": "assistant", "content": [opaque_block(item), {"type": "text", "text": "ok"}]})
        else:
            messages.append({"role": kind, "content": f"{kind} {index}"})
    items = OpenAIResponses().to_request({"model": "m", "messages": messages}, stream=False)["input"]  # type: ignore[typeddict-item]
    assert [item for item in items if item.get("type") == "compaction"] == expected
    assert compacted_response({"input": items}, 400)["output"][-1]["type"] == "compaction"


# -- an SDK before `context_management` (openai < 2.18) ------------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_sdk_without_the_keyword_sends_context_management_in_the_body(api_server: ApiServer, sync: bool, stream: bool) -> None:
    from unbounded.providers.openai import OpenAIProvider

    api_server.responses.push(message("ok"))
    client = with_older_responses(api_server.openai_client(sync=sync), ("context_management", "prompt_cache_key"))
    provider = OpenAIProvider(client, api="responses", prompt_cache_key="key-1")
    edits = [{"type": RESPONSES_COMPACTION, "compact_threshold": 50_000}]
    request: Any = {"model": NATIVE_MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "context_management": {"edits": edits}}
    asyncio.run(provider.create(request, stream=stream))
    sent = api_server.requests[0].json
    assert sent["context_management"] == edits and sent["prompt_cache_key"] == "key-1"


def test_the_openai_drop_in_on_an_sdk_without_the_keyword_asks_for_server_compaction(api_server: ApiServer) -> None:
    from unbounded.integrations import wrap
    api_server.responses.push(message("ok"))
    session = _session(ServerCompaction(ServerCompactionSettings(trigger_tokens=50_000), profile=RESPONSES_PROFILE))
    client = wrap(with_older_responses(api_server.openai_client(sync=True)), session)
    reply = client.responses.create(model=NATIVE_MODEL, input=[{"role": "user", "content": "hi"}])
    assert reply.output_text == "ok"
    assert api_server.requests[0].json["context_management"] == [{"type": RESPONSES_COMPACTION, "compact_threshold": 50_000}]
