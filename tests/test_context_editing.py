"""Anthropic context management: the typed builder, its checks, and a round trip through the
real `anthropic` SDK to a local server (127.0.0.1) that asserts the exact JSON body and the
`anthropic-beta` header, then answers with applied edits as JSON, to the async client, and
as a server-sent-event stream."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import pytest

from fakeapi import serve
from unbounded.compaction import (
    COMPACT_BETA,
    CONTEXT_MANAGEMENT_BETA,
    AppliedEdit,
    ClearThinking,
    ClearToolUses,
    Compact,
    ContextManagement,
    ContextManagementBuilder,
    InputTokens,
    ThinkingTurns,
    ToolUses,
    applied_edits,
    applied_edits_from_events,
    seed_context_management,
)
from unbounded.compaction.context_editing import cleared_input_tokens, thinking_enabled
from unbounded.errors import ConfigError
from unbounded.model.request import ProviderRequest

MODEL = "claude-sonnet-4-6"
MESSAGES = [{"role": "user", "content": "Fix the failing test"}]
APPLIED = [
    {"type": "clear_thinking_20251015", "cleared_thinking_turns": 3, "cleared_input_tokens": 15000},
    {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 8, "cleared_input_tokens": 50000},
]
EXPECTED_EDITS = {
    "edits": [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 30000},
            "keep": {"type": "tool_uses", "value": 3},
            "clear_at_least": {"type": "input_tokens", "value": 5000},
            "exclude_tools": ["web_search"],
            "clear_tool_inputs": False,
        },
        {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 150000},
            "instructions": "Keep file paths.",
            "pause_after_compaction": True,
        },
    ]
}


def built() -> ContextManagement:
    return (
        ContextManagementBuilder()
        .clear_tool_uses(
            trigger_input_tokens=30_000,
            keep=3,
            clear_at_least=5_000,
            exclude_tools=["web_search"],
            clear_tool_inputs=False,
        )
        .compact(trigger=150_000, instructions="Keep file paths.", pause_after_compaction=True)
        .clear_thinking(keep=2)  # added last, sent first
        .build()
    )


def message_body(**extra: Any) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1200, "output_tokens": 12},
        "context_management": {"applied_edits": APPLIED},
        **extra,
    }


# -- the builder ----------------------------------------------------------------------------


def test_builder_shape_order_and_betas() -> None:
    management = built()
    assert management.to_param() == EXPECTED_EDITS
    assert management.betas == (CONTEXT_MANAGEMENT_BETA, COMPACT_BETA)
    assert CONTEXT_MANAGEMENT_BETA == "context-management-2025-06-27"
    assert COMPACT_BETA == "compact-2026-01-12"
    typed = ContextManagement(
        (
            ClearToolUses(trigger=ToolUses(20), keep=ToolUses(0), clear_tool_inputs=("Edit",)),
            ClearThinking("all"),
        )
    )
    assert typed.to_param() == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": "all"},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "tool_uses", "value": 20},
                "keep": {"type": "tool_uses", "value": 0},
                "clear_tool_inputs": ["Edit"],
            },
        ]
    }
    assert ContextManagement((Compact(),)).to_param() == {"edits": [{"type": "compact_20260112"}]}
    assert ContextManagement((Compact(),)).betas == (COMPACT_BETA,)
    assert ContextManagementBuilder().clear_tool_uses().build().to_param() == {
        "edits": [{"type": "clear_tool_uses_20250919"}]
    }


@pytest.mark.parametrize(
    "make",
    [
        lambda: InputTokens(0),
        lambda: InputTokens(True),
        lambda: InputTokens(1.5),
        lambda: ToolUses(-1),
        lambda: ThinkingTurns(0),
        lambda: Compact(trigger=InputTokens(49_999)),
        lambda: Compact(trigger=ToolUses(60_000)),  # type: ignore[arg-type]
        lambda: Compact(instructions="  "),
        lambda: Compact(pause_after_compaction=1),  # type: ignore[arg-type]
        lambda: ClearToolUses(trigger=ToolUses(0)),
        lambda: ClearToolUses(trigger=ThinkingTurns(3)),  # type: ignore[arg-type]
        lambda: ClearToolUses(keep=InputTokens(3)),  # type: ignore[arg-type]
        lambda: ClearToolUses(clear_at_least=ToolUses(3)),  # type: ignore[arg-type]
        lambda: ClearToolUses(exclude_tools="Bash"),  # type: ignore[arg-type]
        lambda: ClearToolUses(exclude_tools=("Bash", "Bash")),
        lambda: ClearToolUses(exclude_tools=("",)),
        lambda: ClearToolUses(clear_tool_inputs=("Edit", 3)),  # type: ignore[arg-type]
        lambda: ClearThinking(keep=2),  # type: ignore[arg-type]
        lambda: ClearThinking(keep="none"),  # type: ignore[arg-type]
        lambda: ContextManagement(()),
        lambda: ContextManagement((ClearThinking(), ClearThinking("all"))),
        lambda: ContextManagement((Compact(), Compact())),
        lambda: ContextManagement(("clear",)),  # type: ignore[arg-type]
        lambda: ContextManagementBuilder().clear_tool_uses(
            trigger_input_tokens=1000, trigger_tool_uses=3
        ),
        lambda: ContextManagementBuilder().clear_thinking(keep="some"),  # type: ignore[arg-type]
        lambda: ContextManagementBuilder().compact(trigger=10_000),
        lambda: seed_context_management(["Read"], trigger_tokens=40_000, keep_target_tokens=40_000),
    ],
)
def test_wrong_values_fail_at_construction(make: Any) -> None:
    with pytest.raises(ConfigError):
        make()


def test_apply_merges_betas_and_needs_thinking_for_clear_thinking() -> None:
    request: ProviderRequest = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": MESSAGES,  # type: ignore[typeddict-item]
        "betas": ["interleaved-thinking-2025-05-14", CONTEXT_MANAGEMENT_BETA],
    }
    with pytest.raises(ConfigError, match="thinking"):
        built().apply(request)
    request["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    assert thinking_enabled(request)
    applied = built().apply(request)
    assert applied["context_management"] == EXPECTED_EDITS
    assert applied["betas"] == [
        "interleaved-thinking-2025-05-14",
        CONTEXT_MANAGEMENT_BETA,
        COMPACT_BETA,
    ]
    assert "context_management" not in request  # a copy
    assert thinking_enabled({"thinking": {"type": "adaptive"}})
    assert not thinking_enabled({"thinking": {"type": "disabled"}})


def test_seed_004_configuration() -> None:
    declared = [
        "Read",
        "Bash",
        "Grep",
        "Edit",
        "Write",
        "TodoWrite",
        "AskUserQuestion",
        "str_replace_editor",
    ]
    warm = seed_context_management(declared, thinking=True)
    assert warm.to_param() == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": "all"},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 180_000},
                "clear_at_least": {"type": "input_tokens", "value": 140_000},
                "exclude_tools": ["TodoWrite", "AskUserQuestion"],
                "clear_tool_inputs": ["Edit", "Write", "str_replace_editor"],
            },
        ]
    }
    cold = seed_context_management(declared, thinking=True, cache_cold=True)
    assert cold.to_param()["edits"][0]["keep"] == {"type": "thinking_turns", "value": 1}
    plain = seed_context_management(["Read"])
    assert plain.to_param()["edits"] == [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 180_000},
            "clear_at_least": {"type": "input_tokens", "value": 140_000},
        }
    ]


def test_applied_edits_from_plain_data() -> None:
    edits = applied_edits(message_body())
    assert edits == (
        AppliedEdit("clear_thinking_20251015", 15000, None, 3),
        AppliedEdit("clear_tool_uses_20250919", 50000, 8, None),
    )
    assert cleared_input_tokens(message_body()) == 65000
    assert applied_edits(message_body(context_management=None)) == ()
    assert applied_edits({"context_management": {"applied_edits": [{"nope": 1}, "x"]}}) == ()
    assert applied_edits(object()) == ()


# -- through the real SDK -------------------------------------------------------------------


def _expected_body(stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": MESSAGES,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "context_management": EXPECTED_EDITS,
    }
    if stream:
        body["stream"] = True
    return body


def _create_kwargs() -> dict[str, Any]:
    request = built().apply(
        {
            "model": MODEL,
            "max_tokens": 1024,
            "messages": MESSAGES,  # type: ignore[typeddict-item]
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        }
    )
    kwargs: dict[str, Any] = dict(request)
    return kwargs


def test_sdk_sends_the_exact_body_and_beta_header() -> None:
    def handler(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        assert body == _expected_body()
        assert headers["anthropic-beta"] == f"{CONTEXT_MANAGEMENT_BETA},{COMPACT_BETA}"
        return 200, message_body()

    with serve({"/v1/messages": handler}) as api:
        client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
        response = client.beta.messages.create(**_create_kwargs())
        assert len(api.requests) == 1
        path, headers, body = api.requests[0]
    assert path == "/v1/messages"
    assert body == _expected_body()
    assert headers["anthropic-beta"] == "context-management-2025-06-27,compact-2026-01-12"
    assert applied_edits(response) == applied_edits(message_body())
    assert cleared_input_tokens(response) == 65000


def test_async_client_response() -> None:
    def handler(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        assert body == _expected_body()
        assert headers["anthropic-beta"] == f"{CONTEXT_MANAGEMENT_BETA},{COMPACT_BETA}"
        return 200, message_body()

    async def call(base_url: str) -> Any:
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=base_url, max_retries=0)
        try:
            return await client.beta.messages.create(**_create_kwargs())
        finally:
            await client.close()

    with serve({"/v1/messages": handler}) as api:
        response = asyncio.run(call(api.base_url))
    assert [e.type for e in applied_edits(response)] == [
        "clear_thinking_20251015",
        "clear_tool_uses_20250919",
    ]
    assert applied_edits(response)[1].cleared_tool_uses == 8


# -- streaming: a small SSE server ------------------------------------------------------------


def _sse_events() -> list[dict[str, Any]]:
    start = message_body(content=[], stop_reason=None)
    del start["context_management"]
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Done."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 12},
            "context_management": {"applied_edits": APPLIED},
        },
        {"type": "message_stop"},
    ]


@contextmanager
def sse_server(received: list[tuple[dict[str, str], dict[str, Any]]]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            received.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for event in _sse_events():
                chunk = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                self.wfile.write(chunk.encode())
                self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_streamed_response() -> None:
    received: list[tuple[dict[str, str], dict[str, Any]]] = []
    with sse_server(received) as base_url:
        client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
        with client.beta.messages.stream(**_create_kwargs()) as stream:
            final = stream.get_final_message()
        raw = list(client.beta.messages.create(**_create_kwargs(), stream=True))
    assert final.content[0].text == "Done."  # type: ignore[union-attr]
    assert applied_edits(final) == applied_edits(message_body())
    assert applied_edits_from_events(raw) == applied_edits(message_body())
    assert applied_edits_from_events([e.model_dump() for e in raw]) == applied_edits(message_body())
    for headers, body in received:
        assert body == _expected_body(stream=True)
        assert headers["anthropic-beta"] == f"{CONTEXT_MANAGEMENT_BETA},{COMPACT_BETA}"
    assert len(received) == 2
