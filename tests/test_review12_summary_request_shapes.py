"""Review of session 12: the summary request's shortcut (`_as_sent_for_summary`) must give what
the three rewrites it skips give (`from_last_server_compaction`, `strip_images_and_documents`,
`compaction_blocks_as_text`, which the code before ran on every request) for every message
shape, the odd ones included: a block whose `type` is not a string (a list, a dict) must not
make a compaction fail where the rewrites read it as "no such block"."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from summaries import nine_section_summary

from unbounded.compaction.conversation import _as_sent_for_summary, strip_images_and_documents
from unbounded.compaction.server_blocks import (
    compaction_blocks_as_text,
    from_last_server_compaction,
)
from unbounded.model.profile import MODEL_PROFILE
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.session import Session, SessionConfig

MODEL = "claude-sonnet-4-6"


def _rewritten(messages: list[Any]) -> tuple[str, Any]:
    """What the three rewrites give (or the error they raise), as the code before sent."""
    try:
        return "sent", compaction_blocks_as_text(
            strip_images_and_documents(from_last_server_compaction(messages))
        )
    except Exception as error:  # the same failure on both sides is no difference
        return "raised", type(error).__name__


def _shortcut(messages: list[Any]) -> tuple[str, Any]:
    try:
        return "sent", _as_sent_for_summary(messages)
    except Exception as error:
        return "raised", type(error).__name__


ODD_TYPES: list[Any] = [["image"], {"kind": "image"}, ["compaction"]]


@pytest.mark.parametrize("odd", ODD_TYPES, ids=["list", "dict", "list-compaction"])
@pytest.mark.parametrize("where", ["top", "in-result"])
def test_a_block_whose_type_is_not_a_string_is_sent_as_the_rewrites_send_it(
    odd: Any, where: str
) -> None:
    block = {"type": odd, "text": "odd"}
    content: list[Any] = (
        [block]
        if where == "top"
        else [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [block]}]
    )
    messages: list[Any] = [
        {"role": "user", "content": "Read it."},
        {"role": "user", "content": content},
    ]
    assert _shortcut(copy.deepcopy(messages)) == _rewritten(copy.deepcopy(messages))


_KINDS = st.sampled_from(
    ["text", "image", "document", "compaction", "tool_result", "tool_use", "search_result"]
)
_ODD_KIND = st.one_of(_KINDS, st.none(), st.integers(0, 2), st.sampled_from(ODD_TYPES))
_LEAF = st.one_of(
    st.fixed_dictionaries(
        {"type": _ODD_KIND},
        optional={
            "text": st.sampled_from(["", "\n\n", "hi"]),
            "content": st.sampled_from(["", "server summary", None]),
            "source": st.just({"type": "url", "url": "http://example.test/a.png"}),
        },
    ),
    st.text(max_size=2),
    st.none(),
)


def _result(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": st.sampled_from(["a", "b"])},
        optional={"content": st.one_of(st.lists(children, max_size=3), st.just("r"))},
    )


_CONTENT = st.one_of(
    st.text(max_size=3), st.lists(st.recursive(_LEAF, _result, max_leaves=6), max_size=4)
)
_MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": _CONTENT}),
    max_size=5,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_MESSAGES)
def test_the_shortcut_sends_what_the_rewrites_send(messages: list[Any]) -> None:
    assert _shortcut(copy.deepcopy(messages)) == _rewritten(copy.deepcopy(messages))


class _Fixed:
    """A summarizer that answers one fixed summary."""

    name = "fixed"
    supports_cache_edits = False

    def __init__(self) -> None:
        self.profile = MODEL_PROFILE
        self.requests = 0

    async def create(
        self, request: Any, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        """The fixed summary."""
        self.requests += 1
        text = f"<summary>\n{nine_section_summary('the reading')}\n</summary>"
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)


def test_a_session_compacts_a_result_holding_a_part_whose_type_is_a_dict() -> None:
    """Through the public API: a host's tool result whose content holds a part with a
    non-string `type` (the code before compacted it, as it does a part of an unknown type)."""
    summarizer = _Fixed()
    session = Session(
        SessionConfig(model=MODEL, system="sys", context_window=40_000),
        policy=Policy(),
        summarizer=summarizer,
    )
    loop = asyncio.new_event_loop()
    try:
        session.add_user("Read /repo/a.py.")
        session.record(
            {
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Read",
                        "input": {"file_path": "/repo/a.py"},
                    }
                ],
                "usage": {"input_tokens": 10, "output_tokens": 5},
                "model": MODEL,
                "id": "msg_1",
                "stop_reason": "tool_use",
            }
        )
        odd_part = {"type": {"kind": "image"}, "text": "odd"}
        session.add_tool_results(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "x = 1"}, odd_part],
                }
            ]
        )
        loop.run_until_complete(session.compact())
    finally:
        session.close()
        loop.close()
    assert summarizer.requests == 1
