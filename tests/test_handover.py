"""Reading a conversation for a hand-over: requests, task state, git, checks, errors with what
followed them, the agent's own words and plan, the files written."""

from __future__ import annotations

from typing import Any

from conversation import bash, edit, read, result, says, use, user, write

from unbounded.compaction.carried import render_latest, render_standing
from unbounded.compaction.handover import (
    IN_PROGRESS,
    TRIED_CALLS,
    mentioned_paths,
    plan_runs,
    push_target,
    read_handover,
    writes_whole_file,
    written_code,
)

NOTIFICATION = (
    "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
    "<summary>Background command finished</summary>\n</task-notification>"
)


# -- requests, carried blocks, instruction files ---------------------------------------------


def test_requests_notifications_and_instruction_files() -> None:
    reminder = "<system-reminder>\nInstructions from /repo/lib/CLAUDE.md:\nUse tabs.\n</system-reminder>"
    codex = "# AGENTS.md instructions for /repo\n\nBe brief."
    messages: list[Any] = [
        user("Fix the parser. Never push to main."),
        says("On it."),
        user(NOTIFICATION),
        user(reminder),
        user(codex),
        user(reminder),
        user("<command-name>/review</command-name>\n<command-args>src</command-args>"),
    ]
    handover = read_handover(messages)
    assert [r.text for r in handover.requests] == ["Fix the parser. Never push to main.", "/review src"]
    assert [n.task_id for n in handover.notifications] == ["b1"]
    assert handover.instruction_files == ["/repo/lib/CLAUDE.md", "/repo"]
    assert handover.standing == ["Never push to main."]
    assert handover.latest_request_text == "/review src"
    assert handover.request_items == []


def test_a_previous_summary_is_carried_not_read_as_a_request() -> None:
    previous = "\n".join(
        [
            "This session continues an earlier conversation that ran out of context.",
            "Summary:",
            *render_standing(["Always run the linter first."], "   "),
            *render_latest("Port the CLI to Typer.", "   "),
        ]
    )
    as_block = {"role": "user", "content": [{"type": "text", "text": previous}]}
    for first in (user(previous), as_block):
        handover = read_handover([first, says("Continuing.")])
        assert handover.requests == [] and handover.previous_summaries == [previous]
        assert handover.carried_latest == "Port the CLI to Typer."
        assert handover.latest_request_text == "Port the CLI to Typer."
        assert handover.standing == ["Always run the linter first."]
        assert handover.facts.user_prompts == ()
    later = read_handover([user(previous), user("Now add tests, and never skip the slow ones.")])
    assert later.latest_request_text == "Now add tests, and never skip the slow ones."
    assert later.standing == ["Always run the linter first.", "Now add tests, and never skip the slow ones."]
    mixed = {"role": "user", "content": [{"type": "text", "text": previous}, {"type": "text", "text": "go on"}]}
    assert [r.text for r in read_handover([mixed]).requests] == ["go on"]


def test_the_latest_request_lists_its_items() -> None:
    handover = read_handover([user("Do this: 1) fix test_3 2) fix test_9 3) rerun all")])
    assert handover.request_items == ["fix test_3", "fix test_9", "rerun all"]
    assert read_handover([user("- only one item")]).request_items == []


# -- calls, failures and errors --------------------------------------------------------------


def test_calls_pair_with_results_and_failures_are_read_from_output() -> None:
    messages: list[Any] = [
        user("build"),
        *bash("b1", "mix compile 2>&1 | tail -5", "error: undefined function foo/0\n  lib/a.ex:3"),
        *bash("b2", "tail server.log", "error: old crash"),
        *read("r1", "/repo/big.txt", "File too large", error=True),
        use("p", "Bash", command="sleep 100"),
    ]
    handover = read_handover(messages)
    compile_, log, big, pending = handover.calls
    assert compile_.is_error is False and compile_.failed and compile_.failure.startswith("error: undefined")
    assert compile_.result_position > compile_.position
    assert not log.failed and log.result == "error: old crash"
    assert big.is_error is True and big.failure == "File too large"
    assert pending.is_error is None and pending.result_position == 0 and not pending.failed


def test_an_error_is_fixed_by_a_later_success_at_the_same_thing() -> None:
    messages: list[Any] = [
        user("make it pass"),
        *bash("b1", "pytest tests/test_a.py -q", "1 failed, 3 passed"),
        says("The fixture is missing because conftest.py was renamed. Next I restore it."),
        *edit("e1", "/repo/tests/conftest.py", "import pytest"),
        *bash("b2", "pytest -q", "4 passed"),
        *edit("e2", "/repo/a.py", "x", error=True, output="old_string not found"),
        *edit("e3", "/repo/a.py", "y"),
        *read("r1", "/repo/huge.md", "too large", error=True),
        *read("r2", "/repo/huge.md", "1→text"),
        use("s1", "Skill", skill="commit"),
        result("s1", "fatal: bad revision", error=True),
        *bash("b3", "git push", "rejected", error=True),
        *bash("b4", "git push --force-with-lease", "main -> main"),
        *bash("b5", "ruff check src", "Found 2 errors."),
    ]
    handover = read_handover(messages)
    records = {r.call.tool_id: r for r in handover.errors}
    assert list(records) == ["b1", "e2", "r1", "s1", "b3", "b5"]
    assert records["b1"].resolved_by is not None and records["b1"].resolved_by.tool_id == "b2"  # same program
    assert records["b1"].reading.startswith("The fixture is missing")
    assert [c.tool_id for c in records["b1"].tried] == ["e1"]
    assert records["e2"].resolved_by is not None and records["e2"].resolved_by.tool_id == "e3"  # same file
    assert records["r1"].resolved_by is not None and records["r1"].resolved_by.tool_id == "r2"
    assert records["s1"].resolved_by is None  # nothing later did the same thing
    assert records["b3"].resolved_by is not None and records["b3"].resolved_by.tool_id == "b4"
    assert records["b5"].resolved_by is None and records["b5"].reading == ""
    assert [e.call.tool_id for e in handover.unresolved_errors] == ["s1", "b5"]
    assert [e.call.tool_id for e in handover.resolved_errors] == ["b1", "e2", "r1", "b3"]


def test_a_later_call_without_a_result_or_failing_again_fixes_nothing() -> None:
    messages: list[Any] = [
        *bash("b1", "make", "error: one"),
        *bash("b2", "make", "error: two"),
        use("b3", "Bash", command="make"),
    ]
    records = read_handover(messages).errors
    assert [(r.call.tool_id, r.resolved_by) for r in records] == [("b1", None), ("b2", None)]
    assert [c.tool_id for c in records[0].tried] == ["b2", "b3"]


def test_what_was_tried_is_capped_and_the_reading_is_the_text_before_the_next_call() -> None:
    messages: list[Any] = [*bash("b0", "make", "error: x")]
    for n in range(TRIED_CALLS + 2):
        messages += edit(f"e{n}", f"/repo/f{n}.c", "y")
    handover = read_handover(messages)
    assert len(handover.errors[0].tried) == TRIED_CALLS and handover.errors[0].reading == ""
    late = read_handover([*bash("b0", "make", "error: x"), *read("r", "/a"), says("Too late to be a reading.")])
    assert late.errors[0].reading == ""
    tool_keys = read_handover(
        [use("t1", "Mystery", q=1), result("t1", "bad", error=True), use("t2", "Mystery", q=1), result("t2", "ok")]
    )
    assert tool_keys.errors[0].resolved_by is not None


# -- task state ------------------------------------------------------------------------------


def test_todo_list_and_tracker_items() -> None:
    messages: list[Any] = [
        user("work the epic"),
        use("t1", "TodoWrite", todos=[{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]),
        result("t1", "ok"),
        *bash("c1", "bd show app-1", "○ app-1 · Build the parser   [● P1 · OPEN]\nDESCRIPTION\nOutput: src/parser.py"),
        *bash("c2", "bd update app-1 --status in_progress", "✓ Updated"),
        *bash("c3", "bd update app-2 --status=in_progress", "✓ Updated"),
        *bash("c4", "bd close app-2", "✓ Closed"),
        *bash("c5", "bd create app-3 --title x", "✓ Created"),
        *bash("c6", "bd reopen app-4", "✓ Reopened"),
        *bash("c7", "bd update app-5 --status in_progress", "no such issue", error=True),
        *bash("c8", "gh issue view 12", "title: Crash on start"),
        *bash("c9", "gh issue close 13", "closed"),
        *bash("c10", "bd update app-6 --priority 1", "✓ Updated"),
        use("t2", "TodoWrite", todos=["plain item"]),
        result("t2", "ok"),
    ]
    handover = read_handover(messages)
    assert handover.todos == [{"content": "plain item"}]
    states = {i.id: (i.state, i.title) for i in handover.tracker_items}
    assert states == {
        "app-1": (IN_PROGRESS, "Build the parser"),
        "app-2": ("closed", ""),
        "app-3": ("created", ""),
        "app-4": ("open", ""),
        "12": ("seen", ""),
        "13": ("closed", ""),
        "app-6": ("seen", ""),
    }
    app1 = handover.tracker_items[0]
    assert app1.spec.startswith("○ app-1") and app1.started == handover.calls[2].position
    assert handover.current_task is app1
    assert [c.tool_id for c in handover.tracker] == [f"c{n}" for n in range(1, 11)]
    assert handover.work_start == app1.started


def test_task_tools_are_a_tracker_too() -> None:
    messages: list[Any] = [
        user("plan it"),
        use("t1", "TaskCreate", subject="Write the parser", description="Parse the config"),
        result("t1", "Task #1 created successfully"),
        use("t2", "TaskCreate", subject="Test it", description=""),
        result("t2", "created"),
        use("t3", "TaskUpdate", taskId="1", status="in_progress", subject="Write the config parser"),
        result("t3", "Updated"),
        use("t4", "TaskUpdate", taskId="2", status="completed"),
        result("t4", "Updated"),
        use("t5", "TaskUpdate", status="completed"),
        result("t5", "no id"),
    ]
    handover = read_handover(messages)
    items = [(i.id, i.state, i.title, i.spec) for i in handover.tracker_items]
    assert items == [("1", IN_PROGRESS, "Write the config parser", "Parse the config"), ("2", "completed", "Test it", "")]
    assert handover.current_task is not None and handover.current_task.id == "1"
    assert len(handover.tracker) == 5


def test_the_current_task_is_the_last_one_started() -> None:
    messages: list[Any] = [
        user("go"),
        *bash("c1", "bd update a-1 --status in_progress", "ok"),
        *bash("c2", "bd update a-2 --status in_progress", "ok"),
        *bash("c3", "bd update a-1 --status in_progress", "ok"),
    ]
    assert read_handover(messages).current_task.id == "a-1"  # type: ignore[union-attr]
    assert read_handover([user("go")]).current_task is None
    assert read_handover([user("go")]).work_start == 1


# -- git and checks ---------------------------------------------------------------------------


def test_commits_pushes_status_and_what_changed_after_the_last_commit() -> None:
    messages: list[Any] = [
        user("ship it"),
        *bash("g0", "git checkout -b feat-x", "Switched to a new branch 'feat-x'"),
        *edit("e1", "/r/a.py", "a = 1"),
        *bash("g1", 'git add a.py && git commit -m "feat: a"', "[feat-x 1a2b3c4] feat: a\n 1 file changed, 1 insertion(+)"),
        *bash("g2", "git commit -m again", "nothing added", error=True),
        *bash("g3", "git push -u origin feat-x", "To github.com:o/r.git\n * [new branch]      feat-x -> feat-x"),
        *edit("e2", "/r/b.py", "b = 2"),
        *bash("g4", "git status", "On branch feat-y\nChanges not staged for commit:\n\tmodified:   b.py"),
        *bash("g5", "git diff --stat", "fatal: bad", error=True),
        *edit("e3", "/r/c.py", "c = 3"),
    ]
    handover = read_handover(messages)
    assert [(c.sha, c.message, c.stat) for _, c in handover.commits] == [("1a2b3c4", "feat: a", "1 file changed, 1 insertion(+)")]
    assert handover.last_commit is not None and handover.last_commit[0].tool_id == "g1"
    assert [p.tool_id for p in handover.pushes] == ["g3"] and push_target(handover.pushes[0]) == "* [new branch]      feat-x -> feat-x"
    assert handover.git_status is not None and handover.git_status.tool_id == "g4"
    assert handover.branch == "feat-y"  # the latest word on it
    assert handover.written_after(handover.last_commit[0].position) == ["/r/c.py", "/r/b.py"]
    assert push_target(handover.calls[0]) == ""
    only_branch = read_handover(bash("g", "git switch -c topic", "Switched"))
    assert only_branch.branch == "topic" and only_branch.commits == []
    failed_branch = read_handover(bash("g", "git checkout -b topic", "fatal: exists", error=True))
    assert failed_branch.branch is None


def test_the_last_run_of_each_check_and_what_came_after_it() -> None:
    messages: list[Any] = [
        *bash("t1", "mix test", "3 tests, 1 failure"),
        *bash("c1", "mix compile", ""),
        *edit("e1", "/r/a.ex", "x"),
        *bash("t2", "mix test test/a_test.exs", "3 tests, 0 failures"),
        *edit("e2", "/r/b.ex", "y"),
        *edit("e3", "/r/b.ex", "z"),
        *bash("i1", "npm install x", "added 1 package"),
        use("t3", "Bash", command="mix test"),
    ]
    handover = read_handover(messages)
    checks = [(c.key, c.call.tool_id, c.outcome, c.writes_after) for c in handover.checks]
    assert checks == [("mix compile", "c1", "(no output)", 3), ("mix test", "t2", "3 tests, 0 failures", 2)]
    failing = read_handover(bash("t", "pytest -q", "FAILED test_a.py::x\n1 failed"))
    assert failing.checks[0].outcome == "FAILED test_a.py::x" and failing.checks[0].call.failed


# -- the agent's own words -------------------------------------------------------------------


def test_decisions_and_the_stated_next_step() -> None:
    messages: list[Any] = [
        user("speed it up"),
        says("I used a dict instead of a list because lookups dominate. Short one because."),
        says("I used a dict instead of a list because lookups dominate."),
        says("Next I will profile the loader module. Done for now."),
        says("Let me check."),
        says("All good here, nothing more to say."),
    ]
    handover = read_handover(messages)
    assert handover.decisions == ["I used a dict instead of a list because lookups dominate."]
    assert handover.next_step is not None
    assert handover.next_step[1] == "Next I will profile the loader module."
    assert handover.next_step[0] == 4
    assert handover.last_event_is_answer


def test_plan_runs_are_numbered_lists_with_their_intro() -> None:
    text = (
        "Done so far:\n1. parsed\n2. stored\n\nNext:\n1. **Parser** - split lines\n"
        "   - handle tabs\n2. update app.js\n\nThen\n3. stray three\n1. only one\nText after."
    )
    assert plan_runs(text) == [("Done so far:", ["parsed", "stored"]), ("Next:", ["**Parser** - split lines", "update app.js"])]
    assert plan_runs("Plan:\n1. a\n2. b") == [("Plan:", ["a", "b"])]
    assert plan_runs("1. a\n3. b") == []
    assert plan_runs("Steps:\n1. a\n2. b\n1. c\n2. d") == [("Steps:", ["a", "b"]), ("Steps:", ["c", "d"])]


def test_the_plan_is_the_latest_list_about_what_comes_next_with_the_files_changed_since() -> None:
    plan = (
        "Now I have the picture. I'll update:\n\n1. **TranscriptComputers** - filter\n"
        "2. **SessionLive** - add events\n3. `assets/app.js` - merge hooks\n4. run_checks for the rest\n"
        "5. think about it"
    )
    messages: list[Any] = [
        user("continue"),
        says("Done:\n1. a\n2. b"),
        says(plan),
        *write("w1", "/r/lib/transcript_computers.ex", "defmodule X do end"),
        *edit("e1", "/r/assets/app.js", "hook()"),
        *edit("e2", "/r/lib/run_checks.py", "x", error=True, output="failed"),
    ]
    handover = read_handover(messages)
    assert handover.plan is not None and handover.plan.intro == "Now I have the picture. I'll update:"
    assert handover.plan.position == 3
    marks = [(i.names_files, i.changed) for i in handover.plan.items]
    assert marks == [
        (True, ("/r/assets/app.js", "/r/lib/transcript_computers.ex")[1:]),
        (True, ()),
        (True, ("/r/assets/app.js",)),
        (True, ()),  # its file's only write failed
        (False, ()),
    ]
    before_request = read_handover([says("Next:\n1. a.py\n2. b.py"), user("something else")])
    assert before_request.plan is None
    german = read_handover([user("los"), says("Als nächstes:\n1. Stimme testen\n2. Doku schreiben")])
    assert german.plan is not None and [i.text for i in german.plan.items] == ["Stimme testen", "Doku schreiben"]


# -- files ------------------------------------------------------------------------------------


def test_files_written_newest_first_with_their_definitions() -> None:
    messages: list[Any] = [
        *write("w1", "/r/a.py", "import os\n\ndef load(path):\n    pass\n\nclass Store:\n    pass\n"),
        *edit("e1", "/r/b.ts", "export const start = async () => 1\nexport function stop() {}\nfunction helper() {}"),
        *edit("e2", "/r/a.py", "async def save(self):\n    pass\ndef load(path):"),
        *edit("e3", "/r/c.css", ".row { color: red }\n#panel .x { }\nbody { }"),
        *edit("e4", "/r/d.ex", "defp go(x), do: x\ndefmodule D.E do", error=True, output="no match"),
        use("m1", "MultiEdit", file_path="/r/e.rs", edits=[{"old_string": "a", "new_string": "pub fn one() {}"}, {"old_string": "b", "new_string": "pub(crate) fn two() {}"}]),
        result("m1", "ok"),
    ]
    handover = read_handover(messages)
    assert [c.path for c in handover.changes] == ["/r/e.rs", "/r/c.css", "/r/a.py", "/r/b.ts"]
    by_path = {c.path: c for c in handover.changes}
    assert by_path["/r/a.py"].definitions == ["save", "load", "Store"]
    assert by_path["/r/a.py"].created and not by_path["/r/b.ts"].created
    assert [c.tool_id for c in by_path["/r/a.py"].calls] == ["w1", "e2"] and by_path["/r/a.py"].last.tool_id == "e2"
    assert by_path["/r/b.ts"].definitions == ["start", "stop", "helper"]
    assert by_path["/r/c.css"].definitions == [".row", "#panel"]
    assert by_path["/r/e.rs"].definitions == ["one", "two"]


def test_written_code_and_whole_file_writes() -> None:
    def block(**tool_input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": "x", "name": "Tool", "input": tool_input}

    assert written_code(block(new_string="a", content="b")) == "a"
    assert written_code(block(file_text="f")) == "f" and writes_whole_file(block(file_text="f"))
    assert written_code(block(edits=[{"new_string": "1"}, "junk", {"new_string": "  "}, {"new_str": "2"}])) == "1\n2"
    assert written_code({"input": "not a mapping"}) == "" and not writes_whole_file({"input": []})
    assert not writes_whole_file(block(new_string="a"))
    assert writes_whole_file(block(content=""))


def test_mentioned_paths() -> None:
    assert mentioned_paths("edit lib/a.ex and ./b.py, see https://x.io/c.html or app.js") == ["lib/a.ex", "./b.py", "app.js"]


def test_facts_leave_out_what_is_not_a_request() -> None:
    messages: list[Any] = [
        user("<command-name>/review</command-name>"),
        {"role": "user", "content": [{"type": "text", "text": "<command-name>/x</command-name>"}, {"type": "text", "text": "Template body of the command"}, {"type": "text", "text": "Real question here"}]},
        user(NOTIFICATION),
        says("ok"),
    ]
    handover = read_handover(messages)
    assert handover.facts.user_prompts == ("Real question here",)
    assert handover.tokens > 0 and handover.messages == 4


def test_the_placeholder_before_a_conversation_that_starts_with_a_reply_is_no_request() -> None:
    from unbounded.model.normalize import MISSING_START_TEXT

    handover = read_handover([user(MISSING_START_TEXT), says("Resuming the export.")])
    assert handover.requests == [] and handover.latest_request_text is None
