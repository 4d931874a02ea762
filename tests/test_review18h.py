"""Review rev18h: bugs found in the merged i38h work on the offline hand-over (error
headlines, folder layouts, read definitions), each pinned as a strict xfail until it is fixed.
Those marked "regression" gave the right answer at 9dee2a7."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from conversation import bash, read, says, user, write

from unbounded.compaction.command_results import failure_headline
from unbounded.compaction.extractive import (
    _LEVELS,
    _cut_to_fit,
    _Cuts,
    _Renderer,
    definition_body,
    read_definitions,
)
from unbounded.compaction.handover import definition_lines, read_handover
from unbounded.compaction.recorded_files import RecordedFile, recorded_files
from unbounded.model.entries import Entry

RICH = _LEVELS[0]
LEAN = _LEVELS[-1]


def _numbered(code: str) -> str:
    """Code as a read tool numbers it (`     3→line`)."""
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(code.split("\n"), 1))


def _files(messages: Sequence[dict[str, Any]], level: Any = RICH) -> str:
    """Section 3 of the hand-over of `messages` at `level`."""
    text = _Renderer(read_handover(messages), up_to=False).render(level, _Cuts())
    return text.split("3. Files and Code Sections:")[1].split("\n4. ")[0]


def _next_step(messages: Sequence[dict[str, Any]]) -> str:
    """Section 9 of the hand-over of `messages` at the lean level."""
    text = _Renderer(read_handover(messages), up_to=False).render(LEAN, _Cuts())
    return text.split("9. Optional Next Step:")[1]


# --- failure_headline ----------------------------------------------------------------------

GO_TEST = "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got 1 want 2\nFAIL\nFAIL\texample.com/m\t0.002s\nFAIL"
RUFF = "src/a.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n[*] 1 fixable with the `--fix` option."
TSC = "src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n\nFound 1 error in src/a.ts:3\n"
CHAINED = (
    "Traceback (most recent call last):\n  File \"app.py\", line 2, in <module>\n    d['x']\nKeyError: 'x'\n\n"
    "During handling of the above exception, another exception occurred:\n\n"
    'Traceback (most recent call last):\n  File "app.py", line 4, in <module>\n'
    "    raise ValueError('config missing x')\nValueError: config missing x"
)


def test_go_test_headline_names_the_failed_test() -> None:
    assert failure_headline(GO_TEST) == "--- FAIL: TestParse (0.00s)"


def test_ruff_headline_names_the_rule_line_not_the_count() -> None:
    assert "F401" in failure_headline(RUFF)


def test_tsc_headline_names_the_type_error_not_the_count() -> None:
    assert "TS2322" in failure_headline(TSC)


def test_the_next_step_names_the_lint_error_to_fix() -> None:
    messages = [user("make the checks pass"), *bash("b1", "ruff check src", RUFF, error=True)]
    assert "F401" in _next_step(messages)


def test_a_chained_traceback_s_headline_is_the_exception_raised_last() -> None:
    assert failure_headline(CHAINED) == "ValueError: config missing x"


# --- folder layouts ------------------------------------------------------------------------

TREE = ".\n├── package.json\n├── src\n│   ├── index.js\n│   └── util.js\n└── test\n    └── index.test.js\n\n2 directories, 4 files"


def test_tree_with_an_ignore_pattern_keeps_the_top_level_names() -> None:
    files = _files([user("tidy"), *bash("b1", "tree -I node_modules", TREE)])
    assert "package.json" in files


def test_fd_s_extension_names_no_folder() -> None:
    files = _files([user("tidy"), *bash("b1", "fd -e py", "a.py\nb.py\nc.py")])
    assert "py/:" not in files
    assert "a.py, b.py, c.py" in files


def test_ls_of_two_folders_puts_each_name_in_its_folder() -> None:
    output = "src:\na.py\nb.py\n\ntests:\ntest_a.py\ntest_b.py"
    files = _files([user("tidy"), *bash("b1", "ls src tests", output)])
    assert "src/: a.py, b.py\n" in files
    assert "test_a.py" not in files.split("src/:")[1].split("\n")[0]


def test_ls_after_cd_lists_the_folder_changed_to() -> None:
    files = _files([user("tidy"), *bash("b1", "cd src && ls", "a.py\nb.py\nc.py")])
    assert "./: a.py" not in files
    assert "src/: a.py, b.py, c.py" in files


def test_a_folder_removed_after_its_listing_shows_no_layout() -> None:
    messages = [
        user("clean the build"),
        *bash("b1", "ls build", "app.js\nvendor.js"),
        *bash("b2", "rm -rf build", ""),
    ]
    assert "build/: app.js" not in _files(messages)


def test_a_cut_braced_line_still_names_what_the_folders_hold() -> None:
    output = "\n".join(f"./pkg/sub_{n}/__init__.py" for n in range(500))
    files = _files([user("go"), *bash("b1", "find . -type f", output)], LEAN)
    assert "__init__.py" in files


# --- read definitions ----------------------------------------------------------------------


def test_an_env_file_s_values_are_not_shown_by_its_definitions() -> None:
    env = _numbered(
        "export API_KEY=sk-live-abc\nfunction load_env() {\n  export DB_URL=postgres://u:hunter2@h/db\n}"
    )
    messages = [
        user("set up the keys"),
        *read("r1", "/w/app/.env.sh", env),
        says("`load_env` sets DB_URL."),
    ]
    text = _Renderer(read_handover(messages), up_to=False).render(RICH, _Cuts())
    assert "Keys in /w/app/.env.sh (names only)" in text
    assert "hunter2" not in text


def test_an_env_file_s_values_are_not_quoted_by_the_last_steps() -> None:
    messages = [
        user("set up the keys"),
        *bash("b1", "cat .env", "API_KEY=sk-live-abc\nDB_URL=postgres://u:hunter2@h/db"),
        *bash("b2", "grep DB .env.local", "DB_URL=postgres://u:pw3@h/db"),
    ]
    text = _Renderer(read_handover(messages), up_to=False).render(RICH, _Cuts())
    assert "Keys in .env (names only): API_KEY, DB_URL" in text
    assert not any(value in text for value in ("sk-live-abc", "hunter2", "pw3"))


def test_the_named_definition_is_shown_for_the_file_the_agent_named() -> None:
    a = _numbered("def load(path):\n    return open(path).read()\n\ndef keep():\n    pass")
    b = _numbered("def load(path):\n    return json.load(open(path))\n\ndef other():\n    pass")
    messages = [
        user("fix load in b.py"),
        *read("r1", "/w/app/a.py", a),
        *read("r2", "/w/app/b.py", b),
        says("The bug is in `load` of b.py: it must close the file."),
    ]
    files = _files(messages)
    assert "json.load(open(path))" in files
    assert "return open(path).read()" not in files


def test_a_definition_named_with_its_file_and_another_is_shown() -> None:
    b = _numbered("def load(path):\n    return json.load(open(path))\n\ndef other():\n    pass")
    messages = [
        user("fix load"),
        *read("r1", "/w/app/a.py", _numbered("x = 1")),
        *read("r2", "/w/app/b.py", b),
        says("`load` of b.py must close the file as a.py does."),
    ]
    assert "json.load(open(path))" in _files(messages)


def test_a_file_deleted_after_its_read_shows_no_definitions() -> None:
    code = _numbered("def load(path):\n    return open(path).read()\n\ndef keep():\n    pass")
    messages = [
        user("clean up"),
        *read("r1", "/w/app/legacy.py", code),
        says("`load` is unused; I'll delete legacy.py."),
        *bash("b1", "git rm legacy.py", "rm 'legacy.py'"),
        says("Deleted."),
    ]
    assert "legacy.py as last read" not in _files(messages)


NESTED = "class Store:\n    def save(self):\n        return 1\n\nclass Other:\n    def save(self):\n        return 2"


def test_a_method_named_with_its_class_is_that_class_s() -> None:
    name, body = definition_body(_numbered(NESTED), ["Now `Other.save` must return 3."], 15, 900)
    assert name == "save"
    assert any("return 2" in line for line in body)


def test_a_name_asked_about_is_matched() -> None:
    code = _numbered("def load_rows(path):\n    return []\n\ndef other():\n    pass")
    name, _ = definition_body(
        code, ["Why does it return nothing, is the bug in load_rows?"], 15, 900
    )
    assert name == "load_rows"


def test_a_brand_name_in_prose_names_no_definition() -> None:
    code = _numbered("class GitHub:\n    token = 1\n\n    def get(self):\n        return 2")
    name, _ = definition_body(
        code, ["I pushed the branch to GitHub and opened a pull request."], 15, 900
    )
    assert name == ""


def test_a_camel_case_method_named_through_its_object_is_matched() -> None:
    code = _numbered("class Store:\n    def loadRows(self):\n        return []")
    name, _ = definition_body(code, ["The rows come from self.loadRows, which is empty."], 15, 900)
    assert name == "loadRows"


def test_a_named_definition_s_body_keeps_its_decorators() -> None:
    code = _numbered(
        "import x\n\n@app.route('/save')\n@login_required\ndef save(req):\n    return 1\n\ndef other():\n    pass"
    )
    _, body = definition_body(code, ["I'll change `save`."], 15, 900)
    assert any("@login_required" in line for line in body)


GO_METHODS = "package m\n\ntype Store struct{}\n\nfunc (s *Store) Save(x int) error {\n\treturn nil\n}\n\nfunc (s *Store) Load() int {\n\treturn 1\n}"


def test_a_go_file_s_methods_are_listed() -> None:
    shown = read_definitions(_numbered(GO_METHODS), frozenset(), 8)
    assert any("Save" in line for line in shown)


JS_CLASS = (
    "export class Store {\n  save(x) {\n    return 1;\n  }\n\n  load() {\n    return 2;\n  }\n}"
)


def test_a_js_method_the_agent_named_is_shown() -> None:
    name, _ = definition_body(_numbered(JS_CLASS), ["`load()` returns the wrong value."], 15, 900)
    assert name == "load"


def test_a_js_block_s_control_words_are_no_methods() -> None:
    code = "class A {\n  run(x) {\n    if (x) {\n      for (const y of x) {\n      }\n    }\n  }\n}"
    assert definition_lines(code) == [0, 1]


def test_the_lean_level_s_layout_stays_within_its_room() -> None:
    """Not a bug: a huge listing stays within the lean level's layout room (kept as a guard)."""
    output = "\n".join(f"a_very_long_module_name_number_{n}.py" for n in range(10_000))
    level = replace(LEAN, listings=1)
    files = _files([user("go"), *bash("b1", "ls src", output)], level)
    assert len(files) < 2 * level.layout_chars


def test_a_command_s_words_name_no_definition() -> None:
    code = _numbered("def build(target):\n    return 1\n\ndef clean():\n    pass")
    name, _ = definition_body(
        code, ["Next I will run `npm run build` to check the bundle."], 15, 900
    )
    assert name == ""


def test_build_output_folders_are_left_out_of_the_layout() -> None:
    output = "\n".join(
        ["./Cargo.toml", "./src/main.rs", "./src/lib.rs"]
        + [f"./target/release/build/foo-{n:08x}/output" for n in range(20)]
        + [f"./.next/static/chunks/{n}.js" for n in range(20)]
    )
    files = _files([user("go"), *bash("b1", "find . -type f", output)])
    assert "src/: main.rs, lib.rs" in files
    assert ".next/" not in files
    assert "target/" not in files


def test_a_long_listing_with_iso_dates_gives_its_names() -> None:
    output = (
        "total 8\n"
        "drwxr-xr-x 2 me staff 4096 2025-01-01 12:00 components\n"
        "-rw-r--r-- 1 me staff  512 2025-01-01 12:00 app.py\n"
        "-rw-r--r-- 1 me staff  128 2025-01-01 12:00 README.md"
    )
    files = _files([user("tidy"), *bash("b1", "ls -l --time-style=long-iso", output)])
    assert "./: components/, app.py, README.md" in files


SIGNATURES = _numbered(
    "def load(path):\n    return 1\n\ndef save(path, text) -> None:\n    pass\n\ndef close():\n    pass"
)


def test_a_definition_counts_as_named_by_its_own_name_only() -> None:
    # The conversation said `None`: no definition defines it, so the file's order holds.
    assert read_definitions(SIGNATURES, frozenset({"None"}), 1)[0] == "    1: def load(path):"


# --- recorded files: a ranged read of a known file -----------------------------------------


def _shell_read(call_id: str, command: str, output: str) -> list[Entry]:
    """A Codex shell call and its JSON envelope reply (exit code 0)."""
    use = Entry.assistant(
        [{"type": "tool_use", "id": call_id, "name": "shell", "input": {"command": command}}]
    )
    envelope = json.dumps({"output": output, "metadata": {"exit_code": 0}})
    return [use, Entry.user([{"type": "tool_result", "tool_use_id": call_id, "content": envelope}])]


KNOWN = 'LIMIT = 10\nNAME = "x"\n'


def test_a_range_read_showing_a_changed_line_is_not_taken_for_the_known_text() -> None:
    entries = [
        *_shell_read("s1", "cat m.py", KNOWN),
        *_shell_read("s2", "sed -n '1p' m.py", "LIMIT = 1\n"),
    ]
    assert recorded_files(entries)["m.py"] == RecordedFile("LIMIT = 1\n", partial=True)


def test_a_sed_range_showing_a_line_moved_is_not_taken_for_the_known_text() -> None:
    entries = [
        *_shell_read("s1", "cat m.py", KNOWN),
        *_shell_read("s2", "sed -n '2p' m.py", "LIMIT = 10\n"),
    ]
    assert recorded_files(entries)["m.py"] == RecordedFile("LIMIT = 10\n", partial=True)


# --- cut order -----------------------------------------------------------------------------


def test_cutting_to_fit_keeps_the_unresolved_errors_before_the_files() -> None:
    messages: list[dict[str, Any]] = [user("build the package")]
    for n in range(3):
        output = f"FAILED tests/test_{n}.py::test_x - assert {n} == 9\n1 failed"
        messages += bash(f"t{n}", f"pytest tests/test_{n}.py -q", output, error=True)
    messages.append(user("go on"))
    for n in range(12):
        messages += write(f"w{n}", f"/w/app/pkg/module_{n}.py", f"def f{n}():\n    return {n}\n")
    text = _cut_to_fit(_Renderer(read_handover(messages), up_to=False), LEAN, 600)
    errors = text.split("4. Errors and fixes:")[1].split("\n5. ")[0]
    assert all(f"tests/test_{n}.py" in errors for n in range(3))
