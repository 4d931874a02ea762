"""pydantic-ai messages <-> unbounded's: properties of the conversion both ways."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import messages as pai

from unbounded.integrations._pydantic_ai_messages import MessageMap, request_blocks, response_blocks
from unbounded.model.normalize import validate_request

TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=30).filter(lambda t: t.strip() == t and t.strip())


@st.composite
def conversations(draw: Any) -> list[pai.ModelMessage]:
    """A user prompt, then tool rounds: a response calling tools (maybe with thinking and text),
    a request answering every call (some failed), and a closing text reply."""
    messages: list[pai.ModelMessage] = [pai.ModelRequest(parts=[pai.UserPromptPart(content=draw(TEXT))])]
    call = 0
    for _ in range(draw(st.integers(0, 5))):
        parts: list[Any] = []
        if draw(st.booleans()):
            parts.append(pai.ThinkingPart(content=draw(TEXT), signature=draw(TEXT)))
        if draw(st.booleans()):
            parts.append(pai.TextPart(content=draw(TEXT)))
        ids = []
        for _ in range(draw(st.integers(1, 3))):
            call += 1
            ids.append(f"toolu_{call}")
            parts.append(pai.ToolCallPart(tool_name=draw(st.sampled_from(["read", "bash"])), args={"arg": draw(TEXT)}, tool_call_id=ids[-1]))
        messages.append(pai.ModelResponse(parts=parts))
        names = {p.tool_call_id: p.tool_name for p in parts if isinstance(p, pai.ToolCallPart)}
        messages.append(pai.ModelRequest(parts=[
            pai.ToolReturnPart(tool_name=names[i], content=draw(TEXT), tool_call_id=i, outcome=draw(st.sampled_from(["success", "failed", "retried"])))
            for i in ids
        ]))
    messages.append(pai.ModelResponse(parts=[pai.TextPart(content=draw(TEXT))]))
    return messages


def as_params(messages: list[pai.ModelMessage]) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": response_blocks(m)} if isinstance(m, pai.ModelResponse) else {"role": "user", "content": request_blocks(m)}
        for m in messages
    ]


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_a_converted_conversation_is_a_valid_request_and_converts_back_the_same(messages: list[pai.ModelMessage]) -> None:
    params = as_params(messages)
    validate_request(params)
    # Rebuilt without the originals: the same blocks come back (ids, names, thinking, errors).
    rebuilt = MessageMap().to_pydantic(params)
    assert as_params(rebuilt) == params
    # With the originals remembered: the agent's own objects come back.
    mapping = MessageMap()
    for message, param in zip(messages, params, strict=True):
        mapping.remember(param["role"], param["content"], message)
    back = mapping.to_pydantic(params)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_a_changed_message_is_rebuilt_and_the_same_dict_is_not_read_again() -> None:
    call = pai.ModelResponse(parts=[pai.ToolCallPart(tool_name="read", args={"path": "a"}, tool_call_id="toolu_1")])
    result = pai.ModelRequest(parts=[pai.ToolReturnPart(tool_name="read", content="long output", tool_call_id="toolu_1")])
    mapping = MessageMap()
    params = as_params([call, result])
    for message, param in zip([call, result], params, strict=True):
        mapping.remember(param["role"], param["content"], message)
    cleared = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "[cleared]"}]}
    first = mapping.to_pydantic([params[0], cleared])
    assert first[0] is call and first[1] is not result
    part = first[1].parts[0]
    assert isinstance(part, pai.ToolReturnPart) and (part.tool_name, part.content) == ("read", "[cleared]")
    # The same dicts again: the same objects, not converted anew.
    second = mapping.to_pydantic([params[0], cleared])
    assert second[1] is first[1]
    # An equal dict that is another object is converted again (a new message).
    third = mapping.to_pydantic([params[0], dict(cleared)])
    assert third[1] is not first[1] and request_blocks(third[1]) == request_blocks(first[1])
