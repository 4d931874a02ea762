"""Settled messages packed whole (`caching/husks.py` `HuskedMessage`): what the baselines hold
per call, that each reader either works on a settled message or fails loudly, and that the
figures are those of the message as it was."""

from __future__ import annotations

from typing import Any

import pytest
from held import bytes_held
from replay_settings import recorded_call, replay_settings, replayed_strategies

from unbounded.caching.blocks import FlatBlock, message_block_digest
from unbounded.caching.husks import (
    HuskedBlock,
    HuskedMessage,
    husk_blocks,
    husk_message,
    is_husked_message,
)
from unbounded.caching.request_blocks import RequestBlocks
from unbounded.errors import SettledMessageError
from unbounded.evaluation.baselines import (
    Baseline,
    History,
    LastMarked,
    MessageTokens,
    ToolResultClearing,
    _truncated_head,
    feed_strategies,
    make_baselines,
    mark_last_message,
    run_baselines,
)
from unbounded.model.entries import Entry
from unbounded.model.normalize import MessageNormalizer, normalize_plain_messages


def _replayed(calls: int) -> list[Baseline]:
    """Every baseline and native strategy after `calls` tool-call turns with 30-character
    ids (from 200 calls on, clear_every_turn clears and every strategy simulates on its own)."""
    return replayed_strategies(calls, lambda n: f"toolu_{n:024d}")


def _bytes_held(strategies: list[Baseline]) -> int:
    """Bytes of every object the strategies reach (messages, copies, lists, figures), but
    the replay's settings, what each strategy's calls cost (a column entry per call: the
    replay's output), each simulator's cache entries and token memo (bounded by the TTL and
    the memo's size) and the normalizers' sets of call ids (model/tool_ids.py's)."""
    stop: set[int] = {id(strategies[0].settings)}
    for strategy in strategies:
        stop |= {id(strategy.history.normalizer._names), id(strategy.run)}
        simulator = strategy.simulator
        if simulator is not None:
            stop |= {id(simulator._entries), id(simulator._openai), id(simulator._token_memo)}
    return bytes_held([s for s in strategies if s.history is strategies[0].history], stop)


def test_the_baselines_hold_a_few_hundred_bytes_a_call() -> None:
    """From 250 to 750 calls, everything the strategies hold grows by the settled history
    (a packed message each, about 130 bytes) and clear_every_turn's settled cleared copies
    (about 100), plus a pointer per message per list: not a dict, a list and a husk per
    block per message, nor a dict copy per cleared message (about 1,500 bytes a call)."""
    few, many = _replayed(250), _replayed(750)
    assert all(strategy.simulator is not None for strategy in many)
    per_call = (_bytes_held(many) - _bytes_held(few)) / 500
    assert 200 < per_call < 800


def _tokens_by_place(block: FlatBlock, digest: bytes) -> int:
    """A count that tells places apart: a husk counted at another place gets another number."""
    return 1000 * block.index + 10 * block.block_index + digest[0] % 7


def _reply(n: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": f"plan {n}", "signature": f"s{n}"},
            {"type": "text", "text": f"step {n}"},
            {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}},
        ],
    }


def _results(n: int, marked: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x " * n}
    if marked:
        result["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [result, {**result, "is_error": True}]}


def test_a_settled_message_keeps_each_blocks_figures_and_reads_only_its_role() -> None:
    message = _results(7, marked=True)
    husk = husk_message(message, 5, _tokens_by_place, 42)
    assert husk is not None and is_husked_message(husk) and not is_husked_message(message)
    assert (husk.role, husk["role"], husk.get("role"), husk.estimate) == ("user",) * 3 + (42,)
    for position, (block, settled) in enumerate(zip(message["content"], husk.blocks(), strict=True)):
        digest = message_block_digest(block, "user", first=position == 0)
        place = FlatBlock("messages", 5, position, block, "user")
        assert (settled.kind, settled.digest, settled.tokens) == (
            "tool_result",
            digest,
            _tokens_by_place(place, digest),
        )
        assert settled.marker == {"type": "ephemeral"}
        assert settled.fields() == {k: v for k, v in block.items() if k not in ("type", "content")}
    reply = husk_message(_reply(3), 2, _tokens_by_place, 9)
    assert reply is not None and reply.role == "assistant"
    assert [(b.kind, b.fields(), b.marker) for b in reply.blocks()] == [
        ("thinking", {}, None),
        ("text", {}, None),
        ("tool_use", {}, None),
    ]
    # An unusual role or type is spelled out, not coded.
    odd = HuskedMessage("critic", 1, [("odd_block", b"d" * 32, 3, b"")])
    assert (odd.role, [b.kind for b in odd.blocks()]) == ("critic", ["odd_block"])


def test_reading_a_settled_messages_content_fails_loudly() -> None:
    husk = husk_message(_results(2), 3, _tokens_by_place, 1)
    assert husk is not None
    with pytest.raises(SettledMessageError, match="'content' of a settled user message"):
        husk["content"]
    with pytest.raises(SettledMessageError):
        husk.get("content")
    # A summary of a settled history (what summarize_no_cache reads) fails, never drops it.
    with pytest.raises(SettledMessageError):
        normalize_plain_messages([{"role": "user", "content": "go"}, _reply(1), husk])
    assert husk[0:4] == bytes(husk)[0:4]  # bytes indexing still works


def test_only_messages_whose_blocks_all_go_are_settled_whole() -> None:
    mixed = {"role": "user", "content": [*_results(1)["content"], {"type": "text", "text": "hi"}]}
    assert husk_message(mixed, 1, _tokens_by_place, 1) is None  # its text stays whole
    assert husk_message({"role": "user", "content": "plain"}, 1, _tokens_by_place, 1) is None
    assert husk_message({"role": "assistant", "content": []}, 1, _tokens_by_place, 1) is None
    assert husk_message(_reply(1), 1, _tokens_by_place, 1) is not None


def _request(messages: list[Any]) -> dict[str, Any]:
    return {"model": "m", "system": [{"type": "text", "text": "sys"}], "messages": messages}


@pytest.mark.parametrize("drop", [False, True])
def test_request_blocks_of_a_settled_message_are_those_of_the_message(drop: bool) -> None:
    """Digests, tokens, prefix hashes and markers of a request whose messages are settled
    equal those of the messages as they were (earlier thinking dropped or not)."""
    messages: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(4):
        messages += [_reply(n), _results(n, marked=n == 1)]
    messages.append({"role": "user", "content": "next"})
    whole = RequestBlocks(_tokens_by_place)
    whole.update(_request(messages), drop_earlier_thinking=drop)
    settled = [
        husk_message(m, i, _tokens_by_place, 0) or m if 0 < i < 9 else m
        for i, m in enumerate(messages)
    ]
    assert sum(is_husked_message(m) for m in settled) == 8
    packed = RequestBlocks(_tokens_by_place)
    packed.update(_request(settled), drop_earlier_thinking=drop)
    assert list(packed.digests) == list(whole.digests)
    assert list(packed.hashes) == list(whole.hashes)
    assert (packed.tokens, packed.markers) == (whole.tokens, whole.markers)
    assert packed._turns == whole._turns


def test_request_blocks_swap_only_the_message_held_there() -> None:
    messages: list[Any] = [{"role": "user", "content": "start"}, _reply(0), _results(0)]
    blocks = RequestBlocks(_tokens_by_place)
    blocks.update(_request(messages), drop_earlier_thinking=False)
    husk = husk_message(messages[1], 1, _tokens_by_place, 0)
    assert not blocks.swap(2, messages[1], husk)  # not there
    assert not blocks.swap(1, dict(messages[1]), husk)  # an equal message is not the one
    assert blocks.swap(1, messages[1], husk)
    assert blocks._messages[1] is husk


def test_the_normalizer_settles_only_its_own_message_needing_no_repair() -> None:
    normalizer = MessageNormalizer()
    normalizer.append(Entry.user("start"))
    for n in range(3):
        normalizer.append(Entry.assistant(_reply(n)["content"], message_id=f"m{n}"))
        normalizer.append(Entry.user(_results(n)["content"][:1]))
    messages = normalizer.messages
    husk = husk_message(messages[1], 1, _tokens_by_place, 0)
    version = normalizer.version
    assert not normalizer.replace_settled(dict(messages[1]), husk, 1)  # not its own
    last = husk_message(messages[5], 5, _tokens_by_place, 0)
    assert not normalizer.replace_settled(messages[5], last, 5)  # one of the last two
    third_last = husk_message(messages[4], 4, _tokens_by_place, 0)
    assert normalizer.replace_settled(messages[4], third_last, 4)  # the last but two may go
    assert normalizer.replace_settled(messages[1], husk, 1)
    assert normalizer.messages[1] is husk
    assert normalizer.version == version  # the same messages: no new version
    # A message awaiting a repair (a result answering no call) stays as it is.
    broken = MessageNormalizer()
    broken.append(Entry.user("start"))
    broken.append(Entry.assistant(_reply(0)["content"], message_id="m0"))
    broken.append(Entry.user(_results(9)["content"][:1]))  # answers t9, not t0
    for n in range(1, 3):
        broken.append(Entry.assistant(_reply(n)["content"], message_id=f"m{n}"))
        broken.append(Entry.user(_results(n)["content"][:1]))
    own = broken._messages[2]
    assert not broken.replace_settled(own, husk_message(own, 2, _tokens_by_place, 0), 2)
    assert broken.messages[2] is not own  # repaired
    assert broken.replace_settled(broken._messages[1], husk_message(broken._messages[1], 1, _tokens_by_place, 0), 1)


def test_the_normalizer_settles_by_its_own_index_when_a_first_user_message_is_put_back() -> None:
    """A view that opens with a reply reads with a user message put first: message i of what
    it reads is its own message i - 1, the first of them too."""
    normalizer = MessageNormalizer()
    for n in range(3):
        normalizer.append(Entry.assistant(_reply(n)["content"], message_id=f"m{n}"))
        normalizer.append(Entry.user(_results(n)["content"][:1]))
    messages = normalizer.messages
    assert messages[1] is normalizer._messages[0]
    husk = husk_message(messages[1], 1, _tokens_by_place, 0)
    assert normalizer.replace_settled(messages[1], husk, 1)
    assert normalizer._messages[0] is husk and normalizer.messages[1] is husk


def test_marking_and_truncating_work_on_settled_messages() -> None:
    settled = husk_message(_results(1), 1, _tokens_by_place, 0)
    assert settled is not None
    marker = {"type": "ephemeral"}
    # The last markable block is found past a settled message (it has none).
    messages: list[Any] = [{"role": "user", "content": "start"}, settled]
    marked = mark_last_message(messages, marker)
    assert marked[1] is settled
    assert marked[0]["content"][0]["cache_control"] == marker
    # Cut at a settled message of tool results, the note alone stands for it.
    head = _truncated_head(settled)
    assert head == _truncated_head(_results(1))
    odd = HuskedMessage("user", 0, [("text", b"d" * 32, 1, b"")])
    with pytest.raises(SettledMessageError):
        _truncated_head(odd)


def test_token_counts_of_a_settled_message_are_those_it_was_counted_with() -> None:
    history = History(2.0)
    history.normalizer.append(Entry.user("start"))
    history.normalizer.append(Entry.assistant(_reply(0)["content"], message_id="m0"))
    first = history.messages()
    counted = list(history.tokens.counts(first))
    husk = husk_message(first[1], 1, _tokens_by_place, counted[1])
    tokens = MessageTokens(2.0)
    assert list(tokens.counts([first[0], husk])) == counted
    assert list(MessageTokens(2.0).counts(first)) == counted


def test_a_cleared_copy_of_a_settled_message_is_settled_and_prices_as_the_dict_copy() -> None:
    """The clearing of a settled message gives a settled copy whose figures are those of the
    dict copy it gives of the message as it was; a dict copy made before the message was
    settled is swapped for such a settled copy."""
    history: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(6):
        history += [_reply(n), _results(n)]
    whole = ToolResultClearing(3)
    cleared = list(whole.apply(history))
    settled = [
        husk_message(m, i, _tokens_by_place, 0) or m if 0 < i < 12 else m
        for i, m in enumerate(history)
    ]
    packed = ToolResultClearing(3, husk_tokens=lambda: _tokens_by_place)
    copies = packed.apply(settled)
    assert is_husked_message(copies[2]) and copies[2] is not settled[2]
    # Message 10's first result is cleared, its second kept (the three newest are kept).
    pairs = zip(copies[10].blocks(), settled[10].blocks(), strict=True)
    assert [cleared.digest == kept.digest for cleared, kept in pairs] == [False, True]
    figures_whole, figures_packed = RequestBlocks(_tokens_by_place), RequestBlocks(_tokens_by_place)
    figures_whole.update(_request(cleared), drop_earlier_thinking=False)
    figures_packed.update(_request(list(copies)), drop_earlier_thinking=False)
    assert list(figures_packed.hashes) == list(figures_whole.hashes)
    assert figures_packed.tokens == figures_whole.tokens
    # Swapped after clearing: the dict copy becomes a settled copy with the same figures.
    later = ToolResultClearing(3, husk_tokens=lambda: _tokens_by_place)
    source = list(history)
    result = later.apply(source)
    old_copy = result[4]
    assert type(old_copy) is dict and old_copy is not history[4]
    swaps = [(4, history[4], settled[4]), (3, history[3], settled[3])]
    assert later.swap(swaps) == []  # the list cleared is not settled yet: nothing changes
    assert result[4] is old_copy and result[3] is history[3]
    source[3], source[4] = settled[3], settled[4]  # as the history settles its own list
    copies_swapped = later.swap(swaps)
    assert result[3] is settled[3]  # not cleared: the settled message itself
    assert copies_swapped == [(4, old_copy, result[4])]
    assert result[4] == copies[4]  # the same bytes as a copy cleared once settled


def test_an_unsettled_list_holder_is_left_as_it_is() -> None:
    marker = LastMarked()
    messages: list[Any] = [{"role": "user", "content": "start"}, _reply(0), _results(0)]
    result = marker.mark(messages, {"type": "ephemeral"})
    husk = husk_message(messages[1], 1, _tokens_by_place, 0)
    marker.swap([(1, messages[1], husk), (2, messages[2], b"unused")])
    assert result[1] is husk
    assert result[2] is not messages[2]  # the marked copy stays
    assert result[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def _many_results(calls: int) -> list[Baseline]:
    """The shared-history strategies after `calls` turns of five tool results each, in one
    user message: clear_every_turn clears the results of the message before the last (not
    settled yet) while the next call's five keep it from being kept."""
    shared = History(1.0)
    strategies = make_baselines(replay_settings(30_000), shared)
    feed_strategies(strategies, [Entry.user("start the work")])
    for n in range(calls):
        run_baselines(strategies, recorded_call(n))
        uses = [{"type": "tool_use", "id": f"t{n}_{k}", "name": "Read", "input": {}} for k in range(5)]
        results = [
            {"type": "tool_result", "tool_use_id": f"t{n}_{k}", "content": f"r{n} " * 1_000}
            for k in range(5)
        ]
        feed_strategies(
            strategies, [Entry.assistant(uses, message_id=f"m{n}"), Entry.user(results)]
        )
    run_baselines(strategies, recorded_call(calls))  # settled after its request: no feed since
    return strategies


def test_every_holder_holds_the_settled_messages_and_copies_at_once() -> None:
    """Right after a call, the history's lists, the normalizer's, each strategy's marker and
    simulator, and the clearing hold the settled messages (and clear_every_turn's settled
    copies, one object for all three of its holders), not the dicts they replaced."""
    strategies = _many_results(40)
    shared = strategies[0].history
    messages = shared.messages()
    settled = range(1, shared.husked)
    assert shared.husked > 40
    assert all(is_husked_message(messages[i]) for i in settled)
    assert all(shared.normalizer._messages[i] is messages[i] for i in settled)
    none, truncate, _, clear = strategies
    assert truncate.name == "truncate" and truncate.cut > 0 and clear.simulator is not None
    for strategy, offset in ((none, 0), (truncate, truncate.cut)):
        assert strategy.simulator is not None
        for i in range(max(1, offset + 1), shared.husked):
            assert strategy.marker._result[i - offset] is messages[i]
            assert strategy.simulator._blocks._messages[i - offset] is messages[i]
    copies = clear.clearing._result
    for i in settled:
        assert is_husked_message(copies[i])
        assert clear.marker._result[i] is copies[i]
        assert clear.simulator._blocks._messages[i] is copies[i]


def _marked_reply(n: int) -> dict[str, Any]:
    """A reply whose text block carries a cache_control marker (other recording formats and
    hand-made agents put them there; Claude Code does not)."""
    reply = _reply(n)
    reply["content"][1] = {**reply["content"][1], "cache_control": {"type": "ephemeral"}}
    return reply


def test_a_settled_reply_keeps_its_marker_where_the_simulator_reads_it() -> None:
    """A marker on a reply's block places a breakpoint whenever the request is computed
    again: settled whole or block by block, the reply must keep it."""
    messages: list[Any] = [{"role": "user", "content": "start"}, _marked_reply(0), _results(0)]
    messages.append({"role": "user", "content": "next"})
    whole = RequestBlocks(_tokens_by_place)
    whole.update(_request(messages), drop_earlier_thinking=False)
    assert whole.markers  # the reply's text block is marked
    packed_message = husk_message(messages[1], 1, _tokens_by_place, 0)
    assert packed_message is not None
    by_block = {**messages[1], "content": list(messages[1]["content"])}
    assert husk_blocks(by_block, 1, _tokens_by_place) == 3
    for settled_reply in (packed_message, by_block):
        settled = [messages[0], settled_reply, *messages[2:]]
        figures = RequestBlocks(_tokens_by_place)
        figures.update(_request(settled), drop_earlier_thinking=False)
        assert (figures.markers, figures.marker_controls) == (whole.markers, whole.marker_controls)
        assert list(figures.hashes) == list(whole.hashes)


def test_a_cleared_copy_of_a_settled_marked_result_keeps_its_marker() -> None:
    """Clearing a settled tool result that carries a marker keeps the marker, as the dict
    copy of the message does."""
    history: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(6):
        history += [_reply(n), _results(n, marked=n == 1)]
    cleared = ToolResultClearing(3).apply(history)
    settled = [
        husk_message(m, i, _tokens_by_place, 0) or m if 0 < i < 12 else m
        for i, m in enumerate(history)
    ]
    copies = ToolResultClearing(3, husk_tokens=lambda: _tokens_by_place).apply(settled)
    assert is_husked_message(copies[4])  # message 4 holds the marked results, cleared
    whole, packed = RequestBlocks(_tokens_by_place), RequestBlocks(_tokens_by_place)
    whole.update(_request(list(cleared)), drop_earlier_thinking=False)
    packed.update(_request(list(copies)), drop_earlier_thinking=False)
    assert whole.markers
    assert (packed.markers, packed.marker_controls) == (whole.markers, whole.marker_controls)
    assert list(packed.hashes) == list(whole.hashes)


def test_fields_too_large_to_pack_leave_the_message_whole_and_its_blocks_husked() -> None:
    """A tool result whose other fields pass 64 KiB is not packed whole (the packed length
    is two bytes); the history husks its blocks in place instead."""
    big = _results(1)
    for block in big["content"]:
        block["metadata"] = "m" * 70_000
    assert husk_message(big, 2, _tokens_by_place, 0) is None
    assert husk_message(_results(1), 2, _tokens_by_place, 0) is not None
    entries = [Entry.user("start")]
    for n in range(4):
        entries.append(Entry.assistant(_reply(n)["content"], message_id=f"m{n}"))
        results = big["content"] if n == 1 else _results(n)["content"]
        entries.append(Entry.user([dict(block) for block in results]))
    history = History(1.0, entries)
    assert [m["role"] for m in history.messages()[3:5]] == ["assistant", "user"]
    history.husk(6, _tokens_by_place)
    messages = history.messages()
    assert is_husked_message(messages[3])  # the reply settles whole
    kept = messages[4]  # the results with the large field: husked block by block
    assert type(kept) is dict and all(isinstance(b, HuskedBlock) for b in kept["content"])
    assert "metadata" in kept["content"][0].fields()


def test_a_type_or_role_too_long_to_pack_stays_whole_instead_of_failing() -> None:
    """A block type or role past 255 bytes (no API has one) cannot be packed: the message or
    block stays as it is, and nothing raises."""
    odd = "x" * 300
    reply = {"role": "assistant", "content": [{"type": odd, "text": "t"}, _reply(2)["content"][1]]}
    assert husk_message(reply, 1, _tokens_by_place, 0) is None
    assert husk_blocks(reply, 1, _tokens_by_place) == 1
    assert reply["content"][0] == {"type": odd, "text": "t"}
    longest = {"role": "assistant", "content": [{"type": "y" * 255, "text": "t"}]}
    packed = husk_message(longest, 1, _tokens_by_place, 0)
    assert packed is not None and packed.blocks()[0].kind == "y" * 255  # 255 bytes still pack
    strange_role = {"role": odd, "content": [{"type": "text", "text": "t"}]}
    assert husk_message(strange_role, 1, _tokens_by_place, 0) is None
    assert husk_blocks(strange_role, 1, _tokens_by_place) == 0
