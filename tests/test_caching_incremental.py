"""The incremental cache planning gives exactly what planning from scratch gives.

`plan_cache_breakpoints` shares the messages it does not mark and counts flat positions
instead of flattening; the break detector reuses the previous request's message digests for
the message and block objects it has already digested. Both are checked against the
from-scratch definitions (the implementations they replaced, kept below as references) on
every turn of replayed sessions (each prepared request, each snapshot) and on generated
requests and request sequences.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, FIXTURES
from unbounded.caching import break_detector
from unbounded.caching.blocks import (
    CACHE_LOOKBACK_BLOCKS,
    MAX_CACHE_BREAKPOINTS,
    FlatBlock,
    block_digest,
    cache_breakpoint_indices,
    canonical_json,
    flatten_request,
    is_markable,
    message_block_digest,
    system_blocks,
    without_cache_control,
)
from unbounded.caching.break_detector import PromptCacheBreakDetector, snapshot_request
from unbounded.caching.breakpoints import (
    BreakpointPlan,
    CacheBreakpointPlanner,
    plan_cache_breakpoints,
)
from unbounded.caching.system_prompt import CacheScope, get_cache_control
from unbounded.caching.ttl import CacheTtl
from unbounded.cli.demo import demo_transcript
from unbounded.evaluation.replay import ReplayOptions, replay_session
from unbounded.model.request import ProviderRequest
from unbounded.model.transcript import Transcript
from unbounded.policy import Policy
from unbounded.transcripts.loader import load_transcript

# -- the from-scratch references (the implementations the incremental ones replaced) --------


def reference_block_digest(flat: FlatBlock) -> bytes:
    payload = canonical_json(without_cache_control(flat.block))
    if flat.section == "messages" and flat.block_index == 0:
        payload = b"message:" + (flat.role or "").encode() + b"\n" + payload
    else:
        payload = flat.section.encode() + b"\n" + payload
    return hashlib.sha256(payload).digest()


def reference_message_digests(request: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    """One flatten per message, every block digested."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, Mapping)]
    return tuple(
        tuple(
            reference_block_digest(flat).hex()[:16]
            for flat in flatten_request({"messages": [message]})
        )
        for message in messages
    )


def _ref_copy_messages(messages: Any) -> list[dict[str, Any]]:
    copied: list[dict[str, Any]] = []
    for message in messages or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        new = dict(message)
        if isinstance(content, list):
            new["content"] = [
                without_cache_control(b) if isinstance(b, Mapping) else b for b in content
            ]
        copied.append(new)
    return copied


def _ref_mark_message(message: dict[str, Any], marker: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
        return True
    if not isinstance(content, list):
        return False
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if isinstance(block, Mapping) and is_markable(block):
            content[position] = {**block, "cache_control": dict(marker)}
            return True
    return False


def _ref_system_markers(system: Any, ttl: CacheTtl) -> tuple[list[dict[str, Any]], list[int]]:
    blocks = [dict(b) for b in system_blocks(system)]
    scopes: list[CacheScope | None] = []
    for block in blocks:
        marker = block.get("cache_control")
        if isinstance(marker, Mapping):
            scopes.append("global" if marker.get("scope") == "global" else "org")
        else:
            scopes.append(None)
    if not any(
        scope is not None and is_markable(b) for scope, b in zip(scopes, blocks, strict=True)
    ):
        for index in range(len(blocks) - 1, -1, -1):
            if is_markable(blocks[index]):
                scopes[index] = "org"
                break
    marked: list[int] = []
    for index, (block, scope) in enumerate(zip(blocks, scopes, strict=True)):
        block.pop("cache_control", None)
        if scope is not None and is_markable(block):
            block["cache_control"] = get_cache_control(scope, ttl)
            marked.append(index)
    return blocks, marked


def _ref_message_marker_position(flat: list[FlatBlock]) -> int | None:
    for position in range(len(flat) - 1, -1, -1):
        if flat[position].section == "messages" and flat[position].cache_control is not None:
            return position
    return None


def _ref_choose_intermediate(
    flat: list[FlatBlock], previous: int, last: int, lookback: int
) -> int | None:
    high = min(previous + lookback, last - 1)
    target = min(previous + max(1, lookback // 2), high)
    order: list[int] = [*range(target, previous, -1), *range(target + 1, high + 1)]
    for position in order:
        block = flat[position]
        if block.section == "messages" and block.markable:
            return position
    return None


def _ref_fit_budget(
    body: dict[str, Any],
    flat: list[FlatBlock],
    message_position: int | None,
    intermediate: int | None,
    max_breakpoints: int,
) -> list[str]:
    kept = {p for p in (message_position, intermediate) if p is not None}
    system_marked = [
        p for p, b in enumerate(flat) if b.section == "system" and b.cache_control is not None
    ]
    tool_marked = [
        p for p, b in enumerate(flat) if b.section == "tools" and b.cache_control is not None
    ]
    droppable = tool_marked + system_marked
    total = len(kept) + len(droppable)
    dropped: list[str] = []
    while total > max_breakpoints and droppable:
        position = droppable.pop(0)
        block = flat[position]
        if block.section == "tools":
            body["tools"][block.index].pop("cache_control", None)
            dropped.append(f"tools[{block.index}]")
        else:
            body["system"][block.index].pop("cache_control", None)
            dropped.append(f"system[{block.index}]")
        total -= 1
    if total > max_breakpoints and intermediate is not None:
        block = flat[intermediate]
        body["messages"][block.index]["content"][block.block_index].pop("cache_control", None)
        dropped.append(f"messages[{block.index}][{block.block_index}] (lookback bridge)")
    return dropped


def reference_plan(
    request: ProviderRequest,
    *,
    ttl: CacheTtl = "5m",
    prefix_ttl: CacheTtl | None = None,
    skip_cache_write: bool = False,
    previous_message_breakpoint: int | None = None,
    lookback_blocks: int = CACHE_LOOKBACK_BLOCKS,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
    enable_prompt_caching: bool = True,
) -> BreakpointPlan:
    """Every message copied, the request flattened twice (parameters assumed valid)."""
    body: dict[str, Any] = dict(cast(Mapping[str, Any], request))
    tools = [without_cache_control(t) for t in body.get("tools") or [] if isinstance(t, Mapping)]
    if "tools" in body:
        body["tools"] = tools
    messages = _ref_copy_messages(body.get("messages"))
    if "messages" in body:
        body["messages"] = messages
    if not enable_prompt_caching:
        if "system" in body and not isinstance(body["system"], str):
            body["system"] = [without_cache_control(b) for b in system_blocks(body["system"])]
        return BreakpointPlan(cast(ProviderRequest, body), (), None, None)
    marker = get_cache_control(None, ttl)
    prefix = prefix_ttl or ttl
    if body.get("system"):
        blocks, _ = _ref_system_markers(body["system"], prefix)
        body["system"] = blocks
    if tools:
        tools[-1]["cache_control"] = get_cache_control(None, prefix)
    target = len(messages) - (2 if skip_cache_write else 1)
    while target >= 0 and not _ref_mark_message(messages[target], marker):
        target -= 1
    flat = flatten_request(body)
    message_position = _ref_message_marker_position(flat)
    intermediate: int | None = None
    if (
        previous_message_breakpoint is not None
        and message_position is not None
        and message_position - previous_message_breakpoint > lookback_blocks
    ):
        intermediate = _ref_choose_intermediate(
            flat, previous_message_breakpoint, message_position, lookback_blocks
        )
        if intermediate is not None:
            chosen = flat[intermediate]
            message = messages[chosen.index]
            if isinstance(message["content"], str):
                message["content"] = [{"type": "text", "text": message["content"]}]
            content = message["content"]
            content[chosen.block_index] = {
                **content[chosen.block_index],
                "cache_control": dict(marker),
            }
    dropped = _ref_fit_budget(body, flat, message_position, intermediate, max_breakpoints)
    final = flatten_request(body)
    placed = tuple(cache_breakpoint_indices(final))
    return BreakpointPlan(
        request=cast(ProviderRequest, body),
        breakpoints=placed,
        message_breakpoint=_ref_message_marker_position(final),
        intermediate_breakpoint=intermediate if intermediate in placed else None,
        dropped=tuple(dropped),
    )


def same_plan(request: ProviderRequest, **options: Any) -> BreakpointPlan:
    """The plan equals the reference's (which copies what it changes: the input is safe)."""
    plan = plan_cache_breakpoints(request, **options)
    expected = reference_plan(request, **options)
    assert plan == expected
    # The same JSON too (== would take 1 for True, a tuple content for a list...).
    assert canonical_json(plan.request) == canonical_json(expected.request)
    return plan


def assert_same_plan(request: ProviderRequest, **options: Any) -> BreakpointPlan:
    """`same_plan`, and the input is left as it was."""
    before = canonical_json(request)
    plan = same_plan(request, **options)
    assert canonical_json(request) == before, "the input request must not be modified"
    return plan


def assert_same_snapshot(
    detector: PromptCacheBreakDetector, request: ProviderRequest, source: str = "main"
) -> None:
    warm = detector.record_prompt_state(request, query_source=source, now=0)
    assert warm == snapshot_request(request)
    assert warm.message_digests == reference_message_digests(request)


# -- every turn of replayed sessions ---------------------------------------------------------


def _sessions() -> Iterator[Any]:
    yield pytest.param(lambda: demo_transcript(), id="demo")
    yield pytest.param(lambda: load_transcript(FIXTURES / "session_2_1.jsonl"), id="fixture")
    corpus = (
        sorted(
            (p for p in CORPUS.glob("*.jsonl") if "agent-" not in p.name),
            key=lambda p: p.stat().st_size,
        )
        if CORPUS.is_dir()
        else []
    )
    if corpus:  # the largest corpus session (the benchmark's)
        yield pytest.param(lambda: load_transcript(corpus[-1]), id="corpus-largest")


@pytest.mark.parametrize("load", list(_sessions()))
def test_every_replayed_turn_equals_the_from_scratch_result(
    load: Callable[[], Transcript], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request the session plans, and each snapshot its detector takes (with the digests
    of the previous turn reused), equals the from-scratch one; the reuse does happen."""
    plans: list[BreakpointPlan] = []
    shared = [0, 0]  # messages passed through unchanged, messages in all

    real_plan = CacheBreakpointPlanner.plan

    def checked_plan(
        self: CacheBreakpointPlanner, request: ProviderRequest, **options: Any
    ) -> BreakpointPlan:
        """The session's planner (work kept from the previous turn) against the reference."""
        before = canonical_json(request)
        plan = real_plan(self, request, **options)
        options.pop("unchanged_prefix", None)  # the session's hint: no from-scratch twin
        assert plan == same_plan(request, **options)
        plans.append(plan)
        sent = request.get("messages") or []
        out = plan.request.get("messages") or []
        shared[0] += sum(1 for a, b in zip(sent, out, strict=False) if a is b)
        shared[1] += len(sent)
        if len(plans) % 3 == 0:  # the other options, every third turn (the replays are long)
            previous = plans[-2].message_breakpoint  # as a caller passes it: the lookback bridge
            for variant in (
                {"previous_message_breakpoint": previous},
                {"previous_message_breakpoint": 0, "lookback_blocks": 3},
                {"previous_message_breakpoint": 1, "lookback_blocks": 5, "max_breakpoints": 1},
                {"skip_cache_write": True, "ttl": "1h", "prefix_ttl": "1h", "max_breakpoints": 2},
                {"enable_prompt_caching": False},
            ):
                same_plan(request, **{**options, **variant})
        assert canonical_json(request) == before, "the input request must not be modified"
        return plan

    snapshots = [0]
    calls = [0]
    digested = [0, 0]  # messages the detector digested (not reused), messages in all
    real_record = PromptCacheBreakDetector.record_prompt_state
    real_digests = break_detector._message_digests

    def counting_digests(*args: Any) -> Any:
        calls[0] += 1
        return real_digests(*args)

    def checked_record(
        self: PromptCacheBreakDetector, request: ProviderRequest, **options: Any
    ) -> Any:
        before = calls[0]
        warm = real_record(self, request, **options)
        digested[0] += calls[0] - before
        digested[1] += len(warm.message_digests)
        assert warm == snapshot_request(request)
        assert warm.message_digests == reference_message_digests(request)
        snapshots[0] += 1
        return warm

    monkeypatch.setattr(CacheBreakpointPlanner, "plan", checked_plan)
    monkeypatch.setattr(PromptCacheBreakDetector, "record_prompt_state", checked_record)
    monkeypatch.setattr(break_detector, "_message_digests", counting_digests)
    report = replay_session(load(), ReplayOptions(policy=Policy(), baselines=False))
    assert report.calls > 3 and snapshots[0] >= report.calls and len(plans) >= report.calls
    # Incremental for real: most messages are shared by the plan and reused by the detector
    # (a turn digests the messages it appended, the one that lost its marker, and the ones
    # microcompaction copied).
    print(f"shared {shared}, digested {digested}, snapshots {snapshots[0]}")
    assert shared[0] >= shared[1] * 0.75
    assert digested[0] <= digested[1] * 0.25 or digested[1] < 200


# -- generated requests ------------------------------------------------------------------------

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
words = st.text(alphabet="ab \n", min_size=0, max_size=6)
markers = st.sampled_from(
    [
        None,
        {"type": "ephemeral"},
        {"type": "ephemeral", "ttl": "1h"},
        {"type": "ephemeral", "scope": "global"},
        "not a marker",
    ]
)


@st.composite
def blocks(draw: st.DrawFn) -> Any:
    kind = draw(
        st.sampled_from(["text", "text", "tool_use", "tool_result", "thinking", "image", "junk"])
    )
    if kind == "junk":
        return draw(st.sampled_from(["stray string", 7, None]))
    block: dict[str, Any]
    if kind == "text":
        block = {"type": "text", "text": draw(words)}
    elif kind == "tool_use":
        block = {"type": "tool_use", "id": "t", "name": "Read", "input": {"p": draw(words)}}
    elif kind == "tool_result":
        block = {"type": "tool_result", "tool_use_id": "t", "content": draw(words)}
    elif kind == "thinking":
        block = {"type": "thinking", "thinking": draw(words), "signature": "s"}
    else:
        block = {"type": "image", "source": {"type": "base64", "data": "QQ=="}}
    marker = draw(markers)
    if marker is not None:
        block["cache_control"] = marker
    if draw(st.integers(0, 9)) == 0:
        return MappingProxyType(block)  # a Mapping that is not a dict
    return block


@st.composite
def messages(draw: st.DrawFn) -> Any:
    role = draw(st.sampled_from(["user", "assistant", "user", "assistant", "system"]))
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(st.sampled_from(["junk message", None]))
    if shape <= 2:
        content: Any = draw(words)
    elif shape == 3:
        content = draw(st.sampled_from([None, {"type": "text"}, ("a", "b")]))
    else:
        content = draw(st.lists(blocks(), max_size=6))
    message: dict[str, Any] = {"role": role, "content": content}
    if draw(st.integers(0, 9)) == 0:
        del message["content"]
    if draw(st.integers(0, 9)) == 0:
        return MappingProxyType(message)
    return message


@st.composite
def requests(draw: st.DrawFn) -> ProviderRequest:
    body: dict[str, Any] = {"model": "claude-sonnet-4-5"}
    if draw(st.booleans()):
        tools = []
        for index in range(draw(st.integers(0, 5))):
            tool: dict[str, Any] = {"name": f"tool{index}", "input_schema": {"type": "object"}}
            if draw(st.booleans()):
                tool["cache_control"] = {"type": "ephemeral"}
            tools.append(tool)
        body["tools"] = tools
    if draw(st.booleans()):
        system_blocks_: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(0, 4))):
            block: dict[str, Any] = {"type": "text", "text": draw(words)}
            marker = draw(markers)
            if isinstance(marker, dict):
                block["cache_control"] = marker
            system_blocks_.append(block)
        body["system"] = draw(st.one_of(words, st.just(system_blocks_)))
    if draw(st.integers(0, 9)):
        body["messages"] = draw(st.lists(messages(), max_size=14))
    return cast(ProviderRequest, body)


@SETTINGS
@given(
    body=requests(),
    ttl=st.sampled_from(["5m", "1h"]),
    fork=st.booleans(),
    previous=st.one_of(st.none(), st.integers(0, 40)),
    lookback=st.integers(1, 22),
    budget=st.integers(1, 4),
    caching=st.integers(0, 5),
)
def test_generated_plans_equal_the_reference(
    body: ProviderRequest,
    ttl: CacheTtl,
    fork: bool,
    previous: int | None,
    lookback: int,
    budget: int,
    caching: int,
) -> None:
    try:
        expected: Any = reference_plan(
            body,
            ttl=ttl,
            skip_cache_write=fork,
            previous_message_breakpoint=previous,
            lookback_blocks=lookback,
            max_breakpoints=budget,
            enable_prompt_caching=caching > 0,
        )
    except (TypeError, KeyError, AttributeError) as error:  # malformed input: same failure
        expected = type(error)
    options: dict[str, Any] = {
        "ttl": ttl,
        "skip_cache_write": fork,
        "previous_message_breakpoint": previous,
        "lookback_blocks": lookback,
        "max_breakpoints": budget,
        "enable_prompt_caching": caching > 0,
    }
    if isinstance(expected, type):
        with pytest.raises(expected):
            plan_cache_breakpoints(body, **options)
        return
    assert_same_plan(body, **options)


# -- generated request sequences, snapshotted incrementally --------------------------------

EDITS = st.sampled_from(
    [
        "append",  # a new message
        "append_block",  # the last message replaced by a copy with one more block
        "replace_block",  # a block replaced by a new object (as a clear does)
        "copy_list",  # a message's content list copied (same blocks)
        "role",  # a message's role changed
        "stringify",  # a message's content made a string
        "inplace_list",  # a block appended to a content list IN PLACE
        "inplace_swap",  # two blocks of a content list swapped IN PLACE
        "drop",  # messages dropped from the front (a compaction)
        "marker",  # a marker placed on a copy of a block
        "plan",  # the request run through the breakpoint planner
    ]
)


def _edit(request: dict[str, Any], edit: str, draw: Any) -> dict[str, Any]:
    messages_: list[Any] = list(request.get("messages") or [])
    listed = [
        i
        for i, m in enumerate(messages_)
        if isinstance(m, dict) and isinstance(m.get("content"), list)
    ]
    if edit == "append" or not messages_:
        messages_.append(draw(messages()))
    elif edit == "plan":
        # The planner takes the generator's junk messages and blocks without raising (as the
        # reference does), so nothing here is caught: any exception fails the test.
        return dict(plan_cache_breakpoints(cast(ProviderRequest, request)).request)
    elif edit == "drop":
        del messages_[: draw(st.integers(1, len(messages_)))]
    elif edit == "role":
        index = draw(st.integers(0, len(messages_) - 1))
        if isinstance(messages_[index], Mapping):
            old = messages_[index]
            messages_[index] = {**old, "role": "user" if old.get("role") != "user" else "x"}
    elif edit == "stringify":
        index = draw(st.integers(0, len(messages_) - 1))
        if isinstance(messages_[index], Mapping):
            messages_[index] = {**messages_[index], "content": draw(words)}
    elif listed:
        index = draw(st.sampled_from(listed))
        message = messages_[index]
        content = message["content"]
        if edit == "append_block":
            messages_[index] = {**message, "content": [*content, draw(blocks())]}
        elif edit == "copy_list":
            messages_[index] = {**message, "content": list(content)}
        elif edit == "inplace_list":
            content.append(draw(blocks()))
        elif edit == "inplace_swap" and len(content) > 1:
            content[0], content[-1] = content[-1], content[0]
        elif content and edit in ("replace_block", "marker"):
            position = draw(st.integers(0, len(content) - 1))
            block = content[position]
            if isinstance(block, Mapping):
                replaced = list(content)
                if edit == "marker":
                    replaced[position] = {**block, "cache_control": draw(markers)}
                else:
                    replaced[position] = {**block, "text": draw(words)}
                messages_[index] = {**message, "content": replaced}
    return {**request, "messages": messages_}


@SETTINGS
@given(data=st.data(), first=requests(), count=st.integers(1, 12))
def test_incremental_snapshots_equal_snapshots_from_scratch(
    data: st.DataObject, first: ProviderRequest, count: int
) -> None:
    """Whatever happens to the messages between two requests (new objects, edited lists,
    roles, strings, dropped prefixes, markers), the warm snapshot is the cold one."""
    detector = PromptCacheBreakDetector()
    request = cast(dict[str, Any], first)
    assert_same_snapshot(detector, cast(ProviderRequest, request))
    for _ in range(count):
        request = _edit(request, data.draw(EDITS), data.draw)
        assert_same_snapshot(detector, cast(ProviderRequest, request))
        if data.draw(st.integers(0, 9)) == 0:
            detector.notify_compaction("main")


def test_digests_are_reused_only_for_the_same_objects() -> None:
    """An equal but new block is digested again; the same object is not; a list edited in
    place is caught."""
    text = {"type": "text", "text": "hello " * 50}
    tool = {"type": "tool_result", "tool_use_id": "t", "content": "x" * 500}
    detector = PromptCacheBreakDetector()
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> bytes:
        calls.append(args[0])
        return message_block_digest(*args, **kwargs)

    def digested(body: dict[str, Any]) -> int:
        """How many blocks the detector digests for this request (its snapshot checked)."""
        calls.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(break_detector, "message_block_digest", counted)
            warm = detector.record_prompt_state(
                cast(ProviderRequest, body), query_source="main", now=0
            )
        assert warm == snapshot_request(cast(ProviderRequest, body))
        assert warm.message_digests == reference_message_digests(body)
        return len(calls)

    assert digested({"model": "m", "messages": [{"role": "user", "content": [text, tool]}]}) == 2
    # Same objects, new message and list: nothing digested.
    assert digested({"model": "m", "messages": [{"role": "user", "content": [text, tool]}]}) == 0
    # An equal copy of one block: only that block is digested.
    copied: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": [text, dict(tool)]}],
    }
    assert digested(copied) == 1
    # The content list changed in place: caught, the new block digested.
    copied["messages"][0]["content"].append({"type": "text", "text": "more"})
    assert digested(copied) == 1
    # Another role: the first block is digested again (its digest holds the role).
    assert digested({"model": "m", "messages": [{"role": "assistant", "content": [text]}]}) == 1
    # The same string content in a new message: reused.
    assert digested({"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}) == 1
    assert digested({"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}) == 0
    flat = flatten_request(copied)
    assert [block_digest(b) for b in flat] == [reference_block_digest(b) for b in flat]


def test_the_plan_copies_only_what_it_marks() -> None:
    messages_: list[dict[str, Any]] = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": {}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
        {"role": "user", "content": [{"type": "text", "text": "d"}]},
    ]
    request = cast(ProviderRequest, {"model": "m", "messages": messages_})
    plan = assert_same_plan(request)
    out = plan.request["messages"]
    assert [a is b for a, b in zip(out, messages_, strict=True)] == [
        True,
        True,
        False,  # carried a marker: copied without it
        True,
        False,  # the marked message
    ]
    assert out[4]["content"] is not messages_[4]["content"]
