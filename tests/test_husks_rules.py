"""Rules of `unbounded.caching.husks`: which blocks give up their text, and that a husk carries
the digest and tokens its block had at its place (the mutation check found these unheld by
the end-to-end replay tests alone)."""

from __future__ import annotations

import copy
from typing import Any

from unbounded.caching.blocks import FlatBlock, message_block_digest
from unbounded.caching.husks import HuskedBlock, block_fields, block_type, husk_blocks
from unbounded.caching.request_blocks import RequestBlocks


def _tokens_by_place(block: FlatBlock, digest: bytes) -> int:
    """A count that tells places apart: a husk counted at another place gets another number."""
    return 1000 * block.index + 10 * block.block_index + digest[0] % 7


def _result(tool_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": False}


def _message() -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            _result("t1", "first result"),
            {"type": "text", "text": "between"},
            _result("t2", [{"type": "text", "text": "second result"}]),
        ],
    }


def test_each_tool_result_keeps_the_digest_and_tokens_of_its_own_place() -> None:
    message = _message()
    original = copy.deepcopy(message["content"])
    assert husk_blocks(message, 4, _tokens_by_place) == 2
    husked = message["content"]
    for position in (0, 2):
        first = position == 0
        digest = message_block_digest(original[position], "user", first=first)
        place = FlatBlock("messages", 4, position, original[position], "user")
        husk = husked[position]
        assert type(husk) is HuskedBlock
        assert (husk.digest, husk.tokens, husk.role, husk.first, husk.kind) == (
            digest,
            _tokens_by_place(place, digest),
            "user",
            first,
            "tool_result",
        )
        # The fields the clearing builds its cleared copy of stay.
        assert block_fields(husk) == {
            k: v for k, v in original[position].items() if k != "content"
        }
        assert block_type(husk) == "tool_result" and husk.marker is None
    assert husked[1] == original[1]


def test_the_blocks_of_the_message_as_sent_are_left_as_they_were() -> None:
    message = _message()
    blocks = message["content"]
    before = copy.deepcopy(blocks)
    husk_blocks(message, 0, _tokens_by_place)
    assert blocks == before  # an entry's own content list and blocks are not touched
    assert message["content"] is not blocks
    assert message["content"][1] is blocks[1]


def test_a_message_husked_already_or_without_results_is_left_alone() -> None:
    message = _message()
    husk_blocks(message, 0, _tokens_by_place)
    once = message["content"]
    assert husk_blocks(message, 0, _tokens_by_place) == 0
    assert message["content"] is once
    text_only: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    plain: dict[str, Any] = {"role": "user", "content": "a string"}
    for other in (text_only, plain):
        content = other["content"]
        assert husk_blocks(other, 0, _tokens_by_place) == 0
        assert other["content"] is content


def test_only_the_results_not_husked_yet_are_husked_and_counted() -> None:
    message = _message()
    husk_blocks(message, 1, _tokens_by_place)
    message["content"] = [*message["content"], _result("t3", "late result")]
    assert husk_blocks(message, 1, _tokens_by_place) == 1
    last = message["content"][3]
    assert type(last) is HuskedBlock and last.first is False


def test_a_request_of_husked_messages_prices_as_the_one_that_keeps_the_text() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "start"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
        },
        {
            "role": "user",
            "content": [_result("t1", "a result " * 20), {"type": "text", "text": "go on"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t2", "name": "Read", "input": {}}],
        },
        {"role": "user", "content": [_result("t2", "another " * 30)]},
    ]
    request = {"model": "m", "messages": messages}
    whole = RequestBlocks(_tokens_by_place)
    whole.update(request, drop_earlier_thinking=False)
    husked_messages = copy.deepcopy(messages)
    for index, message in enumerate(husked_messages):
        husk_blocks(message, index, _tokens_by_place)
    husked = RequestBlocks(_tokens_by_place)
    husked.update({"model": "m", "messages": husked_messages}, drop_earlier_thinking=False)
    assert list(husked.digests) == list(whole.digests)
    assert list(husked.tokens) == list(whole.tokens)
    assert list(husked.hashes) == list(whole.hashes)


def test_a_husk_packs_what_it_was_given_and_keeps_a_marker() -> None:
    digest = bytes(range(32))
    marker = {"type": "ephemeral", "ttl": "1h"}
    husk = HuskedBlock(digest, 2**40 + 3, "assistant", False, "tool_use", {"id": "x"})
    assert (husk.digest, husk.tokens, husk.role, husk.first, husk.kind) == (
        digest,
        2**40 + 3,
        "assistant",
        False,
        "tool_use",
    )
    assert husk.fields() == {"type": "tool_use", "id": "x"} and husk.marker is None
    marked = HuskedBlock(digest, 0, "user", True, "tool_result", {"cache_control": marker})
    assert marked.first and marked.marker == marker
    assert HuskedBlock(digest, 5, "user", True, "text").fields() == {"type": "text"}


def test_a_husked_marker_is_a_marker_to_the_request_blocks() -> None:
    marker = {"type": "ephemeral"}
    message: dict[str, Any] = {
        "role": "user",
        "content": [{**_result("t1", "a result " * 20), "cache_control": marker}],
    }
    whole = RequestBlocks(_tokens_by_place)
    whole.update({"model": "m", "messages": [copy.deepcopy(message)]}, drop_earlier_thinking=False)
    husk_blocks(message, 0, _tokens_by_place)
    husked = RequestBlocks(_tokens_by_place)
    husked.update({"model": "m", "messages": [message]}, drop_earlier_thinking=False)
    assert husked.markers == whole.markers == [0]
    assert husked.marker_controls == whole.marker_controls == [marker]
