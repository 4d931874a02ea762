"""A hand-over after an earlier summary: what the earlier summary said (a model's or ours) is
kept beside the new part, section by section, within its share of the budget."""

from __future__ import annotations

from dataclasses import replace

from conversation import bash, edit, user

from unbounded.compaction.carried import previous_sections
from unbounded.compaction.extractive import (
    _LEVELS,
    CARRIED_HEADING,
    CARRIED_PENDING_HEADING,
    CARRIED_SECTIONS,
    _Cuts,
    _Renderer,
    carried_sections,
)
from unbounded.compaction.handover import read_handover

RICH = _LEVELS[0]
PREFIX = "This session is being continued from a previous conversation that ran out of context."

MODEL_SUMMARY = "\n".join(
    [
        PREFIX,
        "",
        "Analysis:",
        "1. Primary Request and Intent:",
        "   not the summary yet",
        "",
        "Summary:",
        "1. Primary Request and Intent:",
        "   Make the voice server speak German.",
        "2. Key Technical Concepts:",
        "   - Voice server on localhost:8888, POST /notify with voice_id",
        "3. Files and Code Sections:",
        "   - **`server.ts`** (MODIFIED)",
        "     - reads ELEVENLABS_API_KEY from ~/.env",
        "     ```ts",
        "     const PORT = 8888;",
        "     ```",
        "4. Errors and fixes:",
        "   - **EADDRINUSE on 8888**:",
        "     - Fixed by killing the old bun process",
        "   1. a numbered line inside a section",
        "5. Problem Solving:",
        "   - Chose ElevenLabs over the MCP tools because the user hears the server",
        "6. All user messages:",
        '   - "du nutzt den mcp server, solltest aber immer den voice server nutzen"',
        '   - "mach weiter"',
        "7. Pending Tasks:",
        "   - Try the Ottie voice",
        "8. Current Work:",
        "   Restarted the server.",
        "9. Optional Next Step:",
        "   Send a test message.",
    ]
)


def section(text: str, number: int) -> str:
    start = text.index(f"\n{number}. ")
    end = text.find(f"\n\n{number + 1}. ", start)
    return text[start : end if end >= 0 else len(text)]


def test_previous_sections_reads_the_summary_after_its_analysis_by_heading_order() -> None:
    sections = previous_sections(MODEL_SUMMARY)
    assert sections[1] == ["   Make the voice server speak German."]
    assert sections[4] == ["   - **EADDRINUSE on 8888**:", "     - Fixed by killing the old bun process", "   1. a numbered line inside a section"]
    assert sorted(sections) == list(range(1, 10))
    assert previous_sections("Summary:\n2. Key Technical Concepts:\n   x\n4. Errors and fixes:\n   y\n3. Not a heading:") == {2: ["   x"], 4: ["   y", "3. Not a heading:"]}


def test_carried_sections_keep_the_newest_items_within_each_share() -> None:
    lines = [f"   - item {n} " + "x" * 40 for n in range(40)]
    summary = "\n".join(["Summary:", "1. Primary Request and Intent:", "   a", "2. Key Technical Concepts:", *lines, "3. Files and Code Sections:", "   - f.py", "4. Errors and fixes:", *lines])
    chars = 2_000
    carried = carried_sections(summary, chars)
    assert carried[4][-1].startswith("- item 39 ") and not any("item 0 " in line for line in carried[4])
    errors_used = sum(len(line) + 1 for line in carried[4])
    share = dict(CARRIED_SECTIONS)
    assert errors_used > share[4] * chars  # the shares sections 5 and 7 leave go to others
    assert carried[3] == ["- f.py"]
    total = sum(len(line) + 1 for lines in carried.values() for line in lines)
    assert total <= chars
    assert sum(len(line) + 1 for line in carried[2]) <= chars - errors_used - len("- f.py") - 1


def test_carried_sections_drop_fenced_code_and_keep_the_indents() -> None:
    carried = carried_sections(MODEL_SUMMARY, 5_000)
    assert carried[3] == ["- **`server.ts`** (MODIFIED)", "  - reads ELEVENLABS_API_KEY from ~/.env"]
    assert 1 not in carried and 8 not in carried and 9 not in carried


def test_a_hand_over_after_a_model_summary_keeps_its_sections() -> None:
    messages = [user(MODEL_SUMMARY), user("try Ottie now"), *edit("e", "/r/server.ts", "voice = OTTIE")]
    text = _Renderer(read_handover(messages), up_to=False).render(RICH, _Cuts())
    assert f"   {CARRIED_HEADING}\n     - Voice server on localhost:8888, POST /notify with voice_id" in section(text, 2)
    four = section(text, 4)
    assert four.startswith("\n4. Errors and fixes:\n   In this part no call failed")
    assert "     - **EADDRINUSE on 8888**:\n       - Fixed by killing the old bun process" in four
    assert "     - Chose ElevenLabs over the MCP tools" in section(text, 5)
    assert f"   {CARRIED_PENDING_HEADING}\n     - Try the Ottie voice" in section(text, 7)
    assert "Restarted the server." not in text and "Send a test message." not in text
    assert CARRIED_HEADING not in _Renderer(read_handover(messages), up_to=False).render(replace(RICH, carried_chars=0), _Cuts())
    failing = [*messages, *bash("b", "bun server.ts", "error: port in use")]
    four_with = section(_Renderer(read_handover(failing), up_to=False).render(RICH, _Cuts()), 4)
    assert four_with.index("error: port in use") < four_with.index(CARRIED_HEADING)


def test_an_item_keeps_its_lines_indented_by_one_space_more() -> None:
    summary = "Summary:\n1. Primary Request and Intent:\n   a\n4. Errors and fixes:\n   - old error\n   - new error\n    - its fix"
    assert carried_sections(summary, 60)[4] == ["- old error", "- new error", " - its fix"]
    assert carried_sections(summary, 15)[4] == ["- new error"]  # an item starts with its head


def test_standing_instructions_come_from_every_earlier_part() -> None:
    handover = read_handover([user(MODEL_SUMMARY), user("Never push to main.")])
    assert handover.standing == ["du nutzt den mcp server, solltest aber immer den voice server nutzen", "Never push to main."]
