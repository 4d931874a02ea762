"""A request to the Messages API whose messages hold tool blocks declares tools: the API
refuses tool_use / tool_result blocks without them (summaries and probes sent without the
agent's tools)."""

from __future__ import annotations

from typing import Any

from unbounded.providers.anthropic import with_tools_declared


def _request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "y"},
                ],
            },
        ],
        **extra,
    }


def test_the_tools_a_history_calls_are_declared_and_not_callable() -> None:
    request = _request()
    declared = with_tools_declared(request)  # type: ignore[arg-type]
    assert [tool["name"] for tool in declared["tools"]] == ["Read", "Bash"]
    assert declared["tool_choice"] == {"type": "none"}
    assert "tools" not in request  # the caller's request is not changed


def test_a_request_with_its_own_tools_or_no_tool_blocks_goes_as_it_is() -> None:
    own = _request(tools=[{"name": "Read", "input_schema": {"type": "object"}}])
    assert with_tools_declared(own) is own  # type: ignore[arg-type]
    plain = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    assert with_tools_declared(plain) is plain  # type: ignore[arg-type]


def test_results_alone_declare_a_tool_too() -> None:
    request = _request()
    request["messages"] = [request["messages"][2]]
    declared = with_tools_declared(request)  # type: ignore[arg-type]
    assert declared["tools"] and declared["tool_choice"] == {"type": "none"}
