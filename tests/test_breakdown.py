"""`inspect`'s breakdown adds up: rows that sum to the context size, the system prompt +
tools first, each row split into the reported and the estimated part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import FIXTURES, corpus_files
from unbounded.cli import app
from unbounded.inspection import inspect_transcript
from unbounded.model.entries import Entry
from unbounded.tokens.breakdown import (
    MESSAGE_CATEGORIES,
    SYSTEM_AND_TOOLS,
    ContextBreakdown,
    share_out,
)
from unbounded.tokens.estimate import ContextCounter, pad_estimate, rough_token_count
from unbounded.transcripts.loader import load_transcript

runner = CliRunner()


def _usage(prompt: int, output: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": output}


def _rows(breakdown: ContextBreakdown) -> dict[str, tuple[int, int]]:
    return {row.category: (row.reported, row.estimated) for row in breakdown.breakdown().rows}


# -- sharing out ----------------------------------------------------------------------------------


def test_share_out_is_proportional_and_exact() -> None:
    assert share_out(100, {"a": 1, "b": 1, "c": 2}, "z") == {"a": 25, "b": 25, "c": 50}
    assert share_out(10, {"a": 1, "b": 1, "c": 1}, "z") == {"a": 4, "b": 3, "c": 3}
    assert share_out(7, {"a": 0, "b": 0}, "z") == {"z": 7}
    assert share_out(0, {"a": 5}, "z") == {}


@given(
    st.integers(min_value=0, max_value=10**7),
    st.dictionaries(st.sampled_from("abcdefg"), st.integers(min_value=0, max_value=10**6)),
)
def test_share_out_always_adds_up(amount: int, weights: dict[str, int]) -> None:
    shares = share_out(amount, weights, "other")
    assert sum(shares.values()) == amount
    weight_sum = sum(weights.values())
    for key, share in shares.items():
        if weight_sum:
            exact = amount * weights[key] / weight_sum
            assert exact - 1 < share < exact + 1


# -- one pass -------------------------------------------------------------------------------------


def test_the_system_prompt_and_tools_row_is_the_first_call_minus_its_messages() -> None:
    prompt = Entry.user("x" * 4_000)  # 1,000 tokens by length/4
    reply = Entry.assistant([{"type": "text", "text": "y" * 400}], message_id="m1",
                            usage=_usage(21_000, 100))
    tally = ContextBreakdown([prompt, reply])
    rows = _rows(tally)
    # the call reported 21,100 (prompt + output) for 1,100 tokens of messages by length/4
    assert rows[SYSTEM_AND_TOOLS] == (20_000, 0)
    assert rows["user_messages"] == (1_000, 0)
    assert rows["assistant_messages"] == (100, 0)
    assert tally.breakdown().total == tally.counter.total == 21_100


def test_later_messages_share_the_reported_rest_and_the_estimate_follows_the_counter() -> None:
    entries = [
        Entry.user("x" * 4_000),
        Entry.assistant([{"type": "text", "text": "ok"}], message_id="m1",
                        usage=_usage(21_000, 1)),
        Entry.user("please go on " * 100),
        # one response in two lines (parallel tool calls), results between them
        Entry.assistant([{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
                        message_id="m2", usage=_usage(24_000, 50)),
        Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "r" * 8_000}]),
        Entry.assistant([{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}],
                        message_id="m2", usage=_usage(24_000, 50)),
        Entry.user([{"type": "tool_result", "tool_use_id": "t2", "content": "s" * 4_000}]),
    ]
    tally = ContextBreakdown(entries)
    counter = ContextCounter(entries)
    breakdown = tally.breakdown()
    assert breakdown.reported == counter.anchor_tokens == 24_050
    assert breakdown.estimated == counter.estimated_tokens == pad_estimate(2_000 + 1_000)
    rows = _rows(tally)
    # the results after the anchor response's first line are the whole estimate
    assert rows["tool_results"][1] == breakdown.estimated
    assert all(rows[name][1] == 0 for name in MESSAGE_CATEGORIES if name != "tool_results")
    assert rows[SYSTEM_AND_TOOLS] == (21_001 - 1_001, 0)
    assert sum(reported for reported, _ in rows.values()) == breakdown.reported
    assert sum(row.tokens for row in breakdown.rows) == counter.total


def test_without_usage_everything_is_estimated_and_there_is_no_system_row_to_give() -> None:
    entries = [Entry.user("a" * 400), Entry.assistant([{"type": "text", "text": "b" * 800}])]
    breakdown = ContextBreakdown(entries).breakdown()
    assert breakdown.reported == 0
    assert breakdown.estimated == pad_estimate(100 + 200)
    rows = {row.category: row for row in breakdown.rows}
    assert rows[SYSTEM_AND_TOOLS].tokens == 0
    assert rows["user_messages"].estimated + rows["assistant_messages"].estimated == (
        breakdown.estimated
    )
    assert rough_token_count("b" * 800) == 200


def _every_session() -> list[Path]:
    fixtures = [FIXTURES / "session_2_1.jsonl", FIXTURES / "session_1_0.jsonl",
                FIXTURES / "codex_rollout.jsonl", FIXTURES / "swe_agent_v1.traj",
                *sorted((FIXTURES / "sessions").glob("*.jsonl"))]
    return [*fixtures, *corpus_files("*.jsonl"), *corpus_files("*.traj")]


@pytest.mark.parametrize("path", _every_session(), ids=lambda p: p.name)
def test_the_rows_add_up_to_the_context_on_every_session(path: Path) -> None:
    report = inspect_transcript(load_transcript(path))
    breakdown = report.breakdown
    assert sum(row.tokens for row in breakdown.rows) == report.context_tokens
    assert sum(row.reported for row in breakdown.rows) == report.anchored_tokens
    assert sum(row.estimated for row in breakdown.rows) == report.estimated_tokens
    assert all(row.reported >= 0 and row.estimated >= 0 for row in breakdown.rows)
    if report.anchored_tokens:
        system = next(row for row in breakdown.rows if row.category == SYSTEM_AND_TOOLS)
        assert system.reported > 0


@pytest.mark.corpus
def test_a_tool_heavy_session_is_mostly_system_prompt_and_tools() -> None:
    paths = corpus_files("marot-spotter_tool_heavy.jsonl")
    if not paths:
        pytest.skip("corpus file absent")
    report = inspect_transcript(load_transcript(paths[0]))
    rows = {row.category: row for row in report.breakdown.rows}
    # 4 calls and ~2,300 tokens of messages by length/4 against 27,839 reported: the rest is
    # the system prompt and tools (the old table's rows summed to 2,272 of 29,226)
    assert report.context_tokens == 29_226
    assert rows[SYSTEM_AND_TOOLS].tokens > 0.8 * report.context_tokens


def test_inspect_json_and_table_show_rows_that_add_up(session_2_1: Path) -> None:
    result = runner.invoke(app, ["inspect", str(session_2_1), "--json"])
    data = json.loads(result.stdout)
    breakdown = data["breakdown"]
    assert breakdown["total"] == data["context_tokens"]
    assert breakdown["reported"] == data["context_tokens_reported"]
    assert sum(row["tokens"] for row in breakdown["categories"].values()) == breakdown["total"]
    assert next(iter(breakdown["categories"])) == SYSTEM_AND_TOOLS
    table = runner.invoke(app, ["inspect", str(session_2_1)]).stdout
    total_line = next(line for line in table.splitlines() if line.startswith("│ total"))
    assert f"{data['context_tokens']:,}" in total_line
    assert "system prompt + tools" in table
