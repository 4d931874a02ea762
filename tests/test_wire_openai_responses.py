"""The Responses API wire format: requests out, replies and stream events back, no SDK call."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.responses import Response

from apiserver import _response_json, message, tool_use_block
from unbounded.errors import PromptTooLongError, ServerError
from unbounded.model.content import usage_from_openai
from unbounded.model.request import ProviderRequest
from unbounded.wire import OpenAIResponses, wire_format
from unbounded.wire.openai_items import opaque_block

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc=="}


def request(**extra: Any) -> ProviderRequest:
    base: dict[str, Any] = {
        "model": "gpt-5.4",
        "max_tokens": 500,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [opaque_block(REASONING), {"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.py"}]},
        ],
        "tools": [
            {"name": "ls", "description": "List", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 100},
        "betas": ["x"],
    }
    base.update(extra)
    return base  # type: ignore[return-value]


def test_the_request_is_the_responses_shape_without_anthropic_only_fields() -> None:
    sent = OpenAIResponses().to_request(request(), stream=True)
    assert sent == {
        "model": "gpt-5.4",
        "instructions": "Be brief.",
        "max_output_tokens": 500,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            REASONING,
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        ],
        "tools": [{"type": "function", "name": "ls", "description": "List", "parameters": {"type": "object"}}, {"type": "web_search"}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stream": True,
    }
    assert wire_format("openai-responses").to_request(request(), stream=False).get("stream") is None


@pytest.mark.parametrize(
    ("choice", "sent"),
    [({"type": "auto"}, "auto"), ({"type": "none"}, "none"), ({"type": "tool", "name": "ls"}, {"type": "function", "name": "ls"})],
)
def test_tool_choices(choice: dict[str, Any], sent: Any) -> None:
    assert OpenAIResponses().to_request(request(tool_choice=choice), stream=False)["tool_choice"] == sent


def reply_of(*content: Any, **options: Any) -> Response:
    return Response.model_validate(_response_json(message(*content, **options), "gpt-5.4"))


def test_a_reply_becomes_one_assistant_message_with_its_opaque_items_and_usage() -> None:
    got = OpenAIResponses().from_response(
        reply_of(
            REASONING,
            "Let me look.",
            tool_use_block("ls", {"path": "."}, id="c9"),
            usage={"input_tokens": 40, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 25},
        )
    )
    assert got.content == [
        opaque_block(REASONING),
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "c9", "name": "ls", "input": {"path": "."}},
    ]
    assert got.stop_reason == "tool_use"
    usage = got.usage
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (40, 60, 25)


def test_chat_usage_reads_openais_cache_writes() -> None:
    raw = {"prompt_tokens": 125, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 25}}
    assert usage_from_openai(raw) == {
        "input_tokens": 40, "cache_creation_input_tokens": 25, "cache_read_input_tokens": 60, "output_tokens": 5,
    }


@pytest.mark.parametrize(("stop", "expected"), [("end_turn", "end_turn"), ("max_tokens", "max_tokens"), ("refusal", "refusal")])
def test_stop_reasons(stop: str, expected: str) -> None:
    assert OpenAIResponses().from_response(reply_of("x", stop_reason=stop)).stop_reason == expected


def test_a_stream_is_its_terminal_response_and_a_cut_or_failed_one_is_an_error() -> None:
    whole = reply_of("done")
    fold = OpenAIResponses().stream_assembler()
    fold.add(SimpleNamespace(type="response.created", response=whole))
    assert not fold.stopped
    fold.add(SimpleNamespace(type="response.completed", response=whole))
    assert fold.stopped and fold.finish("req_1").content == [{"type": "text", "text": "done"}]

    cut = OpenAIResponses().stream_assembler()
    cut.add(SimpleNamespace(type="response.created", response=whole))
    with pytest.raises(ServerError, match=r"without response\.completed"):
        cut.finish("req_2")

    failed = OpenAIResponses().stream_assembler()
    error = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    failed.add(SimpleNamespace(type="response.failed", response=SimpleNamespace(error=error)))
    with pytest.raises(PromptTooLongError):
        failed.finish("req_3")

    errored = OpenAIResponses().stream_assembler()
    errored.add(SimpleNamespace(type="error", code="server_error", message="boom"))
    with pytest.raises(ServerError, match="boom"):
        errored.finish(None)
