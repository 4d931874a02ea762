"""The extractive summary's parts, at their edges: the working directory it names, a long
file's outline, an edit in one line, what of a previous summary it carries, git, the agent's
latest words, excerpts' limits, and how it shrinks to its budget."""

from __future__ import annotations

from dataclasses import fields

from conversation import bash, edit, read, says, user, write

from unbounded.compaction.extractive import (
    _LEVELS,
    CUT_ORDER,
    RECENT_TEXT_CHARS,
    _cut_to_fit,
    _Cuts,
    _edit_summary,
    _newest_within,
    _outline,
    _Renderer,
    _root,
    carried_sections,
    extractive_summary,
    lean_summary_tokens,
)
from unbounded.compaction.handover import read_handover
from unbounded.tokens.estimate import rough_token_count

PREVIOUS = "This session continues an earlier conversation that ran out of context."


def _written(*paths: str) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [user("go")]
    for number, path in enumerate(paths):
        messages.extend(write(f"w{number}", path, "x = 1\n"))
    return messages


def test_two_paths_in_different_folders_have_no_working_directory() -> None:
    # Each of two folders holds one path of two: not two thirds, so neither is the root.
    apart = read_handover(_written("/w/p/a/x/f1.py", "/w/p/b/y/f2.py"))
    assert _root(apart) == ""
    # Two of three paths in one folder are two thirds: that folder is the root.
    together = read_handover(_written("/w/p/a/x/f1.py", "/w/p/b/y/f2.py", "/w/p/b/z/f3.py"))
    assert _root(together) == "/w/p/b"


CODE = "\n".join(
    ["x0 = 0", "x1 = 1", "x2 = 2", "x3 = 3", "def f4():", "    pass", "def f6():", "    pass", "def f8():", "    pass"]
)
HEAD = ["x0 = 0", "x1 = 1", "x2 = 2", "x3 = 3"]


def test_an_outline_stops_at_its_line_limit_and_marks_each_gap() -> None:
    # f4 follows the head at once (no gap), f6 one line later (a gap), f8 is past the limit.
    assert _outline(CODE, max_lines=7, max_chars=10_000) == [
        *HEAD,
        "   5: def f4():",
        "     …",
        "   7: def f6():",
        "… (3 more lines)",
    ]


def test_an_outline_fills_its_characters_exactly() -> None:
    # The head takes 4 * 7 characters (a newline each), f4 16: f6's 15 reach 59 exactly.
    assert _outline(CODE, max_lines=100, max_chars=59) == [
        *HEAD,
        "   5: def f4():",
        "     …",
        "   7: def f6():",
        "… (3 more lines)",
    ]
    assert _outline(CODE, max_lines=100, max_chars=58) == [*HEAD, "   5: def f4():", "… (5 more lines)"]


def test_an_edit_is_told_by_the_first_line_it_replaced() -> None:
    messages = [user("go"), *edit("e1", "/w/app.py", "new = 1", old="first = 1\n\nsecond = 2")]
    (change,) = read_handover(messages).changes
    assert _edit_summary(change) == '2 line(s) from "first = 1" → 1 line(s), the new code:'


def test_an_item_that_fits_the_last_character_is_kept() -> None:
    # Newest first: "ab" leaves one character, which the empty oldest item still fits in.
    assert _newest_within([[""], ["ab"]], 4) == ["", "ab"]
    assert _newest_within([[""], ["ab"]], 3) == ["ab"]


def _previous(sections: dict[int, list[str]]) -> str:
    titles = {1: "Primary Request and Intent", 2: "Key Technical Concepts", 3: "Files and Code Sections"}
    titles |= {4: "Errors and fixes", 5: "Problem Solving", 7: "Pending Tasks", 8: "Current Work"}
    titles |= {9: "Optional Next Step"}
    lines = [PREVIOUS, "Summary:"]
    for number, title in sorted(titles.items()):
        lines.append(f"{number}. {title}:")
        lines.extend(sections.get(number, []))
    return "\n".join(lines)


def test_a_section_takes_all_the_others_leave_and_not_one_character_more() -> None:
    # Of 100 characters section 2 has 20 and needs 5, the empty ones (4, 3, 5) 30 + 20 + 10:
    # 75 spare, so section 7 (20 of its own) carries 95 characters.
    # 7 items of 12 characters (13 with the newline) are 91; an oldest of 3 fits 95 exactly.
    newest = [f"- task {n:02}..." for n in range(7)]
    exact = carried_sections(_previous({2: ["- ab"], 7: ["- t", *newest]}), 100)
    assert exact[7] == ["- t", *newest]
    over = carried_sections(_previous({2: ["- ab"], 7: ["- tt", *newest]}), 100)
    assert over[7] == newest
    assert exact[2] == over[2] == ["- ab"]


def test_the_newest_previous_summary_is_carried() -> None:
    older = _previous(
        {1: ["The old intent: port to Rust."], 3: ["- notes-old.md: the old plan"], 9: ["build the Rust crate"]}
    )
    newer = _previous(
        {1: ["The new intent: port to Go."], 3: ["- notes-new.md: the new plan"], 9: ["deploy the Go build"]}
    )
    messages = [user(older), says("Continuing."), user(newer), says("Continuing.")]
    messages += [*read("r1", "/w/app.py"), user("Carry on.")]
    text = extractive_summary(messages)
    assert "The new intent: port to Go." in text and "notes-new.md: the new plan" in text
    assert "The old intent" not in text and "notes-old.md" not in text
    assert '"deploy the Go build"' in text and "build the Rust crate" not in text


def test_a_push_after_the_last_commit_is_a_push_whatever_came_before() -> None:
    commit = [*bash("p1", "git push", "a -> b"), *bash("g", "git commit -m x", "[m 1234567] x")]
    assert "No push recorded after the last commit" in extractive_summary([user("go"), *commit])
    pushed = [user("go"), *commit, *bash("p2", "git push", "b -> c")]
    assert "No push recorded" not in extractive_summary(pushed)


def test_the_latest_words_show_every_line_in_order() -> None:
    report = "The parser is rewritten.\nThe old cache is gone.\nThe docs still need a page."
    text = extractive_summary([user("Rewrite the parser."), *read("r1", "/w/app.py"), says(report)])
    assert (
        "   - The agent: The parser is rewritten.\n"
        "     The old cache is gone.\n"
        "     The docs still need a page.\n"
    ) in text


def test_a_long_one_line_message_is_cut_not_dropped() -> None:
    # One line longer than a step's text may be (1,200): its start is quoted, cut to the
    # budget with an ellipsis; nothing of it is left out whole.
    line = "The migration ran and " + " ".join(f"table{n} moved" for n in range(300))
    text = extractive_summary([user("Migrate the tables."), *read("r1", "/w/db.py"), says(line)])
    budget = RECENT_TEXT_CHARS
    assert f"   - The agent: {line[:budget]}…\n" in text
    assert "(1 more lines)" not in text


def test_a_finding_in_the_last_report_before_the_request_is_not_listed_twice() -> None:
    finding = "The parser module contains 3 entry points for the old API."
    report = finding + "\n" + "\n".join(f"Detail {n} of the report goes on here at length." for n in range(10))
    messages = [user("Look at the tests."), says(report), user("Now fix the parser."), says("On it.")]
    text = extractive_summary(messages)
    assert "The agent's message this request answers (its words, right before it):" in text
    # Its sentences are findings, shown once: in the quote, not again in the findings list.
    assert text.count(finding) == 1
    assert "Findings and results the agent stated earlier" not in text



def test_a_git_status_excerpt_holds_sixty_characters_a_line() -> None:
    # Ten lines in 600 characters, a newline each: 9 * 60 + 60 fit, 9 * 60 + 61 do not.
    nine = ["s" * 59] * 9
    fits = extractive_summary([user("go"), *bash("s", "git status", "\n".join([*nine, "t" * 60]))])
    assert "s" * 59 + "\n       " + "t" * 60 + "\n" in fits
    over = extractive_summary([user("go"), *bash("s", "git status", "\n".join([*nine, "t" * 61]))])
    assert "s" * 59 + "\n       … (1 more lines)\n" in over


def test_a_summary_held_to_no_share_of_the_conversation_is_the_lean_level() -> None:
    messages: list[dict[str, object]] = [user("Port the module.")]
    for n in range(30):
        messages += read(f"r{n}", f"/w/src/mod{n:02}.py")
        if n % 3 == 0:
            messages += edit(f"e{n}", f"/w/src/mod{n:02}.py", f"y = {n}")
            messages.append(user(f"Now request number {n}, please."))
    renderer = _Renderer(read_handover(messages), up_to=False)
    lean = renderer.render(_LEVELS[-1], _Cuts())
    richer = renderer.render(_LEVELS[-2], _Cuts())
    assert richer != lean
    # The lean level (its last steps take the room the budget leaves).
    held = extractive_summary(messages, target_ratio=0.0, min_tokens=0)
    assert held.split("8. Current Work:")[0] == lean.split("8. Current Work:")[0]
    assert richer.split("8. Current Work:")[0] != lean.split("8. Current Work:")[0]


def test_the_barest_summary_cuts_every_long_list_to_nothing() -> None:
    spec = "○ imp-2 · Port the module   [● P1 · OPEN]\nSteps:\n- move the parser\n- move the writer"
    messages: list[dict[str, object]] = [user("Port the module."), *bash("t0", "bd show imp-2", spec)]
    messages += bash("t1", "bd update imp-2 --status in_progress", "✓ Updated issue: imp-2")
    for n in range(12):
        messages += edit(f"e{n}", f"/w/src/mod{n:02}.py", f"y = {n}")
        failure = f"FAILED tests/test_{n}.py::test_case - AssertionError: {n}"
        messages += bash(f"f{n}", f"pytest tests/test_{n}.py", failure, error=True)
        messages += bash(f"p{n}", f"pytest tests/test_{n}.py", "1 passed")
        messages.append(user(f"Now request number {n}, please."))
    renderer = _Renderer(read_handover(messages), up_to=False)
    bare = renderer.render(_LEVELS[-1], _Cuts(files=0, earlier=0, prompts=0, errors=0, spec_lines=0, recent=0, answered=0))
    assert rough_token_count(bare) < rough_token_count(renderer.render(_LEVELS[-1], _Cuts()))
    assert lean_summary_tokens(messages) == rough_token_count(bare)

TASK = "○ imp-2 · Port the module   [● P1 · OPEN]"


def _task_spec_lines(second: str) -> str:
    spec = f"{TASK}\n{second}\nlast"
    messages = [user("Port the module."), *bash("t0", "bd show imp-2", spec)]
    messages += bash("t1", "bd update imp-2 --status in_progress", "✓ Updated issue: imp-2")
    text = _Renderer(read_handover(messages), up_to=False).render(_LEVELS[0], _Cuts(spec_lines=2))
    return text.split("asks for (its tracker entry):\n", 1)[1].split("\n\n", 1)[0]



def test_a_task_s_spec_keeps_a_hundred_characters_a_line() -> None:
    # Two lines in 200 characters, the first with its newline: the second fits to the last one.
    fits = "x" * (200 - len(TASK) - 1)
    assert _task_spec_lines(fits) == f"     {TASK}\n     {fits}\n     … (1 more lines)"
    assert _task_spec_lines(fits + "x") == f"     {TASK}\n     … (2 more lines)"


EMPTIED = {"files": 0, "earlier": 0, "carried": 0, "errors": 0, "fixed_errors": 0, "spec_lines": 0, "recent": 0, "answered": 0}
"""Every list but the user's prompts cut away: what `_cut_to_fit` does before it cuts them."""


def _prompts_cut_to(count: int, fit: int) -> str:
    """The lean summary of `count` requests cut to fit the tokens it takes with `fit` shown
    (and the lists cut before the prompts cut away)."""
    messages = [user(f"Request number {n} asks for one more small change.") for n in range(count)]
    renderer = _Renderer(read_handover(messages), up_to=False)
    limit = rough_token_count(renderer.render(_LEVELS[-1], _Cuts(prompts=fit, **EMPTIED)))
    return _cut_to_fit(renderer, _LEVELS[-1], limit)


def test_the_cut_order_names_every_list_once() -> None:
    names = [name for group in CUT_ORDER for name in group]
    assert sorted(names) == sorted(f.name for f in fields(_Cuts))
    assert CUT_ORDER[-1] == ("prompts",)


def test_the_user_s_prompts_are_cut_after_the_longer_file_list() -> None:
    # Twelve requests and twelve files written: the file list is cut away before one prompt
    # goes, though the prompts are the longer list (a cut by length took them first).
    messages: list[dict[str, object]] = []
    for n in range(12):
        messages.append(user(f"Request number {n} asks for one more small change."))
        messages.extend(write(f"w{n}", f"/w/p/pkg/module_{n}.py", f"value_{n} = {n}\n"))
    renderer = _Renderer(read_handover(messages), up_to=False)
    limit = rough_token_count(renderer.render(_LEVELS[-1], _Cuts(**EMPTIED)))
    text = _cut_to_fit(renderer, _LEVELS[-1], limit)
    assert rough_token_count(text) <= limit
    users = text.split("6. All user messages:")[1].split("7. Pending Tasks:")[0]
    assert "more)" not in users
    assert all(f"Request number {n} asks" in users for n in range(12))
    assert "module_0.py" not in text.split("3. Files and Code Sections:")[1].split("4. ")[0]


def test_a_list_too_long_is_cut_by_an_eighth_at_least_one_item_a_step() -> None:
    # 17 requests lose (17 - 1) // 8 = 2 at the first step, 9 lose 1: so 16 or 8 shown fit
    # the limit yet the cut shows 15 and 8.
    assert "(2 more)" in _prompts_cut_to(17, 16)
    assert "(1 more)" in _prompts_cut_to(9, 8)


def test_the_files_are_cut_before_the_unresolved_errors() -> None:
    # Three unresolved errors, twelve files: a limit that fits the errors once every file is
    # cut away keeps all three (the files go first), though the errors list is the longer.
    messages: list[dict[str, object]] = [user("build the package")]
    for n in range(3):
        output = f"FAILED tests/test_{n}.py::test_x - assert {n} == 9\n1 failed"
        messages += bash(f"t{n}", f"pytest tests/test_{n}.py -q", output, error=True)
    messages.append(user("go on"))
    for n in range(12):
        messages += write(f"w{n}", f"/w/app/pkg/module_{n}.py", f"def f{n}():\n    return {n}\n")
    renderer = _Renderer(read_handover(messages), up_to=False)
    emptied = {**EMPTIED, "errors": None, "prompts": None}
    limit = rough_token_count(renderer.render(_LEVELS[-1], _Cuts(**emptied)))
    text = _cut_to_fit(renderer, _LEVELS[-1], limit)
    errors = text.split("4. Errors and fixes:")[1].split("\n5. ")[0]
    assert all(f"tests/test_{n}.py" in errors for n in range(3))
    assert "module_" not in text.split("3. Files and Code Sections:")[1].split("4. ")[0]


def test_a_fixed_error_is_cut_before_the_files() -> None:
    messages: list[dict[str, object]] = [user("build the package")]
    messages += bash("t0", "pytest -q", "FAILED tests/test_a.py::test_x - assert 1 == 9", error=True)
    messages += bash("t1", "pytest -q", "1 passed")
    for n in range(12):
        messages += write(f"w{n}", f"/w/app/pkg/module_{n}.py", f"def f{n}():\n    return {n}\n")
    renderer = _Renderer(read_handover(messages), up_to=False)
    first = {"spec_lines": 0, "recent": 0, "fixed_errors": 0}
    limit = rough_token_count(renderer.render(_LEVELS[-1], _Cuts(**first)))
    text = _cut_to_fit(renderer, _LEVELS[-1], limit)
    assert "Fixed:" not in text.split("4. Errors and fixes:")[1].split("\n5. ")[0]
    assert "module_11.py" in text.split("3. Files and Code Sections:")[1].split("4. ")[0]
