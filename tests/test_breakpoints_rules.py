"""Rules of cache marker placement the mutation check found unheld by the fast tests: which
messages are shared with the input and which copied, how blocks of unusual types are counted,
where the marker goes when the last messages cannot carry one, and the incremental planner
giving the plan a from-scratch placement gives."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, cast

from unbounded.caching.breakpoints import (
    CacheBreakpointPlanner,
    count_cache_breakpoints,
    plan_cache_breakpoints,
)
from unbounded.model.request import ProviderRequest

MARK = {"type": "ephemeral"}


def _request(messages: list[Any], **more: Any) -> ProviderRequest:
    return cast(ProviderRequest, {"model": "m", "messages": messages, **more})


def _turns(count: int) -> list[dict[str, Any]]:
    """`count` alternating messages, one text block each."""
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": [{"type": "text", "text": f"m{i}"}]} for i in range(count)
    ]


def test_messages_without_a_marker_are_shared_and_the_marked_one_copied() -> None:
    messages = _turns(3)
    plan = plan_cache_breakpoints(_request(messages))
    out = plan.request["messages"]
    assert out[0] is messages[0] and out[1] is messages[1]
    assert out[2] is not messages[2] and "cache_control" not in messages[2]["content"][0]


def test_a_message_that_is_not_a_dict_comes_back_a_plain_dict_without_its_marker() -> None:
    proxy: MappingProxyType[str, Any] = MappingProxyType(
        {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": MARK}]}
    )
    plain = MappingProxyType({"role": "assistant", "content": [{"type": "text", "text": "b"}]})
    plan = plan_cache_breakpoints(_request([proxy, plain, *_turns(1)]))
    first, second = plan.request["messages"][:2]
    assert type(first) is dict and type(second) is dict
    assert first == {"role": "user", "content": [{"type": "text", "text": "a"}]}
    assert second == dict(plain)
    assert proxy["content"][0]["cache_control"] == MARK  # the input is untouched


def test_content_of_a_list_subclass_comes_back_a_plain_list() -> None:
    class Blocks(list[Any]):
        pass

    message = {"role": "user", "content": Blocks([{"type": "text", "text": "a"}])}
    plan = plan_cache_breakpoints(_request([message, *_turns(2)[1:]]))
    assert type(plan.request["messages"][0]["content"]) is list
    assert plan.request["messages"][0]["content"] == [{"type": "text", "text": "a"}]


def test_an_item_that_is_not_a_message_is_left_out() -> None:
    plan = plan_cache_breakpoints(_request(["not a message", *_turns(1)]))
    assert plan.request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "m0", "cache_control": MARK}]}
    ]


def test_a_block_that_is_not_a_dict_counts_as_one_block_and_loses_its_marker() -> None:
    block = MappingProxyType({"type": "text", "text": "a", "cache_control": MARK})
    messages = [{"role": "user", "content": [block]}, *_turns(3)[1:]]
    plan = plan_cache_breakpoints(_request(messages))
    # One block each before the last message: the marker is on flat block 2.
    assert plan.message_breakpoint == 2 and plan.breakpoints == (2,)
    assert count_cache_breakpoints(plan.request) == 1
    assert plan.request["messages"][0]["content"] == [{"type": "text", "text": "a"}]


def test_when_the_last_message_cannot_carry_a_marker_the_one_before_it_does() -> None:
    thinking = {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}
    plan = plan_cache_breakpoints(_request([*_turns(3), thinking]))
    assert plan.marked_messages == (2,) and plan.message_breakpoint == 2


def test_a_request_without_messages_marks_only_the_prefix() -> None:
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    body = cast(ProviderRequest, {"model": "m", "tools": tools})
    assert plan_cache_breakpoints(body).breakpoints == (0,)
    planner = CacheBreakpointPlanner()
    assert planner.plan(body).breakpoints == (0,)


def _same_as_from_scratch(planner: CacheBreakpointPlanner, messages: list[Any], **kw: Any) -> None:
    request = _request(messages, system="rules")
    incremental = planner.plan(request, **kw)
    kw.pop("unchanged_prefix", None)
    scratch = plan_cache_breakpoints(request, **kw)
    assert incremental == scratch
    assert incremental.request == scratch.request


def test_the_planner_gives_the_from_scratch_plan_turn_after_turn() -> None:
    planner = CacheBreakpointPlanner()
    messages = _turns(3)
    _same_as_from_scratch(planner, messages)
    assert planner.reusable_prefix(messages) == 3
    grown = [*messages, *_turns(5)[3:]]
    assert planner.reusable_prefix(grown) == 3
    _same_as_from_scratch(planner, grown)
    # A message replaced in the middle (a cleared result) and one block more in it.
    edited = [*grown[:1], {"role": "assistant", "content": [*grown[1]["content"], {"type": "text", "text": "x"}]}, *grown[2:]]  # fmt: skip
    assert planner.reusable_prefix(edited) == 1
    _same_as_from_scratch(planner, edited)
    _same_as_from_scratch(planner, edited[:2])  # a shorter conversation (a compaction)
    _same_as_from_scratch(planner, edited)
    # The message before the marked one gains a block: the marker's flat index moves by one.
    wider = [*edited[:3], {"role": "assistant", "content": [*edited[3]["content"], {"type": "text", "text": "y"}]}, edited[4]]  # fmt: skip
    assert planner.reusable_prefix(wider) == 3
    _same_as_from_scratch(planner, wider)


def test_the_planner_trusts_a_given_unchanged_prefix_only_within_both_lists() -> None:
    planner = CacheBreakpointPlanner()
    messages = _turns(4)
    _same_as_from_scratch(planner, messages, unchanged_prefix=0)
    longer = [*messages, *_turns(6)[4:]]
    _same_as_from_scratch(planner, longer, unchanged_prefix=4)
    shorter = longer[:3]
    _same_as_from_scratch(planner, shorter, unchanged_prefix=99)  # more than either list has
    _same_as_from_scratch(planner, longer, unchanged_prefix=99)


def test_the_planner_reuses_nothing_after_a_list_with_an_item_that_is_not_a_message() -> None:
    planner = CacheBreakpointPlanner()
    messages = ["stray", *_turns(3)]
    _same_as_from_scratch(planner, messages)
    assert planner.reusable_prefix(messages) == 0  # the unmarked list is one item shorter
    _same_as_from_scratch(planner, [*messages, *_turns(5)[3:]])
    # Told (truly) that the inputs share their first items, it still reuses nothing: its own
    # list of unmarked messages does not line up with them.
    _same_as_from_scratch(planner, [*messages, *_turns(6)[5:]], unchanged_prefix=6)
    _same_as_from_scratch(planner, ["stray", *_turns(2)])
    _same_as_from_scratch(planner, ["stray", *_turns(4)], unchanged_prefix=3)


def _blocks_of(markable: str) -> list[dict[str, Any]]:
    """One single-block message per character: "x" a text block that can carry a marker,
    "." an empty one that cannot."""
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": [{"type": "text", "text": f"m{i}" if c == "x" else ""}]}
        for i, c in enumerate(markable)
    ]


def _bridge(markable: str, previous: int, lookback: int) -> int | None:
    plan = plan_cache_breakpoints(
        _request(_blocks_of(markable)),
        previous_message_breakpoint=previous,
        lookback_blocks=lookback,
    )
    assert plan.message_breakpoint == len(markable) - 1
    return plan.intermediate_breakpoint


def test_the_bridge_goes_half_the_lookback_after_the_previous_marker() -> None:
    assert _bridge("x" * 30, previous=2, lookback=10) == 7
    assert _bridge("x" * 30, previous=2, lookback=2) == 3  # never on the previous marker itself


def test_the_bridge_looks_back_one_block_at_a_time_then_forward() -> None:
    # 7 cannot carry it: 6 before 5; none from 3 to 7: 8 comes first.
    assert _bridge("xxxxxxx.xxxxxxxxxxxxxx", previous=2, lookback=10) == 6
    assert _bridge("xxx.....xxxxxxxxxxxxxx", previous=2, lookback=10) == 8


def test_the_bridge_stays_within_the_lookback_and_before_the_message_marker() -> None:
    # Only block 12 can carry it: the last within reach (2 + 10), one before the marker at 13.
    assert _bridge("xxx.........xx", previous=2, lookback=10) == 12
    assert _bridge("xxx..........xxxx", previous=2, lookback=10) is None


def test_the_bridge_can_sit_in_the_last_message() -> None:
    many = [{"type": "text", "text": f"r{i}"} for i in range(30)]
    messages = [*_turns(2), {"role": "user", "content": many}]
    plan = plan_cache_breakpoints(
        _request(messages), previous_message_breakpoint=1, lookback_blocks=10
    )
    assert (plan.intermediate_breakpoint, plan.message_breakpoint) == (6, 31)
    marked = [
        i for i, b in enumerate(plan.request["messages"][2]["content"]) if "cache_control" in b
    ]
    assert marked == [4, 29]


def test_empty_or_missing_content_counts_no_block() -> None:
    messages = [*_turns(1), {"role": "assistant", "content": ""}, {"role": "user", "content": None}]
    messages += _turns(2)[1:]
    plan = plan_cache_breakpoints(_request(messages))
    assert plan.message_breakpoint == 1 and plan.marked_messages == (3,)


def test_a_string_message_is_marked_on_its_one_block() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]  # fmt: skip
    plan = plan_cache_breakpoints(_request(messages))
    assert plan.message_breakpoint == 2
    assert plan.request["messages"][2]["content"] == [
        {"type": "text", "text": "c", "cache_control": MARK}
    ]


def test_a_last_message_that_is_empty_or_not_a_list_passes_the_marker_back() -> None:
    for last in ("", None, 7):
        messages = [*_turns(2), {"role": "user", "content": last}]
        plan = plan_cache_breakpoints(_request(messages))
        assert plan.marked_messages == (1,) and plan.message_breakpoint == 1
        assert plan.request["messages"][2] == {"role": "user", "content": last}


def test_the_last_markable_block_of_a_message_is_marked() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": "c"}]  # fmt: skip
    plan = plan_cache_breakpoints(_request([{"role": "user", "content": blocks}]))
    assert plan.message_breakpoint == 2
    assert [("cache_control" in b) for b in plan.request["messages"][0]["content"]] == [False, False, True]  # fmt: skip
    skipping = [*blocks[:2], {"type": "text", "text": ""}]
    plan = plan_cache_breakpoints(_request([{"role": "user", "content": skipping}]))
    assert plan.message_breakpoint == 1


def test_unmarked_system_blocks_get_their_marker_on_the_last_that_can_carry_one() -> None:
    system = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": ""}]  # fmt: skip
    plan = plan_cache_breakpoints(_request(_turns(1), system=system))
    assert [("cache_control" in b) for b in plan.request["system"]] == [False, True, False]
    plan = plan_cache_breakpoints(_request(_turns(1), system=[system[0], system[2]]))
    assert [("cache_control" in b) for b in plan.request["system"]] == [True, False]


def test_a_budget_of_one_marker_keeps_the_message_marker() -> None:
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    plan = plan_cache_breakpoints(_request(_turns(1), tools=tools, system="s"), max_breakpoints=1)
    assert plan.breakpoints == (2,) and plan.dropped == ("tools[0]", "system[0]")


def test_a_turn_exactly_the_lookback_wide_needs_no_bridge() -> None:
    strings = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(14)]
    at_reach = plan_cache_breakpoints(
        _request(strings), previous_message_breakpoint=2, lookback_blocks=11
    )
    assert at_reach.message_breakpoint == 13 and at_reach.intermediate_breakpoint is None
    beyond = plan_cache_breakpoints(
        _request(strings), previous_message_breakpoint=2, lookback_blocks=10
    )
    assert beyond.intermediate_breakpoint == 7
    many = [{"type": "text", "text": f"r{i}"} for i in range(5)]
    messages = [*_turns(2), {"role": "user", "content": many}]
    plan = plan_cache_breakpoints(
        _request(messages), previous_message_breakpoint=1, lookback_blocks=5
    )
    assert plan.message_breakpoint == 6 and plan.intermediate_breakpoint is None


def test_a_lookback_of_one_block_is_allowed() -> None:
    assert _bridge("x" * 6, previous=2, lookback=1) == 3


def test_tools_without_a_marker_are_shared_and_others_come_back_plain_dicts() -> None:
    plain = {"name": "Read", "input_schema": {"type": "object"}}
    proxy = MappingProxyType({"name": "Grep", "input_schema": {"type": "object"}})
    last = {"name": "Bash", "input_schema": {"type": "object"}}
    plan = plan_cache_breakpoints(_request(_turns(1), tools=[plain, proxy, last]))
    tools = plan.request["tools"]
    assert tools[0] is plain and type(tools[1]) is dict and tools[1] == dict(proxy)
    assert tools[2] == {**last, "cache_control": MARK}


def test_without_caching_a_request_keeps_its_system_as_it_was_given() -> None:
    plan = plan_cache_breakpoints(_request(_turns(1)), enable_prompt_caching=False)
    assert "system" not in plan.request and plan.breakpoints == ()
    plan = plan_cache_breakpoints(_request(_turns(1), system="rules"), enable_prompt_caching=False)
    assert plan.request["system"] == "rules"


def _full_budget(max_breakpoints: int) -> Any:
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    system = [{"type": "text", "text": f"s{i}", "cache_control": MARK} for i in range(3)]
    return plan_cache_breakpoints(
        _request(_turns(30), tools=tools, system=system),
        previous_message_breakpoint=4,
        lookback_blocks=10,
        max_breakpoints=max_breakpoints,
    )


def test_markers_are_dropped_one_at_a_time_until_the_budget_holds() -> None:
    # Tools, three system blocks, the bridge and the message marker: six for four places.
    plan = _full_budget(4)
    assert plan.dropped == ("tools[0]", "system[0]")
    assert plan.breakpoints == (2, 3, 9, 33) and plan.message_breakpoint == 33
    assert count_cache_breakpoints(plan.request) == 4


def test_the_bridge_goes_last_when_only_the_message_marker_fits() -> None:
    plan = _full_budget(1)
    assert plan.dropped[-1] == "messages[5][0] (lookback bridge)"
    assert plan.breakpoints == (33,) and plan.intermediate_breakpoint is None
    assert count_cache_breakpoints(plan.request) == 1


def test_a_fork_of_the_last_request_is_planned_as_from_scratch_and_leaves_the_planner_as_it_was() -> None:
    planner = CacheBreakpointPlanner()
    messages = _turns(5)
    _same_as_from_scratch(planner, messages)
    kept = (list(planner._inputs), [list(part) for part in planner._unmarked])
    prompt = {"role": "user", "content": "Summarize the conversation."}
    edited = {"role": "assistant", "content": [*messages[3]["content"], {"type": "text", "text": "x"}]}
    for fork in (
        [*messages, prompt],  # the whole prefix shared
        [*messages[:3], edited, messages[4], prompt],  # a message replaced (cleared) in it
        [*messages[:2], prompt],  # a shorter one (its oldest rounds kept only)
        ["stray", *messages, prompt],  # nothing shared
    ):
        for skip in (True, False):
            request = _request(fork, system="rules")
            planned = planner.plan_fork(request, ttl="1h", prefix_ttl="1h", skip_cache_write=skip)
            scratch = plan_cache_breakpoints(request, ttl="1h", prefix_ttl="1h", skip_cache_write=skip)
            assert planned == scratch and planned.request == scratch.request
    assert (planner._inputs, [list(part) for part in planner._unmarked]) == kept
    assert planner.reusable_prefix(messages) == 5
