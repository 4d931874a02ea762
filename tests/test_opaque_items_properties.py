"""Responses items the library does not read (reasoning, compaction) survive every step of
the pipeline whole: microcompaction, compaction and normalization may drop the messages
holding them, never alter one, and the request stays valid for the Responses API."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver import responses_request_error
from unbounded.model.response import ModelResponse
from unbounded.policy import Policy
from unbounded.providers.extractive import ExtractiveSummarizer
from unbounded.session import Session, SessionConfig
from unbounded.sync_session import SyncSession
from unbounded.wire.openai_items import is_opaque_block, messages_to_items, opaque_block

BASH = {"name": "Bash", "description": "Run", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


@st.composite
def turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A run of model turns: opaque items first, then calls (with big outputs) or a reply."""
    out = []
    for n in range(draw(st.integers(12, 30))):
        opaque = [
            {"type": kind, "id": f"{kind[:2]}_{n}_{i}", "encrypted_content": draw(st.text(alphabet="AZaz09+/=", min_size=1, max_size=12))}
            for i, kind in enumerate(draw(st.lists(st.sampled_from(["reasoning", "compaction"]), max_size=2)))
        ]
        calls = draw(st.sampled_from([0, 1, 1, 2]))
        out.append({"opaque": opaque, "calls": calls, "size": draw(st.integers(2_000, 8_000))})
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_opaque_items_are_never_altered_and_requests_stay_valid(run: list[dict[str, Any]]) -> None:
    session = SyncSession(
        Session(SessionConfig(model="gpt-5.4", context_window=16_000, tools=[BASH]), policy=Policy(), summarizer=ExtractiveSummarizer())
    )
    given_items: dict[str, str] = {}
    session.add_user("Start.")
    for n, turn in enumerate(run):
        content: list[Any] = [opaque_block(item) for item in turn["opaque"]]
        for item in turn["opaque"]:
            given_items[item["id"]] = json.dumps(item, sort_keys=True)
        calls = [{"type": "tool_use", "id": f"call_{n}_{c}", "name": "Bash", "input": {"command": f"cat {n}.log"}} for c in range(turn["calls"])]
        content += calls or [{"type": "text", "text": f"Reply {n}."}]
        request = session.prepare()
        size = len(json.dumps(request["messages"])) // 4
        session.record(ModelResponse(content=content, stop_reason="tool_use" if calls else "end_turn", usage={"input_tokens": size, "output_tokens": 20}, model="gpt-5.4", id=f"resp_{n}"))
        if calls:
            session.add_tool_results([{"type": "tool_result", "tool_use_id": c["id"], "content": "x" * turn["size"]} for c in calls])
        else:
            session.add_user(f"Go on {n}.")
        prepared = session.prepare()
        present: set[str] = set()
        for message in prepared["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else []
            for block in blocks:
                if isinstance(block, dict) and is_opaque_block(block):
                    item = block["item"]
                    assert message["role"] == "assistant"
                    assert json.dumps(item, sort_keys=True) == given_items[item["id"]]
                    present.add(item["id"])
        if session.status().compactions == 0:  # nothing summarized yet: every item is there
            assert present == set(given_items)
        items = messages_to_items(prepared["messages"])
        refusal = responses_request_error({"input": items}, None, 0)
        assert refusal is None, refusal.message
    output_tokens = sum(turn["calls"] * turn["size"] for turn in run) // 4
    if output_tokens > 3 * 16_000:  # far more than the window held: the steps did run
        assert session.status().compactions >= 1
