"""Rules of the fidelity simulation (`caching/fidelity.py`) that the mutation check found no
test holding. A recorded usage's cache writes are read per TTL: the 5m/1h split when the
recording gives one (what it leaves unsplit goes under the call's TTL), else all under it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from recorded_calls import MODEL, START, recorded_time, recorded_usage, tool_call_session

from conftest import FIXTURES
from unbounded import load_transcript
from unbounded.caching.fidelity import (
    RecordedUsage,
    _calibrate,
    _opaque_system,
    _Place,
    _views,
    prefix_change_events,
    recorded_cost_usd,
    simulate_recorded_session,
)
from unbounded.catalog import load_model_table
from unbounded.model.entries import Entry
from unbounded.model.transcript import Transcript


def _writes(usage: dict[str, Any], ttl: str) -> tuple[int, int]:
    recorded = RecordedUsage.from_usage(usage, ttl)  # type: ignore[arg-type]
    return recorded.cache_creation_5m_input_tokens, recorded.cache_creation_1h_input_tokens


@pytest.mark.parametrize(
    ("split", "ttl", "expected"),
    [
        ({"ephemeral_5m_input_tokens": 100}, "1h", (100, 0)),  # one key is a split
        ({"ephemeral_1h_input_tokens": 100}, "5m", (0, 100)),
        ({"ephemeral_5m_input_tokens": 60, "ephemeral_1h_input_tokens": 40}, "1h", (60, 40)),
        ({"ephemeral_5m_input_tokens": 60, "ephemeral_1h_input_tokens": 40}, "5m", (60, 40)),
        ({"ephemeral_5m_input_tokens": None, "ephemeral_1h_input_tokens": 100}, "5m", (0, 100)),
    ],
)
def test_a_recorded_split_puts_each_write_under_its_own_ttl(
    split: dict[str, Any], ttl: str, expected: tuple[int, int]
) -> None:
    assert _writes({"cache_creation_input_tokens": 100, "cache_creation": split}, ttl) == expected


@pytest.mark.parametrize(
    ("creation", "ttl", "expected"),
    [(150, "1h", (60, 90)), (150, "5m", (110, 40)), (101, "1h", (60, 41)), (101, "5m", (61, 40))],
)
def test_writes_the_split_leaves_out_go_under_the_call_s_ttl(
    creation: int, ttl: str, expected: tuple[int, int]
) -> None:
    split = {"ephemeral_5m_input_tokens": 60, "ephemeral_1h_input_tokens": 40}
    assert (
        _writes({"cache_creation_input_tokens": creation, "cache_creation": split}, ttl) == expected
    )


@pytest.mark.parametrize("split", [None, {}, {"other": 5}])
@pytest.mark.parametrize(("ttl", "expected"), [("1h", (0, 100)), ("5m", (100, 0))])
def test_writes_without_a_split_go_under_the_call_s_ttl(
    split: dict[str, Any] | None, ttl: str, expected: tuple[int, int]
) -> None:
    assert _writes({"cache_creation_input_tokens": 100, "cache_creation": split}, ttl) == expected


def test_a_count_the_usage_leaves_out_or_null_is_zero() -> None:
    recorded = RecordedUsage.from_usage({"input_tokens": None, "output_tokens": 7}, "5m")
    assert recorded == RecordedUsage(0, 0, 0, 0, 7)
    assert recorded.prompt_tokens == 0
    assert RecordedUsage.from_usage({"input_tokens": 5}, "1h") == RecordedUsage(5, 0, 0, 0, 0)


def _session(calls: int = 4) -> Transcript:
    """`calls` tool calls 30 s apart, each record given its file line."""
    transcript = tool_call_session(
        [(30 * n, 0 if n == 0 else 5_000 + 200 * n, 5_000 if n == 0 else 200) for n in range(calls)]
    )
    for line, entry in enumerate(transcript.entries, 1):
        entry.line = line
    return transcript


def test_the_report_s_calls_read_by_position_and_refuse_past_either_end() -> None:
    calls = simulate_recorded_session(_session()).calls
    every = list(calls)
    assert len(every) == 4 and [c.index for c in every] == [0, 1, 2, 3]
    assert calls[0] == every[0] and calls[-1] == every[3] and calls[-4] == every[0]
    for position in (4, -5):
        with pytest.raises(IndexError, match=f"fidelity call {position} out of range"):
            calls[position]


def test_a_slice_of_the_calls_slices_again_and_equals_the_same_calls() -> None:
    calls = simulate_recorded_session(_session()).calls
    every = list(calls)
    assert calls[1:] == every[1:] and calls[1:] == tuple(every[1:])
    assert calls[1:] != every[:-1] and calls[1:] != every
    assert calls[1:][1:] == every[2:] and calls[1:][::2] == every[1::2]
    assert calls[1:][-1] == every[-1]
    with pytest.raises(IndexError, match="fidelity call 3 out of range"):
        calls[1:][3]
    # Neither the calls nor a slice of them equals a string or a number (no error either).
    for other in ("abc", 4, None):
        assert calls != other and calls[1:] != other
        assert not calls == other and not calls[1:] == other  # noqa: SIM201


def test_a_session_without_calls_reports_zeros() -> None:
    report = simulate_recorded_session(Transcript(entries=[], format="claude-code"))
    assert (report.compactions, report.judged_from, report.untimed_calls) == (0, 0, 0)
    summary = report.to_dict()
    assert (summary["calls"], summary["compactions"], summary["judged_from"]) == (0, 0, 0)
    assert summary["untimed_calls"] == 0 and summary["per_call"] == []
    assert (report.prefix_tokens, report.warm_prefix_tokens) == (0, 0)


def test_the_summary_gives_the_scale_to_four_decimals_and_shares_to_five() -> None:
    report = simulate_recorded_session(_session())
    summary = replace(
        report, scale=1.234567, recorded_cache_read_share=0.1234567, simulated_cache_read_share=0.5
    ).to_dict()
    assert summary["scale"] == 1.2346
    assert summary["recorded_cache_read_share"] == 0.12346
    assert summary["simulated_cache_read_share"] == 0.5
    assert summary["share_error"] == 0.37654
    summary = replace(report, simulated_cache_read_share=0.7654321).to_dict()
    assert summary["simulated_cache_read_share"] == 0.76543


def test_each_request_starts_at_the_record_before_its_response() -> None:
    report = simulate_recorded_session(_session())
    assert report.untimed_calls == 0
    # The user note is written 1 s before each response (the prompt before the first).
    assert [c.time - START.timestamp() for c in report.calls] == [-1.0, 29.0, 59.0, 89.0]


def test_a_call_without_a_time_follows_the_call_before_at_once() -> None:
    transcript = _session()
    untimed = [e for e in transcript.entries if e.message_id == "msg_2"]
    for entry in transcript.entries[transcript.entries.index(untimed[0]) - 1 :][:2]:
        del entry.data["timestamp"]  # the note before the response and the response
    report = simulate_recorded_session(transcript)
    assert report.untimed_calls == 1
    assert [c.time - START.timestamp() for c in report.calls] == [-1.0, 29.0, 29.0, 89.0]


def test_the_calls_of_a_rewound_branch_are_simulated_in_file_order_on_the_branch() -> None:
    transcript = load_transcript(FIXTURES / "sessions" / "rewound.jsonl")
    billed = transcript.billed_calls()
    assert [call.place for call in billed].count("branch") == 3  # what this covers
    report = simulate_recorded_session(transcript)
    assert [c.recorded for c in report.calls] == [
        RecordedUsage.from_usage(call.usage, "5m") for call in billed
    ]
    times = [c.time for c in report.calls]
    assert times == sorted(times) and len(set(times)) == len(times)
    prompts = [c.simulated.prompt_tokens for c in report.calls]
    # The branch goes on from call 5's conversation and reads it from the cache; back on the
    # thread after the rewind, call 9 sends less than the abandoned branch's last call.
    assert prompts[5] < prompts[6] < prompts[7] < prompts[8]
    assert report.calls[6].simulated.cache_read_input_tokens == prompts[5]
    assert prompts[9] < prompts[8] and prompts[5] < prompts[9]


def _with_side_calls(lines: list[int | None]) -> Transcript:
    transcript = _session()
    transcript.meta["side_calls"] = [
        {
            "usage": {"input_tokens": 9_000, "output_tokens": 300},
            "model": MODEL,
            "timestamp": recorded_time(10 + n),
            "line": line,
        }
        for n, line in enumerate(lines)
    ]
    return transcript


def test_a_side_call_stands_before_the_first_record_written_after_it() -> None:
    # Line 5 is call 1's response: the side call sends the view with it, before its result.
    report = simulate_recorded_session(_with_side_calls([5]))
    assert [c.recorded.input_tokens for c in report.calls] == [3, 3, 9_000, 3, 3]
    before, side, after = report.calls[1:4]
    assert side.simulated.cache_read_input_tokens == before.simulated.prompt_tokens
    assert before.simulated.prompt_tokens < side.simulated.prompt_tokens
    assert side.simulated.prompt_tokens < after.simulated.prompt_tokens
    assert side.time == before.time  # written at 10 s, it cannot start before call 1


def test_a_side_call_without_a_line_goes_last_with_the_whole_conversation() -> None:
    report = simulate_recorded_session(_with_side_calls([None]))
    assert [c.recorded.input_tokens for c in report.calls] == [3, 3, 3, 3, 9_000]
    last, side = report.calls[3:]
    assert side.simulated.cache_read_input_tokens == last.simulated.prompt_tokens
    assert last.simulated.prompt_tokens < side.simulated.prompt_tokens


def test_the_summary_gives_costs_to_six_decimals() -> None:
    report = simulate_recorded_session(_session())
    summary = replace(report, recorded_cost_usd=0.123456789, simulated_cost_usd=0.98765432)
    assert summary.to_dict()["recorded_cost_usd"] == 0.123457
    assert summary.to_dict()["simulated_cost_usd"] == 0.987654
    assert replace(report, recorded_cost_usd=None).to_dict()["recorded_cost_usd"] is None


def _ttl_session(splits: list[dict[str, int] | None]) -> Transcript:
    """One call per split (its cache writes at 5m and 1h; None: no split recorded)."""
    transcript = _session(len(splits))
    responses = [e for e in transcript.entries if e.type == "assistant"]
    for response, split in zip(responses, splits, strict=True):
        usage = response.data["message"]["usage"]
        if split is None:
            usage.pop("cache_creation")
        else:
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": split.get("5m", 0),
                "ephemeral_1h_input_tokens": split.get("1h", 0),
            }
            usage["cache_creation_input_tokens"] = sum(split.values())
    return transcript


@pytest.mark.parametrize(
    ("splits", "ttls"),
    [
        # A call keeps the TTL it wrote most of...
        ([{"1h": 900}, {"5m": 300}, {"1h": 200, "5m": 100}], ["1h", "5m", "1h"]),
        # ...and one that wrote nothing, or recorded no split, keeps the call before's.
        ([{"1h": 900}, {}, None], ["1h", "1h", "1h"]),
        ([{"5m": 900}, {}, None], ["5m", "5m", "5m"]),
        # Calls before the first write take the session's: the TTL written most over all.
        ([{}, {"1h": 900}, {"5m": 300}], ["1h", "1h", "5m"]),
        ([{}, {"5m": 900}, {"1h": 300}], ["5m", "5m", "1h"]),
    ],
)
def test_each_call_simulates_the_ttl_it_recorded(
    splits: list[dict[str, int] | None], ttls: list[str]
) -> None:
    report = simulate_recorded_session(_ttl_session(splits))
    assert [c.ttl for c in report.calls] == ttls


def test_held_out_calls_keep_the_ttl_of_the_last_fitted_call() -> None:
    splits: list[dict[str, int] | None] = [{"5m": 900}, {"1h": 300}, {"5m": 300}, {"5m": 300}]
    report = simulate_recorded_session(_ttl_session(splits), fit_calls=2)
    assert [c.ttl for c in report.calls] == ["5m", "1h", "1h", "1h"]
    report = simulate_recorded_session(_ttl_session(splits), fit_calls=1)
    assert report.judged_from == 1 and [c.ttl for c in report.calls] == ["5m"] * 4


def test_one_hour_writes_are_priced_unless_the_model_has_no_such_tier() -> None:
    sonnet = load_model_table().get(MODEL)
    splits: list[dict[str, int] | None] = [{"1h": 900}, {"1h": 300}, {"5m": 300}]
    report = simulate_recorded_session(_ttl_session(splits), sonnet)
    recorded = [c.recorded for c in report.calls]
    assert report.recorded_cost_usd is not None
    assert report.recorded_cost_usd == recorded_cost_usd(sonnet, recorded) > 0
    openai = load_model_table().get("gpt-4o")
    assert openai.cache_write_1h_multiplier is None  # what this covers
    assert simulate_recorded_session(_ttl_session(splits), openai).recorded_cost_usd is None
    assert recorded_cost_usd(openai, recorded) is None
    five = [c.recorded for c in simulate_recorded_session(_ttl_session([{"5m": 9}] * 2)).calls]
    assert recorded_cost_usd(openai, five) == sum(
        recorded_cost_usd(openai, [usage]) or 0.0 for usage in five
    )
    assert recorded_cost_usd(openai, five) is not None


@pytest.mark.parametrize(
    ("prompts", "estimates", "scale"),
    [
        ([1_000, 3_000], [100, 1_100], 2.0),
        ([1_000, 1_001], [100, 104], 0.25),  # clamped below
        ([1_000, 1_003], [100, 101], 3.0),  # one estimated token
        ([1_000, 9_000], [100, 101], 4.0),  # clamped above
        ([1_000, 900], [100, 300], 1.0),  # prompts that shrink: nothing to fit
        ([1_000, 1_000], [100, 300], 1.0),
        ([1_000, 3_000], [100, 100], 1.0),  # estimates that do not grow
        ([1_000, 3_000], [100, 50], 1.0),
        ([1_000], [100], 1.0),
    ],
)
def test_the_scale_fits_prompt_growth_to_estimate_growth(
    prompts: list[int], estimates: list[int], scale: float
) -> None:
    """The module's rule: k = sum(prompt_i - prompt_0) / sum(estimate_i - estimate_0),
    clamped to [0.25, 4], and 1 when there is nothing to fit."""
    assert _calibrate(prompts, estimates) == scale


def test_a_first_call_that_read_one_token_sends_it_in_its_prefix() -> None:
    report = simulate_recorded_session(_session_reading(1))
    assert report.warm_prefix_tokens == 1  # too short to cache, and still sent
    assert [c.simulated.prompt_tokens for c in report.calls] == [
        c.recorded.prompt_tokens for c in report.calls
    ]


def _session_reading(read: int, models: list[str] | None = None) -> Transcript:
    calls = [(0.0, read, 6_000), (30.0, read + 6_000, 300), (60.0, read + 6_300, 300)]
    return tool_call_session(calls, models=models)


def test_a_warm_start_is_cached_for_the_first_call_s_model_before_it() -> None:
    other = "claude-opus-4-6"
    for models in (None, [MODEL, other, other]):
        # Over the largest model's shortest cacheable prefix (the session is priced as its
        # last model's, Opus).
        report = simulate_recorded_session(_session_reading(5_000, models))
        assert report.warm_prefix_tokens == 5_000
        assert report.calls[0].simulated.cache_read_input_tokens == 5_000


def test_each_opaque_part_of_the_prefix_of_any_size_is_a_block() -> None:
    blocks, sizes = _opaque_system(1, 1, 3, "1h")
    assert len(blocks) == 2 and sorted(sizes.values()) == [1, 1]
    assert all(block["cache_control"].get("ttl") == "1h" for block in blocks)
    assert _opaque_system(0, 0, 0, "5m") == ([], {})


def test_a_prefix_the_messages_outweigh_is_zero() -> None:
    # The first call recorded fewer tokens than its messages are estimated at.
    report = simulate_recorded_session(tool_call_session([(0, 0, 10), (30, 10, 10)]))
    assert report.prefix_tokens == 0 and report.warm_prefix_tokens == 0


def test_an_untimed_first_call_starts_at_time_zero() -> None:
    transcript = _session()
    for entry in transcript.entries[:2]:  # the prompt and the first response
        del entry.data["timestamp"]
    report = simulate_recorded_session(transcript)
    assert report.untimed_calls == 1
    assert [c.time - START.timestamp() for c in report.calls][1:] == [29.0, 59.0, 89.0]
    assert report.calls[0].time == 0.0


def test_a_model_change_at_the_second_call_changes_the_prefix() -> None:
    other = "claude-opus-4-6"
    report = simulate_recorded_session(_session_reading(0, [MODEL, other, other]))
    assert report.prefix_changes == (f"call 1: model changed ({MODEL} -> {other})",)
    assert [c.prefix_changed for c in report.calls] == [False, True, False]


def test_mcp_changes_are_read_from_a_record_s_own_text_or_its_message_s_text_blocks() -> None:
    command = Entry.user("<command-name>/mcp</command-name>")
    as_blocks = Entry.user([{"type": "text", "text": "<local-command-stdout>Reconnected x."}])
    assert prefix_change_events([command, as_blocks]) == ["mcp servers changed (/mcp)"]
    # A system record keeps its text in its own `content`, not in a message.
    system = Entry({"type": "system", "content": "<local-command-stdout>Disconnected y."})
    assert prefix_change_events([command, system]) == ["mcp servers changed (/mcp)"]
    as_string = Entry.user("<local-command-stdout>Enabled z.</local-command-stdout>")
    assert prefix_change_events([command, as_string]) == ["mcp servers changed (/mcp)"]


def test_an_mcp_change_right_after_a_response_changes_the_next_call_s_prefix() -> None:
    def answer(n: int, seconds: float) -> Entry:
        return Entry.assistant(
            [{"type": "text", "text": f"answer {n}"}],
            message_id=f"msg_{n}",
            model=MODEL,
            usage=recorded_usage(6_000 * n, 6_000),
            timestamp=recorded_time(seconds),
        )

    entries = [
        Entry.user("Please fix the bug. " * 50, timestamp=recorded_time(-1)),
        answer(0, 0),
        Entry.user("<command-name>/mcp</command-name>", timestamp=recorded_time(5)),
        Entry.user("<local-command-stdout>Reconnected.</local-command-stdout>"),
        Entry.user("go on", timestamp=recorded_time(9)),
        answer(1, 10),
    ]
    report = simulate_recorded_session(Transcript(entries=entries, format="claude-code"))
    assert report.prefix_changes == ("call 1: mcp servers changed (/mcp)",)


def test_a_view_after_going_back_in_its_conversation_has_no_boundary_before_it() -> None:
    chain = [
        Entry.user("first question"),
        Entry.assistant([{"type": "text", "text": "first answer"}]),
        Entry.user("second question"),
        Entry.assistant([{"type": "text", "text": "second answer"}]),
    ]
    calls = [_Place(chain, 3), _Place(chain, 1), _Place(chain, 3)]
    assert [boundary for boundary, _ in _views(calls)] == [-1, -1, -1]


def test_only_what_the_first_call_read_is_cached_before_the_session() -> None:
    # A prefix of 5,001 tokens of which the first call read 5,000: the last token is not
    # cached before it, even when it is a block of its own.
    transcript = tool_call_session([(0, 5_000, 73), (30, 5_073, 300), (60, 5_373, 300)])
    report = simulate_recorded_session(transcript)
    assert (report.prefix_tokens, report.warm_prefix_tokens) == (5_001, 5_000)
    assert report.calls[0].simulated.cache_read_input_tokens == 5_000


def test_the_warm_start_is_cached_with_the_first_call_s_ttl() -> None:
    # Cached for 5 minutes as the first call wrote: gone 10 minutes later, when the second
    # call (writing for an hour) comes.
    calls = [(0.0, 5_000, 6_000), (600.0, 0, 11_400), (630.0, 11_400, 300)]
    report = simulate_recorded_session(tool_call_session(calls, ttls=["5m", "1h", "1h"]))
    assert report.warm_prefix_tokens == 5_000
    assert [c.ttl for c in report.calls] == ["5m", "1h", "1h"]
    assert report.calls[0].simulated.cache_read_input_tokens == 5_000
    assert report.calls[1].simulated.cache_read_input_tokens == 0


def test_a_side_call_before_the_first_call_on_the_thread_is_simulated_first() -> None:
    report = simulate_recorded_session(_with_side_calls([1]))
    assert [c.recorded.input_tokens for c in report.calls] == [9_000, 3, 3, 3, 3]
    assert report.prefix_changes == ()
