"""Rules of `caching/request_blocks.py` that the mutation check found no test holding: a new
`RequestBlocks` holds nothing, `kept` counts the blocks reused, the counter is asked about
the blocks `flatten_request` gives (tools and system at block 0) and about nothing repeated
when no user turn has come, `on_cut` is told where blocks are dropped and only then, a
message that is not a dict adds no block, a husked block placed elsewhere than it was husked
is refused, a settled first message is keyed like its dict, `swap` works at message 0, a
folded column reads negative positions from the end, and `fold` lets go of exactly what its
rule says."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.caching import request_blocks
from unbounded.caching.blocks import FlatBlock, block_digest, flatten_request
from unbounded.caching.husks import HuskedBlock, husk_message
from unbounded.caching.request_blocks import FoldedColumn, RequestBlocks


def count(block: FlatBlock, digest: bytes) -> int:
    return len(str(block.block)) // 4 + digest[0] % 3


class Asked:
    """A counter that notes every block it is asked about."""

    def __init__(self) -> None:
        self.blocks: list[FlatBlock] = []

    def __call__(self, block: FlatBlock, digest: bytes) -> int:
        self.blocks.append(block)
        return count(block, digest)


def _call(n: int) -> list[dict[str, Any]]:
    """A reply of one tool call and its result: a round that starts no user turn."""
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"plan {n}", "signature": "s"},
                {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "r"}],
        },
    ]


def test_a_new_request_blocks_holds_nothing() -> None:
    blocks = RequestBlocks(count)
    assert (blocks.size, blocks.kept, blocks.folded, blocks.head_blocks) == (0, 0, 0, 0)
    assert [list(column) for column in blocks.columns()] == [[], [], []]


def test_kept_counts_the_blocks_reused_from_the_request_before() -> None:
    blocks = RequestBlocks(count)
    history = [{"role": "user", "content": "start"}, *_call(0)]
    blocks.update({"model": "m", "system": "s", "messages": history}, drop_earlier_thinking=False)
    assert blocks.kept == 0 and blocks.size == 5
    blocks.update(
        {"model": "m", "system": "s", "messages": [*history, *_call(1)]},
        drop_earlier_thinking=False,
    )
    assert blocks.kept == 5 and blocks.size == 8


def test_the_counter_is_asked_about_the_blocks_flatten_request_gives() -> None:
    asked = Asked()
    request = {
        "model": "m",
        "tools": [{"name": "Read"}, {"name": "Bash"}],
        "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        "messages": [{"role": "user", "content": "start"}, *_call(0)],
    }
    RequestBlocks(asked).update(request, drop_earlier_thinking=False)
    assert asked.blocks == flatten_request(request)


@pytest.mark.parametrize("drop", [True, False])
def test_without_a_user_turn_a_grown_request_asks_only_about_its_new_blocks(drop: bool) -> None:
    """Earlier thinking is dropped only from a new user turn on: with none yet (tool rounds
    only), the messages sent before stay as they were and are not counted again."""
    asked = Asked()
    blocks = RequestBlocks(asked)
    history: list[dict[str, Any]] = []
    for n in range(4):
        history = [*history, *_call(n)]
        asked.blocks.clear()
        blocks.update({"model": "m", "messages": history}, drop_earlier_thinking=drop)
        assert len(asked.blocks) == 3, n  # the new round's thinking, call and result
        assert blocks.kept == 3 * n  # every block of the rounds before is kept as it was


def test_on_cut_is_told_where_blocks_are_dropped_and_only_then() -> None:
    cuts: list[int] = []
    blocks = RequestBlocks(count, on_cut=cuts.append)
    history = [{"role": "user", "content": "start"}, *_call(0), *_call(1)]
    blocks.update({"model": "m", "system": "s", "messages": history}, drop_earlier_thinking=False)
    assert cuts == []  # nothing held before
    blocks.update(
        {"model": "m", "system": "s", "messages": [*history, *_call(2)]},
        drop_earlier_thinking=False,
    )
    assert cuts == []  # appended: nothing dropped
    blocks.update(
        {"model": "m", "system": "s", "messages": history[:3]}, drop_earlier_thinking=False
    )
    assert cuts == [5]  # the system block, "start", the first round: the second goes
    blocks.update(
        {"model": "m", "system": "other", "messages": history}, drop_earlier_thinking=False
    )
    assert cuts == [5, 0]  # another system prompt: every block goes


def test_a_message_that_is_not_a_dict_adds_no_block() -> None:
    messages: list[Any] = [{"role": "user", "content": "start"}, None, "stray", *_call(0)]
    request = {"model": "m", "system": "s", "messages": messages}
    blocks = RequestBlocks(count)
    blocks.update(request, drop_earlier_thinking=False)
    flat = flatten_request(request)
    assert list(blocks.digests) == [block_digest(block) for block in flat]
    blocks.update({**request, "messages": [*messages, *_call(1)]}, drop_earlier_thinking=False)
    assert blocks.size == len(flat) + 3


def _husked_result(first: bool, role: str) -> HuskedBlock:
    return HuskedBlock(bytes(32), 5, role, first, "tool_result", {"tool_use_id": "t"})


@pytest.mark.parametrize(
    ("content", "role"),
    [
        ([{"type": "text", "text": "see"}, _husked_result(True, "user")], "user"),  # not first
        ([_husked_result(False, "user")], "user"),  # first now
        ([_husked_result(True, "assistant")], "user"),  # another role
    ],
)
def test_a_husked_block_placed_elsewhere_is_refused(content: list[Any], role: str) -> None:
    request = {"model": "m", "messages": [{"role": role, "content": content}]}
    with pytest.raises(ValueError, match="a husked block moved"):
        RequestBlocks(count).update(request, drop_earlier_thinking=False)


@pytest.mark.parametrize("system", [None, "s"])
def test_a_settled_first_message_hashes_as_its_dict(system: str | None) -> None:
    """The first message block's key mixes in the keying parameters, settled or not."""
    reply, result = _call(0)
    settled = [husk_message(reply, 0, count, 0), husk_message(result, 1, count, 0)]
    whole, packed = RequestBlocks(count), RequestBlocks(count)
    whole.update(
        {"model": "m", "system": system, "messages": [reply, result]}, drop_earlier_thinking=False
    )
    packed.update(
        {"model": "m", "system": system, "messages": settled}, drop_earlier_thinking=False
    )
    assert list(packed.digests) == list(whole.digests)
    assert list(packed.hashes) == list(whole.hashes)


def test_the_first_message_can_be_swapped_for_its_settled_form() -> None:
    """Swapped, the settled message is the one held: the next request that sends it is not
    counted again."""
    asked = Asked()
    blocks = RequestBlocks(asked)
    reply, result = _call(0)
    blocks.update({"model": "m", "messages": [reply, result]}, drop_earlier_thinking=False)
    settled = husk_message(reply, 0, count, 0)
    assert blocks.swap(0, reply, settled)
    assert not blocks.swap(-1, result, settled)  # no message -1
    asked.blocks.clear()
    blocks.update(
        {"model": "m", "messages": [settled, result, *_call(1)]}, drop_earlier_thinking=False
    )
    assert len(asked.blocks) == 3  # the new round only


def test_a_folded_column_reads_negative_positions_from_the_end() -> None:
    column = FoldedColumn([10, 11, 15, 16], head=2, folded=3)
    assert [column[-1], column[-2], column[-6], column[-7]] == [16, 15, 11, 10]
    with pytest.raises(IndexError):
        column[-3]  # position 4: folded


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fold as soon as one block can go, so short histories fold."""
    monkeypatch.setattr(request_blocks, "FOLD_BATCH", 1)


def _one_block_messages(n: int) -> RequestBlocks:
    blocks = RequestBlocks(count)
    history = [{"role": "user", "content": f"m{k}"} for k in range(n)]
    blocks.update({"model": "m", "system": "s", "messages": history}, drop_earlier_thinking=False)
    return blocks


@pytest.mark.usefixtures("small_batches")
def test_folding_before_the_second_message_lets_the_first_go() -> None:
    blocks = _one_block_messages(10)  # the system block at 0, message k at k + 1
    blocks.fold(2, 0)  # message 0 ends before position 2, message 1 does not
    assert blocks.folded == 1
    assert not blocks.readable(1, 1) and blocks.readable(2, 10) and blocks.readable(0, 0)


@pytest.mark.usefixtures("small_batches")
def test_folding_everything_keeps_the_last_block_the_chain_goes_on_from() -> None:
    blocks = _one_block_messages(10)
    blocks.fold(1_000, 0)
    assert blocks.folded == 9 and len(blocks.tokens) == 2  # the system block, the last one
    assert blocks.readable(10, 10) and not blocks.readable(9, 9)


@pytest.mark.usefixtures("small_batches")
def test_folding_with_earlier_thinking_dropped_keeps_the_last_turn_and_the_message_before() -> None:
    """The next user turn changes the messages from the last turn start on; the message
    before it holds the block the chain goes on from."""
    blocks = RequestBlocks(count)
    turn: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "go on"}]}
    history = [turn, *_call(0), *_call(1), dict(turn), *_call(2)]  # the last turn at message 5
    blocks.update({"model": "m", "messages": history}, drop_earlier_thinking=True)
    # Thinking dropped before the turn: messages 0-5 at flat positions 0-5, 6 at 6-7, 7 at 8.
    blocks.fold(blocks.size, 0)
    assert blocks.folded == 4  # messages 0-3; message 4, the turn and after stay
    assert blocks.readable(4, blocks.size - 1) and not blocks.readable(3, 3)


def test_messages_whose_thinking_was_left_out_keep_their_figures_when_sent_shifted() -> None:
    """A history sent again under a new first message (a truncation's note) re-adds the
    messages whose earlier thinking was left out: their other blocks keep their own figures,
    those of a request computed from scratch."""
    turn = {"role": "user", "content": [{"type": "text", "text": "go on"}]}
    history: list[Any] = [turn, *_call(0), dict(turn), *_call(1), dict(turn)]
    blocks = RequestBlocks(count)
    blocks.update({"model": "m", "messages": history}, drop_earlier_thinking=True)
    note = {"role": "user", "content": [{"type": "text", "text": "[earlier turns left out]"}]}
    shifted = {"model": "m", "messages": [note, *history[1:]]}
    blocks.update(shifted, drop_earlier_thinking=True)
    scratch = RequestBlocks(count)
    scratch.update(shifted, drop_earlier_thinking=True)
    assert list(blocks.digests) == list(scratch.digests)
    assert list(blocks.tokens) == list(scratch.tokens)
    assert list(blocks.hashes) == list(scratch.hashes)
