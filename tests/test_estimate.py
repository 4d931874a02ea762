"""Usage-anchored token estimation (tokens/estimate.py): one behaviour per test."""

from __future__ import annotations

from typing import Any

import pytest

from unbounded.model.content import usage_context_total
from unbounded.model.entries import Entry
from unbounded.tokens.estimate import (
    TOKENS_PER_IMAGE,
    ContextCounter,
    block_tokens,
    content_tokens,
    entry_tokens,
    estimate_messages_tokens,
    last_usage_tokens,
    pad_estimate,
    rough_token_count,
    token_count_with_estimation,
    tool_result_tokens,
)

# -- builders ------------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(tool_id: str, name: str = "Bash", inputs: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": inputs or {}}


def tool_result(tool_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}
DOCUMENT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}

U1 = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 200,
    "cache_read_input_tokens": 5_000,
    "output_tokens": 30,
}
U2 = {**U1, "output_tokens": 60}
U3 = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 1_000,
    "cache_read_input_tokens": 6_000,
    "output_tokens": 3,
}


def user(content: Any) -> Entry:
    return Entry.user(content)


def assistant(*blocks: dict[str, Any], mid: str, usage: dict[str, Any] | None = None) -> Entry:
    return Entry.assistant(list(blocks), message_id=mid, usage=usage)


def result_entry(tool_id: str, chars: int) -> Entry:
    return Entry.user([tool_result(tool_id, "r" * chars)])


def api_error() -> Entry:
    return Entry.assistant(
        [text("API Error: Request was aborted." * 20)],
        message_id="msg_err",
        model="<synthetic>",
        usage={"input_tokens": 0, "output_tokens": 0},
        extra={"isApiErrorMessage": True},
    )


# -- rough counts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "tokens"),
    [(0, 0), (1, 0), (3, 1), (4, 1), (5, 1), (6, 2), (7, 2), (8, 2), (9, 2), (11, 3), (400, 100)],
)
def test_rough_token_count_is_length_over_four_rounded(chars: int, tokens: int) -> None:
    assert rough_token_count("x" * chars) == tokens


@pytest.mark.parametrize(("chars", "tokens"), [(2, 1), (10, 3), (18, 5)])
def test_rough_token_count_rounds_halves_up_like_math_round(chars: int, tokens: int) -> None:
    # Seed 002 approximateTokenCount is Math.round(length / 4): halves go up, not to even.
    assert rough_token_count("x" * chars) == tokens


def test_rough_token_count_counts_characters_not_bytes() -> None:
    assert rough_token_count("é" * 8) == 2


def test_text_block_tokens() -> None:
    assert block_tokens(text("a" * 40)) == 10


def test_image_block_is_2000() -> None:
    assert TOKENS_PER_IMAGE == 2_000
    assert block_tokens(IMAGE) == 2_000


def test_document_block_is_2000() -> None:
    assert block_tokens(DOCUMENT) == 2_000


def test_tool_use_is_name_plus_json_input() -> None:
    block = tool_use("t1", "Bash", {"command": "ls -la", "timeout": 5})
    json_input = '{"command":"ls -la","timeout":5}'
    assert len("Bash") + len(json_input) == 36
    assert block_tokens(block) == 9


def test_tool_use_length_rounds_halves_up() -> None:
    assert block_tokens(tool_use("t1", "abc", {"k": 1})) == 3  # 3 + len('{"k":1}') = 10


def test_tool_use_ignores_the_id() -> None:
    short = tool_use("t", "Read", {"path": "/a"})
    long = tool_use("toolu_" + "x" * 200, "Read", {"path": "/a"})
    assert block_tokens(short) == block_tokens(long)


def test_tool_use_non_ascii_input_counts_characters() -> None:
    block = tool_use("t1", "W", {"c": "日本語" * 16})  # JSON: {"c":"...48 chars..."} = 56 chars
    assert block_tokens(block) == 14  # (1 + 56) / 4 rounded; UTF-8 bytes would give 38


def test_tool_result_with_string_content() -> None:
    assert block_tokens(tool_result("t1", "x" * 80)) == 20


def test_tool_result_with_list_content_and_image() -> None:
    block = tool_result("t1", [text("x" * 80), IMAGE, text("y" * 40)])
    assert tool_result_tokens(block) == 20 + 2_000 + 10
    assert block_tokens(block) == 2_030


def test_tool_result_with_document_inside() -> None:
    assert block_tokens(tool_result("t1", [DOCUMENT])) == 2_000


def test_tool_result_without_content_is_zero() -> None:
    assert block_tokens({"type": "tool_result", "tool_use_id": "t1"}) == 0
    assert block_tokens(tool_result("t1", "")) == 0
    assert block_tokens(tool_result("t1", [])) == 0


def test_content_tokens_of_string_and_list() -> None:
    assert content_tokens("x" * 40) == 10
    assert content_tokens([text("x" * 40), IMAGE, tool_use("t", "ab", {"k": 1})]) == (
        10 + 2_000 + 2  # (2 + 7) / 4
    )


@pytest.mark.parametrize(
    ("raw", "padded"), [(0, 0), (1, 2), (2, 3), (3, 4), (4, 6), (299, 399), (300, 400), (301, 402)]
)
def test_padding_is_ceil_four_thirds(raw: int, padded: int) -> None:
    assert pad_estimate(raw) == padded


def test_estimate_messages_tokens_pads_the_sum() -> None:
    messages = [{"role": "user", "content": "x" * 4}, {"role": "assistant", "content": "y" * 4}]
    assert estimate_messages_tokens(messages) == pad_estimate(2) == 3


def test_entry_tokens_of_records_never_sent_is_zero() -> None:
    assert entry_tokens(Entry({"type": "progress", "data": {"x": "y" * 400}})) == 0
    assert entry_tokens(Entry({"type": "system", "content": "z" * 400})) == 0


def test_attachment_tokens_are_its_rendered_reminder() -> None:
    entry = Entry.attachment_record({"type": "text", "content": "a" * 100})
    rendered = "<system-reminder>\n" + "a" * 100 + "\n</system-reminder>"
    assert entry_tokens(entry) == rough_token_count(rendered)


# -- anchoring ------------------------------------------------------------------------------


def test_usage_total_adds_all_four_fields() -> None:
    assert usage_context_total(U1) == 5_240


def test_total_is_last_usage_plus_padded_estimate_after_it() -> None:
    entries = [
        user("q" * 4_000),
        assistant(text("answer"), mid="A", usage=U1),
        user("p" * 400),
        Entry.attachment_record({"type": "text", "content": "c" * 200}),
    ]
    after = rough_token_count("p" * 400) + entry_tokens(entries[3])
    assert token_count_with_estimation(entries) == 5_240 + pad_estimate(after)


def test_usage_alone_is_exact() -> None:
    entries = [user("q" * 4_000), assistant(text("answer"), mid="A", usage=U1)]
    assert token_count_with_estimation(entries) == 5_240
    assert last_usage_tokens(entries) == 5_240


def test_walk_back_to_the_first_line_of_an_interleaved_response() -> None:
    entries = [
        user("go"),
        assistant(text("z" * 800), tool_use("t1"), mid="A", usage=U1),
        result_entry("t1", 4_000),  # 1,000 tokens, between the lines of A
        assistant(text("w" * 800), tool_use("t2"), mid="A", usage=U2),
        result_entry("t2", 400),  # 100 tokens
    ]
    # U2's total, plus r1 and r2; the assistant lines of A are in U2's output already.
    assert token_count_with_estimation(entries) == usage_context_total(U2) + pad_estimate(1_100)
    assert usage_context_total(U2) + pad_estimate(1_100) == 5_270 + 1_467


def test_anchor_response_lines_without_usage_add_nothing() -> None:
    entries = [
        user("go"),
        assistant(tool_use("t1"), mid="A", usage=U1),
        result_entry("t1", 400),
        assistant(text("w" * 8_000), mid="A"),
    ]
    assert token_count_with_estimation(entries) == 5_240 + pad_estimate(100)


def test_a_new_response_id_resets_the_estimate() -> None:
    entries = [
        user("go"),
        assistant(tool_use("t1"), mid="A", usage=U1),
        result_entry("t1", 4_000),
        assistant(text("done"), mid="B", usage=U3),
    ]
    assert token_count_with_estimation(entries) == usage_context_total(U3)
    entries.append(user("q" * 40))
    assert token_count_with_estimation(entries) == usage_context_total(U3) + pad_estimate(10)


def test_no_usage_at_all_estimates_everything() -> None:
    entries = [
        user("q" * 400),
        assistant(text("a" * 80), tool_use("t1", "ab", {"k": 1}), mid="A"),
        Entry.user([tool_result("t1", [text("x" * 40), IMAGE])]),
        Entry({"type": "progress", "data": {"big": "p" * 4_000}}),
        Entry.attachment_record({"type": "text", "content": "c" * 200}),
    ]
    raw = 100 + 20 + 2 + 10 + 2_000 + entry_tokens(entries[4])
    counter = ContextCounter(entries)
    assert not counter.anchored
    assert counter.anchor_tokens == 0
    assert counter.total == token_count_with_estimation(entries) == pad_estimate(raw)


def test_synthetic_error_has_no_usage_and_adds_nothing() -> None:
    error = api_error()
    assert error.usage is None
    assert entry_tokens(error) == 0
    base = [user("go"), assistant(text("hi"), mid="A", usage=U1), user("x" * 40)]
    assert token_count_with_estimation([*base, error]) == token_count_with_estimation(base)
    assert token_count_with_estimation([*base, error]) == 5_240 + pad_estimate(10)


def test_synthetic_error_does_not_move_the_anchor() -> None:
    entries = [user("go"), assistant(text("hi"), mid="A", usage=U1), api_error()]
    counter = ContextCounter(entries)
    assert counter.anchored and counter.anchor_tokens == 5_240


def test_counter_parts() -> None:
    counter = ContextCounter([user("go"), assistant(text("hi"), mid="A", usage=U1), user("x" * 40)])
    assert counter.anchored
    assert counter.anchor_tokens == 5_240
    assert counter.estimated_tokens == pad_estimate(10)
    assert counter.total == counter.anchor_tokens + counter.estimated_tokens
    assert counter.entries_seen == 3


def test_counter_appended_one_by_one_equals_batch() -> None:
    entries = [
        user("go"),
        assistant(tool_use("t1"), mid="A", usage=U1),
        result_entry("t1", 4_000),
        assistant(tool_use("t2"), mid="A", usage=U2),
        result_entry("t2", 400),
        api_error(),
        assistant(text("done"), mid="B", usage=U3),
        user("again"),
    ]
    counter = ContextCounter()
    for count, entry in enumerate(entries, start=1):
        counter.append(entry)
        assert counter.total == token_count_with_estimation(entries[:count])
        assert counter.entries_seen == count


def test_counter_reset_forgets_everything() -> None:
    counter = ContextCounter([user("go"), assistant(text("hi"), mid="A", usage=U1), user("x" * 40)])
    counter.reset()
    assert not counter.anchored
    assert counter.total == 0
    assert counter.estimated_tokens == 0
    assert counter.entries_seen == 0
    counter.append(user("y" * 40))
    assert counter.total == pad_estimate(10)
    assert counter.entries_seen == 1


def test_reset_forgets_the_anchor_id() -> None:
    # After a reset, a line of the old anchor response is estimated like any other entry.
    counter = ContextCounter([user("go"), assistant(text("hi"), mid="A", usage=U1)])
    counter.reset()
    counter.append(assistant(text("x" * 40), mid="A"))
    assert counter.total == pad_estimate(10)


def test_walk_back_when_only_a_later_line_of_the_response_has_usage() -> None:
    entries = [
        user("go"),
        assistant(tool_use("t1"), mid="B"),
        result_entry("t1", 400),  # 100 tokens, after the first line of B
        assistant(tool_use("t2"), mid="B", usage={"input_tokens": 1_000}),
        result_entry("t2", 4),  # 1 token
    ]
    assert token_count_with_estimation(entries) == 1_000 + pad_estimate(101)


def test_a_line_without_usage_is_estimated_until_its_usage_arrives() -> None:
    entries = [user("go"), assistant(text("x" * 400), mid="B")]
    assert token_count_with_estimation(entries) == pad_estimate(1 + 100)
    entries.append(assistant(tool_use("t1"), mid="B", usage=U3))
    assert token_count_with_estimation(entries) == usage_context_total(U3)


def test_synthetic_error_between_lines_of_a_response_changes_nothing() -> None:
    base = [
        user("go"),
        assistant(tool_use("t1"), mid="A", usage=U1),
        result_entry("t1", 400),  # 100 tokens
    ]
    tail = [assistant(tool_use("t2"), mid="A", usage=U2), result_entry("t2", 4)]
    expected = usage_context_total(U2) + pad_estimate(101)
    assert token_count_with_estimation(base + tail) == expected
    assert token_count_with_estimation([*base, api_error(), *tail]) == expected


# -- earlier turns' thinking on models that drop it ------------------------------------------

THINK = {"type": "thinking", "thinking": "t" * 400, "signature": "sig"}  # 100 tokens
STRIPS = "claude-sonnet-4-5-20250929"  # drops earlier turns' thinking
KEEPS = "claude-opus-4-5"  # keeps it


def _turn(model: str, *, usage: dict[str, Any] | None = None) -> list[Entry]:
    """A tool loop (thinking, call, result, thinking, answer) on `model`, unanchored unless
    the second response reports `usage`."""
    return [
        user("question"),
        Entry.assistant([THINK, tool_use("t1")], message_id="m1", model=model),
        result_entry("t1", 40),
        Entry.assistant([THINK, text("done")], message_id="m2", model=model, usage=usage),
    ]


def test_catalog_tells_which_models_keep_earlier_thinking() -> None:
    from unbounded.catalog import keeps_previous_thinking

    assert not keeps_previous_thinking(STRIPS)
    assert not keeps_previous_thinking("claude-haiku-4-5")
    assert keeps_previous_thinking(KEEPS)
    assert keeps_previous_thinking("claude-sonnet-4-6")
    assert keeps_previous_thinking("some-local-model")  # unknown: assumed to keep it


def test_a_tool_loop_keeps_its_own_thinking_on_a_model_that_drops_earlier_thinking() -> None:
    entries = _turn(STRIPS)
    assert token_count_with_estimation(entries) == pad_estimate(
        sum(entry_tokens(e) for e in entries)
    )


def test_a_new_turn_leaves_out_earlier_thinking_on_a_model_that_drops_it() -> None:
    entries = [*_turn(STRIPS), user("next question")]
    everything = sum(entry_tokens(e) for e in entries)
    assert token_count_with_estimation(entries) == pad_estimate(everything - 200)


def test_a_new_turn_keeps_earlier_thinking_on_a_model_that_keeps_it() -> None:
    entries = [*_turn(KEEPS), user("next question")]
    everything = sum(entry_tokens(e) for e in entries)
    assert token_count_with_estimation(entries) == pad_estimate(everything)


def test_tool_results_alone_do_not_start_a_new_turn() -> None:
    entries = [*_turn(STRIPS)[:2], result_entry("t1", 40), result_entry("t2", 40)]
    everything = sum(entry_tokens(e) for e in entries)
    assert token_count_with_estimation(entries) == pad_estimate(everything)


def test_estimated_thinking_after_the_anchor_is_left_out_at_a_new_turn() -> None:
    entries = [
        *_turn(STRIPS, usage=U1),
        user("go on"),
        Entry.assistant([THINK, tool_use("t2")], message_id="m3", model=STRIPS),
        result_entry("t2", 40),
        user("and now?"),
    ]
    after = entries[4:]
    counter = ContextCounter(entries)
    assert counter.anchor_tokens == usage_context_total(U1)  # exact: kept as reported
    assert counter.estimated_tokens == pad_estimate(sum(entry_tokens(e) for e in after) - 100)
    assert counter.total == token_count_with_estimation(entries)


def test_the_raw_estimate_at_the_next_anchor_leaves_out_dropped_thinking() -> None:
    entries = [
        *_turn(STRIPS, usage=U1),
        user("go on"),
        Entry.assistant([THINK, text("ok")], message_id="m3", model=STRIPS, usage=U2),
    ]
    counter = ContextCounter(entries)
    # The first turn's two thinking blocks were dropped when "go on" started a new turn.
    assert counter.raw_estimate_at_anchor == sum(entry_tokens(e) for e in entries) - 200
