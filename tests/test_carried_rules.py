"""The boundaries of what a hand-over carries from the user's requests and from a previous
summary (standing instructions, the latest request quoted whole or cut, user messages)."""

from __future__ import annotations

from unbounded.compaction import carried
from unbounded.compaction.carried import (
    LATEST_REQUEST_CHARS,
    MAX_STANDING,
    RULE_MAX_CHARS,
    RULE_SOURCE_MAX_CHARS,
    STANDING_HEADING,
    carried_latest,
    carried_standing,
    carried_user_messages,
    quoted_request,
    render_standing,
    standing_instructions,
)


def _rule_of(length: int) -> str:
    """One sentence holding a rule word, exactly `length` characters long."""
    head = "Never push to main branch"
    return head + " x" * ((length - len(head)) // 2) + ("y" if (length - len(head)) % 2 else "")


def test_the_newest_rules_are_kept_up_to_the_limit() -> None:
    rules = [f"Never touch file number {i} here" for i in range(MAX_STANDING + 1)]
    kept = standing_instructions(rules)
    assert kept == rules[1:]  # the oldest one gives way


def test_a_rule_of_the_longest_length_is_kept_and_one_character_more_is_prose() -> None:
    at_limit, over = _rule_of(RULE_MAX_CHARS), _rule_of(RULE_MAX_CHARS + 1)
    assert (len(at_limit), len(over)) == (RULE_MAX_CHARS, RULE_MAX_CHARS + 1)
    assert standing_instructions([at_limit]) == [at_limit]
    assert standing_instructions([over]) == []


def test_a_rule_needs_three_words() -> None:
    assert standing_instructions(["Never push main"]) == ["Never push main"]
    assert standing_instructions(["Never push"]) == []


def test_rules_are_read_from_requests_up_to_the_source_limit() -> None:
    rule = "Always use pnpm here."
    filler = "\n" + "word " * RULE_SOURCE_MAX_CHARS
    at_limit = (rule + filler)[:RULE_SOURCE_MAX_CHARS]
    over = (rule + filler)[: RULE_SOURCE_MAX_CHARS + 1]
    assert standing_instructions([at_limit]) == [rule]
    assert standing_instructions([over]) == []  # a pasted document, not the user's rules


def test_no_rules_render_no_lines() -> None:
    assert render_standing([]) == []
    assert render_standing(["Never push"]) == [STANDING_HEADING, '- "Never push"']


def test_the_latest_request_is_whole_up_to_its_limit() -> None:
    at_limit = "a" * LATEST_REQUEST_CHARS
    assert quoted_request(at_limit) == at_limit
    cut = quoted_request("a" * (LATEST_REQUEST_CHARS + 1))
    assert "characters of this message left out here" in cut


def test_a_cut_ends_at_a_sentence_end_in_its_second_half_only() -> None:
    assert carried._cut_back("Alpha beta gamma delta. Epsilon") == "Alpha beta gamma delta."
    # the only end (12) lies before half of 30 characters: keep it all rather than lose most
    text = "Hello world. " + "z" * 17
    assert len(text) == 30 and carried._cut_back(text) == text.rstrip()


def test_a_cut_starts_after_a_line_or_sentence_start_in_its_first_half_only() -> None:
    assert carried._cut_forward("head\nSecond line is long enough here") == (
        "Second line is long enough here"
    )
    assert carried._cut_forward("abcdef") == "abcdef"  # no start found: all of it
    text = "z" * 17 + ". Tail end"
    assert carried._cut_forward(text) == text  # the start lies past the first half
    # a start at 40 % of the text is still in its first half
    assert carried._cut_forward("z" * 11 + "\n" + "y" * 18) == "y" * 18


def test_the_last_standing_block_of_a_summary_is_the_one_carried() -> None:
    summary = "\n".join(
        [STANDING_HEADING, '- "old rule here"', "", STANDING_HEADING, '- "x"', '- "new rule"', "2. Next:"]
    )
    assert carried_standing(summary) == ["x", "new rule"]  # a one-character rule counts


def test_a_latest_request_quoted_without_a_space_after_the_mark() -> None:
    summary = "The user's latest request (verbatim):\n> first line\n>second\nafter"
    assert carried_latest(summary) == "first line\nsecond"


def test_user_messages_end_at_an_unindented_line_and_skip_more_markers() -> None:
    summary = "\n".join(
        [
            "6. All user messages:",
            '   - "fix the build"',
            "   - (3 more)",
            '   - "then deploy"',
            "A closing word ",  # unindented (a space second and last): the list is over
            "   - not a user message",
            "7. Pending Tasks:",
            "   - nor this",
        ]
    )
    assert carried_user_messages(summary) == ["fix the build", "then deploy"]
