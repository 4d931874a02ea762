"""Recorded calls held as columns build back the very calls they were made from."""

from __future__ import annotations

import uuid
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from unbounded.model.call_columns import ApiCallColumns, BilledCallColumns
from unbounded.model.content import Usage
from unbounded.model.entries import Entry
from unbounded.model.transcript import ApiCall, BilledCall, indexed_api_calls, responses_billed

_TOKENS = st.integers(min_value=0, max_value=2**40)
_LEAF = st.one_of(
    _TOKENS,
    st.integers(min_value=-(2**70), max_value=2**70),  # beyond 64 bits: kept as it came
    st.booleans(),
    st.none(),
    st.sampled_from(["standard", "priority", ""]),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),  # no shape holds a list: kept as it came
)
_KNOWN = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": _TOKENS,
        "cache_creation_input_tokens": _TOKENS,
        "cache_read_input_tokens": _TOKENS,
        "output_tokens": _TOKENS,
        "cache_creation": st.fixed_dictionaries(
            {},
            optional={"ephemeral_5m_input_tokens": _TOKENS, "ephemeral_1h_input_tokens": _TOKENS},
        ),
        "server_tool_use": st.fixed_dictionaries(
            {}, optional={"web_search_requests": _TOKENS, "web_fetch_requests": _TOKENS}
        ),
        "service_tier": st.sampled_from(["standard", "batch"]),
    },
)
_EXTRA = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.recursive(_LEAF, lambda inner: st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_size=3,
)
USAGES = st.builds(lambda known, extra: cast(Usage, {**known, **extra}), _KNOWN, _EXTRA)
STAMPS = st.one_of(
    st.none(),
    st.datetimes().map(lambda moment: moment.isoformat(timespec="milliseconds") + "Z"),
    st.datetimes().map(lambda moment: moment.isoformat()),  # another form: kept as it came
    st.text(max_size=8),
)
UUIDS = st.one_of(
    st.none(),
    st.uuids().map(str),
    st.uuids().map(lambda value: str(value).upper()),  # not canonical: kept as it came
    st.text(max_size=8),
)
MODELS = st.one_of(st.none(), st.sampled_from(["claude-opus-4-5", "claude-haiku-4-5"]))


def _same(built: Any, made: Any) -> None:
    """Equal, with the usage's keys in the same order at every depth."""
    assert built == made
    assert repr(built) == repr(made)


@st.composite
def _responses(draw: st.DrawFn) -> list[Entry]:
    """Assistant lines of a few responses, the lines of one response together or apart."""
    count = draw(st.integers(min_value=0, max_value=6))
    names = [f"msg_{n:02d}" for n in range(count)]
    order = draw(st.lists(st.sampled_from(names), max_size=12)) if names else []
    entries: list[Entry] = []
    for line, name in enumerate(order, 1):
        data: dict[str, Any] = {
            "type": "assistant",
            "uuid": draw(UUIDS),
            "timestamp": draw(STAMPS),
            "isSidechain": draw(st.booleans()),
            "message": {
                "id": name,
                "role": "assistant",
                "model": draw(MODELS),
                "usage": draw(USAGES),
                "content": [],
            },
        }
        entries.append(Entry({k: v for k, v in data.items() if v is not None}, line))
    return entries


@settings(max_examples=200, deadline=None)
@given(_responses())
def test_thread_calls_built_from_columns_equal_the_calls(entries: list[Entry]) -> None:
    calls = indexed_api_calls(enumerate(entries))
    columns = ApiCallColumns()
    for index, entry in enumerate(entries):
        if entry.usage is not None and entry.message_id is not None:
            columns.add(index, entry.message_id, entry.usage, entry.model, entry.timestamp)
    columns.finish()
    _same(list(columns), calls)
    _same(list(ApiCallColumns.of(calls)), calls)
    assert list(columns.message_ids()) == [call.message_id for call in calls]


@settings(max_examples=200, deadline=None)
@given(_responses(), st.booleans(), st.sets(st.sampled_from(["msg_00", "msg_02"])))
def test_billed_calls_built_from_columns_equal_the_calls(
    entries: list[Entry], sidechains: bool, thread_ids: set[str]
) -> None:
    calls = responses_billed(entries, sidechains=sidechains, thread_ids=thread_ids)
    columns = BilledCallColumns()
    for entry in entries:
        usage, message_id = entry.usage, entry.message_id
        if (entry.is_sidechain and not sidechains) or usage is None or message_id is None:
            continue
        place = "thread" if message_id in thread_ids else "branch"
        columns.add(message_id, usage, entry.model, entry.timestamp, entry.line, place, entry.uuid)
    columns.finish()
    _same(list(columns), calls)
    _same(list(BilledCallColumns.of(calls)), calls)
    assert [columns.line(row) for row in range(len(columns))] == [c.line for c in calls]


def test_a_side_call_without_a_line_keeps_its_place_and_no_line() -> None:
    side = BilledCall("resp_1", {"input_tokens": 5}, None, None, None, "side", None)
    _same(list(BilledCallColumns.of([side])), [side])


def test_a_later_line_of_the_last_call_replaces_its_usage_in_place() -> None:
    # The lines of one response come together: the last line's usage is kept, and the
    # earlier line's integers are not left behind in the flat column.
    columns = ApiCallColumns()
    columns.add(0, "msg_a", {"input_tokens": 1, "output_tokens": 2}, "m", None)
    columns.add(1, "msg_b", {"input_tokens": 3, "output_tokens": 4}, "m", None)
    columns.add(2, "msg_b", {"input_tokens": 3, "output_tokens": 9}, "m", None)
    assert [call.usage for call in columns] == [
        {"input_tokens": 1, "output_tokens": 2},
        {"input_tokens": 3, "output_tokens": 9},
    ]
    assert len(columns._ints) == 4


def test_calls_whose_lines_interleave_keep_each_its_own_last_usage() -> None:
    columns = ApiCallColumns()
    columns.add(0, "msg_a", {"output_tokens": 2}, None, None)
    columns.add(1, "msg_b", {"output_tokens": 4}, None, None)
    columns.add(2, "msg_a", {"output_tokens": 7, "input_tokens": 1}, None, None)
    columns.add(3, "msg_b", {"output_tokens": 5}, None, None)
    assert [(c.first, c.last, c.usage) for c in columns] == [
        (0, 2, {"output_tokens": 7, "input_tokens": 1}),
        (1, 3, {"output_tokens": 5}),
    ]


def test_a_canonical_timestamp_and_uuid_are_held_as_numbers() -> None:
    stamp, leaf = "2025-03-01T12:34:56.789Z", str(uuid.uuid4())
    columns = BilledCallColumns()
    columns.add("msg_a", {"output_tokens": 1}, None, stamp, 3, "thread", leaf)
    columns.finish()
    assert columns._loose == {}
    assert (columns[0].timestamp, columns[0].uuid) == (stamp, leaf)


def test_calls_are_indexed_like_a_list() -> None:
    calls = [ApiCall(f"msg_{n}", n, n, {"output_tokens": n}, None, None) for n in range(4)]
    columns = ApiCallColumns.of(calls)
    assert (columns[-1], columns[1:3], len(columns)) == (calls[-1], calls[1:3], 4)


def test_a_timestamp_or_uuid_that_would_not_read_back_the_same_is_kept_as_it_came() -> None:
    odd = ["2025-01-01T24:00:00.000Z", "2025-02-30T00:00:00.000Z", "2025-01-01T00:60:00.000Z"]
    columns = BilledCallColumns()
    for n, stamp in enumerate(odd):
        columns.add(
            f"msg_{n}", {}, None, stamp, n, "thread", "A" * 8 + "-0000-0000-0000-" + "0" * 12
        )
    columns.finish()
    assert [(call.timestamp, call.uuid) for call in columns] == [
        (stamp, "A" * 8 + "-0000-0000-0000-" + "0" * 12) for stamp in odd
    ]
    assert sorted(key for _, key in columns._loose) == ["timestamp"] * 3 + ["uuid"] * 3
