"""The rules of `unbounded.recall`, each held by a test that fails when the rule is flipped,
dropped or off by one (the mutation check, scripts/mutation_check.py, runs these)."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.recall.offer import (
    answer_tokens,
    is_recall_call,
    offers_recall,
    recall_tool_result,
    with_recall_tool,
)
from unbounded.recall.schema import RECALL_TOOL_NAME

# -- offer -----------------------------------------------------------------------------------------

BASH = {"name": "Bash", "input_schema": {"type": "object"}}
OPENAI_RECALL = {"type": "function", "function": {"name": "recall", "parameters": {}}}
OPENAI_BASH = {"type": "function", "function": {"name": "Bash", "parameters": {}}}


def test_the_tool_is_offered_beside_tools_unless_the_host_has_one_or_turned_it_off() -> None:
    policy = Policy()
    assert offers_recall([BASH], policy) and offers_recall([OPENAI_BASH], policy)
    assert not offers_recall([], policy)
    assert not offers_recall([BASH, {"name": "recall"}], policy)
    assert not offers_recall([OPENAI_RECALL], policy)  # a function tool named recall counts too
    assert not offers_recall([{"type": "function", "function": "recall", "name": "recall"}], policy)
    assert not offers_recall([BASH], Policy(recall_enabled=False))
    tools = with_recall_tool([BASH], policy)
    assert [t["name"] for t in tools] == ["Bash", RECALL_TOOL_NAME] and tools[0] is not BASH
    assert with_recall_tool([BASH], Policy(recall_enabled=False)) == [BASH]


@pytest.mark.parametrize(
    ("block", "is_call"),
    [
        ({"type": "tool_use", "name": "recall"}, True),
        ({"name": "recall"}, True),  # a block without a type is a tool call
        ({"type": "tool_use", "name": "Bash"}, False),
        ({"type": "tool_result", "name": "recall"}, False),
        ({"type": "text", "name": "Bash"}, False),
    ],
)
def test_is_recall_call(block: dict[str, Any], is_call: bool) -> None:
    assert is_recall_call(block) is is_call


def test_answer_tokens_counts_text_content_only() -> None:
    assert answer_tokens({"content": "x" * 400}) == 100
    assert answer_tokens({"content": ""}) == 0
    assert answer_tokens({"content": [{"type": "text", "text": "x" * 400}]}) == 0
    assert answer_tokens({}) == 0


def test_a_recall_result_answers_its_call() -> None:
    from unbounded.recall import RecallContext, TranscriptIndex

    entries = [Entry.user("go")]
    context = RecallContext(entries=entries, view=entries, cleared_ids=(), index=TranscriptIndex().update(entries), budget_tokens=500)
    result, answer = recall_tool_result({"id": "r1", "name": "recall", "input": {"id": "nope"}}, context)
    assert result == {"type": "tool_result", "tool_use_id": "r1", "content": "Nothing in this session matches tool call id 'nope'."}
    assert answer is not None and not answer.found and answer.lookup == "id"
    error, none = recall_tool_result({"name": "recall", "input": {}}, context)
    assert none is None and error["is_error"] is True and error["tool_use_id"] == ""
    assert error["content"].startswith("Error: give exactly one of")
