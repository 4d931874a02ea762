"""Rules of `caching/husks.py` that the mutation check found no test holding: a husk refuses
what it cannot hold (a digest of another size, a role or type past 255 bytes) with a
`ValueError` instead of packing it wrong, the husking leaves alone what it cannot pack, a
reply's tool_use keeps its id, a settled message holds little more than its digests and kept
fields, and fields of up to 64 KiB pack while longer ones leave the message whole."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from unbounded.caching.blocks import FlatBlock
from unbounded.caching.husks import (
    HuskedBlock,
    HuskedMessage,
    block_fields,
    husk_blocks,
    husk_message,
)

DIGEST = bytes(range(32))


def _tokens(block: FlatBlock, digest: bytes) -> int:
    return 3 + digest[0] % 5


def _result(tool_id: str = "t1", **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "out", **fields}


@pytest.mark.parametrize(
    ("digest", "elsewhere"),
    [(DIGEST[:31], None), (DIGEST + b"!", None), (DIGEST, DIGEST[:5]), (DIGEST[:31], DIGEST)],
)
def test_a_husked_block_refuses_a_digest_of_another_size(
    digest: bytes, elsewhere: bytes | None
) -> None:
    with pytest.raises(ValueError, match="a digest is 32 bytes"):
        HuskedBlock(digest, 1, "user", True, "image", {}, elsewhere)


def test_a_husked_block_holds_a_role_and_a_type_of_at_most_255_bytes() -> None:
    longest = HuskedBlock(DIGEST, 1, "r" * 255, False, "k" * 255)
    assert (longest.role, longest.kind) == ("r" * 255, "k" * 255)
    for role, kind in (("r" * 256, "text"), ("user", "k" * 256)):
        with pytest.raises(ValueError, match="at most 255 bytes"):
            HuskedBlock(DIGEST, 1, role, False, kind)


def test_a_husked_block_shows_the_start_of_its_digest() -> None:
    husk = HuskedBlock(DIGEST, 9, "user", True, "tool_result", {"tool_use_id": "t"})
    assert repr(husk) == (
        "HuskedBlock(digest=000102030405..., tokens=9, role='user', first=True, "
        "fields={'type': 'tool_result', 'tool_use_id': 't'})"
    )


def test_a_message_without_a_block_list_or_with_too_long_a_role_is_not_husked() -> None:
    """Nothing to husk, or a role a husk cannot hold: left as it is, nothing raised."""
    no_content: dict[str, Any] = {"role": "user"}
    assert husk_blocks(no_content, 0, _tokens) == 0 and no_content == {"role": "user"}
    results = [_result()]
    strange = {"role": "r" * 256, "content": results}
    assert husk_blocks(strange, 0, _tokens) == 0
    assert strange["content"] is results and results[0] == _result()
    assert husk_message(strange, 0, _tokens, 1) is None


def test_a_husked_reply_s_tool_use_keeps_its_id_and_nothing_else_gains_one() -> None:
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
        ],
    }
    assert husk_blocks(reply, 1, _tokens) == 2
    assert [block_fields(block) for block in reply["content"]] == [
        {"type": "text"},
        {"type": "tool_use", "id": "toolu_1"},
    ]


def test_a_settled_message_holds_its_digests_and_kept_fields_and_a_few_bytes_more() -> None:
    """The role and the common block types take a byte each, not their spelling: a settled
    message of one tool result holds its digest and kept fields and at most 12 bytes more."""
    message = {"role": "user", "content": [_result("toolu_01ABCDEFGHIJKLMNOPQRSTUVWX")]}
    settled = husk_message(message, 2, _tokens, 40)
    assert settled is not None and settled.role == "user"
    kept = orjson.dumps({"tool_use_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUVWX"})
    assert len(settled) <= len(DIGEST) + len(kept) + 12
    assert [(b.kind, b.fields()) for b in settled.blocks()] == [
        ("tool_result", {"tool_use_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUVWX"})
    ]


def test_a_settled_message_refuses_a_digest_of_another_size() -> None:
    with pytest.raises(ValueError, match="a digest is 32 bytes, not 31"):
        HuskedMessage("user", 1, [("tool_result", DIGEST[:31], 3, b"")])


def test_a_settled_message_refuses_a_role_or_type_past_255_bytes() -> None:
    longest = HuskedMessage("r" * 255, 1, [("k" * 255, DIGEST, 3, b"")])
    assert (longest.role, longest.blocks()[0].kind) == ("r" * 255, "k" * 255)
    for role, kind in (("r" * 256, "text"), ("user", "k" * 256)):
        with pytest.raises(ValueError, match="at most 255 bytes"):
            HuskedMessage(role, 1, [(kind, DIGEST, 3, b"")])


def test_a_settled_message_reads_back_its_token_estimate() -> None:
    for estimate in (-1, 0, 7, 2**31 - 1):
        settled = HuskedMessage("assistant", estimate, [("text", DIGEST, 3, b"")])
        assert settled.estimate == estimate
        assert settled.blocks()[0].tokens == 3


def test_kept_fields_of_up_to_64_kib_pack_and_longer_ones_stay_whole() -> None:
    """The kept fields' length is two bytes: 65,535 bytes of JSON pack, 65,536 do not (the
    message stays a dict instead of failing the replay)."""
    empty = len(orjson.dumps({"tool_use_id": "t1", "metadata": ""}))
    fits = {"role": "user", "content": [_result(metadata="m" * (0xFFFF - empty))]}
    settled = husk_message(fits, 1, _tokens, 5)
    assert settled is not None
    assert len(settled.blocks()[0].kept) == 0xFFFF
    assert settled.blocks()[0].fields()["metadata"] == "m" * (0xFFFF - empty)
    over = {"role": "user", "content": [_result(metadata="m" * (0x10000 - empty))]}
    assert husk_message(over, 1, _tokens, 5) is None


def test_a_type_of_256_bytes_is_not_settled_and_nothing_raises() -> None:
    reply = {"role": "assistant", "content": [{"type": "y" * 256, "text": "t"}]}
    assert husk_message(reply, 1, _tokens, 0) is None
    assert husk_blocks(reply, 1, _tokens) == 0
    role_256 = {"role": "r" * 256, "content": [{"type": "text", "text": "t"}]}
    assert husk_message(role_256, 1, _tokens, 0) is None
