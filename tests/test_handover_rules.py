"""One rule at a time, at its edges: the readings of `compaction.handover` and the pieces of the
offline hand-over's text (`compaction.extractive`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conversation import bash, edit, read, result, says, use, user, write

from unbounded.compaction.extractive import (
    _LEVELS,
    COMMAND_CHARS,
    DEFINITIONS_SHOWN,
    ENV_KEYS_SHOWN,
    LINE_CHARS,
    LONG_LINE_CHARS,
    MADE_SHOWN,
    NOTIFICATIONS_SHOWN,
    QUOTE_CHARS,
    RECENT_ERROR_LINES,
    RECENT_INPUT_LINES,
    REPORT_MIN_CHARS,
    SEARCHES_SHOWN,
    STATUS_FILES_SHOWN,
    STATUS_LINES,
    TRACKER_SHOWN,
    UNRESOLVED_SHOWN,
    _Cuts,
    _excerpt_lines,
    _previous_intent,
    _Renderer,
    _text_block,
    command_text,
    describe_call,
    extractive_summary,
    summary_budget,
)
from unbounded.compaction.handover import (
    STATUS_FILE,
    STATUS_ITEMS,
    _name,
    _stem,
    open_items,
    plan_runs,
    read_handover,
    request_steps,
    written_code,
)
from unbounded.tokens.estimate import rough_token_count

RICH, MID, LEAN, LEANEST = _LEVELS
NO_STEPS = replace(RICH, recent_chars=0, answered_chars=0)
"""The richest level without the last steps and the answered message: what section 8 says
of work older than the steps it quotes."""


def render(messages: list[Any], level: Any = RICH, cuts: _Cuts | None = None) -> str:
    return _Renderer(read_handover(messages), up_to=False).render(level, cuts or _Cuts())


def section(text: str, number: int) -> str:
    start = text.index(f"\n{number}. ")
    end = text.find(f"\n\n{number + 1}. ", start)
    return text[start : end if end >= 0 else len(text)]


# -- readings ---------------------------------------------------------------------------------


def test_file_names_and_stems() -> None:
    assert _name("C:\\Work\\Src\\Parser.PY") == "parser.py"
    assert _name("lib/sub/") == "sub" and _name("a/b.c/d.py") == "d.py"
    assert _stem("src/parser.spec.ts") == "parser" and _stem("Makefile") == "makefile"


def test_written_code_reads_every_kind_of_write() -> None:
    assert written_code({"input": {"new_source": "cell = 1"}}) == "cell = 1"
    assert written_code({"input": {"text": "not code"}}) == ""


def test_files_written_after_a_point_exclude_the_write_at_it() -> None:
    handover = read_handover([*edit("a", "/r/a.py", "x"), *edit("b", "/r/b.py", "y")])
    first, _second = sorted(handover.changes, key=lambda c: c.last.position)
    assert handover.written_after(first.last.position) == ["/r/b.py"]
    assert handover.written_after(first.last.position - 1) == ["/r/b.py", "/r/a.py"]


def test_request_items_lose_their_trailing_punctuation() -> None:
    assert read_handover([user("Do 1) parse, 2) store; 3) ,report")]).request_items == ["parse", "store", ",report"]


def test_plan_runs_edges() -> None:
    assert plan_runs("1. a\n2. b") == [("", ["a", "b"])]
    assert plan_runs("Next:\n1. a\n  more of a\n- sub point\n2. b") == [("Next:", ["a", "b"])]
    assert plan_runs("Next:\n1. a\nplain line\n2. b") == []
    assert plan_runs("Next:\n1. a\n2. b\n\nAfter.\n1. c\n2. d") == [("Next:", ["a", "b"]), ("After.", ["c", "d"])]


def test_a_list_without_words_about_what_comes_next_is_no_plan() -> None:
    assert read_handover([user("go"), says("Done:\n1. a.py\n2. b.py")]).plan is None
    assert read_handover([user("go"), says("1. a.py\n2. b.py")]).plan is None
    plan = read_handover([user("go"), says("Next:\n1. `a.py`\n2. **B**\n3. done")]).plan
    assert plan is not None and [i.names_files for i in plan.items] == [True, True, False]


def test_decisions_and_next_steps_at_their_length_limits() -> None:
    nineteen = "x because of this!"  # 18 characters
    assert len(nineteen + "!!") == 20
    handover = read_handover([says(nineteen + "!"), says(nineteen + "!!")])
    assert handover.decisions == [nineteen + "!!"]
    dupes = read_handover([says("We chose X because it is fast."), says("we  chose x because it is FAST.")])
    assert dupes.decisions == ["We chose X because it is fast."]
    four = read_handover([says("Next I will go.")])
    five = read_handover([says("Next I will go home.")])
    assert four.next_step is None and five.next_step == (1, "Next I will go home.")
    latest_text = read_handover([says("Next I will do step one."), says("Done. Now let me run step two.")])
    assert latest_text.next_step == (2, "Now let me run step two.")


def test_tracker_edges() -> None:
    messages: list[Any] = [
        *bash("v", "gh issue view 12", "title: Crash\nbody"),
        *bash("s", "bd show x-1", ""),
        *bash("e", "gh issue edit 12 --add-label bug", "ok"),
        *bash("o", "bd list --status open", "○ x-2 · something"),
    ]
    handover = read_handover(messages)
    items = {i.id: i for i in handover.tracker_items}
    assert items["12"].spec == "title: Crash\nbody" and items["12"].state == "seen"
    assert items["x-1"].spec == "" and items["x-1"].title == ""
    assert list(items) == ["12", "x-1"]
    assert [c.tool_id for c in handover.tracker] == ["v", "s", "e", "o"]


def test_task_tools_edges() -> None:
    messages: list[Any] = [
        use("c1", "TaskCreate", subject="First", description="d1"),
        result("c1", "Task #7 created successfully"),
        use("c2", "TaskCreate", description="no subject"),
        result("c2", "created"),
        use("c3", "TaskCreate", subject="Broken"),
        result("c3", "failed", error=True),
        use("c4", "TaskCreate", subject="Odd input"),
        result("c4", "ok"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c5", "name": "TaskUpdate", "input": "not a mapping"}]},
        result("c5", "ok"),
    ]
    handover = read_handover(messages)
    items = [(i.id, i.state, i.title) for i in handover.tracker_items]
    assert items == [("7", "pending", "First"), ("2", "pending", ""), ("3", "pending", "Odd input")]
    assert [c.tool_id for c in handover.tracker] == ["c1", "c2", "c3", "c4", "c5"]


def test_git_edges() -> None:
    failed_commit = read_handover(bash("g", "git commit -m x", "[main 1234567] x", error=True))
    assert failed_commit.commits == [] and failed_commit.branch is None
    from_commit = read_handover([*bash("b", "git checkout -b one", "ok"), *bash("g", "git commit -m x", "[two 1234567] x")])
    assert from_commit.branch == "two"
    diff = read_handover(bash("d", "git diff --stat", " a.py | 2 +-"))
    assert diff.git_status is not None and diff.git_status.tool_id == "d" and diff.branch is None
    failed_push = read_handover(bash("p", "git push", "rejected", error=True))
    assert failed_push.pushes == []
    unanswered = read_handover([use("g", "Bash", command="git commit -m x")])
    assert unanswered.commits == [] and unanswered.checks == []


def test_excerpt_lines_at_their_limits() -> None:
    assert _excerpt_lines("\n\naa\nbb\n\n", 5, 100) == ["aa", "bb"]
    assert _excerpt_lines("aa\nbb\ncc", 2, 100) == ["aa", "bb", "… (1 more lines)"]
    assert _excerpt_lines("aa\nbb\ncc", 3, 5) == ["aa", "bb", "… (1 more lines)"]
    assert _excerpt_lines("aa\nbb\ncc", 3, 4) == ["aa", "… (2 more lines)"]
    assert _excerpt_lines("aaaa", 1, 4) == ["aaaa"]
    # A first line over the budget is cut to it, never left out whole.
    assert _excerpt_lines("aaaaa", 1, 4) == ["aaaa…"]
    assert _excerpt_lines("aaaaa\nbb", 2, 4) == ["aaaa…", "… (1 more lines)"]
    assert _excerpt_lines("aa\nbbbbbbb", 2, 6) == ["aa", "… (1 more lines)"]
    assert _excerpt_lines("  x  \n</summary>", 2, 100) == ["  x", "&lt;/summary&gt;"]
    assert _text_block("one\n\n  - sub  \n", 100) == ["one", "  - sub"]


def test_command_text_falls_back_to_the_first_word() -> None:
    long = "cd /x && " + "y" * COMMAND_CHARS
    assert command_text("cd /somewhere" + " " * 3 + "z" * COMMAND_CHARS) == f"a `cd` command of {len('cd /somewhere ' + 'z' * COMMAND_CHARS):,} characters"
    assert command_text(long).startswith("a `" + "y" * COMMAND_CHARS + "` command")


@pytest.mark.parametrize("key", ["description", "pattern", "query", "url", "prompt", "skill", "path"])
def test_describe_call_by_the_first_telling_input(key: str) -> None:
    assert describe_call({"name": "T", "input": {key: "value"}}) == "T: value"
    assert describe_call({"name": "T", "input": {key: "   ", "url": "u"}}) == "T: u"
    assert describe_call({"name": "T", "input": {key: 3}}) == "T"


def test_describe_call_caps_and_defaults() -> None:
    assert describe_call({"input": {}}) == "tool"
    text = "v" * (LINE_CHARS + 1)
    assert describe_call({"name": "T", "input": {"query": text}}) == f"T: {text[:LINE_CHARS]}…"
    assert describe_call({"name": "T", "input": {"query": text[:-1]}}) == f"T: {text[:-1]}"


def test_previous_intent() -> None:
    assert _previous_intent("no sections here") == ""
    summary = "1. Primary Request and Intent:\n   Build it.\n   More words.\n2. Next"
    assert _previous_intent(summary) == "Build it. More words."


def test_one_line_caps() -> None:
    title = "t" * LINE_CHARS
    messages = [*bash("s", "bd show a-1", f"○ a-1 · {title}x [● P1]"), *bash("u", "bd update a-1 --status in_progress", "ok")]
    seven = section(render(messages), 7)
    assert f"a-1: in progress — {title}…" in seven
    todo = "d" * LINE_CHARS
    listed = section(render([use("t", "TodoWrite", todos=[{"title": todo, "status": "open"}, {"description": "by description"}])]), 7)
    assert f"   - [open] {todo}\n" in listed and "   - [pending] by description" in listed


def test_long_line_and_quote_caps() -> None:
    line = "e" * LONG_LINE_CHARS
    four = section(render(bash("b", "make", f"error: {line}")), 4)
    assert f"       error: {line[:LONG_LINE_CHARS - 7]}…" in four
    words = "w" * QUOTE_CHARS
    stated = section(render([user("go"), says(f"Next I will do {words}"), *read("r", "/a.py")]), 9)
    assert f'"Next I will do {words[:QUOTE_CHARS - 15]}…"' in stated


def test_section_caps_on_lists() -> None:
    code = "\n".join(f"def f{n}():\n    pass" for n in range(DEFINITIONS_SHOWN + 1))
    three = section(render(write("w", "/r/a.py", code)), 3)
    assert f"f{DEFINITIONS_SHOWN - 1}" in three and f"f{DEFINITIONS_SHOWN}," not in three and f"f{DEFINITIONS_SHOWN}\n" not in three
    tracker = [m for n in range(TRACKER_SHOWN + 1) for m in bash(f"c{n}", f"bd close t-{n}", "ok")]
    seven = section(render(tracker), 7)
    assert "   - t-0: closed" not in seven and "   - t-1: closed" in seven
    note = "<task-notification>\n<task-id>k{n}</task-id>\n<status>completed</status>\n</task-notification>"
    notes = [user(note.format(n=n)) for n in range(NOTIFICATIONS_SHOWN + 1)]
    eight = section(render(notes), 8)
    assert "task k0" not in eight and "   - task k1: completed" in eight
    status = "\n".join(f"M file{n}.py" for n in range(STATUS_LINES + 1))
    five = section(render(bash("s", "git status -s", status)), 5)
    assert f"file{STATUS_LINES - 1}.py" in five and "       … (1 more lines)" in five


def test_unresolved_errors_are_shown_even_past_the_cut() -> None:
    messages: list[Any] = []
    for n in range(UNRESOLVED_SHOWN + 2):
        messages += bash(f"b{n}", f"tool{n}", f"error: e{n}")
    text = render(messages, RICH, _Cuts(errors=0))
    assert section(text, 4).count("Unresolved:") == UNRESOLVED_SHOWN
    assert f"({UNRESOLVED_SHOWN} earlier errors not shown)" in section(text, 4)
    assert section(text, 9).count("which Bash `tool") == UNRESOLVED_SHOWN
    fixed_only = [*bash("a", "make", "error: a"), *bash("b", "make", "ok")]
    assert "earlier errors not shown" not in section(render(fixed_only, RICH, _Cuts(errors=1)), 4)
    assert "Fixed:" not in section(render(fixed_only, RICH, _Cuts(errors=0)), 4)


def test_files_list_cut_and_read_list_edges() -> None:
    messages = [*edit("a", "/r/a.py", "x"), *edit("b", "/r/b.py", "y")]
    assert "Also changed" not in section(render(messages, RICH, _Cuts(files=2)), 3)
    assert "   - Also changed, earlier: /r/a.py" in section(render(messages, RICH, _Cuts(files=1)), 3)
    reads = [m for n in range(RICH.read_files) for m in read(f"r{n}", f"/x/f{n}.py")]
    assert "more)" not in section(render(reads), 3)
    assert "/x/f1.py, /x/f0.py" in section(render(reads), 3)


def test_languages_are_ranked_by_how_many_files_use_them() -> None:
    more_ts = [*edit("a", "/r/a.ts", "x"), *edit("b", "/r/b.ts", "y"), *edit("c", "/r/c.py", "z")]
    assert "Languages: TypeScript, Python" in section(render(more_ts), 2)
    more_py = [*edit("a", "/r/a.ts", "x"), *edit("b", "/r/b.py", "y"), *edit("c", "/r/c.py", "z"), *read("d", "/r/.bashrc")]
    assert section(render(more_py), 2).endswith("Languages: Python, TypeScript")
    assert "Tools used" not in section(render(more_py), 2)


def test_git_lines_edges() -> None:
    no_stat = section(render(bash("g", "git commit -m x", "[m 1234567] x")), 5)
    assert '   - Committed 1234567 on m: "x"\n' in no_stat
    push_before = section(render([*bash("p", "git push", "a -> b"), *bash("g", "git commit -m x", "[m 1234567] x")]), 5)
    assert "No push recorded after the last commit (1234567)." in push_before
    no_command = section(render([*bash("s", "git status", "clean")]), 5)
    assert "   - The last `git status` (after the last file change):\n       clean" in no_command


def test_checks_and_decisions_cut_by_level() -> None:
    decisions = [says(f"Decision {n} was made because of reason {n}.") for n in range(RICH.decisions + 1)]
    five = section(render(decisions), 5)
    assert "Decision 0 " not in five and "Decision 1 " in five
    none = section(render(decisions, replace(RICH, decisions=0)), 5)
    assert "Decision" not in none


def test_previous_messages_are_quoted_at_the_level_length() -> None:
    long_message = "m" * (LEANEST.request_chars + 5)
    previous = "This session continues an earlier conversation.\n6. All user messages:\n" + f'   - "{long_message}"\n7. Pending'
    six = section(render([user(previous), user("go")], LEANEST), 6)
    assert f'   - "{long_message[:LEANEST.request_chars]}…"' in six


def test_the_agents_words_since_the_latest_request_and_its_last_report() -> None:
    short_report = "r" * (REPORT_MIN_CHARS - 1)
    full_report = "R" * REPORT_MIN_CHARS
    messages = [user("first"), says(full_report), says(short_report), user("second"), says("After the request.")]
    eight = section(render(messages, NO_STEPS), 8)
    assert f"     {full_report}" in eight and short_report not in eight
    assert "   - (its last message) After the request." in eight
    few = section(render([user("go"), *[says(f"word {n} here") for n in range(RICH.reports + 1)]], NO_STEPS), 8)
    assert "word 0 here" not in few and "word 1 here" in few
    no_reports = section(render(messages, replace(NO_STEPS, reports=0)), 8)
    assert "latest words" not in no_reports and "full report" not in no_reports


def test_a_plan_alone_is_not_quoted_twice_but_a_report_with_a_plan_is() -> None:
    plan = "Next:\n1. a.py\n2. b.py"
    only = section(render([user("go"), says(plan)], NO_STEPS), 8)
    assert "latest words" not in only and '     "Next:"' in only
    padded = plan + "\n" + "x" * 200
    both = section(render([user("go"), says(padded)], NO_STEPS), 8)
    assert "latest words" in both and '     "Next:"' in both
    # Among the last steps a plan alone points at the plan's lines instead of repeating them.
    steps = section(render([user("go"), says(plan)]), 8)
    assert "   - The agent: (its plan, shown above with the files changed since)" in steps
    assert steps.count("1. a.py") == 1


def test_the_last_steps_show_each_call_with_its_input_and_result() -> None:
    messages = [*bash("b", "ls", "a\nb"), use("p", "Bash", command="sleep 9")]
    eight = section(render(messages), 8)
    assert eight.endswith(
        "   Every step as it happened (newest last):\n"
        "   - Bash `ls`\n     -> ok:\n       a\n       b\n"
        "   - Bash `sleep 9`\n     -> no result recorded"
    )
    failure = "\n".join(f"error line {n}" for n in range(RECENT_ERROR_LINES + 2))
    failed = section(render(bash("b", "make", failure, error=True)), 8)
    assert f"       error line {RECENT_ERROR_LINES - 1}\n       … (2 more lines)" in failed
    read_last = section(render(read("r", "/a.py", "one\ntwo")), 8)
    assert read_last.endswith("   - Read /a.py\n     -> ok (2 lines)")  # a file's content is not output
    long = "\n".join(f"out {n}" for n in range(20))
    output = section(render(bash("b", "make", long)), 8)
    assert "       out 2\n       … (14 more lines)\n       out 17\n" in output
    new_file = write("w", "/x/new.py", "\n".join(f"line {n}" for n in range(9)))
    written = section(render(new_file, replace(RICH, excerpts=0)), 8)
    assert "   - Write /x/new.py\n       | line 0\n" in written
    assert f"       | line {RECENT_INPUT_LINES - 1}\n       | … (3 more lines)\n     -> ok" in written
    # Code section 3 shows is not quoted again among the last steps.
    shown = render(new_file)
    assert "     line 8\n" in section(shown, 3)
    assert "   - Write /x/new.py\n       | (its code is shown in section 3)\n     -> ok" in section(shown, 8)
    assert "Every step" not in section(render(messages, replace(RICH, recent_chars=0)), 8)


def test_the_last_steps_fill_their_room_from_the_newest_backwards() -> None:
    many = [m for n in range(30) for m in bash(f"b{n}", f"echo {n}", f"printed {n}")]
    eight = section(render([user("go"), *many], replace(RICH, recent_chars=600)), 8)
    assert "printed 29" in eight and "printed 0\n" not in eight
    shown = eight.count("-> ok:")
    assert f"   The last {shown} steps as they happened (newest last; the {31 - shown} earlier ones" in eight
    # The room is a bound: one more step than shown would not fit.
    steps = eight[eight.index("   The last ") :]  # the heading and the earlier commands too
    assert len(steps) + 1 <= 600 < len(steps) + 1 + len("   - Bash `echo 1`\n     -> ok:\n       printed 1\n")
    # The newest step is shown even when it is longer than the room.
    assert "printed 29" in section(render([user("go"), *many], replace(RICH, recent_chars=1)), 8)


def test_what_counts_as_open_work() -> None:
    def finished(messages: list[Any]) -> bool:
        return "may have finished" in section(render(messages), 9)

    answered = [user("go"), says("Done.")]
    assert finished(answered)
    assert not finished([*answered[:1], *bash("b", "make", "error: x"), says("Done.")])
    assert not finished([user("do 1) a 2) b"), says("Done.")])
    assert not finished([user("go"), says("Next:\n1. a.py\n2. b.py")])
    assert not finished([user("go"), *bash("u", "bd update t-1 --status in_progress", "ok"), says("Done.")])
    todo = [use("t", "TodoWrite", todos=[{"content": "a", "status": "pending"}]), result("t", "ok")]
    assert not finished([user("go"), *todo, says("Done.")])
    assert not finished([user("go"), *read("r", "/a.py")])


def test_the_budget_where_the_guard_term_binds() -> None:
    assert summary_budget(4_000, 0, max_tokens=4_000, target_ratio=0.0, min_tokens=0) == 1_000
    assert summary_budget(4_003, 0, max_tokens=4_000, target_ratio=0.0, min_tokens=0) == 1_000


def test_the_lean_level_is_cut_to_the_cap_list_by_list() -> None:
    messages: list[Any] = [user(f"request {n} " + "word " * 40) for n in range(50)]
    for n in range(40):
        messages += edit(f"e{n}", f"/r/m{n}.py", "x")
        messages += bash(f"b{n}", f"tool{n}", f"error: e{n}")
    spec = "\n".join(f"line {n}" for n in range(60))
    messages += [*bash("s", "bd show t-1", spec), *bash("u", "bd update t-1 --status in_progress", "ok")]
    text = extractive_summary(messages, max_tokens=1_500)
    assert rough_token_count(text) <= 1_500
    assert "request 49" in section(text, 1)
    assert "more)" in section(text, 6) and "earlier errors not shown" in section(text, 4)
    generous = extractive_summary(messages, max_tokens=100_000, target_ratio=1.0)
    assert rough_token_count(generous) > 1_500


def test_todo_statuses_open_and_done() -> None:
    statuses = ["in_progress", "pending", "open", "todo", "completed", "done", "complete", "cancelled"]
    todos = [{"content": f"item {status}", "status": status.upper()} for status in statuses]
    handover = read_handover([use("t", "TodoWrite", todos=todos), result("t", "ok")])
    assert [t["content"] for t in handover.open_todos] == [f"item {s}" for s in statuses[:4]]
    assert [t["content"] for t in handover.done_todos] == [f"item {s}" for s in statuses[4:7]]
    seven = section(render([use("t", "TodoWrite", todos=todos), result("t", "ok")]), 7)
    assert "(3 done, 4 open)" in seven and "   Done: item completed; item done; item complete" in seven
    nine = section(render([user("go"), use("t", "TodoWrite", todos=todos), result("t", "ok"), says("ok")]), 9)
    assert "   Next: Finish the todo in progress: item in_progress.\n" in nine and "may have finished" not in nine


def test_the_last_event_is_an_answer_only_after_a_text_of_the_agent() -> None:
    assert read_handover([user("x"), says("done")]).last_event_is_answer
    assert not read_handover([says("done"), user("more")]).last_event_is_answer
    assert not read_handover([says("done"), *read("r", "/a.py")]).last_event_is_answer
    assert not read_handover([says("done"), use("r", "Read", file_path="/a.py")]).last_event_is_answer
    assert not read_handover([{"role": "assistant", "content": [{"type": "text", "text": "  "}]}]).last_event_is_answer


def test_a_cap_below_the_lean_level_cuts_every_list() -> None:
    messages: list[Any] = [user(f"request {n} " + "word " * 40) for n in range(30)]
    for n in range(30):
        messages += edit(f"e{n}", f"/r/m{n}.py", "x")
        messages += bash(f"b{n}", f"tool{n}", f"error: e{n}")
    spec = "\n".join(f"line {n}" for n in range(60))
    messages += [*bash("s", "bd show t-1", spec), *bash("u", "bd update t-1 --status in_progress", "ok")]
    text = extractive_summary(messages, max_tokens=200)
    assert "What t-1 asks for" not in text and "   Changed (30), the most recent first:\n   - (30 more)\n" in text
    assert "   - (30 more)" in section(text, 6) and "earlier errors not shown" in section(text, 4)


def test_a_request_step_is_reported_when_the_agent_s_words_hold_half_its_words() -> None:
    steps = request_steps("Back up server config files, then switch voice", "the server config is saved")
    assert [(s.text, s.reported) for s in steps] == [("Back up server config files", True), ("switch voice", False)]
    third = request_steps("Save server configs, then switch voice", "the server is up")
    assert [s.reported for s in third] == [False, False]  # one word of three


def test_only_a_marked_then_orders_a_request() -> None:
    assert request_steps("Okay, können wir dann einen Test machen? Ja bitte", "") == []
    assert [s.text for s in request_steps("Save it. Dann probieren wir Ottie aus", "")] == ["Save it", "probieren wir Ottie aus"]
    assert [s.text for s in request_steps("Save the file and then run the tests", "")] == ["Save the file", "run the tests"]
    assert request_steps("Save the file then run the tests", "") == []


def test_an_enumerating_request_gives_its_items_as_steps() -> None:
    handover = read_handover([user("Do this: 1) read the gemini report 2) write the concept"), says("The gemini report is read.")])
    assert [(s.text, s.reported) for s in handover.request_steps] == [("read the gemini report", True), ("write the concept", False)]


def test_checks_files_changed_after_are_re_run_first_together() -> None:
    checks = [*bash("t", "pytest -q", "2 passed"), *bash("l", "ruff check", "All checks passed"), *edit("e", "/x/a.py", "x")]
    plan = says("Next I will do these:\n1. **B** - b (/x/b.py)\n2. **C** - c (/x/c.py)")
    nine = section(render([user("go"), plan, *checks]), 9)
    assert "   Next: Re-run `pytest -q`, `ruff check` (1 file(s) changed since: /x/a.py) and fix what they report.\n   Then:\n   - item 1 of its plan" in nine
    # a check run after the last change is not re-run
    fresh = section(render([user("go"), *edit("e", "/x/a.py", "x"), *bash("t", "pytest -q", "2 passed")]), 9)
    assert "Re-run" not in fresh and "re-run" not in fresh
    # the files changed since the earliest of them are named
    spread = section(render([user("go"), *bash("t", "pytest -q", "2 passed"), *edit("e", "/x/a.py", "x"), *bash("l", "ruff check", "ok"), *edit("f", "/x/b.py", "y")]), 9)
    assert "(2 file(s) changed since: /x/b.py, /x/a.py)" in spread


def test_an_error_nothing_changed_after_comes_before_the_re_run_and_one_changed_after_after_it() -> None:
    lint = [*bash("l", "ruff check", "ok"), *edit("e", "/x/a.py", "x")]
    untouched = section(render([user("go"), *lint, *bash("m", "make", "error: boom")]), 9)
    assert untouched.index('Fix "error: boom"') < untouched.index("re-run `ruff check` (")
    touched = section(render([user("go"), *bash("m", "make", "error: boom"), *lint]), 9)
    assert touched.index("Re-run `make`, `ruff check` (") < touched.index('fix "error: boom"')


def test_the_current_item_is_closed_and_committed_as_earlier_ones_were() -> None:
    start = [user("go"), *bash("u", "bd update p-1.2 --status in_progress", "ok")]
    closed = [*bash("c", "bd close p-1.1", "ok")]
    commit = [*bash("g", "git commit -m x", "[m 1234567] x")]
    both = section(render([*closed, *commit, *start]), 9)
    assert "Finish the tracker item p-1.2, then close it (bd close p-1.2, as the session closed p-1.1), commit, close the parent p-1 if all its children are closed." in both
    no_commit = section(render([*closed, *start]), 9)
    assert "then close it (bd close p-1.2, as the session closed p-1.1), close the parent p-1" in no_commit
    parent_closed = section(render([*bash("c0", "bd close p-1", "ok"), *closed, *start]), 9)
    assert "as the session closed p-1.1)." in parent_closed and "parent" not in parent_closed
    no_parent = section(render([*closed, user("go"), *bash("u", "bd update p2 --status in_progress", "ok")]), 9)
    assert "then close it (bd close p2, as the session closed p-1.1)." in no_parent
    never_closed = section(render(start), 9)
    assert "Finish the tracker item p-1.2, and close it." in never_closed
    failed_close = section(render([*bash("c", "bd close p-1.1", "Error: no such issue", error=True), *start]), 9)
    assert "and close it." in failed_close


def test_git_state_when_no_git_ran() -> None:
    changed = section(render([user("go"), *edit("e", "/x/a.py", "x"), *write("w", "/x/b.py", "y")]), 5)
    assert "   - No git command ran in this part; the 2 changed file(s) of section 3 are presumably uncommitted (check git status)." in changed
    git_ran = section(render([user("go"), *edit("e", "/x/a.py", "x"), *bash("s", "git status", "clean")]), 5)
    assert "No git command ran" not in git_ran
    nothing_changed = section(render([user("go"), *read("r", "/x/a.py")]), 5)
    assert "No git command ran" not in nothing_changed


STATUS_TEXT = (
    "     1→# Status\n     2→## Next steps\n     3→- [ ] Test the skills\n     4→- [x] Next: done already\n"
    "     5→* [ ] Phase 3: BMAD\n     6→The opener works.\n     7→**Nächster Schritt:** neu starten\n     8→Still pending: docs"
)


def test_open_items_of_a_status_file() -> None:
    assert open_items(STATUS_TEXT) == ("## Next steps", "[ ] Test the skills", "[ ] Phase 3: BMAD", "**Nächster Schritt:** neu starten", "Still pending: docs")
    many = "\n".join(f"- [ ] step {n}" for n in range(STATUS_ITEMS + 1))
    assert open_items(many)[-1] == f"[ ] step {STATUS_ITEMS - 1}"


@pytest.mark.parametrize(
    ("path", "status"),
    [("/p/STATUS.md", True), ("/p/SESSION_STATUS.md", True), ("/p/todo.txt", True), ("/p/docs/ROADMAP.md", True),
     ("/p/CHECKPOINT-2.md", True), ("/home/u/.claude/plans/effervescent-tide.md", True), ("/p/plan.md", True),
     ("/p/status.py", False), ("/p/explanation.md", False), ("/p/README.md", False)],
)  # fmt: skip
def test_which_files_are_status_or_plan_files(path: str, status: bool) -> None:
    assert bool(STATUS_FILE.search(path)) is status


def test_a_status_file_is_kept_at_its_latest_read() -> None:
    first = read("r1", "/p/STATUS.md", STATUS_TEXT)
    handover = read_handover([*first, *read("x", "/p/a.py", "- [ ] not a status file")])
    assert [(s.path, s.open_items[1]) for s in handover.status_files] == [("/p/STATUS.md", "[ ] Test the skills")]
    assert read_handover([*first, *read("r2", "/p/STATUS.md", "- [x] all done")]).status_files == []
    failed = [use("r", "Read", file_path="/p/STATUS.md"), result("r", "- [ ] x", error=True)]
    assert read_handover(failed).status_files == []
    order = read_handover([*first, *read("r2", "/p/TODO.md", "- [ ] b"), *read("r3", "/p/STATUS.md", "- [ ] c")])
    assert [s.path for s in order.status_files] == ["/p/TODO.md", "/p/STATUS.md"]


def test_status_files_in_pending_tasks_and_the_next_step() -> None:
    messages = [user("go"), *read("r", "/p/STATUS.md", STATUS_TEXT), says("All done.")]
    seven = section(render(messages), 7)
    assert "   Still open in /p/STATUS.md, as the agent read it (0 tool call(s) ago):\n   - ## Next steps\n   - [ ] Test the skills\n" in seven
    assert "Still open" not in section(render(messages, replace(RICH, details=False)), 7)
    nine = section(render(messages), 9)
    assert "   Next: What /p/STATUS.md lists as still open: [ ] Test the skills; [ ] Phase 3: BMAD;" in nine
    assert "## Next" not in nine
    assert "may have finished the latest request" in nine  # the plan comes after this part's work
    many = [m for n in range(STATUS_FILES_SHOWN + 1) for m in read(f"r{n}", f"/p/s{n}/STATUS.md", f"- [ ] item {n}")]
    shown = section(render([user("go"), *many]), 9)
    assert "item 0" not in shown and f"item {STATUS_FILES_SHOWN}" in shown


def test_the_previous_summary_s_next_step_follows_this_part_s_actions() -> None:
    previous = (
        "This session is being continued from a previous conversation.\nSummary:\n7. Pending Tasks:\n   - x\n"
        "9. Optional Next Step:\n   Next: Phase 2: test UOCS.\n   The agent's last stated intention (1 tool call(s) ago): a\n"
        "   Continue with the latest request (section 1) from there."
    )
    nine = section(render([user(previous), user("go"), *edit("e", "/p/a.py", "x"), *bash("t", "pytest", "1 passed"), *edit("f", "/p/b.py", "y")]), 9)
    assert nine.index("Re-run `pytest`") < nine.index(
        '   - the previous summary\'s next step (the larger plan; this part may have done some of it): "Next: Phase 2: test UOCS."\n'
    )
    assert "stated intention (1" not in nine


def test_the_latest_searches_with_what_they_found() -> None:
    grep_tool = [use("g", "Grep", pattern="agent-[a-z]", path="/x/fixtures/sub.jsonl"), result("g", "No matches found")]
    glob_tool = [use("o", "Glob", pattern="**/*.ex"), result("o", "Found 20 files\n/x/a.ex")]
    messages = [
        user("go"),
        *grep_tool,
        *glob_tool,
        *bash("r", "rg -n render lib", "lib/a.ex:3: render(x)\nlib/b.ex:9: render(y)"),
        *bash("f", "find /x -name '*.md'", ""),
        *bash("c", "grep -c x a.txt", "7"),
        *bash("l", "ls /x", "a\nb"),
    ]
    eight = section(render(messages), 8)
    assert "   What the latest searches found (newest last):\n" in eight
    assert "   - Grep `agent-[a-z]`" not in eight  # only the latest SEARCHES_SHOWN
    assert "   - Glob `**/*.ex`: Found 20 files\n" in eight
    assert "   - `rg -n render lib`: 2 line(s), the first: lib/a.ex:3: render(x)\n" in eight
    assert "   - `find /x -name '*.md'`: no match\n" in eight
    assert "   - `grep -c x a.txt`: 7\n" in eight
    assert "ls /x`:" not in eight
    one = section(render([user("go"), *grep_tool]), 8)
    assert "   - Grep `agent-[a-z]` in /x/fixtures/sub.jsonl: no match\n" in one
    failed = section(render([user("go"), *bash("e", "grep -r x /nope", "grep: /nope: No such file", error=True)]), 8)
    assert "   - `grep -r x /nope`: failed: grep: /nope: No such file\n" in failed
    assert "latest searches" not in section(render(messages, replace(RICH, details=False)), 8)
    unanswered = section(render([user("go"), use("g", "Grep", pattern="p")]), 8)
    assert "latest searches" not in unanswered
    assert SEARCHES_SHOWN == 4


def test_the_last_command_of_each_program_and_script_that_made_something() -> None:
    messages = [
        user("go"),
        *bash("s1", "cd /v && nohup bun run server.ts > a.log 2>&1 &", "ok"),
        *bash("g", "bun run gen.ts --output a.png", "saved"),
        *bash("s2", "# restart\ncd /v && nohup bun run server.ts >> b.log 2>&1 &", "ok"),
        *bash("bad", "bun run other.ts --output x.png", "error: no key", error=True),
        *bash("t", "pytest -q", "1 passed"),
    ]
    handover = read_handover(messages)
    assert [segment for _, segment in handover.made] == ["bun run gen.ts --output a.png", "nohup bun run server.ts >> b.log 2>&1 &"]
    eight = section(render(messages), 8)
    assert (
        "   Commands that made or started something (the last of each program and script):\n"
        "   - `bun run gen.ts --output a.png` (3 tool call(s) ago)\n"
        "   - `nohup bun run server.ts >> b.log 2>&1 &` (2 tool call(s) ago)\n"
    ) in eight
    assert "made or started" not in section(render(messages, replace(RICH, details=False)), 8)
    many = [m for n in range(MADE_SHOWN + 1) for m in bash(f"m{n}", f"bun run g{n}.ts --output {n}.png", "ok")]
    shown = section(render([user("go"), *many], replace(RICH, recent_chars=0)), 8)
    assert "g0.ts" not in shown and f"g{MADE_SHOWN}.ts" in shown
    long = section(render(bash("p", 'bun run g.ts --prompt "' + "w" * 100 + '" --output z.png', "ok")), 8)
    assert '--prompt "' + "w" * 60 + '…[40 chars]" --output z.png`' in long


def test_the_step_the_agent_was_last_on_moves_the_next_step_on() -> None:
    ask = user("Secure the current voice server setup as a fallback solution so nothing gets lost, then try the Ottie voice on the server.")
    on_it = [ask, says("Now I document the existing setup as fallback:"), *write("w", "/x/backup.md", "x")]
    nine = section(render(on_it), 9)
    assert (
        '   Next: The latest request\'s next step: "try the Ottie voice on the server" (the agent was last on step 1, '
        '"Secure the current voice server setup as a fallback solution so nothing gets lost": "Now I document the existing setup as fallback:", then 1 file change(s); check it is done).'
    ) in nine
    handover = read_handover(on_it)
    assert handover.step_on == (0, "Now I document the existing setup as fallback:", 1)
    no_change = [ask, says("Now I document the existing setup as fallback:"), *read("r", "/x/a.md")]
    assert read_handover(no_change).step_on is None
    assert "in this order" in section(render(no_change), 9)
    short_word = [ask, says("Now the setup is safe:"), *write("w", "/x/b.md", "x")]  # "setup": 5 letters
    assert read_handover(short_word).step_on is None
    before = [says("I keep a fallback."), ask, *write("w", "/x/b.md", "x")]
    assert read_handover(before).step_on is None
    last_step = [ask, says("Switching the server now."), *write("w", "/x/c.md", "x")]  # names both
    assert read_handover(last_step).step_on == (1, "Switching the server now.", 1)
    assert not any(step.reported for step in read_handover(last_step).request_steps)
    assert "was last on" not in section(render(last_step), 9) and "in this order" in section(render(last_step), 9)
    three = user("Secure the current voice server setup as a fallback solution so nothing gets lost, then try the Ottie voice, then record a sample clip.")
    first_of_three = section(render([three, says("Writing the fallback notes."), *write("w", "/x/d.md", "x")]), 9)
    assert 'Then:\n   - the latest request\'s next step: "record a sample clip"' in first_of_three


def test_env_files_give_their_key_names_never_values() -> None:
    messages = [
        *read("r", "/p/.env", "     1→A_KEY=secret-value\n     2→export B_TOKEN=x\n     3→# COMMENT=no\n     4→lower=x"),
        *bash("g", "grep -E '^GOOGLE_API_KEY=' ~/.claude/.env | cut -d'=' -f1", "GOOGLE_API_KEY"),
        *bash("l", "cat /p/.env.local", "C_URL=http://x"),
        *bash("rc", "cat /p/.envrc", "D_KEY=1"),
        *bash("f", "cat /p/other/.env", "E_KEY=1", error=True),
        *bash("n", "cat /p/empty/.env", "nothing here"),
    ]
    handover = read_handover(messages)
    assert handover.env_keys == {"/p/.env": ["A_KEY", "B_TOKEN"], "~/.claude/.env": ["GOOGLE_API_KEY"], "/p/.env.local": ["C_URL"]}
    two = section(render(messages), 2)
    assert "   - Keys in /p/.env (names only): A_KEY, B_TOKEN\n" in two and "secret-value" not in two
    assert "   - Keys in ~/.claude/.env (names only): GOOGLE_API_KEY" in two
    many = "\n".join(f"K{n:02d}_KEY=v" for n in range(ENV_KEYS_SHOWN + 2))
    capped = section(render(read("r", "/p/.env", many)), 2)
    assert f"K{ENV_KEYS_SHOWN - 1:02d}_KEY (2 more)" in capped and f"K{ENV_KEYS_SHOWN:02d}_KEY" not in capped


def test_the_next_step_names_the_line_saying_what_failed_not_a_banner() -> None:
    failure = (
        "============================= test session starts ==============================\n"
        "FAILED tests/test_link.py::test_link - AssertionError: no link"
    )
    nine = section(render([user("fix the link"), *bash("t", "pytest -q", failure, error=True)]), 9)
    assert 'Next: Fix "FAILED tests/test_link.py::test_link - AssertionError: no link", which Bash' in nine
