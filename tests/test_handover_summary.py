"""The offline hand-over as text: what each of the nine sections says, at each level, within
the budget, and the same bytes every run."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conversation import bash, edit, read, result, says, use, user, write

from unbounded.compaction.carried import render_latest, render_standing
from unbounded.compaction.extractive import (
    _LEVELS,
    COMMAND_CHARS,
    LATEST_PREVIEW_CHARS,
    PENDING_SHOWN,
    _Cuts,
    _Level,
    _Renderer,
    command_text,
    describe_call,
    extractive_summary,
    lean_summary_tokens,
    relative,
    summary_budget,
)
from unbounded.compaction.handover import read_handover
from unbounded.tokens.estimate import rough_token_count

RICH, MID, LEAN, LEANEST = _LEVELS
NO_STEPS = replace(RICH, recent_chars=0, answered_chars=0)
"""The richest level without the last steps and the answered message: what section 8 says
of work older than the steps it quotes."""
ROOT = "/home/u/proj"


def section(text: str, number: int) -> str:
    """The body of one numbered section."""
    start = text.index(f"\n{number}. ")
    end = text.find(f"\n\n{number + 1}. ", start)
    return text[start : end if end >= 0 else len(text)]


def render(messages: list[Any], level: _Level = RICH, cuts: _Cuts | None = None, *, up_to: bool = False) -> str:
    return _Renderer(read_handover(messages), up_to=up_to).render(level, cuts or _Cuts())


def work_session() -> list[Any]:
    """A session with a tracker task, commits, checks, errors, a plan and code changes."""
    plan = (
        "Now I know the layout. I'll update:\n\n1. **Parser** - split on tabs\n"
        "2. **Exporter** - write CSV\n3. check the numbers"
    )
    return [
        user("Work on the importer epic. Never push to main. Use tabs, not spaces."),
        *bash("t0", "bd show imp-2", "○ imp-2 · Port the exporter   [● P1 · OPEN]\nOutput files:\n- `lib/exporter.py`\n- `lib/parser.py`\n- `docs/export.md`"),
        *bash("t1", "bd update imp-2 --status in_progress", "✓ Updated issue: imp-2"),
        *read("r1", f"{ROOT}/lib/models.py"),
        *edit("e1", f"{ROOT}/lib/exporter.py", "def export(rows):\n    return rows"),
        *bash("c1", "pytest -q", "F.\nFAILED tests/test_export.py::test_rows - assert 1 == 2\n1 failed, 1 passed"),
        says("The rows come back unsorted because export() keeps insertion order. Sorting them first."),
        *edit("e2", f"{ROOT}/lib/exporter.py", "def export(rows):\n    return sorted(rows)"),
        *bash("c2", "pytest -q", "2 passed"),
        *bash("g1", "git commit -am 'feat: export'", "[imp-2 abc1234] feat: export\n 1 file changed, 2 insertions(+)"),
        says(plan),
        *edit("e3", f"{ROOT}/lib/parser.py", "class Parser:\n    def split(self, line):\n        return line.split('\\t')"),
        *bash("c3", "mix compile", "error: undefined function split/1\n  lib/a.ex:3"),
        says("The compile fails on split/1 since the module is not aliased."),
        *bash("g2", "git status", "On branch imp-2\nChanges not staged:\n\tmodified:   lib/parser.py"),
    ]


# -- the sections --------------------------------------------------------------------------


def test_section_1_states_the_request_the_task_and_the_rules() -> None:
    text = render(work_session())
    one = section(text, 1)
    assert "   The user's latest request (verbatim):\n   > Work on the importer epic." in one
    assert "The first request in this part" not in one  # only one request
    assert "   Being worked on: imp-2 (in progress) — Port the exporter" in one
    assert '   - "Never push to main."\n   - "Use tabs, not spaces."' in one
    two_requests = render([user("First thing to do."), user("Second thing.")])
    assert 'The first request in this part: "First thing to do."' in section(two_requests, 1)
    assert "No user request is recorded in this part" in render([says("hello")])


def test_section_1_carries_instruction_files_and_the_previous_intent() -> None:
    previous = "\n".join(
        [
            "This session continues an earlier conversation that ran out of context.",
            "Summary:",
            "1. Primary Request and Intent:",
            "   Build the CSV exporter for the importer.",
            *render_standing(["Never push to main."], "   "),
            *render_latest("Port it to Python.", "   "),
            "2. Key Technical Concepts:",
        ]
    )
    messages = [user(previous), user(f"<system-reminder>\nInstructions from {ROOT}/lib/CLAUDE.md:\nTabs.\n</system-reminder>"), *edit("e", f"{ROOT}/lib/a.py", "x"), *read("r", f"{ROOT}/tests/b.py")]
    one = section(render(messages), 1)
    assert "> Port it to Python." in one and '- "Never push to main."' in one
    assert "Instruction files attached in the conversation: lib/CLAUDE.md" in one
    assert 'The previous summary\'s account of the intent: "Build the CSV exporter for the importer."' in one
    assert "previous summary" not in section(render(messages, replace(LEANEST, previous_chars=0)), 1)


def test_section_2_names_the_root_languages_and_branch() -> None:
    two = section(render(work_session()), 2)
    assert f"   - Working directory (paths below are relative to it): {ROOT}" in two
    assert "   - Languages: Python" in two
    assert "   - Git branch: imp-2" in two
    assert "Checks" not in two and "Tools used" not in two  # section 5 lists the checks
    tied = section(render([*edit("a", "/x/a.ts", "1"), *edit("b", "/x/b.py", "2")]), 2)
    assert "Languages: Python, TypeScript" in tied  # a tie is sorted by name
    assert section(render([user("hi")]), 2).endswith("   - None recorded.")


def test_section_3_lists_changes_newest_first_with_code_and_marks() -> None:
    three = section(render(work_session()), 3)
    assert "   Changed (2), the most recent first:" in three
    assert three.index("   - lib/parser.py (edited; Edit; changed after the last commit)") < three.index("   - lib/exporter.py (edited; Edit ×2)")
    assert "     Defines: Parser, split" in three
    assert '     Its latest change (Edit): 1 line(s) from "x" → 3 line(s), the new code:\n     ```\n     class Parser:' in three
    assert "   Read, not changed (1), the most recent first: lib/models.py" in three
    lean = section(render(work_session(), LEANEST), 3)
    assert "Defines" not in lean and "```" not in lean and "1 other file(s) were read, not changed." in lean
    created = section(render(write("w", "/x/new.py", "def a():\n    pass\n")), 3)
    assert "new.py (created; Write)\n     Its content as last written (Write):\n     ```\n     def a():\n         pass\n     ```" in created
    assert "Defines" not in created  # the code shown names them
    cut = section(render(work_session(), RICH, _Cuts(files=1)), 3)
    assert "   - Also changed, earlier: lib/exporter.py" in cut
    assert section(render([user("hi")]), 3).endswith("   No file was read or changed.")


def test_section_3_outlines_a_long_file_and_quotes_the_agent_before_a_change() -> None:
    body = "\n".join(f"    x{n} = {n}" for n in range(30))
    code = f"# head\n# two\n# three\n# four\nclass A:\n{body}\ndef b():\n{body}\ndef c():\n    pass"
    messages = [user("go"), says("Writing the module with A, b and c:"), *write("w", "/x/m.py", code)]
    three = section(render(messages, replace(RICH, excerpt_lines=12, excerpt_chars=400)), 3)
    assert (
        '     The agent, before its latest change: "Writing the module with A, b and c:"\n'
        "     Its content as last written (Write), its first lines and then each line that defines something:\n"
        "     ```\n     # head\n     # two\n     # three\n     # four\n"
        "        5: class A:\n          …\n       36: def b():\n          …\n       67: def c():\n     … (1 more lines)\n     ```"
    ) in three
    assert "Defines" not in three
    few = code.replace("def b():", "b = 1").replace("def c():", "c = 2")
    head = section(render([user("go"), *write("w", "/x/m.py", few)], replace(RICH, excerpt_lines=12, excerpt_chars=400)), 3)
    assert "     Its content as last written (Write):\n     ```\n     # head" in head and "     Defines: A\n" in head
    assert "The agent, before" not in section(render([says("Reading first."), *read("r", "/x/a.py"), *write("w", "/x/m.py", "x")]), 3)


def test_section_3_caps_the_read_list() -> None:
    messages: list[Any] = []
    for n in range(RICH.read_files + 2):
        messages += read(f"r{n}", f"/x/f{n}.py")
    three = section(render(messages), 3)
    assert f"   Read, not changed ({RICH.read_files + 2}), the most recent first: /x/f{RICH.read_files + 1}.py" in three
    assert three.rstrip().endswith("(2 more)")


def test_section_4_names_each_error_with_what_followed() -> None:
    four = section(render(work_session()), 4)
    unresolved = four.index("   - Unresolved: Bash `mix compile` failed:\n       error: undefined function split/1")
    fixed = four.index("   - Fixed: Bash `pytest -q` failed:\n       FAILED tests/test_export.py::test_rows")
    assert unresolved < fixed
    assert '     The agent\'s next words: "The rows come back unsorted because export() keeps insertion order. Sorting them first."' in four
    assert "     Done after it: Edit lib/exporter.py (ok)" in four
    assert "     Fixed by: Bash `pytest -q` (succeeded)" in four
    lean = section(render(work_session(), LEANEST), 4)
    assert "next words" not in lean and "Done after it" not in lean and "Fixed by" in lean
    assert section(render([user("hi")]), 4).endswith("   None: no call failed, no output reported a failure.")


def test_section_4_keeps_the_latest_of_a_repeated_error_and_marks_old_ones() -> None:
    messages: list[Any] = [
        *bash("a", "make", "error: same"),
        *bash("b", "make", "error: same"),
        user("now something else"),
        *bash("c", "npm run x", "npm ERR! missing"),
    ]
    four = section(render(messages), 4)
    assert four.count("error: same") == 1
    assert "   - Not seen fixed (before the current work began): Bash `make` failed:" in four
    assert four.index("Unresolved: Bash `npm run x`") < four.index("Not seen fixed")
    many: list[Any] = []
    for n in range(6):
        many += bash(f"m{n}", f"tool{n}", f"error: e{n}")
    shown = section(render(many, LEANEST), 4)
    assert shown.count("Unresolved:") == LEANEST.errors and "(3 earlier errors not shown)" in shown


def test_section_5_git_checks_and_decisions() -> None:
    five = section(render(work_session()), 5)
    assert '   - Committed abc1234 on imp-2: "feat: export" (1 file changed, 2 insertions(+))' in five
    assert "   - Changed after the last commit (abc1234), so not in it: lib/parser.py" in five
    assert "   - No push recorded after the last commit (abc1234)." in five
    assert "   - The last `git status` (after the last file change):\n       On branch imp-2" in five
    assert '   - `pytest -q` passed: "2 passed"; 1 file change(s) since' in five
    assert '   - `mix compile` failed: "error: undefined function split/1"' in five
    assert "because export() keeps insertion order" in five
    pushed = section(render([*bash("g", "git commit -m x", "[m 1234567] x"), *bash("p", "git push", "a..b  m -> m"), *bash("s", "git diff --stat", "1 file")]), 5)
    assert "   - Pushed: a..b m -> m" in pushed and "No push recorded" not in pushed
    assert "No file was changed after the last commit (1234567)." in pushed
    plain_push = section(render([*bash("p", "git push", "Everything up-to-date")]), 5)
    assert "   - Pushed (Bash `git push`)" in plain_push
    later = section(render([*bash("s", "git status", "clean"), *edit("e", "/a.py", "x")]), 5)
    assert "(before 1 later file change(s))" in later
    assert section(render([user("hi")]), 5).endswith("   None.")


def test_section_6_quotes_every_request_and_previews_the_latest() -> None:
    long_latest = "Please do the last thing " * 20
    messages = [user("first request"), user("first request"), user("second"), user(long_latest)]
    six = section(render(messages), 6)
    assert six.count('"first request"') == 1
    assert f'   - "{long_latest.strip()[:LATEST_PREVIEW_CHARS]}…"' in six
    assert "(The last of them is the latest request, quoted whole in section 1.)" in six
    assert "(2 more)" in section(render(messages, RICH, _Cuts(prompts=1)), 6)
    assert section(render([says("x")]), 6).endswith("None in this part.")


def test_section_7_tracker_spec_todos_and_open_plan_items() -> None:
    seven = section(render(work_session()), 7)
    assert "   - imp-2: in progress — Port the exporter" in seven
    assert "   What imp-2 asks for (its tracker entry):\n     ○ imp-2" in seven
    assert (
        "   Files its entry names: lib/exporter.py (changed before imp-2 started)"
        not in seven
    )
    assert "lib/exporter.py (changed since imp-2 started); lib/parser.py (changed since imp-2 started); docs/export.md (not changed)" in seven
    assert "   The agent's plan has items no file change answers yet (section 9).\n" in seven
    assert "The agent's plan has items" not in section(render([user("go"), says("Next:\n1. a.py fix\n2. b.py fix"), *edit("a", "/x/a.py", "1"), *edit("b", "/x/b.py", "2")]), 7)
    assert "1 error(s) unresolved (section 4)." in seven
    assert "What imp-2 asks for" not in section(render(work_session(), RICH, _Cuts(spec_lines=0)), 7)
    todos = [use("t", "TodoWrite", todos=[{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]), result("t", "ok")]
    listed = section(render([user("Do 1) a 2) b"), *todos]), 7)
    assert "   Todo list as last written (1 done, 1 open):\n   - [pending] b\n   Done: a" in listed
    assert "   Items of the latest request:\n   - a\n   - b" in listed
    assert "still being worked on" in section(render([user("go"), *read("r", "/a.py")]), 7)
    assert "see sections 8 and 9" in section(render([user("go"), says("done")]), 7)


def test_section_7_marks_files_changed_before_the_task_started() -> None:
    messages = [
        *edit("e", "/r/lib/a.py", "x"),
        *bash("s", "bd show t-1", "○ t-1 · T [x]\n- lib/a.py"),
        *bash("u", "bd update t-1 --status in_progress", "ok"),
    ]
    assert "lib/a.py (changed before t-1 started)" in section(render(messages), 7)


def test_section_8_reports_plan_subagents_and_last_calls() -> None:
    report = "Summary of the work so far:\n" + "- item done\n" * 60
    messages = [
        user("first"),
        says(report),
        user("continue"),
        says("Reading the parser first."),
        *read("r", "/x/p.py"),
        says("Next:\n1. p.py fix\n2. q.py fix"),
        use("a", "Task", description="Survey the tests"),
        result("a", "Found 3 test files.\nAll pass."),
        *edit("e", "/x/p.py", "y"),
        *bash("b", "ls", "a\nb\nc"),
        user("<task-notification>\n<task-id>k1</task-id>\n<status>completed</status>\n<summary>Build done</summary>\n</task-notification>"),
    ]
    eight = section(render(messages, NO_STEPS), 8)
    assert "   The agent's last full report before the latest request:\n     Summary of the work so far:" in eight
    assert "   - (4 tool call(s) ago) Reading the parser first." in eight
    assert "Its latest plan (3 tool call(s) ago), each item with the files changed since:" in eight
    assert '     "Next:"\n     1. p.py fix [changed since: /x/p.py]\n     2. q.py fix [no change since]' in eight
    assert "   Report of the sub-agent Task: Survey the tests:\n     Found 3 test files.\n     All pass." in eight
    assert "   - Bash `ls`\n     -> ok:\n       a\n       b\n       c" in section(render(messages), 8)
    assert "   - task k1: Build done" in eight
    assert "(its last message) Done." in section(render([user("x"), says("Done.")], NO_STEPS), 8)
    assert section(render([user("x")], NO_STEPS), 8).endswith("Nothing recorded.")


def test_section_9_next_step_and_what_is_left() -> None:
    nine = section(render(work_session()), 9)
    assert nine == (
        "\n9. Optional Next Step:\n"
        '   Next: Fix "error: undefined function split/1", which Bash `mix compile` reported (section 4), and run it again.\n'
        "   Then:\n"
        "   - re-run `pytest -q` (1 file(s) changed since: lib/parser.py) and fix what it reports\n"
        "   - item 2 of its plan: **Exporter** - write CSV (lib/exporter.py)\n"
        "   - finish the tracker item imp-2 — Port the exporter, and close it\n"
        "   - commit the 1 file(s) changed after abc1234 (section 5)\n"
        "   Continue with the latest request (section 1) from there, without asking the user to repeat anything."
    )
    stated = section(render([user("go"), says("Next I will run the full suite now."), *read("r", "/a.py")]), 9)
    assert '   The agent\'s last stated intention (1 tool call(s) ago, so possibly done): "Next I will run the full suite now."' in stated
    assert "Next:" not in stated
    about_to = section(render([user("go"), *read("r", "/a.py"), says("Jetzt schreibe ich die Tests für den Parser.")]), 9)
    assert about_to.startswith('\n9. Optional Next Step:\n   Next: What the agent said it would do next: "Jetzt schreibe ich die Tests für den Parser."')
    done = section(render([user("What is 2+2?"), says("4")]), 9)
    assert "may have finished the latest request" in done
    todo = [use("t", "TodoWrite", todos=[{"content": "b", "status": "in_progress"}, {"content": "c", "status": "pending"}]), result("t", "ok"), says("ok")]
    todo_nine = section(render([user("go"), *todo]), 9)
    assert "   Next: Finish the todo in progress: b.\n   Then:\n   - the next todo: c\n" in todo_nine
    assert "read them next" in render([user("go")], up_to=True)


def test_section_4_lists_the_problems_the_agent_reported_in_its_own_words() -> None:
    messages = [
        user("go"),
        *write("w", "/x/a.ex", "x"),
        says("Credo reports nesting too deep in `classify/2`. Extracting a helper."),
        *edit("e", "/x/a.ex", "y"),
        says("There are no new warnings in the compile. All 12 tests pass. Nothing is broken in the views."),
        says("The old `render/1` helper is now unused. Let me check the error log next:"),
    ]
    four = section(render(messages), 4)
    assert four == (
        "\n4. Errors and fixes:\n"
        "   In this part no call failed and no output reported a failure.\n"
        "   Problems the agent reported in its own words (newest last):\n"
        '   - "Credo reports nesting too deep in `classify/2`." Then: Edit /x/a.ex (ok).\n'
        '   - "The old `render/1` helper is now unused."'
    )
    one = section(render(messages, replace(RICH, errors=1)), 4)
    assert "Credo" not in one and "render/1" in one
    assert "Problems the agent" not in section(render(messages, replace(RICH, errors=0)), 4)


def test_section_7_gives_the_tracker_s_dependencies_and_children() -> None:
    epic = "○ e-1 [EPIC] · The epic   [● P1 · OPEN]\n\nCHILDREN\n  ↳ ✓ e-1.1: First ● P1\n  ↳ ○ e-1.2: Second ● P1\n  ↳ ◐ e-1.3: Third ● P2"
    task = "○ e-1.2 · Second   [● P1 · IN_PROGRESS]\n\nDEPENDS ON\n  → ✓ e-1.1: First ● P1\n\nBLOCKS\n  ← ○ e-1.3: Third ● P2\n\nNOTES\n  → ✓ e-9: not a relation"
    messages = [user("go"), *bash("s", "bd show e-1", epic), *bash("c", "bd close e-1.1", "ok"), *bash("t", "bd show e-1.2", task)]
    seven = section(render(messages), 7)
    assert (
        "   Tracker, as the agent's commands left it:\n"
        "   - e-1: open — The epic\n"
        "   - e-1.1: closed — First\n"
        "   - e-1.2: in progress — Second [depends on e-1.1 (closed); blocks e-1.3]\n"
        "   - e-1.3: in progress — Third\n"
    ) in seven
    handover = read_handover(messages)
    assert handover.current_task is not None and handover.current_task.id == "e-1.2"
    assert [i.id for i in handover.tracker_items] == ["e-1", "e-1.1", "e-1.2", "e-1.3"]  # e-9 is under NOTES


def test_section_5_says_when_no_commit_was_seen() -> None:
    assert "   Git:\n   - No commit seen in this part.\n" in section(render([user("go"), *bash("s", "git status", "On branch x")]), 5)
    assert "No commit seen" not in section(render(work_session()), 5)
    assert section(render([user("go"), *bash("l", "ls", "a")]), 5) == "\n5. Problem Solving:\n   None."


def test_section_8_keeps_the_findings_of_older_texts() -> None:
    messages = [
        user("look into it"),
        says("The fixture has no subagent refs, so the test must build one. I looked around."),
        *read("r", "/x/a.py"),
        says("Found 3 callers of `render/2`. The fixture has no subagent refs, so the test must build one."),
        *read("s", "/x/b.py"),
        says("| **Tagline** | Text | 5-7 Wörter |\n└── 05-checklist.md # 2 pages\nSaved in `a.json`.\n## 3 results"),
        says("Let me check the 3 callers of `render/2` now. Reading the 2 files with `grep`:"),
        says("Now the last step."),
    ]
    eight = section(render(messages, replace(NO_STEPS, reports=1)), 8)
    assert eight.startswith(
        "\n8. Current Work:\n   Findings and results the agent stated earlier (newest last):\n"
        "   - The fixture has no subagent refs, so the test must build one.\n"
        "   - Found 3 callers of `render/2`.\n"
        "   The agent's latest words"
    )
    one = section(render(messages, replace(NO_STEPS, reports=1, findings=1)), 8)
    assert "Found 3 callers" in one and "fixture" not in one
    assert "Findings" not in section(render(messages, replace(NO_STEPS, reports=5)), 8)  # all shown whole


def test_section_9_lists_at_most_the_level_s_follow_ups() -> None:
    todos = [{"content": f"t{n}", "status": "pending"} for n in range(PENDING_SHOWN + 2)]
    messages = [user("go"), use("t", "TodoWrite", todos=todos), result("t", "ok"), *bash("c", "pytest", "1 passed"), *edit("e", "/x/a.py", "x")]
    nine = section(render(messages, replace(RICH, follow_ups=2)), 9)
    assert "   Next: Re-run `pytest` (1 file(s) changed since: /x/a.py) and fix what it reports.\n   Then:\n   - the next todo: t0\n   - the next todo: t1\n   - (1 more, sections 7–8)\n" in nine
    assert f"t{PENDING_SHOWN}" not in section(render(messages), 9)
    assert "   - the next todo: t2\n" in section(render(messages, replace(RICH, follow_ups=3)), 9)


def test_section_9_follows_the_order_the_latest_request_gives() -> None:
    ask = user("Back up the voice server config first, then switch the agent to the Ottie voice.")
    done_first = [ask, *write("w", "/x/backup.md", "x"), says("The voice server config is backed up.")]
    nine = section(render(done_first), 9)
    assert '   Next: The latest request\'s next step: "switch the agent to the Ottie voice".\n' in nine
    not_yet = section(render([ask, *read("r", "/x/a.md")]), 9)
    assert (
        '   Next: The latest request\'s steps, in this order (its words, none reported done in the agent\'s words since): '
        '(1) "Back up the voice server config first" (2) "switch the agent to the Ottie voice".' in not_yet
    )
    assert "steps" not in section(render([user("Back up the config and switch the voice."), *read("r", "/x/a.md")]), 9)


def test_section_9_names_the_next_ready_task_of_the_tracker() -> None:
    ready = "📋 Ready work (4 issues with no blockers):\n\n1. [● P1] [epic] e-1: The epic\n2. [● P1] [task] e-1.2: Current one\n3. [● P2] [task] e-1.3: Closed one\n4. [● P2] [task] e-1.4: Next one"
    messages = [user("go"), *bash("r", "bd ready", ready), *bash("u", "bd update e-1.2 --status in_progress", "ok"), *bash("c", "bd close e-1.3", "ok")]
    nine = section(render(messages), 9)
    assert "   - start the next task the tracker lists as ready: e-1.4 — Next one\n" in nine
    assert "Next: Finish the tracker item e-1.2, then close it (bd close e-1.2, as the session closed e-1.3), close the parent e-1 if all its children are closed." in nine


def test_up_to_names_sections_8_and_9_as_the_partial_prompt_does() -> None:
    text = render([user("go")], up_to=True)
    assert "8. Work Completed:" in text and "9. Context for Continuing Work:" in text


# -- calls, commands and paths --------------------------------------------------------------


def test_a_command_is_shown_whole_or_by_its_program() -> None:
    assert command_text("make   test\n  -v") == "`make test -v`"
    long = "git commit -m '" + "x" * COMMAND_CHARS + "'"
    assert command_text(long) == f"a `git commit` command of {len(long):,} characters"
    assert command_text("x" * (COMMAND_CHARS + 1)) == f"a `{'x' * (COMMAND_CHARS + 1)}` command of {COMMAND_CHARS + 1:,} characters"
    assert command_text("y" * COMMAND_CHARS) == f"`{'y' * COMMAND_CHARS}`"
    assert command_text("cd /x && echo </summary>") == "`cd /x && echo &lt;/summary&gt;`"


def test_describe_call() -> None:
    def block(name: str, **tool_input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": "t", "name": name, "input": tool_input}

    assert describe_call(block("Edit", file_path="/r/src/a.py"), root="/r") == "Edit src/a.py"
    assert describe_call(block("Read", file_path="/other/b.py"), root="/r") == "Read /other/b.py"
    assert describe_call(block("Bash", command="pytest -q")) == "Bash `pytest -q`"
    assert describe_call(block("Bash", command="pytest " + "x" * 60), 40) == "Bash a `pytest` command of 67 characters"
    assert describe_call(block("Grep", pattern="TODO")) == "Grep: TODO"
    assert describe_call(block("WebFetch", url="https://x.io", prompt="p")) == "WebFetch: https://x.io"
    assert describe_call(block("Mystery", n=1)) == "Mystery"
    assert describe_call({"name": "Odd", "input": "text"}) == "Odd"
    assert relative("/r/a.py", "/r") == "a.py" and relative("/rx/a.py", "/r") == "/rx/a.py" and relative("/r/a.py", "") == "/r/a.py"


def test_the_root_is_the_deepest_folder_holding_two_thirds_of_the_files() -> None:
    paths = ["/home/u/p/lib/a.py", "/home/u/p/lib/b.py", "/home/u/p/test/c.py", "/home/u/.plans/x.md"]
    messages = [m for n, p in enumerate(paths) for m in read(f"r{n}", p)]
    assert _Renderer(read_handover(messages), up_to=False).root == "/home/u/p"
    one_folder = [m for n, p in enumerate(["/home/u/p/lib/a.py", "/home/u/p/lib/b.py"]) for m in read(f"r{n}", p)]
    assert _Renderer(read_handover(one_folder), up_to=False).root == "/home/u/p"  # paths keep their folder
    shallow = [m for n, p in enumerate(["/a/b.py", "/a/c.py"]) for m in read(f"r{n}", p)]
    assert _Renderer(read_handover(shallow), up_to=False).root == ""
    assert _Renderer(read_handover(read("r", "/home/u/p/lib/a.py")), up_to=False).root == ""
    relative_paths = [m for n, p in enumerate(["lib/a.py", "lib/b.py"]) for m in read(f"r{n}", p)]
    assert _Renderer(read_handover(relative_paths), up_to=False).root == ""


# -- size and levels ------------------------------------------------------------------------


def test_the_budget() -> None:
    assert summary_budget(100_000, 900, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 4_000
    assert summary_budget(40_000, 900, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 2_000
    assert summary_budget(10_000, 300, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 1_500
    assert summary_budget(2_000, 100, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 1_000
    assert summary_budget(400, 100, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 400
    assert summary_budget(400, 3_000, max_tokens=4_000, target_ratio=0.05, min_tokens=1_000) == 3_000
    assert summary_budget(8_000, 100, max_tokens=4_000, target_ratio=0.01, min_tokens=0) == 1_500
    assert summary_budget(8_000, 100, max_tokens=1_000, target_ratio=0.5, min_tokens=0) == 1_000


def test_the_richest_level_that_fits_is_kept_and_the_cap_holds() -> None:
    messages = [*work_session(), *read("big", "/x/big.txt", "y" * 200_000)]
    rich = render(messages, RICH)
    leanest = render(messages, LEANEST)
    assert rough_token_count(leanest) < rough_token_count(rich)
    assert extractive_summary(messages) == rich
    assert extractive_summary(messages, max_tokens=rough_token_count(rich) - 1) != rich
    bare = _Renderer(read_handover(messages), up_to=False).render(LEANEST, _Cuts(files=0, earlier=0, prompts=0, errors=0, spec_lines=0, recent=0, answered=0))
    assert lean_summary_tokens(messages) == rough_token_count(bare) < rough_token_count(leanest)
    short = [user("a"), *edit("e", "/x/a.py", "x")]
    whole = _Cuts(recent=0, answered=0)
    # A cut list leaves a "(N more)" line: the shorter of the bare and the whole is the floor.
    shapes = (whole, _Cuts(files=0, earlier=0, prompts=0, carried=1, errors=0, spec_lines=0, recent=0, answered=0))
    assert lean_summary_tokens(short) == min(rough_token_count(render(short, LEANEST, cuts)) for cuts in shapes)
    big: list[Any] = [user(f"request {n}: " + "please do it carefully " * 30) for n in range(120)]
    for n in range(60):
        big += edit(f"e{n}", f"/r/mod{n}.py", "def f():\n    return 1\n" * 10)
    text = extractive_summary(big, max_tokens=2_000)
    assert rough_token_count(text) <= 2_000
    assert "request 119" in section(text, 1) and "more)" in section(text, 6)


# -- determinism ----------------------------------------------------------------------------

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_handover_summary import work_session
from unbounded.compaction.extractive import extractive_summary
print(extractive_summary(work_session()))
"""


def test_the_same_messages_give_the_same_text_under_any_hash_seed() -> None:
    tests = str(Path(__file__).resolve().parent)
    helpers = str(Path(tests) / "helpers")
    texts = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join([helpers, tests])}
        run = subprocess.run([sys.executable, "-c", SCRIPT, tests], capture_output=True, text=True, env=env, check=True)
        texts.add(run.stdout)
    assert len(texts) == 1 and "1. Primary Request and Intent:" in texts.pop()


@pytest.mark.parametrize("level", _LEVELS)
def test_every_level_has_the_nine_headings(level: _Level) -> None:
    from unbounded.compaction.summary_guard import missing_sections

    assert missing_sections(render(work_session(), level)) == ()
