"""The offline hand-over reads the latest request with the message it answers, shows the last
steps as they happened, and does not present what the agent said before a change as the state.

Small conversations written for these rules: an approval after a numbered proposal, a test
run failing at the end, an edit after a sentence it made stale, a Codex-shaped session.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from conversation import bash, edit, read, result, says, use, user, write

from unbounded.compaction.extractive import (
    _LEVELS,
    RECENT_MIN_CHARS,
    RECENT_ROOM_CHARS,
    SHORT_REQUEST_WORDS,
    _Cuts,
    _Renderer,
    extractive_summary,
)
from unbounded.compaction.handover import approves, read_handover

RICH, MID, LEAN, LEANEST = _LEVELS

PROPOSAL = (
    "The export works. Three gaps remain:\n"
    "1. Add the refunds columns to shop/exporter.py\n"
    "2. Write tests for the export button\n"
    "3. Update docs/export.md with the new columns\n"
    "Shall I go ahead?"
)


def render(messages: list[Any], level: Any = RICH) -> str:
    return _Renderer(read_handover(messages), up_to=False).render(level, _Cuts())


def section(text: str, number: int) -> str:
    start = text.index(f"\n{number}. ")
    end = text.find(f"\n\n{number + 1}. ", start)
    return text[start : end if end >= 0 else len(text)]


def proposed(answer: str) -> list[Any]:
    return [user("Audit the exporter."), *read("r", "/w/shop/exporter.py"), says(PROPOSAL), user(answer)]


@pytest.mark.parametrize(
    "request_text",
    ["yes", "Yes to all", "yes please", "go ahead", "Do it.", "please do", "ok, sounds good",
     "yes, do 1 and 3", "ja bitte", "oui", "sí", "continue"],
)
def test_short_requests_that_add_no_task_approve(request_text: str) -> None:
    assert approves(request_text)


@pytest.mark.parametrize(
    "request_text",
    ["thanks", "no", "Fix the parser instead.", "yes please add exhaust control and rename M42 as Aux",
     "yes " + "please " * 12, ""],
)
def test_requests_with_a_task_of_their_own_or_no_approving_word_do_not(request_text: str) -> None:
    assert not approves(request_text)


def test_an_approval_quotes_the_proposal_whole_and_starts_the_next_step_at_its_first_item() -> None:
    text = render(proposed("Yes to all"))
    one = section(text, 1)
    assert (
        "   The agent's message this request approves (its words, right before it):\n"
        "     The export works. Three gaps remain:\n"
        "     1. Add the refunds columns to shop/exporter.py\n"
        "     2. Write tests for the export button\n"
        "     3. Update docs/export.md with the new columns\n"
        "     Shall I go ahead?"
    ) in one
    nine = section(text, 9)
    assert nine.startswith(
        '\n9. Optional Next Step:\n   Next: Item 1 of the proposal the user approved ("Yes to all", '
        'section 1), not reported done since: "Add the refunds columns to shop/exporter.py".\n'
        "   Then:\n"
        '   - item 2 of the proposal the user approved ("Yes to all", section 1), not reported done '
        'since: "Write tests for the export button"\n'
    )
    # Section 8 does not quote it again.
    assert section(text, 8).count("Three gaps remain") == 0


def test_the_items_done_since_and_the_items_not_chosen_are_no_next_step() -> None:
    done_first = [*proposed("yes please"), *edit("e", "/w/shop/exporter.py", "refunds = []")]
    nine = section(render(done_first), 9)
    assert "Next: Item 2 of the proposal" in nine and "refunds columns" not in nine
    reported = [
        *proposed("go ahead"),
        *edit("e", "/w/shop/exporter.py", "refunds = []"),
        says("Wrote the tests for the export button; they pass."),
    ]
    assert "Next: Item 3 of the proposal" in section(render(reported), 9)
    chosen = section(render(proposed("yes, do 3")), 9)
    assert 'Next: Item 1 of the proposal the user approved ("yes, do 3", section 1), not reported done since: "Update docs/export.md' in chosen
    assert "refunds columns" not in chosen


def test_an_approval_without_a_numbered_list_points_at_the_quoted_message() -> None:
    messages = [user("Audit it."), says("I could move the cache into its own module. Want that?"), user("do it")]
    nine = section(render(messages), 9)
    assert nine.startswith(
        '\n9. Optional Next Step:\n   Next: Do what the agent proposed in its message quoted in section 1: the user\'s "do it" approves it.'
    )


def test_a_request_with_its_own_task_is_shown_with_the_message_it_answers_but_approves_nothing() -> None:
    text = render(proposed("Fix the parser instead."))
    assert "   The agent's message this request answers (its words, right before it):\n     The export works." in section(text, 1)
    assert "proposal" not in section(text, 9)
    handover = read_handover(proposed("Fix the parser instead."))
    assert handover.answered is not None and not handover.approves and handover.proposal == []


def test_no_message_is_answered_when_the_turn_ended_in_a_call_or_nothing_was_said() -> None:
    interrupted = [user("Audit it."), says("Let me look."), *read("r", "/w/a.py"), user("yes")]
    assert read_handover(interrupted).answered is None
    assert "this request" not in section(render(interrupted), 1)
    assert read_handover([user("one"), user("yes")]).answered is None
    earlier = [user("one"), says("Shall I?"), user("two"), *read("r", "/w/a.py"), user("yes")]
    assert read_handover(earlier).answered is None  # "Shall I?" answered the request "two"


def test_the_quote_is_cut_at_a_line_end_and_a_long_request_gets_a_quarter_of_the_room() -> None:
    long_message = "\n".join(f"Line {n} of a long status report, written out in full." for n in range(200))
    messages = [user("Report."), says(long_message), user("yes")]
    def quoted(text: str) -> tuple[int, str]:
        """The characters of the quote's lines, and the line that ends it."""
        lines = text.split("right before it):\n", 1)[1].splitlines()
        end = next(n for n, line in enumerate(lines) if line.startswith("     … ("))
        return sum(len(line.strip()) + 1 for line in lines[:end]), lines[end]

    kept, marker = quoted(section(render(messages, LEANEST), 1))
    assert marker.endswith(" more lines)")
    assert LEANEST.answered_chars - 60 < kept <= LEANEST.answered_chars
    asked = " ".join(["word"] * (SHORT_REQUEST_WORDS + 1))
    long_request = section(render([user("Report."), says(long_message), user(asked)], LEANEST), 1)
    assert LEANEST.answered_chars // 4 - 60 < quoted(long_request)[0] <= LEANEST.answered_chars // 4
    at_the_bound = " ".join(["word"] * SHORT_REQUEST_WORDS)
    assert len(section(render([user("Report."), says(long_message), user(at_the_bound)], LEANEST), 1)) > len(long_request)


def test_a_test_run_failing_at_the_end_is_shown_in_full_with_its_cause_as_the_next_step() -> None:
    failure = (
        "FAILED tests/test_export.py::test_dates - KeyError: 'date'\n"
        "E   KeyError: 'date'\n"
        "1 failed, 9 passed in 0.4s"
    )
    messages = [
        user("Add the date column to the export."),
        says("I will add the column to the query first."),
        *edit("e", "/w/shop/queries.py", "def rows():\n    return Order.objects.values('id')"),
        *bash("t", "pytest -q", failure, error=True),
    ]
    text = render(messages)
    assert section(text, 8).endswith(
        "   - Edit /w/shop/queries.py\n"
        "       | (its code is shown in section 3)\n"
        "     -> ok\n"
        "   - Bash `pytest -q`\n"
        "     -> failed:\n"
        "       FAILED tests/test_export.py::test_dates - KeyError: 'date'\n"
        "       E KeyError: 'date'\n"
        "       1 failed, 9 passed in 0.4s"
    )
    assert section(text, 9).startswith(
        "\n9. Optional Next Step:\n   Next: Fix \"FAILED tests/test_export.py::test_dates - KeyError: 'date'\""
    )


def test_a_sentence_the_last_edit_made_stale_is_not_shown_as_a_finding() -> None:
    stale = "The `timeout` parameter is still missing in fetch(), so slow hosts hang."
    about_file = "The file config.py has no defaults for the retries."
    kept = "The cache holds 3 entries per host after the warm-up."
    messages = [
        user("Make fetch robust."),
        says(f"{stale} {about_file} {kept}"),
        *read("r", "/w/net.py"),
        *edit("e", "/w/net.py", "def fetch(url, timeout=10):\n    ..."),
        *write("w", "/w/config.py", "RETRIES = 3\n"),
        *bash("b", "ls", "net.py"),
    ]
    handover = read_handover(messages)
    assert [f for _, f in handover.findings] == [kept]
    assert handover.stale_findings == 2
    eight = section(render(messages, replace(RICH, recent_chars=0, reports=0)), 8)
    assert kept in eight and "still missing" not in eight and "no defaults" not in eight
    # Before any later change the same sentences are findings; a change before them is none.
    before = read_handover(messages[:3])
    assert [f for _, f in before.findings] == [stale, about_file, kept]
    changed_first = [user("Make fetch robust."), *edit("e", "/w/net.py", "def fetch(url, timeout=10):"), says(stale)]
    assert [f for _, f in read_handover(changed_first).findings] == [stale]


def test_an_intention_stated_before_the_latest_request_is_not_the_next_step() -> None:
    old = "Next I will refactor the cache layer into its own module."
    messages = [user("Tidy up."), says(old), user("Now fix the login bug.")]
    assert "refactor the cache" not in section(render(messages), 9)
    since = [user("Tidy up."), user("Now fix the login bug."), says("Next I will read the login view first.")]
    assert 'Next: What the agent said it would do next: "Next I will read the login view first."' in section(render(since), 9)
    after_calls = [*since, *read("r", "/w/login.py")]
    assert "The agent's last stated intention (1 tool call(s) ago" in section(render(after_calls), 9)
    old_with_calls = [user("Tidy up."), says(old), *read("r", "/w/cache.py"), user("Now fix the login bug.")]
    assert "refactor the cache" not in section(render(old_with_calls), 9)


def _shell(tool_id: str, script: str, output: str, exit_code: int = 0) -> list[Any]:
    """A Codex `shell` call as the rollout reader gives it (the script of `bash -lc`) and its
    JSON-wrapped output."""
    envelope = json.dumps({"output": output, "metadata": {"exit_code": exit_code, "duration_seconds": 0.1}})
    return [use(tool_id, "shell", command=script), result(tool_id, envelope)]


def test_a_codex_session_shows_the_patch_head_and_the_unwrapped_output() -> None:
    patch = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: src/dates.py\n+def parse(text):\n+    return text\n*** End Patch\nPATCH"
    messages = [
        user("Add a date parser."),
        *_shell("p", patch, "Success. Updated the following files:\nA src/dates.py\n"),
        *_shell("t", "pytest -q", "....\n4 passed in 0.1s\n"),
        says("Added src/dates.py with parse(); the 4 tests pass. Shall I wire it into the CLI?"),
        user("yes please"),
    ]
    text = render(messages)
    eight = section(text, 8)
    assert (
        "   - shell src/dates.py\n"
        "       | apply_patch <<'PATCH'\n"
        "       | *** Begin Patch\n"
        "       | *** Add File: src/dates.py\n"
        "       | +def parse(text):\n"
        "       | +    return text\n"
        "       | *** End Patch\n"
        "       | … (1 more lines)\n"
        "     -> ok\n"
    ) in eight
    assert "   - shell `pytest -q`\n     -> ok:\n       ....\n       4 passed in 0.1s\n" in eight
    assert "   - The agent: (its message quoted in section 1)\n   - The user: \"yes please\"" in eight
    assert "Shall I wire it into the CLI?" in section(text, 1)
    assert "Do what the agent proposed in its message quoted in section 1" in section(text, 9)


def test_the_last_steps_take_the_room_the_other_sections_leave() -> None:
    many = [m for n in range(60) for m in bash(f"b{n}", f"echo {n}", f"printed {n} " + "x" * 80)]
    messages = [user("go"), *many]
    renderer = _Renderer(read_handover(messages), up_to=False)
    bare = len(renderer.render(replace(RICH, recent_chars=0), _Cuts()))
    roomy = renderer.render(RICH, _Cuts(), room=bare + 3_000)
    assert bare + 2_500 < len(roomy) <= bare + 3_000 + 200
    tight = renderer.render(RICH, _Cuts(), room=bare)  # no room left: the floor holds
    assert bare + RECENT_MIN_CHARS - 200 < len(tight) <= bare + RECENT_MIN_CHARS + 200
    assert len(renderer.render(RICH, _Cuts(), room=10**6)) <= bare + RECENT_ROOM_CHARS + 200
    lean_bare = len(renderer.render(replace(LEANEST, recent_chars=0), _Cuts()))
    assert len(renderer.render(LEANEST, _Cuts(), room=10**6)) > lean_bare + LEANEST.recent_chars + 2_000
    assert len(renderer.render(RICH, _Cuts(recent=5), room=10**6)) <= bare + 500 + 200


def test_the_offline_summary_keeps_its_budget_with_the_new_sections() -> None:
    long_message = "\n".join(f"Line {n} of a long status report, written out in full." for n in range(400))
    many = [m for n in range(200) for m in bash(f"b{n}", f"echo {n}", f"printed {n} " + "x" * 200)]
    messages = [user("Report."), says(long_message), user("yes"), *many]
    for cap in (4_000, 1_500, 600):
        text = extractive_summary(messages, max_tokens=cap)
        assert len(text) / 4 <= cap + 1, cap


def test_output_lines_keep_their_indentation() -> None:
    traceback = 'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n    main()\nKeyError: 1'
    eight = section(render([user("run it"), *bash("r", "python app.py", traceback, error=True)]), 8)
    assert '       Traceback (most recent call last):\n         File "app.py", line 3, in <module>\n           main()\n' in eight


def test_the_offline_notes_state_no_next_step_older_than_the_latest_request() -> None:
    from unbounded.compaction.offline_notes import offline_notes
    from unbounded.policy import Policy

    old = [user("Tidy up."), says("Next I will refactor the cache layer into its own module."), user("Now fix the login bug.")]
    assert "- Next step, as last stated: " not in offline_notes(None, old, policy=Policy())
    since = [user("Now fix the login bug."), says("Next I will read the login view first.")]
    assert "- Next step, as last stated: " in offline_notes(None, since, policy=Policy())


def test_a_finding_is_stale_when_a_later_change_assigns_its_name_and_stays_when_it_only_reads_it() -> None:
    finding = "The `MAX_RETRIES` setting is 0 here, so nothing is retried."
    def later(code: str) -> list[Any]:
        return [user("Retry."), says(finding), *read("r", "/w/net.py"), *edit("e", "/w/net.py", code)]
    assert read_handover(later("MAX_RETRIES = 5\n")).findings == []
    assert [f for _, f in read_handover(later("for _ in range(MAX_RETRIES): ...\n")).findings] == [finding]


def test_the_git_list_shows_the_level_s_newest_commits_and_pushes_and_counts_the_earlier_ones() -> None:
    messages: list[Any] = [user("Ship the features.")]
    for i in range(20):
        output = f"[main {i:07x}] feature {i}\n 1 file changed, 2 insertions(+)\n"
        pushed = f"To github.com:o/r.git\n   {i:07x}..{i + 1:07x}  main -> main{i}\n"
        messages += [*bash(f"c{i}", f"git commit -am 'feature {i}'", output), *bash(f"p{i}", "git push", pushed)]
    for level, shown in ((RICH, 12), (LEANEST, 3)):
        five = section(render(messages, level), 5)
        assert five.count("   - Committed ") == shown and five.count("   - Pushed: ") == shown
        assert f"Committed {19:07x} on main" in five and f"Committed {19 - shown:07x} " not in five
        assert f"   - {20 - shown} earlier commits: 0000000, 0000001, " in five
        assert f"   - {20 - shown} earlier pushes: " in five and "main -> main0" in five


def test_the_commands_the_last_steps_leave_out_are_named_newest_last_within_their_room() -> None:
    messages: list[Any] = [user("Run the checks.")]
    for i in range(40):
        messages += bash(f"b{i}", f"./check.sh --part {i}", f"part {i} output line\n" * 20)
        if i == 30:
            messages += bash("again", "./check.sh --part 30", "again")
    renderer = _Renderer(read_handover(messages), up_to=False)
    heading, earlier, *steps = renderer.recent_steps(2_000)[0]
    assert heading.endswith("earlier ones are in the sections above, and their commands here):")
    assert earlier.startswith("   Commands of the earlier steps (the ")
    assert " older not listed; newest last): " in earlier and "`./check.sh --part 0`" not in earlier
    newest_left_out = int(steps[0].split("--part ")[1].rstrip("`")) - 1
    assert earlier.endswith(f"`./check.sh --part {newest_left_out}`")
    assert earlier.count("`./check.sh --part 30`") == 1
    assert sum(len(line) + 1 for line in [earlier, *steps]) <= 2_000
    # No room for one command: the heading says the earlier steps are not shown.
    assert renderer.recent_steps(300)[0][0].endswith("the 41 earlier ones are not shown):")
    # Every step fitting, there is no such line.
    assert renderer.recent_steps(100_000)[0][0] == "   Every step as it happened (newest last):"


def test_the_last_git_status_is_unwrapped_from_codex_s_envelope() -> None:
    status = "".join(f"M file{n}.py\n" for n in range(11))
    five = section(render([user("Commit it."), *_shell("s", "git status -s", status)]), 5)
    assert "       M file0.py\n" in five and "file9.py" in five and "       … (1 more lines)" in five
    assert '{"output"' not in five


def test_the_earlier_commands_take_only_the_room_they_need_from_the_last_steps() -> None:
    talk = [says(f"Step {n}: " + "looked at the scroll handling once more " * 4) for n in range(30)]
    messages = [user("Look."), *bash("a", "make", "ok"), *bash("b", "make test", "ok"), *talk]
    heading, earlier, *steps = _Renderer(read_handover(messages), up_to=False).recent_steps(2_000)[0]
    assert earlier == "   Commands of the earlier steps (newest last): `make`, `make test`"
    # The steps fill the rest: one more agent text would not fit.
    assert 2_000 - len(steps[-1]) - 1 < sum(len(line) + 1 for line in [heading, earlier, *steps]) <= 2_000


def test_when_more_steps_drop_out_than_first_counted_their_commands_still_fit_the_room() -> None:
    # Taking the first count's room for the commands leaves out one more step, whose command
    # makes the line longer than that room: the line then gets all of its room instead.
    spec = [(29, 2), (47, 1), (38, 1), (58, 2), (2, 1), (2, 3), (35, 1), (57, 2), (44, 1), (28, 3),
            (2, 3), (15, 2), (32, 3), (15, 2)]  # fmt: skip
    messages: list[Any] = [user("go")]
    for n, (width, lines) in enumerate(spec):
        messages += bash(f"b{n}", f"cmd{n} " + "x" * width, "out\n" * lines)
    shown = _Renderer(read_handover(messages), up_to=False).recent_steps(703)[0]
    assert shown[0].startswith("   The last ") and shown[1].startswith("   Commands of the earlier")
    assert sum(len(line) + 1 for line in shown) <= 703
