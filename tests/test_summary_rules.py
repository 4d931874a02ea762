"""The rules of `unbounded.compaction.summary_text` and `summary_guard`, each held by a test
that fails when the rule is flipped, dropped or off by one (the mutation check runs these)."""

from __future__ import annotations

import pytest

from unbounded.compaction.summary_text import (
    check_summary_reply,
    extract_summary,
    format_compact_summary,
)
from unbounded.errors import CompactionError
from unbounded.model.response import ModelResponse


def reply(text: str, stop: str = "end_turn", tool: bool = False) -> ModelResponse:
    content = [{"type": "text", "text": text}] if text else []
    if tool:
        content.append({"type": "tool_use", "id": "t", "name": "Read", "input": {}})
    return ModelResponse(content, stop, {"input_tokens": 1, "output_tokens": 1}, "m")


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (reply("", tool=True), "tool_use"),
        (reply("  "), "no_summary"),
        (reply("API Error: 500 overloaded"), "api_error"),
        (reply("API error: bad"), "api_error"),
        (reply("<summary>1. x</summary>", stop="max_tokens"), "truncated"),
        (reply("<analysis>thinking, never finished"), "no_summary"),
        (reply("<summary>   </summary>"), "no_summary"),
    ],
)
def test_a_reply_without_a_usable_summary_is_refused_with_its_reason(response: ModelResponse, reason: str) -> None:
    with pytest.raises(CompactionError) as error:
        check_summary_reply(response)
    assert error.value.reason == reason


def test_an_api_error_is_quoted_to_200_characters() -> None:
    text = "API Error: " + "x" * 300
    with pytest.raises(CompactionError) as error:
        check_summary_reply(reply(text))
    assert str(error.value) == "the summary call returned an error: " + text[:200]


def test_a_good_reply_is_returned_stripped() -> None:
    assert check_summary_reply(reply("  <summary>1. Primary Request</summary>\n")) == "<summary>1. Primary Request</summary>"
    assert check_summary_reply(reply("Summary: the work", tool=True)) == "Summary: the work"  # text wins over a stray call


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("<summary>body</summary>", "body"),
        ("<analysis>notes</analysis>\n<summary>body</summary>", "body"),
        # a quoted summary before the real one: the first one followed by a section heading
        ("<analysis>the user pasted <summary>old task</summary></analysis><summary>1. Primary Request: new</summary>", "1. Primary Request: new"),
        ("<summary>quoted <summary>1. Primary Request: real</summary>", "1. Primary Request: real"),
        ("<summary>**1.** Intent</summary> trailing", "**1.** Intent"),
        ("<summary>Primary Request here</summary>", "Primary Request here"),
        ("<summary>first</summary> and <summary>second</summary>", "first</summary> and <summary>second"),
        ("<summary>no closing tag", "no closing tag"),
        ("text before </summary>", "text before"),
        ("<analysis>a</analysis> stray </summary>", "stray"),
        ("plain text summary", "plain text summary"),
        ("<analysis>a</analysis>\nplain after analysis", "plain after analysis"),
        ("<analysis>unfinished", ""),
        ("<ANALYSIS>a</ANALYSIS><SUMMARY>1. up</SUMMARY>", "1. up"),
        ("<analysis>x</analysis><analysis>y</analysis> rest", "rest"),
        ("intro <analysis>x</analysis> rest", "intro <analysis>x</analysis> rest"),  # not a leading analysis
        ("<analysis>unclosed then </summary>", "<analysis>unclosed then"),  # a stray close, no analysis end
        ("<analysis>a</summary></analysis><summary>1. b</summary>", "1. b"),  # the analysis ends before the summary's end
    ],
)
def test_extract_summary(text: str, summary: str) -> None:
    assert extract_summary(text) == summary


def test_format_compact_summary() -> None:
    assert format_compact_summary("<analysis>a</analysis><summary>Summary: body\n\n\n\nmore</summary>") == "Summary:\nbody\n\nmore"
    assert format_compact_summary("<summary>body</summary>") == "Summary:\nbody"


# -- the guard -------------------------------------------------------------------------------------

from unbounded.compaction.summary_guard import (  # noqa: E402
    CONTINUATION_SECTIONS,
    NINE_SECTIONS,
    check_summary,
    missing_sections,
    summary_floor,
)

HEADINGS = [
    "1. Primary Request and Intent:",
    "2. Key Technical Concepts:",
    "3. Files and Code Sections:",
    "4. Errors and fixes:",
    "5. Problem Solving:",
    "6. All user messages:",
    "7. Pending Tasks:",
    "8. Current Work:",
    "9. Optional Next Step:",
]


def nine(drop: tuple[int, ...] = (), filler: int = 400) -> str:
    """A summary with the nine headings (but those dropped), each over `filler` characters."""
    return "\n".join(f"{h}\n   {'detail ' * (filler // 7)}" for n, h in enumerate(HEADINGS) if n not in drop)


@pytest.mark.parametrize(
    ("replaced", "floor"),
    [(0, 1), (3, 1), (400, 100), (1_199, 299), (1_200, 300), (15_000, 300), (15_025, 300), (15_075, 302), (50_000, 1_000), (75_000, 1_500), (76_000, 1_500), (10_000_000, 1_500)],
)
def test_the_size_floor(replaced: int, floor: int) -> None:
    assert summary_floor(replaced) == floor


def test_a_summary_under_the_floor_is_refused_unless_the_room_or_the_lean_summary_is_smaller() -> None:
    text = nine(filler=70)  # 9 short sections
    tokens = (len(text) + 2) // 4
    verdict = check_summary(text, 100_000)
    assert not verdict.ok and verdict.floor == 1_500 and verdict.tokens == tokens
    assert verdict.reason == f"the summary holds {tokens:,} tokens for 100,000 replaced (at least 1,500 expected)"
    assert check_summary(text, 100_000, room_tokens=tokens).ok  # the room asked for
    assert not check_summary(text, 100_000, room_tokens=tokens + 1).ok
    assert not check_summary(text, 100_000, room_tokens=0).ok  # no room given: the floor stands
    assert check_summary(text, 100_000, lean_tokens=lambda: tokens).ok
    assert not check_summary(text, 100_000, lean_tokens=lambda: tokens + 1).ok
    asked: list[int] = []
    check_summary(nine(), 1_000, lean_tokens=lambda: asked.append(1) or 0)
    assert asked == []  # the lean size is asked only for a small summary


def test_sections_seven_of_nine_and_the_three_required() -> None:
    assert check_summary(nine(), 1_000).ok
    assert check_summary(nine(drop=(1, 2)), 1_000).ok  # 7 of 9
    three_missing = check_summary(nine(drop=(1, 2, 3)), 1_000)
    assert not three_missing.ok and three_missing.missing_sections == ("Key Technical Concepts", "Files and Code Sections", "Errors and fixes")
    assert three_missing.reason == "the summary lacks the section(s) Key Technical Concepts, Files and Code Sections, Errors and fixes"
    for required in (0, 6, 7):
        verdict = check_summary(nine(drop=(required,)), 1_000)
        assert not verdict.ok and verdict.reason == f"the summary lacks the section(s) {HEADINGS[required][3:-1]}"
    partial = nine().replace("8. Current Work:", "8. Work Completed:")
    assert check_summary(partial, 1_000).ok


def test_headings_inside_long_lines_or_list_items_do_not_count() -> None:
    text = nine(drop=(6,)) + "\n- Pending Tasks: mentioned in a list item\n" + "x" * 121 + " Pending Tasks"
    assert "Pending Tasks" in check_summary(text, 1_000).missing_sections
    assert missing_sections("Pending Tasks\n" + "y" * 120) == tuple(n for n, _ in NINE_SECTIONS.sections if n != "Pending Tasks")


def test_a_continuation_summary_needs_four_of_five() -> None:
    parts = ["Task Overview", "Current State", "Important Discoveries", "Next Steps", "Context to Preserve"]
    def text(without: str = "") -> str:
        return "\n".join(f"## {p}\n{'word ' * 80}" for p in parts if p != without)
    assert check_summary(text(), 1_000, spec=CONTINUATION_SECTIONS).ok
    assert check_summary(text("Important Discoveries"), 1_000, spec=CONTINUATION_SECTIONS).ok
    assert not check_summary(text("Next Steps"), 1_000, spec=CONTINUATION_SECTIONS).ok


def test_notes_need_a_current_state() -> None:
    body = "\n".join(f"# Section {n}\n{'word ' * 60}" for n in range(4))
    filled = body + "\n# Current State\nediting parser.py\n# Later\nx"
    assert check_summary(filled, 1_000, kind="notes").ok
    empty = body + "\n# Current State\n_What is being worked on now._\n\n# Later\nx"
    verdict = check_summary(empty, 1_000, kind="notes")
    assert not verdict.ok and verdict.missing_sections == ("Current State",) and verdict.reason == "the notes' Current State is empty"
    assert not check_summary(body, 1_000, kind="notes").ok


def test_the_guard_at_its_boundaries() -> None:
    from unbounded.compaction.summary_guard import ANY_SECTIONS

    assert check_summary("word " * 300, 1_000, spec=ANY_SECTIONS).ok  # a prompt of the caller's own: size only
    tiny = check_summary("tiny", 100_000, room_tokens=1, spec=ANY_SECTIONS)
    assert tiny.ok and tiny.floor == 1  # a room of one token is a room
    heading = "7. Pending Tasks:"
    padded = heading + "." * (120 - len(heading))
    assert len(padded) == 120 and check_summary(nine().replace(heading, padded), 1_000).ok
    too_long = check_summary(nine().replace(heading, padded + "."), 1_000)  # 121 characters: not a heading
    assert not too_long.ok and "Pending Tasks" in too_long.missing_sections
